//! The mutation prompt: what the model is told about the kernel, the device and the search.
//!
//! `mutation_messages` builds two chat messages from a [`MutationContext`], a prompt
//! variant's [`Sections`] and the [`FailureHistory`]:
//! - **system**: the variant's sections (philosophy, strategies, pitfalls, analysis
//!   guidance), then the fixed rules: keep the entry point's signature, OpenCL C only, how
//!   parameters arrive (`-D NAME=value`), how to declare new ones
//!   (`// kfoundry-params: NAME=[…]`), and the two answer forms (one whole kernel in a
//!   ```` ```c ```` block, or SEARCH/REPLACE edits);
//! - **user**: the device, the parent source with its defines and launch geometry, its time
//!   against the reference's and the roofline fraction, a bounded number of inspirations
//!   (other elites, fastest first, each bounded in size), the steering's hints and the recent
//!   failures.

use kfoundry_rt::model::device::DeviceInfo;
use serde::{Deserialize, Serialize};

use super::chat::Message;
use super::failures::FailureHistory;
use super::meta::Sections;
use super::parse::PARAMS_MARKER;

/// What the model is told about the device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDescription {
    pub vendor: String,
    pub name: String,
    /// "gpu", "cpu", …
    pub kind: String,
    pub compute_units: u32,
    pub local_mem_bytes: u64,
    pub max_work_group_size: u64,
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE` (warp/wavefront/SIMD width), if known.
    pub preferred_work_group_multiple: Option<u64>,
    /// Whether `cl_khr_subgroups` / `cl_intel_subgroups` (or OpenCL 3.0 sub-groups) are there.
    pub sub_groups: bool,
}

impl DeviceDescription {
    /// From the lockfile's device description; the two fields it lacks are set by the caller.
    pub fn from_info(
        info: &DeviceInfo,
        preferred_work_group_multiple: Option<u64>,
        sub_groups: bool,
    ) -> Self {
        DeviceDescription {
            vendor: info.vendor.clone(),
            name: info.name.clone(),
            kind: info.kind.clone(),
            compute_units: info.compute_units,
            local_mem_bytes: info.local_mem_bytes,
            max_work_group_size: info.max_work_group_size,
            preferred_work_group_multiple,
            sub_groups,
        }
    }
}

/// Another elite of the archive, shown as an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inspiration {
    pub source: String,
    /// Its defines, `(NAME, value)`.
    pub params: Vec<(String, i64)>,
    /// Its measured time in seconds.
    pub time: f64,
}

/// Everything a mutation prompt says about the kernel being evolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutationContext {
    /// The entry point.
    pub kernel: String,
    /// The reference source (its entry point's signature is the one every rewrite keeps).
    pub reference_source: String,
    pub parent_source: String,
    /// The parent's defines, `(NAME, value)`, passed as `-D NAME=value`.
    pub parent_params: Vec<(String, i64)>,
    /// The launch geometry as the annotation states it, e.g. `global = n / VEC, local = WG`.
    pub geometry: Option<String>,
    pub device: DeviceDescription,
    /// The parent's measured time in seconds, if it was measured.
    pub time: Option<f64>,
    /// The reference's time in seconds.
    pub reference_time: Option<f64>,
    /// Achieved fraction (0–1) of the roofline bound, if the kernel declares its cost.
    pub roofline_fraction: Option<f64>,
    pub inspirations: Vec<Inspiration>,
    /// Directions from the steering, e.g. "add local-memory tiling".
    pub hints: Vec<String>,
}

/// How much of the context goes into a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptLimits {
    pub max_inspirations: usize,
    /// An inspiration longer than this is left out (cut code would mislead).
    pub max_inspiration_chars: usize,
    pub max_hints: usize,
}

impl Default for PromptLimits {
    fn default() -> Self {
        PromptLimits {
            max_inspirations: 3,
            max_inspiration_chars: 6000,
            max_hints: 6,
        }
    }
}

/// A duration in seconds, in the unit that reads best.
pub(crate) fn format_time(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return format!("{seconds} s");
    }
    match seconds {
        s if s < 1e-6 => format!("{:.1} ns", s * 1e9),
        s if s < 1e-3 => format!("{:.2} µs", s * 1e6),
        s if s < 1.0 => format!("{:.3} ms", s * 1e3),
        s => format!("{s:.3} s"),
    }
}

fn format_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

fn defines(params: &[(String, i64)]) -> String {
    if params.is_empty() {
        return "(no defines)".into();
    }
    params
        .iter()
        .map(|(n, v)| format!("-D {n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The fixed rules, with the entry point's signature in OpenCL C.
pub fn rules(kernel: &str, signature: &str) -> String {
    format!(
        "## Rules (always)\n\
         - Keep the entry point `{kernel}` with exactly this signature (same argument order, names, types and qualifiers): `{signature}`. Helper functions and other code are allowed.\n\
         - OpenCL C only (what the device's OpenCL C compiler accepts, extensions enabled with `#pragma OPENCL EXTENSION`): no `#include`, no CUDA, no C++, no host code.\n\
         - The host launches the kernel exactly as it launches the current one (same global and local sizes for the same defines) and checks every output against the reference: the results must stay correct for every size the host may use.\n\
         - Tunable parameters arrive as preprocessor defines (`-D NAME=value`); do not `#define` them yourself. You may declare new integer parameters that the tuner will search, on a comment line: `// {PARAMS_MARKER} TS=[8,16,32], WPT=[1,2,4]` (optional; the kernel must be correct for every listed value).\n\
         - Answer with EITHER the whole new kernel source in one ```c fenced block, OR one or more edits to the current source, each exactly in this form (the SEARCH text must occur exactly once in the current source, character for character):\n\
         <<<<<<< SEARCH\n\
         lines copied from the current source\n\
         =======\n\
         their replacement\n\
         >>>>>>> REPLACE\n\
         - Explain your idea in at most three sentences before the code."
    )
}

/// The system and user messages of one mutation request.
pub(crate) fn mutation_messages(
    ctx: &MutationContext,
    signature: &str,
    sections: &Sections,
    failures: &FailureHistory,
    limits: &PromptLimits,
) -> Vec<Message> {
    let system = format!(
        "You are an expert OpenCL C performance engineer. You rewrite one OpenCL kernel so that it runs faster on one device while computing the same results.\n\n\
         {}\n\n{}",
        sections.render(),
        rules(&ctx.kernel, signature)
    );
    let mut user = String::new();
    let d = &ctx.device;
    user.push_str(&format!("# Kernel `{}`\n\n## Device\n", ctx.kernel));
    user.push_str(&format!(
        "- {} {} ({})\n",
        d.vendor,
        d.name,
        if d.kind.is_empty() {
            "unknown type"
        } else {
            &d.kind
        }
    ));
    user.push_str(&format!("- compute units: {}\n", d.compute_units));
    user.push_str(&format!(
        "- local memory per work-group: {}\n",
        format_bytes(d.local_mem_bytes)
    ));
    user.push_str(&format!(
        "- max work-group size: {}\n",
        d.max_work_group_size
    ));
    match d.preferred_work_group_multiple {
        Some(m) => user.push_str(&format!("- preferred work-group size multiple: {m}\n")),
        None => user.push_str("- preferred work-group size multiple: unknown\n"),
    }
    user.push_str(&format!(
        "- sub-groups: {}\n",
        if d.sub_groups {
            "supported"
        } else {
            "not supported"
        }
    ));

    user.push_str("\n## Current kernel\n");
    user.push_str(&format!("Compiled with: {}\n", defines(&ctx.parent_params)));
    if let Some(g) = &ctx.geometry {
        user.push_str(&format!("Launch geometry: {g}\n"));
    }
    match (ctx.time, ctx.reference_time) {
        (Some(t), Some(r)) if t > 0.0 => user.push_str(&format!(
            "Measured: {} (reference: {}, speed-up {:.2}x)\n",
            format_time(t),
            format_time(r),
            r / t
        )),
        (Some(t), _) => user.push_str(&format!("Measured: {}\n", format_time(t))),
        (None, Some(r)) => user.push_str(&format!("Reference time: {}\n", format_time(r))),
        (None, None) => {}
    }
    if let Some(f) = ctx.roofline_fraction {
        user.push_str(&format!(
            "Roofline: {:.0}% of the bound for this device\n",
            f * 100.0
        ));
    }
    user.push_str(&format!("```c\n{}\n```\n", ctx.parent_source.trim_end()));

    let mut inspirations: Vec<&Inspiration> = ctx
        .inspirations
        .iter()
        .filter(|i| {
            i.source.chars().count() <= limits.max_inspiration_chars
                && i.source.trim() != ctx.parent_source.trim()
        })
        .collect();
    inspirations.sort_by(|a, b| a.time.total_cmp(&b.time));
    inspirations.truncate(limits.max_inspirations);
    if !inspirations.is_empty() {
        user.push_str("\n## Other correct kernels found so far (for ideas)\n");
        for (i, insp) in inspirations.iter().enumerate() {
            user.push_str(&format!(
                "### Example {}: {} with {}\n```c\n{}\n```\n",
                i + 1,
                format_time(insp.time),
                defines(&insp.params),
                insp.source.trim_end()
            ));
        }
    }
    let hints: Vec<&String> = ctx
        .hints
        .iter()
        .filter(|h| !h.trim().is_empty())
        .take(limits.max_hints)
        .collect();
    if !hints.is_empty() {
        user.push_str("\n## Directions suggested by the search\n");
        for h in hints {
            user.push_str(&format!("- {}\n", h.trim()));
        }
    }
    if !failures.is_empty() {
        user.push_str("\n## Recent failed attempts (do not repeat these mistakes)\n");
        for f in failures.entries() {
            let times = if f.count > 1 {
                format!(" ({} times)", f.count)
            } else {
                String::new()
            };
            user.push_str(&format!(
                "- {}{}:\n```\n{}\n```\n",
                f.kind.label(),
                times,
                f.text
            ));
        }
    }
    user.push_str("\n## Task\nWrite a faster, still correct version of the current kernel for this device, following the rules.\n");
    vec![Message::system(system), Message::user(user)]
}

#[cfg(test)]
mod tests {
    use super::super::failures::FailureKind;
    use super::super::meta::seed_sections;
    use super::*;

    fn context() -> MutationContext {
        MutationContext {
            kernel: "saxpy".into(),
            reference_source: "__kernel void saxpy(__global float* y) { y[0] = 1; }".into(),
            parent_source: "__kernel void saxpy(__global float* y) { y[get_global_id(0)] = 2; }"
                .into(),
            parent_params: vec![("WG".into(), 64), ("VEC".into(), 2)],
            geometry: Some("global = n / VEC, local = WG".into()),
            device: DeviceDescription {
                vendor: "NVIDIA Corporation".into(),
                name: "NVIDIA H200".into(),
                kind: "gpu".into(),
                compute_units: 132,
                local_mem_bytes: 48 * 1024,
                max_work_group_size: 1024,
                preferred_work_group_multiple: Some(32),
                sub_groups: false,
            },
            time: Some(0.5e-3),
            reference_time: Some(1.0e-3),
            roofline_fraction: Some(0.42),
            inspirations: vec![
                Inspiration {
                    source: "__kernel void slow() {}".into(),
                    params: vec![],
                    time: 2e-3,
                },
                Inspiration {
                    source: "__kernel void fast() {}".into(),
                    params: vec![("WG".into(), 128)],
                    time: 1e-4,
                },
                Inspiration {
                    source: "x".repeat(10_000),
                    params: vec![],
                    time: 1e-5,
                },
            ],
            hints: vec!["add local-memory tiling".into(), " ".into()],
        }
    }

    #[test]
    fn everything_is_in_the_prompt() {
        let ctx = context();
        let mut failures = FailureHistory::default();
        failures.push(FailureKind::Build, "error: undeclared identifier 'TS'");
        failures.push(FailureKind::Build, "error: undeclared identifier 'TS'");
        let sig = "__kernel void saxpy(__global float* y)";
        let limits = PromptLimits {
            max_inspirations: 1,
            ..PromptLimits::default()
        };
        let msgs = mutation_messages(&ctx, sig, &seed_sections()[0], &failures, &limits);
        assert_eq!(msgs.len(), 2);
        let (system, user) = (&msgs[0].content, &msgs[1].content);
        assert!(
            system.contains(sig)
                && system.contains("<<<<<<< SEARCH")
                && system.contains("kfoundry-params:")
        );
        assert!(system.contains(&seed_sections()[0].strategies));
        for needle in [
            "NVIDIA H200",
            "compute units: 132",
            "48 KiB",
            "max work-group size: 1024",
            "multiple: 32",
            "sub-groups: not supported",
            "-D WG=64 -D VEC=2",
            "global = n / VEC",
            "500.00 µs",
            "speed-up 2.00x",
            "Roofline: 42%",
            "y[get_global_id(0)] = 2",
            "add local-memory tiling",
            "did not compile (2 times)",
            "undeclared identifier 'TS'",
        ] {
            assert!(user.contains(needle), "missing {needle} in\n{user}");
        }
        // Inspirations: too-long ones out, fastest first, bounded count.
        assert!(
            user.contains("void fast()")
                && !user.contains("void slow()")
                && !user.contains("xxxxxxxxxx")
        );
        assert!(!user.contains("\n- \n"), "blank hints are dropped");
    }

    #[test]
    fn optional_parts_are_left_out() {
        let mut ctx = context();
        ctx.time = None;
        ctx.roofline_fraction = None;
        ctx.inspirations.clear();
        ctx.hints.clear();
        ctx.geometry = None;
        let msgs = mutation_messages(
            &ctx,
            "sig",
            &seed_sections()[1],
            &FailureHistory::default(),
            &PromptLimits::default(),
        );
        let user = &msgs[1].content;
        assert!(
            !user.contains("Roofline")
                && !user.contains("Other correct")
                && !user.contains("Recent failed")
        );
        assert!(user.contains("Reference time: 1.000 ms"));
    }

    #[test]
    fn units() {
        assert_eq!(format_time(2.5e-9), "2.5 ns");
        assert_eq!(format_time(1.5), "1.500 s");
        assert_eq!(format_bytes(65536), "64 KiB");
        assert_eq!(format_bytes(1000), "1000 bytes");
        let info = DeviceInfo {
            name: "n".into(),
            compute_units: 4,
            ..DeviceInfo::default()
        };
        let d = DeviceDescription::from_info(&info, Some(8), true);
        assert_eq!(
            (
                d.compute_units,
                d.preferred_work_group_multiple,
                d.sub_groups
            ),
            (4, Some(8), true)
        );
    }
}
