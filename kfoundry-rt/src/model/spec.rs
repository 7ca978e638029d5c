//! The kernel specification: everything an `#[kfoundry::evolve(...)]` annotation says about a
//! kernel, in a form that the macro embeds, the tuner searches and the runtime dispatches on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::expr::{Env, EvalError, Expr};
use super::signature::{AddressSpace, KernelArg, KernelSignature, ScalarType};

/// Parameter values of one configuration (name → value), sorted by name.
pub type Params = BTreeMap<String, i64>;
/// Problem sizes of one call or workload (name → value), sorted by name.
pub type Sizes = BTreeMap<String, i64>;

/// `a=1, b=2`: parameters or sizes for messages (`sep` between the pairs).
pub fn fmt_assignments(values: &std::collections::BTreeMap<String, i64>, sep: &str) -> String {
    values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(sep)
}

/// A tunable parameter and its domain, in the order the annotation gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub values: Vec<i64>,
}

/// How the tuner draws the values of an input buffer or scalar.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Distribution {
    /// Uniform in `[lo, hi)` (integers: `[lo, hi]`).
    Uniform { lo: f64, hi: f64 },
    /// Normal with the given mean and standard deviation (floats only).
    Normal { mean: f64, std: f64 },
    /// A fixed value (scalars only: a buffer of constants would hide wrong indexing).
    Constant { value: f64 },
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Uniform { lo: -1.0, hi: 1.0 }
    }
}

/// An output compared with the reference's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub buffer: String,
    /// Relative tolerance (element-wise, against the reference's magnitude).
    pub rtol: f64,
    /// Absolute tolerance added to the relative one.
    pub atol: f64,
}

/// A named set of problem sizes to tune for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub sizes: Sizes,
}

/// Work done by one launch, for roofline reporting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub bytes: Option<Expr>,
    pub flops: Option<Expr>,
}

/// The full specification of an annotated kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSpec {
    /// Stable identity: `<package>::<item name>`, or the annotation's `name = "..."`.
    pub id: String,
    /// The reference OpenCL C source.
    pub source: String,
    /// The kernel's signature, read from the source.
    pub signature: KernelSignature,
    pub params: Vec<Param>,
    /// The parameter values that make the plain reference kernel.
    pub reference: Params,
    /// Problem-size variables in declaration order; launchers take them in this order.
    pub sizes: Vec<String>,
    /// Constraints on parameters and sizes; all must hold for a configuration to be valid.
    pub require: Vec<Expr>,
    /// Global work size per dimension (1 to 3).
    pub global: Vec<Expr>,
    /// Local work size per dimension (same count as `global`), or driver-chosen when absent.
    pub local: Option<Vec<Expr>>,
    /// Length in elements of every pointer argument.
    pub buffers: BTreeMap<String, Expr>,
    /// Input distributions by argument name (buffers and scalars).
    pub inputs: BTreeMap<String, Distribution>,
    pub checks: Vec<Check>,
    pub workloads: Vec<Workload>,
    pub cost: Option<Cost>,
    /// Extra OpenCL build options, passed to every variant and the reference.
    pub options: String,
}

/// A problem found in a specification, with the part of the annotation it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub part: Part,
    /// The identifier within the part that is at fault, when there is one (an unknown
    /// variable, a parameter's reference value), so that the error can point at it.
    pub token: Option<String>,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The part of an annotation a [`SpecError`] points at (the macro maps it to a span).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    Source,
    Kernel,
    Param(String),
    Reference,
    Require(usize),
    Global,
    Local,
    Buffer(String),
    Input(String),
    Check(String),
    Workload(String),
    Cost,
}

/// Launch geometry of one configuration at one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    pub global: Vec<usize>,
    pub local: Option<Vec<usize>>,
}

/// Why a configuration cannot be launched at given sizes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LaunchError {
    #[error("constraint `{0}` does not hold")]
    Constraint(String),
    #[error("{what} evaluates to {value}, which is not a positive size")]
    NotPositive { what: String, value: i64 },
    #[error("global size {global} of dimension {dim} is not a multiple of local size {local}")]
    NotMultiple { dim: usize, global: usize, local: usize },
    #[error(transparent)]
    Eval(#[from] EvalError),
}

