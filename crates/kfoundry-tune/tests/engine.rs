//! The engine as a library: `kfoundry_tune::tune` with a reporter of its own, on the default
//! OpenCL device (PoCL in CI). The events arrive typed and in order, and nothing is printed by
//! the engine itself. A program that calls `tune` answers `WORKER_COMMAND` with the worker, so
//! this test is its own `main` (`harness = false`): the candidates run in a child process of it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

use std::sync::Mutex;

use kfoundry_tune::events::{Reporter, TuneEvent};
use kfoundry_tune::{Exit, TuneOptions};

const COPY: &str = r#"__kernel void copy(const int n, __global const float* x, __global float* y) {
    int i = get_global_id(0) * U;
    for (int u = 0; u < U; u++) y[i + u] = 2.0f * x[i + u];
}"#;

/// The events of a run, by name, with what a test checks of them.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

impl Reporter for Recorder {
    fn report(&self, event: TuneEvent<'_>) {
        let line = match &event {
            TuneEvent::Planned { kernels, .. } => format!("planned {kernels}"),
            TuneEvent::SearchStarted { search, budget, .. } => {
                format!("started {search} {budget}")
            }
            TuneEvent::Evaluated {
                done,
                params,
                record,
                ..
            } => {
                format!("evaluated {done} U={} {:?}", params["U"], record.operator)
            }
            TuneEvent::SearchFinished { search } => format!("finished {search}"),
            TuneEvent::Tuned { result } => format!("tuned {} {}", result.kernel, result.workload),
            TuneEvent::Failed { failure } => format!("failed {failure}"),
            TuneEvent::Finished {
                results, failed, ..
            } => format!("end {} {}", results.len(), failed.len()),
            TuneEvent::Note { text } => format!("note {text}"),
            TuneEvent::Warning { text } => format!("warning {text}"),
            TuneEvent::Rejected { .. } => "rejected".into(),
            other => format!("other {other:?}").chars().take(40).collect(),
        };
        self.events.lock().unwrap().push(line);
    }
}

/// The annotated kernel of [`bundle`]: `y = 2x`, U items a work item.
fn copy_spec(dir: &std::path::Path) -> kfoundry_rt::model::spec::KernelSpec {
    let args = format!(
        r#"code = {COPY:?}, params(U = [1, 2, 4]), reference(U = 1), global = n / U, local = 16, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let tokens: proc_macro2::TokenStream = args.parse().unwrap();
    let item: syn::Item = syn::parse_str("pub struct Copy;").unwrap();
    let cx = kfoundry_tooling::annotation::Context {
        package: "test",
        manifest_dir: dir,
    };
    match kfoundry_tooling::annotation::parse(tokens, &item, &cx) {
        Ok(a) => a.spec,
        Err(e) => panic!("{e}"),
    }
}

fn bundle(dir: &std::path::Path) -> std::path::PathBuf {
    let spec = copy_spec(dir);
    let bundle = serde_json::json!({
        "format": "kfoundry-bundle", "version": 1,
        "kernels": [{ "package": "test", "file": "inline", "line": 1, "spec": spec }],
    });
    let path = dir.join("bundle.json");
    std::fs::write(&path, bundle.to_string()).unwrap();
    path
}

/// A tune of the kernel of [`bundle`] in `dir` (lockfile and state there too), `evals`
/// evaluations, without a model.
fn options(dir: &std::path::Path, evals: usize) -> TuneOptions {
    TuneOptions {
        bundle: Some(bundle(dir)),
        lockfile: Some(dir.join("Kfoundry.lock")),
        state_dir: Some(dir.join("state")),
        budget_evals: evals,
        repeats: 2,
        no_llm: true,
        ..TuneOptions::default()
    }
}

/// A tune reports, in order: the plan, the search's start, each evaluation (counted), its end,
/// the result, and the end of the run; the result is in the lockfile.
fn events_arrive_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path(), 3);
    let recorder = Recorder::default();
    let exit = kfoundry_tune::tune(&options, &recorder).unwrap();
    let events = recorder.events.into_inner().unwrap();
    assert_eq!(exit, Exit::Success, "{events:#?}");
    let search = "test::Copy @ w";
    let evaluated: Vec<&str> = events
        .iter()
        .filter_map(|e| e.strip_prefix("evaluated ")?.split(' ').next())
        .collect();
    assert_eq!(evaluated, ["1", "2", "3"], "{events:#?}");
    let order: Vec<&str> = events
        .iter()
        .map(String::as_str)
        .filter(|e| {
            !e.starts_with("evaluated") && !e.starts_with("note") && !e.starts_with("rejected")
        })
        .collect();
    assert_eq!(
        order,
        [
            "planned 1",
            &format!("started {search} 3"),
            &format!("finished {search}"),
            "tuned test::Copy w",
            "end 1 0",
        ],
        "{events:#?}"
    );
    let lock = std::fs::read_to_string(dir.path().join("Kfoundry.lock")).unwrap();
    assert!(lock.contains("test::Copy"), "{lock}");
}

