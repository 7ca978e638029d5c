//! `cargo kfoundry merge [--base O] A.lock B.lock ... [-o OUT]`, and git's merge driver for
//! `Kfoundry.lock` (`--git %O %A %B`): the rules are those of [`kfoundry_tooling::merge`]. The
//! current fingerprints (to tell a stale entry from a fresh one) come from the workspace, or a
//! bundle; a variant's generated source is copied beside the output.
//!
//! A slot the inputs disagree on is never settled by the times they claim: it is a conflict.
//! `merge -o` then writes nothing and fails, naming each; the git driver writes the merge with
//! ours for those slots and exits non-zero, so that git marks the file conflicted for a person
//! to resolve (re-tune the slot, or keep the side `cargo kfoundry check --verify` holds).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_tooling::generated;
use kfoundry_tooling::lockfile::Lockfile;
use kfoundry_tooling::merge::merge;

use crate::cli::MergeArgs;
use kfoundry_tune::error::usage;
use kfoundry_tune::pipeline::discover::sources;

pub fn run(args: &MergeArgs) -> Result<()> {
    let (inputs, output, base): (&[PathBuf], Option<&Path>, Option<&Path>) = if args.git {
        // %O %A %B: the common ancestor settles what one side alone changed, and the result
        // goes over %A, where git reads it.
        match args.inputs.as_slice() {
            [ancestor, ours, _theirs] => (
                &args.inputs[1..],
                Some(ours.as_path()),
                Some(ancestor.as_path()),
            ),
            _ => return Err(usage("`merge --git` takes git's three files: %O %A %B")),
        }
    } else {
        (
            &args.inputs[..],
            args.output.as_deref(),
            args.base.as_deref(),
        )
    };
    // git passes an empty %O when the file has no common ancestor (it was added on both sides).
    let base = match base {
        Some(path) => Lockfile::read(path).or_else(|e| {
            if args.git && std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
                Ok(None)
            } else {
                Err(e)
            }
        })?,
        None => None,
    };
    let mut locks = Vec::new();
    for path in inputs {
        let lock = Lockfile::read(path)?
            .ok_or_else(|| usage(format!("{}: no such lockfile", path.display())))?;
        locks.push((path.display().to_string(), lock));
    }
    // The current fingerprints, when the sources can be read.
    let current: Option<BTreeMap<String, String>> = match sources(
        &args.ws.options(),
        args.bundle.as_deref(),
        None,
    ) {
        Ok(src) => Some(
            src.kernels
                .iter()
                .filter_map(|k| {
                    Some((
                        k.spec.id.clone(),
                        kfoundry_tooling::fingerprint(&k.spec).ok()?,
                    ))
                })
                .collect(),
        ),
        Err(e) => {
            if !args.ws.quiet {
                eprintln!("note: the sources cannot be read ({e:#}); fingerprints that disagree cannot be resolved");
            }
            None
        }
    };
    let named: Vec<(&str, &Lockfile)> = locks.iter().map(|(n, l)| (n.as_str(), l)).collect();
    let result = merge(&named, base.as_ref(), &|id| {
        current.as_ref().map(|c| c.get(id).cloned()).ok_or(())
    })?;
    if !args.ws.quiet {
        for n in &result.notes {
            eprintln!("note: {}", kfoundry_tune::text::printable(n));
        }
    }
    let conflicts: Vec<String> = result
        .conflicts
        .iter()
        .map(|c| kfoundry_tune::text::printable(&c.to_string()).into_owned())
        .collect();
    if !conflicts.is_empty() && !args.git {
        anyhow::bail!(
            "{} slot(s) conflict, and a claimed time settles none of them (nothing was written):\n  {}\nre-tune them, or keep the side that `cargo kfoundry check --verify` holds on the device; with the lockfile the inputs started from, `--base FILE` takes whatever only one side changed",
            conflicts.len(),
            conflicts.join("\n  ")
        );
    }
    let merged = result.lock;
    match output {
        Some(out) => {
            copy_generated_sources(&merged, &locks, inputs, out)?;
            merged.write_atomic(out)?;
            if !args.ws.quiet && !args.git {
                let variants: usize = merged.kernels.values().map(|k| k.variants.len()).sum();
                eprintln!(
                    "wrote {} ({} kernel(s), {variants} variant(s), {} device(s))",
                    out.display(),
                    merged.kernels.len(),
                    merged.devices.len()
                );
            }
        }
        None => {
            if merged
                .kernels
                .values()
                .flat_map(|k| &k.variants)
                .any(|v| v.source.is_some())
            {
                return Err(usage("some variants have generated sources, which go beside the lockfile: write it with -o FILE"));
            }
            print!("{}", merged.to_toml()?);
        }
    }
    if !conflicts.is_empty() {
        // git marks the file conflicted; ours is what it holds for these slots.
        anyhow::bail!(
            "Kfoundry.lock: {} slot(s) changed differently on both sides (ours kept in the file, which git marks conflicted):\n  {}\nre-tune them, or keep the side that `cargo kfoundry check --verify` holds on the device",
            conflicts.len(),
            conflicts.join("\n  ")
        );
    }
    Ok(())
}

/// Copies each kept variant's generated source from beside the input that has it to beside
/// `out` (checked against its hash on the way).
fn copy_generated_sources(
    merged: &Lockfile,
    locks: &[(String, Lockfile)],
    inputs: &[PathBuf],
    out: &Path,
) -> Result<()> {
    for (id, entry) in &merged.kernels {
        for hash in entry.variants.iter().filter_map(|v| v.source.as_deref()) {
            let target = generated::source_path(out, id, hash);
            if target.exists() {
                continue;
            }
            let found = locks
                .iter()
                .zip(inputs)
                .find_map(|(_, path)| generated::read_verified(path, id, hash).ok());
            let (_, text) = found.with_context(|| {
                format!("the generated source {hash} of `{id}` is beside none of the inputs")
            })?;
            generated::write(out, id, &text)
                .with_context(|| format!("writing {}", target.display()))?;
        }
    }
    Ok(())
}
