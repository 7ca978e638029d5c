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
}

impl Comparison {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
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
    };
    let (mut diff2, mut ref2) = (0.0f64, 0.0f64);
    for i in 0..len {
        let (x, r) = (cand(i), refr(i));
        let ok = if r.is_finite() {
            let d = (x - r).abs();
            if x.is_finite() {
                c.max_abs = c.max_abs.max(d);
                diff2 += d * d;
                ref2 += r * r;
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
    c.rel_norm = if ref2 > 0.0 {
        (diff2 / ref2).sqrt()
    } else {
        diff2.sqrt()
    };
    c
}

/// The cosine similarity of `len` elements read through `cand` and `refr`, over the pairs
/// where both are finite: 1 when both are zero there, 0 when only one is.
pub fn cosine(len: usize, cand: impl Fn(usize) -> f64, refr: impl Fn(usize) -> f64) -> f64 {
    let (mut dot, mut c2, mut r2) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..len {
        let (x, r) = (cand(i), refr(i));
        if x.is_finite() && r.is_finite() {
            dot += x * r;
            c2 += x * x;
            r2 += r * r;
        }
    }
    match (c2 > 0.0, r2 > 0.0) {
        (false, false) => 1.0,
        (true, true) => dot / (c2.sqrt() * r2.sqrt()),
        _ => 0.0,
    }
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
