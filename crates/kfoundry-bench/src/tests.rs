use super::*;

#[test]
fn median_of_odd_and_even() {
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    assert!(median(&mut []).is_nan());
    assert_eq!(relative_spread(&mut [1.0, 1.0, 1.0]), 0.0);
    assert!((relative_spread(&mut [1.0, 2.0, 2.0, 2.0, 3.0]) - 0.0).abs() < 1e-12);
    assert!((relative_spread(&mut [1.0, 1.5, 2.0, 2.5, 3.0]) - 0.5).abs() < 1e-12);
}

/// y = 2x + y, with ITEMS=4 wrong at one element and ITEMS=8 wrong only where x > 0.99
/// (a value-dependent bug: about one element in 200).
fn bench() -> Bench {
    bench_with(Measurement::default())
}

/// [`bench`] measuring with `settings`.
fn bench_with(settings: Measurement) -> Bench {
    bench_for(
        settings,
        r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
            for (int j = 0; j < ITEMS; ++j) {
                int i = get_global_id(0) * ITEMS + j;
                float v = 2.0f * x[i] + y[i];
                if (ITEMS == 4 && i == 77) v += 1.0f;
                if (ITEMS == 8 && x[i] > 0.99f) v += 1.0f;
                y[i] = v;
            }
        }", params(ITEMS = [1, 2, 4, 8]), reference(ITEMS = 1), require(n % ITEMS == 0),
        global = n / ITEMS, buffers(x = n, y = n), inputs(y = uniform(-1.0, 1.0)), check(y), workloads(w(n = 4096))"#,
    )
}

/// A bench for `code` with one parameter `P` in 0..=1 (reference 0), y checked.
fn bench_of(code: &str) -> Bench {
    bench_for(
        Measurement::default(),
        &format!(
            r#"code = {code:?}, params(P = [0, 1]), reference(P = 0), global = n, local = 64,
           buffers(x = n, y = n), check(y), workloads(w(n = 4096))"#
        ),
    )
}

/// A bench on the first OpenCL device for the annotation `args`, at its first workload.
fn bench_for(settings: Measurement, args: &str) -> Bench {
    try_bench_for(settings, args).expect("a bench on the first OpenCL device (PoCL in CI)")
}

/// [`bench_for`], or why the bench could not be set up.
fn try_bench_for(settings: Measurement, args: &str) -> Result<Bench, SetupError> {
    let item: syn::Item = syn::parse_str("pub struct K;").expect("item");
    let dir = std::env::temp_dir();
    let cx = kfoundry_tooling::annotation::Context {
        package: "t",
        manifest_dir: &dir,
    };
    let spec = kfoundry_tooling::annotation::parse(args.parse().expect("tokens"), &item, &cx)
        .map(|a| a.spec)
        .expect("spec");
    let sizes = spec.workloads[0].sizes.clone();
    Bench::new(&spec, &sizes, 0, settings)
}

/// y = 2x by way of a scratch buffer `ws` (`scratch(ws)`) of `n * (1 + P)` floats: P = 0
/// (the reference) and P = 3 (all of its longer scratch) clear what they used; P = 1 leaves
/// it dirty; P = 2 clears it but writes one element past its end; P = 4 leaves it dirty only
/// when launched again on its own output (as the timed runs are). `keep` makes the
/// reference leave it dirty too.
fn scratch_annotation(keep: bool) -> String {
    let keep = if keep { "P == 0 || " } else { "" };
    format!(
        r#"code = "__kernel void k(const int n, __global const float* x, __global float* y, __global float* ws) {{
            int i = get_global_id(0);
            float prior = y[i];
            ws[i] = 2.0f * x[i];
            if (P == 3) ws[3 * n + i] = ws[i];
            float v = P == 3 ? ws[3 * n + i] : ws[i];
            if (!({keep}P == 1)) ws[i] = 0.0f;
            if (P == 3) ws[3 * n + i] = 0.0f;
            if (P == 2 && i == 0) ws[3 * n] = 1.0f;
            if (P == 4 && i == 0 && prior == v) ws[n] = 1.0f;
            y[i] = v;
        }}", params(P = [0, 1, 2, 3, 4]), reference(P = 0), global = n, local = 64,
        buffers(x = n, y = n, ws = n * (1 + P)), scratch(ws), check(y), workloads(w(n = 4096))"#
    )
}

