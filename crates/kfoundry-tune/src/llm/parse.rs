//! Turning a model's answer into a candidate source, checking it, and reading its
//! optimisation levels.
//!
//! - `parse_response`: the answer is either SEARCH/REPLACE edits (applied in order to the
//!   parent; each SEARCH must match the current text exactly once) or a whole kernel in a
//!   fenced code block (the last block that contains a `__kernel`). Tunable parameters the
//!   model declares with `// kfoundry-params: TS=[8,16,32], WPT=[1,2]` lines in the source
//!   are returned as `DeclaredParam`s.
//! - [`validate`]: bounded size, within what a source kfoundry did not get from the user may
//!   contain ([`kfoundry_rt::model::source_policy`]: directives read as the preprocessor reads
//!   them, against an allow-list; no window on the host's files; inline assembly only for a
//!   GPU), nothing clearly CUDA, C++, Rust or Python, no leftover edit markers, and the entry
//!   point's signature identical to the reference's (read with `kfoundry_rt::model::signature`).
//! - [`source_levels`]: the memory / algorithm / parallelism levels a source shows, for the
//!   archive's descriptors (heuristics, documented on each level).

use kfoundry_rt::model::signature::{find_kernel, AddressSpace, KernelArg, KernelSignature};
use serde::{Deserialize, Serialize};

pub use kfoundry_rt::model::declared::PARAMS_MARKER;

/// How the answer was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EditForm {
    WholeKernel,
    /// This many SEARCH/REPLACE edits.
    Edits(usize),
}

/// A tunable parameter the model declared; the tuner passes it as `-D NAME=value`.
pub(crate) type DeclaredParam = kfoundry_rt::model::spec::Param;

/// A parsed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub source: String,
    pub declared_params: Vec<DeclaredParam>,
    pub form: EditForm,
}

/// Why an answer was refused; each says what and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error(
        "the answer has neither SEARCH/REPLACE edits nor a fenced code block with a `__kernel`"
    )]
    NoCode,
    #[error("SEARCH/REPLACE edit {index}: {problem}")]
    BadEdit { index: usize, problem: String },
    #[error("SEARCH/REPLACE edit {index}: the SEARCH text does not occur in the parent source (first line: `{first_line}`)")]
    SearchNotFound { index: usize, first_line: String },
    #[error(
        "SEARCH/REPLACE edit {index}: the SEARCH text occurs {count} times in the parent source (first line: `{first_line}`); include more context"
    )]
    SearchAmbiguous {
        index: usize,
        count: usize,
        first_line: String,
    },
    #[error("line {line}: bad `kfoundry-params` declaration: {problem} (syntax: `// kfoundry-params: NAME=[1,2,4], OTHER=[8,16]`)")]
    BadParams { line: usize, problem: String },
    #[error("the source is {size} bytes, more than the {max} allowed")]
    TooLarge { size: usize, max: usize },
    #[error("line {line}: not OpenCL C: {what}")]
    NotOpenCl { line: usize, what: String },
    #[error("{0}")]
    Refused(kfoundry_rt::model::source_policy::Violation),
    #[error("the kernel signature cannot be read: {0}")]
    Signature(String),
    #[error("the signature of `{kernel}` changed: {difference}")]
    SignatureChanged { kernel: String, difference: String },
}

/// Parses an answer against the `parent` source it modifies.
pub(crate) fn parse_response(answer: &str, parent: &str) -> Result<Parsed, ParseError> {
    let answer = answer.replace("\r\n", "\n");
    let (source, form) = if answer.contains("<<<<<<< SEARCH") {
        let edits = edits(&answer)?;
        let n = edits.len();
        (
            apply_edits(&parent.replace("\r\n", "\n"), &edits)?,
            EditForm::Edits(n),
        )
    } else {
        (
            whole_kernel(&answer).ok_or(ParseError::NoCode)?,
            EditForm::WholeKernel,
        )
    };
    let declared_params = declared_params(&source)?;
    Ok(Parsed {
        source,
        declared_params,
        form,
    })
}

