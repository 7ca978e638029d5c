//! Runtime dispatch on a real OpenCL device (PoCL in CI): the chain exact device → same device
//! with another driver → same family → nearest known device → reference, constraints checked
//! per call, the fallback when a foreign variant fails here, and the program cache.

use kfoundry::model::spec::Params;
use kfoundry::model::variant::Variant;
use kfoundry::ocl::{Buffer, Context, Device, Queue};
use kfoundry::{DeviceKey, Evolved, Step};

/// y[i] = 2·x[i] + y[i], with a tunable work-group size and a per-item count.
#[kfoundry::evolve(
    code = "__kernel void twice(const int n, __global const float* x, __global float* y) {
        for (int k = 0; k < ITEMS; ++k) { int i = get_global_id(0) * ITEMS + k; y[i] = 2.0f * x[i] + y[i]; }
    }",
    params(WG = [16, 32, 64], ITEMS = [1, 2, 4]),
    reference(WG = 16, ITEMS = 1),
    require(n % (WG * ITEMS) == 0),
    global = n / ITEMS, local = WG,
    buffers(x = n, y = n),
    inputs(y = uniform(-1.0, 1.0)),
    check(y),
    workloads(small(n = 1024), large(n = 1 << 16)),
)]
pub struct Twice;

fn setup() -> (Queue, Device) {
    let (platform, device) =
        kfoundry::default_device().expect("an OpenCL device (install pocl-opencl-icd)");
    let context = Context::builder()
        .platform(platform)
        .devices(device)
        .build()
        .expect("context");
    (Queue::new(&context, device, None).expect("queue"), device)
}

fn params(wg: i64, items: i64) -> Params {
    [("WG".to_string(), wg), ("ITEMS".to_string(), items)]
        .into_iter()
        .collect()
}

/// A variant as a tune records it: verified from the smallest size its parameters allow up to
/// 2^20.
fn variant(device: &DeviceKey, workload: &str, n: i64, p: Params) -> Variant {
    let smallest = p["WG"] * p["ITEMS"];
    let proven = [smallest, n, 1 << 20]
        .iter()
        .map(|&v| [("n".to_string(), v)].into_iter().collect())
        .collect();
    Variant {
        device: device.to_string(),
        workload: workload.into(),
        sizes: [("n".to_string(), n)].into_iter().collect(),
        params: p,
        time_ns: 100,
        reference_time_ns: 200,
        evaluations: 10,
        failures: 0,
        source: None,
        proven,
        scalars: Default::default(),
        proof: 2,
        partial: false,
        general: false,
        floor: None,
        device_info: None,
    }
}

/// An `Evolved` with the same spec as `Twice` and the given variants (as the macro would embed
/// them from a lockfile).
fn with_variants(variants: &[Variant]) -> &'static Evolved {
    let spec = serde_json::to_string(Twice::evolved().spec().unwrap()).unwrap();
    let variants = serde_json::to_string(variants).unwrap();
    Box::leak(Box::new(Evolved::new(
        Box::leak(spec.into_boxed_str()),
        Box::leak(variants.into_boxed_str()),
    )))
}

/// Runs `kernel` at size `n` and checks the result on the host.
fn run_and_check(kernel: &Evolved, queue: &Queue, n: usize) -> Step {
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let (step, y) = launch_xy(kernel, queue, &x, &y0);
    for i in 0..n {
        assert_eq!(y[i], 2.0 * x[i] + y0[i], "element {i} after {step}");
    }
    step
}

/// Dispatches `kernel(n, x, y)` at n = `x.len()` with `y` holding `y0` first: the step taken
/// and `y` after.
fn launch_xy(kernel: &Evolved, queue: &Queue, x: &[f32], y0: &[f32]) -> (Step, Vec<f32>) {
    let upload = |v: &[f32]| {
        Buffer::builder()
            .queue(queue.clone())
            .len(v.len())
            .copy_host_slice(v)
            .build()
            .unwrap()
    };
    let (xb, yb) = (upload(x), upload(y0));
    let step = kernel
        .launch(
            queue,
            &[("n", x.len())],
            &[
                kfoundry::Arg::Buffer(xb.as_core()),
                kfoundry::Arg::Buffer(yb.as_core()),
            ],
        )
        .unwrap();
    let mut y = vec![0f32; y0.len()];
    yb.read(&mut y).enq().unwrap();
    (step, y)
}

