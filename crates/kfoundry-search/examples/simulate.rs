//! `cargo run --release --example simulate -- <cache.json[.gz]> [repeats] [seed]`: what
//! `cargo kfoundry simulate` prints.
use std::path::PathBuf;

use kfoundry_search::{simulate, SimulateOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: simulate <cache.json[.gz]> [repeats] [seed]");
        std::process::exit(2);
    };
    let mut opts = SimulateOptions::default();
    if let Some(r) = args.next().and_then(|s| s.parse().ok()) {
        opts.repeats = r;
    }
    if let Some(s) = args.next().and_then(|s| s.parse().ok()) {
        opts.settings.seed = s;
    }
    match simulate(&path, &opts) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
