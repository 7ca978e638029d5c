//! The prover: a finalist of the search that was faster on re-measure is proven before it can
//! ship (`tune`'s stage 4b), and a lockfile entry is proven again over what it claims
//! (`check --verify`), by the same [`prove`]. Everything the proof plans lives here:
//! [`sizes`] (the size sets: scaled probes, the box's corners, residues), this module (the
//! [`Case`]s over those sizes, the value classes, the scalars) and [`search`] (the
//! counterexample search and the shrinking of a failing case). It drives a [`Judge`] (the
//! bench in its worker process), which runs one case at a time.
//!
//! The search verified a finalist at the workload's sizes only, on input sets it shared with
//! other candidates, with poisoned outputs and inputs from the declared distributions. The
//! proof ([`prove`]):
//!
//! 1. the workload's sizes again on fresh inputs, then smaller and larger size sets (all sizes
//!    scaled together, then each alone): these span the box of sizes dispatch may run the
//!    winner at;
//! 2. the corners of that box (extreme aspect ratios);
//! 3. sizes drawn across the box so that every size takes every residue modulo at least 16 of
//!    its step (`sizes::residue_sizes`), with the integer scalars that are not sizes over
//!    their declared range (every value of a small one);
//! 4. edge values: signed zeros, denormals and (unless `edges = finite`) infinities and NaN,
//!    integer inputs at the ends of their range, and large magnitudes (unless `edges = none`);
//!    values far from the declared ones (unless `edges = none`: shifted far above and below
//!    zero, scaled to either end of the format's range), judged with the reference's own
//!    sensitivity there (`kfoundry_bench::SENSITIVITY_FACTOR`); one repeated value; sorted
//!    values;
//! 5. in place, where the annotation declares `in_place(...)`.
//!
//! Outputs are pre-filled with NaN, zeros or random values, in turn. The draws are seeded by a
//! seed drawn afresh for each tune (or `--proof-seed`): nobody can tune a kernel to the sizes
//! it will be proven at. Cases where the reference itself cannot be trusted prove nothing and
//! are skipped; one wrong or failing case rejects the finalist.

use std::collections::BTreeMap;

use kfoundry_rt::model::select::integer_scalars;
use kfoundry_rt::model::signature::KernelArg;
use kfoundry_rt::model::spec::{ArgRole, Distribution, Edges, KernelSpec, Params, Sizes};
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

pub mod search;
pub mod sizes;

use self::search::{Outcome, Space, SEARCH_CASES, SHRINK_CASES};
use kfoundry_bench::case::{Case, Prefill, Values};
use kfoundry_bench::{Judge, Limits};

/// What a finalist was proven at: every size set of a case that passed (the workload's
/// first), and for each integer scalar that is not a size the smallest and largest value it
/// passed with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proven {
    pub sizes: Vec<Sizes>,
    pub scalars: BTreeMap<String, [i64; 2]>,
    /// Cases run, and those skipped because the reference could not be trusted there.
    pub cases: usize,
    pub skipped: usize,
}

/// Where a proof is made: around the workload's sizes (a tune), or over the box and scalar
/// ranges a lockfile entry claims (`check --verify`).
pub struct Scope<'a> {
    pub sizes: &'a Sizes,
    /// What to prove over; `None`: the box the scaled probes span and the declared scalar
    /// ranges.
    pub claimed: Option<Claimed>,
    pub seed: u64,
}

/// What a lockfile entry claims it was proven at.
pub struct Claimed {
    /// Each size's smallest and largest value.
    pub bounds: BTreeMap<String, (i64, i64)>,
    /// Each integer scalar's smallest and largest value.
    pub scalars: BTreeMap<String, [i64; 2]>,
}

/// Why a proof did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum NotProven {
    /// The variant failed a case: it is rejected. `why` names the case and the reason;
    /// `counterexample` is the smallest failing case found (none when the failure came
    /// before the proof's box was known).
    Failed {
        why: String,
        counterexample: Option<Box<Case>>,
    },
    /// The reference read or wrote outside its buffers on inputs drawn as the annotation
    /// declares: the annotation is wrong there, and no variant can be proven against it.
    Annotation(String),
}

impl std::fmt::Display for NotProven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotProven::Failed { why, .. } | NotProven::Annotation(why) => f.write_str(why),
        }
    }
}

impl From<NotProven> for String {
    fn from(n: NotProven) -> String {
        n.to_string()
    }
}

