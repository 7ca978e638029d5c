//! Output comparison against the reference: element-wise tolerance, NaN/Inf only where the
//! reference has them, and error norms for the report.

/// How one output compares with the reference's.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Elements outside the tolerance (NaN/Inf mismatches included).
    pub mismatches: usize,
    /// First mismatching element: (index, candidate, reference).
    pub first: Option<(usize, f64, f64)>,
    /// Largest |candidate − reference| over finite pairs.
    pub max_abs: f64,
    /// ‖candidate − reference‖₂ / ‖reference‖₂ over finite pairs.
    pub rel_norm: f64,
    /// The largest finite |reference| (0 from bit-for-bit comparisons, which do not need it).
    pub ref_max: f64,
}

impl Comparison {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }
}

/// A sum of squares held as `scale² · ssq` with `scale` the largest magnitude added (the
/// LAPACK `nrm2` way): no square is ever formed, so values near a format's largest neither
/// overflow it to infinity nor do tiny ones underflow it to zero (either would let a norm
/// check pass a wrong output: `inf / inf` is NaN, and an all-denormal reference would have a
/// zero norm). The device comparison keeps the same pairs per work-group in `float`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SumSquares {
    pub scale: f64,
    pub ssq: f64,
}

impl SumSquares {
    /// Adds `x²` (an infinite `x` makes the sum infinite).
    pub fn add(&mut self, x: f64) {
        self.merge(SumSquares {
            scale: x.abs(),
            ssq: 1.0,
        });
    }

    /// Adds another sum.
    pub fn merge(&mut self, o: SumSquares) {
        if o.scale == 0.0 || o.ssq == 0.0 {
            return;
        }
        if o.scale > self.scale {
            let q = self.scale / o.scale;
            self.ssq = o.ssq + self.ssq * q * q;
            self.scale = o.scale;
        } else {
            // Equal scales add as they are (two infinite ones would make 0/0 otherwise).
            let q = if o.scale == self.scale {
                1.0
            } else {
                o.scale / self.scale
            };
            self.ssq += o.ssq * q * q;
        }
    }

    /// `sqrt(self / base)`, the relative norm (`sqrt(self)` when `base` is zero): infinite
    /// when `self` is and `base` is not, never NaN.
    pub fn relative_to(self, base: SumSquares) -> f64 {
        if self.scale == 0.0 {
            return 0.0;
        }
        if base.scale == 0.0 || base.ssq == 0.0 {
            return self.scale * self.ssq.sqrt();
        }
        let r = (self.scale / base.scale) * (self.ssq / base.ssq).sqrt();
        if r.is_nan() {
            f64::INFINITY
        } else {
            r
        }
    }
}

/// Compares `len` elements read through `cand` and `refr`.
pub fn compare(
    len: usize,
    cand: impl Fn(usize) -> f64,
    refr: impl Fn(usize) -> f64,
    rtol: f64,
    atol: f64,
) -> Comparison {
    let mut c = Comparison {
        mismatches: 0,
        first: None,
        max_abs: 0.0,
        rel_norm: 0.0,
        ref_max: 0.0,
    };
    let (mut diff2, mut ref2) = (SumSquares::default(), SumSquares::default());
    for i in 0..len {
        let (x, r) = (cand(i), refr(i));
        let ok = if r.is_finite() {
            let d = (x - r).abs();
            c.ref_max = c.ref_max.max(r.abs());
            if x.is_finite() {
                c.max_abs = c.max_abs.max(d);
                diff2.add(d);
                ref2.add(r);
            }
            x.is_finite() && d <= atol + rtol * r.abs()
        } else if r.is_nan() {
            x.is_nan()
        } else {
            x == r
        };
        if !ok {
            c.mismatches += 1;
            if c.first.is_none() {
                c.first = Some((i, x, r));
            }
        }
    }
    c.rel_norm = diff2.relative_to(ref2);
    c
}

