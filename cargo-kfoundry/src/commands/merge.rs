//! `cargo kfoundry merge A.lock B.lock ... [-o OUT]`, and git's merge driver for
//! `Kfoundry.lock` (`--git %O %A %B`): the rules are those of [`kfoundry_tooling::merge`]. The
//! current fingerprints (to tell a stale entry from a fresh one) come from the workspace, or a
//! bundle; a variant's generated source is copied beside the output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;
use kfoundry_tooling::merge::merge;

use crate::cli::MergeArgs;
use crate::error::usage;
use crate::pipeline::discover::sources;

pub fn run(args: &MergeArgs) -> Result<()> {
    let (inputs, output): (&[PathBuf], Option<&Path>) = if args.git {
        // %O %A %B: the common ancestor is not needed (every rule compares the two sides), and
        // the result goes over %A, where git reads it.
        match args.inputs.as_slice() {
            [_ancestor, ours, _theirs] => (&args.inputs[1..], Some(ours.as_path())),
            _ => return Err(usage("`merge --git` takes git's three files: %O %A %B")),
        }
    } else {
        (&args.inputs[..], args.output.as_deref())
    };
    let mut locks = Vec::new();
    for path in inputs {
        let lock = Lockfile::read(path)?.ok_or_else(|| usage(format!("{}: no such lockfile", path.display())))?;
        locks.push((path.display().to_string(), lock));
    }
    // The current fingerprints, when the sources can be read.
    let current: Option<BTreeMap<String, String>> = match sources(&args.ws, args.bundle.as_deref(), None) {
        Ok(src) => Some(src.kernels.iter().filter_map(|k| Some((k.spec.id.clone(), kfoundry_tooling::fingerprint(&k.spec).ok()?))).collect()),
        Err(e) => {
            if !args.ws.quiet {
                eprintln!("note: the sources cannot be read ({e:#}); fingerprints that disagree cannot be resolved");
            }
            None
        }
    };
    let named: Vec<(&str, &Lockfile)> = locks.iter().map(|(n, l)| (n.as_str(), l)).collect();
    let (merged, notes) = merge(&named, &|id| current.as_ref().map(|c| c.get(id).cloned()).ok_or(()))?;
    if !args.ws.quiet {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    match output {
        Some(out) => {
            copy_generated_sources(&merged, &locks, inputs, out)?;
            merged.write_atomic(out)?;
            if !args.ws.quiet && !args.git {
                let variants: usize = merged.kernels.values().map(|k| k.variants.len()).sum();
                eprintln!("wrote {} ({} kernel(s), {variants} variant(s), {} device(s))", out.display(), merged.kernels.len(), merged.devices.len());
            }
        }
        None => {
            if merged.kernels.values().flat_map(|k| &k.variants).any(|v| v.source.is_some()) {
                return Err(usage("some variants have generated sources, which go beside the lockfile: write it with -o FILE"));
            }
            print!("{}", merged.to_toml()?);
        }
    }
    Ok(())
}

/// Copies each kept variant's generated source from beside the input that has it to beside
/// `out` (checked against its hash on the way).
fn copy_generated_sources(merged: &Lockfile, locks: &[(String, Lockfile)], inputs: &[PathBuf], out: &Path) -> Result<()> {
    for (id, entry) in &merged.kernels {
        for hash in entry.variants.iter().filter_map(|v| v.source.as_deref()) {
            let target = generated::source_path(out, id, hash);
            if target.exists() {
                continue;
            }
            let found = locks.iter().zip(inputs).find_map(|(_, path)| generated::read_verified(path, id, hash).ok());
            let (_, text) = found.with_context(|| format!("the generated source {hash} of `{id}` is beside none of the inputs"))?;
            generated::write(out, id, &text).with_context(|| format!("writing {}", target.display()))?;
        }
    }
    Ok(())
}
