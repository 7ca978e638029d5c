//! The engine on a synthetic space: reaching the optimum, budgets, determinism, resume.

use std::cell::RefCell;
use std::collections::HashSet;

use crate::landscape::{evaluate, optimum, space, time, valid};
use kfoundry_search::cones;
use kfoundry_search::selection::rank_correlation;
use kfoundry_search::{
    search, Arm, Config, Evaluation, FailureKind, Operator, Param, ScreenModel, SearchState,
    Selection, Settings, Space, Stepped, Stop,
};

/// The stated budget: every one of 10 seeds finds the optimum of this 2 240-configuration
/// space (1 050 valid) within 150 evaluations (over 40 seeds, `examples/optimum_stats.rs`, the
/// default settings need 36 evaluations at the median, 104 at the 90th percentile and 204 at
/// worst — the engine before adaptive selection: 61, and 106 at worst; random search would
/// need about 525).
#[test]
fn reaches_the_optimum_within_150_evaluations() {
    let (best, t) = optimum();
    assert_eq!(best, vec![32, 4, 6, 4, 1, 1, 3]);
    for seed in 0..10 {
        let settings = Settings {
            seed,
            max_evals: Some(150),
            ..Settings::default()
        };
        let r = search(
            space(),
            settings,
            Some(&vec![8, 2, 1, 1, 0, 0, 3]),
            &mut evaluate,
            &valid,
        )
        .unwrap();
        let (cfg, found) = r.best.clone().unwrap();
        assert_eq!(
            (cfg, found),
            (best.clone(), t),
            "seed {seed} after {} evaluations",
            r.evaluations
        );
    }
}

#[test]
fn never_evaluates_twice_nor_invalid_and_starts_with_the_reference() {
    let seen = RefCell::new(HashSet::new());
    let mut eval = |c: &Config| {
        assert!(valid(c), "invalid configuration evaluated: {c:?}");
        assert!(
            seen.borrow_mut().insert(c.clone()),
            "evaluated twice: {c:?}"
        );
        evaluate(c)
    };
    let reference = vec![8, 2, 1, 1, 0, 0, 3];
    let settings = Settings {
        seed: 7,
        max_evals: Some(400),
        ..Settings::default()
    };
    let r = search(space(), settings, Some(&reference), &mut eval, &valid).unwrap();
    assert_eq!(r.history[0].config, reference);
    assert_eq!(r.history[0].operator, Operator::Reference);
    assert_eq!(r.evaluations, 400);
    assert_eq!(r.stop, Some(Stop::MaxEvals));
    assert!(r.failures > 0, "the failing region was never visited");
    assert!(r.history.iter().any(|h| h.operator == Operator::Crossover));
    assert!(r.history.iter().any(|h| h.operator == Operator::Reset));
    assert!(r.history.iter().any(|h| h.operator == Operator::Neighbour));
    // the result is never worse than the reference
    assert!(r.best.unwrap().1 <= time(&reference).unwrap());
    assert!(!r.elites.is_empty() && r.elites.windows(2).all(|w| w[0].time <= w[1].time));
}

#[test]
fn exhausts_a_small_space() {
    let p = |n: &str, v: &[i64]| Param {
        name: n.into(),
        values: v.to_vec(),
    };
    let s = Space::new(vec![p("a", &[1, 2, 3]), p("b", &[1, 2])]).unwrap();
    let mut eval = |c: &Config| Evaluation::ok((c[0] * c[1]) as f64, 1.0);
    let r = search(
        s,
        Settings {
            max_evals: None,
            ..Settings::default()
        },
        None,
        &mut eval,
        &|c: &Config| c[0] != 2,
    )
    .unwrap();
    assert_eq!(r.evaluations, 4);
    assert_eq!(r.stop, Some(Stop::Exhausted));
    assert_eq!(r.best.unwrap().0, vec![1, 1]);
}

/// A space with few valid configurations is enumerated once, not at every proposal, and the
/// search is the same as without that memory: a checkpoint (which does not carry it) resumes
/// exactly.
#[test]
fn a_sparse_space_is_enumerated_once_and_resumes_exactly() {
    let p = |n: &str| Param {
        name: n.into(),
        values: (0..40).collect(),
    };
    let space = || Space::new(vec![p("a"), p("b"), p("c")]).unwrap();
    // 12 valid configurations of 64 000.
    let sparse = |c: &Config| c[0] == c[1] && c[1] == c[2] && c[0] % 10 < 3;
    let calls = std::cell::Cell::new(0usize);
    let counted = |c: &Config| {
        calls.set(calls.get() + 1);
        sparse(c)
    };
    let mut eval = |c: &Config| Evaluation::ok(1.0 + (c[0] as f64 - 17.0).abs(), 1.0);
    let settings = Settings {
        seed: 3,
        max_evals: Some(10),
        ..Settings::default()
    };
    let whole = search(space(), settings.clone(), None, &mut eval, &counted).unwrap();
    assert_eq!(whole.evaluations, 10);
    // One enumeration (64 000 answers) and at most a few thousand random draws a proposal;
    // an enumeration at every proposal would be 640 000.
    assert!(
        calls.get() < 64_000 + 10 * 4_000,
        "{} answers of `valid`",
        calls.get()
    );
    let mut s = SearchState::new(space(), settings, None).unwrap();
    for _ in 0..5 {
        assert!(matches!(s.step(&mut eval, &sparse), Stepped::Evaluated(_)));
    }
    let json = serde_json::to_string(&s).unwrap();
    let mut resumed: SearchState = serde_json::from_str::<SearchState>(&json)
        .unwrap()
        .validated()
        .unwrap();
    let r = resumed.run(&mut eval, &sparse, &mut |_| true);
    assert!(r.history == whole.history, "the resumed run differs");
}