#[test]
fn no_lockfile_entry_means_reference() {
    let (queue, device) = setup();
    // The generated launcher: typed buffers, sizes first.
    let n = 256;
    let x = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .fill_val(1.0)
        .build()
        .unwrap();
    let y = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .fill_val(0.5)
        .build()
        .unwrap();
    assert_eq!(Twice::launch(&queue, n, &x, &y).unwrap(), Step::Reference);
    let mut out = vec![0f32; n];
    y.read(&mut out).enq().unwrap();
    assert!(out.iter().all(|v| *v == 2.5));
    let why = Twice::explain(&device, n).unwrap().to_string();
    assert!(why.contains("no variant in the lockfile"), "{why}");
}

#[test]
fn unknown_device_gets_the_reference() {
    let (queue, _) = setup();
    let h200 = DeviceKey::from_reported(0x10de, "NVIDIA H200", "580.95.05", "OpenCL 3.0 CUDA");
    let k = with_variants(&[variant(&h200, "large", 1 << 16, params(64, 4))]);
    assert_eq!(run_and_check(k, &queue, 4096), Step::Reference);
}

#[test]
fn exact_device_and_constraints_per_call() {
    let (queue, device) = setup();
    let here = kfoundry::device_key(&device).unwrap();
    let k = with_variants(&[
        variant(&here, "large", 1 << 16, params(64, 4)),
        variant(&here, "small", 1024, params(32, 1)),
    ]);
    // Nearest workload, constraints hold: the tuned variant.
    assert_eq!(run_and_check(k, &queue, 1 << 15), Step::ExactDevice);
    assert_eq!(
        k.explain(&device, &[("n", 1 << 15)]).unwrap().params,
        params(64, 4)
    );
    // n = 96·2: "large" (needs n % 256 == 0) is skipped; "small" (n % 32 == 0) is valid.
    let n = 96 * 2;
    assert_eq!(run_and_check(k, &queue, n), Step::ExactDevice);
    assert_eq!(
        k.explain(&device, &[("n", n)]).unwrap().params,
        params(32, 1)
    );
    // n = 48: only the reference (n % 16 == 0) can run.
    assert_eq!(run_and_check(k, &queue, 48), Step::Reference);
    // n = 50: nothing can run; an error value, not a panic.
    let err = k.explain(&device, &[("n", 50)]).unwrap_err().to_string();
    assert!(err.contains("does not hold"), "{err}");
}

#[test]
fn same_device_other_driver() {
    let (queue, device) = setup();
    let mut other = kfoundry::device_key(&device).unwrap();
    other.driver = "0.0-some-other-driver".into();
    let k = with_variants(&[variant(&other, "large", 1 << 16, params(32, 2))]);
    assert_eq!(run_and_check(k, &queue, 4096), Step::SameDeviceOtherDriver);
}

#[test]
fn programs_are_built_once_per_context_and_variant() {
    let (queue, device) = setup();
    let here = kfoundry::device_key(&device).unwrap();
    let k = with_variants(&[variant(&here, "large", 1 << 16, params(64, 4))]);
    run_and_check(k, &queue, 1 << 12);
    run_and_check(k, &queue, 1 << 13);
    assert_eq!(k.cached_programs(), 1);
    // Another context needs its own program.
    let (queue2, _) = setup();
    run_and_check(k, &queue2, 1 << 12);
    assert_eq!(k.cached_programs(), 2);
}

/// A device description like this machine's, under another name (so another family).
fn described_like_here(device: &Device, kind: &str) -> (DeviceKey, kfoundry::DeviceInfo) {
    let here = kfoundry::device_key(device).unwrap();
    let key = DeviceKey::from_reported(here.vendor_id, "some other cpu 9000", "1.0", "OpenCL 3.0");
    let info = kfoundry::DeviceInfo {
        name: "some other cpu 9000".into(),
        kind: kind.into(),
        compute_units: 4,
        max_work_group_size: 1024,
        ..Default::default()
    };
    (key, info)
}

