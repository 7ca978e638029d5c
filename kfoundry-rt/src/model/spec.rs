//! The kernel specification: everything an `#[kfoundry::evolve(...)]` annotation says about a
//! kernel, in a form that the macro embeds, the tuner searches and the runtime dispatches on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::device::{is_device_property, DeviceTraits, DEVICE_PREFIX, DEVICE_PROPERTIES};
use super::expr::{Env, EvalError, Expr};
use super::signature::{AddressSpace, KernelArg, KernelSignature, ScalarType};

mod check;

/// Parameter values of one configuration (name → value), sorted by name.
pub type Params = BTreeMap<String, i64>;
/// Problem sizes of one call or workload (name → value), sorted by name.
pub type Sizes = BTreeMap<String, i64>;

/// `a=1, b=2`: parameters or sizes for messages (`sep` between the pairs).
pub fn fmt_assignments(values: &std::collections::BTreeMap<String, i64>, sep: &str) -> String {
    values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(sep)
}

/// A tunable parameter and its domain, in the order the annotation gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub values: Vec<i64>,
}

/// How the tuner draws the values of an input buffer or scalar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Distribution {
    /// Uniform in `[lo, hi)` (integers: `[lo, hi]`).
    Uniform { lo: f64, hi: f64 },
    /// Normal with the given mean and standard deviation (floats only).
    Normal { mean: f64, std: f64 },
    /// A fixed value (scalars only: a buffer of constants would hide wrong indexing).
    Constant { value: f64 },
    /// Integers in `[lo, hi)`, the ends expressions of the sizes, evaluated at each proof's
    /// sizes: indices into a buffer whose length is a size (`uniform_int(0, vocab)`). Integer
    /// buffers only.
    UniformInt { lo: Expr, hi: Expr },
    /// Each of `0, 1, ..., len - 1` once, shuffled (gathers and scatters that must not
    /// collide, block tables). Integer buffers only.
    Permutation,
    /// Non-decreasing integers that start at `lo` and end at `hi` (offsets such as CSR row
    /// pointers), the ends expressions of the sizes. Integer buffers only.
    Monotone { lo: Expr, hi: Expr },
}

impl fmt::Display for Distribution {
    /// As the annotation writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform { lo, hi } => write!(f, "uniform({lo}, {hi})"),
            Distribution::Normal { mean, std } => write!(f, "normal({mean}, {std})"),
            Distribution::Constant { value } => write!(f, "constant({value})"),
            Distribution::UniformInt { lo, hi } => write!(f, "uniform_int({lo}, {hi})"),
            Distribution::Permutation => write!(f, "permutation()"),
            Distribution::Monotone { lo, hi } => write!(f, "monotone({lo}, {hi})"),
        }
    }
}

/// A distribution at one run's sizes (its expressions evaluated): what the tuner draws from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolved {
    Uniform {
        lo: f64,
        hi: f64,
    },
    Normal {
        mean: f64,
        std: f64,
    },
    Constant {
        value: f64,
    },
    /// Integers in `[lo, hi)`.
    Integers {
        lo: i64,
        hi: i64,
    },
    Permutation,
    /// Non-decreasing from `lo` (first) to `hi` (last).
    Monotone {
        lo: i64,
        hi: i64,
    },
}

impl Distribution {
    /// The distribution at these sizes, or why it is empty there.
    pub fn at(&self, sizes: &Sizes) -> Result<Resolved, String> {
        let eval = |e: &Expr| e.eval(sizes).map_err(|err| format!("`{e}`: {err}"));
        Ok(match self {
            Distribution::Uniform { lo, hi } => Resolved::Uniform { lo: *lo, hi: *hi },
            Distribution::Normal { mean, std } => Resolved::Normal {
                mean: *mean,
                std: *std,
            },
            Distribution::Constant { value } => Resolved::Constant { value: *value },
            Distribution::UniformInt { lo, hi } => {
                let (l, h) = (eval(lo)?, eval(hi)?);
                if l >= h {
                    return Err(format!(
                        "`uniform_int({lo}, {hi})` is empty at these sizes ({l} >= {h})"
                    ));
                }
                Resolved::Integers { lo: l, hi: h }
            }
            Distribution::Permutation => Resolved::Permutation,
            Distribution::Monotone { lo, hi } => {
                let (l, h) = (eval(lo)?, eval(hi)?);
                if l > h {
                    return Err(format!(
                        "`monotone({lo}, {hi})` decreases at these sizes ({l} > {h})"
                    ));
                }
                Resolved::Monotone { lo: l, hi: h }
            }
        })
    }

    /// Whether it draws the values of integer buffers only (`uniform_int`, `permutation`,
    /// `monotone`).
    pub fn is_integer_only(&self) -> bool {
        matches!(
            self,
            Distribution::UniformInt { .. }
                | Distribution::Permutation
                | Distribution::Monotone { .. }
        )
    }
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Uniform { lo: -1.0, hi: 1.0 }
    }
}

/// Which edge values the proof of a variant feeds its float inputs, besides the declared
/// distributions (`edges = ...` in the annotation; see the manual's annotation chapter, `book/src/annotation.md`, next to `inputs(...)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Edges {
    /// Signed zeros, denormals, large magnitudes, infinities and NaN (the default: a call can
    /// pass any float).
    #[default]
    All,
    /// The same without infinities and NaN (for kernels whose reference is undefined on them,
    /// e.g. uses OpenCL's `max` on floats).
    Finite,
    /// No edge-value proof (the kernel is only ever called with inputs from the declared
    /// distributions: say so next to them).
    None,
}

