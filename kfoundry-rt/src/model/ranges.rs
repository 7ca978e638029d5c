//! The size ranges a program calls a kernel at (`ranges(rows = 1..=8192, cols = 2048, vocab =
//! extent(1..=262144))`), the representative points of a range that `tune` tunes at (its
//! **anchors**), and the **buckets** of a range a portfolio of variants is proven over.
//!
//! One size of a range is split into buckets: the one that changes the work most across its
//! range (the largest ratio of its bounds among the sizes not declared `extent`). Its anchors are
//! its bounds and powers of two spread evenly (in log) between them, at most [`MAX_ANCHORS`]. Every
//! other size takes one value at the anchors: a fixed size its value, a ranged one (an `extent`
//! one too) the power of two nearest its range's geometric middle. A bucket spans a stretch of the
//! split size and the whole range of every other size: a variant chosen for it is proven over
//! all of that.

pub use super::spec::SizeRange;
use super::spec::{KernelSpec, Sizes, Workload};

/// At most this many anchors per range (the points a portfolio is chosen from).
pub const MAX_ANCHORS: usize = 7;
/// At most this many distinct variants serve one range.
pub const MAX_BUCKETS: usize = 4;
/// The prefix of an anchor's workload name: `range_rows_64`.
pub const ANCHOR_PREFIX: &str = "range";

