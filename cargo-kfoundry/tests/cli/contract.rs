//! The contract with tools and CI: exit statuses (see `error.rs`) and the JSON messages (see
//! `messages.rs`), whose shape a snapshot pins. A change to a message that the snapshot shows
//! must either only add a field or raise `messages::VERSION`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use kfoundry_rt::model::spec::{Params, Workload};
use kfoundry_rt::model::variant::Variant;
use kfoundry_rt::DeviceInfo;
use kfoundry_search::{Evaluation, FailureKind, Operator};
use kfoundry_tune::messages::{
    BruteForced, CrossCell, GeneralVariant, KernelListing, LlmSummary, LlmTurn, Message, Phases,
    PortfolioBucket, ProofTime, Simulated, SimulatedRun, TuneResult, VERSION,
};

use crate::common;

use common::bundle;

fn params(pairs: &[(&str, i64)]) -> Params {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// One message of every kind, with made-up values.
fn every_message() -> Vec<Message> {
    let p = params(&[("WG", 64), ("VEC", 4)]);
    let sizes = params(&[("n", 4096)]);
    let result = TuneResult {
        kernel: "pkg::Saxpy".into(),
        workload: "small".into(),
        sizes: "n=4096".into(),
        device: "10de|nvidia-h200".into(),
        reference_ns: 4000,
        best_ns: 1000,
        speedup: 4.0,
        params: p.clone(),
        evaluations: 60,
        failures: 2,
        seconds: 12.5,
        search_seconds: 9.0,
        phases: Some(Phases {
            start: 0.4,
            search: 9.0,
            proof: 2.5,
            proof_parts: ProofTime {
                check_reference: 0.3,
                build: 0.2,
                draw: 0.6,
                upload: 0.3,
                reference: 0.4,
                candidate: 0.2,
                compare: 0.4,
            },
            remeasure: 0.6,
        }),
        gbytes_per_s: Some(98.3),
        gflops: None,
        max_abs_error: Some(0.0),
        rel_error_norm: Some(0.0),
        probed_sizes: vec!["n=1024".into(), "n=16384".into()],
        proven: vec![
            sizes.clone(),
            params(&[("n", 1024)]),
            params(&[("n", 16384)]),
        ],
        proven_scalars: [("k".to_string(), [1, 8])].into(),
        proof_seed: Some(12345),
        proof_cases: 40,
        proof_cases_skipped: 1,
        probe_rejections: vec![(
            params(&[("WG", 256), ("VEC", 8)]),
            "Wrong at sizes n=16384: y[3]: expected 1, got 0".into(),
        )],
        note: None,
        kept_existing: false,
        reference_kept: false,
        build_warnings: vec![("warning: loop not unrolled".into(), 3)],
        failure_log: Some(PathBuf::from("target/kfoundry/logs/pkg__Saxpy@small.log")),
        interrupted: false,
        roofline: Some(0.82),
        generated_source: None,
        llm: Some(LlmSummary {
            requests: 7,
            tokens: 9000,
            mutations: 7,
            accepted: 2,
            elites: 2,
            meta_requests: 1,
            prompt_variants: 4,
            disabled: None,
        }),
        general: Some(GeneralVariant {
            params: params(&[("WG", 64), ("VEC", 1)]),
            best_ns: 1500,
            reference_ns: 4000,
            proven: vec![sizes.clone(), params(&[("n", 1)])],
            proven_scalars: Default::default(),
            proof_cases: 38,
            floor: None,
        }),
        floor: Some(params(&[("n", 1024)])),
    };
    let info = DeviceInfo {
        name: "NVIDIA H200".into(),
        vendor: "NVIDIA Corporation".into(),
        platform: "NVIDIA CUDA".into(),
        kind: "gpu".into(),
        compute_units: 132,
        max_work_group_size: 1024,
        local_mem_bytes: 49152,
        global_mem_bytes: 150_000_000_000,
        max_clock_mhz: 1980,
    };
    vec![
        Message::Evaluation {
            kernel: "pkg::Saxpy".into(),
            workload: "small".into(),
            params: p.clone(),
            operator: Operator::Neighbour,
            outcome: Evaluation::ok(1e-6, 0.2),
        },
        Message::Evaluation {
            kernel: "pkg::Saxpy".into(),
            workload: "small".into(),
            params: p.clone(),
            operator: Operator::Crossover,
            outcome: Evaluation::failed(FailureKind::Wrong, "y[7]: expected 3, got 0", 0.1),
        },
        Message::LanguageModel {
            kernel: "pkg::Saxpy".into(),
            workload: "small".into(),
            turn: LlmTurn {
                prompt_variant: Some(1),
                hash: Some("ab12".into()),
                outcome: "accepted".into(),
                detail: "levels [1, 0, 0]".into(),
                time: Some(9e-7),
            },
        },
        Message::Portfolio {
            kernel: "pkg::RmsNorm".into(),
            ranges: "rows = 1..=4096, cols = 2048".into(),
            buckets: vec![
                PortfolioBucket {
                    size: Some("rows".into()),
                    lo: Some(1),
                    hi: Some(128),
                    params: p.clone(),
                    anchors: vec!["range_rows_1".into(), "range_rows_64".into()],
                },
                PortfolioBucket {
                    size: Some("rows".into()),
                    lo: Some(129),
                    hi: Some(4096),
                    params: p.clone(),
                    anchors: vec!["range_rows_256".into(), "range_rows_4096".into()],
                },
            ],
            kept_geomean: 0.99,
            kept_min: 0.96,
        },
        Message::Rejected {
            kernel: "pkg::Saxpy".into(),
            workload: "small".into(),
            stage: "probe".into(),
            params: p.clone(),
            why: "Wrong at sizes n=16384".into(),
            counterexample: Some(kfoundry_tune::messages::Counterexample {
                sizes: [("n".to_string(), 16384)].into(),
                scalars: Default::default(),
                values: "inputs shifted far below zero".into(),
                prefill: "zeros".into(),
                in_place: false,
            }),
        },
        Message::Tuned {
            result: Box::new(result),
        },
        Message::Failed {
            kernel: "pkg::Broken".into(),
            workload: "small".into(),
            error: "the reference failed".into(),
        },
        Message::Finished {
            lockfile: PathBuf::from("Kfoundry.lock"),
            results: 3,
            failed: 1,
            interrupted: false,
        },
        Message::Kernel(KernelListing {
            id: "pkg::Saxpy".into(),
            package: "pkg".into(),
            location: "src/lib.rs:12".into(),
            entry: "saxpy".into(),
            fingerprint: "89ae7251ecb3f1aa".into(),
            space_size: "48".into(),
            params: vec![
                ("WG".into(), vec![32, 64, 128]),
                ("VEC".into(), vec![1, 2, 4, 8]),
            ],
            require: vec!["WG <= device_max_work_group".into()],
            device_properties: vec!["device_max_work_group".into()],
            workloads: vec![Workload {
                name: "small".into(),
                sizes: sizes.clone(),
                on: vec![],
            }],
        }),
        Message::Device {
            index: 0,
            key: "10de|nvidia-h200".into(),
            info,
            traits: kfoundry_rt::DeviceTraits {
                vendor_id: 0x10de,
                kind: "gpu".into(),
                local_mem_bytes: 49152,
                max_work_group_size: 1024,
                compute_units: 132,
                sub_group_sizes: vec![32],
                nv_compute_capability: 90,
                extensions: ["cl_khr_fp64".to_string()].into(),
            },
            peaks: None,
        },
        Message::Finding {
            message: "stale: `pkg::Saxpy` changed since it was tuned".into(),
        },
        Message::Note {
            text: "`pkg::Saxpy` at `small`: the winner cannot run at 88% of the region it was proven over (its constraints); the general variant (VEC=1, WG=64) serves there, 1.50 µs against the reference's 4.00 µs".into(),
        },
        Message::Warning {
            text: "no roofline figures: the device's peaks could not be measured".into(),
        },
        Message::Variant {
            kernel: "pkg::Saxpy".into(),
            variant: Variant {
                device: "10de|nvidia-h200".into(),
                workload: "small".into(),
                sizes: sizes.clone(),
                params: p.clone(),
                time_ns: 1000,
                reference_time_ns: 4000,
                evaluations: 60,
                failures: 2,
                source: None,
                proven: vec![sizes.clone()],
                scalars: Default::default(),
                proof: 0,
                partial: false,
                general: false,
                floor: None,
                device_info: None,
            },
        },
        Message::Cross {
            result: CrossCell {
                kernel: "pkg::Saxpy".into(),
                workload: "small".into(),
                on: "10de|nvidia-h200".into(),
                owner: "8086|pocl-cpu".into(),
                params: p.clone(),
                time_ns: Some(1500),
                failure: None,
                hws: Some(1.5),
            },
        },
        Message::Simulated(Simulated {
            kernel: "sgemm".into(),
            device: "A100".into(),
            best_time: 0.0012,
            fractions: vec![(50, 0.8), (100, 0.95)],
            score_evals: 0.61,
            score_time: 0.55,
            incomplete: false,
            runs: vec![SimulatedRun {
                seed: 0,
                evaluations: 100,
                failures: 3,
                seconds: 41.0,
                fraction: 0.95,
                best: Some((vec![64, 4], 0.00126)),
            }],
        }),
        Message::BruteForced(BruteForced {
            kernel: "pkg::Saxpy".into(),
            workload: "small".into(),
            device: "10de|nvidia-h200".into(),
            path: PathBuf::from("target/kfoundry/spaces/pkg__Saxpy@small.json"),
            valid: 48,
            evaluated: 40,
            resumed: 8,
            timed: 45,
            failures: BTreeMap::from([("build".to_string(), 3)]),
            best_time_ms: Some(0.001),
            best: Some(p),
            interrupted: false,
        }),
    ]
}

/// Fails to compile when a message kind is added without a sample above.
fn kind(m: &Message) -> &'static str {
    match m {
        Message::Evaluation { .. } => "evaluation",
        Message::LanguageModel { .. } => "language-model",
        Message::Rejected { .. } => "rejected",
        Message::Tuned { .. } => "tuned",
        Message::Failed { .. } => "failed",
        Message::Portfolio { .. } => "portfolio",
        Message::Finished { .. } => "finished",
        Message::Kernel(_) => "kernel",
        Message::Device { .. } => "device",
        Message::Finding { .. } => "finding",
        Message::Note { .. } => "note",
        Message::Warning { .. } => "warning",
        Message::Variant { .. } => "variant",
        Message::Cross { .. } => "cross",
        Message::Simulated(_) => "simulated",
        Message::BruteForced(_) => "brute-forced",
    }
}

