//! `Kfoundry.lock`: the tuned variants of every kernel for every device, in deterministic,
//! diff-friendly TOML with a schema version at the top. Written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use kfoundry_rt::model::device::{DeviceInfo, DeviceKey};
use kfoundry_rt::model::variant::{check_unique, slot, Variant};

use crate::toml_text::{self, TomlError};

/// The schema version this build writes. Earlier files are read too: version 1 has no
/// `proven` sizes, version 2 no proof version or integer scalar ranges (`proof`, `scalars`).
pub const SCHEMA_VERSION: u32 = 3;
/// The lockfile's name at the workspace root.
pub const FILE_NAME: &str = "Kfoundry.lock";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub version: u32,
    /// Hardware descriptions by device key (see [`kfoundry_rt::model::device::DeviceKey`]).
    #[serde(default)]
    pub devices: BTreeMap<String, DeviceInfo>,
    /// Entries by kernel id.
    #[serde(default)]
    pub kernels: BTreeMap<String, KernelEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelEntry {
    /// Fingerprint of the reference source and annotation these variants were tuned for.
    pub fingerprint: String,
    #[serde(default)]
    pub variants: Vec<Variant>,
}

/// Why a lockfile could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid Kfoundry.lock: {message}")]
    Malformed { path: PathBuf, message: String },
    /// Not TOML, or TOML of another shape: `at` is `path:line:col`.
    #[error("{at}: not a valid Kfoundry.lock: {message}")]
    Syntax { at: String, message: String },
    #[error("{path}: schema version {found} is newer than this kfoundry understands (version {supported}); upgrade kfoundry")]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path} is not a regular file; Kfoundry.lock must be a file (or absent)")]
    NotAFile { path: PathBuf },
    #[error("cannot write the lockfile: {message}")]
    Serialize { message: String },
    #[error("{path} was not written: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Default for Lockfile {
    fn default() -> Self {
        Lockfile {
            version: SCHEMA_VERSION,
            devices: BTreeMap::new(),
            kernels: BTreeMap::new(),
        }
    }
}

