//! What a real call can differ in from the runs a proof makes, and what a lockfile, a bundle or
//! a language model can try: one regression test per class, each with kernels written to get
//! through that class (on PoCL in CI). Before kfoundry checked each class, every one of these
//! shipped, leaked or hung (see the manual's reliability table, `book/src/reliability.md`):
//!
//! | class | how it got through | what catches it now |
//! | --- | --- | --- |
//! | vector tail | right only when one element is left; power-of-two workloads were proven at sizes of residue 0 or 1 | residues of every size covered (at least 16) |
//! | box corners | wrong when rows > 2.5 × columns; sizes were scaled together or one at a time | the corners of the proven box |
//! | integer scalars | an unroll by 4 without a remainder, right at the `k` it was tuned at | scalars over their declared range; dispatch only at the values proven |
//! | in place | right out of place, wrong when the output is the input | the launcher refuses aliasing (runtime tests), `in_place(...)` proven in place |
//! | integer outputs | off by one near 6.5e7, within a float tolerance | integers compared exactly |
//! | memo | leaves alone an element that already holds something | outputs pre-filled with NaN, zeros and random values |
//! | reversed groups | `#undef get_group_id` undid the reversed build | the source may not redefine the work-item functions |
//! | edge values | a polynomial `exp` for [-1, 1]; an `fmax` ReLU that drops NaN | edge-value cases: large magnitudes, infinities, NaN |
//! | model answers | `#inc\` + newline + `lude`, `%:include`: a host file into the build and the next prompt | directives read as the preprocessor reads them |
//! | project's model table | a bundle's `api_key_env` sent `GITHUB_TOKEN` to its URL | not used unless asked; never names the key's variable |
//! | lockfile edits | a failing configuration, a made-up device, a widened `proven` | `check --verify` re-proves what would run here |
//! | merge | the side claiming 1 ns won | a conflict, never settled by a claimed time |
//! | device-key twins | `+8086\|...`, `08086\|...`, a capitalised name: this device, winning dispatch's tie by a claimed 1 ns | keys canonical when read; one variant per kernel, device and workload; ties never by a claimed time |
//! | unbounded input | a FIFO as a generated source; a workload larger than the host | regular files only; a clear error before anything is allocated |
//! | values far from the declared ones | a softmax whose maximum starts at 0, a one-pass variance, a plain sum of squares | inputs shifted far from zero and at either end of the format's range, judged with the reference's own sensitivity |
//! | above the tuned size | a persistent kernel's later pass drops a partial vector | residue sets on both sides of the tuned sizes |
//! | integer-only kernels | a gather wrong for id 0, with no float input to trigger edge values | edge values for integer inputs too |
//! | scalar range ends | wrong for `k = 99` of 1..=100 only | the few values at each end of a scalar's range |
//! | 16-bit tolerance | a `half` output flushed to zero within an absolute 1e-4, bfloat16 probabilities 48% off within 1e-3 | 16-bit checks relative to magnitude, floored at the subnormals |
//! | work-item order | a neighbour's `__local` value read without a barrier | the reversed build reverses work-items within a group too |
//! | user includes | `%:include`, a spliced `#inc\lude`, a lone CR, `/* */#include`, `??=include`: a host file read by the compiler at every run; an include in a comment expanded | sources read as the preprocessor reads them; includes of the library and the crate only |
//! | the machine's caches | a FIFO in the tuning database hung a tune 691 s; a `/dev/zero` link took 2.2 GB | regular files only, of bounded size, skipped with a warning |
//! | a blocked tune | one SIGTERM while the tune waited did nothing | every wait ends on an interrupt; the process exits 30 s after one at most |
//!
//! `cargo test -p cargo-kfoundry --test cli adversarial:: -- --nocapture` prints what each tune did.

use std::path::Path;
use std::process::{Command, Output};

use kfoundry_tooling::lockfile::Lockfile;

use crate::cheats::{
    aspect_args, bf16_off_args, half_flush_args, in_place_args, integer_gather_args,
    local_race_args, memo_args, one_pass_variance_args, persistent_tail_args, poly_exp_args,
    relu_args, scalar_top_args, softmax_max_from_zero_args, sum_of_squares_norm_args, tail_args,
    SLOW,
};
use crate::common;

use common::bundle;
use common::mock_llm::{MockLlm, MockResponse};

/// The CLI under test: this build's, or another's named by `KFOUNDRY_TEST_CLI` (to show
/// that these cases got through an earlier kfoundry).
fn exe() -> Command {
    Command::new(
        std::env::var_os("KFOUNDRY_TEST_CLI")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_cargo-kfoundry").into()),
    )
}

/// Tunes the bundle's kernels; the JSON messages.
fn tune(bundle: &Path, lock: &Path, seed: u64, extra: &[&str]) -> (Output, Vec<serde_json::Value>) {
    let state = lock.with_extension("state");
    let out = exe()
        .args(["tune", "--bundle"])
        .arg(bundle)
        .arg("--lockfile")
        .arg(lock)
        .arg("--state-dir")
        .arg(&state)
        .args([
            "--repeats",
            "1",
            "--seed",
            &seed.to_string(),
            "--message-format",
            "json",
        ])
        .args(if extra.contains(&"--budget-evals") {
            &[][..]
        } else {
            &["--budget-evals", "8"][..]
        })
        .args(extra)
        .output()
        .expect("cargo-kfoundry runs");
    let messages = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, messages)
}

/// The parameter `P` of the winner of kernel `id`, and how the proof rejected the others.
fn winner(lock: &Path, id: &str) -> i64 {
    let lock = Lockfile::read(lock).unwrap().expect("a lockfile");
    lock.kernels[id].variants[0].params["P"]
}

fn rejections(messages: &[serde_json::Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["reason"] == "rejected")
        .map(|m| m.to_string())
        .collect()
}

/// Whether `P = bad` got through the search at least once (else the test would prove nothing).
fn passed_search(messages: &[serde_json::Value], bad: i64) -> bool {
    messages.iter().any(|m| {
        m["reason"] == "evaluation" && m["params"]["P"] == bad && m["outcome"]["Ok"].is_object()
    })
}