#[test]
fn time_and_stagnation_budgets() {
    let settings = Settings {
        max_evals: None,
        max_seconds: Some(30.0),
        ..Settings::default()
    };
    let r = search(space(), settings, None, &mut evaluate, &valid).unwrap();
    assert_eq!(r.stop, Some(Stop::MaxSeconds));
    assert!(r.elapsed >= 30.0 && r.history[r.evaluations - 2].elapsed < 30.0);

    let settings = Settings {
        max_evals: Some(100_000),
        stagnation: Some(40),
        ..Settings::default()
    };
    let r = search(space(), settings, None, &mut evaluate, &valid).unwrap();
    assert_eq!(r.stop, Some(Stop::Stagnation));
    let best = r.best_eval.unwrap();
    assert_eq!(r.evaluations, best + 1 + 40);
}

#[test]
fn observer_sees_progress_and_can_stop() {
    let mut s = SearchState::new(space(), Settings::default(), None).unwrap();
    let mut calls = 0;
    let r = s.run(&mut evaluate, &valid, &mut |p| {
        calls += 1;
        assert_eq!(p.evaluations, calls);
        assert!(p.best.is_some() || p.failures == p.evaluations);
        calls < 25
    });
    assert_eq!(r.evaluations, 25);
    assert_eq!(r.stop, Some(Stop::Interrupted));
    // and it can go on afterwards
    s.set_budgets(Some(30), None, None);
    let r = s.run(&mut evaluate, &valid, &mut |_| true);
    assert_eq!((r.evaluations, r.stop), (30, Some(Stop::MaxEvals)));
}

#[test]
fn seeded_runs_repeat_and_checkpoints_resume_exactly() {
    let settings = Settings {
        seed: 42,
        max_evals: Some(200),
        ..Settings::default()
    };
    let a = search(space(), settings.clone(), None, &mut evaluate, &valid).unwrap();
    let b = search(space(), settings.clone(), None, &mut evaluate, &valid).unwrap();
    assert!(a.history == b.history, "same seed, different runs");
    let c = search(
        space(),
        Settings {
            seed: 43,
            ..settings.clone()
        },
        None,
        &mut evaluate,
        &valid,
    )
    .unwrap();
    assert!(a.history != c.history, "different seeds, same runs");

    // stop after 90 steps, checkpoint through JSON, resume
    let mut s = SearchState::new(space(), settings, None).unwrap();
    for _ in 0..90 {
        assert!(matches!(
            s.step(&mut evaluate, &valid),
            Stepped::Evaluated(_)
        ));
    }
    let json = serde_json::to_string(&s).unwrap();
    drop(s);
    let mut resumed: SearchState = serde_json::from_str::<SearchState>(&json)
        .unwrap()
        .validated()
        .unwrap();
    let r = resumed.run(&mut evaluate, &valid, &mut |_| true);
    assert!(r.history == a.history, "the resumed run differs");
}

#[test]
fn tampered_checkpoints_are_refused_not_resumed() {
    let settings = Settings {
        seed: 5,
        max_evals: Some(60),
        ..Settings::default()
    };
    let mut s =
        SearchState::new(space(), settings.clone(), Some(&vec![8, 2, 1, 1, 0, 0, 3])).unwrap();
    for _ in 0..30 {
        s.step(&mut evaluate, &valid);
    }
    let v = serde_json::to_value(&s).unwrap();
    // the genuine state is accepted
    assert!(serde_json::from_value::<SearchState>(v.clone())
        .unwrap()
        .validated()
        .is_ok());
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "no islands",
            Box::new(|v| v["settings"]["islands"] = 0.into()),
        ),
        (
            "no islands in the archive list",
            Box::new(|v| v["islands"] = serde_json::json!([])),
        ),
        (
            "an index out of range",
            Box::new(|v| v["history"][3]["config"][0] = 12345.into()),
        ),
        (
            "a later parent",
            Box::new(|v| v["history"][3]["parent"] = 29.into()),
        ),
        (
            "an island that does not exist",
            Box::new(|v| v["history"][3]["island"] = 7.into()),
        ),
        (
            "a best beyond the history",
            Box::new(|v| v["best"] = 1000.into()),
        ),
        (
            "an archive elite from nowhere",
            Box::new(|v| v["islands"][0]["slots"][0]["elites"][0]["eval"] = 999.into()),
        ),
        (
            "a visited entry out of range",
            Box::new(|v| v["visited"][0][1] = 5000.into()),
        ),
        (
            "a reference outside the space",
            Box::new(|v| v["reference"] = serde_json::json!([99, 0, 0, 0, 0, 0, 0])),
        ),
        (
            "fewer dead-end counters",
            Box::new(|v| v["dead_ends"] = serde_json::json!([])),
        ),
        (
            "an empty parameter",
            Box::new(|v| v["space"]["params"][0]["values"] = serde_json::json!([])),
        ),
        (
            "another arm credited",
            Box::new(|v| v["history"][20]["arm"] = flip_arm(&v["history"][20]["arm"])),
        ),
        (
            "a prediction changed",
            Box::new(|v| v["history"][20]["predicted"] = 1234.5.into()),
        ),
        (
            "arm probabilities edited",
            Box::new(|v| v["arms"]["probability"][0] = 0.99.into()),
        ),
        (
            "a floor no arm can keep",
            Box::new(|v| v["settings"]["selection"]["p_min"] = 0.5.into()),
        ),
    ];
    for (what, edit) in edits {
        let mut t = v.clone();
        edit(&mut t);
        // Either it does not deserialize, or validation refuses it: it never panics.
        if let Ok(state) = serde_json::from_value::<SearchState>(t) {
            assert!(state.validated().is_err(), "{what} was accepted");
        }
    }
}

