//! Device identity from OpenCL: keys, descriptions, and listing without panics.

use ocl::core::{DeviceInfo as Info, DeviceInfoResult as R};
use ocl::{Device, Platform};

use super::error::Error;
use crate::model::device::{DeviceInfo, DeviceKey, DeviceTraits};

/// Every OpenCL device of every platform. Unlike `ocl::Platform::list`, a missing or broken
/// ICD loader is an error value.
pub fn list_devices() -> Result<Vec<(Platform, Device)>, Error> {
    // Some ICD loaders and drivers (PoCL among them) are not safe to enumerate from several
    // threads at once on first use: enumeration is serialised.
    static ENUMERATION: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ENUMERATION.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    let mut failures = Vec::new();
    for id in platform_ids()? {
        let platform = Platform::new(id);
        // A platform whose devices cannot be listed is skipped, not fatal...
        match Device::list_all(platform) {
            Ok(devices) => out.extend(devices.into_iter().map(|d| (platform, d))),
            Err(e) => failures.push(e.to_string()),
        }
    }
    // ...unless no platform could list any.
    if out.is_empty() && !failures.is_empty() {
        return Err(Error::OpenCl(format!(
            "no platform could list its devices: {}",
            failures.join("; ")
        )));
    }
    Ok(out)
}

/// The platforms the ICD loader knows, asked once (`ocl::core::get_platform_ids` retries for
/// ten seconds when there is none): none is [`Error::NoPlatform`], which says what to install.
fn platform_ids() -> Result<Vec<ocl::core::PlatformId>, Error> {
    use ocl::core::ffi;
    /// `CL_PLATFORM_NOT_FOUND_KHR`: the ICD loader found no driver.
    const PLATFORM_NOT_FOUND: i32 = -1001;
    let mut count: ffi::cl_uint = 0;
    // SAFETY: asks for the count only; the out-pointer is a live local.
    let status = unsafe { ffi::clGetPlatformIDs(0, std::ptr::null_mut(), &mut count) };
    match status {
        PLATFORM_NOT_FOUND => return Err(Error::NoPlatform),
        0 if count == 0 => return Err(Error::NoPlatform),
        0 => {}
        other => {
            return Err(Error::OpenCl(format!(
                "clGetPlatformIDs failed with status {other}"
            )))
        }
    }
    let mut ids: Vec<ffi::cl_platform_id> = vec![std::ptr::null_mut(); count as usize];
    let mut written: ffi::cl_uint = 0;
    // SAFETY: `ids` has room for `count` platform ids; `written` is a live local.
    let status = unsafe { ffi::clGetPlatformIDs(count, ids.as_mut_ptr(), &mut written) };
    if status != 0 {
        return Err(Error::OpenCl(format!(
            "clGetPlatformIDs failed with status {status}"
        )));
    }
    ids.truncate((written as usize).min(count as usize));
    // SAFETY: each id was just returned by the ICD loader for this process.
    Ok(ids
        .into_iter()
        .filter(|p| !p.is_null())
        .map(|p| unsafe { ocl::core::PlatformId::from_raw(p) })
        .collect())
}

fn info(device: &Device, what: Info) -> Result<R, Error> {
    Ok(ocl::core::get_device_info(device.as_core(), what)?)
}

/// The normalised key of `device`.
pub fn device_key(device: &Device) -> Result<DeviceKey, Error> {
    let vendor_id = match info(device, Info::VendorId)? {
        R::VendorId(v) => v,
        _ => 0,
    };
    let driver = match info(device, Info::DriverVersion)? {
        R::DriverVersion(v) => v,
        _ => String::new(),
    };
    let version = match info(device, Info::Version)? {
        R::Version(v) => v.to_string(),
        _ => String::new(),
    };
    let version_text = raw_string(device, Info::Version).unwrap_or(version);
    Ok(DeviceKey::from_reported(
        vendor_id,
        &device.name()?,
        &driver,
        &version_text,
    ))
}

