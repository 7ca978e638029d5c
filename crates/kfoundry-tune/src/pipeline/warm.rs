//! Warm starts: where a fresh search begins besides the reference. The lockfile already knows
//! winners of this kernel at other workloads and from earlier versions of its source, and of
//! other kernels of the same template (the same parameter names: the importer's kernels of
//! one group, the stages of a split problem); the best of them are evaluated right after the
//! reference ([`SearchState::warm_start`](kfoundry_search::SearchState::warm_start)), so a
//! re-tune after an edit, a new workload or a model full of kernels of one template does not
//! start from nothing. The tuning database ([`crate::tuning_db`]) adds what tunes in other
//! projects and earlier runs found on this machine: the fastest few configurations of each
//! kernel, source and shape, the nearest shapes first. They are only starting points: each is evaluated and verified like any
//! candidate.
//!
//! Only winners on **this device** are used. Replayed on brute-forced spaces of the same
//! kernels on an H200 and on PoCL's CPU device (`crates/kfoundry-search/examples/warm_start.rs`,
//! BENCHMARKS.md), the other device's winners sometimes found the optimum at once and sometimes
//! held the search in the wrong basin (a convolution tuned on the CPU from the H200's winners
//! scored 0.48 against 0.82 cold): a search that starts in a good-looking region keeps
//! exploiting it, so a wrong warm start costs more than its own evaluations.

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_search::Config;
use kfoundry_tooling::lockfile::Lockfile;

use crate::tuning_db::{shape_distance, Entry};
use kfoundry_bench::config_of;

/// At most this many warm starts a search (the engine takes up to
/// [`kfoundry_search::MAX_WARM_STARTS`]).
pub(crate) const WARM_STARTS: usize = 4;

/// One warm start and where it came from (for the run's note).
#[derive(Debug, Clone, PartialEq)]
pub struct WarmStart {
    pub config: Config,
    /// `kernel @ workload`, and `(earlier source)` for a stale entry.
    pub from: String,
}