#[test]
fn nearest_known_device_of_the_same_kind() {
    let (queue, device) = setup();
    let (other_cpu, cpu_info) = described_like_here(&device, "cpu");
    let (other_gpu, gpu_info) = described_like_here(&device, "gpu");
    let other_gpu = DeviceKey {
        name: "some gpu 9000".into(),
        ..other_gpu
    };
    let described = |key: &DeviceKey, p: Params, info: &kfoundry::DeviceInfo| Variant {
        device_info: Some(info.clone()),
        ..variant(key, "large", 1 << 16, p)
    };
    // the CPU-like device's variant is used; a GPU's never is on this CPU
    let k = with_variants(&[
        described(&other_gpu, params(64, 4), &gpu_info),
        described(&other_cpu, params(32, 2), &cpu_info),
    ]);
    assert_eq!(run_and_check(k, &queue, 1 << 12), Step::NearestDevice);
    let why = k.explain(&device, &[("n", 1 << 12)]).unwrap();
    assert_eq!(why.params, params(32, 2));
    assert!(
        why.to_string().contains("most similar known device"),
        "{why}"
    );
    let only_gpu = with_variants(&[described(&other_gpu, params(64, 4), &gpu_info)]);
    assert_eq!(run_and_check(only_gpu, &queue, 1 << 12), Step::Reference);
}

#[test]
fn a_foreign_variant_that_fails_here_falls_back_to_the_reference() {
    let (queue, device) = setup();
    let (other_cpu, cpu_info) = described_like_here(&device, "cpu");
    // a source-level variant whose generated source does not build on this device
    let broken = Variant {
        device_info: Some(cpu_info),
        source: Some("00000000000000aa".into()),
        ..variant(&other_cpu, "large", 1 << 16, params(32, 2))
    };
    let spec = serde_json::to_string(Twice::evolved().spec().unwrap()).unwrap();
    let variants = serde_json::to_string(&[broken]).unwrap();
    let sources = r#"{"00000000000000aa": "__kernel void twice(const int n, __global const float* x, __global float* y) { not OpenCL }"}"#;
    let k: &'static Evolved = Box::leak(Box::new(Evolved::with_sources(
        Box::leak(spec.into_boxed_str()),
        Box::leak(variants.into_boxed_str()),
        sources,
    )));
    assert_eq!(
        k.explain(&device, &[("n", 1 << 12)]).unwrap().step,
        Step::NearestDevice
    );
    // the call still computes the right result, with the reference, and says why
    assert_eq!(run_and_check(k, &queue, 1 << 12), Step::Reference);
    let why = k.explain(&device, &[("n", 1 << 12)]).unwrap();
    assert_eq!(why.step, Step::Reference);
    assert!(
        why.to_string().contains("failed to build on this device"),
        "{why}"
    );
    // and every later call at these sizes goes straight to the reference
    assert_eq!(run_and_check(k, &queue, 1 << 12), Step::Reference);
}

/// Buffers of `len` elements holding 1.0 (x) and 0.5 (y).
fn buffers(queue: &Queue, len: usize) -> (Buffer<f32>, Buffer<f32>) {
    let x = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(len)
        .fill_val(1.0)
        .build()
        .unwrap();
    let y = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(len)
        .fill_val(0.5)
        .build()
        .unwrap();
    (x, y)
}

fn read(b: &Buffer<f32>) -> Vec<f32> {
    let mut out = vec![0f32; b.len()];
    b.read(&mut out).enq().unwrap();
    out
}

#[test]
fn launchers_refuse_short_buffers_before_anything_runs() {
    let (queue, _) = setup();
    // 16-element buffers for n = 2^22 (the memory corruption the trust issue found) and n = 64.
    for n in [1 << 22, 64] {
        let (x, y) = buffers(&queue, 16);
        let e = Twice::launch(&queue, n, &x, &y).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, kfoundry::Error::BufferTooSmall { ref arg, needed, given: 16, .. } if arg == "x" && needed == n),
            "{text}"
        );
        assert!(
            text.contains("buffer `x` holds 16 element(s) of `float`, the call needs at least"),
            "{text}"
        );
        assert!(read(&y).iter().all(|v| *v == 0.5), "nothing ran");
    }
    // only the output is short
    let x = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(256)
        .fill_val(1.0)
        .build()
        .unwrap();
    let y = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(255)
        .fill_val(0.5)
        .build()
        .unwrap();
    let e = Twice::launch(&queue, 256, &x, &y).unwrap_err();
    assert!(
        matches!(e, kfoundry::Error::BufferTooSmall { ref arg, needed: 256, given: 255, .. } if arg == "y"),
        "{e}"
    );
    // larger buffers than needed are fine: the kernel uses the first n elements
    let (x, y) = buffers(&queue, 512);
    assert_eq!(Twice::launch(&queue, 256, &x, &y).unwrap(), Step::Reference);
    let out = read(&y);
    assert!(out[..256].iter().all(|v| *v == 2.5) && out[256..].iter().all(|v| *v == 0.5));
}

