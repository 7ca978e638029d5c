//! Parses `#[kfoundry::evolve(...)]` into a [`KernelSpec`], keeping the span of every part so
//! that each mistake is reported where it was made. The proc macro turns the errors into
//! compile errors; the tuner, which reads the same annotations with `syn`, into
//! `file:line:column` messages. Both therefore agree on every kernel and its fingerprint.
//!
//! ```text
//! #[kfoundry::evolve(
//!     source = "kernels/saxpy.cl",            // file relative to the crate; or code = "..."
//!     kernel = "saxpy",                       // entry point (default: the only __kernel)
//!     name = "saxpy",                         // lockfile id (default: <package>::<Item>)
//!     params(WG = [32, 64, 128], VEC = pow2(1..=8), ITEMS = 1..=8),
//!     reference(WG = 64, VEC = 1, ITEMS = 1),
//!     require(n % (WG * VEC * ITEMS) == 0),
//!     global = n / (VEC * ITEMS), local = WG, // or tuples for 2-D/3-D: global = (m, n)
//!     buffers(x = n, y = n),                  // lengths in elements of every pointer argument
//!     inputs(x = uniform(-1.0, 1.0), a = constant(2.0)),
//!     check(y, rtol = 1e-5, atol = 1e-6),      // repeatable, one per output
//!     in_place(y = x),                        // y may be passed as the very buffer x
//!     edges = finite,                         // edge values proven: all (default), finite, none
//!     workloads(small(n = 1 << 16), large(n = 1 << 22)),
//!     cost(bytes = 12 * n, flops = 2 * n),
//!     options = "-cl-mad-enable",
//! )]
//! pub struct Saxpy;
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Token};

use kfoundry_rt::model::expr::Expr;
use kfoundry_rt::model::ranges::{self, SizeRange};
use kfoundry_rt::model::signature::find_kernel;
use kfoundry_rt::model::signature::{KernelArg, ScalarType};
use kfoundry_rt::model::spec::{
    Check, Cost, Distribution, Edges, KernelSpec, Param, Part, SpecError, Workload,
};

/// Where an annotation is being read.
pub struct Context<'a> {
    /// The Cargo package name (the default kernel id is `<package>::<Item>`).
    pub package: &'a str,
    /// The package's manifest directory: `source = "..."` paths are relative to it.
    pub manifest_dir: &'a Path,
}

/// A parsed, validated annotation.
pub struct Annotated {
    pub spec: KernelSpec,
    /// The annotated item's name and visibility.
    pub ident: Ident,
    pub vis: syn::Visibility,
    /// The kernel source file read, if the source came from a file.
    pub source_path: Option<PathBuf>,
    /// The files its `#include "..."` lines read (for rebuilds; the library's are built in).
    pub included: Vec<PathBuf>,
}

/// Is `attr` a `#[kfoundry::evolve(...)]` (or `#[evolve(...)]`) attribute?
pub fn is_evolve_attr(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "evolve")
}

/// Parses the attribute arguments `args` applied to `item`.
pub fn parse(args: TokenStream, item: &syn::Item, cx: &Context) -> syn::Result<Annotated> {
    let (ident, vis) = match item {
        syn::Item::Struct(s) if matches!(s.fields, syn::Fields::Unit) && s.generics.params.is_empty() => (s.ident.clone(), s.vis.clone()),
        other => {
            return Err(syn::Error::new(
                item_span(other),
                "#[kfoundry::evolve] goes on a unit struct, e.g. `pub struct Saxpy;`; the macro generates its launcher",
            ))
        }
    };
    let entries = Punctuated::<Entry, Token![,]>::parse_terminated.parse2(args)?;
    let mut b = Builder::default();
    for entry in entries {
        b.entry(entry)?;
    }
    b.finish(ident, vis, cx)
}

fn item_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Fn(f) => f.sig.ident.span(),
        syn::Item::Const(c) => c.ident.span(),
        syn::Item::Enum(e) => e.ident.span(),
        syn::Item::Struct(s) => s.ident.span(),
        _ => item.span(),
    }
}

/// `key = value` or `key(...)`.
struct Entry {
    key: Ident,
    body: Body,
}

enum Body {
    Assign(Box<syn::Expr>),
    List(TokenStream),
}

impl Parse for Entry {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Ok(Entry {
                key,
                body: Body::Assign(Box::new(input.parse()?)),
            })
        } else if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            Ok(Entry {
                key,
                body: Body::List(content.parse()?),
            })
        } else {
            Err(syn::Error::new(
                key.span(),
                format!("expected `{key} = ...` or `{key}(...)`"),
            ))
        }
    }
}

/// `name = expr` inside a list.
struct Named {
    name: Ident,
    value: syn::Expr,
}

impl Parse for Named {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        // OpenCL names may be Rust keywords (`in`): written as is or raw (`r#in`).
        let name = Ident::parse_any(input)?.unraw();
        input.parse::<Token![=]>()?;
        Ok(Named {
            name,
            value: input.parse()?,
        })
    }
}

fn named_list(tokens: TokenStream) -> syn::Result<Vec<Named>> {
    Ok(Punctuated::<Named, Token![,]>::parse_terminated
        .parse2(tokens)?
        .into_iter()
        .collect())
}

/// `NAME = value` pairs with the span of each.
type Assignments = Vec<(String, i64, Span)>;

#[derive(Default)]
struct Builder {
    source: Option<(LitStr, bool)>,
    kernel: Option<LitStr>,
    name: Option<LitStr>,
    options: Option<LitStr>,
    extrapolate: Option<syn::LitBool>,
    params: Vec<(Param, Span)>,
    reference: Option<(Assignments, Span)>,
    require: Vec<(Expr, Span)>,
    global: Option<(Vec<Expr>, Span)>,
    local: Option<(Vec<Expr>, Span)>,
    buffers: Vec<(String, Expr, Span)>,
    buffers_span: Option<Span>,
    inputs: Vec<(String, Distribution, Span)>,
    /// Each check, whether it gave a tolerance, and its span.
    checks: Vec<(Check, bool, Span)>,
    in_place: Vec<(String, String, Span)>,
    /// `ushort` buffers that hold bfloat16.
    bf16: Vec<(String, Span)>,
    /// Buffers the launcher owns (`scratch(...)`).
    scratch: Vec<(String, Span)>,
    edges: Option<(Edges, Span)>,
    workloads: Vec<(Workload, Vec<String>, Span)>,
    workloads_span: Option<Span>,
    /// `ranges(size = lo..=hi, ...)`, in order, and the span of each size.
    ranges: Vec<(SizeRange, Span)>,
    /// `ranges(..., on = gpu)`: the kinds of device the anchors are tuned on.
    ranges_on: Vec<String>,
    cost: Option<(Cost, Span)>,
    seen: BTreeMap<String, Span>,
    /// Tokens of each part, to point at the offending identifier inside it.
    tokens: BTreeMap<Part, TokenStream>,
}

