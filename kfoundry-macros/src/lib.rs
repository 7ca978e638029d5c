//! `#[kfoundry::evolve(...)]`: reads the annotation (with `kfoundry_tooling::annotation`),
//! embeds the kernel's specification and the variants of `Kfoundry.lock` that match its
//! fingerprint, and generates a typed launcher. All logic lives in `kfoundry-rt`'s model; this
//! crate only turns it into tokens.

use std::path::{Path, PathBuf};

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::Ident;

use kfoundry_tooling::annotation::{self, Annotated, Context};
use kfoundry_tooling::embed::{
    embeddable, launcher_params, lockfile_path, Embedded, LauncherParam,
};
use kfoundry_tooling::lockfile::Lockfile;

/// Declares a tunable OpenCL kernel. See the crate `kfoundry` (the attribute's page) and `book/src/annotation.md` for the syntax.
#[proc_macro_attribute]
pub fn evolve(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item_tokens = TokenStream2::from(item.clone());
    let parsed: syn::Item = match syn::parse(item) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand(attr.into(), &parsed) {
        Ok(tokens) => tokens.into(),
        // Keep the item so that a mistake in the annotation does not cascade into
        // "cannot find type" errors at every use.
        Err(e) => {
            let err = e.to_compile_error();
            quote!(#err #item_tokens).into()
        }
    }
}

fn expand(attr: TokenStream2, item: &syn::Item) -> syn::Result<TokenStream2> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let cx = Context {
        package: &package,
        manifest_dir: &manifest_dir,
    };
    let annotated = annotation::parse(attr, item, &cx)?;
    let path = lockfile_path(&manifest_dir);
    let fail = |message: String| syn::Error::new(Span::call_site(), format!("kfoundry: {message}"));
    // Parsed once per build of a crate, not once per annotation.
    let lock = match Lockfile::read_shared(&path).map_err(|e| fail(e.to_string()))? {
        Some(lock) => Some(lock),
        // rustc tracks only files that exist: an empty lockfile, created once, lets the next
        // build see the lockfile appear, change or go. Only for the packages being built
        // (never a dependency's directory); a read-only tree just stays untracked.
        None if std::env::var_os("CARGO_PRIMARY_PACKAGE").is_some() => {
            let _ = Lockfile::create_if_absent(&path);
            Lockfile::read_shared(&path).ok().flatten()
        }
        None => None,
    };
    let embedded = match &lock {
        Some(lock) => embeddable(&path, lock, &annotated.spec).map_err(|problems| {
            fail(format!(
                "{} disagrees with the annotation of `{}`:\n  {}\nfix or remove those entries, or re-tune (`cargo kfoundry tune --kernel {}`); `cargo kfoundry check` lists every problem",
                path.display(),
                annotated.spec.id,
                problems.join("\n  "),
                annotated.spec.id
            ))
        })?,
        None => Embedded::default(),
    };
    let tracked = lock.is_some().then_some(path.as_path());
    generate(&annotated, tracked, &embedded)
}