/// A recorded arm replaced by another one.
fn flip_arm(arm: &serde_json::Value) -> serde_json::Value {
    let other = if arm.as_str() == Some("Random") {
        "Screened"
    } else {
        "Random"
    };
    other.into()
}

#[test]
fn checkpoints_of_earlier_versions_resume_with_their_screening_model() {
    // a checkpoint written before `screen_model` existed resumes with the model it used
    let s = SearchState::new(
        space(),
        Settings {
            max_evals: Some(40),
            ..Settings::default()
        },
        None,
    )
    .unwrap();
    let mut v = serde_json::to_value(&s).unwrap();
    v["settings"]
        .as_object_mut()
        .unwrap()
        .remove("screen_model");
    let old: SearchState = serde_json::from_value(v).unwrap();
    assert_eq!(old.settings().screen_model, ScreenModel::Nearest);
    assert_eq!(Settings::default().screen_model, ScreenModel::Relevance);
}

#[test]
fn checkpoints_of_earlier_versions_resume_with_fixed_selection() {
    // before adaptive selection every step screened mutated children: such a checkpoint
    // resumes that way, and reproduces a run made with `selection.adaptive = false`
    let settings = Settings {
        seed: 9,
        max_evals: Some(80),
        ..Settings::default()
    };
    let fixed = Settings {
        selection: Selection {
            adaptive: false,
            ..Selection::default()
        },
        ..settings.clone()
    };
    let whole = search(space(), fixed, None, &mut evaluate, &valid).unwrap();
    let mut s = SearchState::new(space(), settings, None).unwrap();
    let mut v = serde_json::to_value(&s).unwrap();
    v["settings"].as_object_mut().unwrap().remove("selection");
    v.as_object_mut().unwrap().remove("arms");
    s = serde_json::from_value::<SearchState>(v)
        .unwrap()
        .validated()
        .unwrap();
    assert!(!s.settings().selection.adaptive);
    let r = s.run(&mut evaluate, &valid, &mut |_| true);
    assert!(r.history == whole.history);
    assert!(r.history.iter().all(|h| h.arm.is_none()));
    assert!(Settings::default().selection.adaptive);
}

#[test]
fn adaptive_selection_records_every_arm_and_uses_the_model_only_while_it_ranks_well() {
    // Replays the trust rule on the history: a step made while the model's recent predictions
    // ranked the outcomes worse than `trust_min` never used a model-based arm. On noise (times
    // no model can predict) that happens often; on a structured landscape rarely.
    let untrusted_share = |time: &dyn Fn(&Config) -> Option<f64>| {
        let mut eval = |c: &Config| match time(c) {
            Some(t) => Evaluation::ok(t, 1.0),
            None => Evaluation::failed(FailureKind::Build, "fails", 0.5),
        };
        let settings = Settings {
            seed: 11,
            max_evals: Some(400),
            ..Settings::default()
        };
        let s = settings.selection.clone();
        let r = search(space(), settings, None, &mut eval, &valid).unwrap();
        let mut untrusted = 0;
        for (i, h) in r.history.iter().enumerate() {
            let Some(arm) = h.arm else { continue };
            assert!(h.predicted.is_some(), "evaluation {i} has no prediction");
            let recent: Vec<(f64, f64)> = r.history[..i]
                .iter()
                .rev()
                .filter_map(|p| Some((p.predicted?, -p.outcome.time()?.ln())))
                .take(s.trust_window)
                .collect();
            if rank_correlation(&recent).is_some_and(|c| c < s.trust_min) {
                untrusted += 1;
                assert!(
                    !arm.uses_model(),
                    "evaluation {i} used {arm:?} without trust"
                );
            }
        }
        let arms: Vec<Arm> = r.history.iter().filter_map(|h| h.arm).collect();
        for arm in Arm::ALL {
            assert!(arms.contains(&arm), "{arm:?} never chosen");
        }
        untrusted as f64 / arms.len() as f64
    };
    let structured = untrusted_share(&time);
    let noise = untrusted_share(&|c: &Config| {
        // splitmix64's finaliser over the values: no structure left for a model to find
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let h = c.iter().fold(0u64, |h, &x| {
            mix(h.wrapping_add(x as u64).wrapping_add(0x9e37_79b9_7f4a_7c15))
        });
        Some(1e-3 * (1.0 + (h >> 40) as f64 / (1u64 << 24) as f64))
    });
    eprintln!("steps without trust in the model: {structured:.2} (structured), {noise:.2} (noise)");
    assert!(
        noise > 0.2 && structured < noise / 2.0,
        "untrusted: structured {structured:.2}, noise {noise:.2}"
    );
}