impl Edges {
    pub fn is_default(&self) -> bool {
        *self == Edges::All
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
    /// Rules on the whole output, each of which must hold too.
    #[serde(default, skip_serializing_if = "Whole::is_none")]
    pub whole: Whole,
}

impl Check {
    /// Every element within `rtol` and `atol`, no rule on the whole output.
    pub fn elementwise(buffer: impl Into<String>, rtol: f64, atol: f64) -> Check {
        Check {
            buffer: buffer.into(),
            rtol,
            atol,
            whole: Whole::default(),
        }
    }
}

/// Rules on a whole output (`check(y, norm = ..., allclose = ..., cosine = ...)`). Wherever
/// the reference gives NaN or an infinity, the candidate must give the same, whatever the rule.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Whole {
    /// The relative error norm, ‖candidate − reference‖₂ / ‖reference‖₂ over the finite
    /// elements, at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
    /// At least this fraction of the elements within `rtol` and `atol` (instead of all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allclose: Option<f64>,
    /// The cosine similarity of candidate and reference (finite elements) at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f64>,
    /// No element-wise bound: the check gives `norm` or `cosine` and neither `rtol`, `atol`
    /// nor `allclose`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub only_whole: bool,
}

impl Whole {
    pub fn is_none(&self) -> bool {
        *self == Whole::default()
    }
}

/// A named set of problem sizes to tune for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub sizes: Sizes,
    /// The kinds of device (`CL_DEVICE_TYPE`: "gpu", "cpu", "accelerator") this workload is
    /// tuned for; empty: every kind. A workload of a few GB is for GPUs (`on = gpu`): a CPU
    /// runner neither tunes it nor is asked for it by `check --locked`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<String>,
}

/// The device kinds a workload may name in `on = ...`.
pub const DEVICE_KINDS: &[&str] = &["gpu", "cpu", "accelerator"];

impl Workload {
    /// Whether this workload is meant for a device of `kind` ("gpu", "cpu", ...).
    pub fn is_for(&self, kind: &str) -> bool {
        self.on.is_empty() || self.on.iter().any(|k| k == kind)
    }
}

/// Work done by one launch, for roofline reporting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub bytes: Option<Expr>,
    pub flops: Option<Expr>,
}

/// The values one size takes at the calls of a program (`ranges(...)`; the anchors and
/// buckets made of them: [`super::ranges`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRange {
    pub size: String,
    pub lo: i64,
    pub hi: i64,
    /// The size only sets a buffer's extent and does not change the work (an embedding
    /// table's `vocab`): it is never split into buckets, and every bucket is proven over all
    /// of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extent: bool,
}

impl SizeRange {
    pub fn contains(&self, v: i64) -> bool {
        (self.lo..=self.hi).contains(&v)
    }
}

impl std::fmt::Display for SizeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.lo == self.hi, self.extent) {
            (true, _) => write!(f, "{} = {}", self.size, self.lo),
            (false, false) => write!(f, "{} = {}..={}", self.size, self.lo, self.hi),
            (false, true) => write!(f, "{} = extent({}..={})", self.size, self.lo, self.hi),
        }
    }
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
    /// Extra OpenCL build options, passed to every variant and the reference (only the
    /// shapes [`check_build_option`] allows).
    pub options: String,
    /// Dispatch may run a tuned variant at sizes outside the range it was verified at (its
    /// constraints must still hold). Off by default: a variant runs only where it was proven.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extrapolate: bool,
    /// Written buffers the caller may pass as the very same buffer as an input (`in_place(y =
    /// x)`: written → read): the launcher accepts that aliasing (and refuses every other), and
    /// the proof runs the kernel in place too. Empty: no argument may alias a written one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub in_place: BTreeMap<String, String>,
    /// The edge values the proof feeds float inputs.
    #[serde(default, skip_serializing_if = "Edges::is_default")]
    pub edges: Edges,
    /// The sizes a program calls the kernel at (`ranges(...)`): empty, or one range per size.
    /// Their anchors are among `workloads` ([`super::ranges::anchors`]); `tune` chooses a
    /// portfolio of variants for buckets of the range among the anchors' winners.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<SizeRange>,
    /// `ranges(..., on = gpu)`: the kinds of device the ranges' anchors are tuned on (as a
    /// workload's `on`); empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges_on: Vec<String>,
    /// `__global` buffers the launcher owns (`scratch(ws)`): not the caller's, their lengths
    /// (`buffers(...)`) may read parameters. All zero when a launch starts, and the kernel must
    /// leave them all zero (the proof checks it): working memory across work-groups, such as
    /// split-K's partial sums and arrival counters, that needs no clearing launch.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub scratch: BTreeSet<String>,
}