/// The bodies of the fenced blocks (```lang … ```).
fn fenced_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut current, fence) {
            (None, true) => current = Some(Vec::new()),
            (Some(lines), true) => {
                blocks.push(lines.join("\n") + "\n");
                current = None;
            }
            (Some(lines), false) => lines.push(line),
            (None, false) => {}
        }
    }
    blocks
}

fn has_kernel(text: &str) -> bool {
    text.contains("__kernel") || text.contains("kernel void")
}

fn whole_kernel(answer: &str) -> Option<String> {
    let blocks = fenced_blocks(answer);
    if let Some(block) = blocks.into_iter().rev().find(|b| has_kernel(b)) {
        return Some(block);
    }
    // No fence: an answer that is nothing but code.
    let trimmed = answer.trim();
    (has_kernel(trimmed) && trimmed.starts_with(['_', '#', '/', 'k']))
        .then(|| format!("{trimmed}\n"))
}

fn edits(answer: &str) -> Result<Vec<(String, String)>, ParseError> {
    #[derive(PartialEq)]
    enum State {
        Outside,
        Search,
        Replace,
    }
    let mut state = State::Outside;
    let (mut search, mut replace) = (Vec::new(), Vec::new());
    let mut out = Vec::new();
    for line in answer.lines() {
        let marker = line.trim();
        let index = out.len() + 1;
        match state {
            State::Outside if marker.starts_with("<<<<<<< SEARCH") => state = State::Search,
            State::Outside => {}
            State::Search if marker == "=======" => state = State::Replace,
            State::Search
                if marker.starts_with(">>>>>>> REPLACE")
                    || marker.starts_with("<<<<<<< SEARCH") =>
            {
                return Err(ParseError::BadEdit {
                    index,
                    problem: "a SEARCH without its `=======`".into(),
                });
            }
            State::Search => search.push(line),
            State::Replace if marker.starts_with(">>>>>>> REPLACE") => {
                if search.iter().all(|l| l.trim().is_empty()) {
                    return Err(ParseError::BadEdit {
                        index,
                        problem: "an empty SEARCH text".into(),
                    });
                }
                out.push((search.join("\n"), replace.join("\n")));
                search.clear();
                replace.clear();
                state = State::Outside;
            }
            State::Replace if marker.starts_with("<<<<<<< SEARCH") || marker == "=======" => {
                return Err(ParseError::BadEdit {
                    index,
                    problem: "a REPLACE without its `>>>>>>> REPLACE`".into(),
                });
            }
            State::Replace => replace.push(line),
        }
    }
    if state != State::Outside {
        return Err(ParseError::BadEdit {
            index: out.len() + 1,
            problem: "the answer ends inside the edit".into(),
        });
    }
    Ok(out)
}

fn apply_edits(parent: &str, edits: &[(String, String)]) -> Result<String, ParseError> {
    let mut text = parent.to_string();
    for (i, (search, replace)) in edits.iter().enumerate() {
        let index = i + 1;
        let first_line = search
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        let count = text.matches(search.as_str()).count();
        match count {
            0 => return Err(ParseError::SearchNotFound { index, first_line }),
            1 => text = text.replacen(search.as_str(), replace, 1),
            _ => {
                return Err(ParseError::SearchAmbiguous {
                    index,
                    count,
                    first_line,
                })
            }
        }
    }
    Ok(text)
}

/// Reads the `// kfoundry-params:` lines of a source (the model's reader, which the build
/// of every generated source also uses).
pub fn declared_params(source: &str) -> Result<Vec<DeclaredParam>, ParseError> {
    kfoundry_rt::model::declared::declared_params(source).map_err(|e| ParseError::BadParams {
        line: e.line,
        problem: e.problem,
    })
}

/// What [`validate`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLimits {
    pub max_bytes: usize,
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits {
            max_bytes: 64 * 1024,
        }
    }
}

