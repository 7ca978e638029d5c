//! Finds every `#[kfoundry::evolve(...)]` kernel of the selected packages: `cargo metadata`
//! names the packages and their targets, `syn` reads every Rust file under the targets' source
//! directories, and the model's annotation parser (the same one the macro runs) builds each
//! kernel's specification.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use kfoundry_rt::model::spec::KernelSpec;
use kfoundry_tooling::annotation::{self, Context};
use kfoundry_tooling::lockfile::FILE_NAME;

use crate::error::usage;
use crate::options::WorkspaceOptions;

/// An annotated kernel found in the sources.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Kernel {
    pub package: String,
    /// The Rust file and line of the annotated item.
    pub file: PathBuf,
    pub line: usize,
    pub spec: KernelSpec,
    /// The kernel source's file (`source = "..."`); `None` for inline `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_path: Option<PathBuf>,
}

impl Kernel {
    /// `file:line`, printable (a bundle's `file` is text anyone wrote).
    pub fn location(&self) -> String {
        crate::text::printable(&format!("{}:{}", self.file.display(), self.line)).into_owned()
    }

    /// What the compiler's messages about the kernel's own source call it, in place of the
    /// driver's temporary copy (see `kfoundry_bench::diagnostics::relocate`): its
    /// `source = ...` file (`(expanded)` when its includes make the text built another than the
    /// file's, whose lines the messages then count), else the annotation's place (inline
    /// `code`).
    pub fn source_place(&self) -> String {
        let place = match &self.source_path {
            Some(path) => {
                let as_is = kfoundry_tooling::files::read_text_bounded(
                    path,
                    kfoundry_tooling::files::MAX_KERNEL_SOURCE_BYTES,
                    "kernel source",
                )
                .is_ok_and(|text| text == self.spec.source);
                if as_is {
                    path.display().to_string()
                } else {
                    format!("{} (expanded)", path.display())
                }
            }
            None => format!("{} (inline `code`)", self.location()),
        };
        crate::text::printable(&place).into_owned()
    }
}

/// The workspace as far as kfoundry cares.
#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    /// Cargo's target directory (kfoundry keeps its checkpoints and logs under it).
    pub target_dir: PathBuf,
    /// `[workspace.metadata]` (where `kfoundry.llm` configures the language model).
    pub metadata: serde_json::Value,
    pub kernels: Vec<Kernel>,
}

impl Workspace {
    pub fn lockfile(&self) -> PathBuf {
        self.root.join(FILE_NAME)
    }
}

/// The kernels to work on, the lockfile and kfoundry's state directory, from the workspace
/// or from a bundle (`--bundle`, for machines without cargo).
pub struct Sources {
    pub kernels: Vec<Kernel>,
    pub lockfile: PathBuf,
    /// Checkpoints and logs go under it (`<target>/kfoundry`).
    pub state_dir: PathBuf,
    pub from_workspace: bool,
    /// `[workspace.metadata]` (for a bundle, the `kfoundry` table it carries, else null).
    pub metadata: serde_json::Value,
}

pub fn sources(
    ws: &WorkspaceOptions,
    bundle: Option<&Path>,
    lockfile: Option<&Path>,
) -> Result<Sources> {
    Ok(match bundle {
        Some(bundle) => {
            let lock = lockfile
                .map(Path::to_path_buf)
                .unwrap_or_else(|| FILE_NAME.into());
            let beside = lock
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("target");
            let mut bundle = Bundle::read(bundle)?;
            // `-p` picks packages of the bundle as it picks workspace members.
            if !ws.packages.is_empty() {
                let normal = |n: &str| n.to_ascii_lowercase().replace('_', "-");
                for p in &ws.packages {
                    if !bundle
                        .kernels
                        .iter()
                        .any(|k| normal(&k.package) == normal(p))
                    {
                        let mut have: Vec<&str> =
                            bundle.kernels.iter().map(|k| k.package.as_str()).collect();
                        have.sort_unstable();
                        have.dedup();
                        return Err(crate::error::usage(format!(
                            "-p {p}: the bundle has no package of that name (it has: {})",
                            have.join(", ")
                        )));
                    }
                }
                bundle
                    .kernels
                    .retain(|k| ws.packages.iter().any(|p| normal(p) == normal(&k.package)));
            }
            let metadata = bundle
                .kfoundry_metadata
                .map(|k| serde_json::json!({ "kfoundry": k }))
                .unwrap_or(serde_json::Value::Null);
            Sources {
                kernels: bundle.kernels,
                lockfile: lock,
                state_dir: beside.join("kfoundry"),
                from_workspace: false,
                metadata,
            }
        }
        None => {
            let w = discover(ws)?;
            let lock = lockfile
                .map(Path::to_path_buf)
                .unwrap_or_else(|| w.lockfile());
            Sources {
                kernels: w.kernels,
                lockfile: lock,
                state_dir: w.target_dir.join("kfoundry"),
                from_workspace: true,
                metadata: w.metadata,
            }
        }
    })
}