const KEYS: &str =
    "source, code, kernel, name, params, reference, require, global, local, buffers, inputs, check, in_place, bf16, scratch, edges, workloads, ranges, cost, options, extrapolate";

fn err<T>(span: Span, msg: impl std::fmt::Display) -> syn::Result<T> {
    Err(syn::Error::new(span, msg))
}

impl Builder {
    fn entry(&mut self, Entry { key, body }: Entry) -> syn::Result<()> {
        let k = key.to_string();
        let repeatable = k == "check" || k == "require";
        if !repeatable {
            if self.seen.contains_key(&k) {
                return err(key.span(), format!("`{k}` is given twice"));
            }
            self.seen.insert(k.clone(), key.span());
        }
        match (k.as_str(), body) {
            ("source" | "code", Body::Assign(e)) => {
                if self.source.is_some() {
                    return err(
                        key.span(),
                        "give the kernel source once: `source = \"file.cl\"` or `code = \"...\"`",
                    );
                }
                self.source = Some((lit_str(&e)?, k == "code"));
            }
            ("kernel", Body::Assign(e)) => self.kernel = Some(lit_str(&e)?),
            ("name", Body::Assign(e)) => self.name = Some(lit_str(&e)?),
            ("options", Body::Assign(e)) => self.options = Some(lit_str(&e)?),
            ("extrapolate", Body::Assign(e)) => match *e {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Bool(b),
                    ..
                }) => self.extrapolate = Some(b),
                other => return err(other.span(), "expected `true` or `false`"),
            },
            ("params", Body::List(t)) => {
                for n in named_list(t)? {
                    let values = domain(&n.value)?;
                    self.params.push((
                        Param {
                            name: n.name.to_string(),
                            values,
                        },
                        n.name.span(),
                    ));
                }
            }
            ("reference", Body::List(t)) => {
                self.tokens.insert(Part::Reference, t.clone());
                let values = named_list(t)?
                    .into_iter()
                    .map(|n| Ok((n.name.to_string(), int_lit(&n.value)?, n.name.span())))
                    .collect::<syn::Result<Vec<_>>>()?;
                self.reference = Some((values, key.span()));
            }
            ("require", Body::List(t)) => {
                for e in Punctuated::<syn::Expr, Token![,]>::parse_terminated.parse2(t)? {
                    self.tokens
                        .insert(Part::Require(self.require.len()), e.to_token_stream());
                    self.require.push((expr(&e)?, e.span()));
                }
            }
            ("global" | "local", Body::Assign(e)) => {
                let dims = match &*e {
                    syn::Expr::Tuple(t) => {
                        t.elems.iter().map(expr).collect::<syn::Result<Vec<_>>>()?
                    }
                    other => vec![expr(other)?],
                };
                if dims.is_empty() || dims.len() > 3 {
                    return err(
                        e.span(),
                        format!("`{k}` needs 1 to 3 dimensions, found {}", dims.len()),
                    );
                }
                self.tokens.insert(
                    if k == "global" {
                        Part::Global
                    } else {
                        Part::Local
                    },
                    e.to_token_stream(),
                );
                let slot = if k == "global" {
                    &mut self.global
                } else {
                    &mut self.local
                };
                *slot = Some((dims, e.span()));
            }
            ("buffers", Body::List(t)) => {
                self.buffers_span = Some(key.span());
                for n in named_list(t)? {
                    self.tokens
                        .insert(Part::Buffer(n.name.to_string()), n.value.to_token_stream());
                    self.buffers
                        .push((n.name.to_string(), expr(&n.value)?, n.name.span()));
                }
            }
            ("inputs", Body::List(t)) => {
                for n in named_list(t)? {
                    self.inputs
                        .push((n.name.to_string(), distribution(&n.value)?, n.name.span()));
                }
            }
            ("check", Body::List(t)) => self.check(t)?,
            ("in_place", Body::List(t)) => {
                for n in named_list(t)? {
                    let read = match &n.value {
                        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.unraw().to_string()),
                        _ => None,
                    };
                    let Some(read) = read else {
                        return err(
                            n.value.span(),
                            "expected the name of the buffer it may alias: `in_place(y = x)`",
                        );
                    };
                    self.in_place
                        .push((n.name.to_string(), read, n.name.span()));
                }
            }
            ("bf16", Body::List(t)) => {
                let names =
                    syn::punctuated::Punctuated::<Ident, Token![,]>::parse_terminated.parse2(t)?;
                for n in names {
                    self.bf16.push((n.unraw().to_string(), n.span()));
                }
            }
            ("scratch", Body::List(t)) => {
                let names =
                    syn::punctuated::Punctuated::<Ident, Token![,]>::parse_terminated.parse2(t)?;
                for n in names {
                    self.scratch.push((n.unraw().to_string(), n.span()));
                }
            }
            ("edges", Body::Assign(e)) => {
                let word = match &*e {
                    syn::Expr::Path(p) => p.path.get_ident().map(Ident::to_string),
                    _ => None,
                };
                let edges =
                    match word.as_deref() {
                        Some("all") => Edges::All,
                        Some("finite") => Edges::Finite,
                        Some("none") => Edges::None,
                        _ => return err(
                            e.span(),
                            "expected `all` (signed zeros, denormals, large magnitudes, infinities, NaN), `finite` (no infinities or NaN) or `none`",
                        ),
                    };
                self.edges = Some((edges, e.span()));
            }
            ("workloads", Body::List(t)) => {
                self.workloads_span = Some(key.span());
                for e in Punctuated::<syn::Expr, Token![,]>::parse_terminated.parse2(t)? {
                    self.workloads.push(workload(&e)?);
                }
            }
            ("ranges", Body::List(t)) => {
                for n in named_list(t)? {
                    if n.name == "on" {
                        if !self.ranges_on.is_empty() {
                            return err(n.name.span(), "`on` is given twice");
                        }
                        self.ranges_on = device_kinds(&n.value)?;
                        continue;
                    }
                    self.ranges.push((size_range(&n)?, n.name.span()));
                }
            }
            ("cost", Body::List(t)) => {
                self.tokens.insert(Part::Cost, t.clone());
                let mut cost = Cost {
                    bytes: None,
                    flops: None,
                };
                for n in named_list(t)? {
                    match n.name.to_string().as_str() {
                        "bytes" => cost.bytes = Some(expr(&n.value)?),
                        "flops" => cost.flops = Some(expr(&n.value)?),
                        other => {
                            return err(
                                n.name.span(),
                                format!("unknown cost `{other}`: expected `bytes` or `flops`"),
                            )
                        }
                    }
                }
                self.cost = Some((cost, key.span()));
            }
            (
                "source" | "code" | "kernel" | "name" | "options" | "extrapolate" | "edges"
                | "global" | "local",
                Body::List(_),
            ) => return err(key.span(), format!("write `{k} = ...`")),
            (
                "params" | "reference" | "require" | "buffers" | "inputs" | "check" | "in_place"
                | "bf16" | "scratch" | "workloads" | "ranges" | "cost",
                Body::Assign(_),
            ) => return err(key.span(), format!("write `{k}(...)`")),
            _ => {
                return err(
                    key.span(),
                    format!("unknown key `{k}`; expected one of: {KEYS}"),
                )
            }
        }
        Ok(())
    }

    fn check(&mut self, t: TokenStream) -> syn::Result<()> {
        let parser = |input: ParseStream| -> syn::Result<(Ident, Vec<Named>)> {
            let buffer = Ident::parse_any(input)?.unraw();
            let mut opts = Vec::new();
            while input.peek(Token![,]) {
                input.parse::<Token![,]>()?;
                if input.is_empty() {
                    break;
                }
                opts.push(input.parse::<Named>()?);
            }
            Ok((buffer, opts))
        };
        let (buffer, opts) = parser.parse2(t)?;
        let mut check = Check::elementwise(buffer.to_string(), DEFAULT_RTOL, DEFAULT_ATOL);
        let given = !opts.is_empty();
        let mut elementwise = false;
        let mut seen = BTreeSet::new();
        for o in opts {
            let name = o.name.to_string();
            if !seen.insert(name.clone()) {
                return err(o.name.span(), format!("`{name}` is given twice"));
            }
            let v = float_lit(&o.value)?;
            match name.as_str() {
                "rtol" => check.rtol = v,
                "atol" => check.atol = v,
                "norm" => check.whole.norm = Some(v),
                "allclose" => check.whole.allclose = Some(v),
                "cosine" => check.whole.cosine = Some(v),
                other => {
                    return err(o.name.span(), format!("unknown check option `{other}`: expected `rtol`, `atol`, `norm`, `allclose` or `cosine`"))
                }
            }
            elementwise |= matches!(name.as_str(), "rtol" | "atol" | "allclose");
        }
        // `norm` or `cosine` alone bound the whole output only.
        check.whole.only_whole =
            !elementwise && (check.whole.norm.is_some() || check.whole.cosine.is_some());
        self.checks.push((check, given, buffer.span()));
        Ok(())
    }

    fn finish(self, ident: Ident, vis: syn::Visibility, cx: &Context) -> syn::Result<Annotated> {
        let call = Span::call_site();
        let Some((source_lit, inline)) = self.source else {
            return err(call, "missing the kernel source: add `source = \"kernels/name.cl\"` (relative to the crate) or `code = \"...\"`");
        };
        let (source, source_path) = if inline {
            (source_lit.value(), None)
        } else {
            let path = cx.manifest_dir.join(source_lit.value());
            // Like an include, the source is a file of the crate: its text is built into
            // binaries, bundles and prompts (a link out of the crate is followed, then refused).
            if let (Ok(real), Ok(root)) = (path.canonicalize(), cx.manifest_dir.canonicalize()) {
                if !real.starts_with(&root) {
                    return err(
                        source_lit.span(),
                        format!(
                            "kernel source `{}` is {}, outside the crate ({}): name a file of the crate",
                            source_lit.value(),
                            real.display(),
                            root.display()
                        ),
                    );
                }
            }
            match crate::files::read_text_bounded(
                &path,
                crate::files::MAX_KERNEL_SOURCE_BYTES,
                "kernel source",
            ) {
                Ok(text) => (text, Some(path)),
                Err(crate::files::ReadError::Io { source, .. }) => {
                    return err(
                        source_lit.span(),
                        format!("cannot read kernel source `{}`: {source}", path.display()),
                    )
                }
                Err(e) => return err(source_lit.span(), format!("cannot read kernel source: {e}")),
            }
        };
        // `#include`s are replaced by what they name now: the specification holds the whole text.
        let expanded = crate::library::expand(&source, source_path.as_deref(), cx.manifest_dir)
            .map_err(|e| syn::Error::new(source_lit.span(), e))?;
        let (source, included) = (expanded.text, expanded.files);
        let entry = self.kernel.as_ref().map(LitStr::value);
        let mut signature = find_kernel(&source, entry.as_deref()).map_err(|e| {
            let span = self.kernel.as_ref().map_or(source_lit.span(), LitStr::span);
            let place = source_path
                .as_ref()
                .map_or("the inline source".to_string(), |p| p.display().to_string());
            syn::Error::new(span, format!("{place}: {e}"))
        })?;
        // bfloat16 lives in `ushort` buffers: their elements are drawn and compared as bfloat16.
        for (name, span) in &self.bf16 {
            match signature.args.iter_mut().find(|a| a.name() == name) {
                Some(KernelArg::Buffer { elem: elem @ ScalarType::U16, .. }) => *elem = ScalarType::Bf16,
                Some(KernelArg::Buffer { elem: ScalarType::Bf16, .. }) => return err(*span, format!("`{name}` is named twice in `bf16(...)`")),
                _ => return err(*span, format!("`bf16(...)` names `{name}`, which is not a `ushort` buffer (bfloat16 is stored as `ushort`)")),
            }
        }
        let Some((global, global_span)) = self.global else {
            return err(call, "missing `global = ...`: the global work size as an expression of parameters and sizes");
        };
        let reference_span = self.reference.as_ref().map_or(call, |r| r.1);
        let mut reference = BTreeMap::new();
        for (name, value, span) in self.reference.map(|r| r.0).unwrap_or_default() {
            if reference.insert(name.clone(), value).is_some() {
                return err(span, format!("`{name}` is given twice in `reference(...)`"));
            }
        }
        if !self.params.is_empty() && reference.is_empty() {
            return err(call, "missing `reference(...)`: the parameter values that make the plain reference kernel");
        }
        // Sizes: the names the workloads bind, in the first workload's order (without
        // workloads, the order of `ranges`).
        let sizes: Vec<String> = match self.workloads.first() {
            Some(w) => w.1.clone(),
            None => self.ranges.iter().map(|r| r.0.size.clone()).collect(),
        };
        let mut spans: BTreeMap<Part, Span> = BTreeMap::new();
        spans.insert(Part::Source, source_lit.span());
        spans.insert(
            Part::Kernel,
            self.kernel.as_ref().map_or(call, LitStr::span),
        );
        spans.insert(Part::Reference, reference_span);
        spans.insert(Part::Name, self.name.as_ref().map_or(call, LitStr::span));
        spans.insert(
            Part::Options,
            self.options.as_ref().map_or(call, LitStr::span),
        );
        spans.insert(Part::Global, global_span);
        if let Some((_, s)) = &self.local {
            spans.insert(Part::Local, *s);
        }
        if let Some((_, s)) = &self.cost {
            spans.insert(Part::Cost, *s);
        }
        for (p, s) in &self.params {
            spans.entry(Part::Param(p.name.clone())).or_insert(*s);
        }
        for (i, (_, s)) in self.require.iter().enumerate() {
            spans.insert(Part::Require(i), *s);
        }
        for (name, _, s) in &self.buffers {
            spans.entry(Part::Buffer(name.clone())).or_insert(*s);
        }
        for (name, _, s) in &self.inputs {
            spans.insert(Part::Input(name.clone()), *s);
        }
        for (c, _, s) in &self.checks {
            spans.insert(Part::Check(c.buffer.clone()), *s);
        }
        for (written, _, s) in &self.in_place {
            spans.entry(Part::InPlace(written.clone())).or_insert(*s);
        }
        for (w, _, s) in &self.workloads {
            spans.entry(Part::Workload(w.name.clone())).or_insert(*s);
        }
        for (r, s) in &self.ranges {
            spans.entry(Part::Range(r.size.clone())).or_insert(*s);
        }
        for (name, s) in &self.scratch {
            spans.entry(Part::Scratch(name.clone())).or_insert(*s);
        }
        // Duplicates inside lists are errors at the second occurrence.
        let mut dup = BTreeSet::new();
        for (name, _, s) in &self.buffers {
            if !dup.insert(name) {
                return err(*s, format!("length of `{name}` is given twice"));
            }
        }
        let mut dup = BTreeSet::new();
        for (name, _, s) in &self.inputs {
            if !dup.insert(name) {
                return err(*s, format!("input `{name}` is given twice"));
            }
        }
        let mut dup = BTreeSet::new();
        for (c, _, s) in &self.checks {
            if !dup.insert(&c.buffer) {
                return err(*s, format!("`{}` is checked twice", c.buffer));
            }
        }
        let mut dup = BTreeSet::new();
        for (written, _, s) in &self.in_place {
            if !dup.insert(written) {
                return err(*s, format!("`in_place` names `{written}` twice"));
            }
        }
        let mut dup = BTreeSet::new();
        for (name, s) in &self.scratch {
            if !dup.insert(name) {
                return err(*s, format!("`scratch` names `{name}` twice"));
            }
        }
        // An integer output is compared exactly unless the check gives a tolerance: an
        // off-by-one is wrong at any magnitude.
        let checks: Vec<Check> = self
            .checks
            .into_iter()
            .map(|(c, given, _)| match signature.buffer_elem(&c.buffer) {
                _ if given => c,
                Some(e) if !e.is_float() => Check {
                    rtol: 0.0,
                    atol: 0.0,
                    ..c
                },
                // About one unit in the last place of the 16-bit format.
                Some(ScalarType::F16) => Check {
                    rtol: HALF_RTOL,
                    atol: HALF_ATOL,
                    ..c
                },
                Some(ScalarType::Bf16) => Check {
                    rtol: BF16_RTOL,
                    atol: BF16_ATOL,
                    ..c
                },
                _ => c,
            })
            .collect();
        let spec = KernelSpec {
            id: self
                .name
                .as_ref()
                .map_or_else(|| format!("{}::{}", cx.package, ident), LitStr::value),
            source,
            signature,
            params: self.params.into_iter().map(|p| p.0).collect(),
            reference,
            sizes,
            require: self.require.into_iter().map(|r| r.0).collect(),
            global,
            local: self.local.map(|l| l.0),
            buffers: self.buffers.into_iter().map(|(n, e, _)| (n, e)).collect(),
            inputs: self.inputs.into_iter().map(|(n, d, _)| (n, d)).collect(),
            checks,
            workloads: self.workloads.into_iter().map(|w| w.0).collect(),
            cost: self.cost.map(|c| c.0),
            options: self.options.as_ref().map(LitStr::value).unwrap_or_default(),
            extrapolate: self.extrapolate.as_ref().is_some_and(|b| b.value),
            in_place: self.in_place.into_iter().map(|(w, r, _)| (w, r)).collect(),
            edges: self.edges.map(|e| e.0).unwrap_or_default(),
            ranges: self.ranges.into_iter().map(|r| r.0).collect(),
            ranges_on: self.ranges_on,
            scratch: self.scratch.into_iter().map(|s| s.0).collect(),
        };
        let mut spec = spec;
        let mut errors: Option<syn::Error> = None;
        let mut problems = spec.validate();
        // The ranges' anchors, once the rest holds (they are where the reference runs).
        if problems.is_empty() && !spec.ranges.is_empty() {
            let anchors = ranges::anchors(&spec);
            if anchors.is_empty() {
                problems.push(SpecError {
                    part: Part::Range(spec.ranges[0].size.clone()),
                    token: None,
                    message: "the reference can run at none of the ranges' representative sizes (check `require(...)` against the ranges)".into(),
                });
            }
            for a in anchors {
                if spec.workloads.iter().any(|w| w.name == a.name) {
                    problems.push(SpecError {
                        part: Part::Workload(a.name.clone()),
                        token: None,
                        message: format!("workload `{}` has the name of a generated anchor of `ranges`: rename it", a.name),
                    });
                } else {
                    spec.workloads.push(a);
                }
            }
        }
        for e in problems {
            let token_span = e
                .token
                .as_ref()
                .and_then(|t| self.tokens.get(&e.part).and_then(|ts| ident_span(ts, t)));
            let span = token_span.unwrap_or_else(|| match &e.part {
                Part::Buffer(_) if !spans.contains_key(&e.part) => {
                    self.buffers_span.unwrap_or(call)
                }
                Part::Workload(_) if !spans.contains_key(&e.part) => {
                    self.workloads_span.unwrap_or(call)
                }
                part => spans.get(part).copied().unwrap_or(call),
            });
            let new = syn::Error::new(span, e.message);
            match &mut errors {
                Some(all) => all.combine(new),
                None => errors = Some(new),
            }
        }
        match errors {
            Some(e) => Err(e),
            None => Ok(Annotated {
                spec,
                ident,
                vis,
                source_path,
                included,
            }),
        }
    }
}