#[test]
fn every_screening_model_reaches_the_optimum() {
    let (best, _) = optimum();
    for model in [
        ScreenModel::Nearest,
        ScreenModel::Additive,
        ScreenModel::Relevance,
    ] {
        let settings = Settings {
            seed: 3,
            max_evals: Some(250),
            screen_model: model,
            ..Settings::default()
        };
        let r = search(space(), settings, None, &mut evaluate, &valid).unwrap();
        assert_eq!(r.best.unwrap().0, best, "{model:?}");
    }
}

#[test]
fn ablations_run() {
    for settings in [
        Settings {
            gradient_steering: true,
            max_evals: Some(150),
            ..Settings::default()
        },
        Settings {
            single_cell: true,
            max_evals: Some(150),
            ..Settings::default()
        },
        Settings {
            islands: 1,
            max_evals: Some(150),
            ..Settings::default()
        },
    ] {
        let r = search(space(), settings, None, &mut evaluate, &valid).unwrap();
        assert_eq!(r.evaluations, 150);
        assert!(r.best.is_some());
    }
    let single = search(
        space(),
        Settings {
            single_cell: true,
            ..Settings::default()
        },
        None,
        &mut evaluate,
        &valid,
    )
    .unwrap();
    assert!(single.elites.iter().all(|e| e.cell.is_empty()));
    assert!(single.elites.len() <= 16);
}

#[test]
fn settings_are_set_from_text() {
    let mut s = Settings::default();
    s.set("screening=8").unwrap();
    s.set("sampling.explore=0.4").unwrap();
    s.set("screen_model=Nearest").unwrap();
    s.set("stagnation=50").unwrap();
    assert_eq!(
        (
            s.screening,
            s.sampling.explore,
            s.screen_model,
            s.stagnation
        ),
        (8, 0.4, ScreenModel::Nearest, Some(50))
    );
    let unknown = s.set("screenings=8").unwrap_err();
    assert!(
        unknown.contains("screenings") && unknown.contains("no such setting"),
        "{unknown}"
    );
    let nested_unknown = s.set("sampling.greed=1").unwrap_err();
    assert!(
        nested_unknown.contains("no such setting"),
        "{nested_unknown}"
    );
    let bad = s.set("screening=many").unwrap_err();
    assert!(bad.contains("screening=many"), "{bad}");
    assert!(s.set("screening").unwrap_err().contains("KEY=VALUE"));
    // a failed assignment changes nothing
    assert_eq!(s.screening, 8);
}

/// A scripted external operator: wants a turn every `every` evaluations (and any time once
/// the space is exhausted, while `after_exhaustion`), each turn costing `cost` seconds.
struct Scripted {
    every: usize,
    after_exhaustion: bool,
    cost: f64,
    turns: Vec<(usize, usize)>,
}

impl<E: kfoundry_search::Evaluator + ?Sized> kfoundry_search::ExternalOperator<E> for Scripted {
    fn wants_turn(&self, p: &kfoundry_search::Progress, exhausted: bool) -> bool {
        if exhausted {
            return self.after_exhaustion;
        }
        p.evaluations > 0 && (p.evaluations + p.external_turns) % self.every == 0
    }
    fn turn(&mut self, evaluator: &mut E, p: &kfoundry_search::Progress) -> f64 {
        // The operator may use the search's evaluator for its own candidates.
        let _ = evaluator.evaluate(&vec![1, 16, 1, 1, 0, 0, 3]);
        self.turns.push((p.evaluations, p.external_turns));
        self.cost
    }
}