/// A bundle: the kernels of a workspace, for tuning where cargo is not available.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Bundle {
    /// `kfoundry-bundle` and the format version.
    pub format: String,
    pub version: u32,
    pub kernels: Vec<Kernel>,
    /// The workspace's `[workspace.metadata.kfoundry]` (the language model's configuration:
    /// its endpoint, model and the name of the variable holding the API key, never the key),
    /// so that `tune --bundle` elsewhere searches as `tune` does here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kfoundry_metadata: Option<serde_json::Value>,
}

const BUNDLE_FORMAT: &str = "kfoundry-bundle";
const BUNDLE_VERSION: u32 = 1;

impl Bundle {
    /// The bundle of `kernels`, with the `kfoundry` table of the workspace's metadata.
    pub fn new(kernels: Vec<Kernel>, metadata: &serde_json::Value) -> Bundle {
        let kfoundry_metadata = metadata.get("kfoundry").filter(|v| !v.is_null()).cloned();
        Bundle {
            format: BUNDLE_FORMAT.into(),
            version: BUNDLE_VERSION,
            kernels,
            kfoundry_metadata,
        }
    }

    /// Reads and checks a bundle: every field where it belongs (an error names the field's
    /// path), and every kernel sound as if its annotation had been parsed here (a bad one is
    /// an error naming the kernel and what is wrong). A bundle can come from anywhere.
    pub fn read(path: &Path) -> Result<Bundle> {
        let text = kfoundry_tooling::files::read_text_bounded(
            path,
            kfoundry_tooling::files::MAX_BUNDLE_BYTES,
            "bundle",
        )
        .with_context(|| format!("cannot read bundle {}", path.display()))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let bundle: Bundle = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            anyhow::anyhow!(
                "{}: not a kfoundry bundle: at `{at}`: {}",
                path.display(),
                e.into_inner()
            )
        })?;
        if bundle.format != BUNDLE_FORMAT || bundle.version > BUNDLE_VERSION {
            bail!(
                "{}: bundle format `{}` version {} is not one this kfoundry reads (`{BUNDLE_FORMAT}` ≤ {BUNDLE_VERSION})",
                path.display(),
                bundle.format,
                bundle.version
            );
        }
        let mut ids = BTreeSet::new();
        for (i, k) in bundle.kernels.iter().enumerate() {
            let bad = |what: String| {
                anyhow::anyhow!("{}: kernels[{i}] (`{}`): {what}", path.display(), k.spec.id)
            };
            if let Some(e) = k.spec.validate().into_iter().next() {
                bail!(bad(format!("{:?}: {e}", e.part)));
            }
            match kfoundry_rt::model::signature::find_kernel(
                &k.spec.source,
                Some(&k.spec.signature.name),
            ) {
                Ok(sig) if k.spec.has_signature(&sig) => {}
                Ok(_) => bail!(bad(
                    "`signature` is not the signature of the kernel in `source`".into()
                )),
                Err(e) => bail!(bad(format!("`source`: {e}"))),
            }
            if !ids.insert(k.spec.id.as_str()) {
                bail!(bad("the kernel id is used twice".into()));
            }
        }
        Ok(bundle)
    }
}

