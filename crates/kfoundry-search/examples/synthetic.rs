//! Development harness: the engine's variants on seeded synthetic kernel-like landscapes
//! (never on the judged spaces). `cargo run --release --example synthetic [seeds]`.
//!
//! Each landscape: 5–8 parameters of 2–16 values (some power-of-two "sizes" grouped as
//! `_x`/`_y`), a work-group constraint, a multiplicative separable part with a random optimum
//! per parameter, random pairwise interactions, a few failing regions and rugged per-config
//! noise. Scored with the same methodology as the real spaces.
//!
//! `LANDSCAPES=100-108` selects a held-out family (used only to check choices made on the
//! development set 0–7): stronger multiplicative interactions, a structured failing region
//! and a narrow sweet spot that an additive model cannot see.
//!
//! Two families where a model of the history misleads (`LANDSCAPES=200-208`, `300-308`):
//! - deceptive (200+): unordered "method" parameters whose best value pays only together with
//!   the best value of another method parameter and is, alone, among the worst; its
//!   neighbours in value order are the worst of all. A model fitted to what was seen points
//!   away from the optimum; random sampling meets it at a rate of one in a few dozen.
//! - plateau (300+): times quantised to a few levels over wide flat regions; the best level
//!   is one corner of three parameters (well under 1% of the space), with nothing sloping
//!   towards it.
//!
//! Development: 0–7, 200–203, 300–303; held out (checked once a choice is made): 100–107,
//! 204–207, 304–307. `LANDSCAPES=A-B` runs A..B, B excluded.

#![allow(clippy::panic)] // a development harness: a broken landscape stops it
use kfoundry_search::methodology::{self, Baseline, Trace};
use kfoundry_search::{
    search, Config, Evaluation, FailureKind, Param, ScreenModel, Settings, Space,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Landscape {
    space: Space,
    opt: Vec<f64>,
    slope: Vec<f64>,
    pairs: Vec<(usize, usize, f64)>,
    noise: f64,
    fail_mod: u64,
    salt: u64,
    /// Held-out family (k >= 100): interactions multiply as exp(w·…), a structured failing
    /// region (`x[a] + x[b] > threshold`, like register pressure) and a narrow sweet spot.
    hard: Option<Hard>,
    /// The deceptive (200+) or plateau (300+) family.
    trap: Option<Trap>,
}

enum Trap {
    /// Method parameters `a` and `b` (indices in the space), the effect of each of their
    /// values, and their winners, which pay only together.
    Deceptive {
        a: usize,
        b: usize,
        effect_a: Vec<f64>,
        effect_b: Vec<f64>,
        win: (usize, usize),
    },
    /// Levels of the time by quantised position, and the corner of the best: (parameter,
    /// high side) for three parameters.
    Plateau {
        levels: Vec<f64>,
        corner: [(usize, bool); 3],
    },
}

struct Hard {
    fail: (usize, usize, f64),
    spot: Vec<f64>,
}

fn hash(x: &[i64], salt: u64) -> u64 {
    let mut h = 0xcbf29ce484222325u64 ^ salt;
    for v in x {
        h ^= *v as u64;
        h = h.wrapping_mul(0x100000001b3);
        h ^= h >> 29;
    }
    h
}

/// `n` effects of an unordered parameter: the winner `w` and, next to it in value order, the
/// worst of all; the others in between.
fn method_effects(n: usize, w: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..n)
        .map(|v| {
            if v == w {
                1.8
            } else if v.abs_diff(w) == 1 {
                3.0
            } else {
                rng.gen_range(1.0..1.6)
            }
        })
        .collect()
}

