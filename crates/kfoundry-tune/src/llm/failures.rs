//! [`FailureHistory`]: the short, deduplicated memory of what went wrong, shown in prompts.
//!
//! Compile logs and wrong-result summaries are cut to a bounded number of characters (lines
//! mentioning `error` first), deduplicated by a normalised summary (case, whitespace and
//! numbers ignored, so the same error at another line or with another value counts once),
//! and only the most recent `max_entries` distinct failures are kept, so that the model is
//! not drowned in its own failure history.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// What kind of failure an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// The kernel did not compile (the entry holds the build log).
    Build,
    /// It ran but its outputs differ from the reference's.
    Wrong,
    /// It crashed, hung or broke a device limit.
    Runtime,
    /// The response was refused before evaluation (changed signature, unparsable edit…).
    Rejected,
}

impl FailureKind {
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Build => "did not compile",
            FailureKind::Wrong => "wrong results",
            FailureKind::Runtime => "failed at run time",
            FailureKind::Rejected => "rejected before evaluation",
        }
    }
}

/// One distinct failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureEntry {
    pub kind: FailureKind,
    /// The cut text shown to the model.
    pub text: String,
    /// How many times it occurred.
    pub count: u32,
    key: String,
}

/// The recent distinct failures, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureHistory {
    entries: VecDeque<FailureEntry>,
    max_entries: usize,
    max_chars: usize,
}

impl Default for FailureHistory {
    fn default() -> Self {
        FailureHistory::new(6, 600)
    }
}

impl FailureHistory {
    /// At most `max_entries` distinct failures, each cut to `max_chars` characters.
    pub fn new(max_entries: usize, max_chars: usize) -> FailureHistory {
        FailureHistory {
            entries: VecDeque::new(),
            max_entries: max_entries.max(1),
            max_chars: max_chars.max(40),
        }
    }

    /// Records a failure; a repeat of a known one only raises its count and makes it recent.
    pub fn push(&mut self, kind: FailureKind, text: &str) {
        let text = cut(text, self.max_chars);
        let key = format!("{kind:?}:{}", normalise(&text));
        if let Some(pos) = self.entries.iter().position(|e| e.key == key) {
            if let Some(mut entry) = self.entries.remove(pos) {
                entry.count = entry.count.saturating_add(1);
                self.entries.push_back(entry);
            }
            return;
        }
        self.entries.push_back(FailureEntry {
            kind,
            text,
            count: 1,
            key,
        });
        while self.entries.len() > self.max_entries {
            self.entries.pop_front();
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &FailureEntry> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The identity of a failure: lower case, numbers as `#`, whitespace collapsed.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last_space = true;
    let mut last_digit = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('#');
            }
            last_digit = true;
            last_space = false;
        } else if c.is_whitespace() {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
            last_digit = false;
        } else {
            out.extend(c.to_lowercase());
            last_space = false;
            last_digit = false;
        }
    }
    out.trim_end().to_string()
}

/// At most `max` characters: lines that mention an error first, then the others in order.
fn cut(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let is_error = |l: &&str| l.to_lowercase().contains("error");
    let ordered: Vec<&str> = lines
        .iter()
        .filter(|l| is_error(l))
        .chain(lines.iter().filter(|l| !is_error(l)))
        .copied()
        .collect();
    let mut out = String::new();
    let mut cut_short = false;
    for line in ordered {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        if out.chars().count() > max {
            cut_short = true;
            break;
        }
    }
    if cut_short {
        const MARK: &str = " […]";
        out = out
            .chars()
            .take(max.saturating_sub(MARK.chars().count()))
            .collect::<String>()
            .trim_end()
            .to_string();
        out.push_str(MARK);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deduplicates_by_normalised_summary() {
        let mut h = FailureHistory::new(4, 200);
        h.push(
            FailureKind::Build,
            "<source>:12:5: error: use of undeclared identifier 'tile'",
        );
        h.push(
            FailureKind::Build,
            "<source>:40:9: ERROR:  use of undeclared identifier 'tile'",
        );
        h.push(FailureKind::Wrong, "y[3]: expected 1.5, got 0");
        assert_eq!(h.len(), 2);
        let first = h.entries().next().unwrap();
        assert_eq!((first.kind, first.count), (FailureKind::Build, 2));
        // The same text with another kind is another failure.
        h.push(FailureKind::Rejected, "y[3]: expected 1.5, got 0");
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn bounded_in_entries_and_size() {
        let mut h = FailureHistory::new(3, 100);
        for i in 0..10 {
            h.push(
                FailureKind::Wrong,
                &format!("mismatch kind {}", "abcdefghij".as_bytes()[i] as char),
            );
        }
        assert_eq!(h.len(), 3);
        assert!(
            h.entries().next().unwrap().text.ends_with('h'),
            "oldest kept is the 8th"
        );
        let log = format!(
            "{}\nerror: the real problem\n{}",
            "warning: noise\n".repeat(50),
            "x".repeat(500)
        );
        h.push(FailureKind::Build, &log);
        let entry = h.entries().last().unwrap();
        assert!(entry.text.chars().count() <= 100, "{}", entry.text);
        assert!(
            entry.text.starts_with("error: the real problem"),
            "{}",
            entry.text
        );
        assert!(entry.text.ends_with("[…]"));
    }

    #[test]
    fn serde_roundtrip() {
        let mut h = FailureHistory::default();
        h.push(FailureKind::Runtime, "timed out after 2 s");
        let back: FailureHistory =
            serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }
}
