//! `#[kfoundry::evolve(...)]`: reads the annotation (with `kfoundry_rt::model::annotation`),
//! embeds the kernel's specification and the variants of `Kfoundry.lock` that match its
//! fingerprint, and generates a typed launcher. All logic lives in `kfoundry-rt`'s model; this
//! crate only turns it into tokens.

// No panics outside tests: every failure is an error that says what and where.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::path::{Path, PathBuf};

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::Ident;

use kfoundry_rt::model::annotation::{self, Annotated, Context};
use kfoundry_rt::model::embed::{embeddable_variants, find_lockfile, launcher_params, with_generated_sources, EmbeddedSource, LauncherParam};
use kfoundry_rt::model::lockfile::Lockfile;

/// Declares a tunable OpenCL kernel. See the crate `kfoundry` and its README for the syntax.
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
    let cx = Context { package: &package, manifest_dir: &manifest_dir };
    let annotated = annotation::parse(attr, item, &cx)?;
    let lockfile = find_lockfile(&manifest_dir);
    let (variants, sources) = match &lockfile {
        Some(path) => match Lockfile::read(path) {
            Ok(Some(lock)) => with_generated_sources(path, &annotated.spec, embeddable_variants(&lock, &annotated.spec)),
            Ok(None) => (Vec::new(), Vec::new()),
            Err(e) => return Err(syn::Error::new(Span::call_site(), e.to_string())),
        },
        None => (Vec::new(), Vec::new()),
    };
    generate(&annotated, lockfile.as_deref(), &variants, &sources)
}

fn generate(
    a: &Annotated,
    lockfile: Option<&Path>,
    variants: &[kfoundry_rt::model::lockfile::Variant],
    sources: &[EmbeddedSource],
) -> syn::Result<TokenStream2> {
    let err = |e: serde_json::Error| syn::Error::new(Span::call_site(), format!("kfoundry: cannot embed: {e}"));
    let spec_json = serde_json::to_string(&a.spec).map_err(err)?;
    let variants_json = serde_json::to_string(variants).map_err(err)?;
    let source_map: std::collections::BTreeMap<&str, &str> = sources.iter().map(|s| (s.hash.as_str(), s.text.as_str())).collect();
    let sources_json = serde_json::to_string(&source_map).map_err(err)?;
    let (ident, vis, spec) = (&a.ident, &a.vis, &a.spec);
    let id = &spec.id;

    // Rebuild when the lockfile or the kernel source changes.
    let tracked: Vec<String> = lockfile
        .into_iter()
        .chain(a.source_path.as_deref())
        .chain(sources.iter().map(|s| s.path.as_path()))
        .map(|p| p.display().to_string())
        .collect();

    let mut params = Vec::new();
    let mut sizes = Vec::new();
    let mut args = Vec::new();
    let mut size_names = Vec::new();
    for p in launcher_params(spec) {
        match p {
            LauncherParam::Size(name) => {
                let i = rust_ident(&name);
                params.push(quote!(#i: usize));
                sizes.push(quote!((#name, #i)));
                size_names.push(i);
            }
            LauncherParam::Buffer { name, elem } => {
                let i = rust_ident(&name);
                let t = format_ident!("{}", elem.rust_name());
                params.push(quote!(#i: &::kfoundry::ocl::Buffer<#t>));
                args.push(quote!(::kfoundry::Arg::Buffer(#i.as_core())));
            }
            LauncherParam::Scalar { name, ty } => {
                let i = rust_ident(&name);
                let t = format_ident!("{}", ty.rust_name());
                let variant = format_ident!("{}", ty.rust_name().to_uppercase());
                params.push(quote!(#i: #t));
                args.push(quote!(::kfoundry::Arg::Scalar(::kfoundry::Scalar::#variant(#i))));
            }
        }
    }
    let devices: std::collections::BTreeSet<&str> = variants.iter().map(|v| v.device.as_str()).collect();
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

            /// Runs the given parameter values instead of the dispatched variant (for tests and benchmarks).
            #[allow(clippy::too_many_arguments)]
            pub fn launch_params(queue: &::kfoundry::ocl::Queue, params: &::kfoundry::model::spec::Params, #(#params),*) -> ::core::result::Result<(), ::kfoundry::Error> {
                Self::evolved().launch_params(queue, params, &[#(#sizes),*], &[#(#args),*])
            }

            /// Which variant `launch` would run on `device` at these sizes, and why.
            pub fn explain(device: &::kfoundry::ocl::Device, #(#size_names: usize),*) -> ::core::result::Result<::kfoundry::Choice, ::kfoundry::Error> {
                Self::evolved().explain(device, &[#(#sizes),*])
            }
        }
    })
}

/// A Rust identifier for an OpenCL name (raw when it is a Rust keyword).
fn rust_ident(name: &str) -> Ident {
    syn::parse_str::<Ident>(name).unwrap_or_else(|_| Ident::new_raw(name, Span::call_site()))
}