/// Dispatch keeps what it decided and checked on the first call at given sizes (the launch
/// plan); every later call's arguments are still checked against it before anything runs.
#[test]
fn every_call_is_checked_not_only_the_first() {
    let (queue, _) = setup();
    let k = Twice::evolved();
    let (x, y) = buffers(&queue, 128);
    assert_eq!(Twice::launch(&queue, 128, &x, &y).unwrap(), Step::Reference);
    assert!(read(&y).iter().all(|v| *v == 2.5));
    // Same sizes again: a short buffer, a scalar for a buffer, a missing argument.
    let (short_x, _) = buffers(&queue, 127);
    let e = Twice::launch(&queue, 128, &short_x, &y).unwrap_err();
    assert!(
        matches!(e, kfoundry::Error::BufferTooSmall { ref arg, needed: 128, given: 127, .. } if arg == "x"),
        "{e}"
    );
    use kfoundry::{Arg, Scalar};
    assert!(k
        .launch(
            &queue,
            &[("n", 128)],
            &[Arg::Scalar(Scalar::F32(1.0)), Arg::Buffer(y.as_core())]
        )
        .is_err());
    assert!(k
        .launch(&queue, &[("n", 128)], &[Arg::Buffer(x.as_core())])
        .is_err());
    // A larger size on the same (now too short) buffers: a new plan, refused.
    assert!(Twice::launch(&queue, 256, &x, &y).is_err());
    assert!(
        read(&y).iter().all(|v| *v == 2.5),
        "nothing ran after the first call"
    );
    // And the plan still launches what it should.
    assert_eq!(Twice::launch(&queue, 128, &x, &y).unwrap(), Step::Reference);
    assert!(read(&y).iter().all(|v| *v == 4.5));
}

/// Calls at ever new sizes: the caches start afresh rather than grow, and every launch is
/// still right.
#[test]
fn launches_at_ever_new_sizes_keep_the_caches_bounded() {
    let (queue, _) = setup();
    let k = with_variants(&[]);
    let (x, y) = buffers(&queue, 16 * 1100);
    for i in 1..=1100 {
        let n = 16 * i;
        assert_eq!(
            k.launch(
                &queue,
                &[("n", n)],
                &[
                    kfoundry::Arg::Buffer(x.as_core()),
                    kfoundry::Arg::Buffer(y.as_core())
                ]
            )
            .unwrap(),
            Step::Reference
        );
        assert!(k.cached_launches() <= kfoundry::opencl::evolved::MAX_CACHED_SIZES);
    }
    assert!(k.cached_launches() < 1100, "{}", k.cached_launches());
    // y[i] was updated once for every call with n > i: 1100 - i / 16 times, from 0.5 by 2.0 each.
    let out = read(&y);
    for i in [0, 15, 16, 16 * 1099, 16 * 1100 - 1] {
        assert_eq!(out[i], 0.5 + 2.0 * (1100 - i / 16) as f32, "element {i}");
    }
}

#[test]
fn empty_and_impossible_sizes_are_errors_not_launches() {
    let (queue, device) = setup();
    let (x, y) = buffers(&queue, 64);
    // Size 0: refused with a typed error that says so (nothing is launched).
    let e = Twice::launch(&queue, 0, &x, &y).unwrap_err();
    assert!(
        matches!(e, kfoundry::Error::Sizes { source: kfoundry::model::spec::LaunchError::ZeroSize(ref n), .. } if n == "n"),
        "{e}"
    );
    assert!(Twice::explain(&device, 0).is_err());
    // A size that does not fit the kernel's `int n`, or usize beyond i64: `explain` refuses
    // what `launch` refuses, with the same error.
    let big = (i32::MAX as usize + 1) * 16;
    for n in [big, 1 << 31, 1 << 62, usize::MAX] {
        let launched = Twice::launch(&queue, n, &x, &y).unwrap_err().to_string();
        let explained = Twice::explain(&device, n).unwrap_err().to_string();
        assert_eq!(explained, launched, "n = {n}");
    }
    assert!(read(&y).iter().all(|v| *v == 0.5), "nothing ran");
}

