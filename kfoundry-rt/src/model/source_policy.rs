//! What a kernel source that kfoundry did not get from the user may contain: a language
//! model's answer, a generated source stored beside the lockfile, one carried in a bundle.
//!
//! Such a source is read as the C preprocessor reads it (trigraphs, line splices, digraphs,
//! comments), and refused unless:
//!
//! - every directive is one of an allow-list: `define`, `undef`, `if`, `ifdef`, `ifndef`,
//!   `elif`, `else`, `endif`, `pragma` (and the empty directive). `#include`, `#embed`,
//!   `#line` and the rest never reach the compiler, however they are spelled (`#inc\` +
//!   newline + `lude`, `%:include`, `??=include`, a directive after a comment);
//! - a `#pragma` is one of `OPENCL ...`, `STDC ...`, `unroll`, `nounroll`, `clang loop ...`,
//!   `clang fp ...` (not `push_macro`, `GCC dependency` or `clang __debug`); `_Pragma` is
//!   refused;
//! - it names none of the preprocessor's windows on the host (`__has_include`, `__FILE__`
//!   and their relatives), nor what differs from one build to the next (`__DATE__`,
//!   `__TIME__`, `__LINE__`, `__COUNTER__`): a kernel could tell its proof from its use;
//! - it tests none of the names the verifier relies on (`#ifdef get_group_id`, `defined(...)`);
//! - every line ends with a newline or a carriage return and a newline (a lone carriage return
//!   ends a line for clang, not for a reader), and every string or character literal is closed;
//! - it contains no trigraph (`??=` and its relatives: whether the compiler replaces them
//!   decides how the rest is read, so neither reading is trusted) and no NUL byte;
//! - it does not define or undefine the names the verifier relies on ([`PROTECTED`]: the
//!   work-item functions, which the verifier's reversed build replaces, and the inline-assembly
//!   keywords, which [`generated_prelude`] disables on devices that are not GPUs), nor call a
//!   mangled built-in (`_Z12get_group_idj`) directly;
//! - inline assembly (`asm`, `__asm`, `__asm__`) appears only where [`Policy::allow_asm`]
//!   says (GPUs: NVIDIA's PTX is how the tensor cores are reached; on a CPU device a kernel is
//!   native code in the host process, where assembly is a system call away).
//!
//! Token pasting cannot spell a refused directive (directives are recognised before macros
//! expand), and what it can spell is defined away: every build of such a source, the tune's
//! and a shipped program's alike, starts with [`generated_prelude`], which defines the refused
//! names (`_Pragma`, `__has_include`, `__FILE__`, `__DATE__`, the mangled work-item functions,
//! and on a device that is not a GPU the assembly keywords) as macros, and a pasted token is
//! expanded again. The same prelude renames the work-item functions to wrappers, forward in
//! every build and reversed in the verifier's reversed build, under the same names: even
//! stringizing them cannot tell one build from the other.

use std::fmt;

/// Directives a source may use.
const DIRECTIVES: &[&str] = &[
    "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "pragma",
];

/// Identifiers that let the preprocessor look at the host's files.
const HOST_WINDOWS: &[&str] = &[
    "__has_include",
    "__has_include_next",
    "__has_embed",
    "__FILE__",
    "__BASE_FILE__",
    "__FILE_NAME__",
    "__INCLUDE_LEVEL__",
    "__TIMESTAMP__",
];

/// Identifiers whose value differs between builds of one source (the tune's and a shipped
/// program's, today's and tomorrow's): a kernel could tell its proof from its use.
const VARYING: &[&str] = &["__DATE__", "__TIME__", "__LINE__", "__COUNTER__"];

/// The inline-assembly keywords.
const ASM: &[&str] = &["asm", "__asm", "__asm__"];

/// Names a source may not `#define` or `#undef`: the work-item functions (a kernel that
/// undefines `get_group_id` would undo the verifier's reversed build) and the assembly keywords.
pub const PROTECTED: &[&str] = &[
    "get_group_id",
    "get_global_id",
    "get_group_linear_id",
    "get_global_linear_id",
    "get_num_groups",
    "get_local_size",
    "get_local_id",
    "get_local_linear_id",
    "get_global_size",
    "get_global_offset",
    "get_enqueued_local_size",
    "get_work_dim",
    "asm",
    "__asm",
    "__asm__",
];

/// The file name a generated source's diagnostics carry (`#line 1 "candidate.cl"`, as the
/// prelude ends).
pub const CANDIDATE_FILE: &str = "candidate.cl";

