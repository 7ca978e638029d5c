//! Warm starts: where a fresh search begins besides the reference. The lockfile already knows
//! winners of this kernel at other workloads and from earlier versions of its source, and of
//! other kernels of the same template (the same parameter names: the importer's kernels of
//! one group, the stages of a split problem); the best of them are evaluated right after the
//! reference ([`SearchState::warm_start`](kfoundry_search::SearchState::warm_start)), so a
//! re-tune after an edit, a new workload or a model full of kernels of one template does not
//! start from nothing. They are only starting points: each is evaluated and verified like any
//! candidate.
//!
//! Only winners on **this device** are used. Replayed on brute-forced spaces of the same
//! kernels on an H200 and on PoCL's CPU device (`crates/kfoundry-search/examples/warm_start.rs`,
//! BENCHMARKS.md), the other device's winners sometimes found the optimum at once and sometimes
//! held the search in the wrong basin (a convolution tuned on the CPU from the H200's winners
//! scored 0.48 against 0.82 cold): a search that starts in a good-looking region keeps
//! exploiting it, so a wrong warm start costs more than its own evaluations.

use std::collections::BTreeSet;

use kfoundry_rt::model::spec::KernelSpec;
use kfoundry_search::Config;
use kfoundry_tooling::lockfile::Lockfile;

use crate::evaluate::config_of;

/// At most this many warm starts a search (the engine takes up to
/// [`kfoundry_search::MAX_WARM_STARTS`]).
pub const WARM_STARTS: usize = 4;

/// One warm start and where it came from (for the run's note).
#[derive(Debug, Clone, PartialEq)]
pub struct WarmStart {
    pub config: Config,
    /// `kernel @ workload`, and `(earlier source)` for a stale entry.
    pub from: String,
}

/// The lockfile's parameter sets usable as warm starts for `spec` at `workload` on the device
/// with key `device`, most relevant first: this kernel at this workload (an earlier version
/// of its source included), at other workloads, then kernels of the same template at this
/// workload and at others; all on this device.
/// Only parameter-level variants count (a generated source's parameters are its own), only
/// sets that name exactly the kernel's parameters with values of its space, each set once, at
/// most [`WARM_STARTS`].
pub fn from_lockfile(
    lock: &Lockfile,
    spec: &KernelSpec,
    fingerprint: &str,
    workload: &str,
    device: &str,
) -> Vec<WarmStart> {
    let names: BTreeSet<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
    let mut ranked: Vec<(u8, WarmStart)> = Vec::new();
    for (id, entry) in &lock.kernels {
        let this = *id == spec.id;
        for v in &entry.variants {
            let same_names = v.params.len() == names.len()
                && v.params.keys().all(|k| names.contains(k.as_str()));
            let in_space = spec
                .params
                .iter()
                .all(|p| v.params.get(&p.name).is_some_and(|x| p.values.contains(x)));
            if v.source.is_some() || !same_names || !in_space || v.device != device {
                continue;
            }
            let rank = match (this, v.workload == workload) {
                (true, true) => 0,
                (true, false) => 1,
                (false, true) => 2,
                (false, false) => 3,
            };
            let stale = if this && entry.fingerprint != fingerprint {
                " (earlier source)"
            } else {
                ""
            };
            ranked.push((
                rank,
                WarmStart {
                    config: config_of(spec, &v.params),
                    from: format!("{id} @ {}{stale}", v.workload),
                },
            ));
        }
    }
    // stable: within a rank, the lockfile's order (kernels by id, variants as recorded)
    ranked.sort_by_key(|(rank, _)| *rank);
    let reference = config_of(spec, &spec.reference);
    let mut out: Vec<WarmStart> = Vec::new();
    for (_, w) in ranked {
        if w.config != reference && !out.iter().any(|o| o.config == w.config) {
            out.push(w);
            if out.len() == WARM_STARTS {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    fn spec() -> KernelSpec {
        crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = A + B; }", params(A = [0, 1, 2, 3], B = [0, 1]), reference(A = 0, B = 0),
            global = n, buffers(y = n), check(y), workloads(w(n = 4096))"#,
        )
    }

    fn variant(device: &str, workload: &str, params: &str) -> String {
        format!(
            "[[variants]]\ndevice = \"{device}\"\nworkload = \"{workload}\"\ntime_ns = 1\nreference_time_ns = 2\nevaluations = 1\nfailures = 0\nsizes = {{ n = 4096 }}\nparams = {{ {params} }}\n"
        )
    }

    /// This kernel on this workload first (an earlier source included), then other workloads,
    /// then kernels with the same parameters; never another device's, another template's, a
    /// value outside the space or the reference; each set once.
    #[test]
    fn ranks_this_device_s_winners_and_leaves_out_what_does_not_fit() {
        let me = spec();
        let entry = |id: &str, fp: &str, variants: &[String]| {
            format!(
                "[kernels.\"{id}\"]\nfingerprint = \"{fp}\"\n{}",
                variants
                    .iter()
                    .map(|v| v.replace("[[variants]]", &format!("[[kernels.\"{id}\".variants]]")))
                    .collect::<String>()
            )
        };
        let device = |key: &str| {
            format!(
                "[devices.\"{key}\"]\nname = \"{key}\"\nvendor = \"v\"\nplatform = \"p\"\nkind = \"gpu\"\ncompute_units = 1\nmax_work_group_size = 256\nlocal_mem_bytes = 1\nglobal_mem_bytes = 1\nmax_clock_mhz = 1\n"
            )
        };
        let text = format!(
            "version = 3\n{}{}{}{}{}",
            device("gpu"),
            device("cpu"),
            entry(
                "t::K",
                "old",
                &[
                    variant("gpu", "other", "A = 2, B = 1"),
                    variant("cpu", "w", "A = 3, B = 1"),
                    variant("gpu", "w", "A = 1, B = 1"),
                    variant("gpu", "w2", "A = 0, B = 0"),
                ]
            ),
            entry(
                "t::Same",
                "x",
                &[
                    variant("gpu", "w", "A = 3, B = 0"),
                    variant("gpu", "w", "A = 1, B = 1")
                ]
            ),
            entry(
                "t::Other",
                "x",
                &[
                    variant("gpu", "w", "A = 2, C = 0"),
                    variant("gpu", "w", "A = 7, B = 0")
                ]
            ),
        );
        let lock = Lockfile::parse(&text, std::path::Path::new("Kfoundry.lock")).expect("lockfile");
        let got = from_lockfile(&lock, &me, "new", "w", "gpu");
        let configs: Vec<&Config> = got.iter().map(|w| &w.config).collect();
        assert_eq!(configs, [&vec![1, 1], &vec![2, 1], &vec![3, 0]], "{got:?}");
        assert_eq!(got[0].from, "t::K @ w (earlier source)");
        assert_eq!(got[2].from, "t::Same @ w");
        assert!(from_lockfile(&lock, &me, "new", "w", "another device").is_empty());
    }
}
