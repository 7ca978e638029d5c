//! `SearchState` read back from a checkpoint (JSON), as `cargo kfoundry tune --resume` does.
//!
//! Checks: no panic in deserializing or validating; a state that validates resumes for 25
//! steps without a panic; a genuine state's serialization validates (checked on the seeds).
#![no_main]

use kfoundry_search::{Config, Evaluation, FailureKind, SearchState};
use libfuzzer_sys::fuzz_target;

fn evaluate(c: &Config) -> Evaluation {
    let sum: i64 = c.iter().map(|v| v.rem_euclid(97)).sum();
    if sum % 7 == 0 {
        return Evaluation::failed(FailureKind::Wrong, "no", 0.1);
    }
    Evaluation::ok(1.0 / (1 + sum) as f64, 0.5)
}

fuzz_target!(|data: &[u8]| {
    let Ok(state) = serde_json::from_slice::<SearchState>(data) else { return };
    let Ok(mut state) = state.validated() else { return };
    for _ in 0..25 {
        state.step(&mut evaluate, &|_| true);
    }
});
