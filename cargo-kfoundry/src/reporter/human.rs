//! A tune's events for people: a progress bar (or progress lines) per search, notes and
//! warnings on stderr, and at the end the summary table on stdout with what to read next.

use std::sync::Mutex;

use kfoundry_tune::events::TuneEvent;
use kfoundry_tune::messages::TuneResult;
use kfoundry_tune::text::{describe, fmt_ns, fmt_params, headline, printable, Table};

use super::progress::ProgressView;

/// What is shown.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// The progress of each search and the informational lines (not with -q or JSON).
    pub progress: bool,
    /// Notes: resuming, skipped workloads, rejections, waiting for the lock (not with -q).
    pub notes: bool,
    /// A line per evaluation and per language-model turn (-v).
    pub evaluations: bool,
    /// The summary table and the lines after it (not with JSON, whose `finished` says it).
    pub results: bool,
}

/// The human reporter: what it shows, and the progress of the search that is running.
pub struct Human {
    shown: Shown,
    progress: Mutex<Option<ProgressView>>,
}

impl Human {
    pub fn new(shown: Shown) -> Human {
        Human {
            shown,
            progress: Mutex::new(None),
        }
    }

    /// The running search's progress (none between searches).
    fn view(&self) -> std::sync::MutexGuard<'_, Option<ProgressView>> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the running search's progress, if any.
    fn with_progress(&self, f: impl FnOnce(&ProgressView)) {
        if let Some(view) = self.view().as_ref() {
            f(view);
        }
    }

    /// A line of its own on stderr: above the progress bar while a search runs.
    fn line(&self, line: String) {
        match self.view().as_ref() {
            Some(view) => view.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn report(&self, event: &TuneEvent<'_>) {
        let shown = self.shown;
        match event {
            TuneEvent::Planned { kernels, device } if shown.progress => eprintln!(
                "tuning {kernels} kernel(s) on {} ({})",
                device.info.name, device.key
            ),
            TuneEvent::Partitioned {
                partition,
                jobs,
                of,
                cost_share,
            } if shown.progress => {
                let parts: Vec<String> = partition.iter().map(ToString::to_string).collect();
                eprintln!(
                    "partition {}: {jobs} of {of} job(s), {:.0}% of the estimated cost",
                    parts.join(" then "),
                    100.0 * cost_share
                );
            }
            TuneEvent::LanguageModel { config } if shown.notes => eprintln!(
                "language model: {} at {} (one mutation per {} evaluations, at most {} requests{})",
                printable(&config.model),
                printable(&config.base_url),
                config.every,
                config.max_requests,
                if config.api_key.is_some() {
                    format!(", the key from {}", config.api_key_env)
                } else if config.key_withheld {
                    ", no key: the endpoint comes from the project's table, and your key goes only where you say".into()
                } else {
                    ", no key".into()
                }
            ),
            TuneEvent::Note { text } if shown.notes => self.line(text.clone()),
            TuneEvent::Warning { text } => self.line(format!("warning: {text}")),
            TuneEvent::SearchStarted {
                search,
                budget,
                done,
            } => {
                let view = ProgressView::new(search.to_string(), *budget, !shown.progress);
                view.set_position(*done);
                *self.view() = Some(view);
            }
            TuneEvent::Evaluated {
                params,
                record,
                done,
                best,
                failures,
                ..
            } => {
                self.with_progress(|view| {
                    if let Some(t) = best {
                        view.set_message(format!(
                            "search best {}, failures {failures}",
                            fmt_ns(t * 1e9)
                        ));
                    }
                    view.set_position(*done);
                });
                if shown.evaluations {
                    self.line(format!(
                        "  {:?} {} → {}",
                        record.operator,
                        fmt_params(params),
                        describe(&record.outcome)
                    ));
                }
            }
            TuneEvent::Asking { .. } => {
                self.with_progress(|view| view.set_message("asking the language model".into()))
            }
            TuneEvent::LanguageModelTurn { turn, done, .. } => {
                self.with_progress(|view| view.set_position(*done));
                if shown.evaluations || (shown.notes && turn.outcome == "accepted") {
                    self.line(format!(
                        "  language model: {} {}",
                        turn.outcome,
                        headline(&turn.detail)
                    ));
                }
            }
            TuneEvent::RooflineReached { search, target } if shown.notes => self.line(format!(
                "{search}: within {:.0}% of the roofline; stopping",
                target * 100.0
            )),
            TuneEvent::SearchFinished { .. } => {
                let view = self
                    .progress
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                if let Some(view) = view {
                    view.finish();
                }
            }
            TuneEvent::Rejected { search, unshipped } if shown.notes => eprintln!(
                "{search}: {} rejected: {}",
                fmt_params(&unshipped.params),
                unshipped.reason
            ),
            TuneEvent::Tuned { result } if shown.evaluations => {
                if let Some(line) = phases_line(result) {
                    self.line(line);
                }
            }
            TuneEvent::Failed { failure } => self.line(format!("error: {failure}")),
            TuneEvent::Portfolio { spec, portfolio: p } if shown.notes => {
                eprintln!("portfolio {}", p.describe(spec))
            }
            TuneEvent::Finished {
                lockfile,
                checkpoints,
                results,
                failed,
                interrupted,
            } => {
                if shown.results {
                    print!("{}", summary(results));
                    for r in *results {
                        after_the_table(r);
                    }
                    if shown.progress && !results.is_empty() {
                        eprintln!("wrote {}", lockfile.display());
                    }
                }
                if !failed.is_empty() {
                    eprintln!(
                        "error: {} of {} tune(s) failed (the others are recorded):",
                        failed.len(),
                        failed.len() + results.len()
                    );
                    for f in *failed {
                        eprintln!("  {f}");
                    }
                }
                if *interrupted {
                    eprintln!(
                        "interrupted: what was found so far is in {}; `cargo kfoundry tune --resume` (same arguments) continues from {}",
                        lockfile.display(),
                        checkpoints.display()
                    );
                }
            }
            _ => {}
        }
    }
}

/// What a result says below the table: why the reference ships, the compiler's warnings, where
/// the failed candidates are logged.
fn after_the_table(r: &TuneResult) {
    if let Some(note) = &r.note {
        eprintln!("{} @ {}: {note}", r.kernel, r.workload);
    }
    if !r.build_warnings.is_empty() {
        let builds: usize = r.build_warnings.iter().map(|(_, n)| n).sum();
        eprintln!(
            "{} @ {}: the OpenCL compiler warned {builds} time(s) while building candidates; each warning once:",
            r.kernel, r.workload
        );
        for (text, n) in &r.build_warnings {
            eprintln!("  ({n}x) {text}");
        }
    }
    if let Some(log) = &r.failure_log {
        eprintln!(
            "{} @ {}: {} failed candidate(s), see {}",
            r.kernel,
            r.workload,
            r.failures,
            log.display()
        );
    }
}

/// The table printed at the end of a tune.
pub fn summary(results: &[TuneResult]) -> String {
    let mut t = Table::new(&[
        "kernel",
        "workload",
        "reference",
        "best",
        "speedup",
        "evals",
        "failures",
        "evals/s",
        "roofline",
        "rel err",
        "parameters",
    ]);
    for o in results {
        t.row(vec![
            o.kernel.clone(),
            o.workload.clone(),
            fmt_ns(o.reference_ns as f64),
            fmt_ns(o.best_ns as f64),
            format!("{:.2}x", o.speedup),
            o.evaluations.to_string(),
            o.failures.to_string(),
            format!("{:.1}", o.evaluations as f64 / o.seconds.max(1e-9)),
            o.roofline
                .map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0)),
            o.rel_error_norm
                .map_or("-".to_string(), |e| format!("{e:.1e}")),
            if o.reference_kept {
                format!(
                    "reference kept ({}): {}",
                    if o.note.is_some() {
                        "see below"
                    } else {
                        "it is the fastest"
                    },
                    fmt_params(&o.params)
                )
            } else if o.kept_existing {
                format!("earlier result kept: {}", fmt_params(&o.params))
            } else {
                fmt_params(&o.params)
            },
        ]);
    }
    t.render()
}