fn trap_landscape(k: u64) -> Landscape {
    let mut rng = ChaCha8Rng::seed_from_u64(1000 + k);
    let mut params = vec![
        Param {
            name: "block_x".into(),
            values: (0..rng.gen_range(4..8)).map(|i| 1i64 << (i + 3)).collect(),
        },
        Param {
            name: "block_y".into(),
            values: (0..rng.gen_range(2..4)).map(|i| 1i64 << i).collect(),
        },
        Param {
            name: "tile".into(),
            values: (1..=rng.gen_range(4..12)).collect(),
        },
    ];
    let (na, nb) = (rng.gen_range(4..7), rng.gen_range(3..6));
    params.push(Param {
        name: "method_a".into(),
        values: (0..na as i64).collect(),
    });
    params.push(Param {
        name: "method_b".into(),
        values: (0..nb as i64).collect(),
    });
    if rng.gen_bool(0.5) {
        params.push(Param {
            name: "unroll".into(),
            values: vec![0, 1],
        });
    }
    let space = Space::new(params).unwrap_or_else(|e| panic!("{e}"));
    let d = space.len();
    let opt = (0..d).map(|_| rng.gen::<f64>()).collect();
    let slope = (0..d)
        .map(|p| {
            if p == 3 || p == 4 {
                0.0
            } else {
                rng.gen_range(0.05..0.4)
            }
        })
        .collect();
    let trap = if k < 300 {
        let win = (rng.gen_range(0..na), rng.gen_range(0..nb));
        let (effect_a, effect_b) = (
            method_effects(na, win.0, &mut rng),
            method_effects(nb, win.1, &mut rng),
        );
        Trap::Deceptive {
            a: 3,
            b: 4,
            effect_a,
            effect_b,
            win,
        }
    } else {
        let levels = (0..rng.gen_range(4..7))
            .map(|i| 1.0 + 0.4 * i as f64)
            .collect();
        Trap::Plateau {
            levels,
            corner: [(0, rng.gen()), (2, rng.gen()), (3, rng.gen())],
        }
    };
    Landscape {
        space,
        opt,
        slope,
        pairs: Vec::new(),
        noise: 0.05,
        fail_mod: 97,
        salt: k,
        hard: None,
        trap: Some(trap),
    }
}