/// Tokens that never occur in OpenCL C kernels, and what they betray.
const FOREIGN: &[(&str, &str)] = &[
    ("__global__", "`__global__` is CUDA"),
    ("__device__", "`__device__` is CUDA"),
    ("__syncthreads", "`__syncthreads` is CUDA (use `barrier`)"),
    ("threadIdx", "`threadIdx` is CUDA (use `get_local_id`)"),
    ("blockIdx", "`blockIdx` is CUDA (use `get_group_id`)"),
    ("blockDim", "`blockDim` is CUDA (use `get_local_size`)"),
    ("cudaMalloc", "`cudaMalloc` is CUDA"),
    ("std::", "`std::` is C++"),
    ("template<", "templates are C++"),
    ("template <", "templates are C++"),
    ("fn main", "this is Rust"),
    ("import ", "`import` is not OpenCL C"),
    ("def ", "`def` is Python"),
    ("<<<<<<<", "a leftover edit marker"),
    (">>>>>>>", "a leftover edit marker"),
    ("```", "a leftover code fence"),
];

/// Checks a candidate: size, the source policy (`policy`: inline assembly only when the
/// device is a GPU), OpenCL C only, the entry point `kernel` with exactly the `reference`
/// signature.
pub fn validate(
    source: &str,
    kernel: &str,
    reference: &KernelSignature,
    limits: SourceLimits,
    policy: kfoundry_rt::model::source_policy::Policy,
) -> Result<(), ParseError> {
    if source.len() > limits.max_bytes {
        return Err(ParseError::TooLarge {
            size: source.len(),
            max: limits.max_bytes,
        });
    }
    kfoundry_rt::model::source_policy::check(source, policy).map_err(ParseError::Refused)?;
    // Comments may say anything; line numbers survive the stripping.
    for (i, line) in strip_comments(source).lines().enumerate() {
        let directive = line
            .trim_start()
            .strip_prefix('#')
            .map(|d| format!("#{}", d.trim_start()));
        let checked = directive.as_deref().unwrap_or(line);
        for (token, what) in FOREIGN {
            let hit = if token.ends_with(' ') {
                checked.trim_start().starts_with(token)
            } else {
                checked.contains(token)
            };
            if hit {
                return Err(ParseError::NotOpenCl {
                    line: i + 1,
                    what: (*what).to_string(),
                });
            }
        }
        if line.chars().any(|c| c == '\0') {
            return Err(ParseError::NotOpenCl {
                line: i + 1,
                what: "a NUL character".into(),
            });
        }
    }
    let found =
        find_kernel(source, Some(kernel)).map_err(|e| ParseError::Signature(e.to_string()))?;
    if let Some(difference) = signature_difference(reference, &found) {
        return Err(ParseError::SignatureChanged {
            kernel: kernel.to_string(),
            difference,
        });
    }
    Ok(())
}

/// How `found` differs from `reference`, in words; `None` when identical.
pub(crate) fn signature_difference(
    reference: &KernelSignature,
    found: &KernelSignature,
) -> Option<String> {
    for (i, (r, f)) in reference.args.iter().zip(&found.args).enumerate() {
        if r != f {
            return Some(format!(
                "argument {} (`{}`): expected `{}`, found `{}`",
                i + 1,
                r.name(),
                render_arg(r),
                render_arg(f)
            ));
        }
    }
    match found.args.len().cmp(&reference.args.len()) {
        std::cmp::Ordering::Less => Some(format!(
            "argument {} (`{}`) is missing: expected {} arguments, found {}",
            found.args.len() + 1,
            reference.args[found.args.len()].name(),
            reference.args.len(),
            found.args.len()
        )),
        std::cmp::Ordering::Greater => Some(format!(
            "argument {} (`{}`) was added: expected {} arguments, found {}",
            reference.args.len() + 1,
            found.args[reference.args.len()].name(),
            reference.args.len(),
            found.args.len()
        )),
        std::cmp::Ordering::Equal => None,
    }
}

/// One argument in OpenCL C.
pub(crate) fn render_arg(arg: &KernelArg) -> String {
    match arg {
        KernelArg::Buffer {
            name,
            space,
            elem,
            read_only,
        } => {
            let space = match space {
                AddressSpace::Global => "__global",
                AddressSpace::Constant => "__constant",
                AddressSpace::Local => "__local",
            };
            let constness = if *read_only && space != "__constant" {
                "const "
            } else {
                ""
            };
            format!("{space} {constness}{}* {name}", elem.opencl_name())
        }
        KernelArg::Scalar { name, ty } => format!("{} {name}", ty.opencl_name()),
    }
}

