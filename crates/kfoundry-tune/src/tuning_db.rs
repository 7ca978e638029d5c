//! The tuning database: what earlier tunes on this machine found, kept outside any project so
//! that a re-tune, another project or a new model with kernels of a known template starts
//! from it (`pipeline/warm.rs` turns its entries into warm starts).
//!
//! One JSON file per kernel, source and shape on a device: the fastest few configurations a
//! search found there (distinct, each one that passed the search's verification and was not
//! refused by its proof) with their times. Files live under
//! `DIR/<device>/<template>/`, the device and the template (the kernel's parameter names)
//! each hashed into a folder name, so that a search reads only what could apply to it; a
//! tune of the same kernel, source and shape replaces its file (written whole, then renamed).
//! Each file says its format's version; one of another version, or one that does not parse,
//! is skipped.
//!
//! Nothing here is trusted: an entry only proposes starting points, which are evaluated and
//! verified like any candidate, and only values of the kernel's own space are taken.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_search::Record;

use kfoundry_bench::params_of;

/// The format of an entry.
pub const VERSION: u32 = 1;

/// Configurations kept per tune.
pub(crate) const KEPT_PER_TUNE: usize = 4;

/// Entries read per template and device at most (the newest).
pub(crate) const MAX_READ: usize = 512;

/// Largest entry read (one holds `KEPT_PER_TUNE` configurations: a few kilobytes).
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// The environment variable that says where the database is (`off`: nowhere, no database).
pub(crate) const DB_ENV: &str = "KFOUNDRY_TUNING_DB";

/// The database's folder by default: `$KFOUNDRY_TUNING_DB` (`off` for none), else
/// `tuning` in kfoundry's cache folder (`kfoundry_bench::program_cache::cache_dir`).
pub fn default_dir() -> Option<PathBuf> {
    match std::env::var_os(DB_ENV).filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => kfoundry_bench::program_cache::cache_dir().map(|d| d.join("tuning")),
    }
}

/// One tune's findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub version: u32,
    /// The device's key (as in the lockfile).
    pub device: String,
    /// The kernel's id and its source's fingerprint.
    pub kernel: String,
    pub fingerprint: String,
    /// The kernel's parameter names, sorted: kernels with the same names are of one template.
    pub template: Vec<String>,
    pub workload: String,
    pub sizes: Sizes,
    /// The reference's time there, nanoseconds (re-measured, as in the lockfile).
    pub reference_ns: u64,
    /// The fastest configurations found, fastest first.
    pub configs: Vec<Known>,
    /// Evaluations the search made.
    pub evaluations: usize,
    /// When the tune ended, seconds since the Unix epoch.
    pub written: u64,
}

/// A configuration and its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Known {
    pub params: Params,
    /// The search's measurement, seconds.
    pub time_s: f64,
}

/// The `KEPT_PER_TUNE` fastest distinct configurations of the annotated source in a search's
/// `history`, leaving out those its proof `refused` and the reference.
pub fn fastest(spec: &KernelSpec, history: &[Record], refused: &[&Params]) -> Vec<Known> {
    let mut ok: Vec<Known> = history
        .iter()
        .filter_map(|r| {
            r.outcome.time().map(|time_s| Known {
                params: params_of(spec, &r.config),
                time_s,
            })
        })
        .filter(|k| k.params != spec.reference && !refused.contains(&&k.params))
        .collect();
    ok.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    let mut out: Vec<Known> = Vec::new();
    for k in ok {
        if !out.iter().any(|o| o.params == k.params) {
            out.push(k);
            if out.len() == KEPT_PER_TUNE {
                break;
            }
        }
    }
    out
}

/// The template of `spec`: its parameter names, sorted.
pub(crate) fn template_of(spec: &KernelSpec) -> Vec<String> {
    let mut names: Vec<String> = spec.params.iter().map(|p| p.name.clone()).collect();
    names.sort();
    names
}

/// The database in one folder.
pub(crate) struct TuningDb {
    dir: PathBuf,
}

impl TuningDb {
    pub fn new(dir: &Path) -> TuningDb {
        TuningDb {
            dir: dir.to_path_buf(),
        }
    }

    fn folder(&self, device: &str, template: &[String]) -> PathBuf {
        self.dir.join(short_hash(&[device])).join(short_hash(
            &template.iter().map(String::as_str).collect::<Vec<_>>(),
        ))
    }

    /// Keeps `entry`, replacing the one of the same kernel, source and shape on its device.
    pub fn record(&self, entry: &Entry) -> std::io::Result<()> {
        let folder = self.folder(&entry.device, &entry.template);
        std::fs::create_dir_all(&folder)?;
        let sizes = serde_json::to_string(&entry.sizes).map_err(std::io::Error::other)?;
        let name = short_hash(&[&entry.kernel, &entry.fingerprint, &sizes]);
        let text = serde_json::to_string_pretty(entry).map_err(std::io::Error::other)?;
        // A new temporary file, then renamed: never written through what was left at a
        // temporary's name (a FIFO there would block the write).
        kfoundry_tooling::files::write_atomic(&folder.join(format!("{name}.json")), text.as_bytes())
    }