/// The ranges as an annotation writes them: `rows = 1..=8192, cols = 2048`.
pub fn display(ranges: &[SizeRange]) -> String {
    ranges
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The size a range is split into buckets along: the one with the largest ratio of its bounds
/// among those that change the work; `None` when no such size has a range.
pub fn split_size(ranges: &[SizeRange]) -> Option<&SizeRange> {
    ranges
        .iter()
        .filter(|r| !r.extent && r.lo < r.hi)
        .max_by(|a, b| {
            (a.hi as f64 / a.lo as f64)
                .total_cmp(&(b.hi as f64 / b.lo as f64))
                .then_with(|| b.size.cmp(&a.size))
        })
}

/// Whether `w` is an anchor of the kernel's ranges (generated, not declared).
pub fn is_anchor(w: &Workload) -> bool {
    w.name == ANCHOR_PREFIX || w.name.starts_with(&format!("{ANCHOR_PREFIX}_"))
}

/// The anchors of `spec.ranges` as workloads (named `range_<split>_<value>`, or `range` when
/// no size is split), each moved to the nearest value the reference can run at; values at
/// which the reference cannot run nearby are left out. Empty without ranges.
pub fn anchors(spec: &KernelSpec) -> Vec<Workload> {
    if spec.ranges.is_empty() {
        return Vec::new();
    }
    let split = split_size(&spec.ranges);
    let mut base = Sizes::new();
    for r in &spec.ranges {
        base.insert(
            r.size.clone(),
            if r.lo == r.hi {
                r.lo
            } else {
                nearest_power_of_two(geometric_middle(r.lo, r.hi), r.lo, r.hi)
            },
        );
    }
    let runs = |sizes: &Sizes| spec.geometry(&spec.reference, sizes, None).is_ok();
    let Some(split) = split else {
        return fit(&base, None, &spec.ranges, runs)
            .map(|sizes| Workload {
                name: ANCHOR_PREFIX.into(),
                sizes,
                on: spec.ranges_on.clone(),
            })
            .into_iter()
            .collect();
    };
    let mut out: Vec<Workload> = Vec::new();
    for v in split_values(split.lo, split.hi) {
        let mut sizes = base.clone();
        sizes.insert(split.size.clone(), v);
        let Some(sizes) = fit(&sizes, Some(&split.size), &spec.ranges, runs) else {
            continue;
        };
        if out.iter().any(|w| w.sizes == sizes) {
            continue;
        }
        out.push(Workload {
            name: format!("{ANCHOR_PREFIX}_{}_{}", split.size, sizes[&split.size]),
            sizes,
            on: spec.ranges_on.clone(),
        });
    }
    out
}

/// The split size's anchor values: its bounds and powers of two between, evenly spread in
/// log, at most [`MAX_ANCHORS`].
fn split_values(lo: i64, hi: i64) -> Vec<i64> {
    let (l, h) = ((lo as f64).log2(), (hi as f64).log2());
    let mut out = vec![lo];
    for i in 1..MAX_ANCHORS - 1 {
        let target = l + (h - l) * i as f64 / (MAX_ANCHORS - 1) as f64;
        let v = nearest_power_of_two(2f64.powf(target).round() as i64, lo, hi);
        if v > *out.last().unwrap_or(&lo) && v < hi {
            out.push(v);
        }
    }
    if hi > lo {
        out.push(hi);
    }
    out
}

fn geometric_middle(lo: i64, hi: i64) -> i64 {
    ((lo as f64) * (hi as f64)).sqrt().round() as i64
}

/// The power of two nearest `v` (in log) within `lo..=hi`; `v` clamped when none lies there.
fn nearest_power_of_two(v: i64, lo: i64, hi: i64) -> i64 {
    let v = v.clamp(lo.max(1), hi);
    let down = 1i64 << (63 - v.leading_zeros());
    let up = down.saturating_mul(2);
    let pick = if (v as f64 / down as f64) <= (up as f64 / v as f64) {
        down
    } else {
        up
    };
    if (lo..=hi).contains(&pick) {
        pick
    } else if (lo..=hi).contains(&down) {
        down
    } else if (lo..=hi).contains(&up) {
        up
    } else {
        v
    }
}

/// `sizes` itself when the reference runs there, else the nearest set (each size in its range,
/// `keep` unchanged when possible) whose values are rounded to a multiple of a power of two.
fn fit(
    sizes: &Sizes,
    keep: Option<&str>,
    ranges: &[SizeRange],
    runs: impl Fn(&Sizes) -> bool,
) -> Option<Sizes> {
    if runs(sizes) {
        return Some(sizes.clone());
    }
    let range = |name: &str| ranges.iter().find(|r| r.size == name);
    for free_split in [false, true] {
        for step_log2 in 1..=12 {
            let step = 1i64 << step_log2;
            for up in [true, false] {
                let mut probe = sizes.clone();
                for (name, v) in probe.iter_mut() {
                    if Some(name.as_str()) == keep && !free_split {
                        continue;
                    }
                    let r = range(name)?;
                    let rounded = if up {
                        (*v + step - 1) / step * step
                    } else {
                        *v / step * step
                    };
                    if r.contains(rounded) {
                        *v = rounded;
                    }
                }
                if runs(&probe) {
                    return Some(probe);
                }
            }
        }
    }
    None
}

/// One bucket of a range: the stretch `lo..=hi` of the split size (the whole range of every
/// other size), as the sizes' bounds a proof covers.
pub fn bucket_bounds(
    ranges: &[SizeRange],
    split: Option<(&str, i64, i64)>,
) -> std::collections::BTreeMap<String, (i64, i64)> {
    ranges
        .iter()
        .map(|r| match split {
            Some((name, lo, hi)) if name == r.size => (r.size.clone(), (lo, hi)),
            _ => (r.size.clone(), (r.lo, r.hi)),
        })
        .collect()
}

/// Where the range of the split size is cut between two neighbouring anchors `a < b` that fall
/// in different buckets: the last value of the lower bucket (their geometric middle, rounded
/// down).
pub fn boundary(a: i64, b: i64) -> i64 {
    (((a as f64) * (b as f64)).sqrt().floor() as i64).clamp(a, b - 1)
}

/// The buckets the anchors' variants of one device serve, in order along the split size: each
/// stretch the variants were proven over, with its parameters (stretches side by side with the
/// same parameters merged), as `n 1..=2: VEC=1, WG=1 (the reference)` lines. Empty without
/// ranges or anchors' variants.
pub fn describe_buckets(spec: &KernelSpec, variants: &[&super::variant::Variant]) -> Vec<String> {
    let Some(split) = split_size(&spec.ranges) else {
        return Vec::new();
    };
    let mut stretches: Vec<(i64, i64, &super::spec::Params)> = variants
        .iter()
        .filter(|v| {
            spec.workloads
                .iter()
                .any(|w| w.name == v.workload && is_anchor(w))
        })
        .filter_map(|v| {
            v.proven_range()
                .get(&split.size)
                .map(|&(lo, hi)| (lo, hi, &v.params))
        })
        .collect();
    stretches.sort_by_key(|s| (s.0, s.1));
    stretches.dedup();
    let mut merged: Vec<(i64, i64, &super::spec::Params)> = Vec::new();
    for s in stretches {
        match merged.last_mut() {
            Some(last) if last.2 == s.2 && s.0 <= last.1.saturating_add(1) => {
                last.1 = last.1.max(s.1)
            }
            _ => merged.push(s),
        }
    }
    merged
        .into_iter()
        .map(|(lo, hi, params)| {
            let reference = if *params == spec.reference {
                " (the reference)"
            } else {
                ""
            };
            format!(
                "{} {lo}..={hi}: {}{reference}",
                split.size,
                super::spec::fmt_assignments(params, ", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(size: &str, lo: i64, hi: i64) -> SizeRange {
        SizeRange {
            size: size.into(),
            lo,
            hi,
            extent: false,
        }
    }

    #[test]
    fn anchors_span_the_range_in_powers_of_two() {
        assert_eq!(split_values(1, 8192), vec![1, 4, 16, 128, 512, 2048, 8192]);
        assert_eq!(split_values(1, 3), vec![1, 2, 3]);
        assert_eq!(split_values(100, 100), vec![100]);
        assert_eq!(split_values(5, 6), vec![5, 6]);
        // Every value lies in the range, strictly increasing.
        for (lo, hi) in [(1, 2), (3, 1000), (7, 1 << 30), (1000, 1001)] {
            let v = split_values(lo, hi);
            assert!(
                v.windows(2).all(|w| w[0] < w[1]) && v[0] == lo && *v.last().unwrap() == hi,
                "{lo}..={hi}: {v:?}"
            );
            assert!(v.len() <= MAX_ANCHORS);
        }
    }

    #[test]
    fn the_widest_working_size_is_split() {
        let ranges = vec![
            range("cols", 2048, 2048),
            range("rows", 1, 8192),
            SizeRange {
                extent: true,
                ..range("vocab", 1, 1 << 20)
            },
        ];
        assert_eq!(split_size(&ranges).map(|r| r.size.as_str()), Some("rows"));
        assert_eq!(split_size(&ranges[..1]), None);
        assert_eq!(split_size(&[ranges[2].clone()]), None);
    }

    #[test]
    fn boundaries_fall_between_neighbours() {
        assert_eq!(boundary(1, 2), 1);
        assert_eq!(boundary(16, 128), 45);
        assert_eq!(boundary(2048, 8192), 4096);
        for (a, b) in [(1, 2), (3, 4), (1, 1 << 40)] {
            let c = boundary(a, b);
            assert!(a <= c && c < b);
        }
    }
}