#[test]
fn raw_arguments_are_checked_like_typed_ones() {
    let (queue, _) = setup();
    let (x, y) = buffers(&queue, 64);
    let k = Twice::evolved();
    use kfoundry::{Arg, Scalar};
    // too few, too many, a scalar where a buffer goes
    assert!(k
        .launch(&queue, &[("n", 64)], &[Arg::Buffer(x.as_core())])
        .is_err());
    assert!(k
        .launch(
            &queue,
            &[("n", 64)],
            &[
                Arg::Buffer(x.as_core()),
                Arg::Buffer(y.as_core()),
                Arg::Scalar(Scalar::F32(1.0))
            ]
        )
        .is_err());
    let e = k
        .launch(
            &queue,
            &[("n", 64)],
            &[Arg::Scalar(Scalar::F32(1.0)), Arg::Buffer(y.as_core())],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("expected a buffer of `float`"),
        "{e}"
    );
    // a byte buffer of the right length in bytes is accepted; one element short is not
    let bytes = Buffer::<u8>::builder()
        .queue(queue.clone())
        .len(64 * 4)
        .build()
        .unwrap();
    assert!(k
        .launch(
            &queue,
            &[("n", 64)],
            &[Arg::Buffer(bytes.as_core()), Arg::Buffer(y.as_core())]
        )
        .is_ok());
    let short = Buffer::<u8>::builder()
        .queue(queue.clone())
        .len(64 * 4 - 1)
        .build()
        .unwrap();
    assert!(k
        .launch(
            &queue,
            &[("n", 64)],
            &[Arg::Buffer(short.as_core()), Arg::Buffer(y.as_core())]
        )
        .is_err());
    // sizes the kernel does not have
    assert!(k
        .launch(
            &queue,
            &[("m", 64)],
            &[Arg::Buffer(x.as_core()), Arg::Buffer(y.as_core())]
        )
        .is_err());
    // launch_params: only declared parameters with values of their domains reach the compiler
    let injected: Params = [
        ("WG".to_string(), 16),
        ("ITEMS".to_string(), 1),
        ("X -cl-fast-relaxed-math -DITEMS".to_string(), 1),
    ]
    .into();
    // SAFETY (all three): configurations of this kernel stay within `n` elements.
    let e = unsafe { Twice::launch_params(&queue, &injected, 64, &x, &y) }.unwrap_err();
    assert!(e.to_string().contains("is not a parameter"), "{e}");
    let e = unsafe { Twice::launch_params(&queue, &params(3, 1), 64, &x, &y) }.unwrap_err();
    assert!(
        e.to_string()
            .contains("WG=3 is not in the parameter's domain"),
        "{e}"
    );
    assert!(unsafe { Twice::launch_params(&queue, &params(16, 1), 64, &x, &y) }.is_ok());
    assert!(Twice::launch_reference(&queue, 64, &x, &y).is_ok());
}

#[test]
fn variants_run_only_at_sizes_they_were_proven_at() {
    let (queue, device) = setup();
    let here = kfoundry::device_key(&device).unwrap();
    let mut v = variant(&here, "large", 1 << 16, params(64, 4));
    v.proven = [1 << 14, 1 << 16, 1 << 17]
        .iter()
        .map(|&n| [("n".to_string(), n)].into_iter().collect())
        .collect();
    let k = with_variants(&[v]);
    assert_eq!(run_and_check(k, &queue, 1 << 15), Step::ExactDevice);
    assert_eq!(run_and_check(k, &queue, 1 << 18), Step::Reference);
    let why = k.explain(&device, &[("n", 1 << 18)]).unwrap().to_string();
    assert!(
        why.contains("n=262144 is outside 16384..=131072, the range it was verified at"),
        "{why}"
    );
}

#[test]
fn embedded_variants_that_disagree_with_the_annotation_are_refused() {
    let (queue, _) = setup();
    let here = kfoundry::device_key(&queue.device()).unwrap();
    let mut injected = variant(&here, "large", 1 << 16, params(64, 4));
    injected
        .params
        .insert("X -cl-fast-relaxed-math -DITEMS".into(), 1);
    let mut outside = variant(&here, "large", 1 << 16, params(64, 4));
    outside.params.insert("WG".into(), 3);
    for bad in [injected, outside] {
        let k = with_variants(&[bad]);
        let (x, y) = buffers(&queue, 1 << 12);
        let e = k
            .launch(
                &queue,
                &[("n", 1 << 12)],
                &[
                    kfoundry::Arg::Buffer(x.as_core()),
                    kfoundry::Arg::Buffer(y.as_core()),
                ],
            )
            .unwrap_err();
        assert!(matches!(e, kfoundry::Error::Embedded { .. }), "{e}");
    }
}