/// Proves `params` (of `source` when given) of `spec` in the planned cases, then in the
/// cases of a counterexample search ([`search::search`]): what it was proven at, or
/// why not (a failing case shrunk to a small reproducer first).
pub fn prove(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    params: &Params,
    source: Option<&str>,
    scope: &Scope,
) -> Result<Proven, NotProven> {
    let mut proven = Proven::default();
    let mut rng = ChaCha8Rng::seed_from_u64(scope.seed);
    let limits = judge.limits().clone();
    // The cases that passed, each with its error: where the search starts.
    let mut passed: Vec<(Case, f64)> = Vec::new();
    // The box: the one claimed, or the tune's default region; the rest is drawn in it.
    let bounds = match &scope.claimed {
        None => sizes::default_region(spec, params, scope.sizes, &limits),
        Some(claimed) => claimed.bounds.clone(),
    };
    let first = vec![Case::at(scope.sizes.clone())];
    for mut case in first {
        case.seed = rng.gen();
        match run(judge, params, source, &case, scope, &mut proven)? {
            Outcome::Passed(error) => passed.push((case, error)),
            Outcome::Failed(why) => {
                return Err(NotProven::Failed {
                    why,
                    counterexample: Some(Box::new(case)),
                })
            }
            Outcome::Skipped => {}
        }
    }
    let space = Space {
        spec,
        params,
        tuned: scope.sizes,
        bounds: &bounds,
        limits: &limits,
        values: value_classes(spec),
        scalars: integer_scalars(spec)
            .filter_map(|(name, _)| Some((name.to_string(), scalar_range(spec, scope, name)?)))
            .collect(),
        in_place: !spec.in_place.is_empty(),
        reach: if scope.claimed.is_some() {
            sizes::Reach::Claimed
        } else {
            sizes::Reach::Tune
        },
    };
    let drawn = drawn_cases(
        spec,
        params,
        scope,
        &bounds,
        &limits,
        &proven.sizes,
        &mut rng,
    );
    for case in drawn {
        match run(judge, params, source, &case, scope, &mut proven)? {
            Outcome::Passed(error) => passed.push((case, error)),
            Outcome::Failed(why) => {
                return Err(shrunk(judge, params, source, scope, &space, case, why, ""))
            }
            Outcome::Skipped => {}
        }
    }
    // The search: each case it runs and passes is proven like a planned one.
    let found = {
        let mut try_case = |c: &Case| {
            run(judge, params, source, c, scope, &mut proven).unwrap_or(Outcome::Skipped)
        };
        search::search(&space, passed, SEARCH_CASES, &mut rng, &mut try_case)
    };
    if let Some((case, why)) = found {
        return Err(shrunk(
            judge,
            params,
            source,
            scope,
            &space,
            case,
            why,
            "found by the proof's counterexample search",
        ));
    }
    Ok(proven)
}

/// A failing case once it is shrunk ([`search::shrink`]): the smallest failing case,
/// and its message followed by where it came from.
#[allow(clippy::too_many_arguments)]
fn shrunk(
    judge: &mut dyn Judge,
    params: &Params,
    source: Option<&str>,
    scope: &Scope,
    space: &Space,
    case: Case,
    why: String,
    found: &str,
) -> NotProven {
    let mut again = |c: &Case| {
        run(judge, params, source, c, scope, &mut Proven::default()).unwrap_or(Outcome::Skipped)
    };
    let original = case.clone();
    let (small, why) = search::shrink(space, case, why, SHRINK_CASES, &mut again);
    let shrunk_from = (small != original).then(|| format!("shrunk from {original}"));
    let notes: Vec<String> = [(!found.is_empty()).then(|| found.to_string()), shrunk_from]
        .into_iter()
        .flatten()
        .collect();
    NotProven::Failed {
        why: if notes.is_empty() {
            why
        } else {
            format!("{why} ({})", notes.join("; "))
        },
        counterexample: Some(Box::new(small)),
    }
}

