//! `cargo kfoundry bundle`: the annotated kernels in one file that `tune --bundle` reads on a
//! machine without a Rust toolchain, with the language model's configuration when the workspace
//! sets one.

use anyhow::{Context as _, Result};

use crate::cli::BundleArgs;
use kfoundry_tune::pipeline::discover::{discover, Bundle};

pub fn run(args: &BundleArgs) -> Result<()> {
    let ws = discover(&args.ws.options())?;
    // Paths relative to the workspace: a bundle goes to other machines, and names no
    // directory of this one.
    let relative = |p: &std::path::Path| p.strip_prefix(&ws.root).unwrap_or(p).to_path_buf();
    let kernels = ws
        .kernels
        .into_iter()
        .map(|mut k| {
            k.file = relative(&k.file);
            k.source_path = k.source_path.as_deref().map(relative);
            k
        })
        .collect();
    let text = serde_json::to_string_pretty(&Bundle::new(kernels, &ws.metadata))?;
    std::fs::write(&args.output, text)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    if !args.ws.quiet {
        eprintln!("wrote {}", args.output.display());
    }
    Ok(())
}
