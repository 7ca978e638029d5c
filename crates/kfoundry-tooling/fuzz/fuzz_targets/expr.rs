//! `Expr::parse`, `Display` and `Expr::eval` on arbitrary text.
//!
//! Checks: no panic (parse, print, eval, variables); an accepted text prints as text that
//! parses back to an equal `Expr`, and printing is then a fixed point; evaluation is
//! panic-free whatever the bindings (extremes included).
//!
//! (The round-trip and stack-depth bugs this target and the properties found are fixed; no
//! tolerance remains.)
#![no_main]

use kfoundry_rt::model::expr::{Env, Expr};
use libfuzzer_sys::fuzz_target;

const VALUES: [i64; 12] = [0, 1, -1, 2, 3, 63, 64, 4096, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1];

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
        Ok(again) => panic!("{text:?} parsed as {e:?}, printed as {printed:?}, which parses as {again:?}"),
        Err(err) => panic!("{text:?} parsed, printed as {printed:?}, which does not parse: {err}"),
    }
});