/// Scratch buffers: each run gets its configuration's length, all zero; a candidate that
/// leaves its scratch dirty is wrong, one that writes past it out of bounds; one that uses
/// more scratch than the reference, and clears it, passes the proof and the search.
#[test]
fn scratch_must_be_left_all_zero_and_within_its_length() {
    let mut b = bench_for(Measurement::default(), &scratch_annotation(false));
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let sizes = b.sizes.clone();
    let mut verdict = |v: i64| {
        b.verify_at(&p(v), None, &Case::at(sizes.clone()), &mut |_| {})
            .expect("the reference can be trusted")
    };
    assert!(verdict(0).is_ok());
    assert!(verdict(3).is_ok(), "{:?}", verdict(3));
    match verdict(1) {
        Err(Rejection::Wrong(why)) => {
            assert!(why.contains("scratch `ws` not zero"), "{why}")
        }
        other => panic!("a dirty scratch passed: {other:?}"),
    }
    match verdict(2) {
        Err(Rejection::OutOfBounds(why)) => {
            assert!(why.contains("past the end of `ws`"), "{why}")
        }
        other => panic!("a write past the scratch passed: {other:?}"),
    }
    assert!(matches!(
        b.evaluate(&p(3), None, &mut |_| {}),
        Evaluation::Ok { .. }
    ));
    assert!(matches!(
        b.evaluate(&p(1), None, &mut |_| {}),
        Evaluation::Failed { .. }
    ));
    // Clean when verified, dirty once launched again: the timed runs catch it.
    let once = b.verify_at(&p(4), None, &Case::at(sizes.clone()), &mut |_| {});
    assert!(once.expect("the reference can be trusted").is_ok());
    match b.evaluate(&p(4), None, &mut |_| {}) {
        Evaluation::Failed { kind, reason, .. } => {
            assert_eq!(kind, FailureKind::Wrong);
            assert!(reason.contains("after its timed runs"), "{reason}");
        }
        other => panic!("dirty after its timed runs, yet {other:?}"),
    }
}

/// A reference that leaves its scratch dirty is the annotation's mistake, said at setup.
#[test]
fn a_reference_that_leaves_scratch_dirty_is_refused_at_setup() {
    match try_bench_for(Measurement::default(), &scratch_annotation(true)) {
        Err(SetupError::Reference { message, .. }) => {
            assert!(message.contains("scratch `ws` not zero"), "{message}")
        }
        Err(other) => panic!("another setup error: {other}"),
        Ok(_) => panic!("a reference leaving its scratch dirty was accepted"),
    }
}

/// No more builds ahead run at once than `build_jobs` says; the rest of the offer is
/// left (the likeliest come first).
#[test]
fn builds_ahead_run_at_most_build_jobs_at_once() {
    let mut b = bench_with(Measurement {
        build_jobs: Some(1),
        ..Measurement::default()
    });
    b.build_ahead(&[items(2), items(4), items(8)]);
    assert_eq!(b.builds.building.len(), 1);
    assert_eq!(
        b.builds.building[0].0 .0,
        items(2),
        "the first offered is started"
    );
    assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
    assert!(b.builds.building.is_empty(), "taken by its evaluation");
}

/// A build farm whose members cannot start (this test binary does not answer the worker's
/// command) costs nothing but the farm's builds: each candidate is built from source, a
/// wrong one is still wrong, and once every member is known broken the builds ahead go to
/// threads again.
#[test]
fn a_broken_build_farm_falls_back_to_builds_from_source() {
    let mut b = bench_with(Measurement {
        build_processes: Some(2),
        ..Measurement::default()
    });
    b.build_ahead(&[items(2), items(4)]);
    assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
    // Once every member is known to be broken, the builds ahead go to threads again.
    let started = Instant::now();
    while b.builds.farm.as_ref().is_some_and(|f| f.size() > 0) && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        b.builds.farm.as_ref().map(|f| f.size()),
        Some(0),
        "no member answered"
    );
    b.build_ahead(&[items(8)]);
    assert!(matches!(
        b.builds.building.last(),
        Some((k, Background::Running(_))) if k.0 == items(8)
    ));
    assert!(matches!(
        b.evaluate(&items(4), None, &mut |_| {}),
        Evaluation::Failed {
            kind: FailureKind::Wrong,
            ..
        }
    ));
    assert_eq!(b.farmed_builds(), 0);
}