/// Reads the workspace and every annotated kernel of the selected packages. Every malformed
/// annotation is reported (file:line:column: message) before failing.
pub fn discover(args: &WorkspaceOptions) -> Result<Workspace> {
    let mut cmd = cargo_metadata::MetadataCommand::new();
    cmd.no_deps();
    if let Some(path) = &args.manifest_path {
        cmd.manifest_path(path);
    }
    let meta = cmd
        .exec()
        .context("cannot read the workspace with `cargo metadata`")?;
    let members: Vec<&cargo_metadata::Package> = meta.workspace_packages();
    // `--workspace` (cargo's flag, exclusive with `-p`) says explicitly what no `-p` means.
    let selected: Vec<&cargo_metadata::Package> = if args.workspace || args.packages.is_empty() {
        members
    } else {
        let mut out = Vec::new();
        for name in &args.packages {
            match members.iter().find(|p| p.name.as_str() == name.as_str()) {
                Some(p) => out.push(*p),
                None => {
                    let names: Vec<&str> = members.iter().map(|p| p.name.as_str()).collect();
                    return Err(usage(format!(
                        "package `{name}` is not a member of the workspace (members: {})",
                        names.join(", ")
                    )));
                }
            }
        }
        out
    };

    let mut kernels = Vec::new();
    let mut errors = Vec::new();
    for package in selected {
        let manifest_dir = package
            .manifest_path
            .parent()
            .map(|p| p.as_std_path().to_path_buf())
            .unwrap_or_default();
        for file in source_files(package) {
            match kernels_in_file(&file, package.name.as_str(), &manifest_dir) {
                Ok(found) => kernels.extend(found),
                Err(mut e) => errors.append(&mut e),
            }
        }
    }
    let mut seen = BTreeSet::new();
    for k in &kernels {
        if !seen.insert(k.spec.id.clone()) {
            errors.push(format!(
                "{}: kernel id `{}` is used twice; give one of them `name = \"...\"`",
                k.location(),
                k.spec.id
            ));
        }
    }
    if !errors.is_empty() {
        bail!(
            "{}\n{} error(s) in kfoundry annotations",
            errors.join("\n"),
            errors.len()
        );
    }
    kernels.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
    Ok(Workspace {
        root: meta.workspace_root.as_std_path().to_path_buf(),
        target_dir: meta.target_directory.as_std_path().to_path_buf(),
        metadata: meta.workspace_metadata.clone(),
        kernels,
    })
}

/// Every `.rs` file under the source directories of the package's library, binary and example
/// targets (test and bench targets are not tuned).
fn source_files(package: &cargo_metadata::Package) -> Vec<PathBuf> {
    let mut dirs = BTreeSet::new();
    for t in &package.targets {
        let tuned = t.kind.iter().any(|k| {
            matches!(
                k,
                cargo_metadata::TargetKind::Lib
                    | cargo_metadata::TargetKind::Bin
                    | cargo_metadata::TargetKind::Example
                    | cargo_metadata::TargetKind::RLib
                    | cargo_metadata::TargetKind::DyLib
                    | cargo_metadata::TargetKind::CDyLib
                    | cargo_metadata::TargetKind::StaticLib
            )
        });
        if tuned {
            if let Some(dir) = t.src_path.parent() {
                dirs.insert(dir.as_std_path().to_path_buf());
            }
        }
    }
    // A directory inside another is walked once.
    let dirs: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| !dirs.iter().any(|o| o != *d && d.starts_with(o)))
        .cloned()
        .collect();
    let mut files = Vec::new();
    for d in dirs {
        walk(&d, &mut files);
    }
    files.sort();
    files
}

/// Every `.rs` file below `dir`, at any depth, outside hidden folders and `target`.
pub(crate) fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, out),
            Ok(t) if t.is_file() && name.ends_with(".rs") => out.push(path),
            _ => {}
        }
    }
}