/// Runs one case and records what it proved; `Err` only where the annotation is wrong.
fn run(
    judge: &mut dyn Judge,
    params: &Params,
    source: Option<&str>,
    case: &Case,
    scope: &Scope,
    proven: &mut Proven,
) -> Result<Outcome, NotProven> {
    proven.cases += 1;
    let started = std::time::Instant::now();
    let verdict = judge.verify(params, case, source);
    trace(case, started.elapsed().as_secs_f64(), &verdict);
    match verdict {
        Ok(Ok(errors)) => {
            note(proven, case);
            Ok(Outcome::Passed(errors.rel_norm))
        }
        Ok(Err(rejection)) => Ok(Outcome::Failed(format!(
            "{:?} at {case}: {}",
            rejection.kind(),
            rejection.why()
        ))),
        Err(untrusted) if untrusted.annotation_fault => {
            Err(NotProven::Annotation(untrusted.message))
        }
        // The workload's sizes are proven by the search when the reference cannot be checked
        // there again (it passed there when the tune began).
        Err(_)
            if proven.sizes.is_empty() && case.sizes == *scope.sizes && scope.claimed.is_none() =>
        {
            note(proven, case);
            Ok(Outcome::Skipped)
        }
        Err(_) => {
            proven.skipped += 1;
            Ok(Outcome::Skipped)
        }
    }
}

/// The environment variable naming a file to which every proof case is appended as one line:
/// its wall seconds, how it ended (`passed`, `failed`, `untrusted`) and the case. For finding
/// where a slow proof spends its time (BENCHMARKS.md, issue 54's cases on an H100).
pub const TRACE_ENV: &str = "KFOUNDRY_PROOF_TRACE";

/// Appends `case` to the file [`TRACE_ENV`] names, if any (a file that cannot be written is
/// skipped: a trace never fails a proof).
fn trace(
    case: &Case,
    seconds: f64,
    verdict: &Result<kfoundry_bench::Verdict, kfoundry_bench::Untrusted>,
) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(TRACE_ENV) else {
        return;
    };
    let outcome = match verdict {
        Ok(Ok(_)) => "passed",
        Ok(Err(_)) => "failed",
        Err(_) => "untrusted",
    };
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{seconds:.4}\t{outcome}\t{case}");
    }
}

fn note(proven: &mut Proven, case: &Case) {
    if !proven.sizes.contains(&case.sizes) {
        proven.sizes.push(case.sizes.clone());
    }
    for (name, &v) in &case.scalars {
        let r = proven.scalars.entry(name.clone()).or_insert([v, v]);
        r[0] = r[0].min(v);
        r[1] = r[1].max(v);
    }
}

/// Stages 2 to 5, in `bounds`.
fn drawn_cases(
    spec: &KernelSpec,
    params: &Params,
    scope: &Scope,
    bounds: &BTreeMap<String, (i64, i64)>,
    limits: &Limits,
    known: &[Sizes],
    rng: &mut ChaCha8Rng,
) -> Vec<Case> {
    let sizes = scope.sizes;
    let one = |sizes: Sizes, k: usize, rng: &mut ChaCha8Rng| Case {
        sizes,
        scalars: BTreeMap::new(),
        prefill: Prefill::Poison.nth(k),
        values: Values::Declared,
        in_place: false,
        sets: 1,
        check_reference: false,
        seed: rng.gen(),
    };
    let mut cases = Vec::new();
    let reach = if scope.claimed.is_some() {
        sizes::Reach::Claimed
    } else {
        sizes::Reach::Tune
    };
    for (k, corner) in sizes::corner_sizes(spec, params, sizes, bounds, limits, known, reach, rng)
        .into_iter()
        .enumerate()
    {
        // The region's extremes are where a reference reads outside its buffers on the
        // declared inputs (indices drawn over a fixed range, a table made smaller): checked
        // there as at the workload, so that such a read is the annotation's error, not a case
        // that candidate and reference pass on the same garbage.
        cases.push(Case {
            check_reference: true,
            ..one(corner, k, rng)
        });
    }
    let m = sizes::residue_modulus(spec);
    let residues = sizes::residue_sizes(spec, params, sizes, bounds, m, limits, reach, rng);
    let scalar_values = scalar_values(spec, scope, m, rng);
    let in_place = !spec.in_place.is_empty();
    // Every residue set, and every scalar value (at the workload's sizes once the residue
    // sets run out).
    let count = scalar_values
        .values()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(residues.len());
    for i in 0..count {
        let set = residues.get(i).cloned().unwrap_or_else(|| sizes.clone());
        let mut case = one(set, i, rng);
        case.scalars = scalar_values
            .iter()
            .map(|(name, values)| (name.clone(), values[i % values.len()]))
            .collect();
        case.in_place = in_place && i % 2 == 1;
        cases.push(case);
    }
    let classes = value_classes(spec);
    // Edge values at the workload's sizes: integer inputs at the ends of their range (an
    // index 0), floats special, and large magnitudes.
    let edges = classes
        .iter()
        .filter(|v| matches!(v, Values::Specials { .. } | Values::Large));
    for (k, values) in edges.enumerate() {
        cases.push(Case {
            values: *values,
            ..one(sizes.clone(), k, rng)
        });
    }
    // Values far from the declared ones, and classes of the declared values themselves: at
    // the smallest residue sets, in turn (their inputs are drawn on the host, and what they
    // catch is in the values, not the sizes, which the other cases cover).
    let far: Vec<Values> = classes.into_iter().filter(|v| v.host_only()).collect();
    let mut smallest: Vec<&Sizes> = residues.iter().collect();
    smallest.sort_by_key(|s| s.values().map(|&v| v as f64).product::<f64>() as u128);
    smallest.truncate(far.len().div_ceil(2).max(1));
    for (k, values) in far.into_iter().enumerate() {
        let at = smallest
            .get(k % smallest.len().max(1))
            .map_or(sizes, |s| *s);
        cases.push(Case {
            values,
            ..one(at.clone(), k, rng)
        });
    }
    if in_place {
        cases.push(Case {
            in_place: true,
            sets: 3,
            ..one(sizes.clone(), 0, rng)
        });
    }
    cases
}

