//! Builds ahead in processes of their own (issue 29).
//!
//! NVIDIA's OpenCL compiler runs the builds of one process nearly one after another: on the
//! threads of [`Bench::build_ahead`](super::Bench::build_ahead), 15 builds at once finished only
//! 1.2-1.7x as many a second on the H200. Processes that keep their context build in parallel:
//! 15 of them built 7-15x as many a second on an H100, and a program built from the binary one
//! of them made took 23-30% of a build from source (BENCHMARKS.md, 2026-12-07). So a farm
//! member is a worker process (the same executable, [`super::supervisor::WORKER_COMMAND`]) put
//! in builder mode by its first request ([`Request::Builder`]): it makes a context on the same
//! device, builds what it is sent and answers with the program binary, which the bench builds
//! from. Nothing is run in a member; a build that fails there (or a member that is gone) is
//! built from source by the bench, which so gets the compiler's own log.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::worker::{Request, Response, PARENT_ENV};

/// Where a build sent to the farm is ([`Job::state`]).
const QUEUED: u8 = 0;
const BUILDING: u8 = 1;
const DONE: u8 = 2;
/// The bench needed it before a member took it, and built it itself.
const DROPPED: u8 = 3;

/// A build sent to the farm.
struct Job {
    id: String,
    program: String,
    options: String,
    reply: mpsc::Sender<Result<Vec<u8>, String>>,
    state: Arc<AtomicU8>,
}

/// Builder processes for one device, each served by a thread of this process that takes the
/// next build from a queue all of them share.
pub(crate) struct BuildFarm {
    jobs: mpsc::Sender<Job>,
    /// Members not known to be broken (a broken member stops taking builds).
    alive: Arc<AtomicUsize>,
}

/// How long a build in the farm is waited for, from when it was queued: past it, the build
/// counts as abandoned (a member stuck in the driver must not hold up the search, nor keep a
/// slot of the builds ahead).
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A build given to the farm: its binary once a member has built it.
pub(crate) struct Farmed {
    answer: mpsc::Receiver<Result<Vec<u8>, String>>,
    state: Arc<AtomicU8>,
    queued: Instant,
}

impl Farmed {
    /// Whether no member has answered yet, within [`PATIENCE`].
    pub fn is_running(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire), QUEUED | BUILDING)
            && self.queued.elapsed() < PATIENCE
    }

    /// The binary, or why there is none: the member's build failed, the member is gone, no
    /// answer came within [`PATIENCE`] of its queueing, or no member had taken it yet (the
    /// farm is still starting, or busy): then it is dropped from the queue, since building it
    /// here costs less than waiting for a whole build there.
    pub fn wait(self) -> Result<Vec<u8>, String> {
        if self
            .state
            .compare_exchange(QUEUED, DROPPED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Err("no builder had taken it yet".into());
        }
        match (self.answer).recv_timeout(PATIENCE.saturating_sub(self.queued.elapsed())) {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "no binary from the build farm within {} s",
                PATIENCE.as_secs_f64()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err("the build farm is gone".into()),
        }
    }
}

