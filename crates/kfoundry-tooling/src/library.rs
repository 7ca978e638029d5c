//! Kernel source text shared between kernels, and `#include` in annotated kernel sources.
//!
//! A kernel source may hold lines `#include <kfoundry/NAME>` (a file of kfoundry's template
//! library, [`FILES`], built into this crate) and `#include "PATH"` (a file of the crate,
//! relative to the including one, or to the crate for an inline `code = "..."`). [`expand`]
//! replaces each such line by the file's text, recursively, when the annotation is read: the
//! specification holds the whole text, so the fingerprint, bundles, the lockfile's checks and
//! the embedded kernel all carry it and nothing reads a file at run time.
//!
//! Sources are read as the OpenCL compiler's preprocessor reads them
//! ([`source_policy::directives`]: line splices, digraphs, comments, `#if 0`), so that no other
//! directive that reads a file (`%:include`, `#inc\` + newline + `lude`, `/* */#include`,
//! `#include_next`, `#embed`, ...) reaches the compiler, which would resolve it against the
//! process's directory at every run; an include inside a comment or a group `#if 0` leaves out
//! is left alone, and what it names need not exist. An include is written alone on its line (a
//! comment may follow it).
//!
//! The library holds the tensor-core GEMM of the suite, in pieces that the suite's kernels
//! (`examples/kernels/gemm.cl`, `linear_gelu.cl`, `conv_gn.cl`) and the importer's generated
//! matrix products and convolutions take, so that there is one copy of it: the `mma.sync`
//! instructions (`mma_ptx.cl`: TF32 m16n8k8; `mma16_ptx.cl`: half and bfloat16 m16n8k16) and
//! their emulation through local memory (`mma_emulated.cl`, `mma16_emulated.cl`), the machinery
//! (3xTF32 split or 16-bit operands, fragment loads, the tile loader; `tensor_core.cl`), and the
//! main loop around a kernel's own `#define KM_A` / `KM_B` (`tensor_core_tiles.cl` before
//! them, `tensor_core_loop.cl` after, leaving `acc[KM_MI][KM_NJ][4]`), and split-K's
//! reduction across the work-groups of one output tile (`split_k.cl`, on scratch buffers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kfoundry_rt::model::source_policy::{self, Directive};

/// The library's files: `#include <kfoundry/NAME>` names them.
pub const FILES: &[(&str, &str)] = &[
    (
        "mma_emulated.cl",
        include_str!("../library/kfoundry/mma_emulated.cl"),
    ),
    ("mma_ptx.cl", include_str!("../library/kfoundry/mma_ptx.cl")),
    (
        "mma16_emulated.cl",
        include_str!("../library/kfoundry/mma16_emulated.cl"),
    ),
    (
        "mma16_ptx.cl",
        include_str!("../library/kfoundry/mma16_ptx.cl"),
    ),
    (
        "tensor_core.cl",
        include_str!("../library/kfoundry/tensor_core.cl"),
    ),
    (
        "tensor_core_tiles.cl",
        include_str!("../library/kfoundry/tensor_core_tiles.cl"),
    ),
    (
        "tensor_core_loop.cl",
        include_str!("../library/kfoundry/tensor_core_loop.cl"),
    ),
    ("split_k.cl", include_str!("../library/kfoundry/split_k.cl")),
];

/// How deep includes may nest.
const MAX_DEPTH: usize = 8;

/// How many includes one source may expand in all (a file included many times counts each time).
const MAX_INCLUDES: usize = 256;

/// A source with its includes replaced, and the files of the crate it read (for rebuilds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub text: String,
    pub files: Vec<PathBuf>,
}

/// A library file with its own includes expanded; `None` for a name the library lacks.
pub fn file(name: &str) -> Option<String> {
    let text = FILES.iter().find(|(n, _)| *n == name)?.1;
    // The library's includes are of the library only, so this cannot fail on a file read.
    expand(text, None, Path::new(".")).ok().map(|e| e.text)
}

/// `text` (read from `from`, or inline when `None`) with every `#include` line replaced by the
/// file it names; relative paths are resolved from `from`'s folder, or from `crate_dir` for
/// inline text. The error says which line of which file is at fault.
pub fn expand(text: &str, from: Option<&Path>, crate_dir: &Path) -> Result<Expanded, String> {
    let mut out = Expanded {
        text: String::with_capacity(text.len()),
        files: Vec::new(),
    };
    let mut stack = from
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()))
        .into_iter()
        .collect();
    let mut count = 0;
    expand_into(text, from, crate_dir, &mut stack, &mut count, &mut out)?;
    // What the compiler is given, read whole: an included file's last line could otherwise
    // join the next line of the one that includes it into a directive (`#\` at its end).
    let directives = source_policy::directives(&out.text).map_err(|v| {
        format!(
            "the source with its includes expanded, line {}: {}",
            v.line, v.what
        )
    })?;
    if let Some(d) = directives.iter().find(|d| d.reads_a_file()) {
        return Err(format!(
            "the source with its includes expanded, line {}: a `#{}` that is not one of the source's own lines (an included file's last line runs into the next); end included files with a newline",
            d.line, d.name
        ));
    }
    Ok(out)
}