/// Builds started ahead are what the evaluation uses (not built again), and an evaluation
/// of a configuration never announced still builds it.
#[test]
fn builds_ahead_are_taken_by_their_evaluations() {
    let mut b = bench();
    b.builds.builders = 4;
    b.build_ahead(&[items(2), items(4), items(1)]);
    assert_eq!(
        b.builds.building.len(),
        2,
        "the reference is not built ahead"
    );
    assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
    assert_eq!(b.builds.building.len(), 1);
    let wrong = b.evaluate(&items(4), None, &mut |_| {});
    assert!(
        matches!(
            wrong,
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        ),
        "{wrong:?}"
    );
    assert!(b.builds.building.is_empty());
    b.build_ahead(&[items(2)]);
    assert!(b.builds.building.is_empty(), "already built");
    // ITEMS=8, never announced: built now, and wrong where an input exceeds 0.99
    let late = b.evaluate(&items(8), None, &mut |_| {});
    assert!(
        matches!(
            late,
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        ),
        "{late:?}"
    );
}

/// P=1 reads a local tile that only work-group 0 fills. On a device where one thread runs
/// the work-groups in turn, group 0 runs first and leaves the tile for the others, so the
/// run is right (and may pass the search); numbered in reverse, the first group to run is
/// the last one, which reads the scrubbed tile, so the proof of a finalist fails it. P=0
/// (its own tile in every group, read after a barrier) passes.
#[test]
fn a_kernel_relying_on_work_group_order_fails_verification() {
    let mut b = bench_of(
        "__kernel void k(const int n, __global const float* x, __global float* y) {
            __local float tile[64];
            if (P == 0 || get_group_id(0) == 0) tile[get_local_id(0)] = 2.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            int i = get_global_id(0);
            y[i] = x[i] * tile[(get_local_id(0) + 1) % 64];
        }",
    );
    assert!(b.not_gpu, "PoCL is not a GPU");
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let sizes = b.sizes.clone();
    assert!(b
        .verify_at(&p(0), None, &Case::at(sizes.clone()), &mut |_| {})
        .unwrap()
        .is_ok());
    for round in 0..3 {
        let verdict = b
            .verify_at(&p(1), None, &Case::at(sizes.clone()), &mut |_| {})
            .unwrap();
        assert!(
            matches!(verdict, Err(Rejection::Wrong(_))),
            "round {round}: {verdict:?}"
        );
        b.builds.built.clear();
    }
}

/// A softmax over one column is all ones whatever its inputs: a workload there is tuned (its
/// output is legitimately constant, since the output varies at two columns), a candidate
/// writing ones is right there and refused where the output varies; a reference whose
/// output never varies is still refused at setup.
#[test]
fn a_legitimately_constant_output_is_proven_by_equality() {
    let softmax = |p1: &str| {
        format!(
            r#"code = "__kernel void k(const int rows, const int cols, __global const float* x, __global float* y) {{
                int r = get_global_id(0);
                float m = -INFINITY, s = 0.0f;
                for (int c = 0; c < cols; c++) m = fmax(m, x[r * cols + c]);
                for (int c = 0; c < cols; c++) s += exp(x[r * cols + c] - m);
                for (int c = 0; c < cols; c++) y[r * cols + c] = {p1};
            }}", params(P = [0, 1]), reference(P = 0), global = rows,
            buffers(x = rows * cols, y = rows * cols), check(y), workloads(w(rows = 64, cols = 1))"#
        )
    };
    let mut b = bench_for(
        Measurement::default(),
        &softmax("P == 1 ? 1.0f : exp(x[r * cols + c] - m) / s"),
    );
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let at = |cols: i64| -> Case {
        Case::at([("rows".to_string(), 64), ("cols".to_string(), cols)].into())
    };
    assert!(b
        .verify_at(&p(1), None, &at(1), &mut |_| {})
        .unwrap()
        .is_ok());
    let verdict = b.verify_at(&p(1), None, &at(8), &mut |_| {}).unwrap();
    assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
    assert!(b
        .verify_at(&p(0), None, &at(8), &mut |_| {})
        .unwrap()
        .is_ok());
    // an output that never varies: the annotation's mistake, refused at setup
    let constant = try_bench_for(
        Measurement::default(),
        &softmax("P == 1 ? 1.0f : 1.0f + 0.0f * s"),
    );
    assert!(
        matches!(constant, Err(SetupError::InsensitiveOutput(_))),
        "{:?}",
        constant.err()
    );
}

