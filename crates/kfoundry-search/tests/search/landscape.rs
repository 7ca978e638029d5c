//! The synthetic landscape the engine's tests search (and `examples/optimum_stats.rs`
//! measures): 2 240 configurations of seven kernel-like parameters, 1 050 valid, one optimum.

use kfoundry_search::{Config, Evaluation, FailureKind, Param, Space};

pub fn space() -> Space {
    let p = |n: &str, v: &[i64]| Param {
        name: n.into(),
        values: v.to_vec(),
    };
    Space::new(vec![
        p("wg_x", &[1, 2, 4, 8, 16, 32, 64]),
        p("wg_y", &[1, 2, 4, 8, 16]),
        p("items", &[1, 2, 3, 4, 5, 6, 7, 8]),
        p("vec", &[1, 2, 4, 8]),
        p("local", &[0, 1]),
        p("unroll", &[0, 1]),
        p("fixed", &[3]),
    ])
    .unwrap()
}

/// Work-group size between 16 and 512.
pub fn valid(c: &Config) -> bool {
    let wg = c[0] * c[1];
    (16..=512).contains(&wg)
}

/// A rugged but structured landscape: best at wg 128 (wg_x 32, wg_y 4), items 6, vec 4,
/// local 1, unroll 1; local memory without enough items is slow; some variants fail.
pub fn time(c: &Config) -> Option<f64> {
    let (wx, wy, items, vec, local, unroll) = (
        c[0] as f64,
        c[1] as f64,
        c[2] as f64,
        c[3] as f64,
        c[4],
        c[5],
    );
    if vec == 8.0 && items >= 7.0 {
        return None; // "build failure": too many registers
    }
    let wg = wx * wy;
    let mut t = 1.0;
    t *= 1.0 + 0.3 * (wg.log2() - 7.0).abs();
    t *= 1.0 + 0.15 * (wx.log2() - 5.0).abs();
    t *= 1.0 + 0.1 * (items - 6.0).abs();
    t *= 1.0 + 0.2 * (vec.log2() - 2.0).abs();
    t *= if local == 1 {
        if items >= 4.0 {
            0.7
        } else {
            1.3
        }
    } else {
        1.0
    };
    t *= if unroll == 1 { 0.9 } else { 1.0 };
    Some(t * 1e-3)
}

pub fn optimum() -> (Config, f64) {
    let s = space();
    let mut best: Option<(Config, f64)> = None;
    let sizes: Vec<usize> = s.params.iter().map(|p| p.values.len()).collect();
    let mut idx = vec![0u32; sizes.len()];
    loop {
        let c = s.values(&idx);
        if valid(&c) {
            if let Some(t) = time(&c) {
                if best.as_ref().map_or(true, |(_, b)| t < *b) {
                    best = Some((c, t));
                }
            }
        }
        let mut i = 0;
        loop {
            if i == sizes.len() {
                return best.unwrap();
            }
            idx[i] += 1;
            if (idx[i] as usize) < sizes[i] {
                break;
            }
            idx[i] = 0;
            i += 1;
        }
    }
}

pub fn evaluate(c: &Config) -> Evaluation {
    match time(c) {
        Some(t) => Evaluation::ok(t, 1.0 + t * 100.0),
        None => Evaluation::failed(FailureKind::Build, "too many registers", 0.5),
    }
}