/// A build nobody waits for any more (the bench dropped it: sealed, or too many finished ahead)
/// is not built if no member has taken it yet.
impl Drop for Farmed {
    fn drop(&mut self) {
        let _ = self
            .state
            .compare_exchange(QUEUED, DROPPED, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl BuildFarm {
    /// Starts `size` builder processes on device number `device` (of `list_devices()`), which
    /// must have the build identity `identity` there; each makes its context while the bench
    /// goes on.
    pub fn start(device: usize, identity: &str, size: usize) -> BuildFarm {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let alive = Arc::new(AtomicUsize::new(size));
        for _ in 0..size {
            let (queue, alive, identity) = (queue.clone(), alive.clone(), identity.to_string());
            std::thread::spawn(move || serve_member(device, &identity, &queue, &alive));
        }
        BuildFarm { jobs, alive }
    }

    /// How many members are not known to be broken: the builds ahead the farm may take at
    /// once (none: the bench builds ahead on threads again).
    pub fn size(&self) -> usize {
        self.alive.load(Ordering::Acquire)
    }

    /// Queues a build of `program` with `options` (kernel `id`, for the compiler's messages).
    pub fn submit(&self, id: &str, program: &str, options: &str) -> Farmed {
        let (reply, answer) = mpsc::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let job = Job {
            id: id.to_string(),
            program: program.to_string(),
            options: options.to_string(),
            reply,
            state: state.clone(),
        };
        if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
            finish(job, Err("the build farm is gone".into()));
        }
        Farmed {
            answer,
            state,
            queued: Instant::now(),
        }
    }
}

/// Answers `job` and marks it done (after the answer, so that a build no longer running can
/// always be received at once).
fn finish(job: Job, answer: Result<Vec<u8>, String>) {
    let _ = job.reply.send(answer);
    job.state.store(DONE, Ordering::Release);
}

/// One member: its builder process, and the builds it takes from `queue` (once its context is
/// made) until the farm is dropped. A member whose process could not start, or broke, takes no
/// more builds; the last one to go answers every build still queued with its failure (the
/// bench then builds from source).
fn serve_member(
    device: usize,
    identity: &str,
    queue: &Mutex<mpsc::Receiver<Job>>,
    alive: &AtomicUsize,
) {
    let why = match Builder::start(device, identity) {
        Ok(mut builder) => match serve_builds(&mut builder, queue) {
            Some(why) => why,
            None => return, // the farm was dropped
        },
        Err(why) => why,
    };
    if alive.fetch_sub(1, Ordering::AcqRel) == 1 {
        if let Ok(queue) = queue.lock() {
            while let Ok(job) = queue.try_recv() {
                finish(job, Err(why.clone()));
            }
        }
    }
}

/// Builds what `queue` gives on `builder`, skipping builds the bench has dropped, until the farm
/// is dropped (`None`) or the builder breaks (why, after answering the build it held with it).
fn serve_builds(builder: &mut Builder, queue: &Mutex<mpsc::Receiver<Job>>) -> Option<String> {
    loop {
        let job = {
            let queue = queue.lock().ok()?;
            queue.recv().ok()?
        };
        if (job.state)
            .compare_exchange(QUEUED, BUILDING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue; // dropped: the bench built it, or no longer wants it
        }
        match builder.build(&job.id, &job.program, &job.options) {
            Ok(binary) => finish(job, Ok(binary)),
            Err(Failure::Build(log)) => finish(job, Err(log)),
            Err(Failure::Broken(why)) => {
                finish(job, Err(why.clone()));
                return Some(why);
            }
        }
    }
}

/// Why a member gave no binary.
enum Failure {
    /// The build failed (the log): the member still serves.
    Build(String),
    /// The process is gone or answered out of turn: the member serves no more.
    Broken(String),
}

/// A builder process and its pipes.
struct Builder {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Builder {
    /// Starts a worker process and puts it in builder mode on device `device` (which must have
    /// the build identity `identity` there).
    fn start(device: usize, identity: &str) -> Result<Builder, String> {
        let exe = std::env::current_exe().map_err(|e| format!("no executable to start: {e}"))?;
        let mut command = Command::new(exe);
        // This worker's environment (the tuner gave it one without secrets); the builder dies
        // with this process ([`super::worker`]).
        command
            .arg(super::supervisor::WORKER_COMMAND)
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start a builder process: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err("a builder process without pipes".into());
        };
        let mut builder = Builder {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        match builder.exchange(&Request::Builder {
            device,
            identity: identity.to_string(),
        }) {
            Ok(Response::BuilderReady) => Ok(builder),
            Ok(Response::SetupFailed { message }) => Err(message),
            Ok(other) => Err(format!("unexpected answer from a builder: {other:?}")),
            Err(e) => Err(e),
        }
    }

    /// Builds `program` with `options` in the builder process: its binary.
    fn build(&mut self, id: &str, program: &str, options: &str) -> Result<Vec<u8>, Failure> {
        let request = Request::Build {
            id: id.to_string(),
            program: program.to_string(),
            options: options.to_string(),
        };
        match self.exchange(&request).map_err(Failure::Broken)? {
            Response::Built {
                binary: Some(binary),
                ..
            } => Ok(binary),
            Response::Built { log, .. } => Err(Failure::Build(log.unwrap_or_default())),
            other => Err(Failure::Broken(format!(
                "unexpected answer from a builder: {other:?}"
            ))),
        }
    }

    /// Sends `request` and reads the answer (progress lines skipped).
    fn exchange(&mut self, request: &Request) -> Result<Response, String> {
        let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("a builder process is gone: {e}"))?;
        loop {
            let mut answer = String::new();
            match self.stdout.read_line(&mut answer) {
                Ok(0) | Err(_) => return Err("a builder process is gone".into()),
                Ok(_) => {}
            }
            match serde_json::from_str::<Response>(&answer) {
                Ok(Response::Progress { .. }) => continue,
                Ok(response) => return Ok(response),
                Err(e) => return Err(format!("a builder's answer does not parse: {e}")),
            }
        }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