/// A seeded proof case met again (the next finalist, a portfolio's next candidate) compares
/// against the reference's kept run on the same inputs, and a wrong candidate is refused
/// there as on a fresh run; an unseeded case (the search's) is never kept.
#[test]
fn a_seeded_cases_reference_run_is_kept_for_the_next_finalist() {
    let mut b = bench_of(
        "__kernel void k(const int n, __global const float* x, __global float* y) {
            int i = get_global_id(0);
            y[i] = (P == 1 && i == n - 1) ? x[i] + 1.0f : 2.0f * x[i];
        }",
    );
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let mut case = Case::at(b.sizes.clone());
    case.seed = 42;
    assert!(b
        .verify_at(&p(0), None, &case, &mut |_| {})
        .unwrap()
        .is_ok());
    let first = b.take_proof_time();
    assert_eq!(b.known.runs.borrow().hits, 0);
    let verdict = b.verify_at(&p(1), None, &case, &mut |_| {}).unwrap();
    assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
    assert!(b.known.runs.borrow().hits >= 1, "the kept run was used");
    assert!(b
        .verify_at(&p(0), None, &case, &mut |_| {})
        .unwrap()
        .is_ok());
    let again = b.take_proof_time();
    assert!(
        again.reference < first.reference,
        "no reference runs the second time: {} s, then {} s",
        first.reference,
        again.reference
    );
    // another seed: other inputs, a run of its own
    let hits = b.known.runs.borrow().hits;
    case.seed = 43;
    assert!(b
        .verify_at(&p(0), None, &case, &mut |_| {})
        .unwrap()
        .is_ok());
    assert_eq!(b.known.runs.borrow().hits, hits);
    // unseeded: never kept
    case.seed = 0;
    for _ in 0..2 {
        assert!(b
            .verify_at(&p(0), None, &case, &mut |_| {})
            .unwrap()
            .is_ok());
    }
    assert_eq!(b.known.runs.borrow().hits, hits);
}

/// On inputs of large magnitude a correct kernel that rounds in another order is within
/// the output's tolerance even where a normalization's `x̂ * g + b` cancels (an element's
/// own tolerance refused it: kb-conv-gn's GroupNorm tuned on another machine), and a
/// kernel right only on the declared range is still refused.
#[test]
fn large_inputs_are_judged_at_the_outputs_magnitude() {
    let mut b = bench_for(
        Measurement::default(),
        r#"code = "__kernel void k(const int n, __global const float* x, __global const float* g,
                                  __global const float* b, __global float* y) {
            int r = get_global_id(0);
            if (r * 48 >= n) return;
            __global const float* v = x + r * 48;
            float s = 0.0f, q = 0.0f;
            for (int j = 0; j < 48; ++j) s += v[P == 1 ? 47 - j : j];
            float m = s / 48.0f;
            for (int j = 0; j < 48; ++j) { float d = v[P == 1 ? 47 - j : j] - m; q += d * d; }
            float inv = rsqrt(q / 48.0f + 1e-5f);
            for (int j = 0; j < 48; ++j) {
                float t = ((P == 2 ? clamp(v[j], -2.0f, 2.0f) : v[j]) - m) * inv;
                y[r * 48 + j] = t * g[j] + b[j];
            }
        }", params(P = [0, 1, 2]), reference(P = 0), global = n / 48,
        buffers(x = n, g = 48, b = 48, y = n), check(y, rtol = 1e-4, atol = 1e-5),
        workloads(w(n = 49152))"#,
    );
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let sizes = b.sizes.clone();
    let large = Case {
        values: Values::Large,
        sets: 4,
        seed: 7,
        ..Case::at(sizes.clone())
    };
    for (variant, case) in [
        (1, Case::at(sizes.clone())),
        (1, large.clone()),
        (2, Case::at(sizes.clone())),
    ] {
        let verdict = b.verify_at(&p(variant), None, &case, &mut |_| {}).unwrap();
        assert!(verdict.is_ok(), "P = {variant}: {verdict:?}");
    }
    // The clamp changes nothing on the declared inputs: only large ones reveal it.
    let verdict = b.verify_at(&p(2), None, &large, &mut |_| {}).unwrap();
    assert!(
        matches!(&verdict, Err(Rejection::Wrong(w)) if w.contains("large magnitude")),
        "{verdict:?}"
    );
}