fn lit_str(e: &syn::Expr) -> syn::Result<LitStr> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Ok(s.clone()),
        other => err(other.span(), "expected a string literal"),
    }
}

fn expr(e: &syn::Expr) -> syn::Result<Expr> {
    let tokens = e.to_token_stream();
    let text = tokens.to_string();
    Expr::parse(&text).map_err(|pe| {
        let span = span_at_offset(&tokens, &text, pe.offset).unwrap_or_else(|| e.span());
        syn::Error::new(span, format!("invalid expression: {}", pe.message))
    })
}

/// The tokens of a stream in order, groups flattened (delimiters omitted).
fn leaves(tokens: &TokenStream, out: &mut Vec<proc_macro2::TokenTree>) {
    for t in tokens.clone() {
        match t {
            proc_macro2::TokenTree::Group(g) => leaves(&g.stream(), out),
            other => out.push(other),
        }
    }
}

/// The span of identifier `name` in `tokens`.
fn ident_span(tokens: &TokenStream, name: &str) -> Option<Span> {
    let mut all = Vec::new();
    leaves(tokens, &mut all);
    all.into_iter().find_map(|t| match t {
        proc_macro2::TokenTree::Ident(i) if i == name => Some(i.span()),
        _ => None,
    })
}

/// The span of the token at byte `offset` of `text` (the stream's `to_string()`).
fn span_at_offset(tokens: &TokenStream, text: &str, offset: usize) -> Option<Span> {
    let mut all = Vec::new();
    leaves(tokens, &mut all);
    let mut pos = 0;
    for t in all {
        let s = t.to_string();
        let start = pos + text.get(pos..)?.find(&s)?;
        let end = start + s.len();
        if offset < end {
            return Some(t.span());
        }
        pos = end;
    }
    None
}

