//! Stage 5, record: the results into `Kfoundry.lock`, safely against other tuners, and the
//! generated sources of source-level winners beside it.
//!
//! Each write is read → merge → atomic replace, done while holding an advisory lock: two
//! `cargo kfoundry tune` runs on the same workspace (say one per device) never lose each
//! other's entries. A tuner that finds the lock taken says so and waits. The lock is taken on
//! the directory holding the lockfile (on Unix; elsewhere on a sibling `.Kfoundry.lock.lock`),
//! so nothing is left behind in the workspace. The lockfile itself is only ever replaced by
//! rename, so a reader never sees it torn, and a tuner killed at any moment leaves either the
//! old or the new file (a temporary file it may leave is removed by the next write).

use std::collections::BTreeSet;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use kfoundry_rt::model::spec::{KernelSpec, Workload};
use kfoundry_rt::model::variant::Variant;
use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;

use super::discover::Kernel;
use crate::device::Selected;
use crate::events::{Reporter, TuneEvent};
use crate::messages::TuneResult;

/// Said when results cannot be written: they are not lost.
pub(crate) const RESUME_HINT: &str = "; the results are kept in the checkpoints: fix this and run `cargo kfoundry tune --resume` with the same arguments to write them without searching again";

/// The lockfile variants of a tune's result: its winner (its generated source stored beside
/// the lockfile) and the workload's general variant when it has one; none when the lockfile's
/// earlier complete result is kept.
pub(crate) fn variants_of(
    lockfile: &Path,
    device: &Selected,
    spec: &KernelSpec,
    workload: &Workload,
    result: &TuneResult,
) -> Result<Vec<Variant>> {
    if result.kept_existing {
        return Ok(Vec::new());
    }
    let source = match &result.generated_source {
        Some(text) => Some(generated::write(lockfile, &spec.id, text).with_context(|| {
            format!(
                "cannot store the generated source of `{}` beside {}{RESUME_HINT}",
                spec.id,
                lockfile.display()
            )
        })?),
        None => None,
    };
    Ok(entries_of(
        &device.key.to_string(),
        workload,
        result,
        source,
    ))
}

/// The lockfile entries a tune's `result` makes on `device` at `workload`: its winner (with
/// `source`, the hash its generated source is stored under) and the workload's general
/// variant when it has one.
pub(crate) fn entries_of(
    device: &str,
    workload: &Workload,
    result: &TuneResult,
    source: Option<String>,
) -> Vec<Variant> {
    let winner = Variant {
        device: device.to_string(),
        workload: workload.name.clone(),
        sizes: workload.sizes.clone(),
        params: result.params.clone(),
        time_ns: result.best_ns,
        reference_time_ns: result.reference_ns,
        evaluations: result.evaluations as u64,
        failures: result.failures as u64,
        source,
        proven: result.proven.clone(),
        scalars: result.proven_scalars.clone(),
        proof: kfoundry_rt::model::variant::PROOF_VERSION,
        partial: result.interrupted,
        general: false,
        floor: result.floor.clone(),
        device_info: None,
    };
    let general = result.general.as_ref().map(|g| Variant {
        params: g.params.clone(),
        time_ns: g.best_ns,
        reference_time_ns: g.reference_ns,
        source: None,
        proven: g.proven.clone(),
        scalars: g.proven_scalars.clone(),
        general: true,
        floor: g.floor.clone(),
        ..winner.clone()
    });
    [Some(winner), general].into_iter().flatten().collect()
}

/// The macro makes rustc track `Kfoundry.lock` once it exists; a crate built before the first
/// tune did not track it. Bumping the modification time of the files holding the annotations
/// makes cargo rebuild them, so the first `cargo build` after the first tune embeds the
/// variants. (Contents are untouched.)
pub(crate) fn mark_changed(kernels: &[Kernel]) {
    let files: BTreeSet<&Path> = kernels.iter().map(|k| k.file.as_path()).collect();
    for file in files {
        if let Ok(f) = std::fs::File::options().append(true).open(file) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
    }
}

/// What the advisory lock of `lockfile` is taken on: its directory on Unix (flock works on
/// directories there), a sibling lock file elsewhere.
pub(crate) fn guard_path(lockfile: &Path) -> PathBuf {
    let dir = lockfile
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if cfg!(unix) {
        dir.to_path_buf()
    } else {
        let name = lockfile
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "Kfoundry.lock".into());
        dir.join(format!(".{name}.lock"))
    }
}

/// Holds the advisory lock on a lockfile until dropped.
pub struct Guard {
    _file: File,
}

