//! kfoundry's tooling model: what the `#[kfoundry::evolve]` macro and `cargo kfoundry` share,
//! and a shipped binary never links.
//!
//! - [`annotation`]: `#[kfoundry::evolve(...)]` tokens → a validated [`KernelSpec`], with spans.
//! - [`fingerprint`]: what a lockfile entry was tuned for (a canonical, versioned encoding).
//! - [`lockfile`]: the `Kfoundry.lock` file: TOML, sorted, merged, written atomically.
//! - [`generated`]: source-level variants stored beside the lockfile by hash.
//! - [`embed`]: where a crate's lockfile is and which of its entries the macro embeds.
//! - [`files`]: atomic writes and file-name-safe forms of ids and keys.
//! - [`library`]: kfoundry's template library of kernel source text, and `#include` in kernel
//!   sources (expanded when the annotation is read).
//! - [`toml_text`]: TOML read from a file, its errors as `path:line:col: message`.
//!
//! [`KernelSpec`]: kfoundry_rt::model::spec::KernelSpec

pub mod annotation;
pub mod embed;
pub mod files;
pub mod fingerprint;
pub mod generated;
pub mod library;
pub mod lockfile;
pub mod merge;
pub mod toml_text;

pub use fingerprint::{fingerprint, FingerprintError};

/// Specifications for the unit tests, made by the annotation parser.
#[cfg(test)]
pub(crate) mod test_support {
    use kfoundry_rt::model::spec::KernelSpec;

    /// `y = a·x + y` with two parameters, two workloads (`small`: n = 4096, `large`: n = 2^20).
    pub fn saxpy() -> KernelSpec {
        let args: proc_macro2::TokenStream = r#"
            code = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) {}",
            name = "demo::Saxpy",
            params(WG = [32, 64, 128], VEC = [1, 2, 4]), reference(WG = 64, VEC = 1),
            require(n % (VEC * WG) == 0), global = n / VEC, local = WG,
            buffers(x = n, y = n), inputs(y = uniform(-1.0, 1.0)), check(y, rtol = 1e-5, atol = 0.0),
            workloads(small(n = 4096), large(n = 1 << 20)), cost(bytes = 12 * n, flops = 2 * n)"#
            .parse()
            .unwrap();
        let item: syn::Item = syn::parse_str("pub struct Saxpy;").unwrap();
        let cx = crate::annotation::Context {
            package: "demo",
            manifest_dir: std::path::Path::new("/nonexistent"),
        };
        crate::annotation::parse(args, &item, &cx)
            .map(|a| a.spec)
            .map_err(|e| e.to_string())
            .unwrap()
    }
}
