//! `cargo kfoundry check --verify`: what ships is what was verified. A lockfile is text anyone
//! can edit (parameters that failed in the tune, a `proven` range widened, an entry moved to a
//! made-up device described like this one so that it wins as "nearest"), and the build cannot
//! tell. So every entry that dispatch could run on a device present (its own key, the same
//! device under another driver, its family, the nearest known device: the steps of
//! [`steps_and_nearest`]) is proven there again as the tune proves a finalist
//! ([`kfoundry_tune::prove::prove`]), over the box of sizes and the scalar values the entry
//! claims, with a seed drawn afresh; one that does not hold fails the command (exit 6).

use std::path::Path;

use anyhow::Result;
use kfoundry_rt::model::select::steps_and_nearest;
use kfoundry_rt::model::variant::Variant;
use kfoundry_tooling::fingerprint;
use kfoundry_tooling::lockfile::Lockfile;

use crate::cli::{CheckArgs, MessageFormat};
use kfoundry_bench::supervisor::{Supervised, TimeLimits};
use kfoundry_bench::Measurement;
use kfoundry_tune::device::Selected;
use kfoundry_tune::error::Exit;
use kfoundry_tune::messages::Message;
use kfoundry_tune::pipeline::discover::Kernel;
use kfoundry_tune::prove::{prove, Claimed, Scope};
use kfoundry_tune::text::{fmt_params, printable};

/// Re-proves every entry of `lock` that could run on the selected devices.
pub fn run(args: &CheckArgs, kernels: &[Kernel], lock: &Lockfile, lockfile: &Path) -> Result<Exit> {
    let devices = selected(&args.device)?;
    let json = args.ws.message_format == MessageFormat::Json;
    let (mut held, mut failed) = (0usize, Vec::new());
    for device in &devices {
        for kernel in kernels {
            let spec = &kernel.spec;
            let current = fingerprint(spec)?;
            let Some(entry) = lock
                .kernels
                .get(&spec.id)
                .filter(|e| e.fingerprint == current)
            else {
                continue;
            };
            // As the macro embeds them: each variant with its device's description.
            let variants: Vec<Variant> = entry
                .variants
                .iter()
                .map(|v| Variant {
                    device_info: lock.devices.get(&v.device).cloned(),
                    ..v.clone()
                })
                .collect();
            let (steps, _) = steps_and_nearest(&variants, &device.key, Some(&device.info));
            for (v, step) in variants.iter().zip(steps) {
                let Some(step) = step else { continue };
                let what = format!(
                    "`{}` at `{}`{} ({}{}) from `{}` ({step} here) on `{}`",
                    spec.id,
                    v.workload,
                    if v.general { "'s general variant" } else { "" },
                    fmt_params(&v.params),
                    v.source
                        .as_deref()
                        .map(|h| format!(", generated source {h}"))
                        .unwrap_or_default(),
                    printable(&v.device),
                    printable(&device.key.to_string())
                );
                match verify_one(args, kernel, v, device, lockfile) {
                    Ok(cases) => {
                        held += 1;
                        if !json && !args.ws.quiet {
                            println!("verified: {what}: {cases} case(s)");
                        }
                    }
                    Err(why) => {
                        let line = format!("does not hold: {what}: {}", printable(&why));
                        if json {
                            Message::Finding {
                                message: line.clone(),
                            }
                            .emit();
                        } else {
                            println!("{line}");
                        }
                        failed.push(line);
                    }
                }
            }
        }
    }
    if !failed.is_empty() {
        eprintln!(
            "error: {} of {} entr(ies) do not hold on the devices here (--verify): re-tune them, or remove them from {}",
            failed.len(),
            failed.len() + held,
            lockfile.display()
        );
        return Ok(Exit::Unverified);
    }
    if !json && !args.ws.quiet {
        println!("{held} entr(ies) verified on {} device(s)", devices.len());
    }
    Ok(Exit::Success)
}

/// The devices `--device` names (each as `tune --device` reads it), or every one.
fn selected(selectors: &[String]) -> Result<Vec<Selected>> {
    if selectors.is_empty() {
        return kfoundry_tune::device::all();
    }
    let mut out: Vec<Selected> = Vec::new();
    for s in selectors {
        let d = kfoundry_tune::device::select(Some(s))?;
        if !out.iter().any(|o| o.index == d.index) {
            out.push(d);
        }
    }
    Ok(out)
}

/// Proves `v` on `device`: the number of cases it passed, or why it does not hold (a
/// reference that cannot be set up at the entry's sizes there counts: nothing could be
/// verified).
fn verify_one(
    args: &CheckArgs,
    kernel: &Kernel,
    v: &Variant,
    device: &Selected,
    lockfile: &Path,
) -> Result<usize, String> {
    let spec = &kernel.spec;
    let source = match &v.source {
        None => None,
        Some(hash) => {
            let (_, text) = kfoundry_tooling::generated::read_verified(lockfile, &spec.id, hash)
                .map_err(|e| e.to_string())?;
            Some(text)
        }
    };
    let seed = args.proof_seed.unwrap_or_else(rand::random);
    let settings = Measurement {
        seed,
        source_place: Some(kernel.source_place()),
        ..Measurement::default()
    };
    let mut judge = Supervised::start(
        spec,
        &v.sizes,
        device.index,
        settings,
        TimeLimits::default(),
    )
    .map_err(|e| format!("the reference cannot be checked at the entry's sizes here: {e:#}"))?;
    let bounds: std::collections::BTreeMap<String, (i64, i64)> =
        v.proven_range().into_iter().collect();
    let scope = Scope {
        sizes: &v.sizes,
        claimed: Some(Claimed {
            bounds: bounds.clone(),
            scalars: v.scalars.clone(),
        }),
        seed,
    };
    let proven = prove(&mut judge, spec, &v.params, source.as_deref(), &scope)?;
    if proven.sizes.is_empty() {
        return Err(
            "no case could be run here (the reference cannot be trusted at any of them)".into(),
        );
    }
    // Every size must have been proven at both ends of the range the entry claims: one that
    // cannot be run here (it does not fit the device, the reference cannot run there) leaves
    // the claim unverified.
    let reached = kfoundry_tune::prove::sizes::size_box(&proven.sizes);
    for (name, (lo, hi)) in &bounds {
        let got = reached.get(name).copied().unwrap_or((i64::MAX, i64::MIN));
        if got.0 > *lo || got.1 < *hi {
            return Err(format!(
                "the entry claims `{name}` from {lo} to {hi}, but only {}..={} could be proven here (a size that does not fit this device, or where the reference cannot run, is not verified)",
                got.0, got.1
            ));
        }
    }
    Ok(proven.cases - proven.skipped)
}
