//! `tune --device all` (or `--device` given several times): every selected device tuned at
//! once, each by its own `tune --device <index>` process running the whole pipeline, so a
//! device that fails or hangs stops nothing but itself.
//!
//! Devices with the same key (two GPUs of one model and driver) would tune the same jobs
//! twice: they split them instead, device i of m taking `--partition i/m` (after any
//! `--partition` of the command line). Every process records its results into the same
//! lockfile as each kernel finishes (under the lockfile's advisory lock, see
//! `kfoundry_tune::pipeline::record`). Each line a process prints is shown with its device's index in front
//! (JSON messages on stdout pass through unchanged: each names its device).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result};

use kfoundry_tune::device::{self, Selected};
use kfoundry_tune::error::{usage, Exit};
use kfoundry_tune::interrupt;
use kfoundry_tune::{MessageFormat, TuneOptions};

/// Whether `args` selects several devices.
pub fn is_fleet(args: &TuneOptions) -> bool {
    args.device.len() > 1 || args.device.iter().any(|d| d.eq_ignore_ascii_case("all"))
}

/// The devices `selectors` name, each once, in the order of `cargo kfoundry devices`.
fn resolve(selectors: &[String]) -> Result<Vec<Selected>> {
    let mut out: Vec<Selected> = if selectors.iter().any(|s| s.eq_ignore_ascii_case("all")) {
        device::all()?
    } else {
        selectors
            .iter()
            .map(|s| device::select(Some(s)))
            .collect::<Result<_>>()?
    };
    out.sort_by_key(|d| d.index);
    out.dedup_by_key(|d| d.index);
    if out.is_empty() {
        return Err(kfoundry_rt::Error::NoPlatform.into());
    }
    Ok(out)
}

/// Each device with the partition it takes among the devices of its key: `(device, i, m)`.
fn assign(devices: Vec<Selected>) -> Vec<(Selected, usize, usize)> {
    let keys: Vec<String> = devices.iter().map(|d| d.key.to_string()).collect();
    devices
        .into_iter()
        .enumerate()
        .map(|(pos, d)| {
            let key = &keys[pos];
            let m = keys.iter().filter(|k| *k == key).count();
            let i = keys[..pos].iter().filter(|k| *k == key).count() + 1;
            (d, i, m)
        })
        .collect()
}

/// A command line (without the program) less its `--device` options.
fn arguments_without_devices(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        match arg.to_str() {
            Some("--device") => skip_next = true,
            Some(a) if a.starts_with("--device=") => {}
            _ => out.push(arg),
        }
    }
    out
}