/// The classes of input values a proof of `spec` tries, declared values first: edge values
/// (unless `edges = none`; integer inputs at the ends of their range, floats special, and large
/// magnitudes), values far from the declared ones (unless `edges = none`, which says the
/// kernel is for the declared range only: shifted far above and below zero, at either end of
/// the format's range), one repeated value and sorted values.
pub(crate) fn value_classes(spec: &KernelSpec) -> Vec<Values> {
    let input = |float: bool| {
        spec.args_with_roles().any(|(a, role)| {
            role == ArgRole::CallerBuffer
                && matches!(a, KernelArg::Buffer { elem, read_only, name, .. }
                    if (!float || elem.is_float()) && (*read_only || spec.inputs.contains_key(name)))
        })
    };
    let (inputs, floats, edges) = (input(false), input(true), spec.edges != Edges::None);
    let mut out = vec![Values::Declared];
    if inputs && edges {
        out.push(Values::Specials {
            nonfinite: spec.edges == Edges::All,
        });
    }
    if floats && edges {
        out.extend([
            Values::Large,
            Values::Offset { negative: false },
            Values::Offset { negative: true },
            Values::Magnitude { huge: true },
            Values::Magnitude { huge: false },
        ]);
    }
    if inputs {
        out.extend([Values::Constant, Values::Sorted]);
    }
    out
}

/// The values next to each end of an integer scalar's range that its proof always takes.
const SCALAR_ENDS: i64 = 4;

/// For each integer scalar that is not a size: the values to prove with, covering its range
/// (every value of a small range, else every residue modulo `m` and the [`SCALAR_ENDS`]
/// values at each end), in a seeded order.
fn scalar_values(
    spec: &KernelSpec,
    scope: &Scope,
    m: i64,
    rng: &mut ChaCha8Rng,
) -> BTreeMap<String, Vec<i64>> {
    let mut out = BTreeMap::new();
    for (name, _) in integer_scalars(spec) {
        let Some((lo, hi)) = scalar_range(spec, scope, name) else {
            continue;
        };
        let span = hi.saturating_sub(lo);
        let mut values: Vec<i64> = if span < m + 2 * SCALAR_ENDS {
            (lo..=hi).collect()
        } else {
            let mut v: Vec<i64> = (0..m)
                .map(|r| lo + (r + m * rng.gen_range(0..=(span - m) / m)).min(span))
                .collect();
            // Both ends and their neighbours: an unrolled loop whose last tile is wrong only
            // for the few largest values.
            v.extend((0..SCALAR_ENDS).flat_map(|k| [lo + k, hi - k]));
            v.sort_unstable();
            v.dedup();
            v
        };
        values.shuffle(rng);
        out.insert(name.to_string(), values);
    }
    out
}