/// The work-item functions a generated source's prelude wraps: forward, and in the verifier's
/// reversed build with work-group `g` of `n` acting as `n - 1 - g` and (unless the source
/// uses sub-groups, whose lanes are numbered by the hardware) work-item `l` of a group of `s`
/// acting as `s - 1 - l` (global and linear ids to match). Functions before the macros, so
/// that they call OpenCL's own.
const WORK_ITEMS_FORWARD: &str = "\
size_t kf_local_id(uint d) { return get_local_id(d); }
size_t kf_group_id(uint d) { return get_group_id(d); }
size_t kf_global_id(uint d) { return get_global_id(d); }
";
const LOCAL_REVERSED: &str = "\
size_t kf_local_id(uint d) { return get_local_size(d) - 1 - get_local_id(d); }
";
const LOCAL_FORWARD: &str = "\
size_t kf_local_id(uint d) { return get_local_id(d); }
";
const GROUPS_REVERSED: &str = "\
size_t kf_group_id(uint d) { return get_num_groups(d) - 1 - get_group_id(d); }
size_t kf_global_id(uint d) { return kf_group_id(d) * get_local_size(d) + kf_local_id(d) + get_global_offset(d); }
";
/// The linear ids, from the wrapped functions (either direction).
const LINEAR_IDS: &str = "\
size_t kf_local_linear_id(void) { return (kf_local_id(2) * get_local_size(1) + kf_local_id(1)) * get_local_size(0) + kf_local_id(0); }
size_t kf_group_linear_id(void) { return (kf_group_id(2) * get_num_groups(1) + kf_group_id(1)) * get_num_groups(0) + kf_group_id(0); }
size_t kf_global_linear_id(void) { return ((kf_global_id(2) - get_global_offset(2)) * get_global_size(1) + (kf_global_id(1) - get_global_offset(1))) * get_global_size(0) + (kf_global_id(0) - get_global_offset(0)); }
";
const WORK_ITEM_MACROS: &str = "\
#define get_local_id kf_local_id
#define get_local_linear_id kf_local_linear_id
#define get_group_id kf_group_id
#define get_global_id kf_global_id
#define get_group_linear_id kf_group_linear_id
#define get_global_linear_id kf_global_linear_id
";

/// Whether `source` uses sub-group functions: their lanes follow the hardware's numbering of
/// local ids, so the verifier's reversed build keeps local ids as they are for such a source
/// (a correct sub-group shuffle would otherwise read another lane than it names).
pub fn uses_sub_groups(source: &str) -> bool {
    source.contains("sub_group")
}

/// The work-item wrappers of a build: forward, or for the verifier's reversed build groups in
/// reverse order and, when `local`, work-items within each group too.
pub fn work_item_wrappers(reversed: bool, local: bool) -> String {
    let mut out = String::new();
    if reversed {
        out.push_str(if local { LOCAL_REVERSED } else { LOCAL_FORWARD });
        out.push_str(GROUPS_REVERSED);
    } else {
        out.push_str(WORK_ITEMS_FORWARD);
    }
    out.push_str(LINEAR_IDS);
    out.push_str(WORK_ITEM_MACROS);
    out
}
/// What pasting could spell, defined away (clang warns about redefining its built-in macros;
/// the warning is silenced for these lines).
const DEFINED_AWAY: &str = "\
#pragma clang diagnostic ignored \"-Wbuiltin-macro-redefined\"
#define _Pragma(x)
#define __has_include(x) 0
#define __has_include_next(x) 0
#define __FILE__ \"candidate.cl\"
#define __BASE_FILE__ \"candidate.cl\"
#define __FILE_NAME__ \"candidate.cl\"
#define __DATE__ \"Jan  1 2000\"
#define __TIME__ \"00:00:00\"
#define __TIMESTAMP__ \"Sat Jan  1 00:00:00 2000\"
#define __LINE__ 0
#define __COUNTER__ 0
#define __INCLUDE_LEVEL__ 0
#define _Z12get_group_idj kfoundry_mangled_builtins_are_not_allowed
#define _Z13get_global_idj kfoundry_mangled_builtins_are_not_allowed
#define _Z19get_group_linear_idv kfoundry_mangled_builtins_are_not_allowed
#define _Z20get_global_linear_idv kfoundry_mangled_builtins_are_not_allowed
#define _Z14get_num_groupsj kfoundry_mangled_builtins_are_not_allowed
#define _Z12get_local_idj kfoundry_mangled_builtins_are_not_allowed
#define _Z19get_local_linear_idv kfoundry_mangled_builtins_are_not_allowed
";
/// The assembly keywords, defined away on devices that are not GPUs.
const NO_ASM: &str = "\
#define asm kfoundry_inline_assembly_is_not_allowed_here
#define __asm kfoundry_inline_assembly_is_not_allowed_here
#define __asm__ kfoundry_inline_assembly_is_not_allowed_here
";

