//! Stage 0: every selected kernel's reference built on the device before any search. A
//! reference that does not compile is reported within seconds of the start, at the kernel
//! source's own file and line (not the OpenCL compiler's temporary file), instead of when its
//! turn comes after the kernels before it have been tuned.

use kfoundry_rt::opencl::session::Session;

use kfoundry_bench::diagnostics::relocate;

use super::discover::Kernel;

/// The kernels (by index in `kernels`) whose reference does not build on device `index` of
/// `list_devices()`, and each one's error. `Err` only when the device cannot be opened (the
/// tune's workers will say why).
pub(crate) fn broken_references(
    kernels: &[Kernel],
    index: usize,
) -> anyhow::Result<Vec<(usize, String)>> {
    let (platform, device) = kfoundry_rt::list_devices()?
        .into_iter()
        .nth(index)
        .ok_or_else(|| anyhow::anyhow!("no device {index}"))?;
    let session = Session::new(platform, device)?;
    let mut broken = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        // The build log is in the error; what a compiler also prints on its own ("1 warning
        // generated.") is not the tune's output (the workers' builds report it once, sorted).
        if let Err(e) = quietly(|| session.build_spec(&k.spec, &k.spec.source, &k.spec.reference)) {
            broken.push((
                i,
                format!(
                    "the reference does not build: {}",
                    relocate(&e.to_string(), &k.source_place())
                ),
            ));
        }
    }
    Ok(broken)
}

/// `f` with this process's standard error pointed at /dev/null (where that can be done).
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
            return f();
        };
        // SAFETY: dup and dup2 on this process's own descriptors: descriptor 2 is saved, pointed
        // at /dev/null for `f`, then restored and the copy closed. Nothing else in the tuner
        // writes to standard error while the references build (before any search starts).
        unsafe {
            let saved = libc::dup(2);
            if saved < 0 || libc::dup2(null.as_raw_fd(), 2) < 0 {
                if saved >= 0 {
                    libc::close(saved);
                }
                return f();
            }
            let out = f();
            libc::dup2(saved, 2);
            libc::close(saved);
            out
        }
    }
    #[cfg(not(unix))]
    f()
}