/// The annotated kernels of one file, or its errors as `file:line:column: message`.
pub fn kernels_in_file(
    file: &Path,
    package: &str,
    manifest_dir: &Path,
) -> Result<Vec<Kernel>, Vec<String>> {
    let text = kfoundry_tooling::files::read_text_bounded(
        file,
        kfoundry_tooling::files::MAX_KERNEL_SOURCE_BYTES,
        "Rust source file",
    )
    .map_err(|e| vec![e.to_string()])?;
    if !text.contains("evolve") {
        return Ok(Vec::new());
    }
    let ast = syn::parse_file(&text).map_err(|e| vec![located(file, &e)])?;
    let cx = Context {
        package,
        manifest_dir,
    };
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let mut items: Vec<&syn::Item> = ast.items.iter().collect();
    // Inline modules are part of the file.
    while let Some(item) = items.pop() {
        if let syn::Item::Mod(m) = item {
            if let Some((_, inner)) = &m.content {
                items.extend(inner.iter());
            }
            continue;
        }
        let attrs = match item {
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Enum(e) => &e.attrs,
            _ => continue,
        };
        for attr in attrs.iter().filter(|a| annotation::is_evolve_attr(a)) {
            let args = match &attr.meta {
                syn::Meta::List(list) => list.tokens.clone(),
                _ => proc_macro2::TokenStream::new(),
            };
            let mut bare = item.clone();
            strip_evolve(&mut bare);
            match annotation::parse(args, &bare, &cx) {
                Ok(a) => {
                    let line = a.ident.span().start().line;
                    found.push(Kernel {
                        package: package.to_string(),
                        file: file.to_path_buf(),
                        line,
                        spec: a.spec,
                        source_path: a.source_path,
                    })
                }
                Err(e) => errors.extend(e.into_iter().map(|e| located(file, &e))),
            }
        }
    }
    if errors.is_empty() {
        found.sort_by_key(|k| k.line);
        Ok(found)
    } else {
        Err(errors)
    }
}

fn strip_evolve(item: &mut syn::Item) {
    if let syn::Item::Struct(s) = item {
        s.attrs.retain(|a| !annotation::is_evolve_attr(a));
    }
}

fn located(file: &Path, e: &syn::Error) -> String {
    let start = e.span().start();
    format!(
        "{}:{}:{}: {e}",
        file.display(),
        start.line,
        start.column + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kernels_in_nested_modules_and_reports_errors_with_location() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib.rs");
        std::fs::write(
            &file,
            r#"
mod inner {
    #[kfoundry::evolve(code = "__kernel void k(const int n, __global float* y) {}",
        global = n, buffers(y = n), check(y), workloads(w(n = 64)))]
    pub struct K;
}

#[kfoundry::evolve(code = "__kernel void k(const int n, __global float* y) {}",
    global = n, buffers(y = n), check(y), workloads(w(n = 64)), bogus = 1)]