/// What every build of a source kfoundry did not get from the user starts with, the tune's
/// and a shipped program's alike (so that the source cannot tell them apart): the refused
/// names defined away, the assembly keywords too on a device that is not a GPU, the
/// work-item functions wrapped ([`work_item_wrappers`]; `reversed`: the verifier's build
/// with its work-groups, and unless the source uses sub-groups its work-items, in reverse
/// order), and `#line 1 "candidate.cl"`.
pub fn generated_prelude(gpu: bool, reversed: bool, local: bool) -> String {
    let mut out = String::from(DEFINED_AWAY);
    if !gpu {
        out.push_str(NO_ASM);
    }
    out.push_str(&work_item_wrappers(reversed, local));
    out.push_str(&format!("#line 1 \"{CANDIDATE_FILE}\"\n"));
    out
}

/// A generated source as it is built: [`generated_prelude`], then the source.
pub fn generated_program(source: &str, gpu: bool, reversed: bool) -> String {
    format!(
        "{}{source}",
        generated_prelude(gpu, reversed, !uses_sub_groups(source))
    )
}

/// What a source may do beyond the allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Inline assembly is allowed (the source is built for GPUs only).
    pub allow_asm: bool,
}

/// Why a source was refused: the line (1-based, as an editor counts them) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for Violation {}

/// Checks a source that did not come from the user (see the module's rules).
pub fn check(source: &str, policy: Policy) -> Result<(), Violation> {
    let tokens = tokens(source)?;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.starts_directive {
            let end = tokens[i..]
                .iter()
                .position(|x| x.ends_line)
                .map_or(tokens.len(), |p| i + p + 1);
            directive(&tokens[i..end])?;
            // Inside a directive's line, `#` and `##` are the operators of a macro: what pasting
            // spells is defined away by the prelude every build of the source starts with
            // ([`generated_prelude`]).
            for t in &tokens[i + 1..end] {
                word(t, policy)?;
            }
            i = end;
            continue;
        }
        if t.is_hash() || t.kind == Kind::Other("##".into()) {
            return Err(Violation {
                line: t.line,
                what: "a `#` outside a directive".into(),
            });
        }
        word(t, policy)?;
        i += 1;
    }
    Ok(())
}

/// Checks only the rule a user's own kernel source must follow too: it does not define or
/// undefine the work-item functions (the verifier's reversed build of work-groups relies on
/// them) or the assembly keywords. The user may use `#include` and assembly in their own
/// source; those are theirs.
pub fn check_protected_names(source: &str) -> Result<(), Violation> {
    let tokens = tokens(source)?;
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].starts_directive {
            let end = tokens[i..]
                .iter()
                .position(|x| x.ends_line)
                .map_or(tokens.len(), |p| i + p + 1);
            protected_definition(&tokens[i..end])?;
            i = end;
        } else {
            mangled(&tokens[i])?;
            i += 1;
        }
    }
    Ok(())
}

/// Directives that make the preprocessor read a file.
pub const FILE_DIRECTIVES: &[&str] = &["include", "include_next", "import", "embed"];

/// A directive of a source, as the preprocessor reads it ([`directives`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// Its name (`include`, `define`, ...); empty for the null directive `#` and for a `#`
    /// followed by something that is not a name.
    pub name: String,
    /// The physical line (1-based) of its `#` (or `%:`).
    pub line: usize,
    /// The physical line where its logical line ends: later than [`Directive::line`] when a
    /// line splice or a comment runs on.
    pub last_line: usize,
    /// It lies in a group that `#if 0` (or `#elif 0`) leaves out: the compiler skips it.
    pub skipped: bool,
}

impl Directive {
    /// Whether it makes the preprocessor read a file (one of [`FILE_DIRECTIVES`]), unless skipped.
    pub fn reads_a_file(&self) -> bool {
        !self.skipped && FILE_DIRECTIVES.contains(&self.name.as_str())
    }
}

