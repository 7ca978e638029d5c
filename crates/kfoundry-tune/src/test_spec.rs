//! Tests' kernels: an annotation's arguments parsed into a [`KernelSpec`] by the parser the
//! macro uses (item `pub struct K;`, package `t`, inline `code`).

use kfoundry_rt::model::spec::KernelSpec;
use kfoundry_tooling::annotation::{parse, Context};

/// The spec of `#[kfoundry::evolve(args)] pub struct K;` in package `t`; panics with the
/// parser's message when `args` is not a valid annotation.
#[allow(clippy::expect_used)] // a test's kernel that does not parse is the test's bug
pub(crate) fn spec(args: &str) -> KernelSpec {
    let tokens: proc_macro2::TokenStream = args.parse().expect("annotation tokens");
    let item: syn::Item = syn::parse_str("pub struct K;").expect("item");
    let dir = std::env::temp_dir();
    let cx = Context {
        package: "t",
        manifest_dir: &dir,
    };
    parse(tokens, &item, &cx)
        .map(|a| a.spec)
        .map_err(|e| e.to_string())
        .expect("annotation")
}

/// A device's limits with room for every test kernel: 1024 work-items a group, 1 GiB a
/// buffer, 4 GiB in all.
pub(crate) fn roomy_limits() -> kfoundry_bench::Limits {
    kfoundry_bench::Limits {
        max_work_group_size: 1024,
        max_alloc_bytes: 1 << 30,
        global_mem_bytes: 4 << 30,
        ..Default::default()
    }
}
