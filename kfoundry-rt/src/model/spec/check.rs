//! The checks of a kernel specification, one function each, in the order their errors are
//! reported (as serde's `internals/check.rs` checks a derive input): [`validate`] runs them
//! over a [`Checks`] context that holds the specification, the names it declares and the
//! errors found so far. To add a check: a function here, called from [`validate`], and a UI
//! test of its message (`tests/ui/fail`).

use std::collections::BTreeSet;

use super::*;

/// Every problem found in `spec` (empty when it is sound).
pub(super) fn validate(spec: &KernelSpec) -> Vec<SpecError> {
    let mut cx = Checks {
        spec,
        params: spec.params.iter().map(|p| p.name.as_str()).collect(),
        sizes: spec.sizes.iter().map(String::as_str).collect(),
        errors: Vec::new(),
    };
    params(&mut cx);
    names(&mut cx);
    build_options(&mut cx);
    params_matter(&mut cx);
    reference(&mut cx);
    constraints(&mut cx);
    geometry(&mut cx);
    scratch(&mut cx);
    buffers(&mut cx);
    inputs(&mut cx);
    in_place(&mut cx);
    outputs(&mut cx);
    drawn_scalars(&mut cx);
    // Whether the reference can run the workloads is asked only when nothing above is wrong.
    let reference_checkable = cx.errors.is_empty();
    ranges(&mut cx);
    workloads(&mut cx, reference_checkable);
    size_arguments(&mut cx);
    cost(&mut cx);
    cx.errors
}

/// The specification under check, the names it declares, and what is wrong so far.
struct Checks<'a> {
    spec: &'a KernelSpec,
    params: BTreeSet<&'a str>,
    sizes: BTreeSet<&'a str>,
    errors: Vec<SpecError>,
}

impl<'a> Checks<'a> {
    /// The kernel argument `name`.
    fn arg(&self, name: &str) -> Option<&'a KernelArg> {
        self.spec.signature.args.iter().find(|a| a.name() == name)
    }

    /// A variable of `e` that is neither a parameter nor a size.
    fn unknown_variable(&self, e: &Expr) -> Option<String> {
        e.variables()
            .into_iter()
            .find(|v| !self.params.contains(v.as_str()) && !self.sizes.contains(v.as_str()))
    }
}

/// Records an error of `part` (pointing at `token` within it, when given).
macro_rules! err {
    ($cx:ident, $part:expr, token $token:expr, $message:expr $(,)?) => {{
        let (part, token, message) = ($part, Some($token), $message);
        $cx.errors.push(SpecError {
            part,
            token,
            message,
        })
    }};
    ($cx:ident, $part:expr, $message:expr $(,)?) => {{
        let (part, message) = ($part, $message);
        $cx.errors.push(SpecError {
            part,
            token: None,
            message,
        })
    }};
}

/// What is wrong with `what` reading `v`, which is neither a parameter nor a size.
fn unknown_msg(v: String, what: &str) -> String {
    if v.starts_with(DEVICE_PREFIX) {
        format!("{what} reads `{v}`: only `require(...)` may read device properties")
    } else {
        format!("{what} reads `{v}`, which is neither a parameter nor a size (sizes are the names bound by the workloads)")
    }
}

/// What is wrong with `what` reading `v`, named like a device property.
fn device_msg(v: &str, what: &str) -> String {
    if is_device_property(v) {
        format!("{what} reads the device property `{v}`: only `require(...)` may read device properties")
    } else {
        let names: Vec<&str> = DEVICE_PROPERTIES.iter().map(|(n, _)| *n).collect();
        format!(
            "{what} reads `{v}`, which is not a device property (they are {})",
            names.join(", ")
        )
    }
}