/// Tunes a kernel whose only faster variants are wrong in the way the class is about, over a
/// few seeds: none may ship, and the bad one must have passed the search at least once (the
/// proof, not the search, is what is tested).
fn never_ships(name: &str, args: &str, bad: i64, seeds: u64) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "b.json", name, args);
    let mut all = Vec::new();
    let mut got_through_search = false;
    for seed in 0..seeds {
        let lock = dir.path().join(format!("K{seed}.lock"));
        let (out, messages) = tune(&b, &lock, seed, &[]);
        assert!(
            out.status.success(),
            "{name}, seed {seed}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shipped = winner(&lock, &format!("test::{name}"));
        eprintln!(
            "{name}, seed {seed}: shipped P={shipped}; rejected: {:?}",
            rejections(&messages)
        );
        assert_ne!(shipped, bad, "{name}, seed {seed}: the bad variant shipped");
        got_through_search |= passed_search(&messages, bad);
        all.extend(messages);
    }
    assert!(
        got_through_search,
        "{name}: P={bad} never passed the search, so the proof was not tested"
    );
    all
}

#[test]
fn a_vector_tail_right_only_for_one_leftover_element_never_ships() {
    let messages = never_ships("Tail", &tail_args(), 1, 2);
    assert!(
        rejections(&messages)
            .iter()
            .any(|r| r.contains("differ") || r.contains("Wrong")),
        "{:?}",
        rejections(&messages)
    );
}

#[test]
fn a_variant_wrong_at_extreme_aspect_ratios_never_ships() {
    never_ships("Aspect", &aspect_args(), 1, 2);
}

/// `k` is an integer argument that is not a size: tuned at one value, a variant is dispatched
/// only at that value; declared over a range, the proof covers it.
#[test]
fn integer_scalars_are_proven_over_their_range_and_dispatched_only_there() {
    let source = r#"__kernel void k(const int n, const int k, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        float s = 0.0f;
        /* P=1 unrolls by 4 without a remainder loop: right only when k % 4 == 0 */
        if (P == 1) { for (int j = 0; j + 3 < k; j += 4) s += x[(i + j) % n] + x[(i + j + 1) % n] + x[(i + j + 2) % n] + x[(i + j + 3) % n]; }
        else { for (int j = 0; j < k; j++) s += x[(i + j) % n]; for (int t = 0; t < 32; t++) s += fmin(fabs(x[(i + t) % n]), 0.0f); }
        y[i] = s;
    }"#;
    let constant = format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), inputs(k = constant(8)),
           check(y, rtol = 1e-4, atol = 1e-4), workloads(w(n = 8192))"#
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "c.json", "Unroll", &constant);
    let lock = dir.path().join("c.lock");
    let (out, _) = tune(&b, &lock, 0, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let v = &l.kernels["test::Unroll"].variants[0];
    assert_eq!(v.params["P"], 1, "right at k = 8, so it may win there");
    assert_eq!(v.scalars.get("k"), Some(&[8, 8]), "{v:?}");
    // Dispatch runs it only at k = 8.
    let spec = bundle::spec(&constant, dir.path(), "Unroll");
    let key = kfoundry_rt::model::device::DeviceKey::parse(&v.device).unwrap();
    let at = |k: i64| {
        let scalars = [("k".to_string(), k)].into();
        kfoundry_rt::model::select::choose(
            &spec,
            std::slice::from_ref(v),
            &key,
            None,
            None,
            &v.sizes,
            Some(&scalars),
        )
        .unwrap()
        .step
    };
    assert_eq!(at(8), kfoundry_rt::model::select::Step::ExactDevice);
    assert_eq!(at(3), kfoundry_rt::model::select::Step::Reference);
    assert_eq!(at(6), kfoundry_rt::model::select::Step::Reference);
    // Declared over 1..=16: the proof meets k % 4 != 0 (if the search does not), and P=1 never
    // ships.
    let ranged = constant.replace("inputs(k = constant(8))", "inputs(k = uniform(1, 16))");
    let b = bundle::write(dir.path(), "r.json", "Unroll", &ranged);
    for seed in 0..2 {
        let lock = dir.path().join(format!("r{seed}.lock"));
        let (out, _) = tune(&b, &lock, seed, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(winner(&lock, "test::Unroll"), 1, "seed {seed}");
    }
}

#[test]
fn a_kernel_declared_in_place_is_proven_in_place() {
    let messages = never_ships("InPlace", &in_place_args(), 1, 2);
    assert!(
        rejections(&messages).iter().any(|r| r.contains("in place")),
        "{:?}",
        rejections(&messages)
    );
}

#[test]
fn integer_outputs_are_compared_exactly() {
    let source = r#"__kernel void k(const int n, __global const int* x, __global int* y) {
        int i = get_global_id(0);
        int slow = 0; for (int s = 0; s < 64 * (P == 0); s++) slow += x[(i + s) % n] * 0;
        int v = 3 * x[i] + 7;
        y[i] = (P == 1 && v > 65000000) ? v + 1 : v + slow;
    }"#;
    let args = format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, buffers(x = n, y = n), inputs(x = uniform(20000000, 22000000)),
           check(y), workloads(w(n = 4096))"#
    );
    // The annotation's default for an integer output: exact (a float tolerance, 1e-5 of 6.5e7,
    // would let the off-by-one pass).
    let dir = tempfile::tempdir().unwrap();
    let spec = bundle::spec(&args, dir.path(), "Ints");
    assert_eq!((spec.checks[0].rtol, spec.checks[0].atol), (0.0, 0.0));
    // P=1 is wrong on every input set (a sixth of the values exceed 6.5e7): it fails the search.
    let b = bundle::write(dir.path(), "i.json", "Ints", &args);
    let lock = dir.path().join("i.lock");
    let (out, messages) = tune(&b, &lock, 0, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(winner(&lock, "test::Ints"), 0);
    let failed = messages
        .iter()
        .find(|m| m["reason"] == "evaluation" && m["params"]["P"] == 1)
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(failed.contains("Wrong"), "{failed}");
}