impl KernelSpec {
    /// Hash of the reference source and the annotation: a lockfile entry is valid only for the
    /// fingerprint it was tuned with.
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_string(self).unwrap_or_default();
        let digest = Sha256::digest(canonical.as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    /// Bindings of parameters and sizes for expression evaluation.
    pub fn env(&self, params: &Params, sizes: &Sizes) -> Env {
        let mut env = sizes.clone();
        env.extend(params.iter().map(|(k, v)| (k.clone(), *v)));
        env
    }

    /// `-D NAME=value` for each parameter, then the annotation's extra options.
    pub fn build_options(&self, params: &Params) -> String {
        let mut out: Vec<String> = params.iter().map(|(k, v)| format!("-D {k}={v}")).collect();
        if !self.options.trim().is_empty() {
            out.push(self.options.trim().to_string());
        }
        out.join(" ")
    }

    /// Checks the constraints and computes the launch geometry of `params` at `sizes`.
    pub fn geometry(&self, params: &Params, sizes: &Sizes) -> Result<Geometry, LaunchError> {
        let env = self.env(params, sizes);
        for req in &self.require {
            if !req.holds(&env)? {
                return Err(LaunchError::Constraint(req.to_string()));
            }
        }
        let dims = |exprs: &[Expr], what: &str| -> Result<Vec<usize>, LaunchError> {
            exprs
                .iter()
                .enumerate()
                .map(|(d, e)| {
                    let v = e.eval(&env)?;
                    usize::try_from(v).ok().filter(|v| *v > 0).ok_or(LaunchError::NotPositive {
                        what: format!("{what}[{d}] = `{e}`"),
                        value: v,
                    })
                })
                .collect()
        };
        let global = dims(&self.global, "global")?;
        let local = match &self.local {
            Some(l) => Some(dims(l, "local")?),
            None => None,
        };
        if let Some(local) = &local {
            for (dim, (g, l)) in global.iter().zip(local).enumerate() {
                if g % l != 0 {
                    return Err(LaunchError::NotMultiple { dim, global: *g, local: *l });
                }
            }
        }
        Ok(Geometry { global, local })
    }

    /// Length in elements of a pointer argument at given parameters and sizes.
    pub fn buffer_len(&self, name: &str, params: &Params, sizes: &Sizes) -> Result<usize, LaunchError> {
        let expr = self.buffers.get(name).ok_or_else(|| EvalError::UnknownVariable(name.to_string()))?;
        let v = expr.eval(&self.env(params, sizes))?;
        usize::try_from(v).ok().filter(|v| *v > 0).ok_or(LaunchError::NotPositive {
            what: format!("length of `{name}` = `{expr}`"),
            value: v,
        })
    }

    /// The whole search space size (product of the domains), saturating.
    pub fn space_size(&self) -> u128 {
        self.params.iter().fold(1u128, |acc, p| acc.saturating_mul(p.values.len() as u128))
    }

    /// The distribution used for an input (buffer or scalar), with the default.
    pub fn distribution(&self, name: &str) -> Distribution {
        self.inputs.get(name).copied().unwrap_or_default()
    }

    /// Scalars the tuner draws (those that are not sizes).
    pub fn drawn_scalars(&self) -> impl Iterator<Item = (&str, ScalarType)> {
        self.signature.args.iter().filter_map(|a| match a {
            KernelArg::Scalar { name, ty } if !self.sizes.contains(name) => Some((name.as_str(), *ty)),
            _ => None,
        })
    }

    /// Every problem found in the specification (empty when it is sound).
    pub fn validate(&self) -> Vec<SpecError> {
        let mut errors = Vec::new();
        macro_rules! err {
            ($part:expr, token $token:expr, $message:expr $(,)?) => {
                errors.push(SpecError { part: $part, token: Some($token), message: $message })
            };
            ($part:expr, $message:expr $(,)?) => {
                errors.push(SpecError { part: $part, token: None, message: $message })
            };
        }

        let param_names: BTreeSet<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
        let size_names: BTreeSet<&str> = self.sizes.iter().map(String::as_str).collect();
        let args = &self.signature.args;
        let arg = |name: &str| args.iter().find(|a| a.name() == name);

        // Parameters: non-empty domains, no clash with sizes or kernel identifiers.
        let mut seen = BTreeSet::new();
        for p in &self.params {
            if !seen.insert(p.name.as_str()) {
                err!(Part::Param(p.name.clone()), format!("parameter `{}` is declared twice", p.name));
            }
            if p.values.is_empty() {
                err!(Part::Param(p.name.clone()), format!("parameter `{}` has no values", p.name));
            }
            if size_names.contains(p.name.as_str()) {
                err!(Part::Param(p.name.clone()), format!("`{}` is both a parameter and a size", p.name));
            }
            if arg(&p.name).is_some() {
                err!(
                    Part::Param(p.name.clone()),
                    format!("parameter `{}` has the name of a kernel argument; as `-D {}=...` it would rewrite the signature", p.name, p.name),
                );
            }
        }
        // Reference: a value in the domain for every parameter.
        for p in &self.params {
            match self.reference.get(&p.name) {
                None => err!(Part::Reference, format!("`reference(...)` gives no value for parameter `{}`", p.name)),
                Some(v) if !p.values.contains(v) => err!(
                    Part::Reference,
                    token p.name.clone(),
                    format!("reference value {v} of `{}` is not in its domain", p.name),
                ),
                Some(_) => {}
            }
        }
        for name in self.reference.keys() {
            if !param_names.contains(name.as_str()) {
                err!(Part::Reference, format!("`reference(...)` names `{name}`, which is not a parameter"));
            }
        }
        // Expressions read only parameters and sizes.
        let known = |e: &Expr| -> Option<String> {
            e.variables()
                .into_iter()
                .find(|v| !param_names.contains(v.as_str()) && !size_names.contains(v.as_str()))
        };
        let unknown_msg = |v: String, what: &str| {
            format!("{what} reads `{v}`, which is neither a parameter nor a size (sizes are the names bound by the workloads)")
        };
        for (i, r) in self.require.iter().enumerate() {
            if let Some(v) = known(r) {
                err!(Part::Require(i), token v.clone(), unknown_msg(v, "constraint"));
            }
        }
        if self.global.is_empty() || self.global.len() > 3 {
            err!(Part::Global, format!("`global` needs 1 to 3 dimensions, found {}", self.global.len()));
        }
        for g in &self.global {
            if let Some(v) = known(g) {
                err!(Part::Global, token v.clone(), unknown_msg(v, "`global`"));
            }
        }
        if let Some(local) = &self.local {
            if local.len() != self.global.len() {
                err!(
                    Part::Local,
                    format!("`local` has {} dimension(s) but `global` has {}", local.len(), self.global.len()),
                );
            }
            for l in local {
                if let Some(v) = known(l) {
                    err!(Part::Local, token v.clone(), unknown_msg(v, "`local`"));
                }
            }
        }
        // Buffers: every pointer argument has a length; every length names a pointer.
        for a in args {
            if let KernelArg::Buffer { name, .. } = a {
                if !self.buffers.contains_key(name) {
                    err!(Part::Buffer(name.clone()), format!("`buffers(...)` gives no length for pointer argument `{name}`"));
                }
            }
        }
        for (name, len) in &self.buffers {
            match arg(name) {
                Some(KernelArg::Buffer { .. }) => {}
                Some(KernelArg::Scalar { .. }) => {
                    err!(Part::Buffer(name.clone()), format!("`{name}` is a scalar argument, not a buffer"))
                }
                None => err!(Part::Buffer(name.clone()), format!("the kernel has no argument `{name}`")),
            }
            if let Some(v) = known(len) {
                err!(Part::Buffer(name.clone()), token v.clone(), unknown_msg(v, &format!("the length of `{name}`")));
            }
        }
        // Inputs: existing, non-local arguments; constants only for scalars.
        for (name, dist) in &self.inputs {
            match arg(name) {
                None => err!(Part::Input(name.clone()), format!("the kernel has no argument `{name}`")),
                Some(KernelArg::Buffer { space: AddressSpace::Local, .. }) => {
                    err!(Part::Input(name.clone()), format!("`{name}` is local memory; it has no input"))
                }
                Some(KernelArg::Buffer { .. }) if matches!(dist, Distribution::Constant { .. }) => err!(
                    Part::Input(name.clone()),
                    format!("buffer `{name}` cannot be constant: constant inputs hide indexing mistakes"),
                ),
                Some(KernelArg::Scalar { .. }) if size_names.contains(name.as_str()) => err!(
                    Part::Input(name.clone()),
                    format!("`{name}` is a size; its value comes from the workload"),
                ),
                Some(_) => {}
            }
            match *dist {
                Distribution::Uniform { lo, hi } if !(lo < hi) || !lo.is_finite() || !hi.is_finite() => {
                    err!(Part::Input(name.clone()), format!("`uniform({lo}, {hi})` needs finite lo < hi"))
                }
                Distribution::Normal { std, mean } if !(std > 0.0) || !mean.is_finite() || !std.is_finite() => {
                    err!(Part::Input(name.clone()), format!("`normal({mean}, {std})` needs a positive finite std"))
                }
                _ => {}
            }
        }
        // Checks: writable global buffers.
        if self.checks.is_empty() {
            err!(Part::Kernel, "`check(...)` names no output: the tuner could not verify candidates".into());
        }
        for c in &self.checks {
            match arg(&c.buffer) {
                Some(KernelArg::Buffer { space: AddressSpace::Global, read_only: false, .. }) => {}
                Some(KernelArg::Buffer { .. }) => err!(
                    Part::Check(c.buffer.clone()),
                    format!("`{}` is read-only or not global memory; only written `__global` buffers can be checked", c.buffer),
                ),
                _ => err!(Part::Check(c.buffer.clone()), format!("the kernel has no buffer argument `{}`", c.buffer)),
            }
            if !(c.rtol >= 0.0 && c.atol >= 0.0 && c.rtol.is_finite() && c.atol.is_finite()) {
                err!(Part::Check(c.buffer.clone()), "tolerances must be finite and non-negative".into());
            }
        }
        // Scalars that are not sizes: integers need an input.
        for (name, ty) in self.drawn_scalars() {
            if !ty.is_float() && !self.inputs.contains_key(name) {
                err!(
                    Part::Kernel,
                    format!("integer argument `{name}` is not a size; give its value with `inputs({name} = constant(...))` or bind it in the workloads"),
                );
            }
        }
        // Workloads: at least one; each binds exactly the sizes. Whether the reference can run
        // them is only asked when nothing above is wrong (it would repeat those errors).
        let reference_checkable = errors.is_empty();
        if self.workloads.is_empty() {
            err!(Part::Kernel, "`workloads(...)` is missing: name at least one, e.g. `workloads(large(n = 1 << 20))`".into());
        }
        let mut names = BTreeSet::new();
        for w in &self.workloads {
            if !names.insert(w.name.as_str()) {
                err!(Part::Workload(w.name.clone()), format!("workload `{}` is declared twice", w.name));
            }
            let bound: BTreeSet<&str> = w.sizes.keys().map(String::as_str).collect();
            if bound != size_names {
                err!(
                    Part::Workload(w.name.clone()),
                    format!(
                        "workload `{}` binds {{{}}} but the sizes are {{{}}}: every workload binds the same sizes",
                        w.name,
                        bound.iter().copied().collect::<Vec<_>>().join(", "),
                        self.sizes.join(", ")
                    ),
                );
            } else if let Some((k, v)) = w.sizes.iter().find(|(_, v)| **v <= 0) {
                err!(Part::Workload(w.name.clone()), format!("size `{k}` = {v} must be positive"));
            } else if reference_checkable {
                if let Err(e) = self.geometry(&self.reference, &w.sizes) {
                    err!(Part::Workload(w.name.clone()), format!("the reference cannot run workload `{}`: {e}", w.name));
                }
            }
        }
        // Sizes that are kernel arguments must be integer scalars.
        for s in &self.sizes {
            if let Some(KernelArg::Scalar { ty, .. }) = arg(s) {
                if ty.is_float() {
                    err!(Part::Kernel, format!("size `{s}` is a floating-point kernel argument; sizes are integers"));
                }
            } else if arg(s).is_some() {
                err!(Part::Kernel, format!("size `{s}` is a buffer argument of the kernel"));
            }
        }
        if let Some(cost) = &self.cost {
            for e in cost.bytes.iter().chain(cost.flops.iter()) {
                if let Some(v) = known(e) {
                    err!(Part::Cost, token v.clone(), unknown_msg(v, "`cost`"));
                }
            }
        }
        errors
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::signature::find_kernel;

    pub(crate) fn saxpy() -> KernelSpec {
        let source = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) {}".to_string();
        let signature = find_kernel(&source, None).unwrap();
        let e = |s: &str| Expr::parse(s).unwrap();
        KernelSpec {
            id: "demo::Saxpy".into(),
            source,
            signature,
            params: vec![
                Param { name: "WG".into(), values: vec![32, 64, 128] },
                Param { name: "VEC".into(), values: vec![1, 2, 4] },
            ],
            reference: [("WG".to_string(), 64), ("VEC".to_string(), 1)].into_iter().collect(),
            sizes: vec!["n".into()],
            require: vec![e("n % (VEC * WG) == 0")],
            global: vec![e("n / VEC")],
            local: Some(vec![e("WG")]),
            buffers: [("x".to_string(), e("n")), ("y".to_string(), e("n"))].into_iter().collect(),
            inputs: [("y".to_string(), Distribution::Uniform { lo: -1.0, hi: 1.0 })].into_iter().collect(),
            checks: vec![Check { buffer: "y".into(), rtol: 1e-5, atol: 0.0 }],
            workloads: vec![
                Workload { name: "small".into(), sizes: [("n".to_string(), 1 << 12)].into_iter().collect() },
                Workload { name: "large".into(), sizes: [("n".to_string(), 1 << 20)].into_iter().collect() },
            ],
            cost: Some(Cost { bytes: Some(e("12 * n")), flops: Some(e("2 * n")) }),
            options: String::new(),
        }
    }

    fn p(pairs: &[(&str, i64)]) -> Params {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn sound_spec_validates() {
        assert_eq!(saxpy().validate(), vec![]);
    }

    #[test]
    fn geometry_and_constraints() {
        let s = saxpy();
        let sizes = p(&[("n", 4096)]);
        let g = s.geometry(&p(&[("WG", 64), ("VEC", 4)]), &sizes).unwrap();
        assert_eq!(g, Geometry { global: vec![1024], local: Some(vec![64]) });
        let e = s.geometry(&p(&[("WG", 64), ("VEC", 4)]), &p(&[("n", 100)])).unwrap_err();
        assert!(matches!(e, LaunchError::Constraint(_)), "{e}");
        assert_eq!(s.buffer_len("x", &p(&[("WG", 64), ("VEC", 4)]), &sizes).unwrap(), 4096);
        assert_eq!(s.build_options(&p(&[("WG", 64), ("VEC", 4)])), "-D VEC=4 -D WG=64");
    }

    #[test]
    fn fingerprint_changes_with_source_and_annotation() {
        let a = saxpy();
        let mut b = saxpy();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        b.source.push(' ');
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut c = saxpy();
        c.params[0].values.push(256);
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn validation_finds_each_mistake() {
        let cases: Vec<(Box<dyn Fn(&mut KernelSpec)>, Part, &str)> = vec![
            (Box::new(|s| { s.reference.remove("WG"); }), Part::Reference, "no value for parameter `WG`"),
            (Box::new(|s| { s.reference.insert("WG".into(), 7); }), Part::Reference, "not in its domain"),
            (Box::new(|s| s.require.push(Expr::parse("m > 0").unwrap())), Part::Require(1), "reads `m`"),
            (Box::new(|s| { s.buffers.remove("x"); }), Part::Buffer("x".into()), "no length"),
            (Box::new(|s| { s.buffers.insert("a".into(), Expr::literal(1)); }), Part::Buffer("a".into()), "scalar"),
            (Box::new(|s| s.checks[0].buffer = "x".into()), Part::Check("x".into()), "read-only"),
            (Box::new(|s| { s.inputs.insert("z".into(), Distribution::default()); }), Part::Input("z".into()), "no argument `z`"),
            (Box::new(|s| { s.inputs.insert("x".into(), Distribution::Constant { value: 1.0 }); }), Part::Input("x".into()), "cannot be constant"),
            (Box::new(|s| s.workloads[0].sizes.insert("m".into(), 3).map_or((), |_| ())), Part::Workload("small".into()), "binds"),
            (Box::new(|s| s.workloads[0].sizes.insert("n".into(), 100).map_or((), |_| ())), Part::Workload("small".into()), "reference cannot run"),
            (Box::new(|s| s.params.push(Param { name: "a".into(), values: vec![1] })), Part::Param("a".into()), "name of a kernel argument"),
            (Box::new(|s| s.local = Some(vec![])), Part::Local, "dimension"),
            (Box::new(|s| s.checks.clear()), Part::Kernel, "names no output"),
        ];
        for (i, (mutate, part, needle)) in cases.into_iter().enumerate() {
            let mut s = saxpy();
            mutate(&mut s);
            let errors = s.validate();
            assert!(
                errors.iter().any(|e| e.part == part && e.message.contains(needle)),
                "case {i}: expected {part:?} containing {needle:?}, got {errors:?}"
            );
        }
    }
}