/// A whole-output bound on one repeated value is widened as the element-wise tolerance is on
/// inputs judged by the reference's sensitivity: a pairwise sum of 32768 equal values (P = 1,
/// more accurate than the reference's sequential sum) passes `norm = 1e-4`, a sum that drops
/// one term in 64 (P = 2) is refused there as on the declared inputs.
#[test]
fn whole_output_bounds_are_widened_on_one_repeated_value() {
    let mut b = bench_for(
        Measurement::default(),
        r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
            int r = get_global_id(0);
            __global const float* v = x + r * 32768;
            float s = 0.0f;
            if (P == 1) {
                float part[64];
                for (int c = 0; c < 64; ++c) {
                    float t = 0.0f;
                    for (int j = 0; j < 512; ++j) t += v[c * 512 + j];
                    part[c] = t;
                }
                for (int w = 32; w > 0; w /= 2)
                    for (int c = 0; c < w; ++c) part[c] += part[c + w];
                s = part[0];
            } else {
                for (int j = 0; j < 32768; ++j) if (P == 0 || j % 64 != 0) s += v[j];
            }
            y[r] = s;
        }", params(P = [0, 1, 2]), reference(P = 0), global = n / 32768,
        buffers(x = n, y = n / 32768), check(y, norm = 1e-4), workloads(w(n = 262144))"#,
    );
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let sizes = b.sizes.clone();
    let constant = |seed: u64| Case {
        values: Values::Constant,
        seed,
        ..Case::at(sizes.clone())
    };
    for seed in [3, 5, 7] {
        let verdict = b
            .verify_at(&p(1), None, &constant(seed), &mut |_| {})
            .unwrap();
        assert!(verdict.is_ok(), "P = 1, seed {seed}: {verdict:?}");
        let verdict = b
            .verify_at(&p(2), None, &constant(seed), &mut |_| {})
            .unwrap();
        assert!(
            matches!(&verdict, Err(Rejection::Wrong(w)) if w.contains("norm")),
            "P = 2, seed {seed}: {verdict:?}"
        );
    }
    let verdict = b
        .verify_at(&p(2), None, &Case::at(sizes.clone()), &mut |_| {})
        .unwrap();
    assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
}

/// What the reference leaves in local memory is scrubbed before a candidate runs, also
/// beyond the candidate's own `__local` arrays (on a CPU device the scrub reaches as far
/// as any kernel launched here did, not the whole of local memory): a candidate that
/// reads past its small tile into the reference's large one is refused.
#[test]
fn stale_local_memory_beyond_a_candidates_arrays_is_scrubbed() {
    let mut b = bench_of(
        "__kernel void k(const int n, __global const float* x, __global float* y) {
            int i = get_global_id(0), l = get_local_id(0);
        #if P == 0
            __local float big[32768];
            for (int j = l; j < 32768; j += 64) big[j] = 2.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            y[i] = x[i] * big[30000 + l];
        #else
            __local float t[64];
            /* Written somewhere (a tile never written would be undefined to the compiler,
               which may fold its loads), read past its own 64 floats, where the
               reference's 2.0 were. */
            if (n < 0) t[l] = 0.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            y[i] = x[i] * t[l + (n > 0 ? 30000 : 0)];
        #endif
        }",
    );
    let p = |v: i64| -> Params { [("P".to_string(), v)].into() };
    let sizes = b.sizes.clone();
    let verdict = b
        .verify_at(&p(1), None, &Case::at(sizes.clone()), &mut |_| {})
        .unwrap();
    assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
    if b.not_gpu {
        assert!(
            b.scrub_reach().is_some_and(|r| r >= 32768 * 4),
            "{:?}",
            b.scrub_reach()
        );
    }
}

fn items(v: i64) -> Params {
    [("ITEMS".to_string(), v)].into()
}