/// The whole signature in OpenCL C.
pub(crate) fn render_signature(sig: &KernelSignature) -> String {
    let args: Vec<String> = sig.args.iter().map(render_arg).collect();
    format!("__kernel void {}({})", sig.name, args.join(", "))
}

/// Memory optimisation level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MemoryLevel {
    /// Scalar loads and stores only.
    Naive,
    /// Vector types or `vloadN`/`vstoreN` (wider, coalesced accesses).
    Vectorised,
    /// `__local` memory filled and synchronised with `barrier`.
    LocalTiled,
    /// Register blocking (a private array of accumulators) or explicit `prefetch`.
    RegisterBlocked,
}

/// Algorithmic structure level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AlgorithmLevel {
    /// Several kernels in the source (a pipeline of passes), or a plain single loop-free or
    /// one-loop kernel (the starting point).
    MultiPass,
    /// One kernel doing several stages: two or more loops.
    Fused,
    /// Finishes in one launch with work-group/sub-group collectives or atomics
    /// (`work_group_reduce`, `sub_group_scan`, `atomic_*`…).
    SinglePass,
    /// A loop over tiles with a `barrier` inside its body.
    Tiled,
}

/// Parallelism level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ParallelismLevel {
    /// Independent work-items only.
    WorkItems,
    /// Work-group cooperation: `barrier` or `work_group_*` functions.
    WorkGroup,
    /// Sub-group functions (`sub_group_*`, `get_sub_group_*`, `intel_sub_group_*`).
    SubGroup,
    /// Both work-group and sub-group cooperation.
    Hierarchical,
}

/// The optimisation levels a source shows (the highest whose signs are present).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceLevels {
    pub memory: MemoryLevel,
    pub algorithm: AlgorithmLevel,
    pub parallelism: ParallelismLevel,
}

impl SourceLevels {
    /// The levels as numbers 0–3 (memory, algorithm, parallelism), for descriptors.
    pub fn indices(&self) -> [u8; 3] {
        [
            self.memory as u8,
            self.algorithm as u8,
            self.parallelism as u8,
        ]
    }
}

/// The source without comments, newlines kept (string literals are not special: kernels
/// hardly have any).
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            out.push(' ');
            for c in chars.by_ref() {
                if prev == '*' && c == '/' {
                    break;
                }
                if c == '\n' {
                    // Kept, so that line numbers still hold.
                    out.push('\n');
                }
                prev = c;
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Identifier-like words of a source.
fn words(src: &str) -> Vec<&str> {
    src.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

fn is_vector_type(word: &str) -> bool {
    const BASES: [&str; 10] = [
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double",
    ];
    BASES.iter().any(|b| {
        word.strip_prefix(b)
            .is_some_and(|n| matches!(n, "2" | "3" | "4" | "8" | "16"))
    }) || (word.starts_with("vload") || word.starts_with("vstore"))
}

/// A private array declaration: `float acc[4]` (or `float acc[4] = {0}`) without an
/// address-space qualifier.
fn has_private_array(src: &str) -> bool {
    const TYPES: [&str; 8] = [
        "float", "double", "int", "uint", "long", "ulong", "half", "short",
    ];
    src.split([';', '{', '}']).any(|stmt| {
        let w = words(stmt);
        let qualified = w.iter().any(|x| {
            matches!(
                *x,
                "__local" | "local" | "__constant" | "constant" | "__global" | "global"
            )
        });
        let declares = w.len() >= 2 && TYPES.contains(&w[0]) && !stmt.contains('(');
        let bracket_first = match (stmt.find('['), stmt.find('=')) {
            (Some(b), Some(e)) => b < e,
            (Some(_), None) => true,
            _ => false,
        };
        declares && !qualified && bracket_first
    })
}

/// Byte offsets of `keyword` as a whole word.
fn keyword_positions(src: &str, keyword: &str) -> Vec<usize> {
    let bytes = src.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    src.match_indices(keyword)
        .map(|(i, _)| i)
        .filter(|&i| {
            (i == 0 || !ident(bytes[i - 1]))
                && bytes.get(i + keyword.len()).is_none_or(|&b| !ident(b))
        })
        .collect()
}

/// Whether some `for`/`while` loop body (in braces) contains a `barrier(`.
fn loop_with_barrier(src: &str) -> bool {
    let starts = keyword_positions(src, "for")
        .into_iter()
        .chain(keyword_positions(src, "while"));
    starts.into_iter().any(|pos| {
        let Some(open) = src[pos..].find('{').map(|p| p + pos) else {
            return false;
        };
        let mut depth = 0usize;
        for (i, c) in src[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return src[open..open + i].contains("barrier(");
                    }
                }
                _ => {}
            }
        }
        false
    })
}