fn int_lit(e: &syn::Expr) -> syn::Result<i64> {
    let value = expr(e)?;
    if !value.variables().is_empty() {
        return err(e.span(), "expected an integer constant");
    }
    value
        .eval(&BTreeMap::new())
        .map_err(|x| syn::Error::new(e.span(), x.to_string()))
}

/// `size = lo..=hi`, `size = value` or `size = extent(lo..=hi)` of `ranges(...)`.
fn size_range(n: &Named) -> syn::Result<SizeRange> {
    let size = n.name.to_string();
    let (inner, extent) = match &n.value {
        syn::Expr::Call(c) if matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("extent")) =>
        {
            if c.args.len() != 1 {
                return err(c.span(), "expected `extent(low..=high)`");
            }
            (&c.args[0], true)
        }
        other => (other, false),
    };
    let (lo, hi) = match inner {
        syn::Expr::Range(r) => {
            let (Some(lo), Some(hi), syn::RangeLimits::Closed(_)) = (&r.start, &r.end, &r.limits)
            else {
                return err(
                    r.span(),
                    "expected an inclusive range with both bounds: `1..=8192`",
                );
            };
            (int_lit(lo)?, int_lit(hi)?)
        }
        value => {
            let v = int_lit(value)?;
            (v, v)
        }
    };
    Ok(SizeRange {
        size,
        lo,
        hi,
        extent,
    })
}

