//! `cargo kfoundry devices`: the OpenCL devices with their kfoundry keys and, with `--peaks`,
//! their measured copy bandwidth and FP32 rate.

use anyhow::Result;

use crate::cli::{DevicesArgs, MessageFormat};
use kfoundry_tune::device::{all, peaks};
use kfoundry_tune::messages::Message;

/// `cargo kfoundry devices`.
pub fn run(args: &DevicesArgs) -> Result<()> {
    let devices = all()?;
    match args.message_format {
        MessageFormat::Json => {
            for d in &devices {
                let peaks = if args.peaks {
                    Some(peaks::of(d, args.remeasure)?)
                } else {
                    None
                };
                Message::Device {
                    index: d.index,
                    key: d.key.to_string(),
                    info: d.info.clone(),
                    traits: d.traits.clone(),
                    peaks,
                }
                .emit();
            }
        }
        MessageFormat::Human => {
            if devices.is_empty() {
                println!("no OpenCL device found");
            }
            for d in &devices {
                println!(
                    "{}: {} [{}] on {}",
                    d.index, d.info.name, d.info.kind, d.info.platform
                );
                println!("   key: {}", d.key);
                println!(
                    "   {} compute units, {} MHz, work-group ≤ {}, local memory {} KiB, global memory {} MiB",
                    d.info.compute_units,
                    d.info.max_clock_mhz,
                    d.info.max_work_group_size,
                    d.info.local_mem_bytes / 1024,
                    d.info.global_mem_bytes >> 20
                );
                let properties: Vec<String> = d
                    .traits
                    .values()
                    .iter()
                    .map(|(name, v)| {
                        if *name == "device_vendor" {
                            format!("{name}={v:#06x}")
                        } else {
                            format!("{name}={v}")
                        }
                    })
                    .collect();
                println!(
                    "   require() reads: {} (and device_has_<extension> for its {} extensions)",
                    properties.join(" "),
                    d.traits.extensions.len()
                );
                if args.peaks {
                    let p = peaks::of(d, args.remeasure)?;
                    println!(
                        "   measured: copy {:.1} GB/s, FP32 {:.1} GFLOP/s",
                        p.copy_gbytes_per_s, p.gflops
                    );
                }
            }
        }
    }
    Ok(())
}
