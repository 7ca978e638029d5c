//! The OpenCL compiler's warnings, from the build logs of the candidates that built (the
//! worker passes them on) and from what a worker process writes to its stderr (PoCL's clang
//! prints `1 warning generated.` there, LLVM its optimisation warnings): each distinct warning
//! is kept once with how many times it came, with the temporary file's name the compiler gave
//! the source replaced by `<source>`; the noise around it (`1 warning generated.`, the source
//! excerpt and caret under a warning) is dropped. Any other line of stderr passes through.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
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
    let Some(cl) = text.find(".cl:") else { return text.to_string() };
    let start = text[..cl].rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1);
    format!("{}<source>{}", &text[..start], &text[cl + 3..])
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
    let t = line.trim();
    if let Some(at) = line.find("warning: ") {
        return Line::Warning(&line[at..]);
    }
    let generated = t.ends_with(" generated.") && t.split_whitespace().next().is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
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
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(others, ["thread 'main' panicked at x"], "other lines pass through");
    }

    #[test]
    fn build_logs_give_their_warnings_without_the_temporary_file_name() {
        let mut w = Warnings::default();
        w.add_log("warning: /root/.cache/pocl/uncached/tempfile_4tDEkC.cl:1:59: incompatible pointer types\n");
        w.add_log("warning: /root/.cache/pocl/uncached/tempfile_Zz9QaB.cl:1:59: incompatible pointer types\nnote: more\n");
        assert_eq!(w.counts.len(), 1, "{w:?}");
        assert_eq!(w.counts["warning: <source>:1:59: incompatible pointer types"], 2);
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