/// The warm starts for `spec` at `workload` on the device with key `device`, most relevant
/// first, from the lockfile (`lock`) and the tuning database's `entries` for this device and
/// template ([`TuningDb::entries`](crate::tuning_db::TuningDb::entries)):
/// 1. the lockfile's winner of this kernel at this workload (an earlier version of its source
///    included);
/// 2. the database's fastest configurations of this kernel at these very sizes (another
///    project's tune, an earlier source);
/// 3. the lockfile's winners of this kernel at other workloads;
/// 4. the database's fastest of this kernel at other sizes, nearest shape first;
/// 5. the lockfile's winners of kernels of the same template (the same parameter names) at
///    this workload, then at others;
/// 6. the database's fastest of kernels of the same template, nearest shape first.
///
/// All on this device. Only parameter-level variants count (a generated source's parameters
/// are its own), only sets that name the kernel's parameters with values of its space (the
/// kernel's own lockfile entries may lack one added since, which takes the reference's value;
/// the database keeps its entries under the parameters' names, so an entry from before the
/// parameter is not found there), never the reference, each set once, at most
/// [`WARM_STARTS`].
pub(crate) fn warm_starts(
    lock: Option<&Lockfile>,
    entries: &[Entry],
    spec: &KernelSpec,
    fingerprint: &str,
    workload: &Workload,
    device: &str,
) -> Vec<WarmStart> {
    let mut ranked = lock.map_or_else(Vec::new, |lock| {
        from_lockfile(lock, spec, fingerprint, &workload.name, device)
    });
    ranked.extend(from_db(entries, spec, &workload.sizes, device));
    // stable: within a rank and distance, the lockfile's order (kernels by id, variants as
    // recorded) or the database's (newest entry first, fastest configuration first)
    ranked.sort_by(|a, b| a.0 .0.cmp(&b.0 .0).then(a.0 .1.total_cmp(&b.0 .1)));
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

/// How relevant a warm start is: its rank (see [`warm_starts`]), then its shape's distance
/// from this workload's ([`shape_distance`]).
type Rank = (u8, f64);

/// `params` as a configuration of the kernel: every parameter it names is one of the kernel's
/// with a value of its space; one it lacks takes the reference's value where `own` (the
/// kernel's own earlier winner, from before that parameter was added), else the set must name
/// them all (another kernel of the same template). `None` when it does not fit.
fn adapted(spec: &KernelSpec, params: &Params, own: bool) -> Option<Config> {
    let known = params.iter().all(|(name, v)| {
        spec.params
            .iter()
            .any(|p| p.name == *name && p.values.contains(v))
    });
    if !known || (!own && params.len() != spec.params.len()) {
        return None;
    }
    let mut full = spec.reference.clone();
    full.extend(params.iter().map(|(k, v)| (k.clone(), *v)));
    Some(config_of(spec, &full))
}

/// The lockfile's usable parameter sets, ranked 0 (this kernel at this workload), 2 (at
/// others), 4 and 5 (kernels of the same template at this workload, at others).
fn from_lockfile(
    lock: &Lockfile,
    spec: &KernelSpec,
    fingerprint: &str,
    workload: &str,
    device: &str,
) -> Vec<(Rank, WarmStart)> {
    let mut ranked = Vec::new();
    for (id, entry) in &lock.kernels {
        let this = *id == spec.id;
        for v in &entry.variants {
            if v.source.is_some() || v.device != device {
                continue;
            }
            let Some(config) = adapted(spec, &v.params, this) else {
                continue;
            };
            let rank = match (this, v.workload == workload) {
                (true, true) => 0,
                (true, false) => 2,
                (false, true) => 4,
                (false, false) => 5,
            };
            let stale = if this && entry.fingerprint != fingerprint {
                " (earlier source)"
            } else {
                ""
            };
            ranked.push((
                (rank, 0.0),
                WarmStart {
                    config,
                    from: format!("{id} @ {}{stale}", v.workload),
                },
            ));
        }
    }
    ranked
}

/// The tuning database's usable configurations, ranked 1 (this kernel at these sizes), 3
/// (this kernel at other sizes) and 6 (kernels of the same template), by shape distance.
fn from_db(
    entries: &[Entry],
    spec: &KernelSpec,
    sizes: &Sizes,
    device: &str,
) -> Vec<(Rank, WarmStart)> {
    let mut ranked = Vec::new();
    for e in entries.iter().filter(|e| e.device == device) {
        let distance = shape_distance(sizes, &e.sizes);
        let rank = match (e.kernel == spec.id, distance == 0.0) {
            (true, true) => 1,
            (true, false) => 3,
            (false, _) => 6,
        };
        // The database files its entries under the parameters' names: a set of this kernel's
        // from before a parameter was added is not among them, so each names them all.
        for config in e
            .configs
            .iter()
            .filter_map(|k| adapted(spec, &k.params, false))
        {
            ranked.push((
                (rank, distance),
                WarmStart {
                    config,
                    from: format!(
                        "{} @ {} (tuning database)",
                        e.kernel,
                        kfoundry_bench::fmt_sizes(&e.sizes)
                    ),
                },
            ));
        }
    }
    ranked
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;
    use crate::tuning_db::sample_entry;

    /// Two devices' keys.
    const GPU: &str = "10de|gpu|1|3.0";
    const CPU: &str = "8086|cpu|1|3.0";

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

    /// A lockfile with winners of this kernel (of an earlier source) on two devices and
    /// three workloads, of a kernel of the same template, and of another template.
    fn lockfile() -> Lockfile {
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
            device(GPU),
            device(CPU),
            entry(
                "t::K",
                "old",
                &[
                    variant(GPU, "other", "A = 2, B = 1"),
                    variant(CPU, "w", "A = 3, B = 1"),
                    variant(GPU, "w", "A = 1, B = 1"),
                    variant(GPU, "w2", "A = 0, B = 0"),
                    // from before the space had B: B takes the reference's value
                    variant(GPU, "w3", "A = 2"),
                ]
            ),
            entry(
                "t::Same",
                "x",
                &[
                    variant(GPU, "w", "A = 3, B = 0"),
                    variant(GPU, "w4", "A = 1, B = 1")
                ]
            ),
            entry(
                "t::Other",
                "x",
                &[
                    variant(GPU, "w", "A = 2, C = 0"),
                    variant(GPU, "w4", "A = 7, B = 0")
                ]
            ),
        );
        Lockfile::parse(&text, std::path::Path::new("Kfoundry.lock")).expect("lockfile")
    }

    /// This kernel on this workload first (an earlier source included), then other workloads
    /// (a set from before a parameter existed completed with the reference's value), then
    /// kernels with the same parameters; never another device's, another template's, a value
    /// outside the space or the reference; each set once.
    #[test]
    fn ranks_this_device_s_winners_and_leaves_out_what_does_not_fit() {
        let me = spec();
        let lock = lockfile();
        let w = &me.workloads[0];
        let got = warm_starts(Some(&lock), &[], &me, "new", w, GPU);
        let configs: Vec<&Config> = got.iter().map(|w| &w.config).collect();
        assert_eq!(
            configs,
            [&vec![1, 1], &vec![2, 1], &vec![2, 0], &vec![3, 0]],
            "{got:?}"
        );
        assert_eq!(got[0].from, "t::K @ w (earlier source)");
        assert_eq!(got[2].from, "t::K @ w3 (earlier source)");
        assert_eq!(got[3].from, "t::Same @ w");
        assert!(warm_starts(Some(&lock), &[], &me, "new", w, "another device").is_empty());
    }

    /// The database's entries of this kernel at these sizes come right after the lockfile's
    /// winner here, those at other sizes after the lockfile's other workloads (nearest shape
    /// first), other kernels' last; never another device's, a value outside the space or the
    /// reference.
    #[test]
    fn the_tuning_database_ranks_by_kernel_and_shape() {
        let me = spec();
        let w = &me.workloads[0];
        let entries = [
            sample_entry("t::Same", GPU, 4096, &[[0, 1]]),
            sample_entry("t::K", GPU, 65536, &[[1, 0]]),
            sample_entry("t::K", GPU, 4096, &[[2, 0], [9, 0], [0, 0]]),
            sample_entry("t::K", CPU, 4096, &[[3, 1]]),
            sample_entry("t::K", GPU, 1024, &[[3, 1]]),
        ];
        let configs = |got: &[WarmStart]| got.iter().map(|w| w.config.clone()).collect::<Vec<_>>();
        let alone = warm_starts(None, &entries, &me, "new", w, GPU);
        assert_eq!(
            configs(&alone),
            [vec![2, 0], vec![3, 1], vec![1, 0], vec![0, 1]],
            "{alone:?}"
        );
        assert!(
            alone[0].from.starts_with("t::K @ ") && alone[0].from.ends_with("(tuning database)")
        );
        let lock = lockfile();
        let merged = warm_starts(Some(&lock), &entries, &me, "new", w, GPU);
        assert_eq!(
            configs(&merged),
            [vec![1, 1], vec![2, 0], vec![2, 1], vec![3, 1]],
            "{merged:?}"
        );
    }
}
