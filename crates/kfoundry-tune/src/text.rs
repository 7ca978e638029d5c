//! Human-readable output: aligned tables and durations.

/// A plain text table with aligned columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// A row; cells are made [`printable`] (a device name from a lockfile is text anyone
    /// wrote).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|c| printable(&c).into_owned())
                .collect(),
        );
    }

    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                let pad = widths[i] - c.chars().count();
                s.push_str(c);
                if i + 1 < cols {
                    s.push_str(&" ".repeat(pad + 2));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        out.push_str(&line(
            &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        ));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// A duration in nanoseconds, with a readable unit.
pub fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        "-".into()
    } else if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

pub use kfoundry_bench::text::printable;

/// The first line of a text (a build log, a model's explanation), for one-line reports.
pub fn headline(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// An evaluation in a few words: its time, or its failure.
pub fn describe(outcome: &kfoundry_search::Evaluation) -> String {
    match outcome {
        kfoundry_search::Evaluation::Ok { time, .. } => fmt_ns(time * 1e9),
        kfoundry_search::Evaluation::Failed { kind, reason, .. } => format!("{kind:?}: {reason}"),
    }
}

/// Parameters as `A=1 B=2`.
pub fn fmt_params(p: &kfoundry_rt::model::spec::Params) -> String {
    kfoundry_rt::model::spec::fmt_assignments(p, " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        assert_eq!(
            t.render(),
            "a          long header\n---------  -----------\nwide cell  x\n"
        );
    }

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(printable("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(printable("a\x1b]0;owned\x07b"), "a\\u{1b}]0;owned\\u{7}b");
        assert_eq!(printable("x\ry"), "x\\u{d}y");
        assert_eq!(printable("evil\u{202e}txt"), "evil\\u{202e}txt");
    }

    #[test]
    fn units() {
        assert_eq!(fmt_ns(950.0), "950 ns");
        assert_eq!(fmt_ns(12_340.0), "12.34 µs");
        assert_eq!(fmt_ns(2_500_000.0), "2.500 ms");
        assert_eq!(fmt_ns(3e9), "3.000 s");
    }
}