fn expand_into(
    text: &str,
    from: Option<&Path>,
    crate_dir: &Path,
    stack: &mut Vec<PathBuf>,
    count: &mut usize,
    out: &mut Expanded,
) -> Result<(), String> {
    let place = |line: usize| match from {
        Some(p) => format!("{}, line {line}", p.display()),
        None => format!("line {line}"),
    };
    // The directives that read a file, by the line of their `#`.
    let includes: BTreeMap<usize, Directive> = source_policy::directives(text)
        .map_err(|v| format!("{}: {}", place(v.line), v.what))?
        .into_iter()
        .filter(Directive::reads_a_file)
        .map(|d| (d.line, d))
        .collect();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let Some(directive) = includes.get(&(i + 1)) else {
            out.text.push_str(line);
            continue;
        };
        let at = place(i + 1);
        let Some(target) = include_target(line) else {
            return Err(format!("{at}: `{}`: {ONLY}", line.trim()));
        };
        if directive.last_line != directive.line {
            return Err(format!(
                "{at}: `{}`: an include runs on to line {} (a line splice or a comment); write it on one line",
                line.trim(),
                directive.last_line
            ));
        }
        *count += 1;
        if *count > MAX_INCLUDES {
            return Err(format!(
                "{at}: more than {MAX_INCLUDES} includes in one source"
            ));
        }
        if stack.len() > MAX_DEPTH {
            return Err(format!(
                "{at}: includes nest deeper than {MAX_DEPTH} (a cycle?)"
            ));
        }
        match target {
            Target::Library(name) => {
                let Some((_, body)) = FILES.iter().find(|(n, _)| *n == name) else {
                    let names: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
                    return Err(format!(
                        "{at}: kfoundry's library has no `{name}` (it has {})",
                        names.join(", ")
                    ));
                };
                let key = PathBuf::from(format!("<kfoundry/{name}>"));
                if stack.contains(&key) {
                    return Err(format!("{at}: `<kfoundry/{name}>` includes itself"));
                }
                stack.push(key);
                expand_into(body, None, crate_dir, stack, count, out)?;
                stack.pop();
                if !body.ends_with('\n') && line.ends_with('\n') {
                    out.text.push('\n');
                }
            }
            Target::File(rel) => {
                let base = from.and_then(Path::parent).unwrap_or(crate_dir);
                let path =
                    resolve_within(base, rel, crate_dir).map_err(|why| format!("{at}: {why}"))?;
                if stack.contains(&path) {
                    return Err(format!("{at}: `{}` includes itself", path.display()));
                }
                let body = crate::files::read_text_bounded(
                    &path,
                    crate::files::MAX_KERNEL_SOURCE_BYTES,
                    "included kernel source",
                )
                .map_err(|e| format!("{at}: cannot include `{rel}`: {e}"))?;
                if !out.files.contains(&path) {
                    out.files.push(path.clone());
                }
                stack.push(path.clone());
                expand_into(&body, Some(&path), crate_dir, stack, count, out)?;
                stack.pop();
                // The included text ends its last line, as the directive's line did.
                if !body.is_empty() && !body.ends_with('\n') && line.ends_with('\n') {
                    out.text.push('\n');
                }
            }
            Target::Other(what) => return Err(format!("{at}: `#include {what}`: {ONLY}")),
        }
        if out.text.len() as u64 > crate::files::MAX_KERNEL_SOURCE_BYTES {
            return Err(format!(
                "{at}: the source with its includes passes {} bytes",
                crate::files::MAX_KERNEL_SOURCE_BYTES
            ));
        }
    }
    Ok(())
}