    /// The entries for kernels of `template` on `device`, newest first ([`MAX_READ`] at
    /// most); files that do not parse, of another version or of another device or template
    /// (a hash collision, a file moved by hand) are skipped. So is, with the reason in
    /// [`Entries::skipped`], anything that is not a regular file of at most
    /// [`MAX_ENTRY_BYTES`] (a FIFO, a link to `/dev/zero`): reading the database never waits
    /// nor fills the memory.
    pub fn entries(&self, device: &str, template: &[String]) -> Entries {
        let mut out = Entries::default();
        let Ok(dir) = std::fs::read_dir(self.folder(device, template)) else {
            return out;
        };
        // (`DirEntry::metadata` does not follow links: nothing is opened here.)
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = dir
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        for (_, path) in files.into_iter().take(MAX_READ) {
            let text = match kfoundry_tooling::files::read_text_bounded(
                &path,
                MAX_ENTRY_BYTES,
                "a tuning database entry",
            ) {
                Ok(text) => text,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    out.skipped.push(format!("tuning database: skipped {e}"));
                    continue;
                }
            };
            let Ok(entry) = serde_json::from_str::<Entry>(&text) else {
                continue;
            };
            if entry.version == VERSION && entry.device == device && entry.template == template {
                out.entries.push(entry);
            }
        }
        out
    }
}

/// What [`TuningDb::entries`] read.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    pub entries: Vec<Entry>,
    /// Why files that are not regular, or too large, were not read.
    pub skipped: Vec<String>,
}

/// How far apart two shapes are: the sum over the size names both have of |ln(a / b)|, and 1
/// for each name only one has.
pub(crate) fn shape_distance(a: &Sizes, b: &Sizes) -> f64 {
    let ln = |v: i64| (v.max(1) as f64).ln();
    let mut d = 0.0;
    for (name, &x) in a {
        d += match b.get(name) {
            Some(&y) => (ln(x) - ln(y)).abs(),
            None => 1.0,
        };
    }
    d + b.keys().filter(|n| !a.contains_key(*n)).count() as f64
}

/// The first 16 bytes of the SHA-256 of `parts` (each length-prefixed), in hex.
fn short_hash(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An entry for tests: `kernel` at `n` on `device`, template `[A, B]`, with `configs` as
/// `[A, B]` values, each 1 µs.
#[cfg(test)]
pub(crate) fn sample_entry(kernel: &str, device: &str, n: i64, configs: &[[i64; 2]]) -> Entry {
    Entry {
        version: VERSION,
        device: device.into(),
        kernel: kernel.into(),
        fingerprint: "fp".into(),
        template: vec!["A".into(), "B".into()],
        workload: "any".into(),
        sizes: [("n".to_string(), n)].into(),
        reference_ns: 10,
        configs: configs
            .iter()
            .map(|&[a, b]| Known {
                params: [("A".to_string(), a), ("B".to_string(), b)].into(),
                time_s: 1e-6,
            })
            .collect(),
        evaluations: 5,
        written: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kernel: &str, n: i64, a: i64) -> Entry {
        sample_entry(kernel, "dev", n, &[[a, 0]])
    }

    #[test]
    fn entries_replace_their_own_shape_and_keep_others() {
        let dir = std::env::temp_dir().join(format!("kfoundry-db-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = TuningDb::new(&dir);
        db.record(&entry("k", 1024, 1)).unwrap();
        db.record(&entry("k", 4096, 2)).unwrap();
        db.record(&entry("k", 1024, 3)).unwrap();
        let template = vec!["A".to_string(), "B".to_string()];
        let mut got: Vec<(i64, i64)> = db
            .entries("dev", &template)
            .entries
            .iter()
            .map(|e| (e.sizes["n"], e.configs[0].params["A"]))
            .collect();
        got.sort();
        assert_eq!(got, [(1024, 3), (4096, 2)]);
        // Another device's or template's folder is not read; a damaged file or another
        // version is skipped.
        assert!(db.entries("other", &template).entries.is_empty());
        assert!(db.entries("dev", &["A".to_string()]).entries.is_empty());
        let folder = db.folder("dev", &template);
        std::fs::write(folder.join("junk.json"), "{ not json").unwrap();
        let mut future = entry("k", 64, 1);
        future.version = VERSION + 1;
        std::fs::write(
            folder.join("future.json"),
            serde_json::to_string(&future).unwrap(),
        )
        .unwrap();
        assert_eq!(db.entries("dev", &template).entries.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO (which hung a tune 691 s) and a link to `/dev/zero` (2.2 GB of memory) among the
    /// entries: skipped at once, with a reason, and the other entries still read (D1, D2).
    #[cfg(unix)]
    #[test]
    fn entries_that_are_not_regular_files_are_skipped_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = TuningDb::new(dir.path());
        db.record(&entry("k", 1024, 1)).unwrap();
        let template = vec!["A".to_string(), "B".to_string()];
        let folder = db.folder("dev", &template);
        assert!(std::process::Command::new("mkfifo")
            .arg(folder.join("fifo.json"))
            .status()
            .unwrap()
            .success());
        std::os::unix::fs::symlink("/dev/zero", folder.join("zero.json")).unwrap();
        std::fs::write(
            folder.join("huge.json"),
            vec![b' '; MAX_ENTRY_BYTES as usize + 1],
        )
        .unwrap();
        let started = std::time::Instant::now();
        let read = db.entries("dev", &template);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(read.entries.len(), 1);
        assert_eq!(read.skipped.len(), 3, "{:?}", read.skipped);
        let reasons = read.skipped.join("\n");
        assert!(
            reasons.contains("a FIFO")
                && reasons.contains("a device")
                && reasons.contains("larger than"),
            "{reasons}"
        );
    }

    #[test]
    fn shapes_are_near_by_ratio() {
        let s = |n: i64, m: i64| -> Sizes { [("n".to_string(), n), ("m".to_string(), m)].into() };
        assert_eq!(shape_distance(&s(64, 64), &s(64, 64)), 0.0);
        assert!(shape_distance(&s(64, 64), &s(128, 64)) < shape_distance(&s(64, 64), &s(1024, 64)));
        let only_n: Sizes = [("n".to_string(), 64)].into();
        assert_eq!(shape_distance(&s(64, 64), &only_n), 1.0);
        assert_eq!(shape_distance(&only_n, &s(64, 64)), 1.0);
    }
}
