//! The fingerprint of a kernel: what a lockfile entry was tuned for. A variant is embedded only
//! while its kernel's fingerprint is the one it was tuned with.
//!
//! It hashes a canonical, versioned encoding of what defines the kernel: its id, the reference
//! source and entry point with the signature read from it, the parameter space and reference,
//! the sizes, constraints, launch geometry, buffer lengths, inputs, checks, workloads, cost and
//! build options. Not the dispatch policy (`extrapolate`), which changes no tuning result.
//!
//! Version 1 of the encoding is the JSON that `serde_json` wrote for a whole `KernelSpec` in
//! kfoundry 0.1 (the fields in that order, expressions printed, the same number formats), so
//! that every lockfile written so far stays valid. It is frozen here as its own types: changing
//! `KernelSpec` or its parts cannot change a fingerprint by accident, and the golden tests below
//! fail if this encoding changes. A new encoding would be version 2, and the lockfile would
//! say which one its fingerprints use.

use std::collections::{BTreeMap, BTreeSet};

use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::signature::{AddressSpace, KernelArg, ScalarType};
use kfoundry_rt::model::spec::{Distribution, Edges, KernelSpec, Whole};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The version of the encoding [`fingerprint`] hashes.
pub const FINGERPRINT_VERSION: u32 = 1;

/// Why a fingerprint could not be computed (the encoding failed; no known input does that).
#[derive(Debug, thiserror::Error)]
#[error("cannot compute the fingerprint of kernel `{kernel}`: {message}")]
pub struct FingerprintError {
    pub kernel: String,
    pub message: String,
}

/// The fingerprint of `spec`: the first 8 bytes of the SHA-256 of its version-1 encoding, in hex.
pub fn fingerprint(spec: &KernelSpec) -> Result<String, FingerprintError> {
    let encoding = serde_json::to_vec(&V1::of(spec)).map_err(|e| FingerprintError {
        kernel: spec.id.clone(),
        message: e.to_string(),
    })?;
    let digest = Sha256::digest(&encoding);
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// Version 1: the layout of `KernelSpec`'s JSON in kfoundry 0.1.
#[derive(Serialize)]
struct V1<'a> {
    id: &'a str,
    source: &'a str,
    signature: Signature<'a>,
    params: Vec<Param<'a>>,
    reference: &'a BTreeMap<String, i64>,
    sizes: &'a [String],
    require: Vec<String>,
    global: Vec<String>,
    local: Option<Vec<String>>,
    buffers: BTreeMap<&'a str, String>,
    inputs: BTreeMap<&'a str, Input>,
    checks: Vec<Check<'a>>,
    workloads: Vec<Workload<'a>>,
    cost: Option<Cost>,
    options: &'a str,
    /// Added after version 1 was frozen, written only when given (so every kernel without
    /// them keeps its version-1 fingerprint): which written buffers may alias which inputs,
    /// and which edge values the proof uses.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    in_place: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    edges: Option<&'static str>,
    /// The size ranges a program calls at (their anchors are among the workloads; their
    /// bounds decide the buckets a portfolio is proven over).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    ranges: &'a [kfoundry_rt::model::ranges::SizeRange],
    /// The buffers the launcher owns (`scratch(...)`): who supplies them, and the proof's
    /// rule that they are left all zero.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    scratch: &'a BTreeSet<String>,
}

#[derive(Serialize)]
struct Signature<'a> {
    name: &'a str,
    args: Vec<Arg<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Arg<'a> {
    Buffer {
        name: &'a str,
        space: &'static str,
        elem: &'static str,
        read_only: bool,
    },
    Scalar {
        name: &'a str,
        ty: &'static str,
    },
}

#[derive(Serialize)]
struct Param<'a> {
    name: &'a str,
    values: &'a [i64],
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Input {
    Uniform { lo: f64, hi: f64 },
    Normal { mean: f64, std: f64 },
    Constant { value: f64 },
    UniformInt { lo: String, hi: String },
    Permutation,
    Monotone { lo: String, hi: String },
}

#[derive(Serialize)]
struct Check<'a> {
    buffer: &'a str,
    rtol: f64,
    atol: f64,
    // Absent unless given, so the fingerprints of checks without them stay as they were.
    #[serde(skip_serializing_if = "Whole::is_none")]
    whole: Whole,
}

#[derive(Serialize)]
struct Workload<'a> {
    name: &'a str,
    sizes: &'a BTreeMap<String, i64>,
}

#[derive(Serialize)]
struct Cost {
    bytes: Option<String>,
    flops: Option<String>,
}