/// Parameters: declared once, with values, named unlike sizes, arguments and device properties,
/// usable as macros.
fn params(cx: &mut Checks) {
    let spec = cx.spec;
    let mut seen = BTreeSet::new();
    for p in &spec.params {
        if !seen.insert(p.name.as_str()) {
            err!(
                cx,
                Part::Param(p.name.clone()),
                format!("parameter `{}` is declared twice", p.name)
            );
        }
        if p.values.is_empty() {
            err!(
                cx,
                Part::Param(p.name.clone()),
                format!("parameter `{}` has no values", p.name)
            );
        }
        if cx.sizes.contains(p.name.as_str()) {
            err!(
                cx,
                Part::Param(p.name.clone()),
                format!("`{}` is both a parameter and a size", p.name)
            );
        }
        if cx.arg(&p.name).is_some() {
            err!(cx,
                Part::Param(p.name.clone()),
                format!("parameter `{}` has the name of a kernel argument; as `-D {}=...` it would rewrite the signature", p.name, p.name),
            );
        }
        if let Err(why) = check_macro_name(&p.name) {
            err!(
                cx,
                Part::Param(p.name.clone()),
                format!("parameter `{}` {why}", p.name)
            );
        }
        if p.name.starts_with(DEVICE_PREFIX) {
            err!(
                cx,
                Part::Param(p.name.clone()),
                format!(
                    "parameter `{}` starts with `{DEVICE_PREFIX}`, which names device properties",
                    p.name
                )
            );
        }
    }
}

/// Names that reach file names, messages and build options: identifiers only.
fn names(cx: &mut Checks) {
    let spec = cx.spec;
    if let Err(why) = check_kernel_id(&spec.id) {
        err!(cx, Part::Name, format!("kernel id `{}` {why}", spec.id));
    }
    for s in &spec.sizes {
        if !is_identifier(s) {
            err!(cx, Part::Kernel, format!("size `{s}` is not an identifier"));
        }
        if s.starts_with(DEVICE_PREFIX) {
            err!(
                cx,
                Part::Kernel,
                format!("size `{s}` starts with `{DEVICE_PREFIX}`, which names device properties")
            );
        }
    }
    for w in &spec.workloads {
        if !is_identifier(&w.name) || w.name.len() > MAX_NAME {
            err!(
                cx,
                Part::Workload(w.name.clone()),
                format!(
                    "workload name `{}` is not an identifier of at most {MAX_NAME} characters",
                    w.name
                )
            );
        }
    }
}

/// The build options: compile-shaping flags only, and `-D` only for declared parameters.
fn build_options(cx: &mut Checks) {
    let spec = cx.spec;
    let tokens: Vec<&str> = spec.options.split_whitespace().collect();
    for (i, token) in tokens.iter().enumerate() {
        let after_d = i > 0 && tokens[i - 1] == "-D";
        if let Err(why) = check_build_option(token, after_d, &cx.params) {
            err!(cx, Part::Options, why);
        }
    }
    if tokens.last() == Some(&"-D") {
        err!(
            cx,
            Part::Options,
            "build option `-D` at the end names no macro".into()
        );
    }
}

/// A parameter must matter somewhere: in the source (as a preprocessor name), or in the launch
/// geometry or a buffer's length. One that does not (a typo like `UNROL`) would multiply the
/// space with identical kernels.
fn params_matter(cx: &mut Checks) {
    let spec = cx.spec;
    let in_source = source_identifiers(&spec.source);
    let in_exprs: BTreeSet<String> = spec
        .global
        .iter()
        .chain(spec.local.iter().flatten())
        .chain(spec.buffers.values())
        .flat_map(Expr::variables)
        .collect();
    for p in &spec.params {
        // (a name refused above is not reported twice)
        if check_macro_name(&p.name).is_ok()
            && !in_source.contains(p.name.as_str())
            && !in_exprs.contains(&p.name)
        {
            err!(cx,
                Part::Param(p.name.clone()),
                format!(
                    "parameter `{}` appears nowhere: not in the kernel source (outside comments), the launch geometry or a buffer's length, so its values would all build the same kernel (a misspelling?)",
                    p.name
                ),
            );
        }
    }
}