pub struct Broken;
"#,
        )
        .unwrap();
        let errors = kernels_in_file(&file, "demo", dir.path()).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].contains("lib.rs:9:") && errors[0].contains("unknown key `bogus`"),
            "{errors:?}"
        );

        std::fs::write(
            &file,
            std::fs::read_to_string(&file)
                .unwrap()
                .replace(", bogus = 1", ""),
        )
        .unwrap();
        let found = kernels_in_file(&file, "demo", dir.path()).unwrap();
        let ids: Vec<_> = found.iter().map(|k| k.spec.id.as_str()).collect();
        assert_eq!(ids, ["demo::K", "demo::Broken"]);
        assert_eq!(found[0].line, 5);
    }

    /// Build errors name the `source = ...` file; with includes, the lines counted are the
    /// expanded text's, and the name says so; inline `code` is named by its annotation.
    #[test]
    fn a_kernels_source_is_named_by_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let body =
            "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = 1.0f; }\n";
        std::fs::write(dir.path().join("k.cl"), body).unwrap();
        std::fs::write(dir.path().join("inc.cl"), "#define ONE 1.0f\n").unwrap();
        std::fs::write(
            dir.path().join("with.cl"),
            format!("#include \"inc.cl\"\n{body}"),
        )
        .unwrap();
        let file = dir.path().join("lib.rs");
        let annotation = |source: &str, item: &str| {
            format!("#[kfoundry::evolve({source}, global = n, buffers(y = n), check(y), workloads(w(n = 64)))]\npub struct {item};\n")
        };
        std::fs::write(
            &file,
            [
                annotation("source = \"k.cl\"", "Plain"),
                annotation("source = \"with.cl\"", "Included"),
                annotation(&format!("code = {body:?}"), "Inline"),
            ]
            .concat(),
        )
        .unwrap();
        let found = kernels_in_file(&file, "demo", dir.path()).unwrap();
        let places: Vec<String> = found.iter().map(Kernel::source_place).collect();
        let k = dir.path().join("k.cl");
        assert_eq!(places[0], k.display().to_string());
        assert_eq!(
            places[1],
            format!("{} (expanded)", dir.path().join("with.cl").display())
        );
        assert_eq!(places[2], format!("{}:6 (inline `code`)", file.display()));
    }

    #[test]
    fn bad_bundles_are_errors_that_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib.rs");
        std::fs::write(
            &file,
            r#"#[kfoundry::evolve(code = "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = WG; }",
                params(WG = [1, 2]), reference(WG = 1), global = n, buffers(y = n), check(y), workloads(w(n = 64)))]
            pub struct K;"#,
        )
        .unwrap();
        let kernels = kernels_in_file(&file, "demo", dir.path()).unwrap();
        let good =
            serde_json::to_value(Bundle::new(kernels.clone(), &serde_json::Value::Null)).unwrap();
        let path = dir.path().join("b.json");
        let read = |v: &serde_json::Value| {
            std::fs::write(&path, v.to_string()).unwrap();
            Bundle::read(&path)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        };
        assert_eq!(read(&good), Ok(()));
        // The language model's configuration travels with the kernels, and back to a tune.
        let meta = serde_json::json!({ "kfoundry": { "llm": { "model": "m", "base_url": "http://127.0.0.1:9/v1" } }, "other": 1 });
        let with_llm = serde_json::to_value(Bundle::new(kernels, &meta)).unwrap();
        assert_eq!(with_llm["kfoundry_metadata"], meta["kfoundry"]);
        std::fs::write(&path, with_llm.to_string()).unwrap();
        let src = sources(&Default::default(), Some(&path), None).unwrap();
        assert_eq!(src.metadata["kfoundry"]["llm"]["model"], "m");
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| {
                    v["kernels"][0]["spec"]["global"] = serde_json::json!(["n", "n", "n", "n"])
                }),
                "1 to 3 dimensions",
            ),
            (
                Box::new(|v| v["kernels"][0]["spec"]["global"] = serde_json::json!(7)),
                "at `kernels[0].spec.global`",
            ),
            (
                Box::new(|v| {
                    v["kernels"][0]["spec"]["params"][0]["name"] = "X -cl-fast-relaxed-math".into()
                }),
                "not an identifier",
            ),
            (
                Box::new(|v| v["kernels"][0]["spec"]["options"] = "-I/etc".into()),
                "not allowed",
            ),
            (
                Box::new(|v| v["kernels"][0]["spec"]["workloads"][0]["name"] = "../../x".into()),
                "not an identifier",
            ),
            (
                Box::new(|v| {
                    v["kernels"][0]["spec"]["signature"]["args"][1]["elem"] = "f64".into()
                }),
                "not the signature",
            ),
            (
                Box::new(|v| v["kernels"][0]["spec"]["id"] = "a/b".into()),
                "kernel id",
            ),
            (
                Box::new(|v| {
                    let k = v["kernels"][0].clone();
                    v["kernels"].as_array_mut().unwrap().push(k);
                }),
                "used twice",
            ),
        ];
        for (i, (edit, needle)) in cases.into_iter().enumerate() {
            let mut v = good.clone();
            edit(&mut v);
            let e = read(&v).unwrap_err();
            assert!(e.contains(needle), "case {i}: expected {needle:?} in {e}");
        }
    }
}
