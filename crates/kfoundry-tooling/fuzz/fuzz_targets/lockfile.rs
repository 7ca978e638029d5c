//! `Lockfile::parse` and `Lockfile::to_toml` on arbitrary text.
//!
//! Checks: no panic; an accepted lockfile is written (`to_toml`) as text that parses back to
//! the same lockfile (schema version set, variants sorted by device and workload), and writing
//! that again gives the same text (deterministic, fixed point).
#![no_main]

use std::path::Path;

use kfoundry_tooling::lockfile::{Lockfile, SCHEMA_VERSION};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("Kfoundry.lock");
    let Ok(lock) = Lockfile::parse(text, path) else { return };

    let Ok(written) = lock.to_toml() else { panic!("an accepted lockfile cannot be written") };
    assert_eq!(Some(&written), lock.clone().to_toml().ok().as_ref(), "to_toml is not deterministic");
    let back = match Lockfile::parse(&written, path) {
        Ok(back) => back,
        Err(e) => panic!("accepted lockfile does not survive to_toml: {e}\n--- in ---\n{text}\n--- out ---\n{written}"),
    };
    let mut expected = lock.clone();
    expected.version = SCHEMA_VERSION;
    for entry in expected.kernels.values_mut() {
        entry.variants.sort_by(|a, b| (&a.device, &a.workload).cmp(&(&b.device, &b.workload)));
    }
    assert_eq!(back, expected, "\n--- in ---\n{text}\n--- out ---\n{written}");
    assert_eq!(back.to_toml().ok(), Some(written), "to_toml is not a fixed point");
});
