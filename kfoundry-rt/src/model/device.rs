//! Device identity: a normalised key built from what OpenCL reports, stable across processes
//! and machines, and the hardware description kept beside it in the lockfile.

use std::collections::BTreeSet;
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

/// Why a device key was refused ([`DeviceKey::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not a key at all.
    #[error("`{key}` is not a device key: {why}")]
    Malformed { key: String, why: String },
    /// A key for a device spelled otherwise than its canonical key.
    #[error("device key `{key}` is not canonical: write `{canonical}` (one device has one key)")]
    NotCanonical { key: String, canonical: String },
}

impl KeyError {
    /// The canonical key of the device named, when the text names one.
    pub fn canonical(&self) -> Option<&str> {
        match self {
            KeyError::Malformed { .. } => None,
            KeyError::NotCanonical { canonical, .. } => Some(canonical),
        }
    }
}

/// The `major.minor` word of a `CL_DEVICE_VERSION` ("OpenCL 3.0 CUDA" → "3.0"); empty when
/// there is none.
fn opencl_version(device_version: &str) -> String {
    device_version
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .unwrap_or("")
        .to_string()
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
    pub fn from_reported(
        vendor_id: u32,
        name: &str,
        driver: &str,
        device_version: &str,
    ) -> DeviceKey {
        DeviceKey {
            vendor_id,
            name: normalise(name),
            driver: normalise(driver),
            opencl: opencl_version(device_version),
        }
    }

    /// Parses a key in its canonical form: exactly what `Display` prints for the key it names
    /// (`vendor|name|driver|opencl`, the vendor in lower-case hex of at least four digits,
    /// name and driver normalised, the OpenCL version as [`DeviceKey::from_reported`] reads
    /// it). Any other spelling of a device (`+8086`, `08086`, `0x8086`, `10DE`, a name with
    /// capitals or extra spaces) is an error naming the canonical key: one device has one
    /// key, so that a second entry for it cannot hide beside the first under another
    /// spelling.
    pub fn parse(text: &str) -> Result<DeviceKey, KeyError> {
        let malformed = |why: &str| KeyError::Malformed {
            key: text.to_string(),
            why: why.to_string(),
        };
        let parts: Vec<&str> = text.split('|').collect();
        let [vendor, name, driver, opencl] = parts[..] else {
            return Err(malformed(
                "a device key has four parts, `vendor|name|driver|opencl`",
            ));
        };
        // `+8086`, `0x8086` name a vendor too: refused below as not canonical, with the fix
        let signless = vendor.strip_prefix('+').unwrap_or(vendor);
        let digits = signless
            .strip_prefix("0x")
            .or_else(|| signless.strip_prefix("0X"))
            .unwrap_or(signless);
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(malformed("the vendor id is not a hexadecimal number"));
        }
        let vendor_id = u32::from_str_radix(digits, 16)
            .map_err(|_| malformed("the vendor id does not fit 32 bits"))?;
        let key = DeviceKey {
            vendor_id,
            name: normalise(name),
            driver: normalise(driver),
            opencl: opencl_version(opencl),
        };
        if key.name.is_empty() {
            return Err(malformed("the device name is empty"));
        }
        let canonical = key.to_string();
        if canonical != text {
            return Err(KeyError::NotCanonical {
                key: text.to_string(),
                canonical,
            });
        }
        Ok(key)
    }

    /// The canonical key of the device `text` names however it is spelled (`08086|...` →
    /// `8086|...`), or `text` itself when it names none: what two keys are compared by when
    /// one may be spelled otherwise.
    pub fn canonical(text: &str) -> String {
        match DeviceKey::parse(text) {
            Ok(_) => text.to_string(),
            Err(e) => e.canonical().unwrap_or(text).to_string(),
        }
    }

    /// Same hardware (vendor and device name), any driver.
    pub fn same_device(&self, other: &DeviceKey) -> bool {
        self.vendor_id == other.vendor_id && self.name == other.name
    }

    /// The device's product family, read from its vendor and name (OpenCL reports no
    /// architecture): the name with size and packaging words dropped (`80gb`, `hbm3`, `pcie`,
    /// `sxm5`) and its model number cut to the series: letters followed by digits keep the
    /// letters (`h100`, `h200` → `h`; `a100-pcie-40gb` → `a`), a number keeps its first digit
    /// (`4090`, `4070` → `4`; `3090` → `3`); other words stay whole (PoCL's
    /// `pthread-haswell-amd epyc` is its own family). A heuristic: devices of one family
    /// usually like similar parameters, and a wrong guess costs speed, never correctness
    /// (dispatch still checks every variant against the call and the device's limits).
    pub fn family(&self) -> String {
        let packaging = |w: &str| {
            [
                "pcie", "sxm", "sxm2", "sxm4", "sxm5", "nvl", "hbm2", "hbm2e", "hbm3", "hbm3e",
                "graphics", "gpu",
            ]
            .contains(&w)
                || (w.ends_with("gb")
                    && w[..w.len() - 2].chars().all(|c| c.is_ascii_digit())
                    && w.len() > 2)
        };
        let series = |w: &str| -> String {
            let letters: String = w.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            match w[letters.len()..].chars().next() {
                Some(d) if d.is_ascii_digit() && letters.is_empty() => d.to_string(),
                Some(d) if d.is_ascii_digit() => letters,
                _ => w.to_string(),
            }
        };
        let words: Vec<String> = self
            .name
            .split(' ')
            .flat_map(|w| {
                // `a100-pcie-40gb`: the model is the first dash-separated part when the rest is packaging
                let parts: Vec<&str> = w.split('-').collect();
                if parts.len() > 1 && parts[1..].iter().all(|p| packaging(p)) {
                    vec![parts[0].to_string()]
                } else {
                    vec![w.to_string()]
                }
            })
            .filter(|w| !w.is_empty() && !packaging(w))
            .map(|w| series(&w))
            .collect();
        format!("{:04x}|{}", self.vendor_id, words.join(" "))
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}|{}|{}|{}",
            self.vendor_id, self.name, self.driver, self.opencl
        )
    }
}