/// `CL_DEVICE_VERSION` as the raw string ("OpenCL 3.0 CUDA").
fn raw_string(device: &Device, what: Info) -> Option<String> {
    let bytes = device.info_raw(what as u32).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// The hardware description stored in the lockfile.
pub fn device_info(platform: &Platform, device: &Device) -> Result<DeviceInfo, Error> {
    let kind = match info(device, Info::Type)? {
        R::Type(t) if t.contains(ocl::DeviceType::GPU) => "gpu",
        R::Type(t) if t.contains(ocl::DeviceType::CPU) => "cpu",
        R::Type(t) if t.contains(ocl::DeviceType::ACCELERATOR) => "accelerator",
        _ => "other",
    };
    let num = |what: Info| -> Result<u64, Error> {
        Ok(match info(device, what)? {
            R::MaxComputeUnits(v) | R::MaxClockFrequency(v) => v as u64,
            R::MaxWorkGroupSize(v) => v as u64,
            R::LocalMemSize(v) | R::GlobalMemSize(v) => v,
            _ => 0,
        })
    };
    Ok(DeviceInfo {
        name: device.name()?.trim().to_string(),
        vendor: device.vendor()?.trim().to_string(),
        platform: platform.name()?.trim().to_string(),
        kind: kind.to_string(),
        compute_units: num(Info::MaxComputeUnits)? as u32,
        max_work_group_size: num(Info::MaxWorkGroupSize)?,
        local_mem_bytes: num(Info::LocalMemSize)?,
        global_mem_bytes: num(Info::GlobalMemSize)?,
        max_clock_mhz: num(Info::MaxClockFrequency)? as u32,
    })
}

/// What `require(...)` may read about `device` ([`DeviceTraits`]). The vendor-specific
/// queries (NVIDIA's compute capability and warp size, AMD's wavefront, Intel's sub-group
/// sizes) are asked only when the device lists the extension that defines them; one that
/// fails leaves its property at 0 or empty.
pub fn traits_of(device: &Device) -> Result<DeviceTraits, Error> {
    traits_from(device, &describe(device)?)
}

/// [`traits_of`] for a device whose description is at hand (not asked again).
pub fn traits_from(device: &Device, described: &DeviceInfo) -> Result<DeviceTraits, Error> {
    let vendor_id = match info(device, Info::VendorId)? {
        R::VendorId(v) => v,
        _ => 0,
    };
    let extensions: std::collections::BTreeSet<String> = match info(device, Info::Extensions)? {
        R::Extensions(e) => e.split_whitespace().map(str::to_string).collect(),
        _ => Default::default(),
    };
    // Raw queries of vendor extensions: `ocl` has no names for them.
    let raw = |what: u32| device.info_raw(what).ok();
    let uint =
        |what: u32| raw(what).and_then(|b| Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?)));
    let mut sub_group_sizes = Vec::new();
    let mut nv_compute_capability = 0;
    if extensions.contains("cl_nv_device_attribute_query") {
        // CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, _MINOR_NV, CL_DEVICE_WARP_SIZE_NV
        if let (Some(major), Some(minor)) = (uint(0x4000), uint(0x4001)) {
            nv_compute_capability = major.saturating_mul(10).saturating_add(minor.min(9));
        }
        sub_group_sizes.extend(uint(0x4003));
    }
    if extensions.contains("cl_amd_device_attribute_query") {
        // CL_DEVICE_WAVEFRONT_WIDTH_AMD
        sub_group_sizes.extend(uint(0x4043));
    }
    if extensions.contains("cl_intel_required_subgroup_size") {
        // CL_DEVICE_SUB_GROUP_SIZES_INTEL: an array of size_t
        if let Some(bytes) = raw(0x4108) {
            let word = std::mem::size_of::<usize>();
            sub_group_sizes.extend(
                bytes
                    .chunks_exact(word)
                    .filter_map(|c| u32::try_from(usize::from_ne_bytes(c.try_into().ok()?)).ok()),
            );
        }
    }
    sub_group_sizes.retain(|s| *s > 0);
    sub_group_sizes.sort_unstable();
    sub_group_sizes.dedup();
    Ok(DeviceTraits {
        vendor_id,
        kind: described.kind.clone(),
        local_mem_bytes: described.local_mem_bytes,
        max_work_group_size: described.max_work_group_size,
        compute_units: described.compute_units,
        sub_group_sizes,
        nv_compute_capability,
        extensions,
    })
}

