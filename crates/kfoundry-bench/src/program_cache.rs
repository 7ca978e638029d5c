//! Program binaries kept on disk across runs, so that a re-tune, a kernel of the same template
//! at another shape (the same source and options) or a probe does not pay the compiler again.
//!
//! An entry is keyed by the SHA-256 of this crate's version, the device's build identity
//! ([`Session::build_identity`]: platform, device and driver versions), the build options and
//! the exact text given to the compiler; it holds the driver's binary and the SHA-256 of that
//! binary, checked when it is read. Entries are written to a temporary file and renamed, so
//! that concurrent tunes never read half an entry; the oldest are deleted beyond
//! `MAX_ENTRIES`.
//!
//! A binary read from here is trusted for the search only: nothing on disk proves that it is
//! what its source compiles to (a compiler that reads its environment, a file written by
//! someone else). The evaluator never uses one for a finalist's proof or its re-measurement
//! ([`super::Bench`] is sealed then), so what ships is always what its source builds to.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use kfoundry_rt::model::source_policy;
use kfoundry_rt::opencl::session::Session;

/// Entries kept; beyond this the least recently used are deleted when a cache is opened.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// The first bytes of an entry.
const MAGIC: &[u8; 8] = b"KFPROG1\n";

/// Largest entry read (a driver's binary of the largest kernels is a few megabytes).
pub const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// The environment variable that names kfoundry's cache folder.
pub(crate) const DIR_ENV: &str = "KFOUNDRY_CACHE_DIR";

/// kfoundry's cache folder (program binaries, the tuning database): `$KFOUNDRY_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/kfoundry`, else `~/.cache/kfoundry`; `None` when none of those is
/// set.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("kfoundry"))
}

/// Where program binaries are kept by default: `programs` in `cache_dir`.
pub fn default_dir() -> Option<PathBuf> {
    cache_dir().map(|d| d.join("programs"))
}

/// The program binaries of one device, in one folder.
pub(crate) struct ProgramCache {
    dir: PathBuf,
    identity: String,
}

impl ProgramCache {
    /// The cache in `dir` for the device of `session`; `None` (no cache, every build from
    /// source) when the folder cannot be made or the device does not say who it is.
    pub fn open(dir: &Path, session: &Session) -> Option<ProgramCache> {
        let identity = session.build_identity().ok()?;
        std::fs::create_dir_all(dir).ok()?;
        let cache = ProgramCache {
            dir: dir.to_path_buf(),
            identity,
        };
        cache.trim(MAX_ENTRIES);
        Some(cache)
    }

    /// The key of `program` (the text given to the compiler) built with `options`; `None`
    /// for a text that may include files, however it spells the include (what they hold is
    /// not in the key; [`source_policy::reads_files`]).
    pub fn key(&self, program: &str, options: &str) -> Option<String> {
        if source_policy::reads_files(program) {
            return None;
        }
        let mut hash = Sha256::new();
        for part in [
            "kfoundry program cache 1",
            env!("CARGO_PKG_VERSION"),
            &self.identity,
            options,
            program,
        ] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        Some(hex(&hash.finalize()))
    }