#[test]
fn messages_are_versioned_tagged_and_pinned_by_a_snapshot() {
    let messages = every_message();
    let lines: Vec<String> = messages.iter().map(Message::to_line).collect();
    for (m, line) in messages.iter().zip(&lines) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["version"], VERSION, "{line}");
        assert_eq!(v["reason"], kind(m), "{line}");
        // A tool in Rust reads them back as they were.
        let back: Message = serde_json::from_str(line).unwrap();
        assert_eq!(&back, m, "{line}");
    }
    let kinds: std::collections::BTreeSet<&str> = messages.iter().map(kind).collect();
    assert_eq!(kinds.len(), 16, "a sample of every kind");
    expect_test::expect_file!["snapshots/messages.jsonl"].assert_eq(&(lines.join("\n") + "\n"));
}

fn kfoundry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-kfoundry"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn usage_errors_exit_with_2_and_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global float* y) { y[get_global_id(0)] = U; }", params(U = [1, 2]), reference(U = 1), global = n, buffers(y = n), check(y), workloads(w(n = 64))"#;
    let b = bundle::write(dir.path(), "b.json", "K", args);
    let (b, lock) = (b.to_str().unwrap(), dir.path().join("K.lock"));
    let lock = lock.to_str().unwrap();
    for (args, says) in [
        (vec!["tune", "--no-such-flag"], "unexpected argument"),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--kernel",
                "NoSuchKernel",
            ],
            "no annotated kernel matches `--kernel NoSuchKernel`",
        ),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--workload",
                "huge",
            ],
            "no selected kernel declares the workload `huge`",
        ),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--device",
                "no-such-device-anywhere",
            ],
            "no OpenCL device matches `--device no-such-device-anywhere`",
        ),
        (vec!["simulate", "--set", "nonsense", "x.json"], "--set"),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--set",
                "gradient_steerin=true",
            ],
            "`gradient_steerin`: no such setting",
        ),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--set",
                "selection.p_min=0.9",
            ],
            "selection.p_min out of range",
        ),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--set",
                "max_evals=5",
            ],
            "--budget-evals",
        ),
        (
            vec![
                "tune",
                "--bundle",
                b,
                "--lockfile",
                lock,
                "--set",
                "islands=0",
            ],
            "0 islands",
        ),
        (
            vec!["simulate", "--set", "sampling.explore=-1", "x.json"],
            "negative or non-finite",
        ),
    ] {
        let out = kfoundry(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(!std::path::Path::new(lock).exists(), "nothing was written");
}
