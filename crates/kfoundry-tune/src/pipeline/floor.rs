//! Stage 4, the floor: an entry about to be recorded (a winner, a general variant) is proven
//! over its whole region but was measured faster than the reference at its workload only, and
//! a tile chosen for that workload can waste most of its work on a small problem. Here it is
//! timed against the reference at smaller sizes on the same bench: the workload's sizes divided
//! together by `STEP`, then by its square, its cube, ... (each at least the region's smallest
//! value, moved to where both run), down to the region's smallest sizes. Going down, the first point where the reference is faster by more than
//! `MARGIN` ends the walk, and the entry records the point above it as its *floor*: dispatch
//! runs it only at calls whose work (the product of their sizes) is at least the floor's, and
//! the reference (or another entry) below. An entry never slower records none.
//!
//! Only speed depends on it: the entry stays proven over its whole region, and a floor only
//! narrows where it runs. The walk's outcome depends on timings, as a winner does.

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes, Workload};
use kfoundry_search::Evaluation;

use crate::prove::sizes;
use kfoundry_bench::{median, Judge, Limits};

/// What the sizes are divided by, together, from one point of the walk to the next.
pub(crate) const STEP: i64 = 4;
/// Points walked at most (4^16: from 2^32 elements down to one).
const MAX_POINTS: u32 = 16;
/// How much slower than the reference an entry may be at a point and still run there.
pub(crate) const MARGIN: f64 = 1.1;
/// Alternating measurements of the entry and the reference at each point.
const REPEATS: usize = 3;

/// The points of the walk for `params`: the workload's sizes divided by `STEP`, its square,
/// ... (at least the region's smallest value), each moved to where `params` and the reference
/// run, until every size is at its smallest; a point equal to the one above is left out.
pub fn points(
    spec: &KernelSpec,
    params: &Params,
    workload: &Workload,
    limits: &Limits,
) -> Vec<Sizes> {
    let region = sizes::default_region(spec, params, &workload.sizes, limits);
    let mut out: Vec<Sizes> = Vec::new();
    for j in 1..=MAX_POINTS {
        let step = STEP.saturating_pow(j);
        let target: Sizes = workload
            .sizes
            .iter()
            .map(|(k, &v)| {
                let lo = region.get(k).map_or(1, |r| r.0);
                (k.clone(), ((v + step - 1) / step).max(lo))
            })
            .collect();
        let Some(point) = sizes::near(spec, params, &workload.sizes, &target, limits) else {
            continue;
        };
        if point != workload.sizes && out.last() != Some(&point) {
            out.push(point);
        }
        if target
            .iter()
            .all(|(k, &v)| v <= region.get(k).map_or(1, |r| r.0))
        {
            break;
        }
    }
    out
}

/// The floor of `params` (of `source` when given), tuned at `workload`: `None` when it is no
/// slower than the reference (by more than `MARGIN`) at any point of the walk; else the
/// last point above the first where it is (the workload's sizes when that is the first).
/// A point where either fails to run ends the walk there too.
pub fn floor(
    judge: &mut dyn Judge,
    spec: &KernelSpec,
    workload: &Workload,
    params: &Params,
    source: Option<&str>,
) -> Option<Sizes> {
    if *params == spec.reference && source.is_none() {
        return None;
    }
    let mut above = workload.sizes.clone();
    let limits = judge.limits().clone();
    for point in points(spec, params, workload, &limits) {
        let (mut entry, mut reference) = (Vec::new(), Vec::new());
        for _ in 0..REPEATS {
            match (
                judge.evaluate_at(&spec.reference, None, &point),
                judge.evaluate_at(params, source, &point),
            ) {
                (Evaluation::Ok { time: r, .. }, Evaluation::Ok { time: e, .. }) => {
                    reference.push(r);
                    entry.push(e);
                }
                _ => return Some(above),
            }
            // twice as fast as the margin asks: more repeats would not change the verdict
            if 2.0 * MARGIN * median(&mut entry.clone()) < median(&mut reference.clone()) {
                break;
            }
        }
        if median(&mut entry) > MARGIN * median(&mut reference) {
            return Some(above);
        }
        above = point;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_bench::case::Case;
    use kfoundry_bench::{ErrorStats, Limits, Verdict};
    use kfoundry_rt::model::select::below_floor as below;

    /// Times: the reference `n` ns, the entry `n / 4 + fixed` ns.
    struct Script {
        limits: Limits,
        fixed: f64,
        timed_at: Vec<i64>,
    }

    impl Judge for Script {
        fn evaluate(&mut self, _: &Params, _: Option<&str>) -> Evaluation {
            unreachable!("the floor times at other sizes")
        }
        fn evaluate_at(&mut self, params: &Params, _: Option<&str>, sizes: &Sizes) -> Evaluation {
            let n = sizes["n"] as f64;
            self.timed_at.push(sizes["n"]);
            let t = if params["VEC"] == 1 {
                n
            } else {
                n / 4.0 + self.fixed
            };
            Evaluation::ok(t * 1e-9, 0.0)
        }
        fn verify(
            &mut self,
            _: &Params,
            _: &Case,
            _: Option<&str>,
        ) -> Result<Verdict, kfoundry_bench::Untrusted> {
            Ok(Ok(ErrorStats::default()))
        }
        fn last_errors(&self) -> Option<ErrorStats> {
            None
        }
        fn limits(&self) -> &Limits {
            &self.limits
        }
        fn seal(&mut self) {}
    }

    fn spec() -> KernelSpec {
        crate::test_spec::spec(
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = VEC; }", params(VEC = [1, 4]), reference(VEC = 1),
            require(n % VEC == 0), global = n / VEC, buffers(y = n), check(y), workloads(w(n = 65536))"#,
        )
    }

    /// An entry with a fixed cost of 3000 ns beats the reference (n ns) down to n = 4096 and
    /// loses from n = 1024 on: its floor is n = 4096. Without the fixed cost it has none.
    #[test]
    fn the_walk_stops_above_the_first_point_where_the_reference_is_faster() {
        let spec = spec();
        let w = spec.workloads[0].clone();
        let fast: Params = [("VEC".to_string(), 4)].into();
        let mut judge = Script {
            limits: crate::test_spec::roomy_limits(),
            fixed: 3000.0,
            timed_at: vec![],
        };
        let f = floor(&mut judge, &spec, &w, &fast, None).unwrap();
        assert_eq!(f["n"], 4096);
        assert!(
            judge.timed_at.contains(&1024) && !judge.timed_at.contains(&64),
            "{:?}",
            judge.timed_at
        );
        let mut judge = Script {
            limits: crate::test_spec::roomy_limits(),
            fixed: 0.0,
            timed_at: vec![],
        };
        assert_eq!(floor(&mut judge, &spec, &w, &fast, None), None);
        // the reference itself has no floor, and is not timed for one
        assert_eq!(floor(&mut judge, &spec, &w, &spec.reference, None), None);
        // an entry slower only at the smallest sizes: the walk goes down to the region's bottom
        let mut judge = Script {
            limits: crate::test_spec::roomy_limits(),
            fixed: 10.0,
            timed_at: vec![],
        };
        let low = floor(&mut judge, &spec, &w, &fast, None).unwrap();
        assert_eq!(low["n"], 16, "{:?}", judge.timed_at);
        assert!(below(&f, &[("n".to_string(), 4095)].into()));
        assert!(!below(&f, &[("n".to_string(), 4096)].into()));
    }
}