/// The reference: a value in the domain for every parameter, and nothing else.
fn reference(cx: &mut Checks) {
    let spec = cx.spec;
    for p in &spec.params {
        match spec.reference.get(&p.name) {
            None => err!(
                cx,
                Part::Reference,
                format!("`reference(...)` gives no value for parameter `{}`", p.name)
            ),
            Some(v) if !p.values.contains(v) => err!(cx,
                Part::Reference,
                token p.name.clone(),
                format!("reference value {v} of `{}` is not in its domain", p.name),
            ),
            Some(_) => {}
        }
    }
    for name in spec.reference.keys() {
        if !cx.params.contains(name.as_str()) {
            err!(
                cx,
                Part::Reference,
                format!("`reference(...)` names `{name}`, which is not a parameter")
            );
        }
    }
}

/// Constraints read parameters, sizes and device properties only.
fn constraints(cx: &mut Checks) {
    let spec = cx.spec;
    for (i, r) in spec.require.iter().enumerate() {
        // Constraints may also read the device they run on.
        let unknown = r.variables().into_iter().find(|v| {
            !cx.params.contains(v.as_str())
                && !cx.sizes.contains(v.as_str())
                && !is_device_property(v)
        });
        match unknown {
            Some(v) if v.starts_with(DEVICE_PREFIX) => {
                err!(cx, Part::Require(i), token v.clone(), device_msg(&v, "constraint"))
            }
            Some(v) => err!(cx, Part::Require(i), token v.clone(), unknown_msg(v, "constraint")),
            None => {}
        }
    }
}

/// `global` and `local`: 1 to 3 dimensions, alike, reading parameters and sizes only.
fn geometry(cx: &mut Checks) {
    let spec = cx.spec;
    if spec.global.is_empty() || spec.global.len() > 3 {
        err!(
            cx,
            Part::Global,
            format!(
                "`global` needs 1 to 3 dimensions, found {}",
                spec.global.len()
            )
        );
    }
    for g in &spec.global {
        if let Some(v) = cx.unknown_variable(g) {
            err!(cx, Part::Global, token v.clone(), unknown_msg(v, "`global`"));
        }
    }
    if let Some(local) = &spec.local {
        if local.len() != spec.global.len() {
            err!(
                cx,
                Part::Local,
                format!(
                    "`local` has {} dimension(s) but `global` has {}",
                    local.len(),
                    spec.global.len()
                ),
            );
        }
        for l in local {
            if let Some(v) = cx.unknown_variable(l) {
                err!(cx, Part::Local, token v.clone(), unknown_msg(v, "`local`"));
            }
        }
    }
}

/// Buffers: every pointer argument has a length; every length names a pointer and reads sizes
/// only where the caller allocates it.
fn buffers(cx: &mut Checks) {
    let spec = cx.spec;
    for a in &spec.signature.args {
        if let KernelArg::Buffer { name, .. } = a {
            if !spec.buffers.contains_key(name) {
                err!(
                    cx,
                    Part::Buffer(name.clone()),
                    format!("`buffers(...)` gives no length for pointer argument `{name}`")
                );
            }
        }
    }
    for (name, len) in &spec.buffers {
        match cx.arg(name) {
            Some(KernelArg::Buffer { .. }) => {}
            Some(KernelArg::Scalar { .. }) => {
                err!(
                    cx,
                    Part::Buffer(name.clone()),
                    format!("`{name}` is a scalar argument, not a buffer")
                )
            }
            None => err!(
                cx,
                Part::Buffer(name.clone()),
                format!("the kernel has no argument `{name}`")
            ),
        }
        if let Some(v) = cx.unknown_variable(len) {
            err!(cx, Part::Buffer(name.clone()), token v.clone(), unknown_msg(v, &format!("the length of `{name}`")));
        }
        // The caller allocates its buffers before dispatch picks a variant: their lengths
        // may depend on sizes only (local memory and scratch may depend on parameters).
        if matches!(cx.arg(name), Some(a) if spec.role(a) == ArgRole::CallerBuffer) {
            if let Some(p) = len
                .variables()
                .into_iter()
                .find(|v| cx.params.contains(v.as_str()))
            {
                err!(cx,
                    Part::Buffer(name.clone()),
                    token p.clone(),
                    format!("the length of `{name}` reads parameter `{p}`: the caller allocates `{name}` before dispatch picks a variant, so its length may depend on sizes only (`__local` and `scratch(...)` lengths may depend on parameters)"),
                );
            }
        }
    }
}

