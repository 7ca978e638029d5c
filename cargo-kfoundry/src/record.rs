//! Writing results into `Kfoundry.lock`, safely against other tuners.
//!
//! Each write is read → merge → atomic replace, done while holding an advisory lock on a
//! sibling file (`.Kfoundry.lock.lock`): two `cargo kfoundry tune` runs on the same
//! workspace (say one per device) never lose each other's entries. A tuner that finds the
//! lock taken says so and waits. The lockfile itself is only ever replaced by rename, so a
//! reader never sees it torn, and a tuner killed at any moment leaves either the old or the
//! new file.

use std::collections::BTreeSet;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_rt::model::lockfile::{Lockfile, Variant};
use kfoundry_rt::model::spec::KernelSpec;

use crate::devices::Selected;

/// The advisory lock file guarding `lockfile`.
pub fn guard_path(lockfile: &Path) -> PathBuf {
    let name = lockfile.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "Kfoundry.lock".into());
    lockfile.with_file_name(format!(".{name}.lock"))
}

/// Holds the advisory lock on a lockfile until dropped.
pub struct Guard {
    _file: File,
}

/// Takes the advisory lock of `lockfile`, waiting (and saying so, unless `quiet`) while
/// another process holds it.
pub fn lock(lockfile: &Path, quiet: bool) -> Result<Guard> {
    let path = guard_path(lockfile);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            if !quiet {
                eprintln!("waiting for {} (another cargo kfoundry is writing {})", path.display(), lockfile.display());
            }
            file.lock().with_context(|| format!("cannot lock {}", path.display()))?;
        }
        Err(TryLockError::Error(e)) => return Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
    Ok(Guard { _file: file })
}

/// Writes one kernel's results on one device: under the lock, re-reads the lockfile (so that
/// entries written meanwhile by anyone are kept), keeps this device's variants of workloads
/// not tuned now, and replaces the file atomically.
pub fn record(path: &Path, spec: &KernelSpec, device: &Selected, mut variants: Vec<Variant>, quiet: bool) -> Result<()> {
    let _guard = lock(path, quiet)?;
    let mut lock = Lockfile::read(path)?.unwrap_or_default();
    let fingerprint = spec.fingerprint();
    let tuned: BTreeSet<String> = variants.iter().map(|v| v.workload.clone()).collect();
    let key = device.key.to_string();
    if let Some(entry) = lock.kernels.get(&spec.id).filter(|e| e.fingerprint == fingerprint) {
        let declared: BTreeSet<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
        variants.extend(
            entry
                .variants
                .iter()
                .filter(|v| v.device == key && !tuned.contains(&v.workload) && declared.contains(v.workload.as_str()))
                .cloned(),
        );
    }
    let dropped = lock.record(&spec.id, &fingerprint, &key, device.info.clone(), variants);
    if !quiet && !dropped.is_empty() {
        eprintln!("note: `{}` changed; dropped its stale variants for {}", spec.id, dropped.join(", "));
    }
    lock.write_atomic(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lockfile = dir.path().join("Kfoundry.lock");
        assert_eq!(guard_path(&lockfile), dir.path().join(".Kfoundry.lock.lock"));
        let held = lock(&lockfile, true).expect("lock");
        let other = File::options().write(true).open(guard_path(&lockfile)).expect("open");
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop(held);
        assert!(other.try_lock().is_ok());
    }
}