/// Takes the advisory lock of `lockfile`, waiting (and telling `reporter`) while another
/// process holds it.
pub fn lock(lockfile: &Path, reporter: &dyn Reporter) -> Result<Guard> {
    let path = guard_path(lockfile);
    let file = if cfg!(unix) {
        File::open(&path)
    } else {
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    }
    .with_context(|| {
        format!(
            "cannot open {} to lock {}",
            path.display(),
            lockfile.display()
        )
    })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            reporter.report(TuneEvent::Note {
                text: format!(
                    "waiting for another cargo kfoundry that is writing {}",
                    lockfile.display()
                ),
            });
            // Polled, so that an interrupt stops the wait.
            loop {
                std::thread::sleep(std::time::Duration::from_millis(100));
                match file.try_lock() {
                    Ok(()) => break,
                    Err(TryLockError::WouldBlock) if crate::interrupt::requested() => bail!(
                        "interrupted while waiting for the lock of {}; nothing was written (checkpoints are kept; `--resume` continues)",
                        lockfile.display()
                    ),
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(e)) => {
                        return Err(e).with_context(|| format!("cannot lock {}", path.display()))
                    }
                }
            }
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
    Ok(Guard { _file: file })
}

/// Fails now, before any search, when the results could not be written later: the lockfile
/// is read-only or not a file, or its directory does not accept new files.
pub(crate) fn check_writable(lockfile: &Path) -> Result<()> {
    match std::fs::metadata(lockfile) {
        Ok(m) if !m.is_file() => bail!("{} is not a file; nothing was tuned", lockfile.display()),
        Ok(m) if m.permissions().readonly() => {
            bail!("{} is read-only, so the results could not be recorded; make it writable (nothing was tuned)", lockfile.display())
        }
        _ => {}
    }
    let dir = lockfile
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::Builder::new()
        .prefix(".kfoundry-write-test.")
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "cannot create files in {}, so {} could not be written; nothing was tuned",
                dir.display(),
                lockfile.display()
            )
        })?;
    Ok(())
}

/// Writes one kernel's results on one device: under the lock, re-reads the lockfile (so that
/// entries written meanwhile by anyone are kept), keeps this device's variants of workloads
/// not tuned now, and replaces the file atomically. A lockfile holding a device key spelled
/// otherwise than its device's, or two variants for one slot, is refused when read (as at
/// the start of the tune), never rewritten with the new result beside the twin; each result
/// replaces the variant of its slot ([`Lockfile::record`]).
pub fn record(
    path: &Path,
    spec: &KernelSpec,
    fingerprint: &str,
    device: &Selected,
    mut variants: Vec<Variant>,
    reporter: &dyn Reporter,
) -> Result<()> {
    let _guard = lock(path, reporter)?;
    let mut lock = Lockfile::read(path)?.unwrap_or_default();
    let tuned: BTreeSet<String> = variants.iter().map(|v| v.workload.clone()).collect();
    let key = device.key.to_string();
    if let Some(entry) = lock
        .kernels
        .get(&spec.id)
        .filter(|e| e.fingerprint == fingerprint)
    {
        let declared: BTreeSet<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
        variants.extend(
            entry
                .variants
                .iter()
                .filter(|v| {
                    v.device == key
                        && !tuned.contains(&v.workload)
                        && declared.contains(v.workload.as_str())
                })
                .cloned(),
        );
    }
    let dropped = lock.record(&spec.id, fingerprint, &key, device.info.clone(), variants);
    if !dropped.is_empty() {
        reporter.report(TuneEvent::Note {
            text: format!(
                "note: `{}` changed; dropped its stale variants for {}",
                spec.id,
                dropped.join(", ")
            ),
        });
    }
    lock.write_atomic(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_is_exclusive_released_on_drop_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lockfile = dir.path().join("Kfoundry.lock");
        let held = lock(&lockfile, &crate::events::Silent).expect("lock");
        let other = File::open(guard_path(&lockfile)).expect("open");
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop(held);
        assert!(other.try_lock().is_ok());
        drop(other);
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "no lock file in the workspace"
        );
    }

    #[cfg(unix)]
    #[test]
    fn unwritable_lockfiles_are_refused_before_the_search() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let lockfile = dir.path().join("Kfoundry.lock");
        check_writable(&lockfile).expect("a new lockfile in a writable directory");
        std::fs::write(&lockfile, "version = 2\n").expect("write");
        std::fs::set_permissions(&lockfile, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        let e = check_writable(&lockfile).unwrap_err().to_string();
        assert!(e.contains("read-only"), "{e}");
        std::fs::remove_file(&lockfile).expect("rm");
        std::fs::create_dir(&lockfile).expect("mkdir");
        assert!(check_writable(&lockfile)
            .unwrap_err()
            .to_string()
            .contains("not a file"));
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "the probe file is gone"
        );
    }
}
