//! How many evaluations the engine needs to find the optimum of the tests' synthetic landscape
//! (`tests/search/landscape.rs`), over 40 seeds, for the default settings, gradient steering
//! and a single archive cell: the figures `reaches_the_optimum_within_150_evaluations` quotes.
//!
//! `cargo run --release -p kfoundry-search --example optimum_stats`

#![allow(clippy::unwrap_used)] // a development tool: the landscape has an optimum

#[path = "../tests/search/landscape.rs"]
mod landscape;

use kfoundry_search::{search, Settings};
use landscape::{evaluate, optimum, space, valid};

fn main() {
    let (best, _) = optimum();
    for variant in 0..3 {
        let mut v = Vec::new();
        for seed in 0..40 {
            let base = Settings {
                seed,
                max_evals: Some(1000),
                ..Settings::default()
            };
            let settings = match variant {
                1 => Settings {
                    gradient_steering: true,
                    ..base
                },
                2 => Settings {
                    single_cell: true,
                    ..base
                },
                _ => base,
            };
            let r = search(space(), settings, None, &mut evaluate, &valid).unwrap();
            let at = r
                .history
                .iter()
                .position(|h| h.config == best)
                .map_or(9999, |i| i + 1);
            v.push(at);
        }
        v.sort();
        println!(
            "variant {variant}: median {} p90 {} max {} {:?}",
            v[20], v[36], v[39], v
        );
    }
}