impl<'a> V1<'a> {
    fn of(spec: &'a KernelSpec) -> V1<'a> {
        let exprs = |v: &[Expr]| v.iter().map(Expr::to_string).collect::<Vec<_>>();
        V1 {
            id: &spec.id,
            source: &spec.source,
            signature: Signature {
                name: &spec.signature.name,
                args: spec.signature.args.iter().map(arg).collect(),
            },
            params: spec
                .params
                .iter()
                .map(|p| Param {
                    name: &p.name,
                    values: &p.values,
                })
                .collect(),
            reference: &spec.reference,
            sizes: &spec.sizes,
            require: exprs(&spec.require),
            global: exprs(&spec.global),
            local: spec.local.as_deref().map(exprs),
            buffers: spec
                .buffers
                .iter()
                .map(|(k, e)| (k.as_str(), e.to_string()))
                .collect(),
            inputs: spec
                .inputs
                .iter()
                .map(|(k, d)| (k.as_str(), input(d)))
                .collect(),
            checks: spec
                .checks
                .iter()
                .map(|c| Check {
                    buffer: &c.buffer,
                    rtol: c.rtol,
                    atol: c.atol,
                    whole: c.whole,
                })
                .collect(),
            workloads: spec
                .workloads
                .iter()
                .map(|w| Workload {
                    name: &w.name,
                    sizes: &w.sizes,
                })
                .collect(),
            cost: spec.cost.as_ref().map(|c| Cost {
                bytes: c.bytes.as_ref().map(Expr::to_string),
                flops: c.flops.as_ref().map(Expr::to_string),
            }),
            options: &spec.options,
            in_place: &spec.in_place,
            edges: match spec.edges {
                Edges::All => None,
                Edges::Finite => Some("finite"),
                Edges::None => Some("none"),
            },
            ranges: &spec.ranges,
            scratch: &spec.scratch,
        }
    }
}

fn arg(a: &KernelArg) -> Arg<'_> {
    match a {
        KernelArg::Buffer {
            name,
            space,
            elem,
            read_only,
        } => {
            let space = match space {
                AddressSpace::Global => "global",
                AddressSpace::Constant => "constant",
                AddressSpace::Local => "local",
            };
            Arg::Buffer {
                name,
                space,
                elem: scalar(*elem),
                read_only: *read_only,
            }
        }
        KernelArg::Scalar { name, ty } => Arg::Scalar {
            name,
            ty: scalar(*ty),
        },
    }
}

/// The version-1 spelling of a scalar type (the Rust name, as `ScalarType` serialized).
fn scalar(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F32 => "f32",
        ScalarType::F64 => "f64",
        ScalarType::F16 => "f16",
        ScalarType::Bf16 => "bf16",
        ScalarType::I8 => "i8",
        ScalarType::U8 => "u8",
        ScalarType::I16 => "i16",
        ScalarType::U16 => "u16",
        ScalarType::I32 => "i32",
        ScalarType::U32 => "u32",
        ScalarType::I64 => "i64",
        ScalarType::U64 => "u64",
    }
}

fn input(d: &Distribution) -> Input {
    match d {
        Distribution::Uniform { lo, hi } => Input::Uniform { lo: *lo, hi: *hi },
        Distribution::Normal { mean, std } => Input::Normal {
            mean: *mean,
            std: *std,
        },
        Distribution::Constant { value } => Input::Constant { value: *value },
        Distribution::UniformInt { lo, hi } => Input::UniformInt {
            lo: lo.to_string(),
            hi: hi.to_string(),
        },
        Distribution::Permutation => Input::Permutation,
        Distribution::Monotone { lo, hi } => Input::Monotone {
            lo: lo.to_string(),
            hi: hi.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::saxpy;

    /// Golden values: the fingerprints of version 1. They are what kfoundry 0.1 wrote into
    /// lockfiles (the examples' eleven kernels gave the same values before and after this
    /// module replaced hashing the spec's serde JSON). If one changes, every user's lockfile
    /// becomes stale: make a new encoding version instead.
    #[test]
    fn version_1_is_pinned() {
        let spec = saxpy();
        assert_eq!(fingerprint(&spec).unwrap(), "89ae7251ecb3f1aa");
        let mut no_cost = spec.clone();
        no_cost.cost = None;
        assert_eq!(fingerprint(&no_cost).unwrap(), "46df1ad8609171ed");
    }

    #[test]
    fn what_defines_the_kernel_changes_it_and_nothing_else_does() {
        let a = saxpy();
        let fp = |s: &KernelSpec| fingerprint(s).unwrap();
        assert_eq!(fp(&a).len(), 16);
        type Edit = Box<dyn Fn(&mut KernelSpec)>;
        let changed: Vec<Edit> = vec![
            Box::new(|s| s.source.push(' ')),
            Box::new(|s| s.params[0].values.push(256)),
            Box::new(|s| s.reference.insert("WG".into(), 32).map_or((), |_| ())),
            Box::new(|s| s.require.clear()),
            Box::new(|s| s.global = vec![Expr::parse("n").unwrap()]),
            Box::new(|s| s.local = None),
            Box::new(|s| s.checks[0].rtol = 1e-4),
            Box::new(|s| {
                s.workloads[0]
                    .sizes
                    .insert("n".into(), 8192)
                    .map_or((), |_| ())
            }),
            Box::new(|s| s.options = "-cl-mad-enable".into()),
            Box::new(|s| s.id = "demo::Other".into()),
            Box::new(|s| s.edges = Edges::Finite),
            Box::new(|s| s.edges = Edges::None),
            Box::new(|s| s.in_place = [("y".to_string(), "x".to_string())].into()),
            Box::new(|s| s.scratch = ["y".to_string()].into()),
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut b = a.clone();
            change(&mut b);
            assert_ne!(fp(&a), fp(&b), "change {i}");
        }
        // The dispatch policy is not part of what a variant was tuned for.
        let mut c = a.clone();
        c.extrapolate = true;
        assert_eq!(fp(&a), fp(&c));
    }
}
