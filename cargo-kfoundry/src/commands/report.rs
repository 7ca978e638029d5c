//! `cargo kfoundry report`: what the lockfile holds, and with `--cross` the hardware-awareness
//! matrix: every device's winner re-measured (and re-verified) on each device present, and
//! hws = time of the other device's winner ÷ time of this device's own winner, both measured
//! here and now. Above 1 means tuning for this device paid.

use std::collections::{BTreeMap, BTreeSet};

use crate::cli::{MessageFormat, ReportArgs};
use anyhow::{bail, Context as _, Result};
use kfoundry_bench::supervisor::{Supervised, TimeLimits};
use kfoundry_bench::Measurement;
use kfoundry_rt::model::variant::Variant;
use kfoundry_search::Evaluation;
use kfoundry_tooling::lockfile::Lockfile;
use kfoundry_tune::device::{self as devices, Selected};
use kfoundry_tune::messages::{CrossCell, Message};
use kfoundry_tune::pipeline::discover::sources;
use kfoundry_tune::text::{fmt_ns, Table};

pub fn run(args: &ReportArgs) -> Result<()> {
    let src = sources(
        &args.ws.options(),
        args.bundle.as_deref(),
        args.lockfile.as_deref(),
    )?;
    let lock = Lockfile::read(&src.lockfile)?
        .with_context(|| format!("no lockfile at {}", src.lockfile.display()))?;
    let json = args.ws.message_format == MessageFormat::Json;
    let name = |key: &str| {
        lock.devices
            .get(key)
            .map_or_else(|| key.to_string(), |d| d.name.clone())
    };
    // The HTML report: now, or with --cross after the matrix is measured (it shows it).
    let html = |cells: &[CrossCell]| -> Result<()> {
        let Some(path) = &args.html else {
            return Ok(());
        };
        let state_dir = args
            .state_dir
            .clone()
            .unwrap_or_else(|| src.state_dir.clone());
        let out = path
            .clone()
            .unwrap_or_else(|| state_dir.join("report.html"));
        super::html::write(&src.kernels, &lock, &state_dir, cells, &out)?;
        if !args.ws.quiet {
            eprintln!("wrote {}", out.display());
        }
        Ok(())
    };
    if !args.cross {
        if args.html.is_some() {
            return html(&[]);
        }
        return summary(&lock, json);
    }

    let present: Vec<Selected> = if args.devices.is_empty() {
        devices::all()?
    } else {
        args.devices
            .iter()
            .map(|s| devices::select(Some(s)))
            .collect::<Result<_>>()?
    };
    let mut cells = Vec::new();
    for kernel in kfoundry_tune::filter::KernelFilter::new(&args.kernels)?
        .select(&src.kernels, |k| &k.spec.id)?
    {
        let spec = &kernel.spec;
        let Some(entry) = lock.kernels.get(&spec.id) else {
            continue;
        };
        if entry.fingerprint != kfoundry_tooling::fingerprint(spec)? {
            eprintln!(
                "note: {}: the lockfile entry is stale (the kernel changed); skipped",
                spec.id
            );
            continue;
        }
        let mut by_workload: BTreeMap<&str, Vec<&Variant>> = BTreeMap::new();
        for v in &entry.variants {
            by_workload.entry(v.workload.as_str()).or_default().push(v);
        }
        for (workload, winners) in by_workload {
            if !args.workloads.is_empty() && !args.workloads.iter().any(|w| w == workload) {
                continue;
            }
            let owners: BTreeSet<&str> = winners.iter().map(|v| v.device.as_str()).collect();
            if owners.len() < 2 {
                continue;
            }
            let Some(w) = spec.workloads.iter().find(|w| w.name == workload) else {
                continue;
            };
            for dev in present
                .iter()
                .filter(|d| owners.contains(d.key.to_string().as_str()))
            {
                let key = dev.key.to_string();
                if !json {
                    eprintln!(
                        "{} @ {}: measuring {} winners on {}",
                        spec.id,
                        workload,
                        winners.len(),
                        dev.info.name
                    );
                }
                let settings = Measurement {
                    repeats: args.repeats.max(1),
                    ..Measurement::default()
                };
                let mut bench =
                    Supervised::start(spec, &w.sizes, dev.index, settings, TimeLimits::default())
                        .with_context(|| {
                        format!(
                            "{}: setting up `{}` at `{workload}` on {}",
                            kernel.location(),
                            spec.id,
                            dev.info.name
                        )
                    })?;
                let measured: Vec<(&Variant, Evaluation)> = winners
                    .iter()
                    .map(|v| (*v, bench.evaluate_params(&v.params)))
                    .collect();
                let own = measured
                    .iter()
                    .find(|(v, _)| v.device == key)
                    .and_then(|(_, e)| e.time());
                for (v, e) in &measured {
                    let time = e.time();
                    cells.push(CrossCell {
                        kernel: spec.id.clone(),
                        workload: workload.to_string(),
                        on: key.clone(),
                        owner: v.device.clone(),
                        params: v.params.clone(),
                        time_ns: time.map(|t| (t * 1e9).round() as u64),
                        failure: match e {
                            Evaluation::Failed { kind, reason, .. } => {
                                Some(format!("{kind:?}: {reason}"))
                            }
                            Evaluation::Ok { .. } => None,
                        },
                        hws: time.zip(own).map(|(t, o)| t / o),
                    });
                }
            }
        }
    }
    if cells.is_empty() {
        bail!("nothing to cross: no kernel has winners of two or more devices at one workload with one of those devices present");
    }
    html(&cells)?;
    if json {
        for c in &cells {
            Message::Cross { result: c.clone() }.emit();
        }
        return Ok(());
    }
    let mut t = Table::new(&[
        "kernel",
        "workload",
        "measured on",
        "winner of",
        "time",
        "hws",
        "parameters",
    ]);
    for c in &cells {
        let mine = c.owner == c.on;
        t.row(vec![
            c.kernel.clone(),
            c.workload.clone(),
            name(&c.on),
            if mine {
                "(itself)".to_string()
            } else {
                name(&c.owner)
            },
            c.time_ns.map_or_else(
                || c.failure.clone().unwrap_or_default(),
                |t| fmt_ns(t as f64),
            ),
            if mine {
                "1.00".to_string()
            } else {
                c.hws.map_or("-".to_string(), |h| format!("{h:.2}"))
            },
            kfoundry_rt::model::spec::fmt_assignments(&c.params, " "),
        ]);
    }
    print!("{}", t.render());
    println!("hws = time of the other device's winner ÷ time of this device's own winner, both measured now on the device of the row (above 1: tuning for the device paid)");
    Ok(())
}

/// Without `--cross`: each recorded winner with its speedup over the reference.
fn summary(lock: &Lockfile, json: bool) -> Result<()> {
    let mut t = Table::new(&[
        "kernel",
        "workload",
        "device",
        "reference",
        "winner",
        "speedup",
        "parameters",
    ]);
    for (id, entry) in &lock.kernels {
        for v in &entry.variants {
            if json {
                Message::Variant {
                    kernel: id.clone(),
                    variant: v.clone(),
                }
                .emit();
                continue;
            }
            let device = lock
                .devices
                .get(&v.device)
                .map_or_else(|| v.device.clone(), |d| d.name.clone());
            t.row(vec![
                id.clone(),
                v.workload.clone(),
                device,
                fmt_ns(v.reference_time_ns as f64),
                fmt_ns(v.time_ns as f64),
                format!(
                    "{:.2}x",
                    v.reference_time_ns as f64 / v.time_ns.max(1) as f64
                ),
                kfoundry_rt::model::spec::fmt_assignments(&v.params, " "),
            ]);
        }
    }
    if !json {
        print!("{}", t.render());
    }
    Ok(())
}
