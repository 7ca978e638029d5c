//! Stage 0: every selected kernel's reference built on the device before any search. A
//! reference that does not compile is reported within seconds of the start, at the kernel
//! source's own file and line (not the OpenCL compiler's temporary file), instead of when its
//! turn comes after the kernels before it have been tuned.

use std::path::Path;

use kfoundry_rt::opencl::session::Session;

use super::discover::Kernel;

/// The kernels (by index in `kernels`) whose reference does not build on device `index` of
/// `list_devices()`, and each one's error. `Err` only when the device cannot be opened (the
/// tune's workers will say why).
pub fn broken_references(kernels: &[Kernel], index: usize) -> anyhow::Result<Vec<(usize, String)>> {
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
            let place = match &k.source_path {
                Some(path) => path.display().to_string(),
                None => format!("{} (inline `code`)", k.location()),
            };
            broken.push((
                i,
                format!(
                    "the reference does not build: {}",
                    relocate(&e.to_string(), &place)
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

/// `log` with the compilers' names for the source being built (PoCL's temporary
/// `.../tempfile_XXXX.cl`, NVIDIA's `<kernel>`, `<source>`) replaced by `place`, so that
/// `place:line:column` points into the user's file.
pub fn relocate(log: &str, place: &str) -> String {
    let mut out = String::with_capacity(log.len());
    for (n, line) in log.lines().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut rest = line;
        while let Some((start, end)) = next_name(rest) {
            out.push_str(&rest[..start]);
            out.push_str(place);
            rest = &rest[end..];
        }
        out.push_str(rest);
    }
    out
}

/// The next compiler name for the source in `s` that is followed by `:<line>`, as a range.
fn next_name(s: &str) -> Option<(usize, usize)> {
    let fixed = ["<kernel>", "<source>"]
        .into_iter()
        .flat_map(|f| s.match_indices(f).map(|(at, f)| (at, at + f.len())));
    // PoCL's temporary file: a path whose file name starts with `tempfile`, up to its `.cl`.
    let temporary = s
        .match_indices(".cl:")
        .map(|(at, _)| at + 3)
        .filter_map(|end| {
            let start = s[..end].rfind(char::is_whitespace).map_or(0, |w| w + 1);
            let file = Path::new(&s[start..end]).file_name()?;
            file.to_string_lossy()
                .starts_with("tempfile")
                .then_some((start, end))
        });
    let followed_by_line = |&(_, end): &(usize, usize)| {
        s[end..]
            .strip_prefix(':')
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    };
    fixed
        .chain(temporary)
        .filter(followed_by_line)
        .min_by_key(|&(start, _)| start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_names_point_into_the_users_file() {
        let pocl = "error: /root/.cache/pocl/kcache/tempfile_amxT0I.cl:4:37: use of undeclared identifier 'x'";
        assert_eq!(
            relocate(pocl, "kernels/bad.cl"),
            "error: kernels/bad.cl:4:37: use of undeclared identifier 'x'"
        );
        assert_eq!(
            relocate("<kernel>:3:9: error: expected ';'", "k.cl"),
            "k.cl:3:9: error: expected ';'"
        );
        let untouched = "note: see other.cl:3 and <kernel> in general\nline two";
        assert_eq!(relocate(untouched, "k.cl"), untouched);
        assert_eq!(
            relocate("a <source>:1:2 and tempfile_x.cl:5:6", "k.cl"),
            "a k.cl:1:2 and k.cl:5:6"
        );
    }
}