/// Scratch buffers: written `__global` buffer arguments, nobody's input, output or alias.
fn scratch(cx: &mut Checks) {
    let spec = cx.spec;
    for name in &spec.scratch {
        let part = || Part::Scratch(name.clone());
        match cx.arg(name) {
            Some(KernelArg::Buffer {
                space: AddressSpace::Global,
                read_only: false,
                ..
            }) => {}
            Some(_) => err!(cx, part(), format!("`scratch({name})`: `{name}` is not a written `__global` buffer argument (scratch is memory the kernel writes and clears)")),
            None => err!(cx, part(), format!("`scratch({name})`: the kernel has no argument `{name}`")),
        }
        let role = if spec.inputs.contains_key(name) {
            Some("an input (`inputs(...)`)")
        } else if spec.checks.iter().any(|c| &c.buffer == name) {
            Some("a checked output (`check(...)`)")
        } else if spec.in_place.contains_key(name) || spec.in_place.values().any(|r| r == name) {
            Some("aliased (`in_place(...)`)")
        } else {
            None
        };
        if let Some(role) = role {
            err!(cx, part(), format!("`scratch({name})`: `{name}` is also {role}; scratch belongs to the launcher, all zero at every launch, and nobody reads its contents after"));
        }
    }
}

/// Inputs: existing, non-local arguments; constants only for scalars; ranges of sizes only.
fn inputs(cx: &mut Checks) {
    let spec = cx.spec;
    for (name, dist) in &spec.inputs {
        match cx.arg(name) {
            None => err!(
                cx,
                Part::Input(name.clone()),
                format!("the kernel has no argument `{name}`")
            ),
            Some(KernelArg::Buffer {
                space: AddressSpace::Local,
                ..
            }) => {
                err!(
                    cx,
                    Part::Input(name.clone()),
                    format!("`{name}` is local memory; it has no input")
                )
            }
            Some(KernelArg::Buffer { .. }) if matches!(dist, Distribution::Constant { .. }) => {
                err!(cx, Part::Input(name.clone()), format!("buffer `{name}` cannot be constant: constant inputs hide indexing mistakes"),)
            }
            Some(KernelArg::Scalar { .. }) if cx.sizes.contains(name.as_str()) => {
                err!(
                    cx,
                    Part::Input(name.clone()),
                    format!("`{name}` is a size; its value comes from the workload"),
                )
            }
            Some(_) => {}
        }
        match dist {
            Distribution::Uniform { lo, hi }
                if !lo.is_finite() || !hi.is_finite() || *lo >= *hi =>
            {
                err!(
                    cx,
                    Part::Input(name.clone()),
                    format!("`uniform({lo}, {hi})` needs finite lo < hi")
                )
            }
            Distribution::Normal { std, mean }
                if !mean.is_finite() || !std.is_finite() || *std <= 0.0 =>
            {
                err!(
                    cx,
                    Part::Input(name.clone()),
                    format!("`normal({mean}, {std})` needs a positive finite std")
                )
            }
            Distribution::UniformInt { lo, hi } | Distribution::Monotone { lo, hi } => {
                // The caller's values cannot depend on a variant: sizes only.
                for e in [lo, hi] {
                    if let Some(v) = e
                        .variables()
                        .into_iter()
                        .find(|v| !cx.sizes.contains(v.as_str()))
                    {
                        err!(cx,
                            Part::Input(name.clone()),
                            format!("`{e}` reads `{v}`, which is not a size: an input's range may read the sizes only")
                        );
                    }
                }
            }
            _ => {}
        }
        if dist.is_integer_only()
            && !matches!(cx.arg(name), Some(KernelArg::Buffer { elem, .. }) if !elem.is_float())
        {
            err!(cx,
                Part::Input(name.clone()),
                format!("`{name}` is not an integer buffer: `uniform_int`, `permutation` and `monotone` draw the values of integer buffers")
            );
        }
    }
}

