//! The tuner's side of isolated evaluation: a worker process per kernel and workload, a time
//! limit per candidate, and a fresh worker after any candidate that hangs or crashes it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_search::{Config, Evaluation, FailureKind};

use super::case::Case;
use super::diagnostics::{collect, Warnings};
use super::worker::{Request, Response};
use super::Rejection;
use super::{
    params_of, ErrorStats, Judge, Limits, Measurement, Phase, Untrusted, Validity, Verdict,
};

/// The first argument that makes the current executable a worker (`cargo kfoundry __worker`).
pub const WORKER_COMMAND: &str = "__worker";

/// How long each phase of a request may take.
#[derive(Debug, Clone, Copy)]
pub struct TimeLimits {
    /// The reference: the worker's setup (building it and checking it), and checking it again
    /// at other sizes (`--reference-timeout`).
    pub reference: Duration,
    /// Building one candidate (`--build-timeout`); not charged to its run time.
    pub build: Duration,
    /// After its build, a candidate may take this many times the reference's evaluation...
    pub factor: f64,
    /// ...but never less than this (`--candidate-timeout`).
    pub floor: Duration,
}

/// The longest time limit of any phase (30 days, as the command line allows).
pub(crate) const MAX_LIMIT: Duration = Duration::from_secs(30 * 86400);

impl Default for TimeLimits {
    fn default() -> Self {
        TimeLimits {
            reference: Duration::from_secs(300),
            build: Duration::from_secs(120),
            factor: 20.0,
            floor: Duration::from_secs(20),
        }
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
    /// Output errors of the last request that passed verification.
    pub last_errors: Option<ErrorStats>,
    /// The compiler's warnings, from every worker's stderr.
    pub warnings: Arc<Mutex<Warnings>>,
    /// Where the proof cases verified so far spent their time, as the workers timed them.
    pub proof_time: kfoundry_messages::ProofTime,
}

impl Supervised {
    pub fn start(
        spec: &KernelSpec,
        sizes: &Sizes,
        device: usize,
        settings: Measurement,
        time: TimeLimits,
    ) -> Result<Supervised> {
        let setup = Request::Setup {
            spec: Box::new(spec.clone()),
            sizes: sizes.clone(),
            device,
            settings,
        };
        let mut s = Supervised {
            setup,
            worker: None,
            limits: Limits::default(),
            time,
            candidate_limit: None,
            spec: spec.clone(),
            sizes: sizes.clone(),
            build_failures: Vec::new(),
            last_errors: None,
            warnings: Default::default(),
            proof_time: Default::default(),
        };
        s.spawn()?;
        Ok(s)
    }