/// `rel` from `base`, as a canonical path inside `crate_dir`: no absolute path, nothing outside
/// the crate (its text would be built into binaries, bundles and prompts).
fn resolve_within(base: &Path, rel: &str, crate_dir: &Path) -> Result<PathBuf, String> {
    if Path::new(rel).is_absolute() {
        return Err(format!("`#include \"{rel}\"`: an absolute path; include files of the crate, relative to this one"));
    }
    let path = base.join(rel);
    let real = path
        .canonicalize()
        .map_err(|e| format!("cannot include `{rel}`: {}: {e}", path.display()))?;
    let root = crate_dir.canonicalize().map_err(|e| {
        format!(
            "cannot read the crate's folder {}: {e}",
            crate_dir.display()
        )
    })?;
    if !real.starts_with(&root) {
        return Err(format!(
            "`#include \"{rel}\"` names {}, outside the crate ({}): include files of the crate only",
            real.display(),
            root.display()
        ));
    }
    Ok(real)
}

/// What an include that is refused is told.
const ONLY: &str = "only `#include <kfoundry/NAME>` (kfoundry's library) and `#include \"PATH\"` (a file of the crate) are read, each written alone on its line (a comment may follow); the OpenCL compiler is given the whole text";

enum Target<'a> {
    Library(&'a str),
    File(&'a str),
    Other(&'a str),
}

/// What the line `line`, which the preprocessor reads as a directive that includes a file,
/// includes: `None` unless it is `#include` spelled plainly (`#`, not `%:`; no comment between
/// the `#` and the name) at the start of the line, and nothing but spaces and comments follow
/// what it names.
fn include_target(line: &str) -> Option<Target<'_>> {
    let rest = line
        .trim_start()
        .strip_prefix('#')?
        .trim_start_matches([' ', '\t']);
    let what = rest.strip_prefix("include")?;
    if !what.starts_with([' ', '\t', '<', '"']) {
        return None;
    }
    let what = what.trim_start_matches([' ', '\t']);
    let (named, after) = match what.chars().next()? {
        '<' => what.split_at(what.find('>')? + 1),
        '"' => what.split_at(what[1..].find('"')? + 2),
        _ => (what.trim_end(), ""),
    };
    if !only_comments(after) {
        return Some(Target::Other(what.trim_end()));
    }
    if let Some(name) = named
        .strip_prefix("<kfoundry/")
        .and_then(|n| n.strip_suffix('>'))
    {
        return Some(Target::Library(name));
    }
    if let Some(path) = named
        .strip_prefix('"')
        .and_then(|p| p.strip_suffix('"'))
        .filter(|p| !p.is_empty())
    {
        return Some(Target::File(path));
    }
    Some(Target::Other(named))
}

/// Whether `text` is only spaces and comments (a `/* */` closed on the line).
fn only_comments(text: &str) -> bool {
    let mut rest = text.trim();
    loop {
        if rest.is_empty() || rest.starts_with("//") {
            return true;
        }
        let Some(comment) = rest.strip_prefix("/*") else {
            return false;
        };
        let Some(end) = comment.find("*/") else {
            return false;
        };
        rest = comment[end + 2..].trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_includes_are_replaced_by_their_text_exactly() {
        let text = "a\n#include <kfoundry/mma_ptx.cl>\nb\n";
        let e = expand(text, None, Path::new(".")).unwrap();
        let ptx = FILES.iter().find(|(n, _)| *n == "mma_ptx.cl").unwrap().1;
        assert_eq!(e.text, format!("a\n{ptx}b\n"));
        assert!(e.files.is_empty());
        // nested: the machinery includes the instructions
        let machinery = file("tensor_core.cl").unwrap();
        assert!(machinery.contains("mma.sync.aligned.m16n8k8") && !machinery.contains("#include"));
    }

    #[test]
    fn relative_includes_are_read_tracked_and_refused_in_cycles() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/h.cl"), "#define H 1\n").unwrap();
        std::fs::write(dir.path().join("k.cl"), "#include \"lib/h.cl\"\nkernel\n").unwrap();
        let k = dir.path().join("k.cl");
        let text = std::fs::read_to_string(&k).unwrap();
        let e = expand(&text, Some(&k), dir.path()).unwrap();
        assert_eq!(e.text, "#define H 1\nkernel\n");
        assert_eq!(e.files, vec![dir.path().join("lib/h.cl")]);
        // inline text: relative to the crate
        let e = expand("#include \"lib/h.cl\"", None, dir.path()).unwrap();
        assert_eq!(e.text, "#define H 1\n");
        // a cycle
        std::fs::write(dir.path().join("a.cl"), "#include \"a.cl\"\n").unwrap();
        let a = dir.path().join("a.cl");
        let err = expand("#include \"a.cl\"\n", Some(&a), dir.path()).unwrap_err();
        assert!(err.contains("includes itself"), "{err}");
        // nothing outside the crate, nothing absolute
        let krate = dir.path().join("lib");
        let err = expand("#include \"../k.cl\"\n", None, &krate).unwrap_err();
        assert!(err.contains("outside the crate"), "{err}");
        let err = expand("#include \"/etc/passwd\"\n", None, &krate).unwrap_err();
        assert!(err.contains("absolute path"), "{err}");
        // a file that includes itself by another spelling, many times: refused, not expanded
        std::fs::write(
            dir.path().join("b.cl"),
            "#include \"lib/../b.cl\"\n".repeat(4),
        )
        .unwrap();
        let b = dir.path().join("b.cl");
        let err = expand("#include \"b.cl\"\n", Some(&b), dir.path()).unwrap_err();
        assert!(err.contains("includes itself"), "{err}");
    }

    #[test]
    fn other_includes_and_unknown_names_are_errors_with_their_line() {
        let err = expand("x\n#include <stdio.h>\n", None, Path::new(".")).unwrap_err();
        assert!(err.starts_with("line 2: `#include <stdio.h>`"), "{err}");
        let err = expand("# include <kfoundry/nothing.cl>\n", None, Path::new(".")).unwrap_err();
        assert!(err.contains("has no `nothing.cl`"), "{err}");
        let err = expand("#include \"missing.cl\"\n", None, Path::new("/nonexistent")).unwrap_err();
        assert!(err.contains("cannot include `missing.cl`"), "{err}");
        // a line that merely mentions include is left alone
        let e = expand("int include = 1;\n// #include <x>?\n", None, Path::new(".")).unwrap();
        assert_eq!(e.text, "int include = 1;\n// #include <x>?\n");
    }

    #[test]
    fn includes_are_read_as_the_compiler_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("h.cl"), "#define H 1\n").unwrap();
        // Every spelling the compiler reads as an include, refused at its line (I1-I4, I13).
        for (source, line) in [
            ("x\n%:include \"/etc/hostname\"\n", 2),
            ("%:include \"h.cl\"\n", 1),
            ("#inc\\\nlude \"/etc/hostname\"\n", 1),
            ("#include \"h.cl\\\n\"\n", 1),
            ("int a;\n// c\r#include \"/etc/hostname\"\n", 2),
            ("/* */#include \"/etc/hostname\"\n", 1),
            ("/* a\n b */ #include \"h.cl\"\n", 2),
            ("??=include \"/etc/hostname\"\n", 1),
            ("#include_next <x.h>\n", 1),
            ("# import \"h.cl\"\n", 1),
            ("#embed \"/etc/hostname\"\n", 1),
            ("#include \"h.cl\" junk\n", 1),
            // a trailing comment that runs on hides nothing
            ("#include \"h.cl\" /* runs\n on */\n", 1),
            ("#include \"h.cl\" // \\\n#include \"/etc/hostname\"\n", 1),
        ] {
            let e = expand(source, None, dir.path()).expect_err(source);
            assert!(e.starts_with(&format!("line {line}: ")), "{source:?}: {e}");
        }
        // Includes in comments and in `#if 0` groups are left alone and need not exist (I10,
        // I11); a comment may follow an include (I12).
        let source = "// #include \"missing.cl\"\n/*\n#include </etc/passwd>\n*/\n\
                      #if 0\n#include \"missing.cl\"\n#else\n#include \"h.cl\" // the header\n#endif\n\
                      #include <kfoundry/mma_ptx.cl> /* the instructions */\n";
        let e = expand(source, None, dir.path()).unwrap();
        let ptx = FILES.iter().find(|(n, _)| *n == "mma_ptx.cl").unwrap().1;
        assert_eq!(
            e.text,
            format!("// #include \"missing.cl\"\n/*\n#include </etc/passwd>\n*/\n#if 0\n#include \"missing.cl\"\n#else\n#define H 1\n#endif\n{ptx}")
        );
        assert!(!source_policy::reads_files(&e.text));
        // An error names the file and the line.
        let k = dir.path().join("k.cl");
        std::fs::write(&k, "int a;\n%:include \"h.cl\"\n").unwrap();
        let text = std::fs::read_to_string(&k).unwrap();
        let e = expand(&text, Some(&k), dir.path()).unwrap_err();
        assert!(e.starts_with(&format!("{}, line 2: ", k.display())), "{e}");
        // An included file whose last line runs into the next line of the one including it.
        std::fs::write(dir.path().join("hash.cl"), "#\\").unwrap();
        let e = expand(
            "#include \"hash.cl\"\ninclude \"/etc/hostname\"\n",
            None,
            dir.path(),
        )
        .unwrap_err();
        assert!(e.contains("with its includes expanded, line 1"), "{e}");
    }
}
