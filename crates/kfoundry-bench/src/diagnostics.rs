//! The OpenCL compiler's warnings, from the build logs of the candidates that built (the
//! worker passes them on) and from what a worker process writes to its stderr (PoCL's clang
//! prints `1 warning generated.` there, LLVM its optimisation warnings): each distinct warning
//! is kept once with how many times it came, with the temporary file's name the compiler gave
//! the source replaced by `<source>`; the noise around it (`1 warning generated.`, the source
//! excerpt and caret under a warning) is dropped. Any other line of stderr passes through.
//! A build log of the kernel's own source names that source's file (`relocate`); one of a
//! generated source keeps only what is about that source (`own_diagnostics`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Distinct warnings and their counts, bounded.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Warnings {
    pub counts: BTreeMap<String, usize>,
}

/// Distinct warnings kept per search (others are counted under one line).
const MAX_DISTINCT: usize = 20;
/// A warning's text is cut at this many characters.
const MAX_CHARS: usize = 400;

impl Warnings {
    /// Every warning of a compiler's log (each line that says `warning:`).
    pub fn add_log(&mut self, log: &str) {
        for line in log.lines() {
            if let Some(at) = line.find("warning: ") {
                self.add(&line[at..]);
            }
        }
    }

    fn add(&mut self, text: &str) {
        let text = without_file_name(text);
        let mut text: String = text.trim().chars().take(MAX_CHARS).collect();
        if !self.counts.contains_key(&text) && self.counts.len() >= MAX_DISTINCT {
            text = "(more distinct warnings, not kept)".into();
        }
        *self.counts.entry(text).or_default() += 1;
    }
}

/// `warning: /tmp/pocl/tempfile_4tDEkC.cl:1:59: text` → `warning: <source>:1:59: text`: the
/// file the driver wrote the source to has another name at every build.
fn without_file_name(text: &str) -> String {
    let Some(cl) = text.find(".cl:") else {
        return text.to_string();
    };
    let start = text[..cl]
        .rfind(|c: char| c.is_whitespace())
        .map_or(0, |i| i + 1);
    format!("{}<source>{}", &text[..start], &text[cl + 3..])
}

/// The diagnostics of a build log that are about the candidate's own source (`own_file`, the
/// name `#line` gave it), each with the excerpt and caret under it; everything about another
/// file (an `#include` the policy missed, the compiler's own headers: `In file included from`
/// and what follows) is dropped, and so are the `<Spelling=...>` notes that name the driver's
/// temporary files. This is what may leave the machine in a prompt, or go into a log.
pub(crate) fn own_diagnostics(log: &str, own_file: &str) -> String {
    let mut out = Vec::new();
    let mut keeping = true;
    for line in log.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("In file included from") || trimmed.starts_with("from ") {
            keeping = false;
            continue;
        }
        // `2 errors generated.`: clang's count, about nothing in particular
        let count = trimmed.ends_with(" generated.")
            && trimmed
                .split_whitespace()
                .next()
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
        match location(line) {
            // NVIDIA's compiler ignores `#line` and calls the whole program `<kernel>`: with
            // `#include` refused before the build, that is the candidate's own text.
            Some(file) => keeping = file == own_file || file == "<kernel>",
            None if count
                || ["error:", "warning:", "note:", "fatal error:", "remark:"]
                    .iter()
                    .any(|p| trimmed.starts_with(p)) =>
            {
                keeping = true
            }
            None => {}
        }
        if keeping {
            out.push(without_spelling(line));
        }
    }
    out.join("\n")
}

/// `log` with the compilers' names for the source being built (PoCL's temporary
/// `.../tempfile_XXXX.cl`, NVIDIA's `<kernel>`, `<source>`) replaced by `place`, so that
/// `place:line:column` points into the user's file.
pub fn relocate(log: &str, place: &str) -> String {
    let mut out = String::with_capacity(log.len());
    for (n, line) in log.lines().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut rest = line;
        while let Some((start, end)) = next_name(rest) {
            out.push_str(&rest[..start]);
            out.push_str(place);
            rest = &rest[end..];
        }
        out.push_str(rest);
    }
    out
}

