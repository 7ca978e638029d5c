//! The worker process: hosts one [`Bench`] and evaluates the candidates the tuner sends it, one
//! JSON line in, one JSON line out. A candidate that hangs, crashes or corrupts the driver takes
//! only this process down; the supervisor records the failure and starts a fresh worker.

use std::io::{BufRead, Write};

use kfoundry_rt::model::spec::{KernelSpec, Params, Sizes};
use kfoundry_rt::opencl::session::Session;

use kfoundry_search::Evaluation;
use serde::{Deserialize, Serialize};

use super::case::Case;
use super::{Bench, ErrorStats, Limits, Measurement, Phase, Verdict};

/// What the tuner sends.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// First message: what to evaluate, and where (index in `list_devices()` order).
    Setup {
        spec: Box<KernelSpec>,
        sizes: Sizes,
        device: usize,
        settings: Measurement,
    },
    /// `source`: a source-level variant to build instead of the annotated source; `sizes`:
    /// where to time it, when not at the workload's ([`Bench::evaluate_at`]).
    Evaluate {
        params: Params,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sizes: Option<Sizes>,
    },
    /// Starts building these configurations, which will be evaluated next, in the background
    /// ([`Bench::build_ahead`]); answered at once.
    BuildAhead { params: Vec<Params> },
    /// Verifies `params` in a case of its proof without timing it (what a finalist needs to be
    /// used at those sizes); the reference is checked there first.
    Verify {
        params: Params,
        case: Case,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// From now on every build comes from its source ([`Bench::seal`]); answered at once.
    Seal,
    /// First message of a build farm's member (the bench's `farm` module), instead of `Setup`: this
    /// process only builds, on device `device` (index in `list_devices()` order), which must
    /// have the bench's `identity` ([`Session::build_identity`]: the binaries are loaded there).
    Builder { device: usize, identity: String },
    /// (To a farm member.) Builds `program` with `options`; answered with its binary.
    Build {
        id: String,
        program: String,
        options: String,
    },
}

/// What the worker answers: `Progress` lines as a request advances, then the answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    Ready {
        limits: Limits,
    },
    SetupFailed {
        message: String,
    },
    /// How far the request got (see [`Phase`]); the answer follows.
    Progress {
        phase: Phase,
    },
    /// The evaluation, with the build log when the build failed and the output errors when
    /// it passed.
    Evaluated {
        evaluation: Evaluation,
        build_log: Option<String>,
        errors: Option<ErrorStats>,
        /// The compiler's logs of what built with warnings since the last answer.
        #[serde(default)]
        warnings: Vec<String>,
    },
    /// The verdict at the requested sizes, and where the case spent its time.
    Verified {
        verdict: Verdict,
        build_log: Option<String>,
        #[serde(default)]
        warnings: Vec<String>,
        #[serde(default)]
        time: kfoundry_messages::ProofTime,
    },
    /// The reference cannot be trusted at the requested sizes: they prove nothing.
    Unverifiable {
        untrusted: super::Untrusted,
    },
    /// The builds asked for are under way.
    Building,
    /// The bench is sealed.
    Sealed,
    /// (A farm member.) The context is made: builds may come.
    BuilderReady,
    /// (A farm member.) The program binary, or the compiler's log of a failed build.
    Built {
        binary: Option<Vec<u8>>,
        log: Option<String>,
    },
}

/// The environment variable through which the supervisor passes its process id.
pub(crate) const PARENT_ENV: &str = "KFOUNDRY_TUNER_PID";

/// A worker never outlives its tuner: when the tuner dies (even by SIGKILL), the kernel sends
/// the worker SIGKILL too, so that a candidate stuck in the driver does not keep the device
/// (or the tuner's output pipes) busy.
#[cfg(target_os = "linux")]
fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG, signal) passes no memory; getppid cannot fail.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let parent = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    // The tuner may have died before the call above: then this process was re-parented.
    if parent.is_some_and(|p| p != unsafe { libc::getppid() }) {
        std::process::exit(0);
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent() {}

/// The channel answers go out on: a private duplicate of the original standard output, while
/// descriptor 1 is pointed at a pipe of this process's own whose lines go to standard error
/// as `kernel output: ...` ([`KERNEL_OUTPUT`]). Whatever a kernel (`printf`) or the driver
/// prints on standard output can then never be read by the tuner as an answer, nor as a
/// compiler's warning.
#[cfg(unix)]
fn protocol_channel() -> anyhow::Result<std::fs::File> {
    use std::io::BufRead as _;
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl, pipe and dup2 on this process's own descriptors; each new descriptor is
    // owned by one File from here on (the pipe's write end stays open as descriptor 1).
    unsafe {
        // Close-on-exec, so that processes this one starts (the build farm's members) hold
        // neither the answers' channel nor the printed lines' pipe: the tuner sees this worker's
        // end when it ends.
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let mut ends = [0i32; 2];
        if libc::pipe(ends.as_mut_ptr()) < 0
            || libc::fcntl(ends[0], libc::F_SETFD, libc::FD_CLOEXEC) < 0
            || libc::dup2(ends[1], 1) < 0
        {
            return Err(std::io::Error::last_os_error().into());
        }
        libc::close(ends[1]);
        let printed = std::fs::File::from_raw_fd(ends[0]);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(printed).split(b'\n') {
                let Ok(line) = line else { break };
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "{KERNEL_OUTPUT}{}",
                    String::from_utf8_lossy(&line)
                );
            }
        });
        Ok(std::fs::File::from_raw_fd(fd))
    }
}

