//! `signature::kernels` and `find_kernel` on arbitrary text (OpenCL C sources).
//!
//! Checks: no panic; errors name a line of the text (or 0); every kernel `kernels` finds is
//! found again by name by `find_kernel`, with the same signature; `find_kernel(None)` agrees
//! with the number of kernels.
#![no_main]

use kfoundry_rt::model::signature::{find_kernel, kernels};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.matches('\n').count() + 1;
    match kernels(text) {
        Ok(found) => {
            // The first and last kernels are found again by name (two kernels may share a
            // name; find_kernel then returns the first of them).
            for k in found.first().into_iter().chain(found.last()) {
                let again = find_kernel(text, Some(&k.name)).expect("a kernel found by kernels() is found by name");
                let first = found.iter().find(|f| f.name == k.name).unwrap();
                assert_eq!(&again, first);
            }
            let only = find_kernel(text, None);
            assert_eq!(only.is_ok(), found.len() == 1, "{only:?} for {} kernels", found.len());
        }
        Err(e) => {
            assert!(e.line <= lines, "error line {} beyond the {lines} lines of the text: {e}", e.line);
            assert!(find_kernel(text, None).is_err());
        }
    }
});