#[test]
fn external_turns_share_the_loop_and_the_evaluation_budget() {
    let settings = Settings {
        seed: 3,
        max_evals: Some(30),
        ..Settings::default()
    };
    let mut state = SearchState::new(space(), settings, None).unwrap();
    let mut op = Scripted {
        every: 4,
        after_exhaustion: false,
        cost: 0.5,
        turns: Vec::new(),
    };
    let mut eval = |c: &Config| {
        time(c).map_or_else(
            || Evaluation::failed(FailureKind::Build, "x", 0.1),
            |t| Evaluation::ok(t, 0.1),
        )
    };
    let (mut evaluated, mut external) = (0, 0);
    loop {
        match state.step_with(&mut eval, &valid, Some(&mut op)) {
            Stepped::Evaluated(_) => evaluated += 1,
            Stepped::External => external += 1,
            Stepped::Done(stop) => {
                assert_eq!(stop, Stop::MaxEvals);
                break;
            }
        }
    }
    assert_eq!(evaluated + external, 30, "one budget for both");
    assert!(external >= 5, "turns were given: {external}");
    assert_eq!(state.history().len(), evaluated);
    assert_eq!(state.progress().external_turns, external);
    // The turns' cost is on the clock: 0.5 s each beside 0.1 s per evaluation.
    let elapsed = state.progress().elapsed;
    assert!(
        (elapsed - (0.1 * evaluated as f64 + 0.5 * external as f64)).abs() < 1e-9,
        "{elapsed}"
    );
    // A checkpoint keeps the turns: the resumed search does not give the budget back.
    let json = serde_json::to_string(&state).unwrap();
    let resumed: SearchState = serde_json::from_str::<SearchState>(&json)
        .unwrap()
        .validated()
        .unwrap();
    assert_eq!(resumed.progress().external_turns, external);
    assert_eq!(resumed.stopped(), Some(Stop::MaxEvals));
}

#[test]
fn the_time_budget_counts_external_turns() {
    let settings = Settings {
        seed: 5,
        max_evals: Some(1000),
        max_seconds: Some(10.0),
        ..Settings::default()
    };
    let mut state = SearchState::new(space(), settings, None).unwrap();
    let mut op = Scripted {
        every: 2,
        after_exhaustion: false,
        cost: 2.0,
        turns: Vec::new(),
    };
    let mut eval = |c: &Config| {
        time(c).map_or_else(
            || Evaluation::failed(FailureKind::Build, "x", 0.01),
            |t| Evaluation::ok(t, 0.01),
        )
    };
    let stop = loop {
        if let Stepped::Done(stop) = state.step_with(&mut eval, &valid, Some(&mut op)) {
            break stop;
        }
    };
    assert_eq!(stop, Stop::MaxSeconds);
    assert!(
        op.turns.len() <= 5,
        "10 s hold at most five 2 s turns: {}",
        op.turns.len()
    );
}

#[test]
fn an_exhausted_space_leaves_the_rest_of_the_budget_to_the_external_operator() {
    let p = |n: &str, v: &[i64]| Param {
        name: n.into(),
        values: v.to_vec(),
    };
    let tiny = Space::new(vec![p("a", &[1, 2]), p("b", &[1, 2])]).unwrap();
    let mut eval = |c: &Config| Evaluation::ok((c[0] + c[1]) as f64, 0.1);
    let all = |_: &Config| true;
    // Without an operator, or with one that declines, the search ends exhausted after the 4 configurations.
    for after_exhaustion in [false, true] {
        let settings = Settings {
            seed: 1,
            max_evals: Some(10),
            ..Settings::default()
        };
        let mut state = SearchState::new(tiny.clone(), settings, None).unwrap();
        let mut op = Scripted {
            every: 1000,
            after_exhaustion,
            cost: 0.0,
            turns: Vec::new(),
        };
        let stop = loop {
            if let Stepped::Done(stop) = state.step_with(&mut eval, &all, Some(&mut op)) {
                break stop;
            }
        };
        assert_eq!(state.history().len(), 4);
        if after_exhaustion {
            assert_eq!(
                (stop, op.turns.len()),
                (Stop::MaxEvals, 6),
                "the operator took the other 6 of 10"
            );
        } else {
            assert_eq!((stop, op.turns.len()), (Stop::Exhausted, 0));
        }
    }
}

/// An evaluator that records what it was told was coming and what it was asked for.
#[derive(Default)]
struct Recording {
    prepared: Vec<Vec<Config>>,
    asked: Vec<Config>,
}

impl kfoundry_search::Evaluator for Recording {
    fn evaluate(&mut self, c: &Config) -> Evaluation {
        self.asked.push(c.clone());
        match time(c) {
            Some(t) => Evaluation::ok(t, 0.01),
            None => Evaluation::failed(FailureKind::Build, "too many registers", 0.01),
        }
    }
    fn prepare(&mut self, upcoming: &[Config]) {
        self.prepared.push(upcoming.to_vec());
    }
}