/// In place: a written caller buffer may alias one other caller buffer of its type.
fn in_place(cx: &mut Checks) {
    let spec = cx.spec;
    let mut aliased = BTreeSet::new();
    for (written, read) in &spec.in_place {
        let part = || Part::InPlace(written.clone());
        match (cx.arg(written), cx.arg(read)) {
            (
                Some(KernelArg::Buffer { space: AddressSpace::Global, read_only: false, elem: a, .. }),
                Some(KernelArg::Buffer { space, elem: b, .. }),
            ) if *space != AddressSpace::Local => {
                if a != b {
                    err!(cx,
                        part(),
                        format!(
                            "`in_place({written} = {read})`: `{written}` holds `{}` and `{read}` holds `{}`",
                            a.opencl_name(),
                            b.opencl_name()
                        )
                    );
                }
                if written == read {
                    err!(cx, part(), format!("`in_place({written} = {read})` names one buffer twice"));
                }
            }
            (Some(KernelArg::Buffer { space: AddressSpace::Global, read_only: false, .. }), _) => {
                err!(cx, part(), format!("`in_place({written} = {read})`: `{read}` is not a `__global` or `__constant` buffer argument"))
            }
            _ => err!(cx, part(), format!("`in_place({written} = ...)`: `{written}` is not a written `__global` buffer argument")),
        }
        if !aliased.insert(read.as_str()) || spec.in_place.contains_key(read) {
            err!(
                cx,
                part(),
                format!("`in_place`: `{read}` is aliased twice (one written buffer per input)")
            );
        }
    }
}

/// Checks: at least one, of written global buffers, with tolerances that mean something.
fn outputs(cx: &mut Checks) {
    let spec = cx.spec;
    if spec.checks.is_empty() {
        err!(
            cx,
            Part::Kernel,
            "`check(...)` names no output: the tuner could not verify candidates".into()
        );
    }
    for c in &spec.checks {
        match cx.arg(&c.buffer) {
            Some(KernelArg::Buffer { space: AddressSpace::Global, read_only: false, .. }) => {}
            Some(KernelArg::Buffer { .. }) => err!(cx,
                Part::Check(c.buffer.clone()),
                format!("`{}` is read-only or not global memory; only written `__global` buffers can be checked", c.buffer),
            ),
            _ => err!(cx, Part::Check(c.buffer.clone()), format!("the kernel has no buffer argument `{}`", c.buffer)),
        }
        if !(c.rtol >= 0.0 && c.atol >= 0.0 && c.rtol.is_finite() && c.atol.is_finite()) {
            err!(
                cx,
                Part::Check(c.buffer.clone()),
                "tolerances must be finite and non-negative".into()
            );
        }
        let w = c.whole;
        if w.norm.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            err!(
                cx,
                Part::Check(c.buffer.clone()),
                "`norm` must be a positive finite relative error".into()
            );
        }
        for (name, v) in [("allclose", w.allclose), ("cosine", w.cosine)] {
            if v.is_some_and(|v| !(v > 0.0 && v <= 1.0)) {
                err!(
                    cx,
                    Part::Check(c.buffer.clone()),
                    format!("`{name}` must be in (0, 1]")
                );
            }
        }
        if w.only_whole && w.norm.is_none() && w.cosine.is_none() {
            err!(
                cx,
                Part::Check(c.buffer.clone()),
                "a check without element-wise tolerances needs `norm` or `cosine`".into()
            );
        }
    }
}

/// Scalars that are not sizes: integers need an input.
fn drawn_scalars(cx: &mut Checks) {
    let spec = cx.spec;
    for (name, ty) in spec.drawn_scalars() {
        if !ty.is_float() && !spec.inputs.contains_key(name) {
            err!(cx,
                Part::Kernel,
                format!(
                    "integer argument `{name}` is not a size; give its value with `inputs({name} = constant(...))` or bind it in the workloads"
                ),
            );
        }
    }
}

