//! Validity: whether a configuration can run here at all (constraints, geometry, the device's
//! limits, memory), answered before anything is built and kept for the search's proposals.

use super::*;

/// Constraints, geometry and device limits of one kernel at one workload.
///
/// The engine asks about the same configurations over and over (thousands of random draws a
/// proposal, then every configuration of the space when few are valid and unvisited), and each
/// answer evaluates the annotation's expressions over a fresh environment: so answers are kept
/// (`MEMO_LIMIT` of each). Without that, the engine's proposals were a third of a tune's CPU
/// time on PoCL (`perf`, the examples at `small`).
pub struct Validity {
    pub(super) spec: KernelSpec,
    pub(super) sizes: Sizes,
    pub(super) limits: Limits,
    pub(super) accepted: Memo<bool>,
}

/// Answers kept per configuration.
pub(super) type Memo<T> = std::sync::Mutex<std::collections::HashMap<Config, T>>;

/// How many configurations' answers are kept (beyond, answers are worked out each time).
pub(super) const MEMO_LIMIT: usize = 1 << 20;

/// `memo`'s answer for `config`, or `work()`'s, kept while there is room.
pub(super) fn memoized<T: Copy>(memo: &Memo<T>, config: &Config, work: impl FnOnce() -> T) -> T {
    if let Some(v) = memo.lock().ok().and_then(|m| m.get(config).copied()) {
        return v;
    }
    let v = work();
    if let Ok(mut m) = memo.lock() {
        if m.len() < MEMO_LIMIT {
            m.insert(config.clone(), v);
        }
    }
    v
}

impl Validity {
    pub fn new(spec: KernelSpec, sizes: Sizes, limits: Limits) -> Validity {
        Validity {
            spec,
            sizes,
            limits,
            accepted: Default::default(),
        }
    }

    pub fn check(&self, params: &Params) -> Result<(), String> {
        check_launchable(&self.spec, &self.limits, params, &self.sizes)
    }

    /// The engine's form: a configuration in parameter order.
    pub fn accepts(&self, config: &Config) -> bool {
        memoized(&self.accepted, config, || {
            let params = params_of(&self.spec, config);
            // Most configurations of a sparse space fail a requirement: said without the
            // message that `check` writes.
            self.spec
                .meets_requirements(&params, &self.sizes, Some(&self.limits.traits))
                && self.check(&params).is_ok()
        })
    }

    /// Each configuration's work-group size (the product of the annotation's `local` at the
    /// workload's sizes), for the engine's work-group limit
    /// ([`kfoundry_search::SearchState::set_group_size`]); `None` where the kernel leaves the
    /// work-group to the driver.
    pub fn group_size(&self) -> GroupSize {
        let (spec, sizes, limits) = (self.spec.clone(), self.sizes.clone(), self.limits.clone());
        let memo: Memo<Option<u64>> = Default::default();
        GroupSize::new(move |config| {
            memoized(&memo, config, || {
                let items = work_group_items(&spec, &limits, &params_of(&spec, config), &sizes)?;
                u64::try_from(items).ok()
            })
        })
    }
}

/// The work-group `params` launches with at `sizes` (the product of the annotation's
/// `local`); `None` where the kernel leaves it to the driver.
pub(super) fn work_group_items(
    spec: &KernelSpec,
    limits: &Limits,
    params: &Params,
    sizes: &Sizes,
) -> Option<usize> {
    let geometry = spec.geometry(params, sizes, Some(&limits.traits)).ok()?;
    Some(geometry.local?.iter().product())
}

/// Whether a kernel source fixes its work-group (`reqd_work_group_size`): the driver then
/// reports each build's own work-group as its limit, which says nothing of the others, and
/// evaluations report none.
pub fn pins_work_group(source: &str) -> bool {
    source.contains("reqd_work_group_size")
}