/// The directives of `source`, read as the preprocessor reads it: after line splices, with
/// comments as spaces and digraphs as what they spell (`%:include` is an include, a `#` inside
/// a comment or a string starts nothing), each marked [`Directive::skipped`] when it lies in a
/// group of `#if 0` or `#elif 0` (the only conditions read; any other is taken as true, and so
/// is every `#else`). What two readers could read differently is refused, as [`check`] refuses
/// it: a trigraph, a carriage return that is not part of `\r\n`, a NUL character, a comment or
/// a literal that is never closed.
pub fn directives(source: &str) -> Result<Vec<Directive>, Violation> {
    let tokens = tokens(source)?;
    let mut out = Vec::new();
    // Per open conditional: whether its current group is left out.
    let mut groups: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i].starts_directive {
            i += 1;
            continue;
        }
        let end = tokens[i..]
            .iter()
            .position(|x| x.ends_line)
            .map_or(tokens.len(), |p| i + p + 1);
        let line = &tokens[i..end];
        let name = match line.get(1).map(|t| &t.kind) {
            Some(Kind::Ident(name)) => name.clone(),
            _ => String::new(),
        };
        let zero = line.len() == 3 && line[2].kind == Kind::Other("0".into());
        let outer = |groups: &[bool]| groups.iter().any(|&left_out| left_out);
        let skipped = match name.as_str() {
            "if" | "ifdef" | "ifndef" => {
                let skipped = outer(&groups);
                groups.push(name == "if" && zero);
                skipped
            }
            "elif" | "elifdef" | "elifndef" | "else" => {
                if let Some(current) = groups.last_mut() {
                    *current = name == "elif" && zero;
                }
                outer(&groups[..groups.len().saturating_sub(1)])
            }
            "endif" => {
                let skipped = outer(&groups[..groups.len().saturating_sub(1)]);
                groups.pop();
                skipped
            }
            _ => outer(&groups),
        };
        out.push(Directive {
            name,
            line: line[0].line,
            last_line: line[line.len() - 1].last_line,
            skipped,
        });
        i = end;
    }
    Ok(out)
}

/// Whether building `source` may read a file: a directive of [`FILE_DIRECTIVES`] that is
/// not in a comment nor in a group `#if 0` leaves out, however it is spelled. A source that
/// cannot be read for certain ([`directives`] refuses it) may.
pub fn reads_files(source: &str) -> bool {
    directives(source).map_or(true, |all| all.iter().any(Directive::reads_a_file))
}

fn word(t: &Token, policy: Policy) -> Result<(), Violation> {
    let Kind::Ident(name) = &t.kind else {
        return Ok(());
    };
    let refuse = |what: String| Err(Violation { line: t.line, what });
    if HOST_WINDOWS.contains(&name.as_str()) {
        return refuse(format!(
            "`{name}` is not allowed (it reads the host's files)"
        ));
    }
    if name == "_Pragma" {
        return refuse("`_Pragma` is not allowed (write `#pragma`)".into());
    }
    if VARYING.contains(&name.as_str()) {
        return refuse(format!(
            "`{name}` is not allowed (its value differs from one build to another)"
        ));
    }
    if !policy.allow_asm && ASM.contains(&name.as_str()) {
        return refuse(format!(
            "inline assembly (`{name}`) is not allowed on this kind of device"
        ));
    }
    mangled(t)
}

/// A mangled built-in called by its symbol (`_Z12get_group_idj`) would bypass the verifier's
/// reversed build.
fn mangled(t: &Token) -> Result<(), Violation> {
    let Kind::Ident(name) = &t.kind else {
        return Ok(());
    };
    let digits = name
        .strip_prefix("_Z")
        .map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit()));
    match digits {
        Some(rest)
            if rest.len() + 2 < name.len() && PROTECTED.iter().any(|p| rest.starts_with(p)) =>
        {
            Err(Violation {
                line: t.line,
                what: format!("`{name}` names a built-in function by its mangled symbol"),
            })
        }
        _ => Ok(()),
    }
}

fn directive(line: &[Token]) -> Result<(), Violation> {
    let at = line[0].line;
    let refuse = |what: String| Err(Violation { line: at, what });
    let Some(name) = line.get(1) else {
        return Ok(());
    };
    let Kind::Ident(name) = &name.kind else {
        return refuse("a directive without a name".into());
    };
    if !DIRECTIVES.contains(&name.as_str()) {
        return refuse(format!(
            "`#{name}` is not allowed (directives may be {})",
            DIRECTIVES.join(", ")
        ));
    }
    protected_definition(line)?;
    if name == "pragma" {
        let words: Vec<&str> = line[2..]
            .iter()
            .take(2)
            .filter_map(|t| {
                if let Kind::Ident(w) = &t.kind {
                    Some(w.as_str())
                } else {
                    None
                }
            })
            .collect();
        let allowed = match words.as_slice() {
            ["OPENCL", ..] | ["STDC", ..] | ["unroll", ..] | ["nounroll", ..] => true,
            ["clang", second] => matches!(*second, "loop" | "fp"),
            _ => false,
        };
        if !allowed {
            let shown: Vec<String> = line[2..].iter().take(3).map(Token::text).collect();
            return refuse(format!(
                "`#pragma {}` is not allowed (pragmas may be OPENCL, STDC, unroll, nounroll, clang loop, clang fp)",
                shown.join(" ")
            ));
        }
    }
    Ok(())
}