/// Who supplies a kernel argument at a launch. This one rule is shared by the macro's typed
/// launcher, the runtime's argument setting, and the tuner's evaluator and prober.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgRole {
    /// A `__global`/`__constant` buffer the caller passes (`&ocl::Buffer<T>`); the tuner fills it.
    CallerBuffer,
    /// A scalar the caller passes; the tuner draws it from the annotation's `inputs`.
    CallerScalar,
    /// A scalar whose value is the problem size of the same name.
    Size,
    /// `__local` scratch memory, sized from `buffers(...)` by the launcher.
    LocalMemory,
    /// A `__global` buffer the launcher owns (`scratch(...)`), sized from `buffers(...)`, all
    /// zero at the start of every launch and left all zero by the kernel.
    Scratch,
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
    /// `name = "..."` (the kernel's id).
    Name,
    /// `options = "..."`.
    Options,
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
    /// `in_place(written = read)`, by the written buffer.
    InPlace(String),
    /// `ranges(size = ...)`, by size.
    Range(String),
    /// `scratch(name)`, by buffer.
    Scratch(String),
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
    #[error("constraint `{0}` does not hold on this device")]
    DeviceConstraint(String),
    #[error("{what} evaluates to {value}, which is not a positive size")]
    NotPositive { what: String, value: i64 },
    #[error("global size {global} of dimension {dim} is not a multiple of local size {local}")]
    NotMultiple {
        dim: usize,
        global: usize,
        local: usize,
    },
    #[error("size `{0}` is 0: an empty problem is not launched (whether doing nothing is right depends on the kernel: skip the call)")]
    ZeroSize(String),
    #[error("the sizes given are {{{given}}} but the kernel's sizes are {{{expected}}}")]
    SizeNames { given: String, expected: String },
    #[error("{0}")]
    Params(String),
    #[error(transparent)]
    Eval(#[from] EvalError),
}

impl KernelSpec {
    /// Bindings of parameters and sizes for expression evaluation. Sizes win over a parameter
    /// of the same name (the annotation cannot declare one; a generated source must not shadow
    /// the call's sizes).
    pub fn env(&self, params: &Params, sizes: &Sizes) -> Env {
        let mut env = params.clone();
        env.extend(sizes.iter().map(|(k, v)| (k.clone(), *v)));
        env
    }

    /// The build options of `params`: `-D NAME=value` for each parameter, then the
    /// annotation's extra options. `params` must name exactly the declared parameters (and
    /// those `declared` by the generated source being built, see
    /// [`super::declared::declared_params`]); values are integers. So nothing else reaches the
    /// OpenCL compiler from a lockfile or a bundle.
    pub fn build_options(
        &self,
        params: &Params,
        declared: &[Param],
    ) -> Result<String, LaunchError> {
        self.check_param_names(params, declared)
            .map_err(LaunchError::Params)?;
        let mut out: Vec<String> = params.iter().map(|(k, v)| format!("-D {k}={v}")).collect();
        if !self.options.trim().is_empty() {
            out.push(self.options.trim().to_string());
        }
        Ok(out.join(" "))
    }

    /// `params` names exactly the annotation's parameters and those in `declared`, and no
    /// declared parameter is named like a size or a kernel argument.
    pub fn check_param_names(&self, params: &Params, declared: &[Param]) -> Result<(), String> {
        if let Some(d) = declared.iter().find(|d| {
            self.sizes.contains(&d.name) || self.signature.args.iter().any(|a| a.name() == d.name)
        }) {
            return Err(format!("the generated source declares a parameter `{}`, which is a size or an argument of kernel `{}`", d.name, self.id));
        }
        let all = || self.params.iter().chain(declared);
        if let Some(unknown) = params.keys().find(|k| !all().any(|p| &p.name == *k)) {
            return Err(format!(
                "`{unknown}` is not a parameter of kernel `{}`",
                self.id
            ));
        }
        if let Some(missing) = all().find(|p| !params.contains_key(&p.name)) {
            return Err(format!(
                "no value for parameter `{}` of kernel `{}`",
                missing.name, self.id
            ));
        }
        Ok(())
    }

    /// `params` names exactly the declared parameters (the annotation's and those `declared`
    /// by a generated source), each with a value of its domain (a source's declaration of a
    /// parameter replaces the annotation's domain).
    pub fn check_params(&self, params: &Params, declared: &[Param]) -> Result<(), String> {
        self.check_param_names(params, declared)?;
        for (name, v) in params {
            let domain = declared
                .iter()
                .chain(&self.params)
                .find(|p| &p.name == name)
                .map(|p| &p.values);
            if !domain.is_some_and(|d| d.contains(v)) {
                return Err(format!("{name}={v} is not in the parameter's domain"));
            }
        }
        Ok(())
    }

    /// Who supplies `arg` at a launch (see [`ArgRole`]).
    pub fn role(&self, arg: &KernelArg) -> ArgRole {
        match arg {
            KernelArg::Buffer {
                space: AddressSpace::Local,
                ..
            } => ArgRole::LocalMemory,
            KernelArg::Buffer { name, .. } if self.scratch.contains(name) => ArgRole::Scratch,
            KernelArg::Buffer { .. } => ArgRole::CallerBuffer,
            KernelArg::Scalar { name, .. } if self.sizes.contains(name) => ArgRole::Size,
            KernelArg::Scalar { .. } => ArgRole::CallerScalar,
        }
    }

    /// Every kernel argument in signature order, with who supplies it.
    pub fn args_with_roles(&self) -> impl Iterator<Item = (&KernelArg, ArgRole)> {
        self.signature.args.iter().map(move |a| (a, self.role(a)))
    }

    /// The arguments a caller passes, in signature order (buffers and scalars that are not
    /// sizes; `__local` memory and scratch buffers are the launcher's).
    pub fn caller_args(&self) -> impl Iterator<Item = &KernelArg> {
        self.args_with_roles()
            .filter(|(_, r)| matches!(r, ArgRole::CallerBuffer | ArgRole::CallerScalar))
            .map(|(a, _)| a)
    }