#[test]
fn a_memo_that_skips_elements_already_written_never_ships() {
    let messages = never_ships("Memo", &memo_args(), 1, 2);
    assert!(
        rejections(&messages)
            .iter()
            .any(|r| r.contains("pre-filled")),
        "{:?}",
        rejections(&messages)
    );
}

#[test]
fn a_kernel_that_undefines_the_work_item_functions_is_refused() {
    let source = r#"#if P == 1
#undef get_group_id
#endif
__kernel void k(const int n, __global const float* x, __global float* y) {
    __local float tile[64];
    if (P == 0 || get_group_id(0) == 0) tile[get_local_id(0)] = 2.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    int i = get_global_id(0);
    y[i] = x[i] * tile[get_local_id(0)];
}"#;
    let args = format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = n, local = 64, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "u.json", "Undef", &args);
    let lock = dir.path().join("u.lock");
    let (out, _) = tune(&b, &lock, 0, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("`#undef get_group_id`") && stderr.contains("may not be redefined"),
        "{stderr}"
    );
    assert!(
        Lockfile::read(&lock)
            .unwrap()
            .is_none_or(|l| l.kernels.is_empty()),
        "nothing ships"
    );
}

#[test]
fn variants_right_only_on_the_declared_range_never_ship() {
    never_ships("PolyExp", &poly_exp_args(), 1, 2);
    let args = relu_args();
    never_ships("Relu", &args, 1, 2);
    // Declared finite (`edges = finite`): the same ReLU is then right.
    let finite = args.replace("check(y)", "check(y), edges = finite");
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "f.json", "Relu", &finite);
    let lock = dir.path().join("f.lock");
    let (out, _) = tune(&b, &lock, 0, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        winner(&lock, "test::Relu"),
        1,
        "without NaN inputs the fmax ReLU is right, and faster"
    );
}