/// `ranges(...)`: of declared sizes, each once, every size given one.
fn ranges(cx: &mut Checks) {
    let spec = cx.spec;
    for (i, r) in spec.ranges.iter().enumerate() {
        if !cx.sizes.contains(r.size.as_str()) {
            err!(
                cx,
                Part::Range(r.size.clone()),
                format!(
                    "`ranges` names `{}`, which no workload binds (the sizes are {})",
                    r.size,
                    spec.sizes.join(", ")
                )
            );
        } else if r.lo < 1 || r.lo > r.hi {
            err!(
                cx,
                Part::Range(r.size.clone()),
                format!(
                    "the range of `{}` is {}..={}: it needs 1 <= low <= high",
                    r.size, r.lo, r.hi
                )
            );
        }
        // at the second occurrence only
        if spec.ranges[..i].iter().any(|o| o.size == r.size) {
            err!(
                cx,
                Part::Range(r.size.clone()),
                format!("`ranges` gives `{}` twice", r.size)
            );
        }
    }
    if !spec.ranges.is_empty() {
        if let Some(missing) = spec
            .sizes
            .iter()
            .find(|s| !spec.ranges.iter().any(|r| r.size == **s))
        {
            err!(cx,
                Part::Kernel,
                format!("`ranges(...)` gives no range for size `{missing}`: give every size a range or a value (`{missing} = 1024`)")
            );
        }
    }
}

/// Workloads: at least one; each declared once, binding exactly the sizes, with positive values,
/// for known kinds of device; and the reference can run each when `reference_checkable`
/// (asked only when nothing else is wrong: it would repeat those errors).
fn workloads(cx: &mut Checks, reference_checkable: bool) {
    let spec = cx.spec;
    if spec.workloads.is_empty() && spec.ranges.is_empty() {
        err!(
            cx,
            Part::Kernel,
            "`workloads(...)` is missing: name at least one, e.g. `workloads(large(n = 1 << 20))`"
                .into()
        );
    }
    let mut names = BTreeSet::new();
    for w in &spec.workloads {
        if !names.insert(w.name.as_str()) {
            err!(
                cx,
                Part::Workload(w.name.clone()),
                format!("workload `{}` is declared twice", w.name)
            );
        }
        let bound: BTreeSet<&str> = w.sizes.keys().map(String::as_str).collect();
        if bound != cx.sizes {
            err!(cx,
                Part::Workload(w.name.clone()),
                format!(
                    "workload `{}` binds {{{}}} but the sizes are {{{}}}: every workload binds the same sizes",
                    w.name,
                    bound.iter().copied().collect::<Vec<_>>().join(", "),
                    spec.sizes.join(", ")
                ),
            );
        } else if let Some(kind) = w.on.iter().find(|k| !DEVICE_KINDS.contains(&k.as_str())) {
            err!(
                cx,
                Part::Workload(w.name.clone()),
                format!(
                    "workload `{}` is `on` `{kind}`, which is not a kind of device (they are {})",
                    w.name,
                    DEVICE_KINDS.join(", ")
                ),
            );
        } else if let Some((k, v)) = w.sizes.iter().find(|(_, v)| **v <= 0) {
            err!(
                cx,
                Part::Workload(w.name.clone()),
                format!("size `{k}` = {v} must be positive")
            );
        } else if reference_checkable {
            if let Err(e) = spec.geometry(&spec.reference, &w.sizes, None) {
                err!(
                    cx,
                    Part::Workload(w.name.clone()),
                    format!("the reference cannot run workload `{}`: {e}", w.name)
                );
            }
        }
    }
}

/// Sizes that are kernel arguments must be integer scalars.
fn size_arguments(cx: &mut Checks) {
    let spec = cx.spec;
    for s in &spec.sizes {
        if let Some(KernelArg::Scalar { ty, .. }) = cx.arg(s) {
            if ty.is_float() {
                err!(
                    cx,
                    Part::Kernel,
                    format!("size `{s}` is a floating-point kernel argument; sizes are integers")
                );
            }
        } else if cx.arg(s).is_some() {
            err!(
                cx,
                Part::Kernel,
                format!("size `{s}` is a buffer argument of the kernel")
            );
        }
    }
}

/// `cost(...)` reads parameters and sizes only.
fn cost(cx: &mut Checks) {
    let spec = cx.spec;
    if let Some(cost) = &spec.cost {
        for e in cost.bytes.iter().chain(cost.flops.iter()) {
            if let Some(v) = cx.unknown_variable(e) {
                err!(cx, Part::Cost, token v.clone(), unknown_msg(v, "`cost`"));
            }
        }
    }
}