#[test]
fn an_exact_device_variant_that_fails_here_falls_back_to_the_reference() {
    let (queue, device) = setup();
    let here = kfoundry::device_key(&device).unwrap();
    let broken = Variant {
        source: Some("00000000000000bb".into()),
        ..variant(&here, "large", 1 << 16, params(32, 2))
    };
    let spec = serde_json::to_string(Twice::evolved().spec().unwrap()).unwrap();
    let variants = serde_json::to_string(&[broken]).unwrap();
    let sources = r#"{"00000000000000bb": "__kernel void twice(const int n, __global const float* x, __global float* y) { not OpenCL }"}"#;
    let k: &'static Evolved = Box::leak(Box::new(Evolved::with_sources(
        Box::leak(spec.into_boxed_str()),
        Box::leak(variants.into_boxed_str()),
        sources,
    )));
    assert_eq!(
        k.explain(&device, &[("n", 1 << 12)]).unwrap().step,
        Step::ExactDevice
    );
    assert_eq!(run_and_check(k, &queue, 1 << 12), Step::Reference);
    assert!(k
        .explain(&device, &[("n", 1 << 12)])
        .unwrap()
        .to_string()
        .contains("failed to build on this device"));
}

/// y = 2·x + y, written to run in place: `y` may be the very buffer `x`.
#[kfoundry::evolve(
    code = "__kernel void inplace(const int n, __global const float* x, __global float* y) { int i = get_global_id(0); y[i] = 2.0f * x[i] + y[i]; }",
    params(WG = [16, 32]),
    reference(WG = 16),
    global = n, local = WG,
    buffers(x = n, y = n),
    inputs(y = uniform(-1.0, 1.0)),
    in_place(y = x),
    check(y),
    workloads(w(n = 1024)),
)]
pub struct InPlace;

/// A written buffer that is, or overlaps, another argument is refused before anything runs
/// (no variant was verified sharing memory), unless the annotation declares that exact
/// aliasing; so is a buffer of another context.
#[test]
fn launchers_refuse_aliased_and_foreign_buffers() {
    let (queue, _) = setup();
    let n = 256;
    let (x, y) = buffers(&queue, n);
    // the same buffer as input and output
    let e = Twice::launch(&queue, n, &y, &y).unwrap_err();
    assert!(matches!(e, kfoundry::Error::Aliasing { .. }), "{e}");
    assert!(
        e.to_string().contains("is the same memory as")
            && e.to_string().contains("in_place(y = x)"),
        "{e}"
    );
    assert!(read(&y).iter().all(|v| *v == 0.5), "nothing ran");
    // overlapping parts of one allocation
    let whole = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(2 * n)
        .fill_val(1.0)
        .build()
        .unwrap();
    let part = |origin: usize| {
        let region = kfoundry::ocl::core::BufferRegion::<f32>::new(origin, n);
        kfoundry::ocl::core::create_sub_buffer(
            whole.as_core(),
            kfoundry::ocl::flags::MEM_READ_WRITE,
            &region,
        )
        .unwrap()
    };
    let (a, b, c) = (part(0), part(n / 2), part(n));
    let raw = |k: &Evolved, x: &kfoundry::ocl::core::Mem, y: &kfoundry::ocl::core::Mem| {
        k.launch(
            &queue,
            &[("n", n)],
            &[kfoundry::Arg::Buffer(x), kfoundry::Arg::Buffer(y)],
        )
    };
    let e = raw(Twice::evolved(), &a, &b).unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
    // disjoint parts are fine
    assert!(raw(Twice::evolved(), &a, &c).is_ok());
    // a buffer of another context
    let (platform, device) = kfoundry::default_device().unwrap();
    let other = Context::builder()
        .platform(platform)
        .devices(device)
        .build()
        .unwrap();
    let other_queue = Queue::new(&other, device, None).unwrap();
    let stranger = Buffer::<f32>::builder()
        .queue(other_queue)
        .len(n)
        .fill_val(1.0)
        .build()
        .unwrap();
    let e = Twice::launch(&queue, n, &stranger, &y).unwrap_err();
    assert!(e.to_string().contains("another OpenCL context"), "{e}");
    // declared in place: exactly the same buffer is accepted (and computes in place)...
    let z = Buffer::<f32>::builder()
        .queue(queue.clone())
        .len(n)
        .fill_val(1.5)
        .build()
        .unwrap();
    InPlace::launch(&queue, n, &z, &z).unwrap();
    assert!(read(&z).iter().all(|v| *v == 4.5), "{:?}", &read(&z)[..4]);
    // ...a partial overlap still is not
    let e = raw(InPlace::evolved(), &a, &b).unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
    let _ = x;
}