/// A successful evaluation reports the largest work-group the driver allows the build,
/// and the work-group size the engine is given is the annotation's `local`.
#[test]
fn evaluations_report_the_work_group_limit_and_validity_the_group_size() {
    let mut b = bench();
    let Evaluation::Ok { descriptors, .. } = b.evaluate(&items(2), None, &mut |_| {}) else {
        panic!("the bench's kernel runs")
    };
    let limit = descriptors
        .iter()
        .find(|(n, _)| n == WORK_GROUP_LIMIT)
        .map(|(_, v)| *v);
    assert!(limit.is_some_and(|l| l >= 1.0), "{descriptors:?}");
    let sized = bench_for(
        Measurement::default(),
        r#"code = "__kernel void k(const int n, __global const float* x, __global float* y) {
            if (get_global_id(1) == 0) y[get_global_id(0)] = 2.0f * x[get_global_id(0)];
        }", params(WG = [8, 16, 32], R = [1, 2]), reference(WG = 8, R = 1),
        global = (n, R), local = (WG, R), buffers(x = n, y = n), check(y), workloads(w(n = 64))"#,
    );
    let validity = |b: &Bench| Validity::new(b.spec.clone(), b.sizes.clone(), b.limits.clone());
    let size = validity(&sized).group_size();
    assert_eq!(size.of(&vec![16, 2]), Some(32));
    assert_eq!(size.of(&vec![32, 1]), Some(32));
    // No `local`: the driver chooses, and nothing is known.
    assert_eq!(validity(&b).group_size().of(&vec![2]), None);
    // Kept answers are the answers: asked twice, each configuration as checked afresh.
    let v = validity(&sized);
    for round in 0..2 {
        for wg in [8, 16, 32, 4096] {
            for r in [1, 2] {
                let c = vec![wg, r];
                let fresh = v.check(&params_of(&v.spec, &c)).is_ok();
                assert_eq!(v.accepts(&c), fresh, "round {round}: {c:?}");
                let want = fresh.then_some((wg * r) as u64);
                assert_eq!(size.of(&c), want, "round {round}: {c:?}");
            }
        }
    }
    assert!(
        !v.accepts(&vec![4096, 1]),
        "a work-group of 4096 cannot launch at n = 64"
    );
    // A source that fixes its work-group reports no limit (its own work-group is not one).
    let mut pinned = bench_for(
        Measurement::default(),
        r#"code = "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
            void k(const int n, __global const float* x, __global float* y) {
            y[get_global_id(0)] = 2.0f * x[get_global_id(0)];
        }", params(WG = [8, 16]), reference(WG = 8),
        global = n, local = WG, buffers(x = n, y = n), check(y), workloads(w(n = 64))"#,
    );
    let wg = |v: i64| -> Params { [("WG".to_string(), v)].into() };
    let Evaluation::Ok { descriptors, .. } = pinned.evaluate(&wg(16), None, &mut |_| {}) else {
        panic!("the pinned kernel runs")
    };
    assert!(
        descriptors.iter().all(|(n, _)| n != WORK_GROUP_LIMIT),
        "{descriptors:?}"
    );
}

/// [`bench`] with the program cache in `dir`, read from.
fn cached_bench(dir: &std::path::Path) -> Bench {
    bench_with(Measurement {
        program_cache: Some(ProgramCacheUse {
            dir: dir.to_path_buf(),
            read: true,
        }),
        ..Measurement::default()
    })
}

fn is_wrong(e: &Evaluation) -> bool {
    matches!(
        e,
        Evaluation::Failed {
            kind: FailureKind::Wrong,
            ..
        }
    )
}

/// Where the cache of `b` keeps the build of `params`.
fn cache_file(b: &Bench, params: &Params) -> std::path::PathBuf {
    let (program, options) = b.build_input(&b.spec.source, params, false).unwrap();
    let cache = b.builds.program_cache.as_ref().expect("a cache");
    cache.path(&cache.key(&program, &options).expect("a key"))
}