    /// Starts a worker and sets it up; the reference is built and checked there.
    fn spawn(&mut self) -> Result<()> {
        let exe = std::env::current_exe()
            .context("cannot find the cargo-kfoundry executable to start a worker")?;
        let mut command = Command::new(exe);
        // Its own process group: the terminal's Ctrl-C goes to the tuner only, which stops
        // after the current evaluation instead of seeing its worker killed mid-candidate.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // The worker runs candidates, and on a CPU device a candidate is native code in its
        // process: it gets an environment without secrets (see [`worker_environment`]).
        command
            .env_clear()
            .envs(worker_environment(std::env::vars_os()));
        let mut child = command
            .arg(WORKER_COMMAND)
            .env(super::worker::PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start a worker process")?;
        if let Some(stderr) = child.stderr.take() {
            collect(stderr, self.warnings.clone());
        }
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("worker without stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("worker without stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin,
            lines,
        };
        match exchange(
            &mut worker,
            &self.setup,
            Limits3::uniform(self.time.reference),
        )? {
            Ok((Response::Ready { limits }, _)) => self.limits = limits,
            Ok((Response::SetupFailed { message }, _)) => bail!("{message}"),
            Ok((other, _)) => bail!("unexpected answer from the worker: {other:?}"),
            Err((Failure::Timeout(d), _)) => {
                bail!("the reference did not build and pass its checks within {:.0} s (--reference-timeout; killed)", d.as_secs_f64())
            }
            Err((failure, _)) => {
                // A reference that crashes on its inputs usually read through an index drawn
                // at random: say what the integer inputs are drawn from.
                bail!(
                    "the worker failed while setting up the reference: {failure}{}",
                    super::index_hint(&self.spec)
                )
            }
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
        let evaluation = self.request(
            Request::Evaluate {
                params: params.clone(),
                source: None,
                sizes: None,
            },
            params,
        );
        if self.candidate_limit.is_none() && *params == self.spec.reference {
            if let Evaluation::Ok { cost, .. } = &evaluation {
                self.calibrate(*cost);
            }
        }
        evaluation
    }

    /// Sets the per-candidate time limit from the reference's evaluation cost (seconds), for
    /// a caller that knows it without evaluating the reference again (a resumed brute force).
    /// The cost may come from a file (a resumed brute force): anything that is not a sane
    /// number of seconds gives the floor, and the limit never exceeds `MAX_LIMIT`.
    pub fn calibrate(&mut self, reference_cost: f64) {
        let secs = reference_cost * self.time.factor;
        let scaled = if secs.is_finite() && secs > 0.0 {
            Duration::try_from_secs_f64(secs).unwrap_or(MAX_LIMIT)
        } else {
            Duration::ZERO
        };
        self.candidate_limit = Some(scaled.max(self.time.floor).min(MAX_LIMIT));
    }

    /// Evaluates a source-level variant (`source`, same signature as the reference) at
    /// `params`, contained like any candidate.
    pub fn evaluate_source(&mut self, params: &Params, source: &str) -> Evaluation {
        self.request(
            Request::Evaluate {
                params: params.clone(),
                source: Some(source.to_string()),
                sizes: None,
            },
            params,
        )
    }

    /// Verifies `params` (of `source` when given) in a case of its proof without timing it,
    /// contained like any evaluation. `Err` when the reference itself cannot be trusted there
    /// (it proves nothing either way).
    pub fn verify(
        &mut self,
        params: &Params,
        case: &Case,
        source: Option<&str>,
    ) -> std::result::Result<Verdict, Untrusted> {
        // The worker seals its bench for the proof ([`super::Bench::seal`]); a worker started
        // after this one (a crash) must not read the program cache either.
        self.seal_setup();
        let request = Request::Verify {
            params: params.clone(),
            case: case.clone(),
            source: source.map(str::to_string),
        };
        let limits = Limits3 {
            before: self.time.reference,
            reference_checked: self.time.build,
            built: self.time.reference,
        };
        match self.exchange(&request, limits) {
            Ok((
                Response::Verified {
                    verdict,
                    build_log,
                    warnings,
                    time,
                },
                _,
            )) => {
                self.proof_time = self.proof_time.plus(time);
                if let Some(log) = build_log {
                    self.build_failures.push((params.clone(), log));
                }
                self.note_warnings(&warnings);
                if let Err(Rejection::Runtime(_)) = &verdict {
                    self.worker = None;
                }
                Ok(verdict)
            }
            Ok((Response::Unverifiable { untrusted }, _)) => Err(untrusted),
            Ok((other, _)) => {
                self.worker = None;
                Err(Untrusted::device(format!(
                    "unexpected answer from the worker: {other:?}"
                )))
            }
            // Before the reference was checked there, a failure is not the candidate's.
            Err((failure, None)) => Err(Untrusted::device(format!(
                "checking the reference there: {failure}"
            ))),
            Err((failure, Some(_))) => Ok(Err(failure.rejection())),
        }
    }

    /// Workers started from now on do not read the program cache.
    fn seal_setup(&mut self) {
        if let Request::Setup { settings, .. } = &mut self.setup {
            if let Some(cache) = &mut settings.program_cache {
                cache.read = false;
            }
            // no build farm either: a replacement worker builds only from source
            settings.build_processes = None;
        }
    }

    /// Seals the worker's bench ([`super::Bench::seal`]) and every later worker's. A worker
    /// that does not answer is replaced (the next one starts sealed).
    pub fn seal(&mut self) {
        self.seal_setup();
        if self.worker.is_some() {
            self.ask_or_replace(&Request::Seal, |r| matches!(r, Response::Sealed));
        }
    }

    /// Sends `request`, which the worker answers at once (within the build limit) with what
    /// `answered` accepts; a worker that does not is replaced.
    fn ask_or_replace(&mut self, request: &Request, answered: fn(&Response) -> bool) {
        match self.exchange(request, Limits3::uniform(self.time.build)) {
            Ok((response, _)) if answered(&response) => {}
            _ => self.worker = None,
        }
    }

    /// Keeps the warnings of the compiler's logs a worker passed on.
    fn note_warnings(&self, logs: &[String]) {
        let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        for log in logs {
            w.add_log(log);
        }
    }

    /// One evaluation request to the worker, contained: a failure of the worker is a failed
    /// evaluation.
    fn request(&mut self, request: Request, params: &Params) -> Evaluation {
        self.last_errors = None;
        let run = self.candidate_limit.unwrap_or(self.time.reference);
        let limits = Limits3 {
            before: self.time.build,
            reference_checked: self.time.build,
            built: run,
        };
        let started = Instant::now();
        match self.exchange(&request, limits) {
            Ok((
                Response::Evaluated {
                    evaluation,
                    build_log,
                    errors,
                    warnings,
                },
                _,
            )) => {
                if let Some(log) = build_log {
                    self.build_failures.push((params.clone(), log));
                }
                self.note_warnings(&warnings);
                self.last_errors = errors;
                self.retire_after(&evaluation);
                evaluation
            }
            Ok((other, _)) => {
                self.worker = None;
                Evaluation::failed(
                    FailureKind::Runtime,
                    format!("unexpected answer from the worker: {other:?}"),
                    started.elapsed().as_secs_f64(),
                )
            }
            Err((failure, phase)) => {
                let reason = match (&failure, phase) {
                    (Failure::Timeout(d), None) => format!("did not build within {:.1} s (--build-timeout; killed)", d.as_secs_f64()),
                    (Failure::Timeout(d), _) => format!(
                        "ran longer than {:.1} s after its build ({}× the reference's evaluation, at least --candidate-timeout; killed)",
                        d.as_secs_f64(),
                        self.time.factor
                    ),
                    _ => failure.to_string(),
                };
                Evaluation::failed(
                    failure.rejection().kind(),
                    reason,
                    started.elapsed().as_secs_f64(),
                )
            }
        }
    }

    /// A candidate whose launch or run failed inside OpenCL may have left the worker's
    /// context unusable (NVIDIA's driver, after an illegal address, fails every later launch
    /// with CL_OUT_OF_RESOURCES): the worker is replaced before the next request, so that
    /// one bad candidate fails alone, not every candidate after it and the reference.
    fn retire_after(&mut self, evaluation: &Evaluation) {
        if let Evaluation::Failed {
            kind: FailureKind::Runtime,
            ..
        } = evaluation
        {
            self.worker = None;
        }
    }

    /// Sends `request` to the worker (starting one if needed) and waits for the answer, each
    /// phase under its limit. A worker that hangs is killed; one that hangs or dies is replaced
    /// before the next request. `Err` carries the failure and the last phase reached.
    fn exchange(
        &mut self,
        request: &Request,
        limits: Limits3,
    ) -> std::result::Result<(Response, Option<Phase>), (Failure, Option<Phase>)> {
        if self.worker.is_none() {
            if let Err(e) = self.spawn() {
                return Err((
                    Failure::Died(format!("cannot restart the worker: {e:#}")),
                    None,
                ));
            }
        }
        let Some(worker) = self.worker.as_mut() else {
            return Err((Failure::Died("no worker".into()), None));
        };
        let outcome = match exchange(worker, request, limits) {
            Ok(answer) => answer,
            Err(e) => Err((Failure::Died(format!("worker I/O: {e:#}")), None)),
        };
        if outcome.is_err() {
            self.worker = None;
        }
        outcome
    }
}

/// The variables a worker keeps of the tuner's environment: what OpenCL drivers, their
/// compilers and caches read (the loader's, PoCL's, NVIDIA's, AMD's, Intel's; the library path,
/// home and temporary directories, locale), never one that looks like a secret (a key, a
/// token, a password: the language model's key among them). Everything else (cloud
/// credentials, tokens of CI systems, a database URL) stays with the tuner.
pub(crate) fn worker_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LANG",
        "TZ",
        "LD_LIBRARY_PATH",
        "RUST_BACKTRACE",
        "RUST_LOG",
    ];
    const PREFIXES: &[&str] = &[
        "LC_",
        "XDG_",
        "OCL_ICD",
        "OPENCL_",
        "POCL_",
        "CUDA_",
        "NVIDIA_",
        "__GL_",
        "GPU_",
        "ROC",
        "HSA_",
        "HIP_",
        "AMD_",
        "INTEL_",
        "NEO",
        "ZE_",
        "SYCL_",
        "ONEAPI_",
        "CL_",
        "KFOUNDRY_TEST_",
    ];
    const SECRET: &[&str] = &[
        "KEY",
        "TOKEN",
        "SECRET",
        "PASS",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "SESSION",
        "PRIVATE",
    ];
    vars.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        let upper = name.to_ascii_uppercase();
        let allowed = NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p));
        allowed && !SECRET.iter().any(|s| upper.contains(s))
    })
    .collect()
}