/// The cosine similarity of `len` elements read through `cand` and `refr`, over the pairs
/// where both are finite: 1 when both are zero there, 0 when only one is.
pub fn cosine(len: usize, cand: impl Fn(usize) -> f64, refr: impl Fn(usize) -> f64) -> f64 {
    // Each side divided by its largest magnitude first, so that neither the products nor the
    // squares overflow or underflow whatever the values' range.
    let both = |i: usize| {
        let (x, r) = (cand(i), refr(i));
        (x.is_finite() && r.is_finite()).then_some((x, r))
    };
    let (mut cmax, mut rmax) = (0.0f64, 0.0f64);
    for (x, r) in (0..len).filter_map(both) {
        cmax = cmax.max(x.abs());
        rmax = rmax.max(r.abs());
    }
    if cmax == 0.0 || rmax == 0.0 {
        return if cmax == rmax { 1.0 } else { 0.0 };
    }
    let (mut dot, mut c2, mut r2) = (0.0f64, 0.0f64, 0.0f64);
    for (x, r) in (0..len).filter_map(both) {
        let (x, r) = (x / cmax, r / rmax);
        dot += x * r;
        c2 += x * x;
        r2 += r * r;
    }
    dot / (c2.sqrt() * r2.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_similarity() {
        let r = [1.0, 2.0, 3.0, f64::NAN];
        assert!(
            (cosine(4, |i| 2.0 * r[i], |i| r[i]) - 1.0).abs() < 1e-12,
            "a scale is the same direction"
        );
        assert!(cosine(3, |i| -r[i], |i| r[i]) < -0.99);
        assert_eq!(cosine(2, |_| 0.0, |_| 0.0), 1.0);
        assert_eq!(cosine(2, |_| 1.0, |_| 0.0), 0.0);
    }

    #[test]
    fn norms_hold_at_the_ends_of_the_range() {
        // Squares of 1e200 overflow f64 and squares of 1e-200 underflow it: the relative norm
        // of a 1% error is 1% whatever the magnitude, and cosine is a direction's.
        for m in [1e200, 1e-200, 1.0] {
            let r = |i: usize| m * (i as f64 - 3.5);
            let c = compare(8, |i| 1.01 * r(i), r, 0.0, f64::INFINITY);
            assert!((c.rel_norm - 0.01).abs() < 1e-9, "{m}: {c:?}");
            assert!((cosine(8, |i| 3.0 * r(i), r) - 1.0).abs() < 1e-12, "{m}");
            assert!(cosine(8, |i| -r(i), r) < -0.99, "{m}");
        }
        // An infinite difference (two finite values far apart) is an infinite norm, never NaN.
        let c = compare(2, |_| f64::MAX, |_| -f64::MAX, 0.0, f64::INFINITY);
        assert_eq!(c.rel_norm, f64::INFINITY);
        let mut s = SumSquares::default();
        s.add(f64::INFINITY);
        s.add(f64::INFINITY);
        assert_eq!(s.relative_to(SumSquares::default()), f64::INFINITY);
    }

    #[test]
    fn tolerance_and_special_values() {
        let r = [1.0, 2.0, f64::NAN, f64::INFINITY, 0.0];
        let same = compare(5, |i| r[i], |i| r[i], 1e-6, 0.0);
        assert!(same.ok(), "{same:?}");
        let close = [1.0 + 1e-7, 2.0, f64::NAN, f64::INFINITY, 1e-9];
        assert!(compare(5, |i| close[i], |i| r[i], 1e-6, 1e-8).ok());
        let nan_where_finite = [f64::NAN, 2.0, f64::NAN, f64::INFINITY, 0.0];
        let c = compare(5, |i| nan_where_finite[i], |i| r[i], 1e-6, 0.0);
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first.map(|f| f.0), Some(0));
        let finite_where_nan = [1.0, 2.0, 3.0, f64::INFINITY, 0.0];
        assert_eq!(
            compare(5, |i| finite_where_nan[i], |i| r[i], 1e-6, 0.0).mismatches,
            1
        );
        let wrong_inf = [1.0, 2.0, f64::NAN, f64::NEG_INFINITY, 0.0];
        assert_eq!(
            compare(5, |i| wrong_inf[i], |i| r[i], 1e-6, 0.0).mismatches,
            1
        );
        let off = [1.1, 2.0, f64::NAN, f64::INFINITY, 0.0];
        let c = compare(5, |i| off[i], |i| r[i], 1e-6, 0.0);
        assert_eq!(c.mismatches, 1);
        assert!((c.max_abs - 0.1).abs() < 1e-12);
        assert!(c.rel_norm > 0.0);
    }
}