/// In batches of 4, the evaluator hears each batch before its first evaluation, and is then
/// asked for exactly those configurations in that order; no configuration twice; a record
/// says when it was proposed. Batch 1 is the search as it always was (no hints).
#[test]
fn batches_are_announced_then_evaluated_in_order() {
    let settings = |batch| Settings {
        seed: 5,
        max_evals: Some(62),
        batch,
        ..Settings::default()
    };
    let mut e = Recording::default();
    let mut s = SearchState::new(space(), settings(4), None).unwrap();
    while let Stepped::Evaluated(_) = s.step(&mut e, &valid) {}
    assert_eq!(e.asked.len(), 62);
    assert_eq!(
        e.asked.iter().collect::<HashSet<_>>().len(),
        62,
        "no configuration twice"
    );
    let announced: Vec<Config> = e.prepared.iter().flatten().cloned().collect();
    assert_eq!(
        announced,
        e.asked[..announced.len()],
        "announced, then asked for, in order"
    );
    let sizes: Vec<usize> = e.prepared.iter().map(Vec::len).collect();
    assert_eq!(
        sizes,
        [vec![4; 15], vec![2]].concat(),
        "15 batches of 4, then the 2 the budget leaves"
    );
    for (i, r) in s.history().iter().enumerate() {
        assert_eq!(
            r.proposed_at,
            (i % 4 != 0).then_some(i - i % 4),
            "evaluation {i}"
        );
    }
    let mut one = Recording::default();
    let mut s1 = SearchState::new(space(), settings(1), None).unwrap();
    while let Stepped::Evaluated(_) = s1.step(&mut one, &valid) {}
    assert!(one.prepared.is_empty() && s1.history().iter().all(|r| r.proposed_at.is_none()));
}

/// A checkpoint taken in the middle of a batch resumes with the rest of it: the same history
/// as a search that never stopped.
#[test]
fn a_checkpoint_in_the_middle_of_a_batch_resumes_exactly() {
    let settings = Settings {
        seed: 9,
        max_evals: Some(60),
        batch: 4,
        ..Settings::default()
    };
    let mut straight = SearchState::new(space(), settings.clone(), None).unwrap();
    let mut e = Recording::default();
    while let Stepped::Evaluated(_) = straight.step(&mut e, &valid) {}
    for stop_at in [1, 2, 3, 5, 22, 41] {
        let mut s = SearchState::new(space(), settings.clone(), None).unwrap();
        for _ in 0..stop_at {
            s.step(&mut Recording::default(), &valid);
        }
        let text = serde_json::to_string(&s).unwrap();
        let mut resumed: SearchState = serde_json::from_str::<SearchState>(&text)
            .unwrap()
            .validated()
            .unwrap();
        while let Stepped::Evaluated(_) = resumed.step(&mut Recording::default(), &valid) {}
        assert!(
            resumed.history() == straight.history(),
            "stopped after {stop_at}"
        );
    }
    // A pending proposal edited to one already evaluated is refused.
    let mut s = SearchState::new(space(), settings, None).unwrap();
    for _ in 0..6 {
        s.step(&mut Recording::default(), &valid);
    }
    let mut v = serde_json::to_value(&s).unwrap();
    let done = v["history"][0]["config"].clone();
    let first = serde_json::to_value(s.history()[0].config.clone()).unwrap();
    assert_eq!(done, first);
    let idx = space().indices(&s.history()[0].config).unwrap();
    v["pending"][0]["proposal"]["child"] = serde_json::to_value(idx).unwrap();
    let e = serde_json::from_value::<SearchState>(v)
        .unwrap()
        .validated()
        .unwrap_err();
    assert!(e.contains("not yet evaluated"), "{e}");
}

/// Warm starts are evaluated right after the reference, in the order given, leaving out those
/// not in the space, invalid, repeated or the reference; a checkpoint keeps those not yet
/// evaluated; a search that has started takes none.
#[test]
fn warm_starts_come_right_after_the_reference() {
    let reference = vec![8, 2, 1, 1, 0, 0, 3];
    let settings = Settings {
        seed: 3,
        max_evals: Some(40),
        ..Settings::default()
    };
    let mut s = SearchState::new(space(), settings, Some(&reference)).unwrap();
    let warm = vec![
        vec![32, 4, 6, 4, 1, 1, 3],
        vec![32, 4, 6, 4, 1, 1, 99], // not a value of the space
        reference.clone(),
        vec![1, 1, 1, 1, 0, 0, 3],  // invalid: a work-group of 1
        vec![32, 4, 6, 4, 1, 1, 3], // repeated
        vec![16, 4, 2, 2, 0, 1, 3],
    ];
    assert_eq!(
        s.warm_start(&warm),
        3,
        "in the space, new, not the reference"
    );
    s.step(&mut evaluate, &valid);
    s.step(&mut evaluate, &valid);
    // the rest survives a checkpoint
    let v = serde_json::to_value(&s).unwrap();
    let mut s = serde_json::from_value::<SearchState>(v)
        .unwrap()
        .validated()
        .unwrap();
    for _ in 0..6 {
        s.step(&mut evaluate, &valid);
    }
    let ops: Vec<(Config, Operator)> = s
        .history()
        .iter()
        .map(|r| (r.config.clone(), r.operator))
        .collect();
    assert_eq!(ops[0], (reference.clone(), Operator::Reference));
    assert_eq!(ops[1], (warm[0].clone(), Operator::WarmStart));
    assert_eq!(ops[2], (warm[5].clone(), Operator::WarmStart));
    assert!(
        ops[3..].iter().all(|(_, op)| *op != Operator::WarmStart),
        "{ops:?}"
    );
    // the best warm start seeds the archive: the search's best is at least as good
    let best = s.progress().best.map(|(_, t)| t).unwrap();
    assert!(best <= time(&warm[0]).unwrap(), "{best}");
    // too late for a search that has evaluated something
    assert_eq!(s.warm_start(&[vec![16, 8, 2, 2, 0, 1, 3]]), 0);
}

