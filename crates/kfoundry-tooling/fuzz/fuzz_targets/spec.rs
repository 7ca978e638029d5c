//! A bundle's kernel specification (JSON) as `cargo kfoundry tune --bundle` reads it.
//!
//! Checks: no panic in deserializing, validating, or in what a tune then does with an accepted
//! specification before any OpenCL call (caller arguments, build options, geometry and buffer
//! lengths at its workloads and at twice their sizes, a lockfile variant of its reference).
#![no_main]

use kfoundry_rt::model::variant::{check_variant, Variant};
use kfoundry_tooling::embed::launcher_params;
use kfoundry_rt::model::signature::find_kernel;
use kfoundry_rt::model::spec::{KernelSpec, Sizes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = serde_json::from_slice::<KernelSpec>(data) else { return };
    if !spec.validate().is_empty() || find_kernel(&spec.source, Some(&spec.signature.name)).ok().as_ref() != Some(&spec.signature) {
        return;
    }
    let _ = spec.caller_args().count();
    let _ = launcher_params(&spec);
    let _ = spec.build_options(&spec.reference, &[]);
    let _ = kfoundry_tooling::fingerprint(&spec);
    for w in &spec.workloads {
        let doubled: Sizes = w.sizes.iter().map(|(k, v)| (k.clone(), v.saturating_mul(2))).collect();
        for sizes in [&w.sizes, &doubled] {
            let _ = spec.geometry(&spec.reference, sizes, None);
            for name in spec.buffers.keys() {
                let _ = spec.buffer_len(name, &spec.reference, sizes);
            }
        }
        let variant = Variant {
            device: "10de|gpu|1|3.0".into(),
            workload: w.name.clone(),
            sizes: w.sizes.clone(),
            params: spec.reference.clone(),
            time_ns: 1,
            reference_time_ns: 1,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: vec![w.sizes.clone(), doubled],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            device_info: None,
        };
        let _ = check_variant(&spec, &variant, &[]);
    }
});