/// Tunes every selected device at once, one process each; the exit status is the worst.
pub fn run(args: &TuneOptions) -> Result<Exit> {
    check_selectors(&args.device)?;
    let devices = assign(resolve(&args.device)?);
    if devices.len() == 1 && devices[0].2 == 1 {
        // One device after all: no need for another process.
        let mut single = args.clone();
        single.device = vec![devices[0].0.index.to_string()];
        return kfoundry_tune::tune(&single, &crate::reporter::TuneReporter::new(&single.ws));
    }
    interrupt::install()?;
    let json = args.ws.message_format == MessageFormat::Json;
    let exe =
        std::env::current_exe().context("cannot find this program to start one tune per device")?;
    let base = arguments_without_devices(std::env::args_os().skip(1));
    if !args.ws.quiet {
        eprintln!(
            "tuning on {} device(s) at once, one process each:",
            devices.len()
        );
        for (d, i, m) in &devices {
            let share = if *m > 1 {
                format!(", share {i}/{m} of the jobs (identical devices split them)")
            } else {
                String::new()
            };
            eprintln!("  [{}] {} ({}){share}", d.index, d.info.name, d.key);
        }
    }
    let mut children = Vec::new();
    for (d, i, m) in &devices {
        let mut cmd = Command::new(&exe);
        cmd.args(&base).arg("--device").arg(d.index.to_string());
        if *m > 1 {
            cmd.arg("--partition").arg(format!("{i}/{m}"));
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the tune of device {}", d.index))?;
        let prefix = format!("[{}] ", d.index);
        let out = child
            .stdout
            .take()
            .map(|s| forward(s, if json { String::new() } else { prefix.clone() }, false));
        let err = child.stderr.take().map(|s| forward(s, prefix, true));
        children.push((d.index, child, out, err));
    }
    let mut exits = Vec::new();
    for (index, mut child, out, err) in children {
        let status = child
            .wait()
            .with_context(|| format!("waiting for the tune of device {index}"))?;
        for t in [out, err].into_iter().flatten() {
            let _ = t.join();
        }
        let exit = match status.code() {
            Some(0) => Exit::Success,
            Some(3) => Exit::PartlyFailed,
            Some(130) => Exit::Interrupted,
            Some(2) => Exit::Usage,
            _ => Exit::Failure,
        };
        if exit != Exit::Success && !args.ws.quiet {
            eprintln!(
                "[{index}] the tune of this device ended with status {}",
                status
                    .code()
                    .map_or("(a signal)".to_string(), |c| c.to_string())
            );
        }
        exits.push(exit);
    }
    Ok(combine(&exits))
}

/// The exit of the whole from each device's: interrupted if any was; success if all
/// succeeded; a usage error if every one was; failure if none tuned anything; else partly
/// failed.
fn combine(exits: &[Exit]) -> Exit {
    if exits.contains(&Exit::Interrupted) {
        Exit::Interrupted
    } else if exits.iter().all(|e| *e == Exit::Success) {
        Exit::Success
    } else if exits.iter().all(|e| *e == Exit::Usage) {
        Exit::Usage
    } else if exits.iter().all(|e| *e == Exit::Failure) {
        Exit::Failure
    } else {
        Exit::PartlyFailed
    }
}

/// Copies the lines of `from` to this process's stdout (or stderr), each after `prefix`.
fn forward(
    from: impl std::io::Read + Send + 'static,
    prefix: String,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            // Whole lines under the lock: lines of two devices never interleave.
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "{prefix}{line}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "{prefix}{line}");
            }
        }
    })
}

/// `--device` selectors that contradict each other.
fn check_selectors(selectors: &[String]) -> Result<()> {
    if selectors.iter().any(|s| s.eq_ignore_ascii_case("all")) && selectors.len() > 1 {
        return Err(usage(
            "`--device all` already selects every device: give it alone",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(index: usize, name: &str) -> Selected {
        let key = kfoundry_rt::DeviceKey::from_reported(0x10de, name, "580", "OpenCL 3.0 CUDA");
        Selected {
            index,
            key,
            info: Default::default(),
            traits: Default::default(),
        }
    }

    #[test]
    fn identical_devices_split_their_jobs() {
        let shares: Vec<(usize, usize, usize)> = assign(vec![
            device(0, "NVIDIA H200"),
            device(1, "NVIDIA H200"),
            device(2, "NVIDIA A100"),
            device(3, "NVIDIA H200"),
        ])
        .into_iter()
        .map(|(d, i, m)| (d.index, i, m))
        .collect();
        assert_eq!(shares, [(0, 1, 3), (1, 2, 3), (2, 1, 1), (3, 3, 3)]);
    }

    #[test]
    fn each_process_gets_the_command_line_less_its_devices() {
        let args = [
            "kfoundry",
            "tune",
            "--device",
            "all",
            "--budget-evals",
            "9",
            "--device=1",
            "--kernel",
            "Saxpy",
        ]
        .map(OsString::from);
        let kept: Vec<OsString> = arguments_without_devices(args.into_iter());
        assert_eq!(
            kept,
            [
                "kfoundry",
                "tune",
                "--budget-evals",
                "9",
                "--kernel",
                "Saxpy"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn all_is_given_alone() {
        assert!(check_selectors(&["all".into()]).is_ok());
        assert!(check_selectors(&["0".into(), "1".into()]).is_ok());
        assert!(check_selectors(&["all".into(), "0".into()]).is_err());
    }

    #[test]
    fn the_whole_exits_with_the_worst() {
        assert_eq!(combine(&[Exit::Success, Exit::Success]), Exit::Success);
        assert_eq!(combine(&[Exit::Success, Exit::Failure]), Exit::PartlyFailed);
        assert_eq!(combine(&[Exit::Failure, Exit::Failure]), Exit::Failure);
        assert_eq!(
            combine(&[Exit::PartlyFailed, Exit::Success]),
            Exit::PartlyFailed
        );
        assert_eq!(
            combine(&[Exit::Success, Exit::Interrupted]),
            Exit::Interrupted
        );
    }
}
