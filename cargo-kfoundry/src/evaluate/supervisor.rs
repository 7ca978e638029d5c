//! The tuner's side of isolated evaluation: a worker process per kernel and workload, a time
//! limit per candidate, and a fresh worker after any candidate that hangs or crashes it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_search::{Config, Evaluation, FailureKind};

use super::worker::{Request, Response};
use super::{params_of, ErrorStats, Limits, Settings, Validity};

/// How long a candidate may take, from the reference's own evaluation time.
#[derive(Debug, Clone, Copy)]
pub struct TimeLimits {
    /// For the worker's setup (building and checking the reference).
    pub setup: Duration,
    /// A candidate may take this many times the reference's evaluation...
    pub factor: f64,
    /// ...but never less than this (a build alone can take a second or more).
    pub floor: Duration,
}

impl Default for TimeLimits {
    fn default() -> Self {
        TimeLimits { setup: Duration::from_secs(300), factor: 20.0, floor: Duration::from_secs(20) }
    }
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Evaluates candidates in a supervised worker process.
pub struct Supervised {
    setup: Request,
    worker: Option<Worker>,
    limits: Limits,
    time: TimeLimits,
    /// Per-candidate limit, set once the reference has been evaluated.
    candidate_limit: Option<Duration>,
    spec: KernelSpec,
    sizes: Sizes,
    /// Build logs of failed candidates: (parameters, log).
    pub build_failures: Vec<(Params, String)>,
    /// Workers started so far (1 + restarts).
    pub workers_started: usize,
    /// Output errors of the last request that passed verification.
    pub last_errors: Option<ErrorStats>,
}

impl Supervised {
    pub fn start(spec: &KernelSpec, sizes: &Sizes, device: usize, settings: Settings, time: TimeLimits) -> Result<Supervised> {
        let setup = Request::Setup { spec: Box::new(spec.clone()), sizes: sizes.clone(), device, settings };
        let mut s = Supervised {
            setup,
            worker: None,
            limits: Limits { max_work_group_size: 0, max_work_item_sizes: vec![], local_mem_bytes: 0, preferred_multiple: None, sub_groups: false },
            time,
            candidate_limit: None,
            spec: spec.clone(),
            sizes: sizes.clone(),
            build_failures: Vec::new(),
            workers_started: 0,
            last_errors: None,
        };
        s.spawn()?;
        Ok(s)
    }