/// The next compiler name for the source in `s` that is followed by `:<line>`, as a range.
fn next_name(s: &str) -> Option<(usize, usize)> {
    let fixed = ["<kernel>", "<source>"]
        .into_iter()
        .flat_map(|f| s.match_indices(f).map(|(at, f)| (at, at + f.len())));
    // PoCL's temporary file: a path whose file name starts with `tempfile`, up to its `.cl`.
    let temporary = s
        .match_indices(".cl:")
        .map(|(at, _)| at + 3)
        .filter_map(|end| {
            let start = s[..end].rfind(char::is_whitespace).map_or(0, |w| w + 1);
            let file = Path::new(&s[start..end]).file_name()?;
            file.to_string_lossy()
                .starts_with("tempfile")
                .then_some((start, end))
        });
    let followed_by_line = |&(_, end): &(usize, usize)| {
        s[end..]
            .strip_prefix(':')
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    };
    fixed
        .chain(temporary)
        .filter(followed_by_line)
        .min_by_key(|&(start, _)| start)
}

/// The file of a diagnostic's location (`file:line:col`), either first on the line or after
/// its severity (`error: file:line:col: ...`, as PoCL writes them).
fn location(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let t = [
        "fatal error: ",
        "error: ",
        "warning: ",
        "note: ",
        "remark: ",
    ]
    .iter()
    .find_map(|p| t.strip_prefix(p))
    .unwrap_or(t);
    let end = t.find(|c: char| c.is_whitespace()).unwrap_or(t.len());
    let token = &t[..end];
    // `file:L:C` or `file:L:C:`; the file itself may contain colons (rare) but not spaces
    let mut parts = token.trim_end_matches(':').rsplitn(3, ':');
    let (col, row, file) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (digits(col) && digits(row) && !file.is_empty()).then_some(file)
}

/// `candidate.cl:2:45 <Spelling=/tmp/x.cl:3:17>: ...` without the `<Spelling=...>` note.
fn without_spelling(line: &str) -> String {
    let mut out = line.to_string();
    while let Some(start) = out.find("<Spelling=") {
        let end = out[start..].find('>').map_or(out.len(), |e| start + e + 1);
        let before = out[..start].trim_end().len();
        out.replace_range(before..end, "");
    }
    out
}

/// What a line of compiler output is.
#[derive(Debug, PartialEq)]
enum Line<'a> {
    /// `file:line:col: warning: ...` or `warning: ...`: the warning's text without its location.
    Warning(&'a str),
    /// `1 warning generated.`, a source excerpt or caret under a warning: dropped.
    Noise,
    Other,
}

/// Sorts lines of compiler output, remembering whether the last one was a warning (the line
/// after one is the source line it points into).
#[derive(Default)]
struct Filter {
    after_warning: bool,
}

impl Filter {
    fn line<'a>(&mut self, line: &'a str) -> Line<'a> {
        let kind = classify(line, self.after_warning);
        self.after_warning = matches!(kind, Line::Warning(_));
        kind
    }
}

fn classify(line: &str, after_warning: bool) -> Line<'_> {
    // What a kernel printed is never a compiler's warning, whatever it says.
    if line.starts_with(super::worker::KERNEL_OUTPUT) {
        return Line::Other;
    }
    let t = line.trim();
    if let Some(at) = line.find("warning: ") {
        return Line::Warning(&line[at..]);
    }
    let generated = t.ends_with(" generated.")
        && t.split_whitespace()
            .next()
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
    // the two lines clang prints under a diagnostic: the source line and the caret line
    let caret = !t.is_empty() && t.chars().all(|c| matches!(c, '^' | '~' | ' ' | '|'));
    // (right after a warning: the source line it points into)
    if generated || caret || (after_warning && !t.is_empty()) {
        Line::Noise
    } else {
        Line::Other
    }
}