/// Speculation offers, before each evaluation, configurations the search may propose next,
/// and changes nothing of the search: the same history (configurations, outcomes, operators)
/// as without it, with or without a reference and a checkpoint on the way. What it offers is
/// new and valid, and most of the time the next evaluation is among it.
#[test]
fn speculation_offers_what_comes_next_and_changes_nothing() {
    let reference = vec![8, 2, 1, 1, 0, 0, 3];
    for (seed, with_reference) in [(1, true), (2, false), (7, true)] {
        let settings = |speculate| Settings {
            seed,
            max_evals: Some(80),
            speculate,
            ..Settings::default()
        };
        let reference = with_reference.then_some(&reference);
        let history = |s: &SearchState| -> Vec<(Config, Operator, Option<f64>)> {
            s.history()
                .iter()
                .map(|r| (r.config.clone(), r.operator, r.outcome.time()))
                .collect()
        };
        let mut plain = SearchState::new(space(), settings(0), reference).unwrap();
        let mut none = Recording::default();
        while let Stepped::Evaluated(_) = plain.step(&mut none, &valid) {}
        assert!(none.prepared.is_empty(), "no speculation, no offers");

        let mut s = SearchState::new(space(), settings(3), reference).unwrap();
        let mut e = Recording::default();
        for _ in 0..30 {
            s.step(&mut e, &valid);
        }
        let v = serde_json::to_value(&s).unwrap();
        let mut s = serde_json::from_value::<SearchState>(v)
            .unwrap()
            .validated()
            .unwrap();
        while let Stepped::Evaluated(_) = s.step(&mut e, &valid) {}
        assert_eq!(history(&s), history(&plain), "seed {seed}");

        // one offer before each evaluation but the first (nothing to speculate past when
        // the budget is spent after it), each new and valid
        assert!(e.prepared.len() >= 70, "{} offers", e.prepared.len());
        let mut hits = 0;
        for (i, asked) in e.asked.iter().enumerate().skip(1) {
            let offered = &e.prepared[..i.min(e.prepared.len())];
            hits += usize::from(offered.iter().flatten().any(|c| c == asked));
        }
        for (k, offer) in e.prepared.iter().enumerate() {
            for c in offer {
                assert!(valid(c), "offer {k}: {c:?} is not valid");
                assert!(!e.asked[..k].contains(c), "offer {k}: {c:?} was evaluated");
            }
        }
        assert!(
            hits >= 60,
            "seed {seed}: {hits} of 79 evaluations had been offered"
        );
    }
}

/// A space where, as on a GPU, a work-group too large for the kernel fails (BX * BY > 256,
/// 44% of the space, whatever U and V) and the fastest configurations sit just below that
/// limit: with the failure cones on, the first 30 evaluations of 20 seeds hold at least 10%
/// fewer failures than with them off (158 against 179 when written), and the best found is no
/// worse on the whole. (On a limit that every parameter takes part in, such as BX * BY * U * V,
/// the cones of single failures cover little and save nothing.)
#[test]
fn failure_cones_keep_the_search_out_of_what_failed() {
    let space = Space::new(vec![
        Param {
            name: "BX".into(),
            values: vec![16, 32, 64, 128, 256],
        },
        Param {
            name: "BY".into(),
            values: vec![1, 2, 4, 8, 16],
        },
        Param {
            name: "U".into(),
            values: vec![1, 2, 4, 8],
        },
        Param {
            name: "V".into(),
            values: vec![1, 2, 4],
        },
    ])
    .unwrap();
    let mut evaluate = |c: &Config| {
        let wg = c[0] * c[1];
        if wg > 256 {
            return Evaluation::failed(FailureKind::Runtime, "work-group too large", 0.01);
        }
        let t = 1.0
            + ((wg as f64).log2() - 8.0).abs()
            + ((c[2] as f64).log2() - 2.0).abs()
            + 0.5 * ((c[3] as f64).log2() - 1.0).abs();
        Evaluation::ok(t * 1e-3, 0.01)
    };
    let mut totals = [(0usize, 0.0f64); 2];
    for (k, cones) in [true, false].into_iter().enumerate() {
        for seed in 0..20 {
            let settings = Settings {
                seed,
                max_evals: Some(30),
                selection: Selection {
                    cones,
                    ..Selection::default()
                },
                ..Settings::default()
            };
            let r = search(
                space.clone(),
                settings,
                Some(&vec![32, 2, 1, 1]),
                &mut evaluate,
                &|_| true,
            )
            .unwrap();
            totals[k].0 += r.failures;
            totals[k].1 += r.best.unwrap().1;
        }
    }
    let [(on, on_best), (off, off_best)] = totals;
    assert!(
        on * 10 <= off * 9,
        "failures with the cones {on}, without {off}"
    );
    assert!(
        on_best <= off_best * 1.02,
        "best times summed: {on_best} against {off_best}"
    );
}

