//! The device a command runs on: every OpenCL device with its identity, choosing one, and
//! ([`peaks`]) what it can do at best.

pub mod peaks;

use anyhow::Result;
use kfoundry_rt::{
    device_info, device_key, list_devices, traits_from, DeviceInfo, DeviceKey, DeviceTraits,
};

use crate::error::usage;

/// A device with its identity.
#[derive(Debug)]
pub struct Selected {
    /// Position in `list_devices()` order (how a worker process finds the same device).
    pub index: usize,
    pub key: DeviceKey,
    pub info: DeviceInfo,
    /// What `require(...)` reads about it.
    pub traits: DeviceTraits,
}

/// Every device with its key and description.
pub fn all() -> Result<Vec<Selected>> {
    let mut out = Vec::new();
    for (index, (platform, device)) in list_devices()?.into_iter().enumerate() {
        let key = device_key(&device)?;
        let info = device_info(&platform, &device)?;
        let traits = traits_from(&device, &info)?;
        out.push(Selected {
            index,
            key,
            info,
            traits,
        });
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
        None => devices
            .iter()
            .position(|d| d.info.kind == "gpu")
            .unwrap_or(0),
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
                    let list: Vec<String> = devices
                        .iter()
                        .map(|d| format!("  {}: {} ({})", d.index, d.info.name, d.info.platform))
                        .collect();
                    return Err(usage(format!(
                        "no OpenCL device matches `--device {s}`; the devices are:\n{}",
                        list.join("\n")
                    )));
                }
            }
        }
    };
    Ok(devices.swap_remove(pos))
}
