//! File-system helpers shared by everything kfoundry writes: atomic replacement that keeps
//! the file's permissions, and the one place where kernel ids, workload names and device keys
//! become file names.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Temporary files of an interrupted write older than this are removed by the next write.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, fsync,
/// then rename, so a reader (or a crash) sees the old file or the new one, never a torn one.
///
/// - An existing file keeps its permissions; a new one gets the process's default (as
///   `File::create` would: `0666` less the umask on Unix).
/// - An existing file without write permission is not replaced: that is an error
///   (`PermissionDenied`) rather than a silent replacement by rename.
/// - Temporary files that an interrupted earlier write left beside `path` (older than a
///   minute) are removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let existing = match std::fs::metadata(path) {
        Ok(m) if m.permissions().readonly() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} is read-only; make it writable to let kfoundry replace it",
                    path.display()
                ),
            ))
        }
        Ok(m) => Some(m.permissions()),
        Err(_) => None,
    };
    remove_stale_temps(dir, &name);
    let (tmp_path, mut tmp) = create_temp(dir, &name)?;
    let result = (|| {
        tmp.write_all(bytes)?;
        if let Some(perms) = existing {
            tmp.set_permissions(perms)?;
        }
        tmp.sync_all()?;
        drop(tmp);
        std::fs::rename(&tmp_path, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

/// Creates `path` with `bytes` unless something already exists there, atomically: no reader
/// ever sees it half-written and an existing file is never replaced. `Ok(true)` when created.
pub fn create_new_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp_path, mut tmp) = create_temp(dir, &name)?;
    let written = tmp.write_all(bytes).and_then(|()| tmp.sync_all());
    drop(tmp);
    // A hard link fails when the target exists: the whole file appears at once, or not at all.
    let result = written.and_then(|()| match std::fs::hard_link(&tmp_path, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    });
    let _ = std::fs::remove_file(&tmp_path);
    result
}

/// A new file `.<name>.<pid>-<n>.tmp` in `dir`, created exclusively (with the default mode).
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Whether `entry` is a temporary file of a write of `name`: `.<name>.<pid>-<n>.tmp`. (The
/// `.<name>.XXXXXX` names of earlier versions are left alone: a user's `.Kfoundry.lock.backup`
/// looks the same.)
fn is_temp_of(entry: &str, name: &str) -> bool {
    let Some(rest) = entry
        .strip_prefix('.')
        .and_then(|e| e.strip_prefix(name))
        .and_then(|e| e.strip_prefix('.'))
    else {
        return false;
    };
    rest.strip_suffix(".tmp")
        .and_then(|r| r.split_once('-'))
        .is_some_and(|(pid, n)| {
            !pid.is_empty()
                && pid.chars().all(|c| c.is_ascii_digit())
                && !n.is_empty()
                && n.chars().all(|c| c.is_ascii_digit())
        })
}

/// Removes temporary files of earlier, interrupted writes of `name` in `dir`.
fn remove_stale_temps(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        if !is_temp_of(&file_name.to_string_lossy(), name) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_TEMP_AGE));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `text` as a file-name component: ASCII letters, digits, `_` and `-` kept, every other
/// character replaced by `_` (`pkg::Kernel` → `pkg__Kernel`). Every file name kfoundry builds
/// from a kernel id, workload name or device key goes through here, so none can contain a
/// path separator or `..`.
pub fn safe_name(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// A file name made of `parts` joined by `@`, then `extension`: each part through
/// [`safe_name`], and one that it changed followed by a hash of the original, so that two
/// different ids (`a.b` and `a:b`) never share a log, checkpoint or history file.
pub fn state_file_name(parts: &[&str], extension: &str) -> String {
    let joined: Vec<String> = parts
        .iter()
        .map(|p| {
            let safe = safe_name(p);
            if safe == *p {
                safe
            } else {
                use sha2::Digest as _;
                let digest = sha2::Sha256::digest(p.as_bytes());
                let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
                format!("{safe}-{hex}")
            }
        })
        .collect();
    format!("{}.{extension}", joined.join("@"))
}

/// Why a file could not be read within its bounds.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a regular file ({kind}); {what} must be a file")]
    NotAFile {
        path: PathBuf,
        kind: &'static str,
        what: &'static str,
    },
    #[error("{path} is larger than {limit} bytes, more than a {what} can be; it was not read")]
    TooLarge {
        path: PathBuf,
        limit: u64,
        what: &'static str,
    },
}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Reads `path` (`what` it is, for messages) if it is a regular file of at most `limit` bytes.
/// A FIFO, a device (`/dev/zero`), a socket or a directory is refused before anything is read
/// (a symbolic link is followed, and what it points to must be a regular file), and so is a
/// file that grows past the limit while it is read: nothing kfoundry reads can hang it or
/// fill its memory.
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
    use std::io::Read as _;
    let io = |source: std::io::Error| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let kind_of = |m: &std::fs::Metadata| -> Option<&'static str> {
        let t = m.file_type();
        if t.is_file() {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt as _;
            if t.is_fifo() {
                return Some("a FIFO");
            }
            if t.is_char_device() || t.is_block_device() {
                return Some("a device");
            }
            if t.is_socket() {
                return Some("a socket");
            }
        }
        Some(if t.is_dir() {
            "a directory"
        } else {
            "not a file"
        })
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(ReadError::NotAFile {
            path: path.to_path_buf(),
            kind,
            what,
        });
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        // Should the path have become a FIFO since, opening it does not wait for a writer.
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc_o_nonblock());
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(ReadError::NotAFile {
            path: path.to_path_buf(),
            kind,
            what,
        });
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            limit,
            what,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            limit,
            what,
        });
    }
    Ok(bytes)
}