/// A second bench on the same cache reads the first one's build instead of compiling.
#[test]
fn a_build_kept_by_one_bench_is_read_by_the_next() {
    let dir = std::env::temp_dir().join(format!("kfoundry-cache-hit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut first = cached_bench(&dir);
    assert!(first
        .evaluate(&items(2), None, &mut |_| {})
        .time()
        .is_some());
    assert_eq!(
        first.builds.built.last().map(|b| b.2),
        Some(false),
        "compiled"
    );
    assert!(cache_file(&first, &items(2)).is_file(), "kept");
    let mut second = cached_bench(&dir);
    assert!(second
        .evaluate(&items(2), None, &mut |_| {})
        .time()
        .is_some());
    assert_eq!(second.builds.built.last().map(|b| b.2), Some(true), "read");
    // Not read once sealed: the proof builds from source.
    second.seal();
    assert!(second.builds.built.is_empty());
    assert!(second
        .verify_at(
            &items(2),
            None,
            &Case::at(second.sizes.clone()),
            &mut |_| {}
        )
        .unwrap()
        .is_ok());
    assert_eq!(second.builds.built.last().map(|b| b.2), Some(false));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wrong binary in the cache under a right candidate's key (a stale compiler, a file
/// written by someone else) fails that candidate in the search, and cannot reach its
/// proof, which builds from source.
#[test]
fn a_poisoned_cache_entry_never_reaches_the_proof() {
    let dir = std::env::temp_dir().join(format!("kfoundry-cache-poison-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut b = cached_bench(&dir);
    // ITEMS=4 builds (and is kept) but is wrong at one element.
    let wrong = b.evaluate(&items(4), None, &mut |_| {});
    assert!(is_wrong(&wrong), "{wrong:?}");
    std::fs::copy(cache_file(&b, &items(4)), cache_file(&b, &items(2))).unwrap();
    let mut b = cached_bench(&dir);
    let poisoned = b.evaluate(&items(2), None, &mut |_| {});
    assert!(
        is_wrong(&poisoned),
        "ITEMS=2 ran ITEMS=4's binary: {poisoned:?}"
    );
    assert!(b
        .verify_at(&items(2), None, &Case::at(b.sizes.clone()), &mut |_| {})
        .unwrap()
        .is_ok());
    // And what follows the proof (the re-measurement) runs the source's build too.
    assert!(b.evaluate(&items(2), None, &mut |_| {}).time().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The search's candidates share pooled input sets (drawn, and run by the reference, once
/// per POOL_REUSES candidates); a finalist's verification always draws fresh ones. Wrong
/// candidates fail either way.
#[test]
fn pooled_input_sets_are_shared_and_verification_draws_fresh_ones() {
    let mut b = bench();
    let start = b.inputs.draws.get();
    for round in 0..4 {
        for v in [1, 2] {
            assert!(
                b.evaluate(&items(v), None, &mut |_| {}).time().is_some(),
                "ITEMS={v}, round {round}"
            );
        }
    }
    let pooled = b.inputs.draws.get() - start;
    // sets 0, 1, 2 start having served 0, 2 and 5 of their 8: set 2 is renewed at the 4th
    // candidate and set 1 at the 7th (fresh sets every time would be 24)
    assert_eq!(pooled, 5, "8 candidates × 3 sets drew {pooled} sets");
    let wrong = b.evaluate(&items(4), None, &mut |_| {});
    assert!(
        matches!(
            wrong,
            Evaluation::Failed {
                kind: FailureKind::Wrong,
                ..
            }
        ),
        "{wrong:?}"
    );
    // Verification at the workload's sizes: 3 fresh sets (the reference passed its check
    // there when the bench was set up, and is not checked again).
    let before = b.inputs.draws.get();
    assert!(b
        .verify_at(&items(2), None, &Case::at(b.sizes.clone()), &mut |_| {})
        .unwrap()
        .is_ok());
    assert_eq!(b.inputs.draws.get() - before, 3);
    // At other sizes: the reference checked first (two runs), once.
    let other: Sizes = b.sizes.iter().map(|(k, v)| (k.clone(), v / 2)).collect();
    for checked in [true, false] {
        let before = b.inputs.draws.get();
        assert!(b
            .verify_at(&items(2), None, &Case::at(other.clone()), &mut |_| {})
            .unwrap()
            .is_ok());
        assert_eq!(b.inputs.draws.get() - before, if checked { 5 } else { 3 });
    }
    // The value-dependent bug is caught on fresh inputs as on pooled ones (4096 elements,
    // 3 sets: about 60 elements above 0.99).
    let verdict = b
        .verify_at(&items(8), None, &Case::at(b.sizes.clone()), &mut |_| {})
        .unwrap();
    assert!(matches!(verdict, Err(Rejection::Wrong(_))), "{verdict:?}");
    let timed = b.evaluate(&items(1), None, &mut |_| {});
    assert!(
        timed
            .measured()
            .iter()
            .any(|(name, noise)| name == TIMING_NOISE && noise.is_finite() && *noise >= 0.0),
        "{timed:?}"
    );
}