/// The hardware description stored with a device's lockfile entries: enough to explain a match
/// and to find the nearest known device ([`DeviceInfo::distance`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The device name as reported (not normalised), for humans.
    pub name: String,
    pub vendor: String,
    pub platform: String,
    /// `CL_DEVICE_TYPE`: "gpu", "cpu", "accelerator" or "other".
    pub kind: String,
    pub compute_units: u32,
    #[serde(serialize_with = "super::saturating")]
    pub max_work_group_size: u64,
    #[serde(serialize_with = "super::saturating")]
    pub local_mem_bytes: u64,
    #[serde(serialize_with = "super::saturating")]
    pub global_mem_bytes: u64,
    pub max_clock_mhz: u32,
}

impl DeviceInfo {
    /// How unlike two devices are, for dispatch to the nearest known device: `None` for
    /// different kinds (a CPU's parameters are never used on a GPU); otherwise the sum of
    /// |log2| ratios of compute units, clock, local memory and work-group limit (half weight
    /// for global memory), plus 1 when the vendors differ. 0 for the same description.
    pub fn distance(&self, other: &DeviceInfo) -> Option<f64> {
        if self.kind != other.kind {
            return None;
        }
        let ratio = |a: u64, b: u64| ((a.max(1) as f64) / (b.max(1) as f64)).log2().abs();
        let mut d = ratio(
            u64::from(self.compute_units),
            u64::from(other.compute_units),
        ) + ratio(
            u64::from(self.max_clock_mhz),
            u64::from(other.max_clock_mhz),
        ) + ratio(self.local_mem_bytes, other.local_mem_bytes)
            + ratio(self.max_work_group_size, other.max_work_group_size)
            + 0.5 * ratio(self.global_mem_bytes, other.global_mem_bytes);
        if self.vendor != other.vendor {
            d += 1.0;
        }
        Some(d)
    }
}