fn float_lit(e: &syn::Expr) -> syn::Result<f64> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Float(f),
            ..
        }) => f.base10_parse(),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => Ok(i.base10_parse::<i64>()? as f64),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => Ok(-float_lit(expr)?),
        syn::Expr::Paren(p) => float_lit(&p.expr),
        other => err(other.span(), "expected a number"),
    }
}

/// The tolerances of a float output's check when the annotation gives none.
pub const DEFAULT_RTOL: f64 = 1e-5;
pub const DEFAULT_ATOL: f64 = 1e-6;
/// The same for `half` outputs (10-bit mantissas: one unit in the last place is 2^-10 of the
/// value, twice that across a rounding boundary) and bfloat16 ones (7-bit mantissas), relative
/// to each element's magnitude down to a floor of two of the format's smallest subnormals (an
/// absolute floor any larger would accept small outputs flushed to zero, or probabilities
/// half off).
pub const HALF_RTOL: f64 = 2e-3;
/// 2^-23: two of `half`'s smallest subnormals (2^-24).
pub const HALF_ATOL: f64 = 1.0 / 8_388_608.0;
pub const BF16_RTOL: f64 = 1.6e-2;
/// 2^-132: two of bfloat16's smallest subnormals (2^-133).
pub const BF16_ATOL: f64 = 1.8367099231598242e-40;

/// Largest domain accepted from a range (keeps annotations honest about their space).
const MAX_DOMAIN: i64 = 4096;