/// The work-group tests' space: a work-group of `BX * BY` items and an unroll `U`.
fn work_group_space() -> Space {
    Space::new(vec![
        Param {
            name: "BX".into(),
            values: vec![16, 32, 64, 128, 256],
        },
        Param {
            name: "BY".into(),
            values: vec![1, 2, 4, 8, 16],
        },
        Param {
            name: "U".into(),
            values: vec![1, 2, 4, 8],
        },
    ])
    .unwrap()
}

/// A time on [`work_group_space`], fastest at a work-group of 256 and `U` = 4 (seconds).
fn work_group_time(c: &Config) -> f64 {
    let wg = c[0] * c[1];
    (1.0 + ((wg as f64).log2() - 8.0).abs() + ((c[2] as f64).log2() - 2.0).abs()) * 1e-3
}

/// Given each configuration's work-group size, and a limit the evaluations report (as a driver
/// does for every kernel it builds), the initial samples stay within it, and the whole search
/// fails less than one that is not given the size; a success above the limit lifts it.
#[test]
fn a_reported_work_group_limit_keeps_the_search_within_it() {
    let space = work_group_space();
    // The driver allows 256; `lifted` kernels run at 512 too (a limit that was too low).
    let evaluate = |lifted: bool| {
        move |c: &Config| {
            let wg = c[0] * c[1];
            if wg > if lifted { 512 } else { 256 } {
                return Evaluation::failed(FailureKind::Invalid, "work-group too large", 0.01);
            }
            Evaluation::Ok {
                time: work_group_time(c),
                cost: 0.01,
                descriptors: vec![(cones::WORK_GROUP_LIMIT.to_string(), 256.0)],
            }
        }
    };
    let size = || cones::GroupSize::new(|c: &Config| Some((c[0] * c[1]) as u64));
    let mut failures = [0usize; 2];
    for seed in 0..20 {
        for (k, sized) in [true, false].into_iter().enumerate() {
            let settings = Settings {
                seed,
                max_evals: Some(30),
                ..Settings::default()
            };
            let mut s = SearchState::new(space.clone(), settings, Some(&vec![32, 2, 1])).unwrap();
            if sized {
                s.set_group_size(Some(size()));
            }
            let r = s.run(&mut evaluate(false), &|_| true, &mut |_| true);
            failures[k] += r.failures;
            if sized {
                // The reference and the 8 initial samples: none over the limit.
                assert!(
                    r.history[..9].iter().all(|h| h.outcome.time().is_some()),
                    "seed {seed}: {:?}",
                    r.history[..9].iter().map(|h| &h.config).collect::<Vec<_>>()
                );
            }
        }
    }
    assert!(
        failures[0] * 2 <= failures[1],
        "failures given the work-group size {}, not given it {}",
        failures[0],
        failures[1]
    );
    // Where 512 runs, the reference's success there lifts the limit to 512: initial samples
    // at 512 are drawn (none would be under 256), none above.
    let mut at_512 = 0;
    for seed in 0..20 {
        let settings = Settings {
            seed,
            max_evals: Some(9),
            ..Settings::default()
        };
        let mut s = SearchState::new(space.clone(), settings, Some(&vec![256, 2, 1])).unwrap();
        s.set_group_size(Some(size()));
        let r = s.run(&mut evaluate(true), &|_| true, &mut |_| true);
        let wg = |h: &kfoundry_search::Record| h.config[0] * h.config[1];
        assert!(r.history.iter().all(|h| wg(h) <= 512), "seed {seed}");
        at_512 += r.history[1..].iter().filter(|h| wg(h) == 512).count();
    }
    assert!(at_512 > 0, "no initial sample at the lifted limit");
}

/// Given each configuration's work-group size but no reported limit (a Kernel Tuner file, a
/// driver that says nothing), the limit is learned from failures: the search fails less than
/// with the learning off, and work-groups at or above the smallest failure come last.
#[test]
fn a_work_group_limit_is_learned_from_failures_where_none_is_reported() {
    let space = work_group_space();
    let mut evaluate = |c: &Config| {
        let wg = c[0] * c[1];
        if wg > 256 {
            return Evaluation::failed(FailureKind::Runtime, "too many resources", 0.01);
        }
        Evaluation::ok(work_group_time(c), 0.01)
    };
    let size = || cones::GroupSize::new(|c: &Config| Some((c[0] * c[1]) as u64));
    let mut failures = [0usize; 2];
    for seed in 0..20 {
        for (k, learn) in [true, false].into_iter().enumerate() {
            let settings = Settings {
                seed,
                max_evals: Some(40),
                selection: Selection {
                    learn_group_limit: learn,
                    ..Selection::default()
                },
                ..Settings::default()
            };
            let mut s = SearchState::new(space.clone(), settings, Some(&vec![32, 2, 1])).unwrap();
            s.set_group_size(Some(size()));
            let r = s.run(&mut evaluate, &|_| true, &mut |_| true);
            failures[k] += r.failures;
        }
    }
    assert!(
        failures[0] * 4 <= failures[1] * 3,
        "failures learning the limit {}, not learning it {}",
        failures[0],
        failures[1]
    );
}