/// With `-v`: where a tune's wall time went (`phases` of its result), the proof's largest parts
/// first.
fn phases_line(r: &TuneResult) -> Option<String> {
    let p = r.phases?;
    let q = p.proof_parts;
    let mut parts = [
        ("reference checks", q.check_reference),
        ("builds", q.build),
        ("draws", q.draw),
        ("uploads", q.upload),
        ("reference runs", q.reference),
        ("candidate runs", q.candidate),
        ("comparisons", q.compare),
    ];
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = parts
        .iter()
        .take(3)
        .map(|(name, s)| format!("{name} {s:.2}"))
        .collect();
    Some(format!(
        "{} @ {}: {:.2} s: worker start {:.2}, search {:.2}, proof {:.2} ({}), re-measure {:.2}",
        r.kernel,
        r.workload,
        r.seconds,
        p.start,
        p.search,
        p.proof,
        parts.join(", "),
        p.remeasure
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> TuneResult {
        serde_json::from_value(serde_json::json!({
            "kernel": "saxpy", "workload": "large", "sizes": "n=1048576", "device": "d",
            "reference_ns": 2000, "best_ns": 1000, "speedup": 2.0,
            "params": {"VEC": 4, "WG": 64}, "evaluations": 10, "failures": 0, "seconds": 1.0,
            "probed_sizes": [], "probe_rejections": [], "interrupted": false
        }))
        .unwrap()
    }

    /// `-v` says where a tune's time went, the proof's largest parts first; a result without
    /// phases (an earlier version's) says nothing.
    #[test]
    fn the_phases_line_puts_the_proofs_largest_parts_first() {
        assert_eq!(phases_line(&result()), None);
        let mut r = result();
        r.phases = Some(kfoundry_tune::messages::Phases {
            start: 0.2,
            search: 3.0,
            proof: 1.5,
            proof_parts: kfoundry_tune::messages::ProofTime {
                draw: 0.6,
                compare: 0.4,
                candidate: 0.3,
                reference: 0.1,
                ..Default::default()
            },
            remeasure: 0.25,
        });
        assert_eq!(
            phases_line(&r).unwrap(),
            "saxpy @ large: 1.00 s: worker start 0.20, search 3.00, proof 1.50 (draws 0.60, comparisons 0.40, candidate runs 0.30), re-measure 0.25"
        );
    }

    /// The summary table says when the reference ships and where to read why.
    #[test]
    fn the_table_marks_a_kept_reference() {
        let plain = summary(&[result()]);
        assert!(plain.contains("VEC=4 WG=64"), "{plain}");
        assert!(!plain.contains("reference kept"), "{plain}");
        let kept = TuneResult {
            reference_kept: true,
            note: Some("no finalist was faster than the reference on re-measure".into()),
            ..result()
        };
        let table = summary(std::slice::from_ref(&kept));
        assert!(
            table.contains("reference kept (see below): VEC=4 WG=64"),
            "{table}"
        );
        let fastest = summary(&[TuneResult { note: None, ..kept }]);
        assert!(
            fastest.contains("reference kept (it is the fastest)"),
            "{fastest}"
        );
    }
}
