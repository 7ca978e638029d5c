//! How a search shows its progress: a bar on a terminal; off a terminal (CI logs, `| tee`),
//! lines: one when a search starts, one every [`period`] with evaluations, the best so far,
//! failures and the time taken, and one when it ends. `-v`'s line per evaluation and the notes
//! go through [`ProgressView::println`], which writes them in both cases (a hidden bar would drop
//! them).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Seconds between progress lines off a terminal (`KFOUNDRY_PROGRESS_SECS` overrides it; 0: a
/// line per evaluation).
pub fn period() -> Duration {
    let secs = std::env::var("KFOUNDRY_PROGRESS_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0);
    Duration::from_secs_f64(secs.unwrap_or(10.0))
}

/// The progress of one search (kernel at a workload).
pub struct ProgressView {
    label: String,
    total: u64,
    mode: Mode,
}

enum Mode {
    Quiet,
    Bar(ProgressBar),
    Lines(Mutex<Lines>),
}

struct Lines {
    started: Instant,
    last: Instant,
    position: u64,
    message: String,
    period: Duration,
}

impl ProgressView {
    /// Progress of the search `label` (`kernel @ workload`) with a budget of `total`
    /// evaluations: nothing when `quiet`, a bar on a terminal, lines elsewhere.
    pub fn new(label: String, total: u64, quiet: bool) -> ProgressView {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} evals  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_prefix(label.clone());
            Mode::Bar(bar)
        } else {
            eprintln!("{label}: searching (budget {total} evaluations)");
            let now = Instant::now();
            Mode::Lines(Mutex::new(Lines {
                started: now,
                last: now,
                position: 0,
                message: String::new(),
                period: period(),
            }))
        };
        ProgressView { label, total, mode }
    }

    /// Evaluations (and language-model turns) so far.
    pub fn set_position(&self, position: u64) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Bar(bar) => bar.set_position(position),
            Mode::Lines(lines) => {
                let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
                let moved = position != l.position;
                l.position = position;
                if moved && l.last.elapsed() >= l.period {
                    l.last = Instant::now();
                    eprintln!(
                        "{}: {}/{} evaluations{}, {:.0} s",
                        self.label,
                        l.position,
                        self.total,
                        with(&l.message),
                        l.started.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }

    /// What the search is at (the best so far, failures; or that the language model is asked).
    pub fn set_message(&self, message: String) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Bar(bar) => bar.set_message(message),
            Mode::Lines(lines) => lines.lock().unwrap_or_else(|p| p.into_inner()).message = message,
        }
    }

    /// A line of its own (a `-v` evaluation, a note), above the bar on a terminal.
    pub fn println(&self, line: String) {
        match &self.mode {
            Mode::Bar(bar) => bar.println(line),
            Mode::Quiet | Mode::Lines(_) => eprintln!("{line}"),
        }
    }

    /// The search is over.
    pub fn finish(&self) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Bar(bar) => bar.finish_and_clear(),
            Mode::Lines(lines) => {
                let l = lines.lock().unwrap_or_else(|p| p.into_inner());
                eprintln!(
                    "{}: search done, {} evaluations{}, {:.0} s",
                    self.label,
                    l.position,
                    with(&l.message),
                    l.started.elapsed().as_secs_f64()
                );
            }
        }
    }
}

fn with(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(", {message}")
    }
}