    pub(crate) fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.bin"))
    }

    /// Whether an entry for `key` is there (not read: [`ProgramCache::load`] checks it).
    pub fn has(&self, key: &str) -> bool {
        std::fs::symlink_metadata(self.path(key)).is_ok_and(|m| m.is_file())
    }

    /// The binary kept under `key`, when there is one and it is whole (an entry that is not is
    /// deleted, and so is anything else at its place: a link, a FIFO, a file larger than
    /// [`MAX_ENTRY_BYTES`], none of which is read). Reading it marks it recently used.
    pub fn load(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.path(key);
        // Never through a link: the cache writes files only.
        if !std::fs::symlink_metadata(&path).ok()?.is_file() {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        let bytes = match kfoundry_tooling::files::read_bounded(
            &path,
            MAX_ENTRY_BYTES,
            "a program cache entry",
        ) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return None,
            Err(_) => {
                let _ = std::fs::remove_file(&path);
                return None;
            }
        };
        match unpack(&bytes) {
            Some(binary) => {
                if let Ok(file) = std::fs::File::options().append(true).open(&path) {
                    let _ = file.set_modified(std::time::SystemTime::now());
                }
                Some(binary.to_vec())
            }
            None => {
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps `binary` under `key`. Failures (a full disk, a folder that went away) are
    /// ignored: the cache only saves time.
    pub fn store(&self, key: &str, binary: &[u8]) {
        if binary.is_empty() {
            return;
        }
        let temp = self.dir.join(format!(".{key}.{}.tmp", std::process::id()));
        // Created anew: never written through what was left at its name (a FIFO would block).
        let _ = std::fs::remove_file(&temp);
        let created = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&temp);
        let written = created.and_then(|mut file| {
            file.write_all(MAGIC)?;
            file.write_all(&Sha256::digest(binary))?;
            file.write_all(binary)
        });
        if written.is_err() || std::fs::rename(&temp, self.path(key)).is_err() {
            let _ = std::fs::remove_file(&temp);
        }
    }

    /// Deletes the least recently used entries beyond `keep`.
    fn trim(&self, keep: usize) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "bin"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if files.len() <= keep {
            return;
        }
        files.sort();
        for (_, path) in &files[..files.len() - keep] {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The binary of an entry's bytes, when they are one whole entry.
fn unpack(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < 32 {
        return None;
    }
    let (sum, binary) = rest.split_at(32);
    (!binary.is_empty() && Sha256::digest(binary).as_slice() == sum).then_some(binary)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> ProgramCache {
        std::fs::create_dir_all(dir).unwrap();
        ProgramCache {
            dir: dir.to_path_buf(),
            identity: "platform\ndevice".into(),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kfoundry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn keys_differ_by_every_part_and_not_otherwise() {
        let dir = temp_dir("cache-keys");
        let a = cache(&dir);
        let mut b = cache(&dir);
        b.identity = "platform\nother driver".into();
        let k = a.key("kernel", "-DX=1").unwrap();
        assert_eq!(a.key("kernel", "-DX=1").unwrap(), k);
        assert_ne!(a.key("kernel", "-DX=2").unwrap(), k);
        assert_ne!(a.key("kernel ", "-DX=1").unwrap(), k);
        assert_ne!(b.key("kernel", "-DX=1").unwrap(), k);
        // The parts are length-prefixed: moving a character from one to the next changes it.
        assert_ne!(
            a.key("Xkernel", "-DX=").unwrap(),
            a.key("kernel", "-DX=X").unwrap()
        );
        assert!(a.key("#include \"x.h\"\nkernel", "").is_none());
        // however the include is spelled (I13); one in a comment or `#if 0` reads nothing
        for spelled in [
            "%:include \"x.h\"\nkernel",
            "#inc\\\nlude \"x.h\"\nkernel",
            "/* */#include \"x.h\"\nkernel",
            "// c\r#include \"x.h\"\nkernel",
        ] {
            assert!(a.key(spelled, "").is_none(), "{spelled:?}");
        }
        assert!(a
            .key(
                "// #include \"x.h\"\n#if 0\n#include \"x.h\"\n#endif\nkernel",
                ""
            )
            .is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn entries_round_trip_and_damaged_ones_are_dropped() {
        let dir = temp_dir("cache-entries");
        let c = cache(&dir);
        let key = c.key("kernel", "").unwrap();
        assert_eq!(c.load(&key), None);
        c.store(&key, b"binary bytes");
        assert!(c.has(&key));
        assert_eq!(c.load(&key).as_deref(), Some(&b"binary bytes"[..]));
        // One byte changed: the checksum no longer holds, the entry is deleted.
        let path = c.path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(c.load(&key), None);
        assert!(!c.has(&key));
        // A truncated entry too.
        c.store(&key, b"binary bytes");
        std::fs::write(&path, &std::fs::read(&path).unwrap()[..20]).unwrap();
        assert_eq!(c.load(&key), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO or a link to `/dev/zero` in an entry's place: not read (no wait, no memory),
    /// removed, and the entry is built again (D1, D2).
    #[cfg(unix)]
    #[test]
    fn entries_that_are_not_regular_files_are_dropped_at_once() {
        let dir = temp_dir("cache-special");
        let c = cache(&dir);
        let fifo = c.key("fifo kernel", "").unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(c.path(&fifo))
            .status()
            .unwrap()
            .success());
        let zero = c.key("zero kernel", "").unwrap();
        std::os::unix::fs::symlink("/dev/zero", c.path(&zero)).unwrap();
        let started = std::time::Instant::now();
        assert!(!c.has(&fifo) && !c.has(&zero));
        assert_eq!(c.load(&fifo), None);
        assert_eq!(c.load(&zero), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(std::fs::symlink_metadata(c.path(&fifo)).is_err());
        assert!(std::fs::symlink_metadata(c.path(&zero)).is_err());
        c.store(&zero, b"binary");
        assert_eq!(c.load(&zero).as_deref(), Some(&b"binary"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn trimming_keeps_the_most_recently_used() {
        let dir = temp_dir("cache-trim");
        let c = cache(&dir);
        let keys: Vec<String> = (0..4)
            .map(|i| c.key(&format!("kernel {i}"), "").unwrap())
            .collect();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for (i, key) in keys.iter().enumerate() {
            c.store(key, b"binary");
            let file = std::fs::File::options()
                .append(true)
                .open(c.path(key))
                .unwrap();
            file.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        // Reading the oldest makes it the newest.
        assert!(c.load(&keys[0]).is_some());
        c.trim(2);
        let kept: Vec<bool> = keys.iter().map(|k| c.has(k)).collect();
        assert_eq!(kept, [true, false, false, true]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
