//! Choosing the device to tune on, and the `devices` command.

use anyhow::{bail, Result};
use kfoundry_rt::{device_info, device_key, list_devices, DeviceInfo, DeviceKey};

use crate::cli::{DevicesArgs, MessageFormat};

/// A device with its identity.
pub struct Selected {
    /// Position in `list_devices()` order (how a worker process finds the same device).
    pub index: usize,
    pub key: DeviceKey,
    pub info: DeviceInfo,
}

/// Every device with its key and description.
pub fn all() -> Result<Vec<Selected>> {
    let mut out = Vec::new();
    for (index, (platform, device)) in list_devices()?.into_iter().enumerate() {
        let key = device_key(&device)?;
        let info = device_info(&platform, &device)?;
        out.push(Selected { index, key, info });
    }
    Ok(out)
}

/// Picks a device: an index, `gpu`, `cpu`, or text in the name, platform or key; by default the
/// first GPU, else the first device.
pub fn select(selector: Option<&str>) -> Result<Selected> {
    let mut devices = all()?;
    if devices.is_empty() {
        return Err(kfoundry_rt::Error::NoPlatform.into());
    }
    let pos = match selector {
        None => devices.iter().position(|d| d.info.kind == "gpu").unwrap_or(0),
        Some(s) => {
            let s_low = s.to_lowercase();
            let found = if let Ok(i) = s.parse::<usize>() {
                (i < devices.len()).then_some(i)
            } else if s_low == "gpu" || s_low == "cpu" {
                devices.iter().position(|d| d.info.kind == s_low)
            } else {
                devices.iter().position(|d| {
                    d.key.to_string().contains(&s_low)
                        || d.info.name.to_lowercase().contains(&s_low)
                        || d.info.platform.to_lowercase().contains(&s_low)
                })
            };
            match found {
                Some(i) => i,
                None => {
                    let list: Vec<String> = devices.iter().map(|d| format!("  {}: {} ({})", d.index, d.info.name, d.info.platform)).collect();
                    bail!("no OpenCL device matches `--device {s}`; the devices are:\n{}", list.join("\n"));
                }
            }
        }
    };
    Ok(devices.swap_remove(pos))
}

/// `cargo kfoundry devices`.
pub fn run(args: &DevicesArgs) -> Result<()> {
    let devices = all()?;
    match args.message_format {
        MessageFormat::Json => {
            for d in &devices {
                let peaks = if args.peaks { Some(crate::peaks::of(d, args.remeasure)?) } else { None };
                let v = serde_json::json!({ "index": d.index, "key": d.key.to_string(), "info": d.info, "peaks": peaks });
                println!("{v}");
            }
        }
        MessageFormat::Human => {
            if devices.is_empty() {
                println!("no OpenCL device found");
            }
            for d in &devices {
                println!("{}: {} [{}] on {}", d.index, d.info.name, d.info.kind, d.info.platform);
                println!("   key: {}", d.key);
                println!(
                    "   {} compute units, {} MHz, work-group ≤ {}, local memory {} KiB, global memory {} MiB",
                    d.info.compute_units,
                    d.info.max_clock_mhz,
                    d.info.max_work_group_size,
                    d.info.local_mem_bytes / 1024,
                    d.info.global_mem_bytes >> 20
                );
                if args.peaks {
                    let p = crate::peaks::of(d, args.remeasure)?;
                    println!("   measured: copy {:.1} GB/s, FP32 {:.1} GFLOP/s", p.copy_gbytes_per_s, p.gflops);
                }
            }
        }
    }
    Ok(())
}