/// What `require(...)` may read about the device a kernel runs on, as the `device_*` names of
/// [`DEVICE_PROPERTIES`] (and `device_has_<extension>`). The tuner binds them for the device it
/// tunes on, so a space spends no evaluation on a path that device cannot run; dispatch binds
/// them for the device a call runs on, so a variant tuned elsewhere is re-checked there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceTraits {
    /// `CL_DEVICE_VENDOR_ID`.
    pub vendor_id: u32,
    /// "gpu", "cpu", "accelerator" or "other".
    pub kind: String,
    pub local_mem_bytes: u64,
    pub max_work_group_size: u64,
    pub compute_units: u32,
    /// Sub-group sizes the device offers (`CL_DEVICE_SUB_GROUP_SIZES_INTEL`, NVIDIA's warp,
    /// AMD's wavefront); empty when it reports none.
    #[serde(default)]
    pub sub_group_sizes: Vec<u32>,
    /// NVIDIA's compute capability as `10 * major + minor` (90 on an H100 or H200); 0 elsewhere.
    #[serde(default)]
    pub nv_compute_capability: u32,
    /// `CL_DEVICE_EXTENSIONS`, one name each.
    #[serde(default)]
    pub extensions: BTreeSet<String>,
}

/// The prefix of every name `require(...)` reads from the device; no parameter or size may
/// start with it.
pub const DEVICE_PREFIX: &str = "device_";

/// The prefix of the extension tests: `device_has_cl_khr_fp64` is 1 when the device lists
/// `cl_khr_fp64`, else 0.
pub const EXTENSION_PREFIX: &str = "device_has_";

/// The device properties `require(...)` may read, with what each means.
pub const DEVICE_PROPERTIES: &[(&str, &str)] = &[
    ("device_vendor", "CL_DEVICE_VENDOR_ID (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel)"),
    ("device_nvidia", "1 on an NVIDIA device, else 0"),
    ("device_amd", "1 on an AMD device, else 0"),
    ("device_intel", "1 on an Intel device, else 0 (PoCL's CPU device reports Intel's id on any x86 CPU)"),
    ("device_gpu", "1 on a GPU, else 0"),
    ("device_cpu", "1 on a CPU, else 0"),
    ("device_accelerator", "1 on an accelerator, else 0"),
    ("device_local_mem", "local memory per work-group, in bytes"),
    ("device_max_work_group", "the largest work-group the device reports"),
    ("device_compute_units", "compute units"),
    ("device_sub_groups", "the sub-group sizes offered, as a mask of powers of two (`device_sub_groups & 32 != 0`: size 32 is offered)"),
    ("device_sm", "NVIDIA compute capability as 10 × major + minor (90 on H100/H200), 0 on other vendors"),
    ("device_has_<extension>", "1 when CL_DEVICE_EXTENSIONS lists <extension> (`device_has_cl_khr_fp64`), else 0"),
];

impl DeviceTraits {
    /// The value of a `device_*` name on this device; `None` for a name that is not one
    /// ([`is_device_property`] says which are).
    pub fn value(&self, name: &str) -> Option<i64> {
        let flag = |b: bool| Some(i64::from(b));
        let big = |v: u64| Some(i64::try_from(v).unwrap_or(i64::MAX));
        if let Some(ext) = name.strip_prefix(EXTENSION_PREFIX) {
            return if ext.is_empty() {
                None
            } else {
                flag(self.extensions.contains(ext))
            };
        }
        match name {
            "device_vendor" => Some(i64::from(self.vendor_id)),
            "device_nvidia" => flag(self.vendor_id == 0x10de),
            "device_amd" => flag(self.vendor_id == 0x1002),
            "device_intel" => flag(self.vendor_id == 0x8086),
            "device_gpu" => flag(self.kind == "gpu"),
            "device_cpu" => flag(self.kind == "cpu"),
            "device_accelerator" => flag(self.kind == "accelerator"),
            "device_local_mem" => big(self.local_mem_bytes),
            "device_max_work_group" => big(self.max_work_group_size),
            "device_compute_units" => Some(i64::from(self.compute_units)),
            "device_sub_groups" => Some(
                self.sub_group_sizes
                    .iter()
                    .filter(|s| s.is_power_of_two() && **s < 1 << 30)
                    .fold(0i64, |m, s| m | i64::from(*s)),
            ),
            "device_sm" => Some(i64::from(self.nv_compute_capability)),
            _ => None,
        }
    }

    /// Every property with its value here, for `cargo kfoundry devices` (extensions apart).
    pub fn values(&self) -> Vec<(&'static str, i64)> {
        DEVICE_PROPERTIES
            .iter()
            .filter(|(name, _)| !name.contains('<'))
            .filter_map(|(name, _)| self.value(name).map(|v| (*name, v)))
            .collect()
    }
}