fn generate(
    a: &Annotated,
    lockfile: Option<&Path>,
    embedded: &Embedded,
) -> syn::Result<TokenStream2> {
    let (variants, sources) = (&embedded.variants, &embedded.sources);
    let err = |e: serde_json::Error| {
        syn::Error::new(Span::call_site(), format!("kfoundry: cannot embed: {e}"))
    };
    let spec_json = serde_json::to_string(&a.spec).map_err(err)?;
    let variants_json = serde_json::to_string(variants).map_err(err)?;
    let source_map: std::collections::BTreeMap<&str, &str> = sources
        .iter()
        .map(|s| (s.hash.as_str(), s.text.as_str()))
        .collect();
    let sources_json = serde_json::to_string(&source_map).map_err(err)?;
    let (ident, vis, spec) = (&a.ident, &a.vis, &a.spec);
    let id = &spec.id;
    let fingerprint = kfoundry_tooling::fingerprint(spec)
        .map_err(|e| syn::Error::new(Span::call_site(), format!("kfoundry: {e}")))?;

    // Rebuild when the lockfile or the kernel source changes.
    let tracked: Vec<String> = lockfile
        .into_iter()
        .chain(a.source_path.as_deref())
        .chain(a.included.iter().map(PathBuf::as_path))
        .chain(sources.iter().map(|s| s.path.as_path()))
        .map(|p| p.display().to_string())
        .collect();

    let mut params = Vec::new();
    let mut sizes = Vec::new();
    let mut args = Vec::new();
    let mut size_names = Vec::new();
    let launcher = launcher_params(spec);
    let names = rust_idents(&launcher);
    for (p, i) in launcher.iter().zip(names) {
        match p {
            LauncherParam::Size(name) => {
                params.push(quote!(#i: usize));
                sizes.push(quote!((#name, #i)));
                size_names.push(i);
            }
            LauncherParam::Buffer { elem, .. } => {
                let t = format_ident!("{}", elem.rust_name());
                params.push(quote!(#i: &::kfoundry::ocl::Buffer<#t>));
                args.push(quote!(::kfoundry::Arg::Buffer(#i.as_core())));
            }
            LauncherParam::Scalar { ty, .. } => {
                let t = format_ident!("{}", ty.rust_name());
                let variant = format_ident!("{}", ty.rust_name().to_uppercase());
                params.push(quote!(#i: #t));
                args.push(quote!(::kfoundry::Arg::Scalar(::kfoundry::Scalar::#variant(#i))));
            }
        }
    }
    let devices: std::collections::BTreeSet<&str> =
        variants.iter().map(|v| v.device.as_str()).collect();
    let launch_doc = format!(
        "Launches kernel `{id}` on `queue`: the variant tuned for the queue's device and the nearest workload, \
         else the reference. {} tuned variant(s) for {} device(s) are embedded. Returns the dispatch step.",
        variants.len(),
        devices.len()
    );
    Ok(quote! {
        #vis struct #ident;

        impl #ident {
            /// The kernel's id in `Kfoundry.lock`.
            pub const ID: &'static str = #id;

            /// The fingerprint this build computed for the kernel: only lockfile entries tuned
            /// with it are embedded.
            pub const FINGERPRINT: &'static str = #fingerprint;

            /// The embedded specification and tuned variants, with dispatch and caches.
            pub fn evolved() -> &'static ::kfoundry::Evolved {
                #( const _: &[u8] = include_bytes!(#tracked); )*
                static EVOLVED: ::kfoundry::Evolved = ::kfoundry::Evolved::with_sources(#spec_json, #variants_json, #sources_json);
                &EVOLVED
            }

            #[doc = #launch_doc]
            #[allow(clippy::too_many_arguments)]
            pub fn launch(queue: &::kfoundry::ocl::Queue, #(#params),*) -> ::core::result::Result<::kfoundry::Step, ::kfoundry::Error> {
                Self::evolved().launch(queue, &[#(#sizes),*], &[#(#args),*])
            }

            /// Runs the plain reference kernel instead of the dispatched variant (for tests and benchmarks).
            #[allow(clippy::too_many_arguments)]
            pub fn launch_reference(queue: &::kfoundry::ocl::Queue, #(#params),*) -> ::core::result::Result<(), ::kfoundry::Error> {
                Self::evolved().launch_reference(queue, &[#(#sizes),*], &[#(#args),*])
            }

            /// Runs the given parameter values (each of its domain) instead of the dispatched variant (for tests and benchmarks).
            ///
            /// # Safety
            ///
            /// Nothing verified this configuration: the caller promises that the kernel compiled with
            /// these parameters stays within the buffers the annotation declares (see `kfoundry::Evolved::launch_params`).
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn launch_params(queue: &::kfoundry::ocl::Queue, params: &::kfoundry::model::spec::Params, #(#params),*) -> ::core::result::Result<(), ::kfoundry::Error> {
                // SAFETY: the caller's promise, passed on.
                unsafe { Self::evolved().launch_params(queue, params, &[#(#sizes),*], &[#(#args),*]) }
            }

            /// Which variant `launch` would run on `device` at these sizes, and why.
            #[allow(clippy::too_many_arguments)]
            pub fn explain(device: &::kfoundry::ocl::Device, #(#size_names: usize),*) -> ::core::result::Result<::kfoundry::Choice, ::kfoundry::Error> {
                Self::evolved().explain(device, &[#(#sizes),*])
            }
        }
    })
}

/// The launcher's Rust parameter names: each OpenCL name as it is, raw when it is a Rust
/// keyword (`r#in`), with a `_` appended when even a raw identifier cannot be that keyword
/// (`self`, `Self`, `super`, `crate`, `_`) or when the name is taken.
fn rust_idents(params: &[LauncherParam]) -> Vec<Ident> {
    // the launchers' own parameters
    let mut taken: std::collections::BTreeSet<String> =
        ["queue", "params", "device"].map(String::from).into();
    let mut out = Vec::new();
    for p in params {
        let name = match p {
            LauncherParam::Size(n)
            | LauncherParam::Buffer { name: n, .. }
            | LauncherParam::Scalar { name: n, .. } => n,
        };
        // Signature names are C identifiers; anything else (never produced) becomes `arg`.
        let mut text = if kfoundry_rt::model::spec::is_identifier(name) {
            name.clone()
        } else {
            "arg".to_string()
        };
        let ident = loop {
            let candidate = if taken.contains(&text) {
                None
            } else if let Ok(i) = syn::parse_str::<Ident>(&text) {
                Some(i)
            } else if !["self", "Self", "super", "crate", "_"].contains(&text.as_str()) {
                Some(Ident::new_raw(&text, Span::call_site()))
            } else {
                None
            };
            match candidate {
                Some(i) => break i,
                None => text.push('_'),
            }
        };
        taken.insert(text);
        out.push(ident);
    }
    out
}