fn landscape(k: u64) -> Landscape {
    if k >= 200 {
        return trap_landscape(k);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(1000 + k);
    let mut params = vec![
        Param {
            name: "block_x".into(),
            values: (0..rng.gen_range(4..9)).map(|i| 1i64 << i).collect(),
        },
        Param {
            name: "block_y".into(),
            values: (0..rng.gen_range(2..6)).map(|i| 1i64 << i).collect(),
        },
    ];
    let extra = rng.gen_range(3..7);
    let mut size: i64 = params.iter().map(|p| p.values.len() as i64).product();
    for i in 0..extra {
        let n = match rng.gen_range(0..3) {
            0 => 2,
            1 => rng.gen_range(3..6),
            _ => rng.gen_range(6..17),
        };
        if size * n > 40_000 {
            break;
        }
        size *= n;
        params.push(Param {
            name: format!("p{i}"),
            values: (1..=n).collect(),
        });
    }
    let space = Space::new(params).unwrap_or_else(|e| panic!("{e}"));
    let d = space.len();
    let opt = (0..d).map(|_| rng.gen::<f64>()).collect();
    let slope = (0..d).map(|_| rng.gen_range(0.05..0.8)).collect();
    if k >= 100 {
        let pairs = (0..rng.gen_range(3..8))
            .map(|_| {
                (
                    rng.gen_range(0..d),
                    rng.gen_range(0..d),
                    rng.gen_range(0.15..0.5) * if rng.gen() { 1.0 } else { -1.0 },
                )
            })
            .collect();
        let fail = (
            rng.gen_range(0..d),
            rng.gen_range(0..d),
            rng.gen_range(1.3..1.8),
        );
        let spot = (0..d).map(|_| rng.gen::<f64>()).collect();
        let hard = Some(Hard { fail, spot });
        return Landscape {
            space,
            opt,
            slope,
            pairs,
            noise: rng.gen_range(0.02..0.2),
            fail_mod: 200,
            salt: k,
            hard,
            trap: None,
        };
    }
    let pairs = (0..rng.gen_range(1..4))
        .map(|_| {
            (
                rng.gen_range(0..d),
                rng.gen_range(0..d),
                rng.gen_range(-0.5..0.5),
            )
        })
        .collect();
    Landscape {
        space,
        opt,
        slope,
        pairs,
        noise: rng.gen_range(0.02..0.3),
        fail_mod: rng.gen_range(15..60),
        salt: k,
        hard: None,
        trap: None,
    }
}

impl Landscape {
    fn valid(&self, c: &Config) -> bool {
        let wg = c[0] * c[1];
        (8..=1024).contains(&wg)
    }

    fn time(&self, c: &Config) -> Option<f64> {
        let idx = self.space.indices(c).ok()?;
        let h = hash(c, self.salt);
        if h % self.fail_mod == 0 {
            return None;
        }
        let x: Vec<f64> = idx
            .iter()
            .zip(&self.space.params)
            .map(|(&i, p)| i as f64 / (p.values.len().max(2) - 1) as f64)
            .collect();
        if let Some(Trap::Plateau { levels, corner }) = &self.trap {
            // the level of the quantised mean position of the parameters outside the corner;
            // the best level only at the corner's extreme values
            let at_extreme =
                |&(p, high): &(usize, bool)| if high { x[p] >= 0.999 } else { x[p] <= 0.001 };
            let others: Vec<f64> = x
                .iter()
                .enumerate()
                .filter(|(p, _)| !corner.iter().any(|c| c.0 == *p))
                .map(|(_, v)| *v)
                .collect();
            let m = others.iter().sum::<f64>() / others.len().max(1) as f64;
            let level = if corner.iter().all(at_extreme) {
                0
            } else {
                1 + ((m * (levels.len() - 1) as f64) as usize).min(levels.len() - 2)
            };
            let r = (h >> 8) as f64 / (1u64 << 56) as f64;
            return Some(levels[level] * (1.0 + 0.01 * r));
        }
        let mut t = 1.0;
        for ((xi, s), o) in x.iter().zip(&self.slope).zip(&self.opt) {
            t *= 1.0 + s * (xi - o).abs() * 3.0;
        }
        if let Some(Trap::Deceptive {
            a,
            b,
            effect_a,
            effect_b,
            win,
        }) = &self.trap
        {
            let (va, vb) = (idx[*a] as usize, idx[*b] as usize);
            t *= if (va, vb) == *win {
                0.45
            } else {
                effect_a[va] * effect_b[vb] / 1.8
            };
        }
        if let Some(h) = &self.hard {
            let (a, b, thr) = h.fail;
            if x[a] + x[b] > thr {
                return None;
            }
            for &(a, b, w) in &self.pairs {
                t *= (w * (x[a] - 0.5) * (x[b] - 0.5) * 4.0).exp();
            }
            let d2: f64 = x.iter().zip(&h.spot).map(|(a, b)| (a - b) * (a - b)).sum();
            t *= 1.0 - 0.3 * (-d2 / 0.05).exp();
        } else {
            for &(a, b, w) in &self.pairs {
                t *= 1.0 + w * (x[a] - 0.5) * (x[b] - 0.5) * 4.0;
            }
        }
        let r = (h >> 8) as f64 / (1u64 << 56) as f64;
        Some(t.max(0.05) * (1.0 + self.noise * r))
    }

    fn all(&self) -> Vec<Config> {
        let sizes: Vec<usize> = self.space.params.iter().map(|p| p.values.len()).collect();
        let mut idx = vec![0u32; sizes.len()];
        let mut out = Vec::new();
        loop {
            let c = self.space.values(&idx);
            if self.valid(&c) {
                out.push(c);
            }
            let mut i = 0;
            loop {
                if i == sizes.len() {
                    return out;
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
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

/// A named variant of the default settings (for `VARIANTS=a,b,...`).
fn variant(name: &str) -> Option<Settings> {
    let d = Settings::default();
    Some(match name {
        "default" => d,
        "gradient" => Settings {
            gradient_steering: true,
            ..d
        },
        "fixed" => Settings {
            selection: kfoundry_search::Selection::legacy(),
            ..d
        },
        "previous" => Settings::before_adaptive_selection(),
        "single-cell" => Settings {
            single_cell: true,
            ..d
        },
        "no-screening" => Settings { screening: 1, ..d },
        "nearest" => Settings {
            screen_model: ScreenModel::Nearest,
            ..d
        },
        "additive" => Settings {
            screen_model: ScreenModel::Additive,
            ..d
        },
        "relevance" => Settings {
            screen_model: ScreenModel::Relevance,
            ..d
        },
        "islands1" => Settings { islands: 1, ..d },
        "islands4" => Settings { islands: 4, ..d },
        _ if name.contains('=') => {
            // settings changes joined by `+`, e.g. `screening=8+screen_explore=0.1`
            let mut s = d;
            for a in name.split('+') {
                s.set(a).ok()?;
            }
            s
        }
        _ => {
            // <model><candidates>, e.g. nearest16, additive32, screen16 (the default model)
            let digits = name.find(|c: char| c.is_ascii_digit())?;
            let n: usize = name[digits..].parse().ok()?;
            let model = match &name[..digits] {
                "screen" => d.screen_model,
                "nearest" => ScreenModel::Nearest,
                "additive" => ScreenModel::Additive,
                "relevance" => ScreenModel::Relevance,
                _ => return None,
            };
            Settings {
                screening: n,
                screen_model: model,
                ..d
            }
        }
    })
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    // LANDSCAPES=a-b picks landscapes a..b (default 0-8: the development set; 8-16 is held out)
    let (l0, l1): (u64, u64) = std::env::var("LANDSCAPES")
        .ok()
        .and_then(|v| {
            v.split_once('-')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        })
        .unwrap_or((0, 8));
    let names = std::env::var("VARIANTS").unwrap_or_else(|_| "default,gradient,previous".into());
    let variants: Vec<(String, Settings)> = names
        .split(',')
        .map(|n| {
            (
                n.to_string(),
                variant(n).unwrap_or_else(|| fail(&format!("unknown variant `{n}`"))),
            )
        })
        .collect();
    let mut totals = vec![(0.0, [0.0; 4]); variants.len()];
    // per variant: the worst landscape's score, and the mean share of axis points below random
    let mut worst = vec![f64::INFINITY; variants.len()];
    let mut below = vec![0.0; variants.len()];
    let n_land = (l1 - l0) as f64;
    for k in l0..l1 {
        let l = landscape(k);
        let all = l.all();
        let times: Vec<f64> = all.iter().filter_map(|c| l.time(c)).collect();
        let base = Baseline::new(&times, &vec![1.0; all.len()])
            .unwrap_or_else(|| panic!("empty landscape"));
        let evals = base.eval_axis().1.max(400);
        print!(
            "landscape {k}: {} valid, axis {:?}",
            all.len(),
            base.eval_axis()
        );
        for (vi, (name, s)) in variants.iter().enumerate() {
            let mut traces = Vec::new();
            for seed in 0..seeds {
                let settings = Settings {
                    seed,
                    max_evals: Some(evals),
                    ..s.clone()
                };
                let mut eval = |c: &Config| match l.time(c) {
                    Some(t) => Evaluation::ok(t, 1.0),
                    None => Evaluation::failed(FailureKind::Build, "x", 1.0),
                };
                let r = search(l.space.clone(), settings, None, &mut eval, &|c: &Config| {
                    l.valid(c)
                })
                .unwrap_or_else(|e| panic!("{e}"));
                traces.push(Trace {
                    times: r.history.iter().map(|h| h.outcome.time()).collect(),
                    costs: r.history.iter().map(|h| h.outcome.cost()).collect(),
                });
            }
            let sc = methodology::score_evals(&base, &traces);
            worst[vi] = worst[vi].min(sc);
            below[vi] += methodology::below_random_share(&base, &traces) / n_land;
            let fr: Vec<f64> = [25, 50, 100, 200]
                .iter()
                .map(|&m| methodology::median_fraction(&base, &traces, m))
                .collect();
            totals[vi].0 += sc / n_land;
            for (t, f) in totals[vi].1.iter_mut().zip(&fr) {
                *t += f / n_land;
            }
            print!("  {name} {sc:.3}");
        }
        println!();
    }
    for (vi, (name, _)) in variants.iter().enumerate() {
        let f = totals[vi].1;
        println!(
            "{name:12} score {:.4}  worst {:.3}  below random {:.1}%  @25 {:.4} @50 {:.4} @100 {:.4} @200 {:.4}",
            totals[vi].0,
            worst[vi],
            below[vi] * 100.0,
            f[0],
            f[1],
            f[2],
            f[3]
        );
    }
}
