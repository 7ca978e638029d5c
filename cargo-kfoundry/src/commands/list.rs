//! `cargo kfoundry list`: the annotated kernels and their search spaces.

use anyhow::Result;

use crate::cli::{MessageFormat, WorkspaceArgs};
use kfoundry_rt::model::device::DEVICE_PREFIX;
use kfoundry_rt::KernelSpec;
use kfoundry_tune::messages::{KernelListing, Message};
use kfoundry_tune::pipeline::discover::discover;

/// The device properties a kernel's constraints read.
fn device_properties(spec: &KernelSpec) -> std::collections::BTreeSet<String> {
    spec.require
        .iter()
        .flat_map(|r| r.variables())
        .filter(|v| v.starts_with(DEVICE_PREFIX))
        .collect()
}

pub fn run(args: &WorkspaceArgs) -> Result<()> {
    let ws = discover(&args.options())?;
    for k in &ws.kernels {
        let s = &k.spec;
        if args.message_format == MessageFormat::Json {
            Message::Kernel(KernelListing {
                id: s.id.clone(),
                package: k.package.clone(),
                location: k.location(),
                entry: s.signature.name.clone(),
                fingerprint: kfoundry_tooling::fingerprint(s)?,
                space_size: s.space_size().to_string(),
                params: s
                    .params
                    .iter()
                    .map(|p| (p.name.clone(), p.values.clone()))
                    .collect(),
                require: s.require.iter().map(ToString::to_string).collect(),
                device_properties: device_properties(s).into_iter().collect(),
                workloads: s.workloads.clone(),
            })
            .emit();
            continue;
        }
        println!(
            "{} ({}, kernel `{}`, fingerprint {})",
            s.id,
            k.location(),
            s.signature.name,
            kfoundry_tooling::fingerprint(s)?
        );
        for p in &s.params {
            let values: Vec<String> = p.values.iter().map(i64::to_string).collect();
            let reference = s
                .reference
                .get(&p.name)
                .map(|v| format!(" (reference {v})"))
                .unwrap_or_default();
            println!("  {} ∈ {{{}}}{reference}", p.name, values.join(", "));
        }
        println!("  {} configurations before constraints", s.space_size());
        for r in &s.require {
            let on_device = r.reads_any(|v| v.starts_with(DEVICE_PREFIX));
            println!(
                "  require {r}{}",
                if on_device {
                    "  (reads the device: checked on each device, by the tuner and by dispatch)"
                } else {
                    ""
                }
            );
        }
        let read = device_properties(s);
        if !read.is_empty() {
            println!(
                "  the space depends on the device: {} (values per device: `cargo kfoundry devices`)",
                read.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        for w in &s.workloads {
            let on = if w.on.is_empty() {
                String::new()
            } else {
                format!(" (on {} only)", w.on.join(", "))
            };
            println!(
                "  workload {}: {}{on}",
                w.name,
                kfoundry_rt::model::spec::fmt_assignments(&w.sizes, ", ")
            );
        }
    }
    if ws.kernels.is_empty() && args.message_format == MessageFormat::Human {
        println!("no #[kfoundry::evolve] kernels in the selected packages");
    }
    Ok(())
}