    /// Whether `params` at `sizes` meet every `require(...)` (those that read the device only
    /// with `device`, as [`KernelSpec::geometry`] checks them), without saying which fails: the
    /// answer the search asks for many configurations, most of which fail.
    pub fn meets_requirements(
        &self,
        params: &Params,
        sizes: &Sizes,
        device: Option<&DeviceTraits>,
    ) -> bool {
        let mut env = self.env(params, sizes);
        matches!(self.failed_requirement(&mut env, device), Ok(None))
    }

    /// The first `require(...)` that does not hold in `env` (with whether it reads the device,
    /// whose properties are then added to `env`); the ones that read the device are skipped
    /// without one.
    fn failed_requirement(
        &self,
        env: &mut Env,
        device: Option<&DeviceTraits>,
    ) -> Result<Option<(&Expr, bool)>, EvalError> {
        for req in &self.require {
            if !req.reads_any(|v| v.starts_with(DEVICE_PREFIX)) {
                if !req.holds(env)? {
                    return Ok(Some((req, false)));
                }
                continue;
            }
            let Some(device) = device else { continue };
            for name in req
                .variables()
                .into_iter()
                .filter(|v| v.starts_with(DEVICE_PREFIX))
            {
                let value = device
                    .value(&name)
                    .ok_or_else(|| EvalError::UnknownVariable(name.clone()))?;
                env.insert(name, value);
            }
            if !req.holds(env)? {
                return Ok(Some((req, true)));
            }
        }
        Ok(None)
    }