impl Lockfile {
    /// Parses lockfile text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Lockfile, LockError> {
        let malformed = |message: String| LockError::Malformed {
            path: path.to_path_buf(),
            message,
        };
        let syntax = |e: TomlError| LockError::Syntax {
            at: e.at,
            message: e.message,
        };
        // Parsed once (a large lockfile takes seconds); its version is read on its own only
        // to explain a file that does not parse as this schema.
        let lock: Lockfile = match toml_text::parse(path, text) {
            Ok(lock) => lock,
            Err(schema) => {
                let value: toml::Table = toml_text::parse(path, text).map_err(syntax)?;
                let version = match value.get("version") {
                    Some(toml::Value::Integer(v)) => u32::try_from(*v)
                        .ok()
                        .filter(|v| *v >= 1)
                        .ok_or_else(|| malformed(format!("bad version {v}")))?,
                    Some(other) => {
                        return Err(malformed(format!(
                            "`version` must be an integer, found {other}"
                        )))
                    }
                    None => return Err(malformed("missing `version` at the top".into())),
                };
                if version > SCHEMA_VERSION {
                    return Err(LockError::TooNew {
                        path: path.to_path_buf(),
                        found: version,
                        supported: SCHEMA_VERSION,
                    });
                }
                return Err(syntax(schema));
            }
        };
        if lock.version < 1 {
            return Err(malformed(format!("bad version {}", lock.version)));
        }
        if lock.version > SCHEMA_VERSION {
            return Err(LockError::TooNew {
                path: path.to_path_buf(),
                found: lock.version,
                supported: SCHEMA_VERSION,
            });
        }
        lock.validate().map_err(malformed)?;
        Ok(lock)
    }

    /// What every lockfile read or written must hold, beyond its schema: each device key is
    /// canonical ([`DeviceKey::parse`]: one device, one key), each variant's device is
    /// described in `[devices]`, and each kernel holds one variant per device and workload
    /// ([`check_unique`]). The first problem found, naming the kernel and key.
    pub fn validate(&self) -> Result<(), String> {
        for (id, entry) in &self.kernels {
            for v in &entry.variants {
                DeviceKey::parse(&v.device).map_err(|e| {
                    format!(
                        "kernel `{id}`, its variant at workload `{}`: {e}",
                        v.workload
                    )
                })?;
                if !self.devices.contains_key(&v.device) {
                    return Err(format!(
                        "kernel `{id}` has a variant for device `{}`, which is not in [devices]",
                        v.device
                    ));
                }
            }
            check_unique(&entry.variants)
                .map_err(|twins| format!("kernel `{id}`: {}", twins.join("; ")))?;
        }
        for key in self.devices.keys() {
            DeviceKey::parse(key).map_err(|e| format!("[devices]: {e}"))?;
        }
        Ok(())
    }

    /// Reads the lockfile at `path`; `Ok(None)` when there is none. Anything at `path` that
    /// is not a regular file (a directory, a socket) is an error.
    pub fn read(path: &Path) -> Result<Option<Lockfile>, LockError> {
        use crate::files::{read_text_bounded, ReadError, MAX_LOCKFILE_BYTES};
        match read_text_bounded(path, MAX_LOCKFILE_BYTES, "Kfoundry.lock") {
            Ok(text) => Lockfile::parse(&text, path).map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(ReadError::NotAFile { .. }) => Err(LockError::NotAFile {
                path: path.to_path_buf(),
            }),
            Err(ReadError::Io { source, .. }) => Err(LockError::Io {
                path: path.to_path_buf(),
                source,
            }),
            Err(e @ ReadError::TooLarge { .. }) => Err(LockError::Malformed {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
        }
    }

    /// [`Lockfile::read`], once per process for a file as it is: the macro reads the
    /// lockfile for every annotation of a crate, and parsing a large one takes seconds. What
    /// was read is kept by path, length and modification time, so a file that changed is read
    /// again; only what parses is kept.
    pub fn read_shared(path: &Path) -> Result<Option<Arc<Lockfile>>, LockError> {
        type Read = BTreeMap<PathBuf, ((u64, SystemTime), Arc<Lockfile>)>;
        static READ: Mutex<Read> = Mutex::new(BTreeMap::new());
        // Taken before the file is read: should it change meanwhile, the next call reads it again.
        let stamp = std::fs::metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| Some((m.len(), m.modified().ok()?)));
        if let (Some(stamp), Ok(read)) = (stamp, READ.lock()) {
            if let Some((_, lock)) = read.get(path).filter(|(s, _)| *s == stamp) {
                return Ok(Some(Arc::clone(lock)));
            }
        }
        let Some(lock) = Lockfile::read(path)?.map(Arc::new) else {
            return Ok(None);
        };
        if let (Some(stamp), Ok(mut read)) = (stamp, READ.lock()) {
            read.insert(path.to_path_buf(), (stamp, Arc::clone(&lock)));
        }
        Ok(Some(lock))
    }

    /// Deterministic TOML: maps are sorted, variants sorted by device then workload.
    pub fn to_toml(&self) -> Result<String, LockError> {
        let mut sorted = self.clone();
        sorted.version = SCHEMA_VERSION;
        for entry in sorted.kernels.values_mut() {
            entry
                .variants
                .sort_by(|a, b| (&a.device, &a.workload).cmp(&(&b.device, &b.workload)));
            // `[devices]` holds each device's description once
            for v in &mut entry.variants {
                v.device_info = None;
            }
        }
        let body = toml::to_string(&sorted).map_err(|e| LockError::Serialize {
            message: e.to_string(),
        })?;
        let text = format!("# Kfoundry.lock: tuned kernel variants, written by `cargo kfoundry tune`. Commit it.\n{body}");
        // Never written larger than it may be read.
        if text.len() as u64 > crate::files::MAX_LOCKFILE_BYTES {
            return Err(LockError::Serialize {
                message: format!(
                    "it would be {} bytes, more than the {} a lockfile may be (a build parses it); remove the entries of kernels or devices no longer used (`cargo kfoundry check` lists them)",
                    text.len(),
                    crate::files::MAX_LOCKFILE_BYTES
                ),
            });
        }
        Ok(text)
    }

    /// Creates an empty lockfile (no kernels) at `path` unless something is already there.
    /// `Ok(true)` when it was created. The macro does this on a first build so that cargo
    /// tracks the file from then on (rustc can only track a file that exists).
    pub fn create_if_absent(path: &Path) -> Result<bool, LockError> {
        crate::files::create_new_atomic(path, Lockfile::default().to_toml()?.as_bytes()).map_err(
            |source| LockError::Io {
                path: path.to_path_buf(),
                source,
            },
        )
    }

    /// Replaces the lockfile at `path` atomically (temporary file in the same directory, then
    /// rename): readers see the old or the new file, never a torn one. A lockfile that would
    /// not be read back ([`Lockfile::validate`]: a key not canonical, two variants for one
    /// slot) is not written.
    pub fn write_atomic(&self, path: &Path) -> Result<(), LockError> {
        self.validate().map_err(|message| LockError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        let text = self.to_toml()?;
        crate::files::write_atomic(path, text.as_bytes()).map_err(|source| LockError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Records the result of tuning `kernel` on `device`: that device's old variants of the
    /// kernel are replaced, other devices' are kept, and a variant replaces any other of its
    /// slot (device and workload) so that no slot holds two. When the kernel's fingerprint
    /// changed, the variants of other devices are stale and are dropped; their device keys
    /// are returned so the caller can say so.
    pub fn record(
        &mut self,
        kernel: &str,
        fingerprint: &str,
        device: &str,
        info: DeviceInfo,
        variants: Vec<Variant>,
    ) -> Vec<String> {
        self.devices.insert(device.to_string(), info);
        let entry = self
            .kernels
            .entry(kernel.to_string())
            .or_insert_with(|| KernelEntry {
                fingerprint: fingerprint.to_string(),
                variants: vec![],
            });
        let mut dropped = Vec::new();
        if entry.fingerprint != fingerprint {
            dropped = entry
                .variants
                .iter()
                .filter(|v| v.device != device)
                .map(|v| v.device.clone())
                .collect();
            dropped.sort();
            dropped.dedup();
            entry.variants.clear();
            entry.fingerprint = fingerprint.to_string();
        }
        // by the device each key names, so that a key spelled otherwise goes too
        let this = DeviceKey::canonical(device);
        entry
            .variants
            .retain(|v| DeviceKey::canonical(&v.device) != this);
        for v in variants {
            entry.variants.retain(|o| slot(o) != slot(&v));
            entry.variants.push(v);
        }
        self.prune_devices();
        dropped
    }

    /// Removes device descriptions no variant refers to.
    pub fn prune_devices(&mut self) {
        let used: std::collections::BTreeSet<&String> = self
            .kernels
            .values()
            .flat_map(|k| k.variants.iter().map(|v| &v.device))
            .collect();
        self.devices.retain(|k, _| used.contains(k));
    }

    /// Merges another lockfile (for example one written concurrently): its entries win for
    /// the (kernel, device) pairs it has when the fingerprints agree.
    pub fn merge_from(&mut self, other: &Lockfile) {
        for (id, entry) in &other.kernels {
            let mut by_device: BTreeMap<&str, Vec<Variant>> = BTreeMap::new();
            for v in &entry.variants {
                by_device
                    .entry(v.device.as_str())
                    .or_default()
                    .push(v.clone());
            }
            for (device, variants) in by_device {
                let info = other.devices.get(device).cloned().unwrap_or_default();
                let ours = self.kernels.get(id);
                if ours.is_some_and(|o| o.fingerprint != entry.fingerprint) {
                    continue;
                }
                self.record(id, &entry.fingerprint, device, info, variants);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(device: &str, workload: &str, wg: i64) -> Variant {
        Variant {
            device: device.into(),
            workload: workload.into(),
            sizes: [("n".to_string(), 1 << 20)].into_iter().collect(),
            params: [("WG".to_string(), wg), ("VEC".to_string(), 4)]
                .into_iter()
                .collect(),
            time_ns: 1200,
            reference_time_ns: 3400,
            evaluations: 40,
            failures: 2,
            source: None,
            proven: vec![],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        }
    }

    /// Two devices' canonical keys.
    const A: &str = "8086|cpu-haswell|3.1|3.0";
    const B: &str = "8086|cpu-skylake|3.1|3.0";

    fn info(name: &str) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            kind: "gpu".into(),
            compute_units: 132,
            ..Default::default()
        }
    }

    #[test]
    fn a_malformed_lockfile_is_named_with_its_line_and_column() {
        let p = Path::new("/x/Kfoundry.lock");
        // not TOML
        let e = Lockfile::parse("version = 3\n[kernels\n", p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/x/Kfoundry.lock:2:") && e.contains(": not a valid Kfoundry.lock: "),
            "{e}"
        );
        assert!(!e.contains('|'), "the message alone, no excerpt: {e}");
        // TOML of another shape: a variant's time that is text
        let text = text_with(&[(A, "large", 32)]).replace("time_ns = 1200", "time_ns = \"fast\"");
        let line = text.lines().position(|l| l.contains("\"fast\"")).unwrap() + 1;
        let e = Lockfile::parse(&text, p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "/x/Kfoundry.lock:{line}:11: not a valid Kfoundry.lock: "
            )),
            "{e}"
        );
    }

    #[test]
    fn round_trip_is_deterministic() {
        let mut lock = Lockfile::default();
        lock.record(
            "ex::Saxpy",
            "abcd",
            "10de|nvidia h200|580|3.0",
            info("NVIDIA H200"),
            vec![
                variant("10de|nvidia h200|580|3.0", "large", 128),
                variant("10de|nvidia h200|580|3.0", "small", 64),
            ],
        );
        lock.record(
            "ex::Saxpy",
            "abcd",
            "8086|cpu|3.1|3.0",
            info("cpu"),
            vec![variant("8086|cpu|3.1|3.0", "large", 32)],
        );
        let text = lock.to_toml().unwrap();
        assert!(
            text.lines().nth(1).unwrap().starts_with("version = 3"),
            "{text}"
        );
        let back = Lockfile::parse(&text, Path::new("Kfoundry.lock")).unwrap();
        assert_eq!(back.to_toml().unwrap(), text);
        assert_eq!(back.kernels["ex::Saxpy"].variants.len(), 3);
    }

    #[test]
    fn retune_keeps_other_devices_and_drops_stale() {
        let mut lock = Lockfile::default();
        lock.record("k", "f1", "a", info("a"), vec![variant("a", "large", 32)]);
        lock.record("k", "f1", "b", info("b"), vec![variant("b", "large", 64)]);
        lock.record("k", "f1", "a", info("a"), vec![variant("a", "large", 128)]);
        let v = &lock.kernels["k"].variants;
        assert_eq!(v.len(), 2);
        assert!(v.iter().any(|v| v.device == "a" && v.params["WG"] == 128));
        assert!(v.iter().any(|v| v.device == "b"));
        let dropped = lock.record("k", "f2", "a", info("a"), vec![variant("a", "large", 256)]);
        assert_eq!(dropped, vec!["b".to_string()]);
        assert_eq!(lock.kernels["k"].variants.len(), 1);
        assert!(!lock.devices.contains_key("b"));
    }

    #[test]
    fn merge_keeps_both_devices() {
        let mut a = Lockfile::default();
        a.record("k", "f", "a", info("a"), vec![variant("a", "large", 32)]);
        let mut b = Lockfile::default();
        b.record("k", "f", "b", info("b"), vec![variant("b", "large", 64)]);
        b.record("k2", "g", "b", info("b"), vec![variant("b", "small", 64)]);
        a.merge_from(&b);
        assert_eq!(a.kernels["k"].variants.len(), 2);
        assert_eq!(a.kernels["k2"].variants.len(), 1);
        assert_eq!(a.devices.len(), 2);
    }

    #[test]
    fn bad_files_give_clear_errors() {
        let p = Path::new("/x/Kfoundry.lock");
        let e = Lockfile::parse("version = 4\n", p).unwrap_err();
        assert_eq!(e.to_string(), "/x/Kfoundry.lock: schema version 4 is newer than this kfoundry understands (version 3); upgrade kfoundry");
        assert!(Lockfile::parse("version = 0\n", p)
            .unwrap_err()
            .to_string()
            .contains("bad version 0"));
        assert!(
            Lockfile::parse("version = 1\n", p).is_ok(),
            "version 1 files are still read"
        );
        let e = Lockfile::parse("[kernels]\n", p).unwrap_err();
        assert!(e.to_string().contains("missing `version`"), "{e}");
        let e = Lockfile::parse("version = 1\n[kernels.k]\nfingerprint = 3\n", p).unwrap_err();
        assert!(
            e.to_string().starts_with("/x/Kfoundry.lock:3:15: ")
                && e.to_string().contains("expected a string"),
            "{e}"
        );
        let e = Lockfile::parse("version = 1\nbogus = true\n", p).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = Lockfile::parse("version = 1\n[[kernels.k.variants]]\n", p).unwrap_err();
        assert!(e.to_string().contains("Kfoundry.lock"), "{e}");
        let text = "version = 1\n[kernels.k]\nfingerprint = \"f\"\n[[kernels.k.variants]]\ndevice = \"8086|cpu|1|3.0\"\nworkload = \"w\"\nsizes = {}\nparams = {}\ntime_ns = 1\nreference_time_ns = 1\nevaluations = 1\nfailures = 0\n";
        let e = Lockfile::parse(text, p).unwrap_err();
        assert!(e.to_string().contains("not in [devices]"), "{e}");
        let e = Lockfile::parse("version = \"1\"", p).unwrap_err();
        assert!(e.to_string().contains("integer"), "{e}");
    }

    #[test]
    fn a_lockfile_is_parsed_once_per_process_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert!(Lockfile::read_shared(&path).unwrap().is_none());
        let mut lock = Lockfile::default();
        lock.write_atomic(&path).unwrap();
        let first = Lockfile::read_shared(&path).unwrap().unwrap();
        let again = Lockfile::read_shared(&path).unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same file is not parsed again"
        );
        lock.kernels.insert(
            "k".into(),
            KernelEntry {
                fingerprint: "f".into(),
                variants: Vec::new(),
            },
        );
        lock.write_atomic(&path).unwrap();
        let changed = Lockfile::read_shared(&path).unwrap().unwrap();
        assert!(
            changed.kernels.contains_key("k"),
            "a changed file is read again"
        );
        // Larger than a build can parse in a few seconds: refused before it is parsed (D2).
        let huge = format!(
            "version = 3\n{}",
            "# padding\n".repeat(crate::files::MAX_LOCKFILE_BYTES as usize / 10 + 1)
        );
        std::fs::write(&path, huge).unwrap();
        let e = Lockfile::read_shared(&path).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
    }

    #[test]
    fn proven_ranges_and_version_1_entries() {
        let mut v = variant(A, "large", 32);
        // A version 1 entry was verified at its tuned sizes only.
        assert_eq!(
            v.proven_range(),
            [("n".to_string(), (1 << 20, 1 << 20))]
                .into_iter()
                .collect()
        );
        v.proven = vec![
            v.sizes.clone(),
            [("n".to_string(), 3 << 17)].into(),
            [("n".to_string(), 1 << 21)].into(),
        ];
        assert_eq!(v.proven_range()["n"], (3 << 17, 1 << 21));
        let mut lock = Lockfile::default();
        lock.record("k", "f", A, info("a"), vec![v.clone()]);
        let text = lock.to_toml().unwrap();
        assert!(text.contains("n = [1048576, 393216, 2097152]"), "{text}");
        let back = Lockfile::parse(&text, Path::new("Kfoundry.lock")).unwrap();
        assert_eq!(back.kernels["k"].variants[0].proven, v.proven);
        let ragged = text.replace(
            "n = [1048576, 393216, 2097152]",
            "n = [1048576, 393216, 2097152]\nm = [1]",
        );
        assert!(Lockfile::parse(&ragged, Path::new("Kfoundry.lock"))
            .unwrap_err()
            .to_string()
            .contains("same number of values"));
    }

    #[test]
    fn a_directory_is_not_a_lockfile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::create_dir(&path).unwrap();
        let e = Lockfile::read(&path).unwrap_err();
        assert!(matches!(e, LockError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn atomic_write_replaces_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert!(Lockfile::read(&path).unwrap().is_none());
        let mut lock = Lockfile::default();
        lock.record("k", "f", A, info("a"), vec![variant(A, "large", 32)]);
        lock.write_atomic(&path).unwrap();
        lock.record("k", "f", B, info("b"), vec![variant(B, "large", 32)]);
        lock.write_atomic(&path).unwrap();
        assert_eq!(Lockfile::read(&path).unwrap().unwrap(), lock);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary files left behind");
    }

    /// A lockfile's text with `kernel`'s variants for these (device, workload, WG) and every
    /// device described.
    fn text_with(variants: &[(&str, &str, i64)]) -> String {
        let mut lock = Lockfile::default();
        lock.kernels.insert(
            "k".into(),
            KernelEntry {
                fingerprint: "f".into(),
                variants: variants
                    .iter()
                    .map(|(d, w, wg)| variant(d, w, *wg))
                    .collect(),
            },
        );
        for (d, _, _) in variants {
            lock.devices.insert(d.to_string(), info(d));
        }
        lock.to_toml().unwrap()
    }

    #[test]
    fn one_device_has_one_key_and_one_slot_one_variant() {
        let p = Path::new("/x/Kfoundry.lock");
        assert!(Lockfile::parse(&text_with(&[(A, "large", 32), (A, "small", 64)]), p).is_ok());
        // a twin under another spelling of the key, alone or beside the honest entry
        for twin in [
            "+8086|cpu-haswell|3.1|3.0",
            "08086|cpu-haswell|3.1|3.0",
            "0x8086|cpu-haswell|3.1|3.0",
            "8086|CPU-Haswell|3.1|3.0",
            "8086|cpu-haswell |3.1|3.0",
        ] {
            for text in [
                text_with(&[(twin, "large", 1024)]),
                text_with(&[(A, "large", 32), (twin, "large", 1024)]),
            ] {
                let e = Lockfile::parse(&text, p).unwrap_err().to_string();
                assert!(
                    e.starts_with("/x/Kfoundry.lock: not a valid Kfoundry.lock: ")
                        && e.contains(&format!(
                            "device key `{twin}` is not canonical: write `{A}`"
                        )),
                    "{e}"
                );
            }
        }
        // a key spelled otherwise in [devices] alone
        let mut lock = Lockfile::parse(&text_with(&[(A, "large", 32)]), p).unwrap();
        lock.devices.insert(format!("0{A}"), info("a"));
        let text = lock.to_toml().unwrap();
        let e = Lockfile::parse(&text, p).unwrap_err().to_string();
        assert!(e.contains("[devices]: device key `08086|"), "{e}\n{text}");
        // the same key twice for one workload
        let e = Lockfile::parse(&text_with(&[(A, "large", 32), (A, "large", 1024)]), p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "kernel `k`: a second variant for device `{A}` at workload `large`"
            )),
            "{e}"
        );
        // nor is such a lockfile written
        let mut lock = Lockfile::parse(&text_with(&[(A, "large", 32)]), p).unwrap();
        lock.kernels
            .get_mut("k")
            .unwrap()
            .variants
            .push(variant(A, "large", 64));
        let dir = tempfile::tempdir().unwrap();
        let e = lock.write_atomic(&dir.path().join(FILE_NAME)).unwrap_err();
        assert!(matches!(e, LockError::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("was not written"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_record_replaces_the_variant_of_its_slot() {
        let mut lock = Lockfile::default();
        lock.record("k", "f", A, info("a"), vec![variant(A, "large", 32)]);
        lock.record("k", "f", B, info("b"), vec![variant(B, "large", 32)]);
        // a result given twice for one workload: the later one stays
        lock.record(
            "k",
            "f",
            A,
            info("a"),
            vec![variant(A, "large", 64), variant(A, "large", 128)],
        );
        let v = &lock.kernels["k"].variants;
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().any(|v| v.device == A && v.params["WG"] == 128));
        // a twin under another spelling, held in memory, goes with its device's variants
        lock.kernels.get_mut("k").unwrap().variants.push(variant(
            "08086|cpu-haswell|3.1|3.0",
            "small",
            1,
        ));
        lock.record("k", "f", A, info("a"), vec![variant(A, "large", 256)]);
        let v = &lock.kernels["k"].variants;
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(lock.validate().is_ok(), "{:?}", lock.validate());
    }
}