/// The hardware description of `device`, finding its platform itself.
pub fn describe(device: &Device) -> Result<DeviceInfo, Error> {
    let platform = match info(device, Info::Platform)? {
        R::Platform(id) => Platform::new(id),
        _ => {
            return Err(Error::OpenCl(
                "the device did not report its platform".into(),
            ))
        }
    };
    device_info(&platform, device)
}

/// What the tuner checks a configuration against before building it, and sizes its probes
/// with.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub max_work_group_size: usize,
    pub max_work_item_sizes: Vec<usize>,
    pub local_mem_bytes: u64,
    /// `CL_DEVICE_GLOBAL_MEM_SIZE` and `CL_DEVICE_MAX_MEM_ALLOC_SIZE`: how large a probe may be.
    #[serde(default)]
    pub global_mem_bytes: u64,
    #[serde(default)]
    pub max_alloc_bytes: u64,
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, in bytes: where a sub-buffer may start.
    #[serde(default)]
    pub base_align_bytes: u64,
    #[serde(default)]
    pub compute_units: u32,
    /// The reference kernel's preferred work-group size multiple (warp, wavefront or SIMD
    /// width), for the language model's description of the device.
    #[serde(default)]
    pub preferred_multiple: Option<u64>,
    /// Whether the device offers sub-groups (`cl_khr_subgroups` or `cl_intel_subgroups`).
    #[serde(default)]
    pub sub_groups: bool,
    /// What the space's `require(...)` may read about the device.
    #[serde(default)]
    pub traits: DeviceTraits,
}

/// The limits of `device`.
pub fn limits_of(device: &Device) -> Result<Limits, Error> {
    limits_from(device, traits_of(device)?)
}

/// The limits of `device` whose properties `traits` were already asked (not asked again).
pub fn limits_from(device: &Device, traits: DeviceTraits) -> Result<Limits, Error> {
    let max_work_group_size = match info(device, Info::MaxWorkGroupSize)? {
        R::MaxWorkGroupSize(v) => v,
        _ => 1,
    };
    let max_work_item_sizes = match info(device, Info::MaxWorkItemSizes)? {
        R::MaxWorkItemSizes(v) => v,
        _ => vec![],
    };
    let local_mem_bytes = match info(device, Info::LocalMemSize)? {
        R::LocalMemSize(v) => v,
        _ => 0,
    };
    let global_mem_bytes = match info(device, Info::GlobalMemSize)? {
        R::GlobalMemSize(v) => v,
        _ => 0,
    };
    let max_alloc_bytes = match info(device, Info::MaxMemAllocSize)? {
        R::MaxMemAllocSize(v) => v,
        _ => 0,
    };
    let base_align_bytes = match info(device, Info::MemBaseAddrAlign)? {
        R::MemBaseAddrAlign(bits) => u64::from(bits).div_ceil(8),
        _ => 4096,
    };
    let compute_units = match info(device, Info::MaxComputeUnits)? {
        R::MaxComputeUnits(v) => v,
        _ => 1,
    };
    let sub_groups = traits
        .extensions
        .iter()
        .any(|e| e.contains("cl_khr_subgroups") || e.contains("cl_intel_subgroups"));
    Ok(Limits {
        max_work_group_size,
        max_work_item_sizes,
        local_mem_bytes,
        global_mem_bytes,
        max_alloc_bytes,
        base_align_bytes,
        compute_units,
        preferred_multiple: None,
        sub_groups,
        traits,
    })
}

/// The device a program would use by default: the first GPU, else the first device.
pub fn default_device() -> Result<(Platform, Device), Error> {
    let all = list_devices()?;
    let gpu = all.iter().position(
        |(_, d)| matches!(info(d, Info::Type), Ok(R::Type(t)) if t.contains(ocl::DeviceType::GPU)),
    );
    all.into_iter()
        .nth(gpu.unwrap_or(0))
        .ok_or(Error::NoPlatform)
}