/// `[a, b, c]`, `lo..hi`, `lo..=hi` or `pow2(lo..=hi)`.
fn domain(e: &syn::Expr) -> syn::Result<Vec<i64>> {
    let values = match e {
        syn::Expr::Array(a) => a
            .elems
            .iter()
            .map(int_lit)
            .collect::<syn::Result<Vec<_>>>()?,
        syn::Expr::Range(r) => {
            let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
                return err(e.span(), "a range needs both ends, e.g. `1..=8`");
            };
            let (lo, hi) = (int_lit(lo)? as i128, int_lit(hi)? as i128);
            let hi = if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                hi
            } else {
                hi - 1
            };
            if hi < lo {
                return err(e.span(), "empty range");
            }
            if hi - lo >= MAX_DOMAIN as i128 {
                return err(e.span(), format!("range has more than {MAX_DOMAIN} values"));
            }
            // Both ends are i64 and closer than MAX_DOMAIN: every value fits.
            (lo..=hi).map(|v| v as i64).collect()
        }
        syn::Expr::Call(c)
            if matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("pow2"))
                && c.args.len() == 1 =>
        {
            let all = domain(&c.args[0])?;
            let values: Vec<i64> = all
                .into_iter()
                .filter(|v| *v > 0 && (v & (v - 1)) == 0)
                .collect();
            if values.is_empty() {
                return err(e.span(), "`pow2(..)` contains no power of two");
            }
            values
        }
        other => {
            return err(
                other.span(),
                "expected the parameter's values: `[a, b, c]`, `lo..=hi` or `pow2(lo..=hi)`",
            )
        }
    };
    if values.is_empty() {
        return err(e.span(), "a parameter needs at least one value");
    }
    let mut seen = BTreeSet::new();
    if let Some(v) = values.iter().find(|v| !seen.insert(**v)) {
        return err(e.span(), format!("value {v} is listed twice"));
    }
    Ok(values)
}

/// What `inputs(x = ...)` accepts.
const DISTRIBUTIONS: &str = "`uniform(lo, hi)`, `normal(mean, std)`, `constant(value)`, `uniform_int(lo, hi)`, `permutation()` or `monotone(lo, hi)`";

/// `uniform(lo, hi)`, `normal(mean, std)`, `constant(v)` (numbers), `uniform_int(lo, hi)`,
/// `monotone(lo, hi)` (expressions of the sizes) or `permutation()`.
fn distribution(e: &syn::Expr) -> syn::Result<Distribution> {
    let syn::Expr::Call(call) = e else {
        return err(e.span(), format!("expected {DISTRIBUTIONS}"));
    };
    let name = match &*call.func {
        syn::Expr::Path(p) => p.path.get_ident().map(Ident::to_string).unwrap_or_default(),
        _ => String::new(),
    };
    let args: Vec<&syn::Expr> = call.args.iter().collect();
    let numbers = || {
        args.iter()
            .map(|a| {
                float_lit(a)
                    .map_err(|e| syn::Error::new(e.span(), "expected a number (integers in a range that reads the sizes: `uniform_int(0, vocab)`)"))
            })
            .collect::<syn::Result<Vec<_>>>()
    };
    match (name.as_str(), args.len()) {
        ("uniform", 2) => numbers().map(|v| Distribution::Uniform { lo: v[0], hi: v[1] }),
        ("normal", 2) => numbers().map(|v| Distribution::Normal {
            mean: v[0],
            std: v[1],
        }),
        ("constant", 1) => numbers().map(|v| Distribution::Constant { value: v[0] }),
        ("uniform_int", 2) => Ok(Distribution::UniformInt {
            lo: expr(args[0])?,
            hi: expr(args[1])?,
        }),
        ("monotone", 2) => Ok(Distribution::Monotone {
            lo: expr(args[0])?,
            hi: expr(args[1])?,
        }),
        ("permutation", 0) => Ok(Distribution::Permutation),
        ("uniform" | "normal" | "constant" | "uniform_int" | "monotone" | "permutation", _) => err(
            call.span(),
            format!("wrong number of arguments to `{name}`"),
        ),
        _ => err(
            call.func.span(),
            format!("unknown distribution: expected {DISTRIBUTIONS}"),
        ),
    }
}

/// `gpu` or `[gpu, accelerator]`: the kinds of device a workload (or the anchors of `ranges`)
/// is for.
fn device_kinds(value: &syn::Expr) -> syn::Result<Vec<String>> {
    let mut on = Vec::new();
    let kinds: Vec<&syn::Expr> = match value {
        syn::Expr::Array(arr) => arr.elems.iter().collect(),
        other => vec![other],
    };
    for k in kinds {
        match k {
            syn::Expr::Path(kp) if kp.path.get_ident().is_some() => {
                let kind = kp
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                if !kfoundry_rt::model::spec::DEVICE_KINDS.contains(&kind.as_str()) {
                    return err(
                        k.span(),
                        format!(
                            "`{kind}` is not a kind of device (they are {})",
                            kfoundry_rt::model::spec::DEVICE_KINDS.join(", ")
                        ),
                    );
                }
                on.push(kind);
            }
            _ => {
                return err(
                    k.span(),
                    "expected a kind of device: `on = gpu` or `on = [gpu, accelerator]`",
                )
            }
        }
    }
    if on.is_empty() {
        return err(value.span(), "`on = []` names no kind of device");
    }
    Ok(on)
}

