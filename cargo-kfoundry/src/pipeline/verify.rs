//! Stage 4a, verify: a finalist of the search is proven on fresh inputs and at other sizes
//! before it can ship. The search verified it at the workload's sizes only, on input sets it
//! shared with other candidates; here it runs again at the workload's sizes on fresh inputs,
//! then at smaller and larger size sets (all sizes scaled together, then each size alone),
//! on fresh inputs, against the reference. Sizes where the reference itself cannot be trusted
//! prove nothing and are skipped; one wrong or failing size rejects the finalist.

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};

use crate::evaluate::probe::{axis_probe_sizes, probe_sizes};
use crate::evaluate::{fmt_sizes, Judge};

/// Smaller and larger size sets each finalist is verified at (all sizes scaled together).
const SMALLER_PROBES: usize = 2;
const LARGER_PROBES: usize = 2;

/// Verifies a finalist on fresh inputs at the workload's sizes, then at smaller and larger
/// sizes (all scaled together, and each alone): the size sets it was proven at (the
/// workload's first), or why it failed.
pub fn prove(judge: &mut dyn Judge, spec: &KernelSpec, params: &Params, source: Option<&str>, workload: &Workload) -> Result<Vec<Sizes>, String> {
    let mut proven = Vec::new();
    let mut plan = vec![workload.sizes.clone()];
    plan.extend(probe_sizes(spec, params, &workload.sizes, judge.limits(), SMALLER_PROBES, LARGER_PROBES));
    plan.extend(axis_probe_sizes(spec, params, &workload.sizes, judge.limits()));
    for sizes in plan {
        match judge.verify(params, &sizes, source) {
            Ok(Ok(_)) => proven.push(sizes),
            Ok(Err((kind, why))) => return Err(format!("{kind:?} at sizes {}: {why}", fmt_sizes(&sizes))),
            // The workload's sizes are proven by the search when the reference cannot be
            // checked there again (it passed there when the tune began).
            Err(_) if proven.is_empty() && sizes == workload.sizes => proven.push(sizes),
            Err(_) => {}
        }
    }
    Ok(proven)
}