/// A re-tune after the kernel's source changed starts from what the lockfile knew: the stale
/// entry's parameters are evaluated right after the reference, and the run says so; with
/// `warm_start` off they are not.
fn a_retune_starts_from_the_lockfile() {
    let dir = tempfile::tempdir().unwrap();
    let lockfile = dir.path().join("Kfoundry.lock");
    let options = options(dir.path(), 2);
    let exit = kfoundry_tune::tune(&options, &Recorder::default()).unwrap();
    assert_eq!(exit, Exit::Success);
    // as if the source had changed since, and U = 4 had won then
    let mut lock: toml::Table =
        toml::from_str(&std::fs::read_to_string(&lockfile).unwrap()).unwrap();
    let entry = lock["kernels"]["test::Copy"].as_table().cloned().unwrap();
    let mut entry = entry;
    entry.insert("fingerprint".into(), "0000000000000000".into());
    let mut variants = entry["variants"].as_array().cloned().unwrap();
    variants[0]["params"]
        .as_table_mut()
        .unwrap()
        .insert("U".into(), 4.into());
    entry.insert("variants".into(), variants.into());
    lock["kernels"]
        .as_table_mut()
        .unwrap()
        .insert("test::Copy".into(), entry.into());
    std::fs::write(&lockfile, toml::to_string(&lock).unwrap()).unwrap();

    let run = |warm_start: bool| {
        let recorder = Recorder::default();
        let options = TuneOptions {
            warm_start,
            seed: 7,
            ..options.clone()
        };
        assert_eq!(
            kfoundry_tune::tune(&options, &recorder).unwrap(),
            Exit::Success
        );
        recorder.events.into_inner().unwrap()
    };
    let events = run(true);
    let evaluated: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("evaluated"))
        .collect();
    assert_eq!(
        evaluated,
        ["evaluated 1 U=1 Reference", "evaluated 2 U=4 WarmStart"],
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e.starts_with(
            "note test::Copy @ w: starting from the reference and 1 known configuration"
        ) && e.contains("(earlier source)")),
        "{events:#?}"
    );
    let cold = run(false);
    assert!(!cold.iter().any(|e| e.contains("WarmStart")), "{cold:#?}");
}

/// A search that speculates (`--set speculate=3`: the worker builds what may come next while
/// a candidate runs) evaluates each configuration once, in the order the search asks for them,
/// and ends like any other.
fn a_speculating_tune_runs_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let options = TuneOptions {
        set: vec!["speculate=3".into()],
        ..options(dir.path(), 3)
    };
    let recorder = Recorder::default();
    let exit = kfoundry_tune::tune(&options, &recorder).unwrap();
    let events = recorder.events.into_inner().unwrap();
    assert_eq!(exit, Exit::Success, "{events:#?}");
    let mut evaluated: Vec<&str> = events
        .iter()
        .filter_map(|e| e.strip_prefix("evaluated ")?.split(' ').nth(1))
        .collect();
    assert_eq!(evaluated[0], "U=1", "the reference first: {events:#?}");
    evaluated.sort_unstable();
    assert_eq!(evaluated, ["U=1", "U=2", "U=4"], "{events:#?}");
    assert!(
        events.iter().any(|e| e == "tuned test::Copy w"),
        "{events:#?}"
    );
}

/// One budget for the whole run (`--budget-total-secs`): the run says each search's share, and
/// a search whose share is spent stops after the reference, however many evaluations it may
/// have had.
fn a_run_budget_is_shared_out_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let options = TuneOptions {
        budget_total_secs: Some(0.0),
        ..options(dir.path(), 3)
    };
    let recorder = Recorder::default();
    let exit = kfoundry_tune::tune(&options, &recorder).unwrap();
    let events = recorder.events.into_inner().unwrap();
    assert_eq!(exit, Exit::Success, "{events:#?}");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("note run budget: search 1 of 1")
                && e.contains("test::Copy @ w gets 0.0 s")),
        "{events:#?}"
    );
    let evaluated: Vec<&str> = events
        .iter()
        .filter_map(|e| e.strip_prefix("evaluated ")?.split(' ').nth(1))
        .collect();
    assert_eq!(evaluated, ["U=1"], "the reference only: {events:#?}");
}

/// `--budget-secs` on its own (no run budget) stops a search once its evaluations' costs reach
/// it: with a budget smaller than any evaluation, after the reference, however many
/// evaluations it may have had. (It once reached the engine only with `--budget-total-secs`.)
fn a_search_budget_in_seconds_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let options = TuneOptions {
        budget_secs: Some(1e-9),
        ..options(dir.path(), 3)
    };
    let recorder = Recorder::default();
    let exit = kfoundry_tune::tune(&options, &recorder).unwrap();
    let events = recorder.events.into_inner().unwrap();
    assert_eq!(exit, Exit::Success, "{events:#?}");
    let evaluated: Vec<&str> = events
        .iter()
        .filter_map(|e| e.strip_prefix("evaluated ")?.split(' ').nth(1))
        .collect();
    assert_eq!(evaluated, ["U=1"], "the reference only: {events:#?}");
}