/// The time limit of each phase of one request.
#[derive(Debug, Clone, Copy)]
struct Limits3 {
    /// Until the first progress line.
    before: Duration,
    /// After the reference was checked (until the build is done).
    reference_checked: Duration,
    /// After the build.
    built: Duration,
}

impl Limits3 {
    /// The same limit throughout.
    fn uniform(d: Duration) -> Limits3 {
        Limits3 {
            before: d,
            reference_checked: d,
            built: d,
        }
    }
}

impl kfoundry_search::Evaluator for Supervised {
    fn evaluate(&mut self, config: &Config) -> Evaluation {
        let params = params_of(&self.spec, config);
        self.evaluate_params(&params)
    }

    /// The worker starts building what comes next. A worker that does not answer is replaced
    /// (its builds are lost; each candidate is then built when it is evaluated).
    fn prepare(&mut self, upcoming: &[Config]) {
        let params = upcoming.iter().map(|c| params_of(&self.spec, c)).collect();
        self.ask_or_replace(&Request::BuildAhead { params }, |r| {
            matches!(r, Response::Building)
        });
    }
}

/// How a worker failed to answer.
#[derive(Debug)]
enum Failure {
    Timeout(Duration),
    Died(String),
}

impl Failure {
    /// The candidate's rejection when it failed this way.
    fn rejection(&self) -> Rejection {
        match self {
            Failure::Timeout(_) => Rejection::Timeout(self.to_string()),
            Failure::Died(_) => Rejection::Runtime(self.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no answer within {:.1} s (killed)", d.as_secs_f64()),
            Failure::Died(how) => write!(f, "the worker process died: {how}"),
        }
    }
}

/// Sends one request and waits for the answer, each phase under its limit: `Err` for broken
/// I/O, `Ok(Err)` when the worker hung (then it is killed) or died, with the last phase
/// it reported.
#[allow(clippy::type_complexity)]
fn exchange(
    worker: &mut Worker,
    request: &Request,
    limits: Limits3,
) -> Result<std::result::Result<(Response, Option<Phase>), (Failure, Option<Phase>)>> {
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    if worker
        .stdin
        .write_all(line.as_bytes())
        .and_then(|_| worker.stdin.flush())
        .is_err()
    {
        return Ok(Err((Failure::Died(exit_status(&mut worker.child)), None)));
    }
    let mut phase = None;
    loop {
        let limit = match phase {
            None => limits.before,
            Some(Phase::ReferenceChecked) => limits.reference_checked,
            Some(Phase::Built) => limits.built,
        };
        match worker.lines.recv_timeout(limit) {
            Ok(answer) => match serde_json::from_str(&answer) {
                Ok(Response::Progress { phase: p }) => phase = Some(p),
                Ok(response) => return Ok(Ok((response, phase))),
                // Nothing but the worker writes to its protocol channel: a line that is not an
                // answer means the worker is broken; it is replaced.
                Err(e) => {
                    let _ = worker.child.kill();
                    let _ = worker.child.wait();
                    let line: String = answer.chars().take(200).collect();
                    return Ok(Err((
                        Failure::Died(format!("it sent an unreadable answer ({e}): {line}")),
                        phase,
                    )));
                }
            },
            Err(RecvTimeoutError::Timeout) => {
                let _ = worker.child.kill();
                let _ = worker.child.wait();
                return Ok(Err((Failure::Timeout(limit), phase)));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Ok(Err((Failure::Died(exit_status(&mut worker.child)), phase)))
            }
        }
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

impl Judge for Supervised {
    fn evaluate(&mut self, params: &Params, source: Option<&str>) -> Evaluation {
        match source {
            Some(s) => self.evaluate_source(params, s),
            None => self.evaluate_params(params),
        }
    }
    fn evaluate_at(&mut self, params: &Params, source: Option<&str>, sizes: &Sizes) -> Evaluation {
        self.request(
            Request::Evaluate {
                params: params.clone(),
                source: source.map(str::to_string),
                sizes: Some(sizes.clone()),
            },
            params,
        )
    }
    fn verify(
        &mut self,
        params: &Params,
        case: &Case,
        source: Option<&str>,
    ) -> Result<Verdict, Untrusted> {
        Supervised::verify(self, params, case, source)
    }
    fn last_errors(&self) -> Option<ErrorStats> {
        self.last_errors
    }
    fn limits(&self) -> &Limits {
        Supervised::limits(self)
    }
    fn seal(&mut self) {
        Supervised::seal(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in worker: a shell script that answers any request after the given pauses.
    fn scripted(script: &str) -> Worker {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout)
                .lines()
                .map_while(std::result::Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Worker {
            child,
            stdin,
            lines,
        }
    }

    const BUILT: &str = r#"{"Progress":{"phase":"Built"}}"#;
    const ANSWER: &str = r#"{"Evaluated":{"evaluation":{"Ok":{"time":0.001,"cost":0.1,"descriptors":[]}},"build_log":null,"errors":null}}"#;

    fn request() -> Request {
        Request::Evaluate {
            params: Params::new(),
            source: None,
            sizes: None,
        }
    }

    /// A supervisor of a trivial kernel with `worker` (none: it would start real ones).
    fn supervised(worker: Option<Worker>) -> Supervised {
        let spec = kfoundry_tooling::annotation::parse(
            r#"code = "__kernel void k(const int n, __global float* y) {}", global = n, buffers(y = n), check(y), workloads(w(n = 4))"#
                .parse()
                .unwrap(),
            &syn::parse_str("struct K;").unwrap(),
            &kfoundry_tooling::annotation::Context { package: "t", manifest_dir: std::path::Path::new(".") },
        )
        .map(|a| a.spec)
        .map_err(|e| e.to_string())
        .unwrap();
        Supervised {
            setup: Request::Setup {
                spec: Box::new(spec.clone()),
                sizes: Sizes::new(),
                device: 0,
                settings: Measurement::default(),
            },
            worker,
            limits: Limits::default(),
            time: TimeLimits::default(),
            candidate_limit: None,
            spec,
            sizes: Sizes::new(),
            build_failures: Vec::new(),
            last_errors: None,
            warnings: Default::default(),
            proof_time: Default::default(),
        }
    }

    /// Once a proof has begun, a worker started later (after a crash) does not read the
    /// program cache either: what follows the proof runs the source's builds.
    #[test]
    fn a_proof_stops_later_workers_reading_the_program_cache() {
        let answer = r#"{"Unverifiable":{"untrusted":{"annotation_fault":false,"message":"x"}}}"#;
        let mut s = supervised(Some(scripted(&format!("read _; echo '{answer}'; sleep 5"))));
        let cache = |s: &Supervised| match &s.setup {
            Request::Setup { settings, .. } => settings.program_cache.clone(),
            _ => unreachable!(),
        };
        if let Request::Setup { settings, .. } = &mut s.setup {
            settings.program_cache = Some(crate::ProgramCacheUse {
                dir: "cache".into(),
                read: true,
            });
        }
        let case = Case::at(Sizes::new());
        assert!(s.verify(&Params::new(), &case, None).is_err());
        assert_eq!(cache(&s).map(|c| c.read), Some(false));
    }

    #[test]
    fn a_worker_whose_candidate_failed_inside_opencl_is_replaced() {
        // A candidate that failed to build or was wrong leaves the worker in use...
        let wrong = r#"{"Evaluated":{"evaluation":{"Failed":{"reason":"y[3] differs","kind":"Wrong","cost":0.1}},"build_log":null,"errors":null}}"#;
        let mut s = supervised(Some(scripted(&format!("read _; echo '{wrong}'; sleep 5"))));
        assert!(matches!(
            s.request(request(), &Params::new()),
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        ));
        assert!(s.worker.is_some());
        // ...one whose launch failed in OpenCL may have poisoned its context (NVIDIA, after an
        // illegal address, fails every later launch): the next request gets a fresh worker.
        let runtime = r#"{"Evaluated":{"evaluation":{"Failed":{"reason":"clEnqueueNDRangeKernel(\"k\"): CL_OUT_OF_RESOURCES (-5)","kind":"Runtime","cost":0.1}},"build_log":null,"errors":null}}"#;
        let mut s = supervised(Some(scripted(&format!(
            "read _; echo '{runtime}'; sleep 5"
        ))));
        assert!(matches!(
            s.request(request(), &Params::new()),
            Evaluation::Failed {
                kind: FailureKind::Runtime,
                ..
            }
        ));
        assert!(s.worker.is_none());
    }

    #[test]
    fn workers_get_no_secrets() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("POCL_DEVICES", "pthread"),
            ("OCL_ICD_VENDORS", "/etc/OpenCL/vendors"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("LC_ALL", "C"),
            ("KFOUNDRY_LLM_API_KEY", "sk-1"),
            ("OPENAI_API_KEY", "sk-2"),
            ("GITHUB_TOKEN", "ghp_3"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
            ("POCL_AUTH_TOKEN", "x"),
            ("MY_KEY", "k"),
        ];
        let kept = worker_environment(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let names: Vec<String> = kept
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "PATH",
                "HOME",
                "POCL_DEVICES",
                "OCL_ICD_VENDORS",
                "CUDA_VISIBLE_DEVICES",
                "LC_ALL"
            ]
        );
    }

    #[test]
    fn calibration_survives_absurd_costs() {
        let mut s = supervised(None);
        for (cost, expected) in [
            (1e300, MAX_LIMIT),
            (f64::NAN, s.time.floor),
            (-1.0, s.time.floor),
            (f64::INFINITY, s.time.floor),
            (2.0, Duration::from_secs(40)),
        ] {
            s.calibrate(cost);
            assert_eq!(s.candidate_limit, Some(expected), "{cost}");
        }
    }

    #[test]
    fn build_time_is_not_charged_to_the_run_time_limit() {
        let limits = Limits3 {
            before: Duration::from_secs(5),
            reference_checked: Duration::from_secs(5),
            built: Duration::from_millis(800),
        };
        // a build of 1.5 s, then a run of 0.1 s: within its limit
        let mut w = scripted(&format!(
            "read _; sleep 1.5; echo '{BUILT}'; sleep 0.1; echo '{ANSWER}'; sleep 5"
        ));
        let answer = exchange(&mut w, &request(), limits).expect("I/O");
        assert!(
            matches!(answer, Ok((Response::Evaluated { .. }, Some(Phase::Built)))),
            "{answer:?}"
        );
        // a quick build, then a run that overruns: killed as a time-out after its build
        let mut w = scripted(&format!(
            "read _; echo '{BUILT}'; sleep 30; echo '{ANSWER}'"
        ));
        let started = Instant::now();
        let answer = exchange(&mut w, &request(), limits).expect("I/O");
        assert!(
            matches!(answer, Err((Failure::Timeout(d), Some(Phase::Built))) if d == limits.built),
            "{answer:?}"
        );
        // given up at the limit, long before the run would have ended
        assert!(started.elapsed() < Duration::from_secs(15));
        // a build that overruns its own limit
        let quick_build = Limits3 {
            before: Duration::from_millis(300),
            ..limits
        };
        let mut w = scripted(&format!("read _; sleep 30; echo '{BUILT}'"));
        let answer = exchange(&mut w, &request(), quick_build).expect("I/O");
        assert!(
            matches!(answer, Err((Failure::Timeout(_), None))),
            "{answer:?}"
        );
        // a worker that dies mid-run
        let mut w = scripted(&format!("read _; echo '{BUILT}'; kill -SEGV $$"));
        let answer = exchange(&mut w, &request(), limits).expect("I/O");
        assert!(
            matches!(answer, Err((Failure::Died(ref how), Some(Phase::Built))) if how.contains("SIGSEGV")),
            "{answer:?}"
        );
    }
}