/// Reads a worker's stderr on a thread of its own: warnings into `into`, other lines through.
pub fn collect(from: impl std::io::Read + Send + 'static, into: Arc<Mutex<Warnings>>) {
    std::thread::spawn(move || {
        let mut filter = Filter::default();
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            match filter.line(&line) {
                Line::Warning(text) => into.lock().unwrap_or_else(|p| p.into_inner()).add(text),
                Line::Noise => {}
                Line::Other => {
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "{}",
                        crate::text::printable(&line)
                    );
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_names_point_into_the_users_file() {
        let pocl = "error: /root/.cache/pocl/kcache/tempfile_amxT0I.cl:4:37: use of undeclared identifier 'x'";
        assert_eq!(
            relocate(pocl, "kernels/bad.cl"),
            "error: kernels/bad.cl:4:37: use of undeclared identifier 'x'"
        );
        assert_eq!(
            relocate("<kernel>:3:9: error: expected ';'", "k.cl"),
            "k.cl:3:9: error: expected ';'"
        );
        let untouched = "note: see other.cl:3 and <kernel> in general\nline two";
        assert_eq!(relocate(untouched, "k.cl"), untouched);
        assert_eq!(
            relocate("a <source>:1:2 and tempfile_x.cl:5:6", "k.cl"),
            "a k.cl:1:2 and k.cl:5:6"
        );
    }

    #[test]
    fn warnings_are_kept_once_and_the_noise_dropped() {
        let text = "<stdin>:5:3: warning: loop not unrolled: the optimizer was unable to perform the requested transformation [-Wpass-failed=transform-warning]\n\
                    for (int i = 0; i < n; i++)\n\
                    ^\n\
                    1 warning generated.\n\
                    <stdin>:5:3: warning: loop not unrolled: the optimizer was unable to perform the requested transformation [-Wpass-failed=transform-warning]\n\
                    1 warning generated.\n";
        let mut w = Warnings::default();
        let mut filter = Filter::default();
        let mut others = Vec::new();
        for line in text.lines().chain(["thread 'main' panicked at x"]) {
            match filter.line(line) {
                Line::Warning(t) => w.add(t),
                Line::Noise => {}
                Line::Other => others.push(line),
            }
        }
        assert_eq!(w.counts.len(), 1, "{w:?}");
        let (text, count) = w.counts.iter().next().unwrap();
        assert!(text.starts_with("warning: loop not unrolled"), "{text}");
        assert_eq!(*count, 2);
        assert_eq!(
            others,
            ["thread 'main' panicked at x"],
            "other lines pass through"
        );
        let mut filter = Filter::default();
        assert_eq!(
            filter.line("kernel output: warning: not from the compiler"),
            Line::Other
        );
    }

    /// A file the compiler read beside the candidate's own source never appears: not its name,
    /// not its content quoted in a diagnostic, not the driver's temporary file names.
    #[test]
    fn only_the_candidates_own_diagnostics_are_kept() {
        let log = "error: /etc/hostname:1:1: unknown type name 'ghp_secrettoken'\n\
                   ghp_secrettoken\n\
                   ^\n\
                   error: candidate.cl:3:15: kernel must have void return type\n\
                   __kernel int k() {}\n\
                   ~~~~~~~~ ^\n\
                   In file included from candidate.cl:1:\n\
                   /home/me/.aws/credentials:2:3: error: expected ';'\n\
                   aws_secret_access_key = abc\n\
                   error: candidate.cl:2:45 <Spelling=/root/.cache/pocl/kcache/tempfile_7U5Azs.cl:3:17>: use of undeclared identifier 'x'\n\
                   /usr/include/x.h:4:1: warning: other file\n\
                   2 errors generated.";
        let kept = own_diagnostics(log, "candidate.cl");
        for secret in [
            "ghp_",
            "hostname",
            "aws",
            "credentials",
            "pocl",
            "Spelling",
            "other file",
        ] {
            assert!(!kept.contains(secret), "{secret} in:\n{kept}");
        }
        assert!(
            kept.contains("candidate.cl:3:15: kernel must have void return type")
                && kept.contains("__kernel int k()"),
            "{kept}"
        );
        assert!(
            kept.contains("candidate.cl:2:45: use of undeclared identifier 'x'"),
            "{kept}"
        );
        assert!(kept.contains("2 errors generated."), "{kept}");
        assert_eq!(
            location("candidate.cl:3:15: error: x"),
            Some("candidate.cl")
        );
        assert_eq!(
            location("error: /a b/c.cl:3:15: x"),
            None,
            "no spaces in a file name"
        );
        assert_eq!(location("    y[i] = x;"), None);
    }

    #[test]
    fn build_logs_give_their_warnings_without_the_temporary_file_name() {
        let mut w = Warnings::default();
        w.add_log("warning: /root/.cache/pocl/uncached/tempfile_4tDEkC.cl:1:59: incompatible pointer types\n");
        w.add_log("warning: /root/.cache/pocl/uncached/tempfile_Zz9QaB.cl:1:59: incompatible pointer types\nnote: more\n");
        assert_eq!(w.counts.len(), 1, "{w:?}");
        assert_eq!(
            w.counts["warning: <source>:1:59: incompatible pointer types"],
            2
        );
    }

    #[test]
    fn distinct_warnings_are_bounded() {
        let mut w = Warnings::default();
        for i in 0..30 {
            w.add(&format!("warning: number {i}"));
        }
        assert_eq!(w.counts.len(), MAX_DISTINCT + 1);
        assert_eq!(w.counts["(more distinct warnings, not kept)"], 10);
    }
}