/// Reads the optimisation levels of an OpenCL C source (heuristics, see each level).
pub fn source_levels(src: &str) -> SourceLevels {
    let src = strip_comments(src);
    let w = words(&src);
    let has = |name: &str| w.contains(&name);
    let has_prefix = |p: &str| w.iter().any(|x| x.starts_with(p));
    let local = has("__local") || has("local");
    let barrier = src.contains("barrier(") || src.contains("work_group_barrier(");
    let work_group_fns = has_prefix("work_group_");
    let sub_group =
        has_prefix("sub_group_") || has_prefix("get_sub_group") || has_prefix("intel_sub_group");

    let memory = if has_private_array(&src) || src.contains("prefetch(") {
        MemoryLevel::RegisterBlocked
    } else if local && barrier {
        MemoryLevel::LocalTiled
    } else if w.iter().any(|x| is_vector_type(x)) {
        MemoryLevel::Vectorised
    } else {
        MemoryLevel::Naive
    };

    let kernels = w
        .iter()
        .filter(|x| **x == "__kernel" || **x == "kernel")
        .count();
    let loops = w.iter().filter(|x| **x == "for" || **x == "while").count();
    let collectives = has_prefix("work_group_reduce")
        || has_prefix("work_group_scan")
        || has_prefix("sub_group_reduce")
        || has_prefix("sub_group_scan")
        || has_prefix("atomic_")
        || has_prefix("atom_");
    let algorithm = if local && loop_with_barrier(&src) {
        AlgorithmLevel::Tiled
    } else if collectives {
        AlgorithmLevel::SinglePass
    } else if kernels <= 1 && loops >= 2 {
        AlgorithmLevel::Fused
    } else {
        AlgorithmLevel::MultiPass
    };

    let group = barrier || work_group_fns;
    let parallelism = match (group, sub_group) {
        (true, true) => ParallelismLevel::Hierarchical,
        (false, true) => ParallelismLevel::SubGroup,
        (true, false) => ParallelismLevel::WorkGroup,
        (false, false) => ParallelismLevel::WorkItems,
    };
    SourceLevels {
        memory,
        algorithm,
        parallelism,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_rt::model::source_policy::Policy;

    const PARENT: &str = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    y[i] = a * x[i] + y[i];\n}\n";

    fn reference() -> KernelSignature {
        find_kernel(PARENT, Some("saxpy")).unwrap()
    }

    #[test]
    fn whole_kernel_in_a_fence() {
        let answer = format!("Here is a faster one:\n```c\n// kfoundry-params: VEC=[1,2,4], TS=[8, 16]\n{PARENT}```\nDone.");
        let p = parse_response(&answer, PARENT).unwrap();
        assert_eq!(p.form, EditForm::WholeKernel);
        assert!(p.source.ends_with("}\n") && p.source.starts_with("// kfoundry-params"));
        assert_eq!(
            p.declared_params,
            vec![
                DeclaredParam {
                    name: "VEC".into(),
                    values: vec![1, 2, 4]
                },
                DeclaredParam {
                    name: "TS".into(),
                    values: vec![8, 16]
                },
            ]
        );
        validate(
            &p.source,
            "saxpy",
            &reference(),
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap();
    }

    #[test]
    fn last_kernel_block_wins_and_prose_is_no_code() {
        let answer = format!(
            "```c\n__kernel void old() {{}}\n```\n```text\nnotes\n```\n```opencl\n{PARENT}```"
        );
        assert_eq!(parse_response(&answer, PARENT).unwrap().source, PARENT);
        assert_eq!(
            parse_response("I cannot improve this kernel.", PARENT),
            Err(ParseError::NoCode)
        );
    }

    #[test]
    fn search_replace_edits() {
        let answer = "```\n<<<<<<< SEARCH\n    int i = get_global_id(0);\n=======\n    const int i = get_global_id(0);\n>>>>>>> REPLACE\n```\n<<<<<<< SEARCH\n    y[i] = a * x[i] + y[i];\n=======\n    y[i] = fma(a, x[i], y[i]);\n>>>>>>> REPLACE\n";
        let p = parse_response(answer, PARENT).unwrap();
        assert_eq!(p.form, EditForm::Edits(2));
        assert!(p.source.contains("const int i") && p.source.contains("fma(a, x[i], y[i])"));
        validate(
            &p.source,
            "saxpy",
            &reference(),
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap();
    }

    #[test]
    fn search_that_does_not_match_is_named() {
        let answer = "<<<<<<< SEARCH\n  y[i] = a*x[i];\n=======\nz\n>>>>>>> REPLACE\n";
        let err = parse_response(answer, PARENT).unwrap_err();
        assert_eq!(
            err,
            ParseError::SearchNotFound {
                index: 1,
                first_line: "y[i] = a*x[i];".into()
            }
        );
        assert!(err.to_string().contains("edit 1") && err.to_string().contains("y[i] = a*x[i];"));
        let twice = "__kernel void k() {\n  a();\n  a();\n}\n";
        let answer = "<<<<<<< SEARCH\n  a();\n=======\n  b();\n>>>>>>> REPLACE\n";
        assert!(matches!(
            parse_response(answer, twice),
            Err(ParseError::SearchAmbiguous { count: 2, .. })
        ));
        let unterminated = "<<<<<<< SEARCH\n  a();\n=======\n  b();\n";
        assert!(matches!(
            parse_response(unterminated, twice),
            Err(ParseError::BadEdit { index: 1, .. })
        ));
    }

    #[test]
    fn bad_param_declarations() {
        for (decl, needle) in [
            ("// kfoundry-params: TS=8", "needs a list"),
            (
                "// kfoundry-params: TS=[8,x]",
                "`x` (in `TS`) is not an integer",
            ),
            ("// kfoundry-params: 9TS=[8]", "not a parameter name"),
            ("// kfoundry-params: TS=[1], TS=[2]", "declared twice"),
            ("// kfoundry-params: TS=[]", "needs 1 to"),
            ("int x; kfoundry-params: TS=[1]", "`//` comment"),
        ] {
            let err = declared_params(&format!("\n{decl}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle) && err.starts_with("line 2:"), "{err}");
        }
    }

    #[test]
    fn signature_must_not_change() {
        let r = reference();
        let cases = [
            (
                "__kernel void saxpy(const int n, const float a, __global float* x, __global float* y) {}",
                "argument 3 (`x`): expected `__global const float* x`, found `__global float* x`",
            ),
            ("__kernel void saxpy(const int n, const float a, __global const float* x) {}", "argument 4 (`y`) is missing"),
            ("__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y, int m) {}", "argument 5 (`m`) was added"),
            ("__kernel void saxpy(const uint n, const float a, __global const float* x, __global float* y) {}", "expected `int n`, found `uint n`"),
        ];
        for (src, needle) in cases {
            let err = validate(src, "saxpy", &r, SourceLimits::default(), Policy::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        }
        let renamed = "__kernel void other(const int n, const float a, __global const float* x, __global float* y) {}";
        let err = validate(
            renamed,
            "saxpy",
            &r,
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no kernel named `saxpy`"), "{err}");
        assert_eq!(
            render_signature(&r),
            "__kernel void saxpy(int n, float a, __global const float* x, __global float* y)"
        );
    }

    #[test]
    fn only_opencl_c() {
        let r = reference();
        for (prefix, needle) in [
            ("#include <stdio.h>\n", "line 1: `#include` is not allowed"),
            ("#  include \"x.h\"\n", "`#include`"),
            ("#inc\\\nlude \"/etc/hostname\"\n", "`#include`"),
            ("%:include \"/etc/hostname\"\n", "`#include`"),
            ("__global__ void f() {}\n", "CUDA"),
            ("template <typename T> T f();\n", "C++"),
            ("int f() { __syncthreads(); }\n", "`__syncthreads`"),
            ("import os\n", "`import`"),
            ("int g() { asm(\"nop\"); }\n", "assembly"),
            ("int g() { asm (\"syscall\"); }\n", "assembly"),
        ] {
            let err = validate(
                &format!("{prefix}{PARENT}"),
                "saxpy",
                &r,
                SourceLimits::default(),
                Policy::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(needle), "{prefix}: {err}");
        }
        let big = format!("{PARENT}{}", "// pad\n".repeat(20_000));
        assert!(matches!(
            validate(
                &big,
                "saxpy",
                &r,
                SourceLimits::default(),
                Policy::default()
            ),
            Err(ParseError::TooLarge { .. })
        ));
        let commented =
            format!("/* no #include,\n   no CUDA __global__ */\n// import nothing\n{PARENT}");
        validate(
            &commented,
            "saxpy",
            &r,
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap();
        let err = validate(
            &format!("/* a\n b */\n#include <x>\n{PARENT}"),
            "saxpy",
            &r,
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("line 3:"), "{err}");
        // assembly on a GPU (NVIDIA's PTX is how its tensor cores are reached)
        let asm = format!("void g() {{ asm volatile(\"nop\"); }}\n{PARENT}");
        validate(
            &asm,
            "saxpy",
            &r,
            SourceLimits::default(),
            Policy { allow_asm: true },
        )
        .unwrap();
        let pragma = format!("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n{PARENT}");
        validate(
            &pragma,
            "saxpy",
            &r,
            SourceLimits::default(),
            Policy::default(),
        )
        .unwrap();
    }

    #[test]
    fn levels_of_typical_kernels() {
        let naive = source_levels(PARENT);
        assert_eq!(naive.indices(), [0, 0, 0]);
        let vec = source_levels(
            "__kernel void k(__global float4* x) { float4 v = vload4(0, (__global float*)x); }",
        );
        assert_eq!(vec.memory, MemoryLevel::Vectorised);
        let tiled = source_levels(
            "__kernel void mm(__global const float* a) {\n __local float tile[16][16];\n float s = 0;\n for (int t = 0; t < n; t += 16) {\n  tile[ly][lx] = a[t];\n  barrier(CLK_LOCAL_MEM_FENCE);\n  s += tile[0][0];\n  barrier(CLK_LOCAL_MEM_FENCE);\n }\n}",
        );
        assert_eq!(
            (tiled.memory, tiled.algorithm, tiled.parallelism),
            (
                MemoryLevel::LocalTiled,
                AlgorithmLevel::Tiled,
                ParallelismLevel::WorkGroup
            )
        );
        let blocked = source_levels("__kernel void k() { float acc[4] = {0}; for (;;) {} }");
        assert_eq!(blocked.memory, MemoryLevel::RegisterBlocked);
        let sub = source_levels(
            "__kernel void r(__global float* x) { float s = sub_group_reduce_add(x[0]); }",
        );
        assert_eq!(
            (sub.parallelism, sub.algorithm),
            (ParallelismLevel::SubGroup, AlgorithmLevel::SinglePass)
        );
        let both = source_levels(
            "__kernel void r() { barrier(CLK_LOCAL_MEM_FENCE); intel_sub_group_shuffle(a, 1); }",
        );
        assert_eq!(both.parallelism, ParallelismLevel::Hierarchical);
        let fused = source_levels("__kernel void k() { for (;;) {} for (;;) {} }");
        assert_eq!(fused.algorithm, AlgorithmLevel::Fused);
        let passes =
            source_levels("__kernel void a() { for (;;) {} for (;;) {} }\n__kernel void b() {}");
        assert_eq!(passes.algorithm, AlgorithmLevel::MultiPass);
        // Comments do not count.
        let commented = source_levels(
            "// __local barrier( sub_group_reduce\n/* float4 */ __kernel void k() {}",
        );
        assert_eq!(commented.indices(), [0, 0, 0]);
    }
}