/// Whether `name` is a device property `require(...)` may read.
pub fn is_device_property(name: &str) -> bool {
    match name.strip_prefix(EXTENSION_PREFIX) {
        Some(ext) => !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        None => DEVICE_PROPERTIES.iter().any(|(n, _)| *n == name),
    }
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
        assert_eq!(DeviceKey::parse(&a.to_string()), Ok(a.clone()));
    }

    #[test]
    fn families() {
        let fam = |vendor: u32, name: &str| {
            DeviceKey::from_reported(vendor, name, "1", "OpenCL 3.0").family()
        };
        assert_eq!(
            fam(0x10de, "NVIDIA H200"),
            fam(0x10de, "NVIDIA H100 80GB HBM3")
        );
        assert_eq!(fam(0x10de, "NVIDIA H200"), "10de|nvidia h");
        assert_eq!(
            fam(0x10de, "NVIDIA A100-PCIE-40GB"),
            fam(0x10de, "NVIDIA A100-SXM4-80GB")
        );
        assert_ne!(
            fam(0x10de, "NVIDIA A100-PCIE-40GB"),
            fam(0x10de, "NVIDIA H100 PCIe")
        );
        assert_eq!(
            fam(0x10de, "NVIDIA GeForce RTX 4090"),
            fam(0x10de, "NVIDIA GeForce RTX 4070")
        );
        assert_ne!(
            fam(0x10de, "NVIDIA GeForce RTX 4090"),
            fam(0x10de, "NVIDIA GeForce RTX 3090")
        );
        assert_ne!(
            fam(0x10de, "NVIDIA H200"),
            fam(0x1002, "NVIDIA H200"),
            "the vendor is part of the family"
        );
        // PoCL's CPU names carry the LLVM target: the whole name is the family
        assert_eq!(
            fam(0x8086, "pthread-haswell-AMD EPYC"),
            "8086|pthread-haswell-amd epyc"
        );
        assert_ne!(
            fam(0x8086, "pthread-haswell-AMD EPYC"),
            fam(0x8086, "cpu-skylake-avx512-Intel(R) Xeon(R) Processor")
        );
    }

    #[test]
    fn distances_between_descriptions() {
        let gpu = |cu: u32, clock: u32| DeviceInfo {
            kind: "gpu".into(),
            vendor: "NVIDIA Corporation".into(),
            compute_units: cu,
            max_clock_mhz: clock,
            local_mem_bytes: 49152,
            max_work_group_size: 1024,
            global_mem_bytes: 80 << 30,
            ..Default::default()
        };
        let h200 = gpu(132, 1980);
        assert_eq!(h200.distance(&h200), Some(0.0));
        let h100 = gpu(114, 1755);
        let small = gpu(28, 1500);
        assert!(h200.distance(&h100).unwrap() < h200.distance(&small).unwrap());
        let cpu = DeviceInfo {
            kind: "cpu".into(),
            ..h200.clone()
        };
        assert_eq!(h200.distance(&cpu), None);
        let other_vendor = DeviceInfo {
            vendor: "Advanced Micro Devices, Inc.".into(),
            ..h200.clone()
        };
        assert_eq!(h200.distance(&other_vendor), Some(1.0));
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
        assert_eq!(DeviceKey::parse(&k.to_string()), Ok(k));
    }

    #[test]
    fn separator_cannot_break_the_key() {
        let k = DeviceKey::from_reported(1, "odd|name", "d|1", "OpenCL 1.2");
        assert_eq!(DeviceKey::parse(&k.to_string()), Ok(k));
        for bad in [
            "zz|a|b|c",
            "10de|a|b",
            "10de|a|b|c|d",
            "|a|b|c",
            "10de||b|c",
        ] {
            let e = DeviceKey::parse(bad).unwrap_err();
            assert!(matches!(e, KeyError::Malformed { .. }), "{bad}: {e}");
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn one_device_has_one_key() {
        let key = "8086|cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0";
        let k = DeviceKey::parse(key).unwrap();
        assert_eq!(k.to_string(), key);
        // Every other spelling of the same device is refused, naming the canonical key.
        for twin in [
            "+8086|cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0",
            "08086|cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0",
            "0x8086|cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0",
            "8086|CPU-Haswell-Intel(R) Xeon(R)|3.1+debian|3.0",
            "8086|cpu-haswell-intel(r)  xeon(r)|3.1+debian|3.0",
            "8086| cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0",
            "8086|cpu-haswell-intel(r) xeon(r)|3.1+Debian|3.0",
            "8086|cpu-haswell-intel(r) xeon(r)|3.1+debian|3.0 ",
        ] {
            let e = DeviceKey::parse(twin).unwrap_err();
            assert_eq!(
                e,
                KeyError::NotCanonical {
                    key: twin.into(),
                    canonical: key.into()
                },
                "{twin}"
            );
            assert_eq!(
                e.to_string(),
                format!(
                    "device key `{twin}` is not canonical: write `{key}` (one device has one key)"
                )
            );
        }
        // Vendor ids print in lower-case hex of at least four digits.
        assert!(DeviceKey::parse("10de|nvidia h200|580|3.0").is_ok());
        assert!(DeviceKey::parse("10DE|nvidia h200|580|3.0").is_err());
        assert!(DeviceKey::parse("0001|x|1|3.0").is_ok());
        assert!(DeviceKey::parse("1|x|1|3.0").is_err());
        assert!(DeviceKey::parse("123456789|x|1|3.0").is_err());
        // A key from what OpenCL reports is canonical whatever was reported.
        for (name, driver, version) in [
            ("NVIDIA  H200 ", " 580.95.05", "OpenCL 3.0 CUDA"),
            ("odd|name", "d|1", "OpenCL 1.2"),
            ("x", "", "no version"),
        ] {
            let k = DeviceKey::from_reported(0x10de, name, driver, version);
            assert_eq!(DeviceKey::parse(&k.to_string()), Ok(k));
        }
    }

    #[test]
    fn same_device_ignores_driver() {
        let a = DeviceKey::from_reported(0x10de, "NVIDIA H200", "580.95.05", "OpenCL 3.0 CUDA");
        let b = DeviceKey::from_reported(0x10de, "NVIDIA H200", "575.1", "OpenCL 3.0 CUDA");
        let c = DeviceKey::from_reported(0x10de, "NVIDIA H100", "580.95.05", "OpenCL 3.0 CUDA");
        assert!(a.same_device(&b));
        assert!(!a.same_device(&c));
    }

    #[test]
    fn device_properties_bind_by_name() {
        let h200 = DeviceTraits {
            vendor_id: 0x10de,
            kind: "gpu".into(),
            local_mem_bytes: 49152,
            max_work_group_size: 1024,
            compute_units: 132,
            sub_group_sizes: vec![32],
            nv_compute_capability: 90,
            extensions: [
                "cl_khr_fp64".to_string(),
                "cl_nv_device_attribute_query".to_string(),
            ]
            .into(),
        };
        assert_eq!(h200.value("device_nvidia"), Some(1));
        assert_eq!(h200.value("device_amd"), Some(0));
        assert_eq!(h200.value("device_gpu"), Some(1));
        assert_eq!(h200.value("device_cpu"), Some(0));
        assert_eq!(h200.value("device_vendor"), Some(0x10de));
        assert_eq!(h200.value("device_sm"), Some(90));
        assert_eq!(h200.value("device_sub_groups"), Some(32));
        assert_eq!(h200.value("device_local_mem"), Some(49152));
        assert_eq!(h200.value("device_has_cl_khr_fp64"), Some(1));
        assert_eq!(h200.value("device_has_cl_khr_subgroups"), Some(0));
        assert_eq!(h200.value("device_has_"), None);
        assert_eq!(h200.value("device_colour"), None);
        let intel = DeviceTraits {
            sub_group_sizes: vec![8, 16, 32, 3],
            ..Default::default()
        };
        assert_eq!(
            intel.value("device_sub_groups"),
            Some(8 | 16 | 32),
            "sizes that are not powers of two are left out of the mask"
        );
        assert!(is_device_property("device_sm") && is_device_property("device_has_cl_khr_fp64"));
        assert!(
            !is_device_property("device_colour")
                && !is_device_property("device_has_")
                && !is_device_property("sm")
        );
        // every listed name but the extension pattern has a value
        for (name, _) in DEVICE_PROPERTIES.iter().filter(|(n, _)| !n.contains('<')) {
            assert!(h200.value(name).is_some(), "{name}");
        }
    }
}
