//! `cargo kfoundry import MODEL.onnx --name NAME -o DIR`: the model as a crate of fused,
//! annotated OpenCL kernels (see `kfoundry_import`). The crate is written into a temporary
//! directory beside DIR and renamed into place, so a failure leaves nothing behind; an existing
//! DIR is replaced only with `--force`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::cli::ImportArgs;
use kfoundry_tune::error::usage;

/// Reads and imports the model at `model` with `--dim` values `dims` (what `import` and `run`
/// share).
pub fn read_model(
    model: &Path,
    dims: &[String],
    precision: &str,
) -> Result<kfoundry_import::Imported> {
    let mut values = BTreeMap::new();
    for d in dims {
        let (name, value) = d
            .split_once('=')
            .ok_or_else(|| usage(format!("--dim {d}: expected NAME=N")))?;
        let value: usize = value
            .trim()
            .parse()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| usage(format!("--dim {d}: N must be a positive integer")))?;
        values.insert(name.trim().to_string(), value);
    }
    // Protocol buffers are at most 2 GiB; a FIFO or a device is refused, not read.
    let bytes = kfoundry_tooling::files::read_bounded(model, 2 << 30, "ONNX model")
        .map_err(|e| usage(e.to_string()))?;
    // External data is read from the model's own folder only.
    let data_dir = Some(
        model
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    );
    let precision = if precision == "tf32" {
        kfoundry_import::kernels::Precision::Tf32
    } else {
        kfoundry_import::kernels::Precision::Fp32
    };
    let options = kfoundry_import::Options {
        dims: values,
        data_dir,
        index64: false,
        precision,
    };
    kfoundry_import::import(&bytes, &options)
        .map_err(|e| usage(format!("{}: {e}", model.display())))
}

