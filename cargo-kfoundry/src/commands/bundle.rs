//! `cargo kfoundry bundle`: the annotated kernels in one file that `tune --bundle` reads on a
//! machine without a Rust toolchain, with the language model's configuration when the workspace
//! sets one.

use anyhow::{Context as _, Result};

use crate::cli::BundleArgs;
use kfoundry_tune::pipeline::discover::{discover, Bundle};

pub fn run(args: &BundleArgs) -> Result<()> {
    let ws = discover(&args.ws.options())?;
    let text = serde_json::to_string_pretty(&Bundle::new(ws.kernels, &ws.metadata))?;
    std::fs::write(&args.output, text)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    if !args.ws.quiet {
        eprintln!("wrote {}", args.output.display());
    }
    Ok(())
}