/// How a line a kernel (or the driver) printed on standard output begins on the worker's
/// standard error.
pub(crate) const KERNEL_OUTPUT: &str = "kernel output: ";

#[cfg(not(unix))]
fn protocol_channel() -> anyhow::Result<std::fs::File> {
    anyhow::bail!("the evaluation worker needs a Unix platform")
}

/// Writes one answer as a JSON line.
/// One answer, as one line written at once (the channel is unbuffered: written token by token,
/// an answer took a system call, and a wake-up of the tuner's reader, per JSON token).
fn send(out: &mut impl Write, response: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(response)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

/// Runs the worker protocol (requests on stdin, answers on the original stdout) until stdin
/// closes.
pub fn serve() -> anyhow::Result<()> {
    die_with_parent();
    let mut out = protocol_channel()?;
    let mut progress_out = out.try_clone()?;
    let stdin = std::io::stdin();
    let mut bench: Option<Bench> = None;
    let mut builder: Option<Session> = None;
    for line in stdin.lock().lines() {
        let line = line?;
        let mut built = |phase: Phase| {
            // A progress line; the tuner restarts a worker whose pipe broke anyway.
            let _ = send(&mut progress_out, &Response::Progress { phase });
        };
        let response = match serde_json::from_str::<Request>(&line)? {
            Request::Setup {
                spec,
                sizes,
                device,
                settings,
            } => match setup(&spec, &sizes, device, settings) {
                Ok(b) => {
                    let limits = b.limits().clone();
                    bench = Some(b);
                    Response::Ready { limits }
                }
                Err(message) => Response::SetupFailed { message },
            },
            Request::Evaluate {
                params,
                source,
                sizes,
            } => match bench.as_mut() {
                Some(b) => {
                    let failures_before = b.build_failures.len();
                    let evaluation = match &sizes {
                        None => b.evaluate(&params, source.as_deref(), &mut built),
                        Some(z) => b.evaluate_at(&params, source.as_deref(), z),
                    };
                    let build_log = b
                        .build_failures
                        .get(failures_before)
                        .map(|(_, log)| log.clone());
                    Response::Evaluated {
                        evaluation,
                        build_log,
                        errors: b.last_errors,
                        warnings: std::mem::take(&mut b.build_warnings),
                    }
                }
                None => Response::SetupFailed {
                    message: "evaluate before setup".into(),
                },
            },
            Request::BuildAhead { params } => match bench.as_mut() {
                Some(b) => {
                    b.build_ahead(&params);
                    Response::Building
                }
                None => Response::SetupFailed {
                    message: "build before setup".into(),
                },
            },
            Request::Seal => match bench.as_mut() {
                Some(b) => {
                    b.seal();
                    Response::Sealed
                }
                None => Response::SetupFailed {
                    message: "seal before setup".into(),
                },
            },
            Request::Builder { device, identity } => match Session::on_device(device) {
                Ok(session) if session.build_identity().ok().as_ref() == Some(&identity) => {
                    builder = Some(session);
                    Response::BuilderReady
                }
                Ok(_) => Response::SetupFailed {
                    message: format!("device {device} is not the bench's device here"),
                },
                Err(e) => Response::SetupFailed {
                    message: format!("a builder's context: {e}"),
                },
            },
            Request::Build {
                id,
                program,
                options,
            } => match builder.as_ref() {
                Some(session) => {
                    match session
                        .build(&id, &program, &options)
                        .and_then(|p| session.binary(&p))
                    {
                        Ok(binary) => Response::Built {
                            binary: Some(binary),
                            log: None,
                        },
                        Err(e) => Response::Built {
                            binary: None,
                            log: Some(e.to_string()),
                        },
                    }
                }
                None => Response::SetupFailed {
                    message: "build before the builder's setup".into(),
                },
            },
            Request::Verify {
                params,
                case,
                source,
            } => match bench.as_mut() {
                Some(b) => {
                    let failures_before = b.build_failures.len();
                    match b.verify_at(&params, source.as_deref(), &case, &mut built) {
                        Ok(verdict) => {
                            let build_log = b
                                .build_failures
                                .get(failures_before)
                                .map(|(_, log)| log.clone());
                            Response::Verified {
                                verdict,
                                build_log,
                                warnings: std::mem::take(&mut b.build_warnings),
                                time: b.take_proof_time(),
                            }
                        }
                        Err(untrusted) => Response::Unverifiable { untrusted },
                    }
                }
                None => Response::SetupFailed {
                    message: "verify before setup".into(),
                },
            },
        };
        send(&mut out, &response)?;
    }
    Ok(())
}

fn setup(
    spec: &KernelSpec,
    sizes: &Sizes,
    device: usize,
    settings: Measurement,
) -> Result<Bench, String> {
    Bench::new(spec, sizes, device, settings).map_err(|e| e.to_string())
}
