//! What a finished search leaves for `report --html`: each evaluation's time or failure, when
//! it ended (seconds into the search) and its archive cell, one JSON file per kernel,
//! workload and device under `<state dir>/history/`, at most `MAX_POINTS` evaluations (the
//! checkpoints, which hold more, are removed once a tune completes).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_search::{Evaluation, Record};
use serde::{Deserialize, Serialize};

/// Evaluations kept per search.
pub(crate) const MAX_POINTS: usize = 10_000;

/// One evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds into the search when it ended.
    pub elapsed: f64,
    /// Its time in seconds, when it succeeded.
    pub time: Option<f64>,
    /// Its failure's kind, when it failed (`Build`, `Wrong`, ...).
    pub failure: Option<String>,
    /// The first line of why it failed (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its archive cell.
    pub cell: Vec<u16>,
}

/// One search's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub kernel: String,
    pub workload: String,
    pub device: String,
    /// The archive's dimensions, in the order of a cell's coordinates.
    pub descriptors: Vec<String>,
    pub points: Vec<Point>,
    /// Why the reference (or an earlier result) ships rather than a finalist, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl History {
    pub fn of(
        kernel: &str,
        workload: &str,
        device: &str,
        descriptors: Vec<String>,
        records: &[Record],
        note: Option<String>,
    ) -> History {
        let points = records
            .iter()
            .take(MAX_POINTS)
            .map(|r| {
                let (failure, reason) = match &r.outcome {
                    Evaluation::Failed { kind, reason, .. } => (
                        Some(format!("{kind:?}")),
                        Some(
                            reason
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .chars()
                                .take(200)
                                .collect(),
                        ),
                    ),
                    _ => (None, None),
                };
                Point {
                    elapsed: r.elapsed,
                    time: r.outcome.time(),
                    failure,
                    reason,
                    cell: r.cell.clone(),
                }
            })
            .collect();
        History {
            kernel: kernel.into(),
            workload: workload.into(),
            device: device.into(),
            descriptors,
            points,
            note,
        }
    }

    /// Where the history of this search goes under `state_dir`.
    pub fn path(state_dir: &Path, kernel: &str, workload: &str, device: &str) -> PathBuf {
        state_dir
            .join("history")
            .join(kfoundry_tooling::files::state_file_name(
                &[kernel, workload, device],
                "json",
            ))
    }

    /// Writes it (replacing the last search's of the same kernel, workload and device).
    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let path = History::path(state_dir, &self.kernel, &self.workload, &self.device);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        kfoundry_tooling::files::write_atomic(&path, serde_json::to_string(self)?.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Every history under `state_dir` that can be read (others are skipped).
    pub fn load_all(state_dir: &Path) -> Vec<History> {
        let Ok(entries) = std::fs::read_dir(state_dir.join("history")) else {
            return Vec::new();
        };
        let mut out: Vec<History> = entries
            .flatten()
            .filter_map(|e| {
                serde_json::from_str(
                    &kfoundry_tooling::files::read_text_bounded(&e.path(), 256 << 20, "history")
                        .ok()?,
                )
                .ok()
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.kernel, &a.workload, &a.device).cmp(&(&b.kernel, &b.workload, &b.device))
        });
        out
    }
}
