//! Test support: a `cargo kfoundry bundle` file for one inline kernel, built with the same
//! annotation parser the macro runs, so tests can tune without a cargo workspace.

use kfoundry_tooling::annotation::{parse, Context};

/// Writes `<dir>/<file>` holding one kernel annotated with `args` (the inside of
/// `#[kfoundry::evolve(...)]`) on `pub struct <item>;` of package `test`.
pub fn write(dir: &std::path::Path, file: &str, item: &str, args: &str) -> std::path::PathBuf {
    write_many(dir, file, &[(item, args)])
}

/// Writes `<dir>/<file>` holding one kernel per `(item, args)`.
pub fn write_many(
    dir: &std::path::Path,
    file: &str,
    kernels: &[(&str, &str)],
) -> std::path::PathBuf {
    let kernels: Vec<serde_json::Value> = kernels
        .iter()
        .map(|(item, args)| serde_json::json!({ "package": "test", "file": "inline", "line": 1, "spec": spec(args, dir, item) }))
        .collect();
    let bundle =
        serde_json::json!({ "format": "kfoundry-bundle", "version": 1, "kernels": kernels });
    let path = dir.join(file);
    std::fs::write(&path, bundle.to_string()).expect("write bundle");
    path
}

/// The specification the annotation `args` on `pub struct <item>;` gives.
#[allow(dead_code)] // not every test file needs it
pub fn spec(args: &str, dir: &std::path::Path, item: &str) -> kfoundry_rt::model::spec::KernelSpec {
    let tokens: proc_macro2::TokenStream = args.parse().expect("annotation tokens");
    let item: syn::Item = syn::parse_str(&format!("pub struct {item};")).expect("item");
    let cx = Context {
        package: "test",
        manifest_dir: dir,
    };
    match parse(tokens, &item, &cx) {
        Ok(a) => a.spec,
        Err(e) => panic!("{e}"),
    }
}
