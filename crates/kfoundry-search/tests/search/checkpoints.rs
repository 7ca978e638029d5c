//! A checkpoint is a file anyone can edit: whatever is read back is refused by
//! `SearchState::validated`, or resumes without a panic.
//!
//! ```text
//! PROPTEST_CASES=20000 cargo test -p kfoundry-search --release --test checkpoints
//! ```

use kfoundry_search::{Config, Evaluation, FailureKind, Param, SearchState, Settings, Space};
use proptest::prelude::*;
use serde_json::{json, Value};

fn space() -> Space {
    let p = |n: &str, v: &[i64]| Param {
        name: n.into(),
        values: v.to_vec(),
    };
    Space::new(vec![
        p("a", &[1, 2, 4, 8]),
        p("b", &[0, 1]),
        p("c", &[3, 5, 7]),
    ])
    .unwrap()
}

fn evaluate(c: &Config) -> Evaluation {
    if c[0] == 8 && c[1] == 1 {
        return Evaluation::failed(FailureKind::Wrong, "no", 0.1);
    }
    Evaluation::ok(1.0 / (c[0] + c[2]) as f64 + 0.01 * c[1] as f64, 0.5)
}

fn state(seed: u64, steps: usize) -> SearchState {
    // batches of 1 to 3: checkpoints in the middle of a batch too
    let settings = Settings {
        seed,
        max_evals: Some(100),
        initial_samples: 3,
        batch: 1 + (seed % 3) as usize,
        ..Settings::default()
    };
    let mut s = SearchState::new(space(), settings, Some(&vec![2, 0, 5])).unwrap();
    for _ in 0..steps {
        s.step(&mut evaluate, &|_| true);
    }
    s
}

fn palette() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(7),
        json!(1000),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e300),
        json!(-0.5),
        json!([]),
        json!([0]),
        json!([9, 9, 9]),
        json!({}),
        json!(null),
        json!(true),
        json!(""),
    ]
}

/// How many nodes `v` has, itself included.
fn node_count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(node_count).sum(),
        Value::Object(o) => o.values().map(node_count).sum(),
        _ => 0,
    }
}

/// Replaces the `k`-th node (pre-order, modulo the node count) of `v` by `with`.
fn replace_node(v: &mut Value, k: usize, with: &Value) {
    fn walk(v: &mut Value, k: &mut usize, with: &Value) -> bool {
        if *k == 0 {
            *v = with.clone();
            return true;
        }
        *k -= 1;
        match v {
            Value::Array(a) => a.iter_mut().any(|c| walk(c, k, with)),
            Value::Object(o) => o.values_mut().any(|c| walk(c, k, with)),
            _ => false,
        }
    }
    let mut k = k % node_count(v);
    walk(v, &mut k, with);
}

/// Whether the checkpoint `v` is refused (unreadable or not validated), or resumes for `steps`
/// steps, without a panic either way.
fn refused_or_resumed(v: Value, steps: usize) -> bool {
    std::panic::catch_unwind(move || {
        let Ok(s) = serde_json::from_value::<SearchState>(v) else {
            return;
        };
        let Ok(mut s) = s.validated() else { return };
        for _ in 0..steps {
            s.step(&mut evaluate, &|_| true);
        }
    })
    .is_ok()
}

/// `cases` unless `PROPTEST_CASES` says otherwise (the defaults keep this file near 10 s in a
/// debug build on two cores).
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(120))]

    /// Nodes of a genuine checkpoint replaced at random: refused, or resumed for 20 steps
    /// without a panic.
    #[test]
    fn edited_checkpoints_are_refused_or_resume_safely(
        seed in 0u64..20,
        steps in 0usize..30,
        edits in prop::collection::vec((any::<usize>(), any::<usize>()), 1..4),
    ) {
        let mut v = serde_json::to_value(state(seed, steps)).unwrap();
        let palette = palette();
        for (k, p) in edits {
            replace_node(&mut v, k, &palette[p % palette.len()]);
        }
        let text = v.to_string();
        prop_assert!(refused_or_resumed(v, 20), "panicked on\n{text}");
    }
}

proptest! {
    #![proptest_config(config(24))]

    /// A genuine checkpoint always validates, and resuming it equals not stopping.
    #[test]
    fn genuine_checkpoints_resume_exactly(seed in 0u64..50, steps in 0usize..40) {
        let mut a = state(seed, steps);
        let mut b: SearchState = serde_json::from_str::<SearchState>(&serde_json::to_string(&a).unwrap()).unwrap().validated().unwrap();
        for _ in 0..20 {
            a.step(&mut evaluate, &|_| true);
            b.step(&mut evaluate, &|_| true);
        }
        prop_assert!(a.history() == b.history());
    }
}

/// Every single-node edit of a short checkpoint to an extreme number: refused, or
/// resumed without a panic. Deterministic, so an overflow on one setting (e.g. `stagnation`
/// at `u64::MAX`) fails every run rather than one run in many.
#[test]
fn every_single_edit_is_refused_or_resumes_safely() {
    let genuine = serde_json::to_value(state(1, 5)).unwrap();
    // The extremes of the palette: what overflows or underflows arithmetic.
    let palette = [
        json!(0),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e300),
    ];
    let nodes = node_count(&genuine);
    for k in 0..nodes {
        for with in &palette {
            let mut v = genuine.clone();
            replace_node(&mut v, k, with);
            let text = v.to_string();
            assert!(
                refused_or_resumed(v, 5),
                "panicked on node {k} set to {with}:\n{text}"
            );
        }
    }
}