/// `name(size = expr, ...)`.
fn workload(e: &syn::Expr) -> syn::Result<(Workload, Vec<String>, Span)> {
    let syn::Expr::Call(call) = e else {
        return err(e.span(), "expected a workload like `large(n = 1 << 20)`");
    };
    let syn::Expr::Path(p) = &*call.func else {
        return err(call.func.span(), "expected the workload's name");
    };
    let Some(name) = p.path.get_ident() else {
        return err(call.func.span(), "expected the workload's name");
    };
    let mut sizes = BTreeMap::new();
    let mut order = Vec::new();
    let mut on = Vec::new();
    for arg in &call.args {
        let syn::Expr::Assign(a) = arg else {
            return err(arg.span(), "expected `size = value`");
        };
        let syn::Expr::Path(sp) = &*a.left else {
            return err(a.left.span(), "expected a size name");
        };
        let Some(size) = sp.path.get_ident() else {
            return err(a.left.span(), "expected a size name");
        };
        // `on = gpu` or `on = [gpu, accelerator]`: the kinds of device the workload is for.
        if size == "on" {
            if !on.is_empty() {
                return err(size.span(), "`on` is given twice");
            }
            on = device_kinds(&a.right)?;
            continue;
        }
        if sizes.insert(size.to_string(), int_lit(&a.right)?).is_some() {
            return err(size.span(), format!("size `{size}` is given twice"));
        }
        order.push(size.to_string());
    }
    if order.is_empty() {
        return err(call.span(), format!("workload `{name}` binds no size"));
    }
    Ok((
        Workload {
            name: name.to_string(),
            sizes,
            on,
        },
        order,
        name.span(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manual's chapter on the annotation (`book/src/annotation.md`, also the attribute's
    /// `cargo doc` page) has a row for every key the parser accepts.
    #[test]
    fn the_manual_has_a_row_for_every_key() {
        let book = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/annotation.md"),
        )
        .expect("book/src/annotation.md");
        for key in KEYS.split(", ") {
            assert!(
                book.lines().any(|l| l.starts_with(&format!("| `{key}"))),
                "book/src/annotation.md has no row for `{key}`"
            );
        }
        // Its complete example is the examples crate's, as it is.
        let example = book
            .split("```rust,ignore\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("an example");
        let examples = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/src/lib.rs"),
        )
        .expect("examples/src/lib.rs");
        assert!(
            examples.contains(example),
            "the chapter's example is not examples/src/lib.rs's:\n{example}"
        );
    }
    use quote::quote;

    fn cx() -> Context<'static> {
        Context {
            package: "demo",
            manifest_dir: Path::new("/nonexistent"),
        }
    }

    const SAXPY: &str = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) { }";

    fn parse_ok(args: TokenStream) -> Annotated {
        let item: syn::Item = syn::parse_quote!(
            pub struct Saxpy;
        );
        match parse(args, &item, &cx()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        }
    }

    fn parse_err(args: TokenStream) -> String {
        let item: syn::Item = syn::parse_quote!(
            pub struct Saxpy;
        );
        match parse(args, &item, &cx()) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(" | "),
        }
    }

    #[test]
    fn full_annotation() {
        let a = parse_ok(quote! {
            code = #SAXPY,
            params(WG = [32, 64, 128], VEC = pow2(1..=8), ITEMS = 1..4),
            reference(WG = 64, VEC = 1, ITEMS = 1),
            require(n % (WG * VEC * ITEMS) == 0),
            global = n / (VEC * ITEMS), local = WG,
            buffers(x = n, y = n),
            inputs(x = uniform(-2.0, 2), a = constant(2.5)),
            check(y, rtol = 1e-4),
            workloads(small(n = 1 << 12), large(n = 1 << 20)),
            cost(bytes = 12 * n, flops = 2 * n),
        });
        let s = &a.spec;
        assert_eq!(s.id, "demo::Saxpy");
        assert_eq!(s.params[1].values, vec![1, 2, 4, 8]);
        assert_eq!(s.params[2].values, vec![1, 2, 3]);
        assert_eq!(s.sizes, vec!["n".to_string()]);
        assert_eq!(s.global[0].to_string(), "n / (VEC * ITEMS)");
        assert_eq!(s.checks[0].rtol, 1e-4);
        assert_eq!(s.inputs["x"], Distribution::Uniform { lo: -2.0, hi: 2.0 });
        assert_eq!(s.workloads[1].sizes["n"], 1 << 20);
        assert!(s.validate().is_empty());
    }

    #[test]
    fn each_mistake_is_reported() {
        let base = |extra: TokenStream| {
            quote! { code = #SAXPY, params(WG = [32, 64]), reference(WG = 64), global = n, local = WG,
            buffers(x = n, y = n), check(y), workloads(w(n = 1024)), #extra }
        };
        let cases: Vec<(TokenStream, &str)> = vec![
            (quote!(bogus = 1), "unknown key `bogus`"),
            (quote!(global = n), "`global` is given twice"),
            (quote!(cost(time = n)), "unknown cost `time`"),
            (quote!(inputs(x = gauss(1, 2))), "unknown distribution"),
            (quote!(inputs(q = uniform(0, 1))), "no argument `q`"),
            (quote!(inputs(x = uniform(0, n))), "`uniform_int(0, vocab)`"),
            (
                quote!(inputs(x = uniform_int(0, n))),
                "`x` is not an integer buffer",
            ),
            (
                quote!(inputs(x = permutation(n))),
                "wrong number of arguments to `permutation`",
            ),
            (quote!(require(n % ZZ == 0)), "reads `ZZ`"),
            (quote!(options("x")), "write `options = ...`"),
            (quote!(kernel = "nope"), "no kernel named `nope`"),
        ];
        for (extra, needle) in cases {
            let msg = parse_err(base(extra));
            assert!(msg.contains(needle), "expected {needle:?} in {msg:?}");
        }
        // Whole-output rules (a base without its check).
        let checked = |check: TokenStream| {
            parse_err(
                quote! { code = #SAXPY, params(WG = [32, 64]), reference(WG = 64), global = n, local = WG,
                buffers(x = n, y = n), workloads(w(n = 1024)), #check },
            )
        };
        for (check, needle) in [
            (quote!(check(y, cosine = 1.5)), "`cosine` must be in (0, 1]"),
            (quote!(check(y, norm = 0)), "`norm` must be a positive"),
            (
                quote!(check(y, norm = 1e-3, norm = 1e-2)),
                "`norm` is given twice",
            ),
            (
                quote!(check(y, l2 = 1e-3)),
                "expected `rtol`, `atol`, `norm`, `allclose` or `cosine`",
            ),
        ] {
            let msg = checked(check);
            assert!(msg.contains(needle), "expected {needle:?} in {msg:?}");
        }
        assert!(parse_err(quote!(code = #SAXPY)).contains("missing `global"));
        assert!(parse_err(quote!(global = n)).contains("missing the kernel source"));
        assert!(
            parse_err(quote!(code = #SAXPY, params(A = 3..3), global = n)).contains("empty range")
        );
        assert!(
            parse_err(quote!(code = #SAXPY, params(A = [1, 1]), global = n))
                .contains("listed twice")
        );
        assert!(
            parse_err(quote!(code = #SAXPY, params(A = [1]), global = n))
                .contains("missing `reference")
        );
        let item: syn::Item = syn::parse_quote!(
            fn f() {}
        );
        let e = parse(quote!(code = #SAXPY), &item, &cx())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("unit struct"), "{e}");
    }

    #[test]
    fn source_file_errors_name_the_path() {
        let msg = parse_err(quote!(source = "missing.cl", global = n));
        assert!(
            msg.contains("cannot read kernel source `/nonexistent/missing.cl`"),
            "{msg}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_source_linked_out_of_the_crate_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.cl");
        std::fs::write(&secret, SAXPY).unwrap();
        let krate = tempfile::tempdir().unwrap();
        std::fs::write(krate.path().join("own.cl"), SAXPY).unwrap();
        std::os::unix::fs::symlink(&secret, krate.path().join("linked.cl")).unwrap();
        let item: syn::Item = syn::parse_quote!(
            pub struct K;
        );
        let cx = Context {
            package: "demo",
            manifest_dir: krate.path(),
        };
        let parsed = |source: &str| {
            let args = quote!(source = #source, params(WG = [32, 64]), reference(WG = 64),
                global = n, local = WG, buffers(x = n, y = n), workloads(w(n = 1024)), check(y));
            parse(args, &item, &cx)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        parsed("own.cl").unwrap();
        for source in ["linked.cl", &secret.display().to_string()] {
            let e = parsed(source).unwrap_err();
            assert!(e.contains("outside the crate"), "{source}: {e}");
        }
    }

    #[test]
    fn ranges_give_anchors_as_workloads() {
        let a = parse_ok(quote! {
            code = "__kernel void k(const int rows, const int cols, const int vocab, __global const float* x, __global float* y) { }",
            params(WG = [32, 64]), reference(WG = 32), global = rows * cols, local = WG, buffers(x = vocab * cols, y = rows * cols), check(y),
            ranges(rows = 1..=8192, cols = 2048, vocab = extent(1..=(1 << 17))),
        });
        let s = &a.spec;
        assert_eq!(s.sizes, ["rows", "cols", "vocab"]);
        assert_eq!(
            s.ranges[2],
            SizeRange {
                size: "vocab".into(),
                lo: 1,
                hi: 1 << 17,
                extent: true
            }
        );
        let names: Vec<&str> = s.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "range_rows_1",
                "range_rows_4",
                "range_rows_16",
                "range_rows_128",
                "range_rows_512",
                "range_rows_2048",
                "range_rows_8192"
            ]
        );
        // the fixed size at its value, the extent at the power of two nearest its middle
        assert!(
            s.workloads
                .iter()
                .all(|w| w.sizes["cols"] == 2048 && w.sizes["vocab"] == 256),
            "{:?}",
            s.workloads
        );
        assert!(s.workloads.iter().all(|w| w.on.is_empty()));
        // `on = gpu`: every anchor is a workload for GPUs only (a CPU runner neither tunes it
        // nor is asked for it by `check --locked`)
        let a = parse_ok(quote! {
            code = #SAXPY, params(WG = [32, 64]), reference(WG = 32), global = n, local = WG, buffers(x = n, y = n), check(y),
            ranges(n = 64..=4096, on = gpu),
        });
        assert!(!a.spec.workloads.is_empty());
        assert!(
            a.spec.workloads.iter().all(|w| w.on == ["gpu"]),
            "{:?}",
            a.spec.workloads
        );
        assert_eq!(a.spec.ranges.len(), 1, "`on` is no size");
        // beside declared workloads, and at values the reference can run at
        let a = parse_ok(quote! {
            code = #SAXPY, params(WG = [32, 64]), reference(WG = 32), require(n % 8 == 0), global = n, local = WG, buffers(x = n, y = n), check(y),
            workloads(big(n = 1 << 20)), ranges(n = 3..=1000),
        });
        let sizes: Vec<i64> = a.spec.workloads.iter().map(|w| w.sizes["n"]).collect();
        assert_eq!(sizes[0], 1 << 20);
        assert!(
            sizes[1..]
                .iter()
                .all(|n| n % 8 == 0 && (3..=1000).contains(n)),
            "{sizes:?}"
        );
    }

    #[test]
    fn ranges_mistakes_are_reported() {
        let base = |extra: TokenStream| {
            quote! { code = #SAXPY, params(WG = [32, 64]), reference(WG = 32), global = n * WG, local = WG, buffers(x = n, y = n), check(y), #extra }
        };
        for (extra, expect) in [
            (quote!(ranges(n = 8..=4)), "it needs 1 <= low <= high"),
            (quote!(ranges(n = 0..=4)), "it needs 1 <= low <= high"),
            (
                quote!(ranges(n = 1..4)),
                "an inclusive range with both bounds",
            ),
            (
                quote!(ranges(n = 1..)),
                "an inclusive range with both bounds",
            ),
            (quote!(ranges(n = 1..=4, n = 2)), "gives `n` twice"),
            (
                quote!(ranges(n = 1..=4, on = tpu)),
                "`tpu` is not a kind of device",
            ),
            (
                quote!(ranges(n = 1..=4, on = gpu, on = cpu)),
                "`on` is given twice",
            ),
            (
                quote!(workloads(w(n = 64)), ranges(m = 1..=4)),
                "`ranges` names `m`, which no workload binds",
            ),
            (
                quote!(workloads(range_n_1(n = 64)), ranges(n = 1..=4)),
                "the name of a generated anchor",
            ),
            (quote!(ranges = 4), "write `ranges(...)`"),
            (
                quote!(ranges(n = extent(1, 2))),
                "expected `extent(low..=high)`",
            ),
            (
                quote!(require(n % 3 == 0 && n < 3), ranges(n = 1..=100)),
                "none of the ranges' representative sizes",
            ),
        ] {
            let msg = parse_err(base(extra.clone()));
            assert!(msg.contains(expect), "{extra}: {msg}");
        }
        // every size needs a range or a value
        let msg = parse_err(quote! {
            code = "__kernel void k(const int n, const int m, __global float* y) { }", global = n * m, buffers(y = n * m), check(y),
            workloads(w(n = 4, m = 4)), ranges(n = 1..=8),
        });
        assert!(msg.contains("gives no range for size `m`"), "{msg}");
    }
}
