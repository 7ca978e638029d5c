//! Adversarial probing: before a winner is written to the lockfile it must also be correct at
//! sizes other than the one it was tuned at. A kernel that is right only at the tuned size
//! (a hard-coded length, a tile that silently assumes one shape) is caught here.
//!
//! The probe sizes are smaller than the tuned ones (so probing is cheap) and as "uneven" as the
//! annotation's constraints allow: each size is scaled by a fraction and rounded down to the
//! smallest power-of-two multiple for which both the candidate and the reference can launch.

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};

/// Fractions of the tuned sizes tried, in order.
const FACTORS: [(i64, i64); 4] = [(5, 8), (3, 8), (7, 8), (1, 2)];
/// Rounding steps tried, smallest first: 1, 2, 4, ..., 2^20.
const MAX_STEP_LOG2: u32 = 20;

/// Up to `max` size sets, different from `sizes` and from each other, at which both `params`
/// and the reference satisfy the constraints and have a valid launch geometry.
pub fn probe_sizes(spec: &KernelSpec, params: &Params, sizes: &Sizes, max: usize) -> Vec<Sizes> {
    let mut out: Vec<Sizes> = Vec::new();
    if sizes.is_empty() {
        return out;
    }
    for (num, den) in FACTORS {
        if out.len() >= max {
            break;
        }
        for step_log2 in 0..=MAX_STEP_LOG2 {
            let step = 1i64 << step_log2;
            let probe: Sizes = sizes.iter().map(|(k, &v)| (k.clone(), scaled(v, num, den, step))).collect();
            if probe != *sizes && !out.contains(&probe) && launchable(spec, params, &probe) && launchable(spec, &spec.reference, &probe) {
                out.push(probe);
                break;
            }
        }
    }
    out
}

/// `v · num / den` rounded down to a multiple of `step`, at least `step` (and `v` itself when
/// `v` is already at most `step`).
fn scaled(v: i64, num: i64, den: i64, step: i64) -> i64 {
    if v <= step {
        return v;
    }
    let s = v.saturating_mul(num) / den;
    (s / step * step).max(step)
}

fn launchable(spec: &KernelSpec, params: &Params, sizes: &Sizes) -> bool {
    spec.geometry(params, sizes).is_ok()
        && spec.signature.args.iter().all(|a| match a {
            kfoundry_rt::model::signature::KernelArg::Buffer { name, space, .. }
                if *space != kfoundry_rt::model::signature::AddressSpace::Local =>
            {
                spec.buffer_len(name, params, sizes).is_ok_and(|n| n > 0)
            }
            _ => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_rt::model::annotation::{parse, Context};

    fn spec(extra: &str) -> KernelSpec {
        let src = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)]; }";
        let args: proc_macro2::TokenStream = format!(
            "code = {src:?}, params(WG = [16, 64], V = [1, 4]), reference(WG = 16, V = 1), {extra} global = n / V, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"
        )
        .parse()
        .expect("tokens");
        let item: syn::Item = syn::parse_str("pub struct K;").expect("item");
        let dir = std::env::temp_dir();
        parse(args, &item, &Context { package: "t", manifest_dir: &dir }).map(|a| a.spec).map_err(|e| e.to_string()).expect("spec")
    }

    fn n(s: &Sizes) -> i64 {
        s["n"]
    }

    #[test]
    fn probes_are_smaller_uneven_and_satisfy_the_constraints() {
        let spec = spec("require(n % (WG * V) == 0),");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        let params: Params = [("WG".to_string(), 64), ("V".to_string(), 4)].into();
        let probes = probe_sizes(&spec, &params, &sizes, 2);
        assert_eq!(probes.len(), 2);
        for p in &probes {
            assert!(n(p) < 4096 && n(p) % 256 == 0, "{p:?}");
        }
        assert_ne!(probes[0], probes[1]);
        // The smallest multiple that works is taken: 5/8 of 4096 = 2560 (a multiple of 256).
        assert_eq!(n(&probes[0]), 2560);
    }

    #[test]
    fn unconstrained_sizes_get_odd_probes() {
        let spec = spec("");
        let sizes: Sizes = [("n".to_string(), 4096)].into();
        let params: Params = [("WG".to_string(), 16), ("V".to_string(), 1)].into();
        // No constraint, but the launch geometry still needs n / V to be a multiple of WG
        // (OpenCL 1.2 uniform work-groups): geometry() enforces what the device would.
        let probes = probe_sizes(&spec, &params, &sizes, 3);
        assert!(!probes.is_empty());
        assert!(probes.iter().all(|p| n(p) != 4096));
    }

    #[test]
    fn no_sizes_no_probes() {
        let spec = spec("");
        assert!(probe_sizes(&spec, &spec.reference, &Sizes::new(), 2).is_empty());
        assert_eq!(scaled(3, 1, 2, 4), 3);
        assert_eq!(scaled(100, 5, 8, 4), 60);
    }
}
