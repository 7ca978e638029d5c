//! `Expr::parse`, `Display` and `Expr::eval` on arbitrary text.
//!
//! Checks: no panic (parse, print, eval, variables); an accepted text prints as text that
//! parses back to an equal `Expr`, and printing is then a fixed point; evaluation is
//! panic-free whatever the bindings (extremes included).
//!
//! Known bugs (reproduced by the ignored `bug_expr_*` tests in `tests/properties.rs`) are
//! tolerated unless `KFOUNDRY_FUZZ_STRICT=1`:
//! - `-(5)` prints as `-5`, which parses to another tree (same value);
//! - `(a == b) == c` prints as `a == b == c`, which does not parse (chained comparisons);
//! - printing adds parentheses, so an expression at the nesting limit prints as text that is
//!   "nested too deeply".
//! The stack overflow on long left-associative chains (`1+1+...+1`) is not tolerated: run with
//! `-max_len=512` to explore past it.
#![no_main]

use kfoundry_rt::model::expr::{Env, EvalError, Expr};
use libfuzzer_sys::fuzz_target;

const VALUES: [i64; 12] = [0, 1, -1, 2, 3, 63, 64, 4096, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1];

fn strict() -> bool {
    std::env::var_os("KFOUNDRY_FUZZ_STRICT").is_some_and(|v| v != "0")
}

fn kind(r: &Result<i64, EvalError>) -> Result<i64, std::mem::Discriminant<EvalError>> {
    r.as_ref().map(|v| *v).map_err(std::mem::discriminant)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(e) = Expr::parse(text) else { return };

    // Bindings: every variable gets a value picked by the bytes of the input.
    let vars = e.variables();
    let envs: Vec<Env> = (0..3)
        .map(|round| {
            vars.iter()
                .enumerate()
                .map(|(i, v)| {
                    let b = data.get((i * 3 + round) % data.len().max(1)).copied().unwrap_or(0) as usize;
                    (v.clone(), VALUES[(b + i + round * 5) % VALUES.len()])
                })
                .collect()
        })
        .collect();
    for env in &envs {
        let _ = e.eval(env);
    }
    let _ = e.eval(&Env::new());

    let printed = e.to_string();
    match Expr::parse(&printed) {
        Ok(again) if again == e => {
            assert_eq!(again.to_string(), printed, "printing is not a fixed point for {text:?}");
        }
        Ok(again) => {
            // Known bug: a negated literal prints as a negative literal. Same value required.
            let negated_literal = printed.as_bytes().windows(2).any(|w| w[0] == b'-' && w[1].is_ascii_digit());
            let same = envs.iter().all(|env| kind(&e.eval(env)) == kind(&again.eval(env)));
            assert!(
                !strict() && negated_literal && same,
                "{text:?} parsed as {e:?}, printed as {printed:?}, which parses as {again:?}"
            );
        }
        Err(err) => {
            let known = err.message.contains("comparisons cannot be chained") || err.message.contains("nested too deeply");
            assert!(!strict() && known, "{text:?} parsed, printed as {printed:?}, which does not parse: {err}");
        }
    }
});