/// A language model's answers that would pull a host file into the build (and its content,
/// token by token through the compiler's diagnostics, into the next prompt): refused before
/// they are built, and the file's content reaches no prompt, no log and no lockfile.
#[test]
fn a_model_answer_never_reads_a_host_file() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "ghp_kfoundrysecrettoken\n").unwrap();
    let s = secret.display();
    let body =
        "__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    y[i] = 3.0f * x[i];\n}\n";
    let answers = [
        format!("```c\n#inc\\\nlude \"{s}\"\n{body}```"),
        format!("```c\n%:include \"{s}\"\n{body}```"),
        format!("```c\n??=include \"{s}\"\n{body}```"),
        format!("```c\n/* a\n*/ # include \"{s}\"\n{body}```"),
        format!("```c\n#if __has_include(\"{s}\")\n#endif\n{body}```"),
        format!("```c\n#define I #include\n#pragma GCC dependency \"{s}\"\n{body}```"),
    ];
    let server = MockLlm::start(
        answers
            .iter()
            .map(|a| MockResponse::completion(a))
            .collect(),
    );
    let reference = "__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    float zero = 0.0f;\n    for (int k = 0; k < 256; k++) zero += fmin(fabs(x[(i + k) % n]), 0.0f);\n    y[i] = 3.0f * x[i] + zero;\n}\n";
    let args = format!(
        r#"code = {reference:?}, params(WG = [16, 32]), reference(WG = 16), global = n, local = WG, buffers(x = n, y = n), check(y),
           workloads(w(n = 4096))"#
    );
    let b = bundle::write(dir.path(), "m.json", "Scale", &args);
    let config = dir.path().join("llm.toml");
    std::fs::write(
        &config,
        format!(
            "base_url = \"{}\"\nmodel = \"m\"\nevery = 1\nmax_retries = 0\nmeta_every = 100\n",
            server.base_url()
        ),
    )
    .unwrap();
    let lock = dir.path().join("m.lock");
    let (out, messages) = tune(
        &b,
        &lock,
        0,
        &[
            "--llm-config",
            config.to_str().unwrap(),
            "--budget-evals",
            "16",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turns: Vec<&serde_json::Value> = messages
        .iter()
        .filter(|m| m["reason"] == "language-model")
        .collect();
    assert!(turns.len() >= answers.len(), "{turns:?}");
    for t in &turns[..answers.len()] {
        assert_eq!(t["turn"]["outcome"], "rejected", "{t}");
        assert!(
            t["turn"]["detail"]
                .as_str()
                .unwrap()
                .contains("not allowed"),
            "{t}"
        );
    }
    for r in server.requests() {
        assert!(
            !r.body.contains("ghp_kfoundrysecrettoken"),
            "a prompt carried the file: {}",
            r.body
        );
    }
    let everything = common::walk(dir.path())
        .into_iter()
        .filter(|p| *p != secret)
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<String>();
    assert!(
        !everything.contains("ghp_kfoundrysecrettoken"),
        "a file kfoundry wrote holds the secret"
    );
}

/// A bundle's model table that names a URL and the variable to read the key from: not used
/// unless asked for, and never allowed to choose the key's variable.
#[test]
fn a_bundles_model_table_never_chooses_where_a_key_goes() {
    let server = MockLlm::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = WG * x[get_global_id(0)]; }",
        params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 1024))"#;
    let b = bundle::write(dir.path(), "b.json", "K", args);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    v["kfoundry_metadata"] = serde_json::json!({ "llm": { "base_url": server.base_url(), "model": "m", "api_key_env": "GITHUB_TOKEN", "every": 1 } });
    std::fs::write(&b, v.to_string()).unwrap();
    let run = |extra: &[&str]| {
        exe()
            .args(["tune", "--bundle"])
            .arg(&b)
            .arg("--lockfile")
            .arg(dir.path().join("k.lock"))
            .args(["--budget-evals", "3", "--repeats", "1"])
            .args(extra)
            .env("GITHUB_TOKEN", "ghp_not_for_them")
            .env("KFOUNDRY_CONFIG_DIR", dir.path())
            .output()
            .unwrap()
    };
    let plain = run(&[]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    assert!(
        String::from_utf8_lossy(&plain.stderr)
            .contains("not used unless you pass --llm-from-project"),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let asked = run(&["--llm-from-project"]);
    assert!(!asked.status.success());
    assert!(
        String::from_utf8_lossy(&asked.stderr).contains("api_key_env"),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    assert!(server.requests().is_empty(), "nothing was sent");
}

/// A lockfile edited by hand (or by a pull request): `check --verify` re-proves what would
/// run on this device and fails on each entry that does not hold.
#[test]
fn check_verify_refuses_edited_entries() {
    let source = r#"__kernel void k(const int n, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        float slow = 0.0f; for (int s = 0; s < 32 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % n]), 0.0f);
        /* P=1: right; P=2: wrong everywhere; P=3: wrong above 20000 elements */
        y[i] = P == 2 ? 1.0f : (P == 3 && n > 20000) ? 0.0f : 2.0f * x[i] + slow;
    }"#;
    let args = format!(
        r#"code = {source:?}, params(P = [0, 1, 2, 3]), reference(P = 0), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "v.json", "Edit", &args);
    let lock = dir.path().join("v.lock");
    let (out, _) = tune(&b, &lock, 0, &["--budget-evals", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = |path: &Path| {
        exe()
            .args(["check", "--verify", "--bundle"])
            .arg(&b)
            .arg("--lockfile")
            .arg(path)
            .output()
            .unwrap()
    };
    let ok = verify(&lock);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    let original = Lockfile::read(&lock).unwrap().unwrap();
    let edited = |f: &dyn Fn(&mut Lockfile)| {
        let mut l = original.clone();
        f(&mut l);
        let p = dir.path().join("edited.lock");
        l.write_atomic(&p).unwrap();
        verify(&p)
    };
    // 1. parameters that fail
    let out = edited(&|l| {
        l.kernels.get_mut("test::Edit").unwrap().variants[0]
            .params
            .insert("P".into(), 2);
    });
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("does not hold"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // 2. moved to a made-up device described like this one: dispatch would run it here as the
    // nearest device, so it is proven here
    let out = edited(&|l| {
        let real = l.kernels["test::Edit"].variants[0].device.clone();
        let fake = "8086|made-up cpu|1.0|3.0".to_string();
        let info = l.devices[&real].clone();
        l.devices.insert(fake.clone(), info);
        let e = l.kernels.get_mut("test::Edit").unwrap();
        e.variants[0].device = fake;
        e.variants[0].params.insert("P".into(), 2);
    });
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // 3. `proven` widened to sizes where P=3 is wrong (it is right where it was tuned)
    let out = edited(&|l| {
        let v = &mut l.kernels.get_mut("test::Edit").unwrap().variants[0];
        v.params.insert("P".into(), 3);
        v.proven.push([("n".to_string(), 65536)].into());
    });
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Two lockfiles holding different variants for one slot: the one claiming 1 ns does not win.
#[test]
fn a_claimed_time_never_settles_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let write = |file: &str, p: i64, ns: u64| {
        let v = kfoundry_rt::model::variant::Variant {
            device: "8086|cpu|1|3.0".into(),
            workload: "w".into(),
            sizes: [("n".to_string(), 8)].into(),
            params: [("P".to_string(), p)].into(),
            time_ns: ns,
            reference_time_ns: 100,
            evaluations: 1,
            failures: 0,
            source: None,
            proven: vec![],
            scalars: Default::default(),
            proof: 2,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        };
        let mut l = Lockfile::default();
        l.record("k", "f", "8086|cpu|1|3.0", Default::default(), vec![v]);
        l.write_atomic(&dir.path().join(file)).unwrap();
    };
    write("a.lock", 1, 50);
    write("b.lock", 2, 1);
    let out = exe()
        .current_dir(dir.path())
        .args(["merge", "a.lock", "b.lock", "-o", "c.lock", "--bundle"])
        .arg(bundle::write(
            dir.path(),
            "none.json",
            "Unused",
            r#"code = "__kernel void k(const int n, __global float* y) {}", global = n, buffers(y = n), check(y), workloads(w(n = 8))"#,
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("conflict") && stderr.contains("claims 1 ns"),
        "{stderr}"
    );
    assert!(!dir.path().join("c.lock").exists(), "nothing written");
}

/// A lockfile entry for this very device under another spelling of its key (`+8086`, `08086`,
/// a capitalised name), or a second entry under the same key, with other parameters and a
/// claimed time of 1 ns: before, it parsed to this device and won dispatch's tie by its claim,
/// `check --locked` said nothing, `merge` kept it as a slot of its own and a re-tune kept it
/// beside the new result. Now every reader refuses it, naming the key.
#[test]
fn a_device_key_twin_is_refused_by_check_merge_and_tune() {
    let source = r#"__kernel void k(const int n, __global const float* x, __global float* y) {
        int i = get_global_id(0);
        float slow = 0.0f; for (int s = 0; s < 32 * (P == 0); s++) slow += fmin(fabs(x[(i + s) % n]), 0.0f);
        /* P=2: wrong everywhere */
        y[i] = P == 2 ? 1.0f : 2.0f * x[i] + slow;
    }"#;
    let args = format!(
        r#"code = {source:?}, params(P = [0, 1, 2]), reference(P = 0), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
    );
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "t.json", "Twin", &args);
    let good = dir.path().join("good.lock");
    let (out, _) = tune(&b, &good, 0, &["--budget-evals", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = Lockfile::read(&good).unwrap().unwrap();
    let honest = original.kernels["test::Twin"].variants[0].clone();
    let key = honest.device.clone();
    let (vendor, rest) = key.split_once('|').unwrap();
    let (name, tail) = rest.split_once('|').unwrap();
    let run = |args: &[&str], lock: &Path| {
        let out = exe()
            .current_dir(dir.path())
            .args(args)
            .arg("--bundle")
            .arg(&b)
            .arg("--lockfile")
            .arg(lock)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let twins = [
        format!("+{vendor}|{rest}"),
        format!("0{vendor}|{rest}"),
        format!("{vendor}|{}|{tail}", name.to_uppercase()),
        key.clone(),
    ];
    for (i, twin) in twins.iter().enumerate() {
        // the twin: wrong parameters, claiming 1 ns, for the same workload (written as a
        // hand or a tool would, past `write_atomic`'s own check)
        let mut l = original.clone();
        l.devices.insert(twin.clone(), l.devices[&key].clone());
        l.kernels.get_mut("test::Twin").unwrap().variants.push(
            kfoundry_rt::model::variant::Variant {
                device: twin.clone(),
                params: [("P".to_string(), 2)].into(),
                time_ns: 1,
                ..honest.clone()
            },
        );
        let path = dir.path().join(format!("twin{i}.lock"));
        let text = l.to_toml().unwrap();
        std::fs::write(&path, &text).unwrap();
        let expected = if *twin == key {
            format!("a second variant for device `{key}` at workload `w`")
        } else {
            format!("device key `{twin}` is not canonical: write `{key}`")
        };
        // `check`, with and without --locked
        for locked in [true, false] {
            let args: &[&str] = if locked {
                &["check", "--locked"]
            } else {
                &["check"]
            };
            let (ok, said) = run(args, &path);
            assert!(
                !ok && said.contains(&expected) && said.contains(&format!("twin{i}.lock")),
                "check (locked: {locked}) on `{twin}`: {said}"
            );
        }
        // `merge`: refused, nothing written, in either order
        for inputs in [
            ["good.lock", &format!("twin{i}.lock")],
            [&format!("twin{i}.lock"), "good.lock"],
        ] {
            let out = exe()
                .current_dir(dir.path())
                .args([
                    "merge",
                    inputs[0],
                    inputs[1],
                    "-o",
                    "merged.lock",
                    "--bundle",
                ])
                .arg(&b)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(&expected),
                "merge {inputs:?}: {stderr}"
            );
            assert!(!dir.path().join("merged.lock").exists(), "nothing written");
        }
        // a re-tune: refused before searching, leaving the file as it was (never a tune that
        // writes its result beside the twin)
        let (out, _) = tune(&b, &path, 1, &["--budget-evals", "4"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(&expected),
            "tune on `{twin}`: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
    // The honest lockfile still passes, and a re-tune of it holds one variant per slot.
    let (ok, said) = run(&["check", "--locked"], &good);
    assert!(ok, "{said}");
    let (out, _) = tune(&b, &good, 1, &["--budget-evals", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // (a winner, and where it has a floor its general variant: two slots)
    let l = Lockfile::read(&good).unwrap().unwrap();
    let variants = &l.kernels["test::Twin"].variants;
    assert_eq!(variants.iter().filter(|v| !v.general).count(), 1, "{l:?}");
    assert!(variants.iter().filter(|v| v.general).count() <= 1, "{l:?}");
}

#[cfg(unix)]
#[test]
fn unbounded_inputs_are_refused_not_read() {
    let dir = tempfile::tempdir().unwrap();
    // A workload larger than this machine: a clear error at once.
    let args = r#"code = "__kernel void k(const long n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * WG; }",
        params(WG = [1, 2]), reference(WG = 1), global = 64, buffers(x = n, y = n), check(y), workloads(w(n = 1 << 40))"#;
    let b = bundle::write(dir.path(), "big.json", "Big", args);
    let started = std::time::Instant::now();
    let (out, _) = tune(&b, &dir.path().join("big.lock"), 0, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("GiB") && !stderr.contains("1 bytes"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "refused before anything ran"
    );
    // A FIFO where a generated source should be: `check` says so instead of hanging.
    let small = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * WG; }",
        params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#;
    let b = bundle::write(dir.path(), "s.json", "Small", small);
    let spec = bundle::spec(small, dir.path(), "Small");
    let lock_path = dir.path().join("fifo.lock");
    let mut lock = Lockfile::default();
    let hash = "0123456789abcdef";
    let v = kfoundry_rt::model::variant::Variant {
        device: "8086|cpu|1|3.0".into(),
        workload: "w".into(),
        sizes: [("n".to_string(), 64)].into(),
        params: [("WG".to_string(), 2)].into(),
        time_ns: 1,
        reference_time_ns: 2,
        evaluations: 1,
        failures: 0,
        source: Some(hash.into()),
        proven: vec![],
        scalars: Default::default(),
        proof: 2,
        partial: false,
        general: false,
        floor: None,
        device_info: None,
    };
    lock.record(
        "test::Small",
        &kfoundry_tooling::fingerprint(&spec).unwrap(),
        &v.device.clone(),
        Default::default(),
        vec![v],
    );
    lock.write_atomic(&lock_path).unwrap();
    let fifo = kfoundry_tooling::generated::source_path(&lock_path, "test::Small", hash);
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut child = exe()
        .args(["check", "--bundle"])
        .arg(&b)
        .arg("--lockfile")
        .arg(&lock_path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "check hangs on a FIFO"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("a FIFO"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// What a kernel prints is passed through escaped, and is never taken for a compiler warning.
#[test]
fn kernel_printf_is_no_warning_and_no_terminal_control() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); if (i == 0 && WG == 2) printf(\"warning: fake\\n\x1b]0;owned\x07\\n\"); y[i] = x[i] * 1.0f; }",
        params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#;
    let b = bundle::write(dir.path(), "p.json", "Print", args);
    let (out, messages) = tune(&b, &dir.path().join("p.lock"), 0, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tuned = messages
        .iter()
        .find(|m| m["reason"] == "tuned")
        .expect("a result");
    assert!(!tuned["result"].to_string().contains("fake"), "{tuned}");
    assert!(
        !out.stderr.contains(&0x1b),
        "a raw escape reached the terminal"
    );
}

/// An embedding lookup: `ids` index the rows of a `vocab x dim` table. P = 1 is the fast
/// variant (P = 0 adds a slow loop that changes nothing).
fn gather_args(ids: &str) -> String {
    let source = r#"__kernel void k(const int rows, const int vocab, const int dim, __global const int* ids, __global const float* table, __global float* y) {
        int i = get_global_id(0);
        if (i >= rows * dim) return;
        float slow = 0.0f;
        for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(table[(i + s) % (vocab * dim)]), 0.0f);
        y[i] = table[ids[i / dim] * dim + i % dim] + slow;
    }"#;
    format!(
        r#"code = {source:?}, params(P = [0, 1]), reference(P = 0), global = rows * dim, buffers(ids = rows, table = vocab * dim, y = rows * dim),
           inputs(ids = {ids}), check(y), workloads(w(rows = 64, vocab = 500, dim = 16))"#
    )
}

/// Index inputs: `uniform_int(0, vocab)` draws them in range at every size the proof runs
/// (smaller and larger vocabularies too), so the fast variant is proven and ships. Declared
/// with a fixed range, the reference reads past the table wherever the proof makes `vocab`
/// smaller: that is reported as the annotation's error, naming the input, and no candidate
/// is blamed for it.
#[test]
fn index_inputs_follow_the_sizes_and_a_reference_out_of_bounds_is_the_annotations_error() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(
        dir.path(),
        "in.json",
        "Gather",
        &gather_args("uniform_int(0, vocab)"),
    );
    let lock = dir.path().join("in.lock");
    let (out, messages) = tune(&b, &lock, 0, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        winner(&lock, "test::Gather"),
        1,
        "rejected: {:?}",
        rejections(&messages)
    );
    let l = Lockfile::read(&lock).unwrap().unwrap();
    let proven = l.kernels["test::Gather"].variants[0].proven_range();
    let vocab = proven
        .iter()
        .find(|(n, _)| *n == "vocab")
        .map(|(_, r)| *r)
        .expect("vocab proven");
    assert!(
        vocab.0 < 500 && vocab.1 > 500,
        "proven over smaller and larger vocabularies: {vocab:?}"
    );

    let b = bundle::write(
        dir.path(),
        "out.json",
        "Gather",
        &gather_args("uniform(0, 499)"),
    );
    let lock = dir.path().join("out.lock");
    let (out, messages) = tune(&b, &lock, 0, &[]);
    let said = format!("{}{messages:?}", String::from_utf8_lossy(&out.stderr));
    assert!(
        said.contains("reads outside")
            && said.contains("`ids` is drawn from `uniform(0, 499)`")
            && said.contains("uniform_int"),
        "{said}"
    );
    assert!(
        rejections(&messages).is_empty(),
        "no candidate blamed: {:?}",
        rejections(&messages)
    );
}

/// Whole-output tolerances: P = 1 is off by 1 at one element, P = 2 off by a relative 1e-4
/// everywhere, P = 3 NaN at one element. A norm or cosine rule accepts the small error spread
/// everywhere and refuses the outlier; an allclose fraction accepts the outlier and refuses the
/// spread; NaN where the reference is finite fails every rule.
#[test]
fn whole_output_tolerances_accept_what_they_say_and_nothing_else() {
    let source = format!(
        r#"__kernel void k(const int n, __global const float* x, __global float* y) {{
            int i = get_global_id(0);
            {SLOW}
            float v = 2.0f * x[i] + slow;
            if (P == 1 && i == 7) v += 1.0f;
            if (P == 2) v *= 1.0001f;
            if (P == 3 && i == 7) v = NAN;
            y[i] = v;
        }}"#
    );
    let outcomes = |rule: &str| -> Vec<bool> {
        let args = format!(
            r#"code = {source:?}, params(P = [0, 1, 2, 3]), reference(P = 0), global = n, buffers(x = n, y = n), check(y, {rule}),
               workloads(w(n = 4096))"#
        );
        let dir = tempfile::tempdir().unwrap();
        let b = bundle::write(dir.path(), "b.json", "Whole", &args);
        let (out, messages) = tune(&b, &dir.path().join("K.lock"), 0, &["--budget-evals", "12"]);
        assert!(
            out.status.success(),
            "{rule}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (1..=3)
            .map(|p| {
                let evals: Vec<_> = messages
                    .iter()
                    .filter(|m| m["reason"] == "evaluation" && m["params"]["P"] == p)
                    .collect();
                assert!(!evals.is_empty(), "{rule}: P={p} was never evaluated");
                evals.iter().all(|m| m["outcome"]["Ok"].is_object())
            })
            .collect()
    };
    assert_eq!(outcomes("norm = 1e-3"), [false, true, false]);
    assert_eq!(outcomes("cosine = 0.99999"), [false, true, false]);
    assert_eq!(
        outcomes("allclose = 0.999, rtol = 1e-5, atol = 1e-6"),
        [true, false, false]
    );
}

/// `half*` buffers and bfloat16 in `ushort` buffers (`bf16(...)`): inputs drawn as real values
/// (P = 1 is right only for finite inputs, as it would be on random bit patterns' NaNs),
/// outputs compared as 16-bit floats within about one unit in the last place (P = 2 rounds
/// differently: within it), and a wrong variant (P = 3) refused.
#[test]
fn half_and_bfloat16_buffers_are_real_values_compared_in_their_precision() {
    let half = r#"__kernel void k(const int n, __global const half* x, __global half* y) {
        int i = get_global_id(0);
        float v = vload_half(i, x);
        float slow = 0.0f;
        for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(vload_half((i + s) % n, x)), 0.0f);
        float r = P == 1 ? fmax(3.0f * v, -1e30f) : 3.0f * v + slow;
        if (P == 3) r += 0.05f;
        if (P == 2) vstore_half_rtz(r, i, y); else vstore_half(r, i, y);
    }"#;
    let bf16 = r#"float from_bf16(ushort b) { return as_float((uint)b << 16); }
    ushort to_bf16(float f, int truncate) {
        uint u = as_uint(f);
        if (!truncate) u += 0x7FFF + ((u >> 16) & 1);
        return (ushort)(u >> 16);
    }
    __kernel void k(const int n, __global const ushort* x, __global ushort* y) {
        int i = get_global_id(0);
        float v = from_bf16(x[i]);
        float slow = 0.0f;
        for (int s = 0; s < 64 * (P == 0); s++) slow += fmin(fabs(from_bf16(x[(i + s) % n])), 0.0f);
        float r = P == 1 ? fmax(3.0f * v, -1e30f) : 3.0f * v + slow;
        if (P == 3) r += 0.5f;
        y[i] = to_bf16(r, P == 2);
    }"#;
    for (name, source, extra) in [("Half", half, ""), ("Bfloat", bf16, "bf16(x, y), ")] {
        let args = format!(
            r#"code = {source:?}, params(P = [0, 1, 2, 3]), reference(P = 0), global = n, buffers(x = n, y = n), {extra}check(y),
               edges = none, workloads(w(n = 4096))"#
        );
        let dir = tempfile::tempdir().unwrap();
        let b = bundle::write(dir.path(), "b.json", name, &args);
        let (out, messages) = tune(&b, &dir.path().join("K.lock"), 0, &["--budget-evals", "12"]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ok = |p: i64| {
            let evals: Vec<_> = messages
                .iter()
                .filter(|m| m["reason"] == "evaluation" && m["params"]["P"] == p)
                .collect();
            assert!(!evals.is_empty(), "{name}: P={p} never evaluated");
            evals.iter().all(|m| m["outcome"]["Ok"].is_object())
        };
        assert!(ok(1), "{name}: finite inputs: {messages:?}");
        assert!(
            ok(2),
            "{name}: another rounding is within the 16-bit tolerance: {messages:?}"
        );
        assert!(!ok(3), "{name}: a wrong variant fails");
    }
}

/// The rejection messages of `P = bad` across `messages` (the search's and the proof's).
fn refusals_of(messages: &[serde_json::Value], bad: i64) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["P"] == bad || m["reason"] == "rejected")
        .map(|m| m.to_string())
        .filter(|m| m.contains("Wrong") || m.contains("differ"))
        .collect()
}

#[test]
fn a_softmax_whose_maximum_starts_at_zero_never_ships() {
    let messages = never_ships("SoftmaxMax0", &softmax_max_from_zero_args(), 1, 1);
    let refusals = refusals_of(&messages, 1);
    assert!(
        refusals.iter().any(|r| r.contains("below zero")),
        "refused on values far below zero: {refusals:?}"
    );
}

#[test]
fn a_one_pass_variance_never_ships() {
    let messages = never_ships("OnePassVar", &one_pass_variance_args(), 1, 1);
    let refusals = refusals_of(&messages, 1);
    assert!(
        refusals.iter().any(|r| r.contains("shifted far")),
        "refused on values shifted far from zero: {refusals:?}"
    );
}

#[test]
fn a_plain_sum_of_squares_norm_never_ships() {
    let messages = never_ships("SumSquares", &sum_of_squares_norm_args(), 1, 1);
    let refusals = refusals_of(&messages, 1);
    assert!(
        refusals.iter().any(|r| r.contains("format's range")),
        "refused at an end of the format's range: {refusals:?}"
    );
}

#[test]
fn a_persistent_kernel_wrong_just_above_the_tuned_size_never_ships() {
    never_ships("Persistent", &persistent_tail_args(), 1, 1);
}

#[test]
fn an_integer_only_gather_wrong_for_id_zero_never_ships() {
    never_ships("IntGather", &integer_gather_args(), 1, 1);
}

#[test]
fn a_variant_wrong_at_the_top_of_a_scalar_range_never_ships() {
    never_ships("ScalarTop", &scalar_top_args(), 1, 2);
}

#[test]
fn a_neighbours_local_value_read_without_a_barrier_never_ships() {
    let messages = never_ships("LocalRace", &local_race_args(), 1, 1);
    let refusals = refusals_of(&messages, 1);
    assert!(
        refusals.iter().any(|r| r.contains("reverse order")),
        "refused in the reversed build: {refusals:?}"
    );
}

/// A `half` output of values near 1e-5 flushed to zero, and a bfloat16 one of probabilities
/// near 1e-3 made 48% too large, are wrong under the default 16-bit checks (relative to each
/// element, floored at the subnormals), not within them (the absolute 1e-4 and 1e-3 before).
#[test]
fn sixteen_bit_outputs_are_judged_relative_to_their_magnitude() {
    for (name, args) in [
        ("HalfFlush", half_flush_args()),
        ("Bf16Off", bf16_off_args()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let spec = bundle::spec(&args, dir.path(), name);
        assert!(
            spec.checks[0].atol < 1e-6,
            "{name}: an absolute floor near the subnormals: {:?}",
            spec.checks[0]
        );
        let b = bundle::write(dir.path(), "h.json", name, &args);
        let lock = dir.path().join("h.lock");
        let (out, messages) = tune(&b, &lock, 0, &[]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(winner(&lock, &format!("test::{name}")), 0, "{name}");
        assert!(
            !refusals_of(&messages, 1).is_empty(),
            "{name}: P=1 was refused as wrong: {messages:?}"
        );
    }
    // A check that allows 48% is the user's to give: the slip then ships, and the tune says
    // that its error is far above the format's unit.
    let loose = bf16_off_args().replace("check(y)", "check(y, rtol = 0.6, atol = 1e-3)");
    let dir = tempfile::tempdir().unwrap();
    let b = bundle::write(dir.path(), "l.json", "Bf16Loose", &loose);
    let lock = dir.path().join("l.lock");
    let (out, _) = tune(&b, &lock, 0, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(winner(&lock, "test::Bf16Loose"), 1, "{stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("above two units in the last place"),
        "{stderr}"
    );
}

/// A kernel file's text: `before`, then a kernel (so that an include in `before` is the only
/// thing that could make it differ).
fn kernel_file(before: &str) -> String {
    format!("{before}\n__kernel void k(const int n, __global const float* x, __global float* y) {{ y[get_global_id(0)] = x[get_global_id(0)] * WG; }}\n")
}

/// Includes as the compiler reads them (I1-I4, I10-I13, L2): every spelling of an include
/// that reaches the compiler is refused, naming its file and line; one inside a comment or a
/// group `#if 0` leaves out is left alone (and need not exist); a comment may follow an
/// include; a `source =` linked out of the crate is refused like an include.
#[cfg(unix)]
#[test]
fn includes_are_read_as_the_compiler_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("incl");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"incl\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(root.join("h.cl"), "#define H 1\n").unwrap();
    std::fs::write(dir.path().join("outside.cl"), kernel_file("")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.cl"), root.join("linked.cl")).unwrap();
    // (kernel, what precedes it in its file, refused at this line: 0 for accepted)
    let cases: &[(&str, &str, usize)] = &[
        ("Digraph", "%:include \"/etc/hostname\"", 1),
        ("Splice", "int a;\n#inc\\\nlude \"/etc/hostname\"", 2),
        ("LoneCr", "// c\r#include \"/etc/hostname\"", 1),
        ("CommentThenInclude", "/* */#include \"/etc/hostname\"", 1),
        ("Trigraph", "??=include \"/etc/hostname\"", 1),
        (
            "InComments",
            "// #include \"missing.cl\"\n/*\n#include </etc/passwd>\n*/",
            0,
        ),
        ("InIfZero", "#if 0\n#include \"missing.cl\"\n#endif", 0),
        ("TrailingComment", "#include \"h.cl\" // the header", 0),
    ];
    let annotation = |source: &str, item: &str| {
        format!("#[kfoundry::evolve(source = \"{source}\", params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 64)))]\npub struct {item};\n\n")
    };
    for (item, before, _) in cases {
        std::fs::write(root.join(format!("{item}.cl")), kernel_file(before)).unwrap();
    }
    // The accepted ones alone: listed.
    let lib: String = cases
        .iter()
        .filter(|c| c.2 == 0)
        .map(|(item, _, _)| annotation(&format!("{item}.cl"), item))
        .collect();
    std::fs::write(root.join("src/lib.rs"), lib).unwrap();
    let out = exe().current_dir(&root).arg("list").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (item, _, _) in cases.iter().filter(|c| c.2 == 0) {
        assert!(
            stdout.contains(&format!("incl::{item} ")),
            "{item}:\n{stdout}"
        );
    }
    // The others: each refused at its file and line.
    let mut lib: String = cases
        .iter()
        .filter(|c| c.2 != 0)
        .map(|(item, _, _)| annotation(&format!("{item}.cl"), item))
        .collect();
    lib.push_str(&annotation("linked.cl", "Linked"));
    std::fs::write(root.join("src/lib.rs"), lib).unwrap();
    let out = exe().current_dir(&root).arg("list").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for (item, _, line) in cases.iter().filter(|c| c.2 != 0) {
        let file = root.join(format!("{item}.cl")).canonicalize().unwrap();
        let at = format!("{}, line {line}: ", file.display());
        assert!(stderr.contains(&at), "{item}: refused at {at}\n{stderr}");
    }
    assert!(
        stderr.contains("kernel source `linked.cl`") && stderr.contains("outside the crate"),
        "{stderr}"
    );
}

/// A FIFO (which hung a tune 691 s, and one SIGTERM did not stop it) and a link to
/// `/dev/zero` (2.2 GB of memory) in the tuning database and in the program cache (D1): the
/// next tune skips them at once, says so, and finishes.
#[cfg(unix)]
#[test]
fn fifos_and_device_links_in_the_tuning_database_and_program_cache_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * 2.0f; }",
        params(WG = [1, 2, 4, 8]), reference(WG = 1), global = n, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#;
    let b = bundle::write(dir.path(), "d.json", "Db", args);
    let cache = dir.path().join("cache");
    let run = |lock: &str| {
        exe()
            .env("KFOUNDRY_CACHE_DIR", &cache)
            .env_remove("KFOUNDRY_TUNING_DB")
            .args([
                "tune",
                "--program-cache",
                "--repeats",
                "1",
                "--budget-evals",
                "4",
                "--bundle",
            ])
            .arg(&b)
            .arg("--lockfile")
            .arg(dir.path().join(lock))
            .arg("--state-dir")
            .arg(dir.path().join(format!("{lock}.state")))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = run("a.lock").wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let files = common::walk(&cache);
    let entries: Vec<_> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    let binaries: Vec<_> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    assert!(!entries.is_empty() && !binaries.is_empty(), "{files:?}");
    let fifo = |p: &Path| {
        assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    };
    for e in &entries {
        let folder = e.parent().unwrap();
        fifo(&folder.join("fifo.json"));
        std::os::unix::fs::symlink("/dev/zero", folder.join("zero.json")).unwrap();
    }
    for (i, p) in binaries.iter().enumerate() {
        std::fs::remove_file(p).unwrap();
        if i % 2 == 0 {
            fifo(p);
        } else {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap();
        }
    }
    let mut second = run("b.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while second.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = second.kill();
            panic!("the tune hangs on a FIFO or a device in the cache");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("a FIFO") && stderr.contains("a device"),
        "{stderr}"
    );
    assert!(Lockfile::read(&dir.path().join("b.lock"))
        .unwrap()
        .is_some());
}

/// One SIGTERM stops a tune that is blocked (T3): here it waits for the lock of its lockfile,
/// which another process holds (before, the wait ignored the interrupt and only a second
/// signal ended it).
#[cfg(unix)]
#[test]
fn one_sigterm_stops_a_tune_waiting_for_the_lockfile() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let args = r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) { y[get_global_id(0)] = x[get_global_id(0)] * WG; }",
        params(WG = [1, 2]), reference(WG = 1), global = n, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#;
    let b = bundle::write(dir.path(), "w.json", "Wait", args);
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    // What a tune locks to write `locked/K.lock` (its folder, on Unix), held by this test.
    let holder = std::fs::File::open(&locked).unwrap();
    holder.lock().unwrap();
    let mut child = exe()
        .env("KFOUNDRY_TUNING_DB", "off")
        .args(["tune", "--repeats", "1", "--budget-evals", "2", "--bundle"])
        .arg(&b)
        .arg("--lockfile")
        .arg(locked.join("K.lock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let waiting = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !seen.contains("waiting for another cargo kfoundry") {
        assert!(std::time::Instant::now() < waiting, "never waited:\n{seen}");
        if let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(1)) {
            seen.push_str(&line);
            seen.push('\n');
        }
        assert!(child.try_wait().unwrap().is_none(), "ended:\n{seen}");
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let sent = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("one SIGTERM did not stop the tune within 20 s:\n{seen}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    drop(holder);
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(5)) {
        seen.push_str(&line);
        seen.push('\n');
    }
    assert!(!status.success(), "{seen}");
    assert!(
        seen.contains("interrupted while waiting for the lock"),
        "{seen}"
    );
    assert!(!locked.join("K.lock").exists(), "nothing written:\n{seen}");
}