    /// Checks the constraints and computes the launch geometry of `params` at `sizes`.
    ///
    /// Constraints that read device properties (`device_*`, see [`DEVICE_PROPERTIES`]) are
    /// checked against `device`; with `None` (no device at hand: the macro, `list`) they are
    /// not checked, so the result then means "launchable on some device".
    pub fn geometry(
        &self,
        params: &Params,
        sizes: &Sizes,
        device: Option<&DeviceTraits>,
    ) -> Result<Geometry, LaunchError> {
        if sizes.len() != self.sizes.len() || !self.sizes.iter().all(|s| sizes.contains_key(s)) {
            return Err(LaunchError::SizeNames {
                given: sizes.keys().cloned().collect::<Vec<_>>().join(", "),
                expected: self.sizes.join(", "),
            });
        }
        for name in &self.sizes {
            match sizes[name] {
                0 => return Err(LaunchError::ZeroSize(name.clone())),
                v if v < 0 => {
                    return Err(LaunchError::NotPositive {
                        what: format!("size `{name}`"),
                        value: v,
                    })
                }
                _ => {}
            }
        }
        let mut env = self.env(params, sizes);
        match self.failed_requirement(&mut env, device)? {
            Some((req, false)) => return Err(LaunchError::Constraint(req.to_string())),
            Some((req, true)) => return Err(LaunchError::DeviceConstraint(req.to_string())),
            None => {}
        }
        let dims = |exprs: &[Expr], what: &str| -> Result<Vec<usize>, LaunchError> {
            exprs
                .iter()
                .enumerate()
                .map(|(d, e)| {
                    let v = e.eval(&env)?;
                    usize::try_from(v)
                        .ok()
                        .filter(|v| *v > 0)
                        .ok_or(LaunchError::NotPositive {
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
                    return Err(LaunchError::NotMultiple {
                        dim,
                        global: *g,
                        local: *l,
                    });
                }
            }
        }
        Ok(Geometry { global, local })
    }

    /// Length in elements of a pointer argument at given parameters and sizes.
    pub fn buffer_len(
        &self,
        name: &str,
        params: &Params,
        sizes: &Sizes,
    ) -> Result<usize, LaunchError> {
        let expr = self
            .buffers
            .get(name)
            .ok_or_else(|| EvalError::UnknownVariable(name.to_string()))?;
        let v = expr.eval(&self.env(params, sizes))?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or(LaunchError::NotPositive {
                what: format!("length of `{name}` = `{expr}`"),
                value: v,
            })
    }

    /// The whole search space size (product of the domains), saturating.
    pub fn space_size(&self) -> u128 {
        self.params
            .iter()
            .fold(1u128, |acc, p| acc.saturating_mul(p.values.len() as u128))
    }

    /// Whether `found` (a signature read from a source) is this kernel's: the same, but where
    /// the annotation declared a `ushort` buffer bfloat16 (`bf16(...)`), which a source spells
    /// `ushort`.
    pub fn has_signature(&self, found: &KernelSignature) -> bool {
        let as_source = |a: &KernelArg| match a {
            KernelArg::Buffer {
                name,
                space,
                elem: ScalarType::Bf16,
                read_only,
            } => KernelArg::Buffer {
                name: name.clone(),
                space: *space,
                elem: ScalarType::U16,
                read_only: *read_only,
            },
            other => other.clone(),
        };
        found.name == self.signature.name
            && found.args.len() == self.signature.args.len()
            && found
                .args
                .iter()
                .zip(&self.signature.args)
                .all(|(f, s)| *f == as_source(s))
    }

    /// The distribution used for an input (buffer or scalar), with the default.
    pub fn distribution(&self, name: &str) -> Distribution {
        self.inputs.get(name).cloned().unwrap_or_default()
    }

    /// Scalars the tuner draws (those that are not sizes).
    pub fn drawn_scalars(&self) -> impl Iterator<Item = (&str, ScalarType)> {
        self.caller_args().filter_map(|a| match a {
            KernelArg::Scalar { name, ty } => Some((name.as_str(), *ty)),
            KernelArg::Buffer { .. } => None,
        })
    }

    /// Every problem found in the specification (empty when it is sound): the checks of
    /// `check`, in order.
    pub fn validate(&self) -> Vec<SpecError> {
        check::validate(self)
    }
}

/// Longest kernel id, workload or size name accepted (they become parts of file names).
const MAX_NAME: usize = 128;

/// The identifiers of OpenCL C source text outside comments and string literals.
pub fn source_identifiers(source: &str) -> BTreeSet<&str> {
    let bytes = source.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            b'"' | b'\'' => {
                let quote = bytes[i];
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.insert(&source[start..i]);
            }
            c if c.is_ascii_digit() => {
                // a number, suffixes included (`1u`, `0x1F`, `1e5f`)
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
                {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` can be a preprocessor macro of an OpenCL C kernel without breaking the
/// language: an identifier that is not a keyword, a built-in type or reserved (`__` prefix).
pub fn check_macro_name(name: &str) -> Result<(), String> {
    const KEYWORDS: &[&str] = &[
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "bool",
        "half",
        "true",
        "false",
        "kernel",
        "global",
        "local",
        "constant",
        "private",
        "read_only",
        "write_only",
        "read_write",
        "uniform",
        "pipe",
        "uchar",
        "ushort",
        "uint",
        "ulong",
        "size_t",
        "ptrdiff_t",
        "intptr_t",
        "uintptr_t",
        "NULL",
        "defined",
    ];
    const VECTOR_BASES: &[&str] = &[
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double",
        "half", "bool",
    ];
    if !is_identifier(name) {
        return Err("is not an identifier".into());
    }
    if name.starts_with("__") || name.starts_with("CL_") || name.starts_with("cl_") {
        return Err("is a reserved name of OpenCL C (`__`, `CL_` and `cl_` prefixes)".into());
    }
    let vector = VECTOR_BASES.iter().any(|b| {
        name.strip_prefix(b)
            .is_some_and(|width| ["2", "3", "4", "8", "16"].contains(&width))
    });
    if KEYWORDS.contains(&name) || vector {
        return Err("is a keyword or built-in type of OpenCL C".into());
    }
    Ok(())
}

/// A kernel id: ASCII letters, digits, `_`, `-`, `.` and `:`, starting with a letter or `_`,
/// at most 128 characters (`<package>::<Item>` always is).
pub fn check_kernel_id(id: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if id.is_empty()
        || id.len() > MAX_NAME
        || !id.chars().all(ok_char)
        || !id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    {
        return Err(format!("must be 1 to {MAX_NAME} ASCII letters, digits, `_`, `-`, `.` or `:`, starting with a letter or `_`"));
    }
    Ok(())
}

/// One whitespace-separated token of `options = "..."`: only shapes that change how the
/// kernel is compiled, never what is read (no `-I`, no `-include`, no input file): `-cl-...`,
/// `-w`, `-Werror`, `-O0`..`-O3` and `-D NAME[=VALUE]` (a `-D` may not redefine a parameter).
/// `after_d`: the token follows a separate `-D`, so it is the macro's name.
pub fn check_build_option(
    token: &str,
    after_d: bool,
    params: &BTreeSet<&str>,
) -> Result<(), String> {
    let value_ok = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+'))
    };
    let ok = match token {
        "-w" | "-Werror" | "-O0" | "-O1" | "-O2" | "-O3" | "-D" => true,
        t if t.starts_with("-cl-") => {
            let (name, value) = t.split_once('=').map_or((t, None), |(n, v)| (n, Some(v)));
            name[4..]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && value.is_none_or(value_ok)
        }
        t if t.starts_with("-D") => {
            let (name, value) = t[2..]
                .split_once('=')
                .map_or((&t[2..], None), |(n, v)| (n, Some(v)));
            if params.contains(name) {
                return Err(format!(
                    "build option `{token}` redefines parameter `{name}`, which the tuner sets"
                ));
            }
            is_identifier(name) && value.is_none_or(value_ok)
        }
        // the macro name of a separate `-D NAME[=VALUE]`
        t if after_d => {
            let (name, value) = t.split_once('=').map_or((t, None), |(n, v)| (n, Some(v)));
            if params.contains(name) {
                return Err(format!(
                    "build option `-D {token}` redefines parameter `{name}`, which the tuner sets"
                ));
            }
            is_identifier(name) && value.is_none_or(value_ok)
        }
        // anything else would reach the compiler as an input file or an unknown option
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("build option `{token}` is not allowed: options may be `-cl-...`, `-w`, `-Werror`, `-O0`..`-O3` and `-D NAME[=VALUE]`"))
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
                Param {
                    name: "WG".into(),
                    values: vec![32, 64, 128],
                },
                Param {
                    name: "VEC".into(),
                    values: vec![1, 2, 4],
                },
            ],
            reference: [("WG".to_string(), 64), ("VEC".to_string(), 1)]
                .into_iter()
                .collect(),
            sizes: vec!["n".into()],
            require: vec![e("n % (VEC * WG) == 0")],
            global: vec![e("n / VEC")],
            local: Some(vec![e("WG")]),
            buffers: [("x".to_string(), e("n")), ("y".to_string(), e("n"))]
                .into_iter()
                .collect(),
            inputs: [("y".to_string(), Distribution::Uniform { lo: -1.0, hi: 1.0 })]
                .into_iter()
                .collect(),
            checks: vec![Check::elementwise("y", 1e-5, 0.0)],
            workloads: vec![
                Workload {
                    name: "small".into(),
                    sizes: [("n".to_string(), 1 << 12)].into_iter().collect(),
                    on: vec![],
                },
                Workload {
                    name: "large".into(),
                    sizes: [("n".to_string(), 1 << 20)].into_iter().collect(),
                    on: vec![],
                },
            ],
            cost: Some(Cost {
                bytes: Some(e("12 * n")),
                flops: Some(e("2 * n")),
            }),
            options: String::new(),
            extrapolate: false,
            in_place: BTreeMap::new(),
            edges: Edges::All,
            ranges: Vec::new(),
            ranges_on: Vec::new(),
            scratch: BTreeSet::new(),
        }
    }

    fn p(pairs: &[(&str, i64)]) -> Params {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn sound_spec_validates() {
        assert_eq!(saxpy().validate(), vec![]);
        let mut s = saxpy();
        s.options =
            "-cl-mad-enable -cl-std=CL2.0 -w -O3 -DTRACE -D DEPTH=2 -cl-nv-maxrregcount=64".into();
        assert_eq!(s.validate(), vec![]);
    }

    #[test]
    fn constraints_may_read_the_device() {
        let mut s = saxpy();
        // Wide vectors only on NVIDIA devices of compute capability 8.0 or later, and work-groups
        // the device can hold.
        s.require
            .push(Expr::parse("VEC == 1 || device_nvidia && device_sm >= 80").unwrap());
        s.require.push(
            Expr::parse("WG <= device_max_work_group && (device_has_cl_khr_fp64 || VEC < 4)")
                .unwrap(),
        );
        assert_eq!(s.validate(), vec![]);
        let sizes = p(&[("n", 4096)]);
        let wide = p(&[("WG", 64), ("VEC", 4)]);
        let h200 = DeviceTraits {
            vendor_id: 0x10de,
            kind: "gpu".into(),
            max_work_group_size: 1024,
            nv_compute_capability: 90,
            extensions: ["cl_khr_fp64".to_string()].into(),
            ..Default::default()
        };
        assert!(s.geometry(&wide, &sizes, Some(&h200)).is_ok());
        let cpu = DeviceTraits {
            vendor_id: 0x8086,
            kind: "cpu".into(),
            max_work_group_size: 4096,
            ..Default::default()
        };
        let e = s.geometry(&wide, &sizes, Some(&cpu)).unwrap_err();
        assert_eq!(
            e,
            LaunchError::DeviceConstraint("VEC == 1 || device_nvidia && device_sm >= 80".into())
        );
        assert!(
            e.to_string().contains("does not hold on this device"),
            "{e}"
        );
        assert!(s
            .geometry(&p(&[("WG", 64), ("VEC", 1)]), &sizes, Some(&cpu))
            .is_ok());
        let old = DeviceTraits {
            nv_compute_capability: 75,
            ..h200.clone()
        };
        assert!(s.geometry(&wide, &sizes, Some(&old)).is_err());
        let small = DeviceTraits {
            max_work_group_size: 32,
            ..h200.clone()
        };
        assert!(matches!(
            s.geometry(&wide, &sizes, Some(&small)),
            Err(LaunchError::DeviceConstraint(_))
        ));
        // No device at hand: only what does not depend on one is checked.
        assert!(s.geometry(&wide, &sizes, None).is_ok());
        assert!(matches!(
            s.geometry(&wide, &p(&[("n", 100)]), None),
            Err(LaunchError::Constraint(_))
        ));
    }

    #[test]
    fn a_parameter_that_appears_nowhere_is_an_error() {
        let mut s = saxpy();
        s.source = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) {\n\
            // UNROL is a misspelling: this comment and the string below do not use it\n\
            /* nor UNROL here */ const char* t = \"UNROL\"; for (int u = 0; u < UNROLL; u++) {} }"
            .into();
        s.params.push(Param {
            name: "UNROL".into(),
            values: vec![1, 2],
        });
        s.reference.insert("UNROL".into(), 1);
        let errors = s.validate();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].part, Part::Param("UNROL".into()));
        assert!(
            errors[0].message.contains("appears nowhere"),
            "{}",
            errors[0].message
        );
        // In the source, or only in the geometry: it matters.
        s.params.last_mut().unwrap().name = "UNROLL".into();
        s.reference.remove("UNROL");
        s.reference.insert("UNROLL".into(), 1);
        assert_eq!(s.validate(), vec![]);
        assert!(source_identifiers("int a = B1 + 0x1Fu; // C\n/* D */ E")
            .iter()
            .eq(["B1", "E", "a", "int"].iter()));
    }

    #[test]
    fn device_properties_are_read_only_by_constraints_and_spelled_right() {
        let with = |f: &dyn Fn(&mut KernelSpec)| {
            let mut s = saxpy();
            f(&mut s);
            s.validate()
                .into_iter()
                .map(|e| e.message)
                .collect::<Vec<_>>()
                .join("\n")
        };
        let e = with(&|s| s.require.push(Expr::parse("device_colour == 1").unwrap()));
        assert!(
            e.contains("`device_colour`, which is not a device property (they are device_vendor"),
            "{e}"
        );
        let e = with(&|s| s.global = vec![Expr::parse("n / VEC + device_sm").unwrap()]);
        assert!(
            e.contains(
                "`global` reads `device_sm`: only `require(...)` may read device properties"
            ),
            "{e}"
        );
        let e = with(&|s| {
            s.buffers
                .insert("x".into(), Expr::parse("n * device_gpu").unwrap());
        });
        assert!(
            e.contains("only `require(...)` may read device properties"),
            "{e}"
        );
        let e = with(&|s| {
            s.params.push(Param {
                name: "device_x".into(),
                values: vec![1],
            });
            s.reference.insert("device_x".into(), 1);
        });
        assert!(e.contains("starts with `device_`"), "{e}");
    }

    #[test]
    fn one_rule_says_who_supplies_each_argument() {
        let s = saxpy();
        let roles: Vec<(&str, ArgRole)> = s.args_with_roles().map(|(a, r)| (a.name(), r)).collect();
        assert_eq!(
            roles,
            vec![
                ("n", ArgRole::Size),
                ("a", ArgRole::CallerScalar),
                ("x", ArgRole::CallerBuffer),
                ("y", ArgRole::CallerBuffer)
            ]
        );
        let callers: Vec<&str> = s.caller_args().map(|a| a.name()).collect();
        assert_eq!(callers, ["a", "x", "y"]);
    }

    #[test]
    fn geometry_and_constraints() {
        let s = saxpy();
        let sizes = p(&[("n", 4096)]);
        let g = s
            .geometry(&p(&[("WG", 64), ("VEC", 4)]), &sizes, None)
            .unwrap();
        assert_eq!(
            g,
            Geometry {
                global: vec![1024],
                local: Some(vec![64])
            }
        );
        let e = s
            .geometry(&p(&[("WG", 64), ("VEC", 4)]), &p(&[("n", 100)]), None)
            .unwrap_err();
        assert!(matches!(e, LaunchError::Constraint(_)), "{e}");
        assert_eq!(
            s.buffer_len("x", &p(&[("WG", 64), ("VEC", 4)]), &sizes)
                .unwrap(),
            4096
        );
        assert_eq!(
            s.build_options(&p(&[("WG", 64), ("VEC", 4)]), &[]).unwrap(),
            "-D VEC=4 -D WG=64"
        );
        // Nothing but declared parameters reaches the compiler.
        let injected = p(&[("WG", 64), ("VEC", 4), ("X -cl-fast-relaxed-math -DVEC", 1)]);
        assert!(
            matches!(s.build_options(&injected, &[]), Err(LaunchError::Params(m)) if m.contains("not a parameter"))
        );
        assert!(
            s.build_options(&p(&[("WG", 64)]), &[]).is_err(),
            "a missing parameter"
        );
        assert_eq!(
            s.check_params(&p(&[("WG", 3), ("VEC", 4)]), &[])
                .unwrap_err(),
            "WG=3 is not in the parameter's domain"
        );
        // A generated source may declare more parameters, or other values for one.
        let declared = [
            Param {
                name: "TS".into(),
                values: vec![8, 16],
            },
            Param {
                name: "WG".into(),
                values: vec![3],
            },
        ];
        let with_ts = p(&[("WG", 3), ("VEC", 4), ("TS", 16)]);
        assert_eq!(
            s.build_options(&with_ts, &declared).unwrap(),
            "-D TS=16 -D VEC=4 -D WG=3"
        );
        assert!(s.check_params(&with_ts, &declared).is_ok());
        assert!(s
            .check_params(&p(&[("WG", 3), ("VEC", 4), ("TS", 4)]), &declared)
            .is_err());
        assert!(
            s.build_options(&p(&[("WG", 64), ("VEC", 4)]), &declared)
                .is_err(),
            "TS missing"
        );
        // ...but never one named like a size or an argument, and sizes always win in expressions.
        let shadow = [Param {
            name: "n".into(),
            values: vec![16],
        }];
        let e = s
            .build_options(&p(&[("WG", 64), ("VEC", 4), ("n", 16)]), &shadow)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("declares a parameter `n`, which is a size"),
            "{e}"
        );
        let env = s.env(&p(&[("WG", 64), ("n", 16)]), &p(&[("n", 4096)]));
        assert_eq!(env["n"], 4096);
        // Zero and unknown sizes are errors that say so.
        let e = s.geometry(&s.reference, &p(&[("n", 0)]), None).unwrap_err();
        assert!(matches!(e, LaunchError::ZeroSize(ref n) if n == "n"), "{e}");
        assert!(matches!(
            s.geometry(&s.reference, &p(&[("m", 64)]), None),
            Err(LaunchError::SizeNames { .. })
        ));
    }

    /// `meets_requirements` says yes exactly where `geometry` finds no failed requirement, with
    /// a device (whose constraints count) and without one (they are skipped), and says no where
    /// a requirement cannot be evaluated.
    #[test]
    fn meeting_the_requirements_agrees_with_the_geometry() {
        let mut s = saxpy();
        s.require
            .push(Expr::parse("WG <= device_max_work_group").unwrap());
        s.require
            .push(Expr::parse("VEC < 4 || n / VEC / 0 > 0").unwrap());
        let small = DeviceTraits {
            max_work_group_size: 64,
            ..DeviceTraits::default()
        };
        let mut seen = [0usize; 2];
        for device in [None, Some(&small)] {
            for n in [64, 96, 128, 4096] {
                for wg in [32, 64, 128] {
                    for vec in [1, 2, 4] {
                        let params = p(&[("WG", wg), ("VEC", vec)]);
                        let sizes = p(&[("n", n)]);
                        let meets = s.meets_requirements(&params, &sizes, device);
                        let geometry = s.geometry(&params, &sizes, device);
                        let failed = matches!(
                            geometry,
                            Err(LaunchError::Constraint(_)
                                | LaunchError::DeviceConstraint(_)
                                | LaunchError::Eval(_))
                        );
                        assert_eq!(meets, !failed, "n={n} WG={wg} VEC={vec}: {geometry:?}");
                        seen[meets as usize] += 1;
                    }
                }
            }
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
        // A device constraint is skipped without a device, checked with one.
        let wide = p(&[("WG", 128), ("VEC", 1)]);
        assert!(s.meets_requirements(&wide, &p(&[("n", 4096)]), None));
        assert!(!s.meets_requirements(&wide, &p(&[("n", 4096)]), Some(&small)));
    }

    /// An edit of a specification.
    type Edit = Box<dyn Fn(&mut KernelSpec)>;

    #[test]
    fn validation_finds_each_mistake() {
        let cases: Vec<(Edit, Part, &str)> = vec![
            (
                Box::new(|s| {
                    s.reference.remove("WG");
                }),
                Part::Reference,
                "no value for parameter `WG`",
            ),
            (
                Box::new(|s| {
                    s.reference.insert("WG".into(), 7);
                }),
                Part::Reference,
                "not in its domain",
            ),
            (
                Box::new(|s| s.require.push(Expr::parse("m > 0").unwrap())),
                Part::Require(1),
                "reads `m`",
            ),
            (
                Box::new(|s| {
                    s.buffers.remove("x");
                }),
                Part::Buffer("x".into()),
                "no length",
            ),
            (
                Box::new(|s| {
                    s.buffers.insert("a".into(), Expr::literal(1));
                }),
                Part::Buffer("a".into()),
                "scalar",
            ),
            (
                Box::new(|s| s.checks[0].buffer = "x".into()),
                Part::Check("x".into()),
                "read-only",
            ),
            (
                Box::new(|s| {
                    s.inputs.insert("z".into(), Distribution::default());
                }),
                Part::Input("z".into()),
                "no argument `z`",
            ),
            (
                Box::new(|s| {
                    s.inputs
                        .insert("x".into(), Distribution::Constant { value: 1.0 });
                }),
                Part::Input("x".into()),
                "cannot be constant",
            ),
            (
                Box::new(|s| {
                    s.workloads[0]
                        .sizes
                        .insert("m".into(), 3)
                        .map_or((), |_| ())
                }),
                Part::Workload("small".into()),
                "binds",
            ),
            (
                Box::new(|s| {
                    s.workloads[0]
                        .sizes
                        .insert("n".into(), 100)
                        .map_or((), |_| ())
                }),
                Part::Workload("small".into()),
                "reference cannot run",
            ),
            (
                Box::new(|s| {
                    s.params.push(Param {
                        name: "a".into(),
                        values: vec![1],
                    })
                }),
                Part::Param("a".into()),
                "name of a kernel argument",
            ),
            (
                Box::new(|s| s.local = Some(vec![])),
                Part::Local,
                "dimension",
            ),
            (
                Box::new(|s| s.checks.clear()),
                Part::Kernel,
                "names no output",
            ),
            (
                Box::new(|s| {
                    s.params.push(Param {
                        name: "float".into(),
                        values: vec![1],
                    })
                }),
                Part::Param("float".into()),
                "keyword",
            ),
            (
                Box::new(|s| {
                    s.params.push(Param {
                        name: "float4".into(),
                        values: vec![1],
                    })
                }),
                Part::Param("float4".into()),
                "built-in type",
            ),
            (
                Box::new(|s| {
                    s.params.push(Param {
                        name: "__X".into(),
                        values: vec![1],
                    })
                }),
                Part::Param("__X".into()),
                "reserved",
            ),
            (
                Box::new(|s| {
                    s.params.push(Param {
                        name: "X -DY".into(),
                        values: vec![1],
                    })
                }),
                Part::Param("X -DY".into()),
                "not an identifier",
            ),
            (
                Box::new(|s| s.id = "../../etc".into()),
                Part::Name,
                "kernel id",
            ),
            (
                Box::new(|s| s.workloads[0].name = "a/b".into()),
                Part::Workload("a/b".into()),
                "not an identifier",
            ),
            (
                Box::new(|s| s.options = "-cl-mad-enable -I/etc".into()),
                Part::Options,
                "`-I/etc` is not allowed",
            ),
            (
                Box::new(|s| s.options = "-include x.h".into()),
                Part::Options,
                "`-include` is not allowed",
            ),
            (
                Box::new(|s| s.options = "-DWG=3".into()),
                Part::Options,
                "redefines parameter `WG`",
            ),
            (
                Box::new(|s| s.options = "-D VEC".into()),
                Part::Options,
                "redefines parameter `VEC`",
            ),
            (
                Box::new(|s| s.options = "-w FOO".into()),
                Part::Options,
                "`FOO` is not allowed",
            ),
            (
                Box::new(|s| s.options = "-w -D".into()),
                Part::Options,
                "names no macro",
            ),
            (
                Box::new(|s| {
                    s.buffers
                        .insert("x".into(), Expr::parse("n * VEC").unwrap());
                }),
                Part::Buffer("x".into()),
                "reads parameter `VEC`",
            ),
        ];
        for (i, (mutate, part, needle)) in cases.into_iter().enumerate() {
            let mut s = saxpy();
            mutate(&mut s);
            let errors = s.validate();
            assert!(
                errors
                    .iter()
                    .any(|e| e.part == part && e.message.contains(needle)),
                "case {i}: expected {part:?} containing {needle:?}, got {errors:?}"
            );
        }
    }
}
