//! The worker process: hosts one [`Bench`] and evaluates the candidates the tuner sends it, one
//! JSON line in, one JSON line out. A candidate that hangs, crashes or corrupts the driver takes
//! only this process down; the supervisor records the failure and starts a fresh worker.

use std::io::{BufRead, Write};

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_search::Evaluation;
use serde::{Deserialize, Serialize};

use super::{Bench, Limits, Settings};

/// What the tuner sends.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// First message: what to evaluate, and where (index in `list_devices()` order).
    Setup { spec: Box<KernelSpec>, sizes: Sizes, device: usize, settings: Settings },
    Evaluate { params: Params },
}

/// What the worker answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    Ready { limits: Limits },
    SetupFailed { message: String },
    /// The evaluation, with the build log when the build failed.
    Evaluated { evaluation: Evaluation, build_log: Option<String> },
}

/// Runs the worker protocol on stdin/stdout until stdin closes.
pub fn serve() -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut bench: Option<Bench> = None;
    for line in stdin.lock().lines() {
        let line = line?;
        let response = match serde_json::from_str::<Request>(&line)? {
            Request::Setup { spec, sizes, device, settings } => match setup(&spec, &sizes, device, settings) {
                Ok(b) => {
                    let limits = b.limits().clone();
                    bench = Some(b);
                    Response::Ready { limits }
                }
                Err(message) => Response::SetupFailed { message },
            },
            Request::Evaluate { params } => match bench.as_mut() {
                Some(b) => {
                    let failures_before = b.build_failures.len();
                    let evaluation = b.evaluate_params(&params);
                    let build_log = b.build_failures.get(failures_before).map(|(_, log)| log.clone());
                    Response::Evaluated { evaluation, build_log }
                }
                None => Response::SetupFailed { message: "evaluate before setup".into() },
            },
        };
        serde_json::to_writer(&mut out, &response)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}

fn setup(spec: &KernelSpec, sizes: &Sizes, device: usize, settings: Settings) -> Result<Bench, String> {
    let devices = kfoundry_rt::list_devices().map_err(|e| e.to_string())?;
    let (platform, dev) = devices.get(device).copied().ok_or_else(|| format!("no device #{device}"))?;
    Bench::new(spec, sizes, platform, dev, settings).map_err(|e| e.to_string())
}