/// The range an integer scalar that is not a size is proven over: what the lockfile entry
/// claims, else its declared distribution's (a normal one's at three deviations); `None` for
/// distributions of integer buffers only.
fn scalar_range(spec: &KernelSpec, scope: &Scope, name: &str) -> Option<(i64, i64)> {
    let (lo, hi) = match (
        scope.claimed.as_ref().and_then(|c| c.scalars.get(name)),
        spec.distribution(name),
    ) {
        (Some([lo, hi]), _) => (*lo, *hi),
        (None, Distribution::Uniform { lo, hi }) => (lo.round() as i64, hi.round() as i64),
        (None, Distribution::Normal { mean, std }) => (
            (mean - 3.0 * std).round() as i64,
            (mean + 3.0 * std).round() as i64,
        ),
        (None, Distribution::Constant { value }) => (value.round() as i64, value.round() as i64),
        (
            None,
            Distribution::UniformInt { .. }
            | Distribution::Permutation
            | Distribution::Monotone { .. },
        ) => return None,
    };
    Some((lo.min(hi), lo.max(hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ARCHITECTURE.md's "a proof case" errand names every source file that names a class of
    /// input values (`Values::` and a variant), and every file it names exists: a new class
    /// touches the files the errand lists, and a file that starts to handle one is added to it.
    #[test]
    fn the_proof_case_errand_names_every_file_that_names_a_value_class() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let architecture =
            std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
        let start = architecture
            .find("- **A proof case**")
            .expect("the errand \"A proof case\"");
        let errand = &architecture[start..];
        let errand = &errand[..errand[2..].find("\n- ").map_or(errand.len(), |e| e + 2)];
        let errand = errand.split("\n\n").next().unwrap_or(errand);
        let mut named = Vec::new();
        for part in errand.split('`').skip(1).step_by(2) {
            if part.ends_with(".rs") {
                let path = if part.starts_with("kfoundry-") {
                    format!("crates/{part}")
                } else {
                    part.to_string()
                };
                assert!(
                    root.join(&path).is_file(),
                    "the errand names {path}, which is gone"
                );
                named.push(path);
            }
        }
        let mut files = Vec::new();
        crate::pipeline::discover::walk(&root, &mut files);
        let mut missing = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let names_a_class = text
                .match_indices("Values::")
                .any(|(i, m)| text[i + m.len()..].starts_with(|c: char| c.is_ascii_uppercase()));
            let relative = path
                .strip_prefix(&root)
                .expect("under the root")
                .to_string_lossy()
                .to_string();
            if names_a_class && !named.contains(&relative) {
                missing.push(relative);
            }
        }
        assert!(
            missing.is_empty(),
            "ARCHITECTURE.md's \"A proof case\" does not name {missing:?}"
        );
    }

    /// Every class of input values, each once: a new [`Values`] variant fails to compile here
    /// until it is listed, and then fails the test below until the proof tries it.
    fn every_class() -> Vec<Values> {
        let all = [
            Values::Declared,
            Values::Specials { nonfinite: true },
            Values::Large,
            Values::Offset { negative: false },
            Values::Offset { negative: true },
            Values::Magnitude { huge: true },
            Values::Magnitude { huge: false },
            Values::Constant,
            Values::Sorted,
        ];
        for v in all {
            match v {
                Values::Declared
                | Values::Specials { .. }
                | Values::Large
                | Values::Offset { .. }
                | Values::Magnitude { .. }
                | Values::Constant
                | Values::Sorted => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn a_proof_tries_every_class_of_input_values() {
        let src = "__kernel void k(const int n, __global const float* x, __global const int* ids, __global float* y) { y[get_global_id(0)] = x[ids[get_global_id(0)]] * W; }";
        let spec = crate::test_spec::spec(&format!(
            "code = {src:?}, params(W = [1, 2]), reference(W = 1), global = n, buffers(x = n, ids = n, y = n), inputs(ids = uniform_int(0, n)), check(y), workloads(w(n = 64))"
        ));
        let tried = value_classes(&spec);
        for v in every_class() {
            assert!(tried.contains(&v), "{v:?} is never tried");
        }
        // `edges = none`: the declared range only, and its classes.
        let none = crate::test_spec::spec(&format!(
            "code = {src:?}, params(W = [1, 2]), reference(W = 1), global = n, buffers(x = n, ids = n, y = n), inputs(ids = uniform_int(0, n)), check(y), edges = none, workloads(w(n = 64))"
        ));
        assert_eq!(
            value_classes(&none),
            vec![Values::Declared, Values::Constant, Values::Sorted]
        );
    }
}
