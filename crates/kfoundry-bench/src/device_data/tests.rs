//! The device-side draws, poisoning and comparisons against their host twins.

use super::*;

fn setup() -> (Session, DeviceData) {
    let session = Session::on_device(0).expect("an OpenCL device (PoCL in CI)");
    let limits = session.limits().expect("limits");
    let dd = DeviceData::new(&session, &limits).expect("kernels");
    assert!(
        dd.scrub.is_some(),
        "the local-memory scrub builds and runs on this device"
    );
    dd.scrub_local_memory(&session, None).expect("scrub");
    (session, dd)
}

fn read(b: &DeviceBuffer) -> Vec<f32> {
    let mut bytes = vec![0u8; b.len()];
    b.read(0, &mut bytes).expect("read");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn draws_are_seeded_in_range_and_compared_like_on_the_host() {
    let (session, dd) = setup();
    let n = MIN_BYTES / 4;
    let buf = || session.alloc(n * 4).expect("buffer");
    let (a, b, c) = (buf(), buf(), buf());
    let uniform = Resolved::Uniform { lo: -2.0, hi: 3.0 };
    dd.draw(&session, &a, ScalarType::F32, n, uniform, 42)
        .unwrap();
    dd.draw(&session, &b, ScalarType::F32, n, uniform, 42)
        .unwrap();
    dd.draw(&session, &c, ScalarType::F32, n, uniform, 43)
        .unwrap();
    let (va, vc) = (read(&a), read(&c));
    assert!(va.iter().all(|&x| (-2.0..3.0).contains(&x)));
    let mean = va.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    assert_eq!(va, read(&b), "same seed, same inputs");
    assert!(
        va.iter().zip(&vc).filter(|(x, y)| x == y).count() < n / 1000,
        "another seed, other inputs"
    );

    let same = dd
        .compare(&session, &a, &b, ScalarType::F32, n, 0.0, 0.0)
        .unwrap();
    assert!(
        same.ok() && same.max_abs == 0.0 && same.rel_norm == 0.0,
        "{same:?}"
    );
    let other = dd
        .compare(&session, &c, &a, ScalarType::F32, n, 1e-5, 0.0)
        .unwrap();
    assert!(
        other.mismatches > n / 2 && other.rel_norm > 0.1,
        "{other:?}"
    );

    // A NaN where the reference is finite, and a small error within tolerance.
    let mut v = va.clone();
    v[123_457] = f32::NAN;
    v[9] *= 1.0 + 1e-7;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let d_bytes = session.upload(&bytes).unwrap();
    let one = dd
        .compare(&session, &d_bytes, &a, ScalarType::F32, n, 1e-5, 0.0)
        .unwrap();
    assert_eq!(one.mismatches, 1, "{one:?}");
    assert_eq!(one.first.map(|f| f.0), Some(123_457));
    assert!(one.first.is_some_and(|f| f.1.is_nan()));

    // The error norm at the ends of float's range: squares of 1e30 overflow float and
    // squares of 1e-30 underflow it, which made the norm NaN (passing `norm = ...`) or
    // zero; a 1% error is a 1% norm at every magnitude.
    for magnitude in [1e30f32, 1e-30, 1e-41] {
        let scaled = |k: f32| -> Vec<u8> {
            va.iter()
                .flat_map(|x| (x * magnitude * k).to_ne_bytes())
                .collect()
        };
        let (r, c) = (
            session.upload(&scaled(1.0)).unwrap(),
            session.upload(&scaled(1.01)).unwrap(),
        );
        let cmp = dd
            .compare(&session, &c, &r, ScalarType::F32, n, 0.0, f64::INFINITY)
            .unwrap();
        let want = if magnitude < 1e-38 { 0.05 } else { 1e-4 };
        assert!((cmp.rel_norm - 0.01).abs() < want, "{magnitude}: {cmp:?}");
    }

    // Poisoned (all bits set) outputs are NaN: nothing written means everything differs.
    dd.poison(&session, &a, n * 4).unwrap();
    assert_eq!(
        dd.compare(&session, &a, &b, ScalarType::F32, n, 1e-3, 1e-3)
            .unwrap()
            .mismatches,
        n
    );
    // A buffer too short for what is asked is an error, not a launch.
    assert!(dd
        .draw(
            &session,
            &session.alloc(16).unwrap(),
            ScalarType::F32,
            n,
            uniform,
            1
        )
        .is_err());
}

/// Off a GPU the scrub's work-groups wait until one has started on every compute unit; a
/// device that cannot run that many at once (here: one more than PoCL's threads) gives the
/// wait up once, when the scrub is built, and the scrub never waits again.
#[test]
fn the_scrub_waits_for_every_unit_only_where_they_run_at_once() {
    let session = Session::on_device(0).expect("an OpenCL device (PoCL in CI)");
    let limits = session.limits().expect("limits");
    if session.is_gpu() {
        return;
    }
    let scrub = scrub_kernel(&session, &limits).expect("a scrub");
    assert_eq!(scrub.units, limits.compute_units.max(1));
    let more = Limits {
        compute_units: limits.compute_units + 1,
        ..limits.clone()
    };
    let scrub = scrub_kernel(&session, &more).expect("a scrub");
    assert_eq!(scrub.units, 1, "the wait was given up once");
}

#[test]
fn edge_values_prefills_and_random_words_on_the_device() {
    let (session, dd) = setup();
    let n = 1 << 18;
    let buf = session.alloc(n * 4).unwrap();
    let d = Resolved::Uniform { lo: -1.0, hi: 1.0 };
    dd.draw_values(
        &session,
        &buf,
        ScalarType::F32,
        n,
        d,
        Values::Specials { nonfinite: true },
        5,
    )
    .unwrap();
    let v = read(&buf);
    assert!(
        v.iter().any(|x| x.is_nan())
            && v.iter().any(|x| x.is_infinite())
            && v.iter().any(|x| *x == 0.0 && x.is_sign_negative())
    );
    assert!(v.iter().filter(|x| !x.is_finite()).count() < n / 512);
    assert!(v
        .iter()
        .filter(|x| x.is_finite())
        .all(|x| (-1.0..1.0).contains(x)));
    dd.draw_values(&session, &buf, ScalarType::F32, n, d, Values::Large, 5)
        .unwrap();
    assert!(read(&buf)
        .iter()
        .all(|x| x % 1024.0 == 0.0 && x.abs() <= 8192.0));
    dd.fill_words(&session, &buf, n * 4, 0).unwrap();
    assert!(read(&buf).iter().all(|x| *x == 0.0));
    dd.random_words(&session, &buf, n * 4, 9).unwrap();
    let words = bytes_of(&buf);
    assert!(
        words.chunks_exact(4).filter(|w| w == &[0, 0, 0, 0]).count() < 4,
        "random bytes"
    );
}

/// A 16-bit buffer's elements, decoded.
fn read16(b: &DeviceBuffer, ty: ScalarType) -> Vec<f64> {
    let bytes = bytes_of(b);
    (0..bytes.len() / 2)
        .map(|i| decode(ty, &bytes, i))
        .collect()
}

#[test]
fn sixteen_bit_floats_are_drawn_and_compared_on_the_device() {
    let (session, dd) = setup();
    let n = MIN_BYTES / 2;
    for ty in [ScalarType::F16, ScalarType::Bf16] {
        let buf = || session.alloc(n * 2).expect("buffer");
        let (a, b, c) = (buf(), buf(), buf());
        let uniform = Resolved::Uniform { lo: -2.0, hi: 3.0 };
        for (x, seed) in [(&a, 42), (&b, 42), (&c, 43)] {
            dd.draw(&session, x, ty, n, uniform, seed).unwrap();
        }
        let (va, vc) = (read16(&a, ty), read16(&c, ty));
        // Rounded to 16 bits: the upper end may round up to 3 itself.
        assert!(va.iter().all(|&x| (-2.0..=3.0).contains(&x)), "{ty:?}");
        let mean = va.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{ty:?}: mean {mean}");
        assert_eq!(va, read16(&b, ty), "{ty:?}: same seed, same inputs");
        assert!(
            va.iter().zip(&vc).filter(|(x, y)| x == y).count() < n / 50,
            "{ty:?}: another seed, other inputs"
        );
        // Each element is the float draw with the same seed rounded to nearest even.
        let bits = bytes_of(&a);
        let floats = session.alloc(n * 4).unwrap();
        dd.draw(&session, &floats, ScalarType::F32, n, uniform, 42)
            .unwrap();
        let rounded: Vec<u8> = read(&floats)
            .iter()
            .flat_map(|&x| match ty {
                ScalarType::F16 => half::f16::from_f32(x).to_bits().to_ne_bytes(),
                _ => half::bf16::from_f32(x).to_bits().to_ne_bytes(),
            })
            .collect();
        assert!(rounded == bits, "{ty:?}: rounded as the host rounds");

        let same = dd.compare(&session, &a, &b, ty, n, 0.0, 0.0).unwrap();
        assert!(same.ok() && same.rel_norm == 0.0, "{ty:?}: {same:?}");
        let other = dd.compare(&session, &c, &a, ty, n, 1e-3, 0.0).unwrap();
        assert!(
            other.mismatches > n / 2 && other.rel_norm > 0.1,
            "{other:?}"
        );
        // One element a unit off (outside a tolerance of an eighth of `unit`, which is
        // under a unit for every significand), one NaN: two mismatches, the first found;
        // a unit is inside a tolerance of `unit` (two units at most).
        let mut raw = bits.clone();
        let at = |i: usize| u16::from_ne_bytes([raw[2 * i], raw[2 * i + 1]]);
        let bumped = (at(777) ^ 1).to_ne_bytes();
        raw[2 * 777..2 * 777 + 2].copy_from_slice(&bumped);
        let nan: u16 = if ty == ScalarType::F16 {
            0x7e00
        } else {
            0x7fc0
        };
        raw[2 * 123_457..2 * 123_457 + 2].copy_from_slice(&nan.to_ne_bytes());
        let edited = session.upload(&raw).unwrap();
        let unit = if ty == ScalarType::F16 { 2e-3 } else { 1.6e-2 };
        let two = dd
            .compare(&session, &edited, &a, ty, n, unit / 8.0, 0.0)
            .unwrap();
        assert_eq!(two.mismatches, 2, "{ty:?}: {two:?}");
        assert_eq!(two.first.map(|f| f.0), Some(777));
        let one = dd.compare(&session, &edited, &a, ty, n, unit, 0.0).unwrap();
        assert_eq!(one.mismatches, 1, "{ty:?}: {one:?}");
        assert!(one.first.is_some_and(|f| f.0 == 123_457 && f.1.is_nan()));

        // Edge values: the type's own denormals and smallest normal, infinities and NaN.
        dd.draw_values(
            &session,
            &a,
            ty,
            n,
            Resolved::Uniform { lo: -1.0, hi: 1.0 },
            Values::Specials { nonfinite: true },
            5,
        )
        .unwrap();
        let v = read16(&a, ty);
        let tiny = if ty == ScalarType::F16 {
            2f64.powi(-24)
        } else {
            2f64.powi(-133)
        };
        assert!(v.contains(&tiny) && v.contains(&-tiny), "{ty:?}: denormals");
        assert!(v.iter().any(|x| x.is_nan()) && v.iter().any(|x| x.is_infinite()));
        assert!(v.iter().any(|x| *x == 0.0 && x.is_sign_negative()));
        assert!(v
            .iter()
            .filter(|x| x.is_finite())
            .all(|x| (-1.0..=1.0).contains(x)));
        // Poisoned outputs (all bits set) are NaN in both formats.
        dd.poison(&session, &a, n * 2).unwrap();
        assert_eq!(
            dd.compare(&session, &a, &b, ty, n, 1e-2, 1e-2)
                .unwrap()
                .mismatches,
            n
        );
    }
}

fn bytes_of(b: &DeviceBuffer) -> Vec<u8> {
    let mut bytes = vec![0u8; b.len()];
    b.read(0, &mut bytes).expect("read");
    bytes
}

#[test]
fn integers_are_drawn_in_range_and_compared_exactly() {
    let (session, dd) = setup();
    let n = 1 << 16;
    // Bytes 0..=255 all appear, about equally often; same seed, same bytes.
    let (a, b) = (session.alloc(n).unwrap(), session.alloc(n).unwrap());
    let all_bytes = Resolved::Uniform { lo: 0.0, hi: 255.0 };
    dd.draw(&session, &a, ScalarType::U8, n, all_bytes, 7)
        .unwrap();
    dd.draw(&session, &b, ScalarType::U8, n, all_bytes, 7)
        .unwrap();
    let va = bytes_of(&a);
    let mut counts = [0usize; 256];
    va.iter().for_each(|&v| counts[v as usize] += 1);
    assert!(
        counts.iter().all(|&c| c > n / 256 / 2 && c < n / 256 * 2),
        "{counts:?}"
    );
    assert_eq!(va, bytes_of(&b));
    assert!(dd.same(&session, &a, &b, ScalarType::U8, n).unwrap().ok());
    // Signed 16-bit integers in [-3, 3], each value about a seventh of the time.
    let s = session.alloc(n * 2).unwrap();
    dd.draw(
        &session,
        &s,
        ScalarType::I16,
        n,
        Resolved::Uniform { lo: -3.0, hi: 3.0 },
        9,
    )
    .unwrap();
    let vs: Vec<i16> = bytes_of(&s)
        .chunks_exact(2)
        .map(|c| i16::from_ne_bytes([c[0], c[1]]))
        .collect();
    assert!(vs.iter().all(|v| (-3..=3).contains(v)));
    for v in -3..=3 {
        let share = vs.iter().filter(|x| **x == v).count() as f64 / n as f64;
        assert!((share - 1.0 / 7.0).abs() < 0.01, "{v}: {share}");
    }
    // 64-bit integers over their whole range: both signs appear.
    let l = session.alloc(n * 8).unwrap();
    dd.draw(
        &session,
        &l,
        ScalarType::I64,
        n,
        Resolved::Uniform {
            lo: i64::MIN as f64,
            hi: i64::MAX as f64,
        },
        3,
    )
    .unwrap();
    let vl: Vec<i64> = bytes_of(&l)
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert!(vl.iter().any(|v| *v < 0) && vl.iter().any(|v| *v > 0));
    // One changed element of a 32-bit buffer is found, with its index and both values.
    let u = session.alloc(n * 4).unwrap();
    dd.draw(&session, &u, ScalarType::U32, n, all_bytes, 1)
        .unwrap();
    let mut changed = bytes_of(&u);
    changed[4 * 4321] ^= 1;
    let c = session.upload(&changed).unwrap();
    let cmp = dd.same(&session, &c, &u, ScalarType::U32, n).unwrap();
    assert_eq!(cmp.mismatches, 1, "{cmp:?}");
    assert_eq!(cmp.first.map(|f| f.0), Some(4321));
    // Normal integers are the host's to draw.
    assert!(!DeviceData::draws(
        ScalarType::I32,
        Resolved::Normal {
            mean: 0.0,
            std: 1.0
        }
    ));
    assert!(dd
        .draw(
            &session,
            &u,
            ScalarType::I32,
            n,
            Resolved::Normal {
                mean: 0.0,
                std: 1.0
            },
            1
        )
        .is_err());
}