/// Whether `params` can be launched at `sizes` on a device with `limits`: constraints,
/// geometry and the device's work-group limits.
pub fn check_launchable(
    spec: &KernelSpec,
    limits: &Limits,
    params: &Params,
    sizes: &Sizes,
) -> Result<(), String> {
    let g = spec
        .geometry(params, sizes, Some(&limits.traits))
        .map_err(|e| e.to_string())?;
    if let Some(local) = &g.local {
        let total: usize = local.iter().product();
        if total > limits.max_work_group_size {
            return Err(format!(
                "work-group size {total} exceeds the device's {}",
                limits.max_work_group_size
            ));
        }
        for (d, l) in local.iter().enumerate() {
            if limits.max_work_item_sizes.get(d).is_some_and(|m| l > m) {
                return Err(format!(
                    "local size {l} in dimension {d} exceeds the device's limit"
                ));
            }
        }
    }
    Ok(())
}

/// Whether one run of the reference and one of a candidate at `sizes` fit: every buffer within
/// the device's allocation limit, both copies of all of them (with their guard zones) within
/// its global memory, and on a device that is not a GPU (its memory is the host's) within the
/// memory the host has available. Checked before anything is allocated, with overflow checks:
/// a workload of 2^62 elements is an error that says so, not an allocation that wraps around.
pub(super) fn check_fits(
    spec: &KernelSpec,
    sizes: &Sizes,
    limits: &Limits,
    host_memory: bool,
) -> Result<(), SetupError> {
    let gib = |b: u128| b as f64 / (1u128 << 30) as f64;
    let mut total: u128 = 0;
    for (arg, role) in spec.args_with_roles() {
        // The caller's buffers, and the reference's scratch (a candidate's is checked when it
        // runs: its length is its own).
        let (KernelArg::Buffer { name, elem, .. }, ArgRole::CallerBuffer | ArgRole::Scratch) =
            (arg, role)
        else {
            continue;
        };
        let len = spec.buffer_len(name, &spec.reference, sizes).map_err(|e| {
            SetupError::TooLarge(format!(
                "buffer `{name}` at sizes {}: {e}",
                fmt_sizes(sizes)
            ))
        })?;
        let bytes = len as u128 * elem.size() as u128;
        if limits.max_alloc_bytes > 0 && bytes > limits.max_alloc_bytes as u128 {
            return Err(SetupError::TooLarge(format!(
                "buffer `{name}` at sizes {} holds {len} element(s) of `{}` ({:.2} GiB), more than the device allocates at once ({:.2} GiB)",
                fmt_sizes(sizes),
                elem.opencl_name(),
                gib(bytes),
                gib(limits.max_alloc_bytes as u128)
            )));
        }
        total += bytes + (GUARD_ELEMS * elem.size() + FRONT_GUARD_BYTES) as u128;
    }
    // the reference's copy and a candidate's
    let needed = 2 * total;
    if limits.global_mem_bytes > 0 && needed > limits.global_mem_bytes as u128 {
        return Err(SetupError::TooLarge(format!(
            "the workload's buffers at sizes {} take {:.2} GiB twice over (the reference's copy and a candidate's), more than the device's {:.2} GiB: choose smaller sizes, or give the workload `on = gpu` for a larger device",
            fmt_sizes(sizes),
            gib(total),
            gib(limits.global_mem_bytes as u128)
        )));
    }
    if host_memory {
        if let Some(free) = host_available_bytes().filter(|free| needed > *free as u128) {
            return Err(SetupError::TooLarge(format!(
                "the workload's buffers at sizes {} take {:.2} GiB twice over (the reference's copy and a candidate's), and this device's memory is the host's, which has {:.2} GiB available: choose smaller sizes, or give the workload `on = gpu`",
                fmt_sizes(sizes),
                gib(total),
                gib(free as u128)
            )));
        }
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo`, in bytes (Linux; `None` elsewhere).
pub(super) fn host_available_bytes() -> Option<u64> {
    let text = kfoundry_tooling::files::read_text_bounded(
        std::path::Path::new("/proc/meminfo"),
        1 << 20,
        "meminfo",
    )
    .ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