/// [`read_bounded`] of a text file (UTF-8).
pub fn read_text_bounded(path: &Path, limit: u64, what: &'static str) -> Result<String, ReadError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|_| ReadError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

/// `O_NONBLOCK` (its value on the Unix platforms Rust supports: Linux 0o4000, the BSDs and
/// macOS 0x4), so that this crate needs no `libc` dependency for one constant.
#[cfg(unix)]
fn libc_o_nonblock() -> i32 {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        0o4000
    } else {
        0x4
    }
}

/// Largest lockfile read. The macro parses it once per crate built, which takes about 2 s
/// per MiB in a debug build (where the macro is not optimised): this bound keeps that within
/// a few seconds. This repository's, every kernel of its suite on five devices, is 0.16 MiB.
pub const MAX_LOCKFILE_BYTES: u64 = 2 << 20;
/// Largest bundle read (kernel sources and annotations).
pub const MAX_BUNDLE_BYTES: u64 = 256 << 20;
/// Largest generated source read (a language model's answer is limited to 64 KiB).
pub const MAX_GENERATED_BYTES: u64 = 1 << 20;
/// Largest kernel source an annotation may name.
pub const MAX_KERNEL_SOURCE_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_and_names_safely() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
        assert_eq!(
            safe_name("kfoundry-examples::Sgemm|x y"),
            "kfoundry-examples__Sgemm_x_y"
        );
        assert_eq!(safe_name("../../.."), "________");
        assert_eq!(safe_name(""), "_");
        let name = state_file_name(&["a::K", "w"], "log");
        assert!(
            name.starts_with("a__K-") && name.ends_with("@w.log"),
            "{name}"
        );
        // ids that differ only in characters a file name cannot hold get different names
        assert_ne!(
            state_file_name(&["a.b"], "log"),
            state_file_name(&["a:b"], "log")
        );
        assert_ne!(
            state_file_name(&["a_b"], "log"),
            state_file_name(&["a:b"], "log")
        );
        assert_eq!(
            state_file_name(&["plain_id", "small"], "json"),
            "plain_id@small.json"
        );
        assert!(!state_file_name(&["../w"], "log").contains('/'));
    }

    #[cfg(unix)]
    #[test]
    fn keeps_the_mode_and_refuses_read_only_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Kfoundry.lock");
        write_atomic(&p, b"one").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_ne!(
            mode(&p),
            0o600,
            "a new file gets the default mode, not a private temporary's"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(mode(&p), 0o640, "the mode survives the replacement");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = write_atomic(&p, b"three").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            std::fs::read(&p).unwrap(),
            b"two",
            "a read-only file is left alone"
        );
    }

    #[cfg(unix)]
    #[test]
    fn bounded_reads_refuse_what_is_not_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"12345").unwrap();
        assert_eq!(read_bounded(&small, 5, "test file").unwrap(), b"12345");
        assert!(matches!(
            read_bounded(&small, 4, "test file"),
            Err(ReadError::TooLarge { .. })
        ));
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_bounded(&fifo, 100, "test file").unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_bounded(&link, 100, "test file")
            .unwrap_err()
            .to_string()
            .contains("a device"));
        assert!(matches!(
            read_bounded(dir.path(), 100, "test file"),
            Err(ReadError::NotAFile {
                kind: "a directory",
                ..
            })
        ));
        assert!(read_bounded(&dir.path().join("absent"), 100, "test file")
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn creates_only_what_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Kfoundry.lock");
        assert!(create_new_atomic(&p, b"first").unwrap());
        assert!(!create_new_atomic(&p, b"second").unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn stale_temporaries_are_removed_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Kfoundry.lock");
        let stale = [".Kfoundry.lock.123-0.tmp", ".Kfoundry.lock.backup"];
        for s in stale {
            let f = std::fs::File::create(dir.path().join(s)).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        }
        std::fs::write(dir.path().join(".Kfoundry.lock.456-1.tmp"), b"in progress").unwrap();
        std::fs::write(dir.path().join(".other.lock.Ab3xYz"), b"not ours").unwrap();
        write_atomic(&p, b"x").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // an interrupted write is removed; a user's file of a similar name is not
        assert_eq!(
            left,
            [
                ".Kfoundry.lock.456-1.tmp",
                ".Kfoundry.lock.backup",
                ".other.lock.Ab3xYz",
                "Kfoundry.lock"
            ]
        );
        assert!(!is_temp_of(".Kfoundry.lock.lock", "Kfoundry.lock"));
    }
}