/// y = x by way of a scratch buffer the launcher owns (`scratch(ws)`): P = 1 adds x into ws,
/// reads it back and clears it, so its result is right only where a launch finds ws all zero.
#[kfoundry::evolve(
    code = "__kernel void through(const int n, __global const float* x, __global float* y, __global float* ws) {
        int i = get_global_id(0);
        if (P == 1) { ws[i] += x[i]; y[i] = ws[i]; ws[i] = 0.0f; } else { y[i] = x[i]; }
    }",
    params(P = [0, 1]),
    reference(P = 0),
    global = n, local = 16,
    buffers(x = n, y = n, ws = n * P + 1),
    scratch(ws),
    check(y),
    workloads(w(n = 256)),
)]
pub struct Through;

/// A kernel's scratch is the launcher's: the caller passes its own buffers only, and every
/// launch (of a dispatched variant, on two queues, at new sizes) finds the scratch all zero;
/// an out-of-order queue, where two launches could share it at once, is refused.
#[test]
fn scratch_is_the_launchers_and_zero_at_every_launch() {
    let (queue, device) = setup();
    let here = kfoundry::device_key(&device).unwrap();
    let spec = Through::evolved().spec().unwrap();
    let p1: Params = [("P".to_string(), 1)].into_iter().collect();
    let v = Variant {
        proven: [16, 256, 1 << 14]
            .iter()
            .map(|&n| [("n".to_string(), n)].into_iter().collect())
            .collect(),
        device: here.to_string(),
        workload: "w".into(),
        sizes: [("n".to_string(), 256)].into_iter().collect(),
        params: p1,
        time_ns: 100,
        reference_time_ns: 200,
        evaluations: 10,
        failures: 0,
        source: None,
        scalars: Default::default(),
        proof: 2,
        partial: false,
        general: false,
        floor: None,
        device_info: None,
    };
    let k: &'static Evolved = Box::leak(Box::new(Evolved::new(
        Box::leak(serde_json::to_string(spec).unwrap().into_boxed_str()),
        Box::leak(serde_json::to_string(&[v]).unwrap().into_boxed_str()),
    )));
    let run = |queue: &Queue, n: usize| {
        let x: Vec<f32> = (0..n).map(|i| i as f32 + 0.25).collect();
        let (step, y) = launch_xy(k, queue, &x, &vec![-1.0; n]);
        assert_eq!(y, x, "at n = {n} ({step})");
        step
    };
    for _ in 0..3 {
        assert_eq!(run(&queue, 256), Step::ExactDevice);
    }
    assert_eq!(run(&queue, 1024), Step::ExactDevice);
    let (queue2, _) = setup();
    assert_eq!(run(&queue2, 256), Step::ExactDevice);
    assert_eq!(run(&queue, 256), Step::ExactDevice);
    // An out-of-order queue: refused before anything runs.
    let context = queue.context();
    let ooo = Queue::new(
        &context,
        device,
        Some(kfoundry::ocl::flags::QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE),
    );
    if let Ok(ooo) = ooo {
        let x = Buffer::<f32>::builder()
            .queue(ooo.clone())
            .len(256)
            .fill_val(1.0)
            .build()
            .unwrap();
        let y = Buffer::<f32>::builder()
            .queue(ooo.clone())
            .len(256)
            .fill_val(0.0)
            .build()
            .unwrap();
        let e = k
            .launch(
                &ooo,
                &[("n", 256)],
                &[
                    kfoundry::Arg::Buffer(x.as_core()),
                    kfoundry::Arg::Buffer(y.as_core()),
                ],
            )
            .unwrap_err();
        assert!(e.to_string().contains("in-order queue"), "{e}");
    }
}