/// What a tune in one project found is where a tune of the same kernel in another project
/// starts: the tuning database's fastest configuration is evaluated right after the reference
/// and the run says where it came from; a damaged file in the database is skipped, and without
/// the database the search starts cold.
fn a_new_project_starts_from_the_tuning_database() {
    let db = tempfile::tempdir().unwrap();
    let first = tempfile::tempdir().unwrap();
    let options_in = |dir: &std::path::Path, evals: usize| TuneOptions {
        tuning_db: Some(db.path().to_path_buf()),
        ..options(dir, evals)
    };
    let exit = kfoundry_tune::tune(&options_in(first.path(), 3), &Recorder::default()).unwrap();
    assert_eq!(exit, Exit::Success);
    let folders: Vec<std::path::PathBuf> = walk(db.path());
    let entry = folders
        .iter()
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap_or_else(|| panic!("no entry in the database: {folders:?}"));
    let text = std::fs::read_to_string(entry).unwrap();
    let recorded: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(recorded["kernel"], "test::Copy", "{text}");
    let fastest = recorded["configs"][0]["params"]["U"].as_i64().unwrap();
    assert_ne!(
        fastest, 1,
        "the reference is not kept as a warm start: {text}"
    );
    std::fs::write(entry.with_file_name("damaged.json"), "{ \"version\": ").unwrap();

    let second = tempfile::tempdir().unwrap();
    let recorder = Recorder::default();
    let exit = kfoundry_tune::tune(&options_in(second.path(), 2), &recorder).unwrap();
    let events = recorder.events.into_inner().unwrap();
    assert_eq!(exit, Exit::Success, "{events:#?}");
    let evaluated: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("evaluated"))
        .collect();
    assert_eq!(
        evaluated,
        [
            "evaluated 1 U=1 Reference",
            &format!("evaluated 2 U={fastest} WarmStart")
        ],
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e
            .starts_with("note test::Copy @ w: starting from the reference and")
            && e.contains("(tuning database)")),
        "{events:#?}"
    );
    let third = tempfile::tempdir().unwrap();
    let recorder = Recorder::default();
    kfoundry_tune::tune(&options(third.path(), 2), &recorder).unwrap();
    let cold = recorder.events.into_inner().unwrap();
    assert!(!cold.iter().any(|e| e.contains("WarmStart")), "{cold:#?}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Builds ahead in processes of their own (`build_processes`): the bench builds the candidates
/// from the binaries its farm made, checks them as any other, and once sealed builds from
/// source again.
fn a_build_farm_builds_what_is_evaluated_next() {
    use kfoundry_bench::{Bench, Measurement};
    let dir = tempfile::tempdir().unwrap();
    let spec = copy_spec(dir.path());
    let sizes: kfoundry_rt::model::spec::Sizes = [("n".to_string(), 4096)].into();
    let settings = Measurement {
        build_processes: Some(2),
        ..Measurement::default()
    };
    let mut bench = Bench::new(&spec, &sizes, 0, settings).unwrap();
    let u = |v: i64| -> kfoundry_rt::model::spec::Params { [("U".to_string(), v)].into() };
    bench.build_ahead(&[u(2), u(4)]);
    // (a build no member has taken yet when it is needed is built here instead: wait for the
    // farm's members to start and build)
    let started = std::time::Instant::now();
    while bench.builds_ahead_running() > 0 && started.elapsed().as_secs() < 120 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for v in [2, 4] {
        let e = bench.evaluate(&u(v), None, &mut |_| {});
        assert!(e.time().is_some(), "U={v}: {e:?}");
    }
    assert_eq!(
        bench.farmed_builds(),
        2,
        "both built from the farm's binaries"
    );
    // Sealed: no farm, every build from source (the farm's builds are dropped).
    bench.seal();
    bench.build_ahead(&[u(2)]);
    let e = bench.evaluate(&u(2), None, &mut |_| {});
    assert!(e.time().is_some(), "{e:?}");
    assert_eq!(
        bench.farmed_builds(),
        2,
        "nothing from the farm once sealed"
    );
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some(kfoundry_tune::WORKER_COMMAND) {
        if let Err(e) = kfoundry_bench::worker::serve() {
            eprintln!("worker: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    events_arrive_in_order();
    println!("test events_arrive_in_order ... ok");
    a_build_farm_builds_what_is_evaluated_next();
    println!("test a_build_farm_builds_what_is_evaluated_next ... ok");
    a_retune_starts_from_the_lockfile();
    println!("test a_retune_starts_from_the_lockfile ... ok");
    a_new_project_starts_from_the_tuning_database();
    println!("test a_new_project_starts_from_the_tuning_database ... ok");
    a_speculating_tune_runs_like_any_other();
    println!("test a_speculating_tune_runs_like_any_other ... ok");
    a_run_budget_is_shared_out_and_kept();
    println!("test a_run_budget_is_shared_out_and_kept ... ok");
    a_search_budget_in_seconds_is_kept();
    println!("test a_search_budget_in_seconds_is_kept ... ok");
}