/// `#define NAME` or `#undef NAME` of a [`PROTECTED`] name, or a test of one (`#ifdef NAME`,
/// `#ifndef NAME`, `defined(NAME)` in `#if` or `#elif`): a kernel could otherwise tell the
/// verifier's reversed build from its own.
fn protected_definition(line: &[Token]) -> Result<(), Violation> {
    let ident = |i: usize| match line.get(i).map(|t| &t.kind) {
        Some(Kind::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let directive = ident(1).unwrap_or_default();
    if let (Some("define" | "undef"), Some(name)) = (ident(1), ident(2)) {
        if PROTECTED.contains(&name) {
            return Err(Violation {
                line: line[0].line,
                what: format!("`#{directive} {name}`: `{name}` may not be redefined (kfoundry's verification relies on it)"),
            });
        }
    }
    let tested = match directive {
        "ifdef" | "ifndef" => ident(2).filter(|n| PROTECTED.contains(n)),
        "if" | "elif" => (2..line.len()).find_map(|i| {
            (ident(i) == Some("defined"))
                .then(|| ident(i + 1).or_else(|| ident(i + 2)))
                .flatten()
                .filter(|n| PROTECTED.contains(n))
        }),
        _ => None,
    };
    if let Some(name) = tested {
        return Err(Violation {
            line: line[0].line,
            what: format!("`#{directive}` tests `{name}`, which kfoundry's verification gives its own meaning: a kernel may not depend on it"),
        });
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Ident(String),
    /// `#` or `%:`.
    Hash,
    /// A number, a string or character literal, or punctuation.
    Other(String),
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// Physical line (1-based) where the token starts.
    line: usize,
    /// The first token of a logical line, and a `#`: a directive begins.
    starts_directive: bool,
    /// The last token of its logical line.
    ends_line: bool,
    /// On the last token of a logical line: the physical line where that logical line ends
    /// (after the token's own when a splice or a comment runs on).
    last_line: usize,
}

impl Token {
    fn is_hash(&self) -> bool {
        self.kind == Kind::Hash
    }

    fn text(&self) -> String {
        match &self.kind {
            Kind::Ident(s) | Kind::Other(s) => s.clone(),
            Kind::Hash => "#".into(),
        }
    }
}

/// The source as preprocessing tokens, after trigraphs are refused and line splices removed.
/// Comments are whitespace; a newline inside a block comment ends the logical line too (so a
/// `#` after `/* ... \n ... */` starts a directive, as it does for clang).
fn tokens(source: &str) -> Result<Vec<Token>, Violation> {
    // Phase 1: trigraphs and NUL bytes refused. Phase 2: splices removed, physical lines kept.
    let mut chars: Vec<(char, usize)> = Vec::with_capacity(source.len());
    let mut line = 1;
    let raw: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c == '\0' {
            return Err(Violation {
                line,
                what: "a NUL character".into(),
            });
        }
        if c == '\r' {
            // A carriage return ends a line for clang: only as part of `\r\n` is it allowed.
            if raw.get(i + 1) != Some(&'\n') {
                return Err(Violation {
                    line,
                    what: "a carriage return that is not part of a line ending (`\\r\\n`)".into(),
                });
            }
            i += 1;
            continue;
        }
        if c == '?'
            && raw.get(i + 1) == Some(&'?')
            && raw.get(i + 2).is_some_and(|c| "=/'()!<>-".contains(*c))
        {
            return Err(Violation {
                line,
                what: format!("the trigraph `??{}` is not allowed", raw[i + 2]),
            });
        }
        if c == '\\' {
            // `\`, optional spaces, then a newline: a splice (clang and GCC allow the spaces).
            let mut j = i + 1;
            while j < raw.len() && (raw[j] == ' ' || raw[j] == '\t') {
                j += 1;
            }
            if raw.get(j) == Some(&'\r') {
                j += 1;
            }
            if raw.get(j) == Some(&'\n') {
                line += 1;
                i = j + 1;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        chars.push((c, line - usize::from(c == '\n')));
        i += 1;
    }
    let mut out: Vec<Token> = Vec::new();
    let mut at_line_start = true;
    // Inside a directive's line a comment is a space, whatever it spans (`#/*\n*/include` is
    // an include); elsewhere a newline inside one ends the line, so that a `#` after it
    // starts a directive, as it does for clang.
    let mut in_directive = false;
    let mut i = 0;
    let n = chars.len();
    let c = |i: usize| chars.get(i).map(|x| x.0);
    let push = |out: &mut Vec<Token>, kind: Kind, line: usize, at_line_start: &mut bool| {
        let starts_directive = *at_line_start && kind == Kind::Hash;
        out.push(Token {
            kind,
            line,
            starts_directive,
            ends_line: false,
            last_line: line,
        });
        *at_line_start = false;
    };
    let end_line = |out: &mut Vec<Token>, at_line_start: &mut bool, physical: usize| {
        if let Some(last) = out.last_mut() {
            if !last.ends_line {
                last.ends_line = true;
                last.last_line = physical;
            }
        }
        *at_line_start = true;
    };
    while i < n {
        let (ch, ln) = chars[i];
        match ch {
            '\n' => {
                end_line(&mut out, &mut at_line_start, ln);
                in_directive = false;
                i += 1;
            }
            c0 if c0.is_whitespace() => i += 1,
            '/' if c(i + 1) == Some('/') => {
                while i < n && chars[i].0 != '\n' {
                    i += 1;
                }
            }
            '/' if c(i + 1) == Some('*') => {
                i += 2;
                let mut newline = false;
                while i < n && !(chars[i].0 == '*' && c(i + 1) == Some('/')) {
                    newline |= chars[i].0 == '\n';
                    i += 1;
                }
                if i >= n {
                    return Err(Violation {
                        line: ln,
                        what: "a comment that is never closed".into(),
                    });
                }
                let closed_at = chars[i].1;
                i += 2;
                if newline && !in_directive {
                    end_line(&mut out, &mut at_line_start, closed_at);
                }
            }
            '"' | '\'' => {
                let quote = ch;
                let start = i;
                i += 1;
                while i < n && chars[i].0 != quote && chars[i].0 != '\n' {
                    i += if chars[i].0 == '\\' { 2 } else { 1 };
                }
                if i >= n || chars[i].0 != quote {
                    return Err(Violation {
                        line: ln,
                        what: "a string or character literal that is never closed".into(),
                    });
                }
                i += 1;
                let text: String = chars[start..i].iter().map(|x| x.0).collect();
                push(&mut out, Kind::Other(text), ln, &mut at_line_start);
            }
            '#' => {
                let paste = c(i + 1) == Some('#');
                in_directive |= at_line_start && !paste;
                push(
                    &mut out,
                    if paste {
                        Kind::Other("##".into())
                    } else {
                        Kind::Hash
                    },
                    ln,
                    &mut at_line_start,
                );
                i += if paste { 2 } else { 1 };
            }
            '%' if c(i + 1) == Some(':') => {
                let paste = c(i + 2) == Some('%') && c(i + 3) == Some(':');
                in_directive |= at_line_start && !paste;
                push(
                    &mut out,
                    if paste {
                        Kind::Other("##".into())
                    } else {
                        Kind::Hash
                    },
                    ln,
                    &mut at_line_start,
                );
                i += if paste { 4 } else { 2 };
            }
            c0 if c0.is_ascii_alphabetic() || c0 == '_' || c0 == '$' || !c0.is_ascii() => {
                let start = i;
                while i < n
                    && (chars[i].0.is_ascii_alphanumeric()
                        || chars[i].0 == '_'
                        || chars[i].0 == '$'
                        || !chars[i].0.is_ascii())
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().map(|x| x.0).collect();
                push(&mut out, Kind::Ident(text), ln, &mut at_line_start);
            }
            c0 if c0.is_ascii_digit()
                || (c0 == '.' && c(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                // a preprocessing number: digits, letters, `_`, `.`, and a sign after an exponent
                let start = i;
                i += 1;
                while i < n {
                    let d = chars[i].0;
                    let signed =
                        (d == '+' || d == '-') && matches!(chars[i - 1].0, 'e' | 'E' | 'p' | 'P');
                    if d.is_ascii_alphanumeric() || d == '_' || d == '.' || signed {
                        i += 1;
                    } else {
                        break;
                    }
                }
                let text: String = chars[start..i].iter().map(|x| x.0).collect();
                push(&mut out, Kind::Other(text), ln, &mut at_line_start);
            }
            other => {
                push(
                    &mut out,
                    Kind::Other(other.to_string()),
                    ln,
                    &mut at_line_start,
                );
                i += 1;
            }
        }
    }
    let final_line = chars.last().map_or(1, |c| c.1);
    if let Some(last) = out.last_mut() {
        if !last.ends_line {
            last.ends_line = true;
            last.last_line = final_line;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "__kernel void k(__global float* y) { y[get_global_id(0)] = 1.0f; }\n";

    fn refused(prefix: &str) -> String {
        check(&format!("{prefix}{KERNEL}"), Policy::default())
            .expect_err(prefix)
            .to_string()
    }

    #[test]
    fn plain_kernels_and_allowed_directives_pass() {
        let ok = format!(
            "// kfoundry-params: TS=[8,16]\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#ifndef TS\n#define TS 16\n#endif\n\
             #define TWICE(a) ((a) + (a))\n#if TS > 8 && defined(TS)\n#pragma unroll 4\n#elif 1\n#else\n#endif\n\
             #pragma clang loop unroll(enable)\n#undef TWICE\n#\n/* a # in a comment, #include too */\nconst char* s = \"#include <x>\";\r\n{KERNEL}"
        );
        check(&ok, Policy::default()).unwrap();
    }

    #[test]
    fn includes_are_refused_however_they_are_spelled() {
        for (prefix, line) in [
            ("#include \"/etc/hostname\"\n", 1),
            ("#inc\\\nlude \"/etc/hostname\"\n", 1),
            ("#inc\\   \nlude \"/etc/hostname\"\n", 1),
            ("%:include \"/etc/hostname\"\n", 1),
            ("  %:  include </etc/hostname>\n", 1),
            ("/* x\n */ # include \"/etc/hostname\"\n", 2),
            ("/**/#include \"/etc/hostname\"\n", 1),
            ("\n\n#  import \"x\"\n", 3),
            ("#embed \"/etc/hostname\"\n", 1),
            ("#line 1 \"/etc/passwd\"\n", 1),
            ("#include_next <x>\n", 1),
            ("#error hi\n", 1),
            ("#\\\ninclude \"x\"\n", 1),
        ] {
            let e = check(&format!("{prefix}{KERNEL}"), Policy::default()).expect_err(prefix);
            assert_eq!(e.line, line, "{prefix:?}: {e}");
            assert!(e.what.contains("is not allowed"), "{prefix:?}: {e}");
        }
        assert!(refused("??=include \"/etc/hostname\"\n").contains("trigraph"));
        assert!(refused("int x = a ??/\n+ 1;\n").contains("trigraph"));
        // a `#` that is not at the start of a line, nor in a macro definition
        assert!(refused("int a; # include \"x\"\n").contains("outside a directive"));
        // what clang reads as a line end or a space, and a reader might not
        assert!(refused("// x\r#include \"/etc/passwd\"\n").contains("carriage return"));
        assert!(refused("#/*\n*/include \"/etc/passwd\"\n").contains("`#include` is not allowed"));
        assert!(refused("#/*\n*/undef get_group_id\n").contains("may not be redefined"));
        assert!(refused("#define Q '\n#include \"/etc/passwd\"\n").contains("never closed"));
        assert!(refused("const char* s = \"abc\n\";\n").contains("never closed"));
    }

    #[test]
    fn varying_names_and_tests_of_protected_ones_are_refused() {
        // pasting and stringizing are allowed: what they could spell, the prelude defines away
        check(
            &format!("#define C(a, b) a##b\n#define S(x) #x\n{KERNEL}"),
            Policy::default(),
        )
        .unwrap();
        for name in ["__DATE__", "__TIME__", "__LINE__", "__COUNTER__"] {
            assert!(
                refused(&format!("int v = {name};\n")).contains("differs from one build"),
                "{name}"
            );
        }
        for test in [
            "#ifdef get_group_id\n#endif\n",
            "#ifndef get_global_id\n#endif\n",
            "#if defined(get_group_id)\n#endif\n",
            "#if 1 && defined get_local_id\n#endif\n",
        ] {
            assert!(refused(test).contains("tests `get_"), "{test}");
            assert!(
                check_protected_names(&format!("{test}{KERNEL}")).is_err(),
                "{test}"
            );
        }
    }

    #[test]
    fn pragmas_and_host_windows_are_refused() {
        for prefix in [
            "#pragma push_macro(\"get_group_id\")\n",
            "#pragma GCC dependency \"/etc/passwd\"\n",
            "#pragma clang __debug crash\n",
            "#pragma once\n",
            "_Pragma(\"once\")\n",
            "#if __has_include(\"/etc/passwd\")\n#endif\n",
            "const char* f = __FILE__;\n",
        ] {
            let e = refused(prefix);
            assert!(e.contains("not allowed"), "{prefix:?}: {e}");
        }
    }

    #[test]
    fn protected_names_and_assembly() {
        for prefix in [
            "#undef get_group_id\n",
            "#define get_global_id(d) 0\n",
            "#undef asm\n",
            "#  def\\\nine get_group_id 0\n",
        ] {
            assert!(
                refused(prefix).contains("may not be redefined"),
                "{prefix:?}"
            );
            assert!(
                check_protected_names(&format!("{prefix}{KERNEL}")).is_err(),
                "{prefix:?}"
            );
        }
        assert!(refused("size_t _Z12get_group_idj(uint);\n").contains("mangled"));
        assert!(
            check_protected_names(&format!(
                "#include <x.h>\nvoid f() {{ asm(\"nop\"); }}\n{KERNEL}"
            ))
            .is_ok(),
            "the user's own choices"
        );
        let asm = "void f() { asm volatile(\"nop\"); }\n";
        assert!(refused(asm).contains("inline assembly"));
        assert!(refused("void f() { __asm__ (\"syscall\"); }\n").contains("inline assembly"));
        check(&format!("{asm}{KERNEL}"), Policy { allow_asm: true }).unwrap();
        // a helper named like a work-item function is fine; so is a macro that uses one
        check(&format!("#define GID get_global_id(0)\nint my_get_group_id_helper(void) {{ return 0; }}\n{KERNEL}"), Policy::default()).unwrap();
    }

    #[test]
    fn directives_are_found_however_they_are_spelled_and_where_they_end() {
        let read = |s: &str| -> Vec<(String, usize, usize, bool)> {
            directives(s)
                .unwrap()
                .into_iter()
                .map(|d| (d.name, d.line, d.last_line, d.skipped))
                .collect()
        };
        let d = |n: &str, l: usize, e: usize, s: bool| (n.to_string(), l, e, s);
        assert_eq!(read("#include \"a\"\n"), [d("include", 1, 1, false)]);
        assert_eq!(read("x;\n%:include \"a\"\n"), [d("include", 2, 2, false)]);
        assert_eq!(read("#inc\\\nlude \"a\"\n"), [d("include", 1, 2, false)]);
        assert_eq!(read("/* */#include \"a\"\n"), [d("include", 1, 1, false)]);
        assert_eq!(
            read("/* a\n b */ #include \"a\"\n"),
            [d("include", 2, 2, false)]
        );
        // a comment that runs on, or a splice in a trailing comment, extends the line
        assert_eq!(
            read("#include \"a\" /* x\n */\n"),
            [d("include", 1, 2, false)]
        );
        assert_eq!(
            read("#include \"a\" // x \\\ny\n"),
            [d("include", 1, 2, false)]
        );
        assert_eq!(read("#include \"a\" // x\n"), [d("include", 1, 1, false)]);
        // in a comment or a string, nothing
        assert!(
            read("// #include \"a\"\n/*\n#include \"a\"\n*/\nchar* s = \"#include\";\n").is_empty()
        );
        // `#if 0` groups are skipped, nested ones too; `#else` and other conditions are not
        let src = "#if 0\n#include \"a\"\n#if 1\n#include \"b\"\n#endif\n#else\n#include \"c\"\n#endif\n#ifdef X\n#include \"d\"\n#elif 0\n#include \"e\"\n#endif\n";
        let includes: Vec<(usize, bool)> = directives(src)
            .unwrap()
            .into_iter()
            .filter(|d| d.name == "include")
            .map(|d| (d.line, d.skipped))
            .collect();
        assert_eq!(
            includes,
            [(2, true), (4, true), (7, false), (10, false), (12, true)]
        );
        assert!(!reads_files(
            "#if 0 // off\n#include \"/etc/passwd\"\n#endif\n// #include <x>\n"
        ));
        for spelled in [
            "#include \"x\"\n",
            "%:include \"x\"\n",
            "#inc\\\nlude \"x\"\n",
            "/* */#include \"x\"\n",
            "# import <x>\n",
            "#embed \"x\"\n",
            "#if 00\n#include \"x\"\n#endif\n",
            // not read for certain: maybe
            "??=include \"x\"\n",
            "// c\r#include \"x\"\n",
        ] {
            assert!(reads_files(spelled), "{spelled:?}");
        }
    }

    #[test]
    fn lines_are_counted_as_an_editor_does() {
        let e = check(
            "int a;\n/* one\ntwo */\nint b; \\\n\n#include <x>\n",
            Policy::default(),
        )
        .unwrap_err();
        assert_eq!(e.line, 6, "{e}");
        assert!(check("int a; /* never closed", Policy::default())
            .unwrap_err()
            .what
            .contains("never closed"));
        assert!(check("int a;\0", Policy::default())
            .unwrap_err()
            .what
            .contains("NUL"));
    }
}