    /// Starts a worker and sets it up; the reference is built and checked there.
    fn spawn(&mut self) -> Result<()> {
        let exe = std::env::current_exe().context("cannot find the cargo-kfoundry executable to start a worker")?;
        let mut command = Command::new(exe);
        // Its own process group: the terminal's Ctrl-C goes to the tuner only, which stops
        // after the current evaluation instead of seeing its worker killed mid-candidate.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .arg("__worker")
            .env(super::worker::PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start a worker process")?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("worker without stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("worker without stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.workers_started += 1;
        let mut worker = Worker { child, stdin, lines };
        match exchange(&mut worker, &self.setup, self.time.setup)? {
            Ok(Response::Ready { limits }) => self.limits = limits,
            Ok(Response::SetupFailed { message }) => bail!("{message}"),
            Ok(other) => bail!("unexpected answer from the worker: {other:?}"),
            Err(failure) => bail!("the worker failed while setting up the reference: {failure}"),
        }
        self.worker = Some(worker);
        Ok(())
    }

    /// The device's limits and features as the worker found them.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The constraints and device limits, for the search engine's validity predicate.
    pub fn validity(&self) -> Validity {
        Validity::new(self.spec.clone(), self.sizes.clone(), self.limits.clone())
    }

    /// Evaluates `params`, containing hangs and crashes.
    pub fn evaluate_params(&mut self, params: &Params) -> Evaluation {
        let evaluation = self
            .request(Request::Evaluate { params: params.clone(), source: None }, params)
            .unwrap_or_else(|message| Evaluation::failed(FailureKind::Runtime, message, 0.0));
        if self.candidate_limit.is_none() && *params == self.spec.reference {
            if let Evaluation::Ok { cost, .. } = &evaluation {
                self.calibrate(*cost);
            }
        }
        evaluation
    }

    /// Sets the per-candidate time limit from the reference's evaluation cost (seconds), for
    /// a caller that knows it without evaluating the reference again (a resumed brute force).
    pub fn calibrate(&mut self, reference_cost: f64) {
        let cost = if reference_cost.is_finite() && reference_cost > 0.0 { reference_cost } else { 0.0 };
        self.candidate_limit = Some(Duration::from_secs_f64(cost * self.time.factor).max(self.time.floor));
    }

    /// Evaluates a source-level variant (`source`, same signature as the reference) at
    /// `params`, contained like any candidate.
    pub fn evaluate_source(&mut self, params: &Params, source: &str) -> Evaluation {
        self.request(Request::Evaluate { params: params.clone(), source: Some(source.to_string()) }, params)
            .unwrap_or_else(|message| Evaluation::failed(FailureKind::Runtime, message, 0.0))
    }

    /// Checks `params` at other `sizes` (adversarial probing), contained like any evaluation.
    /// The limit is the setup limit: the worker sets up a bench at those sizes first. `Err`
    /// when the reference itself cannot be set up at those sizes (not the candidate's fault).
    pub fn probe(&mut self, params: &Params, sizes: &Sizes, source: Option<&str>) -> std::result::Result<Evaluation, String> {
        self.request(Request::Probe { params: params.clone(), sizes: sizes.clone(), source: source.map(str::to_string) }, params)
    }

    /// One request to the worker; `Err` only when the worker could not set up a bench.
    fn request(&mut self, request: Request, params: &Params) -> std::result::Result<Evaluation, String> {
        let started = Instant::now();
        self.last_errors = None;
        if self.worker.is_none() {
            if let Err(e) = self.spawn() {
                return Ok(Evaluation::failed(FailureKind::Runtime, format!("cannot restart the worker: {e:#}"), 0.0));
            }
        }
        let limit = match request {
            Request::Evaluate { .. } => self.candidate_limit.unwrap_or(self.time.setup),
            _ => self.time.setup,
        };
        let Some(worker) = self.worker.as_mut() else {
            return Ok(Evaluation::failed(FailureKind::Runtime, "no worker", 0.0));
        };
        let outcome = exchange(worker, &request, limit);
        let cost = started.elapsed().as_secs_f64();
        Ok(match outcome {
            Ok(Ok(Response::Evaluated { evaluation, build_log, errors })) => {
                if let Some(log) = build_log {
                    self.build_failures.push((params.clone(), log));
                }
                self.last_errors = errors;
                evaluation
            }
            Ok(Ok(Response::SetupFailed { message })) => return Err(message),
            Ok(Ok(other)) => {
                self.worker = None;
                Evaluation::failed(FailureKind::Runtime, format!("unexpected answer from the worker: {other:?}"), cost)
            }
            Ok(Err(failure)) => {
                // The worker hung or died: it is replaced before the next candidate.
                self.worker = None;
                let kind = if matches!(failure, Failure::Timeout(_)) { FailureKind::Timeout } else { FailureKind::Runtime };
                Evaluation::failed(kind, failure.to_string(), cost)
            }
            Err(e) => {
                self.worker = None;
                Evaluation::failed(FailureKind::Runtime, format!("worker I/O: {e:#}"), cost)
            }
        })
    }
}

impl kfoundry_search::Evaluator for Supervised {
    fn evaluate(&mut self, config: &Config) -> Evaluation {
        let params = params_of(&self.spec, config);
        self.evaluate_params(&params)
    }
}

/// How a worker failed to answer.
#[derive(Debug)]
enum Failure {
    Timeout(Duration),
    Died(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no answer within {:.1} s (killed)", d.as_secs_f64()),
            Failure::Died(how) => write!(f, "the worker process died: {how}"),
        }
    }
}

/// Sends one request and waits for the answer: `Err` for broken I/O, `Ok(Err)` when the worker
/// hung (then it is killed) or died.
fn exchange(worker: &mut Worker, request: &Request, limit: Duration) -> Result<std::result::Result<Response, Failure>> {
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    if worker.stdin.write_all(line.as_bytes()).and_then(|_| worker.stdin.flush()).is_err() {
        return Ok(Err(Failure::Died(exit_status(&mut worker.child))));
    }
    match worker.lines.recv_timeout(limit) {
        Ok(answer) => Ok(Ok(serde_json::from_str(&answer).with_context(|| format!("bad answer from the worker: {answer}"))?)),
        Err(RecvTimeoutError::Timeout) => {
            let _ = worker.child.kill();
            let _ = worker.child.wait();
            Ok(Err(Failure::Timeout(limit)))
        }
        Err(RecvTimeoutError::Disconnected) => Ok(Err(Failure::Died(exit_status(&mut worker.child)))),
    }
}

fn exit_status(child: &mut Child) -> String {
    match child.wait() {
        Ok(status) => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = status.signal() {
                    return format!("killed by signal {sig}{}", signal_name(sig));
                }
            }
            status.to_string()
        }
        Err(e) => e.to_string(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        _ => "",
    }
}
