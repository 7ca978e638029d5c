//! Device identity: a normalised key built from what OpenCL reports, stable across processes
//! and machines, and the hardware description kept beside it in the lockfile.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What OpenCL reports about a device, normalised. Two processes on two machines with the same
/// GPU and driver produce the same key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceKey {
    /// `CL_DEVICE_VENDOR_ID` (PCI vendor id for GPUs: 0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel).
    pub vendor_id: u32,
    /// `CL_DEVICE_NAME`, lower-cased, whitespace collapsed.
    pub name: String,
    /// `CL_DRIVER_VERSION`, lower-cased, whitespace collapsed.
    pub driver: String,
    /// The `major.minor` of `CL_DEVICE_VERSION` ("OpenCL 3.0 CUDA" → "3.0").
    pub opencl: String,
}

/// Lower-cases, trims and collapses whitespace; `|` (the key separator) becomes `/`.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .replace('|', "/")
}

impl DeviceKey {
    /// Builds the key from the raw strings OpenCL reports.
    pub fn from_reported(vendor_id: u32, name: &str, driver: &str, device_version: &str) -> DeviceKey {
        let opencl = device_version
            .split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
            .unwrap_or("")
            .to_string();
        DeviceKey {
            vendor_id,
            name: normalise(name),
            driver: normalise(driver),
            opencl,
        }
    }

    /// Parses the `Display` form `vendor|name|driver|opencl` (vendor in hex).
    pub fn parse(text: &str) -> Option<DeviceKey> {
        let mut parts = text.split('|');
        let vendor = parts.next()?;
        let vendor_id = u32::from_str_radix(vendor.trim_start_matches("0x"), 16).ok()?;
        let name = parts.next()?.to_string();
        let driver = parts.next()?.to_string();
        let opencl = parts.next()?.to_string();
        if parts.next().is_some() || name.is_empty() {
            return None;
        }
        Some(DeviceKey { vendor_id, name, driver, opencl })
    }

    /// Same hardware (vendor and device name), any driver.
    pub fn same_device(&self, other: &DeviceKey) -> bool {
        self.vendor_id == other.vendor_id && self.name == other.name
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}|{}|{}|{}", self.vendor_id, self.name, self.driver, self.opencl)
    }
}

/// The hardware description stored with a device's lockfile entries: enough to explain a match
/// and, later, to find the nearest known device.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The device name as reported (not normalised), for humans.
    pub name: String,
    pub vendor: String,
    pub platform: String,
    /// `CL_DEVICE_TYPE`: "gpu", "cpu", "accelerator" or "other".
    pub kind: String,
    pub compute_units: u32,
    #[serde(serialize_with = "super::lockfile::saturating")]
    pub max_work_group_size: u64,
    #[serde(serialize_with = "super::lockfile::saturating")]
    pub local_mem_bytes: u64,
    #[serde(serialize_with = "super::lockfile::saturating")]
    pub global_mem_bytes: u64,
    pub max_clock_mhz: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_is_stable() {
        let a = DeviceKey::from_reported(0x10de, "NVIDIA  H200 ", " 580.95.05", "OpenCL 3.0 CUDA");
        let b = DeviceKey::from_reported(0x10de, "nvidia h200", "580.95.05", "OpenCL 3.0 CUDA");
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "10de|nvidia h200|580.95.05|3.0");
        assert_eq!(DeviceKey::parse(&a.to_string()), Some(a.clone()));
    }

    #[test]
    fn pocl_key() {
        let k = DeviceKey::from_reported(
            0x8086,
            "cpu-haswell-Intel(R) Xeon(R) CPU @ 2.20GHz",
            "3.1+debian",
            "OpenCL 3.0 PoCL HSTR: cpu-x86_64-pc-linux-gnu-haswell",
        );
        assert_eq!(k.name, "cpu-haswell-intel(r) xeon(r) cpu @ 2.20ghz");
        assert_eq!(k.opencl, "3.0");
        assert_eq!(DeviceKey::parse(&k.to_string()), Some(k));
    }

    #[test]
    fn separator_cannot_break_the_key() {
        let k = DeviceKey::from_reported(1, "odd|name", "d|1", "OpenCL 1.2");
        assert_eq!(DeviceKey::parse(&k.to_string()), Some(k));
        assert_eq!(DeviceKey::parse("zz|a|b|c"), None);
        assert_eq!(DeviceKey::parse("10de|a|b"), None);
        assert_eq!(DeviceKey::parse("10de|a|b|c|d"), None);
    }

    #[test]
    fn same_device_ignores_driver() {
        let a = DeviceKey::from_reported(0x10de, "NVIDIA H200", "580.95.05", "OpenCL 3.0 CUDA");
        let b = DeviceKey::from_reported(0x10de, "NVIDIA H200", "575.1", "OpenCL 3.0 CUDA");
        let c = DeviceKey::from_reported(0x10de, "NVIDIA H100", "580.95.05", "OpenCL 3.0 CUDA");
        assert!(a.same_device(&b));
        assert!(!a.same_device(&c));
    }
}