pub fn run(args: &ImportArgs) -> Result<()> {
    check_name(&args.name)?;
    let started = std::time::Instant::now();
    let imported = read_model(&args.model, &args.dims, &args.precision)?;

    let dir = absolute(&args.output)?;
    let place = Placement::find(&dir)?;
    if let Some((root, _, _)) = &place.workspace {
        // A second package of one name breaks the whole workspace.
        let members = cargo_metadata::MetadataCommand::new()
            .manifest_path(root.join("Cargo.toml"))
            .no_deps()
            .exec();
        let normal = |n: &str| n.to_ascii_lowercase().replace('_', "-");
        if let Ok(m) = members {
            if let Some(p) = m
                .workspace_packages()
                .into_iter()
                .find(|p| normal(&p.name) == normal(&args.name))
            {
                let at = p
                    .manifest_path
                    .parent()
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                if !dir.starts_with(&at) || !args.force {
                    return Err(usage(format!(
                        "--name {:?}: the workspace already has a package of that name ({at})",
                        args.name
                    )));
                }
            }
        }
    }
    let model_file = args
        .model
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.onnx".into());
    use kfoundry_import::emit::Weights;
    let weights = match args.weights.as_deref() {
        Some("embed") => Weights::Embed,
        Some(_) => Weights::File,
        None if imported.weight_bytes() > Weights::EMBED_LIMIT => Weights::File,
        None => Weights::Embed,
    };
    let files = kfoundry_import::emit::files(
        &imported,
        &kfoundry_import::emit::CrateOptions {
            name: &args.name,
            kfoundry: &place.dependency,
            model_file: &model_file,
            weights,
        },
    );
    write_dir(&dir, &files, args.force)?;
    if let Some(path) = &args.bundle {
        // The annotations read back from the written crate, as `bundle` reads a workspace.
        let kernels = kfoundry_tune::pipeline::discover::kernels_in_file(
            &dir.join("src/lib.rs"),
            &args.name,
            &dir,
        )
        .map_err(|e| anyhow::anyhow!("the generated crate's annotations: {}", e.join("; ")))?;
        let bundle =
            kfoundry_tune::pipeline::discover::Bundle::new(kernels, &serde_json::Value::Null);
        std::fs::write(path, serde_json::to_string_pretty(&bundle)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !args.quiet {
        let g = &imported.fused.graph;
        eprintln!(
            "imported {} ({} node(s), {} kernel(s)) into {} in {:.2} s",
            args.model.display(),
            g.nodes.len(),
            imported.kernels.len(),
            dir.display(),
            started.elapsed().as_secs_f64()
        );
        for k in &imported.kernels {
            eprintln!("  {:<24} {}", k.struct_name, k.doc);
        }
        if weights == Weights::File {
            eprintln!(
                "weights: {:.1} MiB in weights.bin, read when the program runs (`Model::from_weights_file(&queue, path)`); --weights embed builds them in",
                imported.weight_bytes() as f64 / (1 << 20) as f64
            );
        }
        match &place.workspace {
            Some((root, member, listed)) if !listed => eprintln!(
                "add \"{member}\" to `members` in {}, then: cargo test -p {name} (against tract-onnx); cargo kfoundry tune -p {name}",
                root.join("Cargo.toml").display(),
                name = args.name
            ),
            Some(_) => eprintln!("then: cargo test -p {name} (against tract-onnx); cargo kfoundry tune -p {name}", name = args.name),
            None => eprintln!(
                "note: {} is in no workspace that uses kfoundry; the crate depends on kfoundry {} from crates.io (edit its Cargo.toml to change that)",
                dir.display(),
                place.dependency
            ),
        }
    }
    Ok(())
}

/// A package name cargo accepts.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.len() <= 64;
    // kfoundry's own crates, and the names cargo or rustc reserve: a crate called one of them
    // would break the workspace (or shadow a dependency) rather than join it.
    const TAKEN: &[&str] = &[
        "kfoundry",
        "kfoundry-rt",
        "kfoundry-macros",
        "kfoundry-tooling",
        "kfoundry-search",
        "kfoundry-import",
        "kfoundry-examples",
        "cargo-kfoundry",
        "std",
        "core",
        "alloc",
        "proc-macro",
        "test",
        "self",
        "super",
        "crate",
    ];
    let normal = name.to_ascii_lowercase().replace('_', "-");
    if ok && TAKEN.contains(&normal.as_str()) {
        return Err(usage(format!("--name {name:?}: that name is taken (kfoundry's own crates and the names Rust reserves): choose another")));
    }
    if ok {
        Ok(())
    } else {
        Err(usage(format!("--name {name:?}: a package name starts with a letter and has only ASCII letters, digits, `-` and `_`")))
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("the current directory")?;
    let mut out = PathBuf::new();
    for c in cwd.join(p).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Where the crate goes: the workspace above it (its root, the crate's path in it, whether
/// `members` already lists it) and how it depends on kfoundry.
struct Placement {
    workspace: Option<(PathBuf, String, bool)>,
    dependency: String,
}

impl Placement {
    fn find(dir: &Path) -> Result<Placement> {
        let version = format!("\"{}\"", env!("CARGO_PKG_VERSION"));
        // The nearest manifest above DIR with a [workspace] table.
        let Some((root, toml)) = dir
            .ancestors()
            .skip(1)
            .find_map(|a| workspace_manifest(a).map(|t| (a, t)))
        else {
            return Ok(Placement {
                workspace: None,
                dependency: version,
            });
        };
        let manifest = root.join("Cargo.toml");
        let ws = toml.get("workspace").and_then(|w| w.as_table());
        let member = dir
            .strip_prefix(root)
            .unwrap_or(dir)
            .to_string_lossy()
            .replace('\\', "/");
        let listed = ws
            .and_then(|w| w.get("members"))
            .and_then(|m| m.as_array())
            .is_some_and(|m| m.iter().any(|v| v.as_str() == Some(&member)));
        let in_ws_deps = ws
            .and_then(|w| w.get("dependencies"))
            .and_then(|d| d.as_table())
            .is_some_and(|d| d.contains_key("kfoundry"));
        let dependency = if in_ws_deps {
            "{ workspace = true }".to_string()
        } else {
            // Where the workspace gets kfoundry from: a path (its own package, or a path
            // dependency) or a registry version.
            let meta = cargo_metadata::MetadataCommand::new()
                .manifest_path(&manifest)
                .no_deps()
                .exec();
            let local = meta
                .ok()
                .and_then(|m| {
                    m.packages
                        .into_iter()
                        .find(|p| p.name.as_str() == "kfoundry")
                })
                .map(|p| {
                    p.manifest_path
                        .parent()
                        .map(|d| d.to_path_buf().into_std_path_buf())
                });
            match local.flatten() {
                Some(kdir) => format!("{{ path = {} }}", toml::Value::String(relative(dir, &kdir))),
                None => match path_dependency(root, &toml) {
                    Some(kdir) => {
                        format!("{{ path = {} }}", toml::Value::String(relative(dir, &kdir)))
                    }
                    None => version,
                },
            }
        };
        Ok(Placement {
            workspace: Some((root.to_path_buf(), member, listed)),
            dependency,
        })
    }
}

/// `dir/Cargo.toml`, parsed, when it exists and declares a workspace.
fn workspace_manifest(dir: &Path) -> Option<toml::Table> {
    let table: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()?
        .parse()
        .ok()?;
    table.contains_key("workspace").then_some(table)
}

/// A member's `kfoundry = { path = ... }`, as an absolute directory.
fn path_dependency(root: &Path, toml: &toml::Table) -> Option<PathBuf> {
    let members = toml.get("workspace")?.get("members")?.as_array()?;
    for m in members.iter().filter_map(|m| m.as_str()) {
        let dir = root.join(m);
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let Ok(t) = text.parse::<toml::Table>() else {
            continue;
        };
        if let Some(p) = t
            .get("dependencies")
            .and_then(|d| d.get("kfoundry"))
            .and_then(|k| k.get("path"))
            .and_then(|p| p.as_str())
        {
            return Some(dir.join(p));
        }
    }
    None
}

/// `to` relative to `from` (both absolute).
fn relative(from: &Path, to: &Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), f.len() - common).collect();
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// Writes `files` into a temporary directory beside `dir`, then renames it to `dir`.
fn write_dir(dir: &Path, files: &[(PathBuf, Vec<u8>)], force: bool) -> Result<()> {
    let exists = dir.exists();
    if exists
        && !force
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(usage(format!(
            "{} exists and is not empty; pass --force to replace it",
            dir.display()
        )));
    }
    let parent = dir
        .parent()
        .ok_or_else(|| usage(format!("{}: no parent directory", dir.display())))?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".kfoundry-import-")
        .tempdir_in(parent)
        .with_context(|| format!("a temporary directory in {}", parent.display()))?;
    for (path, data) in files {
        let p = tmp.path().join(path);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        std::fs::write(&p, data).with_context(|| format!("writing {}", p.display()))?;
    }
    let staged = tmp.keep();
    if exists {
        let old = parent.join(format!(".kfoundry-import-old-{}", std::process::id()));
        std::fs::rename(dir, &old).with_context(|| format!("moving {} aside", dir.display()))?;
        if let Err(e) = std::fs::rename(&staged, dir) {
            let _ = std::fs::rename(&old, dir);
            let _ = std::fs::remove_dir_all(&staged);
            return Err(e).with_context(|| format!("renaming into {}", dir.display()));
        }
        std::fs::remove_dir_all(&old)
            .with_context(|| format!("removing the old {}", old.display()))?;
    } else if let Err(e) = std::fs::rename(&staged, dir) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(e).with_context(|| format!("renaming into {}", dir.display()));
    }
    Ok(())
}
