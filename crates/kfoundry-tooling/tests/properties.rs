//! Property tests (proptest) for the parsers of kfoundry's model: the expression language
//! (`kfoundry_rt::model::expr`), the OpenCL C signature reader (`kfoundry_rt::model::signature`),
//! the lockfile (`kfoundry_tooling::lockfile`), the annotation parser
//! (`kfoundry_tooling::annotation`) and a bundle's specifications. The libFuzzer targets for the
//! same parsers are in `crates/kfoundry-tooling/fuzz`.
//!
//! What is checked:
//! - no input makes a parser (or `Expr::eval`) panic or overflow the stack: arbitrary strings,
//!   token soups made of each parser's vocabulary, and random mutations of valid inputs;
//! - expressions: `parse → to_string → parse` gives an equal `Expr` and printing is a fixed
//!   point; randomly generated expression trees (all operators, functions, parentheses,
//!   literals in every notation including the `i64` extremes) parse, and `eval` agrees with an
//!   independent reference evaluator written here (values and error kinds);
//! - signatures: generated kernels (random qualifiers, spellings, types, names, comments,
//!   attributes, several kernels per source) parse back to exactly the generated arguments;
//! - lockfiles: `parse(to_toml(x)) == x` (variants sorted), `to_toml` is deterministic,
//!   independent of variant order and a fixed point.
//!
//! Running:
//! ```text
//! cargo test -p kfoundry-tooling --test properties                  # a few seconds
//! PROPTEST_CASES=100000 cargo test -p kfoundry-tooling --release --test properties
//! ```
//! `PROPTEST_CASES` sets the number of cases of every property (the defaults below keep the
//! file under ~20 s on two cores in a debug build).
//!
//! The bugs these properties found (deep left-associative chains overflowing the stack,
//! comparison and negated-literal printing, the i64::MIN literal, overflowing parameter ranges,
//! u64 lockfile fields emptying the file) are fixed; the `bug_*` tests keep their reproducers as
//! regression tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kfoundry_rt::model::device::{DeviceInfo, DeviceKey};
use kfoundry_rt::model::expr::{Env, EvalError, Expr};
use kfoundry_rt::model::signature::{self, AddressSpace, KernelArg, KernelSignature, ScalarType};
use kfoundry_rt::model::variant::Variant;
use kfoundry_tooling::lockfile::{KernelEntry, Lockfile};
use proptest::prelude::*;
use proptest::sample::select;

// ---------------------------------------------------------------------------------------------
// Configuration and shared helpers

/// `cases` unless `PROPTEST_CASES` says otherwise; no regression files are written (the
/// reproducers of what was found live in this file as `bug_*` tests).
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 20_000,
        ..ProptestConfig::default()
    }
}

thread_local! {
    /// Where the last panic on this thread happened (file, message), recorded by `panic_hook`.
    static LAST_PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Records the location of panics on each thread so that a property can tell a known bug from
/// a new one; keeps the default report for every panic.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let message = payload_message(info.payload());
            LAST_PANIC.with(|p| *p.borrow_mut() = Some((file, message)));
            previous(info);
        }));
    });
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".into())
}

/// Runs `f`, turning a panic into `Err((location, message))`.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, (String, String)> {
    install_panic_hook();
    LAST_PANIC.with(|p| *p.borrow_mut() = None);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| (String::new(), payload_message(&*payload)))
    })
}

/// Runs `f` in a thread with a fixed 2 MiB stack (the default of test threads), so that the
/// stack-depth checks mean the same whatever `RUST_MIN_STACK` says.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Applies byte-level mutations to `text`: deletions, insertions from `fragments`, line
/// duplications and swaps, truncation. Keeps `text` valid UTF-8 (edits at char boundaries).
fn mutate(text: &str, ops: &[(u8, usize, usize)], fragments: &[&str]) -> String {
    fn boundary(s: &str, at: usize) -> usize {
        if s.is_empty() {
            return 0;
        }
        let mut at = at % (s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
    let mut s = text.to_string();
    for &(kind, a, b) in ops {
        match kind % 6 {
            0 => {
                let (x, y) = (boundary(&s, a), boundary(&s, a.wrapping_add(b % 16)));
                let (x, y) = (x.min(y), x.max(y));
                s.replace_range(x..y, "");
            }
            1 | 2 => {
                let at = boundary(&s, a);
                s.insert_str(at, fragments[b % fragments.len()]);
            }
            3 => {
                let mut lines: Vec<&str> = s.lines().collect();
                if !lines.is_empty() {
                    let i = a % lines.len();
                    lines.insert(b % (lines.len() + 1), lines[i]);
                }
                s = lines.join("\n");
            }
            4 => {
                let mut lines: Vec<&str> = s.lines().collect();
                if !lines.is_empty() {
                    let (i, j) = (a % lines.len(), b % lines.len());
                    lines.swap(i, j);
                }
                s = lines.join("\n");
            }
            _ => {
                let at = boundary(&s, a);
                s.truncate(at);
            }
        }
    }
    s
}

fn mutations() -> impl Strategy<Value = Vec<(u8, usize, usize)>> {
    prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..8)
}

/// Strings of arbitrary (including control and non-ASCII) characters.
fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<char>(), 0..max).prop_map(String::from_iter),
        prop::collection::vec(prop::char::range(' ', '~'), 0..max).prop_map(String::from_iter),
    ]
}

/// Concatenations of `vocabulary` entries with random separators.
fn token_soup(vocabulary: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        (select(vocabulary), select(&["", " ", "\n", "  "][..])),
        0..max,
    )
    .prop_map(|parts| {
        parts
            .into_iter()
            .map(|(t, sep)| format!("{t}{sep}"))
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Expressions: a reference model

const VARS: [&str; 6] = ["a", "b", "n", "WG", "x_1", "min"];

/// (symbol, precedence) of the binary operators, in `Expr`'s order.
const OPS: [(&str, u8); 18] = [
    ("||", 1),
    ("&&", 2),
    ("==", 3),
    ("!=", 3),
    ("<", 3),
    ("<=", 3),
    (">", 3),
    (">=", 3),
    ("|", 4),
    ("^", 5),
    ("&", 6),
    ("<<", 7),
    (">>", 7),
    ("+", 8),
    ("-", 8),
    ("*", 9),
    ("/", 9),
    ("%", 9),
];

const FUNCS: [(&str, usize); 5] = [
    ("min", 2),
    ("max", 2),
    ("ceil_div", 2),
    ("round_up", 2),
    ("log2", 1),
];

/// An expression tree generated by the tests, independent of the library's `Node`.
#[derive(Clone, Debug)]
enum M {
    /// A literal and the notation to print it in.
    Lit(i64, u8),
    Var(usize),
    Neg(Box<M>),
    Not(Box<M>),
    Bin(usize, Box<M>, Box<M>),
    Call(usize, Vec<M>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Unknown,
    Overflow,
    DivisionByZero,
    Domain,
}

fn kind_of(e: &EvalError) -> Kind {
    match e {
        EvalError::UnknownVariable(_) => Kind::Unknown,
        EvalError::Overflow(_) => Kind::Overflow,
        EvalError::DivisionByZero(_) => Kind::DivisionByZero,
        EvalError::Domain(_) => Kind::Domain,
    }
}

fn fit(v: i128) -> Result<i64, Kind> {
    i64::try_from(v).map_err(|_| Kind::Overflow)
}

/// The documented semantics, computed in `i128`: checked arithmetic, shifts by 0..64 only
/// (`<<` overflows when bits are lost), `ceil_div`/`round_up` need `a >= 0, b > 0`, `log2` needs
/// `a > 0`, `&&`/`||` short-circuit, operands are evaluated left to right.
fn model_eval(m: &M, env: &[Option<i64>]) -> Result<i64, Kind> {
    Ok(match m {
        M::Lit(v, _) => *v,
        M::Var(i) => env[*i].ok_or(Kind::Unknown)?,
        M::Neg(a) => fit(-(model_eval(a, env)? as i128))?,
        M::Not(a) => (model_eval(a, env)? == 0) as i64,
        M::Bin(0, a, b) => (model_eval(a, env)? != 0 || model_eval(b, env)? != 0) as i64,
        M::Bin(1, a, b) => (model_eval(a, env)? != 0 && model_eval(b, env)? != 0) as i64,
        M::Bin(op, a, b) => {
            let (x, y) = (model_eval(a, env)?, model_eval(b, env)?);
            let (xw, yw) = (x as i128, y as i128);
            match OPS[*op].0 {
                "==" => (x == y) as i64,
                "!=" => (x != y) as i64,
                "<" => (x < y) as i64,
                "<=" => (x <= y) as i64,
                ">" => (x > y) as i64,
                ">=" => (x >= y) as i64,
                "|" => x | y,
                "^" => x ^ y,
                "&" => x & y,
                "<<" | ">>" if !(0..64).contains(&y) => return Err(Kind::Domain),
                "<<" => fit(xw * (1i128 << y))?,
                ">>" => x >> y,
                "+" => fit(xw + yw)?,
                "-" => fit(xw - yw)?,
                "*" => fit(xw * yw)?,
                "/" | "%" if y == 0 => return Err(Kind::DivisionByZero),
                "/" => fit(xw / yw)?,
                // i64::MIN % -1 is 0 mathematically, but `checked_rem` calls it an overflow;
                // the library documents checked arithmetic, so that is accepted.
                "%" if x == i64::MIN && y == -1 => return Err(Kind::Overflow),
                "%" => x % y,
                other => unreachable!("operator {other}"),
            }
        }
        M::Call(f, args) => {
            let vals = args
                .iter()
                .map(|a| model_eval(a, env))
                .collect::<Result<Vec<_>, _>>()?;
            match FUNCS[*f].0 {
                "min" => vals[0].min(vals[1]),
                "max" => vals[0].max(vals[1]),
                "ceil_div" | "round_up" if vals[1] <= 0 || vals[0] < 0 => return Err(Kind::Domain),
                "ceil_div" => fit((vals[0] as i128 + vals[1] as i128 - 1) / vals[1] as i128)?,
                "round_up" => {
                    let q = (vals[0] as i128 + vals[1] as i128 - 1) / vals[1] as i128;
                    fit(q * vals[1] as i128)?
                }
                "log2" if vals[0] <= 0 => return Err(Kind::Domain),
                "log2" => 63 - vals[0].leading_zeros() as i64,
                other => unreachable!("function {other}"),
            }
        }
    })
}

/// A non-negative integer in one of the notations the lexer accepts.
fn literal_text(v: u64, style: u8) -> String {
    match style % 6 {
        0 | 1 => v.to_string(),
        2 => {
            // Underscores every three digits: 1_000_000.
            let digits = v.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i).is_multiple_of(3) {
                    out.push('_');
                }
                out.push(c);
            }
            out
        }
        3 => {
            if style & 0x80 != 0 {
                format!("0x{v:X}")
            } else {
                format!("0x{v:x}")
            }
        }
        4 => format!("0b{v:b}"),
        _ => format!(
            "{v}{}",
            ["i64", "u64", "usize", "i32", "u8", "isize"][(style as usize >> 3) % 6]
        ),
    }
}

/// Prints the tree. With `sloppy == None` every operation is parenthesised, so the text parses
/// to the tree's shape and evaluates like the model. With a seed, parentheses and spaces are
/// dropped at random: the text may then parse to another tree, or not at all.
fn render(m: &M, sloppy: &mut Option<u64>, out: &mut String) {
    let coin = |sloppy: &mut Option<u64>| -> bool {
        match sloppy {
            None => false,
            Some(state) => {
                // xorshift64
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                *state % 3 == 0
            }
        }
    };
    match m {
        M::Lit(v, style) if *v == i64::MIN => {
            let _ = style;
            out.push_str("(-9223372036854775807 - 1)");
        }
        M::Lit(v, style) if *v < 0 => {
            let drop = coin(sloppy);
            out.push_str(if drop { "-" } else { "(-" });
            out.push_str(&literal_text(v.unsigned_abs(), *style));
            if !drop {
                out.push(')');
            }
        }
        M::Lit(v, style) => out.push_str(&literal_text(*v as u64, *style)),
        M::Var(i) => out.push_str(VARS[*i]),
        M::Neg(a) | M::Not(a) => {
            out.push_str(if matches!(m, M::Neg(_)) { "-" } else { "!" });
            let drop = coin(sloppy);
            out.push_str(if drop { "" } else { "(" });
            render(a, sloppy, out);
            out.push_str(if drop { "" } else { ")" });
        }
        M::Bin(op, a, b) => {
            let drop = coin(sloppy);
            if !drop {
                out.push('(');
            }
            render(a, sloppy, out);
            let tight = coin(sloppy);
            out.push_str(if tight { "" } else { " " });
            out.push_str(OPS[*op].0);
            out.push_str(if tight { "" } else { " " });
            render(b, sloppy, out);
            if !drop {
                out.push(')');
            }
        }
        M::Call(f, args) => {
            out.push_str(FUNCS[*f].0);
            out.push('(');
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render(a, sloppy, out);
            }
            out.push(')');
        }
    }
}

fn text_of(m: &M, sloppy: Option<u64>) -> String {
    let mut out = String::new();
    render(m, &mut sloppy.map(|s| s | 1), &mut out);
    out
}

fn interesting_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => -70i64..70,
        2 => select(&[0, 1, -1, 2, -2, 63, 64, -63, -64, 4096, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1, 1 << 32, -(1 << 32), 1 << 62][..]),
        2 => any::<i64>(),
    ]
}

fn model() -> impl Strategy<Value = M> {
    let leaf = prop_oneof![
        3 => (interesting_i64(), any::<u8>()).prop_map(|(v, s)| M::Lit(v, s)),
        2 => (0..VARS.len()).prop_map(M::Var),
    ];
    leaf.prop_recursive(6, 48, 3, |inner| {
        prop_oneof![
            1 => inner.clone().prop_map(|a| M::Neg(Box::new(a))),
            1 => inner.clone().prop_map(|a| M::Not(Box::new(a))),
            6 => (0..OPS.len(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| M::Bin(op, Box::new(a), Box::new(b))),
            2 => (0..FUNCS.len(), prop::collection::vec(inner, 2)).prop_map(|(f, mut args)| {
                args.truncate(FUNCS[f].1);
                M::Call(f, args)
            }),
        ]
    })
}

/// Values for the variables; `None` leaves one unbound.
fn model_env() -> impl Strategy<Value = Vec<Option<i64>>> {
    prop::collection::vec(
        prop_oneof![9 => interesting_i64().prop_map(Some), 1 => Just(None)],
        VARS.len(),
    )
}

fn env_of(values: &[Option<i64>]) -> Env {
    VARS.iter()
        .zip(values)
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect()
}

// Known expression bugs (see the `bug_expr_*` tests). Each returns true when the failure is
// that bug, so that the properties tolerate it unless `KFOUNDRY_STRICT_PROPERTIES` is set.

/// parse → print → parse gives the same tree, and printing is a fixed point.
fn check_round_trip(e: &Expr, source: &str) -> Result<(), TestCaseError> {
    let printed = e.to_string();
    match Expr::parse(&printed) {
        Ok(again) if again == *e => {
            prop_assert_eq!(
                again.to_string(),
                printed,
                "printing is not a fixed point (from `{}`)",
                source
            );
        }
        Ok(again) => {
            prop_assert!(
                false,
                "`{}` parsed as {:?}, printed as `{}`, which parses as {:?}",
                source,
                e,
                printed,
                again
            );
        }
        Err(err) => {
            prop_assert!(
                false,
                "`{}` parsed, printed as `{}`, which does not parse: {}",
                source,
                printed,
                err
            );
        }
    }
    Ok(())
}

/// Checks everything that must hold of any text: no panic; if it parses, it round-trips and
/// evaluates without panicking (with and without bindings).
fn check_expr_text(text: &str, env: &Env) -> Result<(), TestCaseError> {
    if let Ok(e) = Expr::parse(text) {
        check_round_trip(&e, text)?;
        let _ = e.eval(env);
        let _ = e.eval(&Env::new());
        let _ = e.variables();
    }
    Ok(())
}

const EXPR_VOCABULARY: &[&str] = &[
    "a",
    "b",
    "n",
    "WG",
    "min",
    "max",
    "ceil_div",
    "round_up",
    "log2",
    "foo",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "<",
    ">",
    "<=",
    ">=",
    "==",
    "!=",
    "=",
    "&",
    "|",
    "^",
    "&&",
    "||",
    "!",
    "0",
    "1",
    "2",
    "64",
    "0x",
    "0b",
    "0xff",
    "0b101",
    "1_000",
    "1u64",
    "9223372036854775807",
    "9223372036854775808",
    "-",
    "_",
    "$",
    "é",
    "1.5",
    "i64",
];

proptest! {
    #![proptest_config(config(2_000))]

    /// Any string: never a panic; what parses round-trips and evaluates without panicking.
    #[test]
    fn expr_arbitrary_text(text in any_text(96), env in model_env()) {
        check_expr_text(&text, &env_of(&env))?;
    }

    /// Strings made of the language's tokens (far more of them parse).
    #[test]
    fn expr_token_soup(text in token_soup(EXPR_VOCABULARY, 40), env in model_env()) {
        check_expr_text(&text, &env_of(&env))?;
    }
}

proptest! {
    #![proptest_config(config(1_000))]

    /// Generated trees, fully parenthesised: they parse, round-trip, and evaluate exactly like
    /// the reference model (values and error kinds).
    #[test]
    fn expr_generated_trees_match_the_model(m in model(), env in model_env()) {
        let text = text_of(&m, None);
        let e = match Expr::parse(&text) {
            Ok(e) => e,
            Err(err) => return Err(TestCaseError::fail(format!("generated `{text}` does not parse: {err}"))),
        };
        check_round_trip(&e, &text)?;
        let got = e.eval(&env_of(&env)).map_err(|err| kind_of(&err));
        let want = model_eval(&m, &env);
        prop_assert_eq!(got, want, "`{}` with {:?}", text, env_of(&env));
        // The printed form means the same.
        if let Ok(again) = Expr::parse(&e.to_string()) {
            prop_assert_eq!(again.eval(&env_of(&env)).map_err(|err| kind_of(&err)), want);
        }
    }

    /// Generated trees printed with parentheses and spaces dropped at random: whatever parses
    /// round-trips and evaluates without panicking.
    #[test]
    fn expr_generated_sloppy_text(m in model(), seed in any::<u64>(), env in model_env()) {
        check_expr_text(&text_of(&m, Some(seed)), &env_of(&env))?;
    }

    /// `Expr::literal` of any value prints as text that parses back to the same value.
    #[test]
    fn expr_literal_round_trips(v in interesting_i64()) {
        let e = Expr::literal(v);
        let again = Expr::parse(&e.to_string());
        prop_assert!(again.is_ok(), "literal {} prints as `{}`, which does not parse", v, e);
        prop_assert_eq!(again.unwrap().eval(&Env::new()), Ok(v));
    }
}

#[test]
fn expr_hostile_nesting_is_refused_not_overflowed() {
    on_small_stack(|| {
        for open in ["(", "-", "!", "min(1, ", "-(", "a + (", "a * -(", "log2("] {
            let text = open.repeat(5_000) + "1";
            assert!(Expr::parse(&text).is_err(), "{open} x 5000");
        }
        // Right-nested chains recurse in the parser and are refused.
        let text = "a << ".repeat(5_000) + "1";
        let _ = Expr::parse(&text);
    });
}

#[test]
fn expr_moderate_left_chains_are_fine() {
    // Left-associative chains are built by a loop, not recursion; a few hundred terms evaluate
    // on a 2 MiB stack (see bug_expr_long_left_chain_overflows_the_stack for longer ones).
    on_small_stack(|| {
        let e = Expr::parse(&("1 + ".repeat(60) + "1")).unwrap();
        assert_eq!(e.eval(&Env::new()), Ok(61));
        assert_eq!(Expr::parse(&e.to_string()).unwrap(), e);
    });
}

// ---------------------------------------------------------------------------------------------
// OpenCL C signatures

/// Spellings of each scalar type.
fn type_spellings(t: ScalarType) -> &'static [&'static str] {
    match t {
        ScalarType::F32 => &["float"],
        ScalarType::F64 => &["double"],
        ScalarType::I8 => &["char", "signed char"],
        ScalarType::U8 => &["uchar", "unsigned char"],
        ScalarType::I16 => &["short", "signed short"],
        ScalarType::U16 => &["ushort", "unsigned short"],
        ScalarType::I32 => &["int", "signed int", "signed"],
        ScalarType::U32 => &["uint", "unsigned int", "unsigned"],
        ScalarType::I64 => &["long", "signed long"],
        ScalarType::U64 => &["ulong", "unsigned long"],
        // Buffers only (`half*`), and bfloat16 is a `ushort` the annotation declares: not in
        // the generated scalar signatures.
        ScalarType::F16 => &["half"],
        ScalarType::Bf16 => &[],
    }
}

const SCALAR_TYPES: [ScalarType; 10] = [
    ScalarType::F32,
    ScalarType::F64,
    ScalarType::I8,
    ScalarType::U8,
    ScalarType::I16,
    ScalarType::U16,
    ScalarType::I32,
    ScalarType::U32,
    ScalarType::I64,
    ScalarType::U64,
];

/// Words that cannot be parameter or kernel names.
const RESERVED: &[&str] = &[
    "void",
    "kernel",
    "__kernel",
    "__attribute__",
    "__attribute",
    "global",
    "__global",
    "constant",
    "__constant",
    "local",
    "__local",
    "private",
    "__private",
    "const",
    "restrict",
    "__restrict",
    "__restrict__",
    "volatile",
    "read_only",
    "__read_only",
    "write_only",
    "__write_only",
    "float",
    "double",
    "char",
    "uchar",
    "short",
    "ushort",
    "int",
    "uint",
    "long",
    "ulong",
    "signed",
    "unsigned",
    "if",
    "for",
    "while",
    "return",
    "struct",
];

fn c_ident() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,10}".prop_filter("reserved word", |s| !RESERVED.contains(&s.as_str()))
}

/// Separators between the words of a parameter.
fn sep() -> impl Strategy<Value = &'static str> {
    select(&[" ", " ", " ", "  ", "\n", "\t", " /* c */ ", "\n  "][..])
}

/// One parameter: the argument it must parse to and its text.
fn param() -> impl Strategy<Value = (KernelArg, String)> {
    let scalar = (
        select(&SCALAR_TYPES[..]),
        any::<u8>(),
        0u8..4,
        c_ident(),
        sep(),
        sep(),
    )
        .prop_map(|(ty, spelling, form, name, s1, s2)| {
            let spellings = type_spellings(ty);
            let tyname = spellings[spelling as usize % spellings.len()];
            let text = match form {
                0 => format!("{tyname}{s1}{name}"),
                1 => format!("const{s1}{tyname}{s2}{name}"),
                2 => format!("{tyname}{s1}const{s2}{name}"),
                _ => format!("__private{s1}{tyname}{s2}{name}"),
            };
            (KernelArg::Scalar { name, ty }, text)
        });
    let buffer = (
        select(
            &[
                AddressSpace::Global,
                AddressSpace::Constant,
                AddressSpace::Local,
            ][..],
        ),
        any::<bool>(),
        select(&SCALAR_TYPES[..]),
        any::<u8>(),
        0u8..4,
        0u8..4,
        select(
            &[
                "",
                "restrict",
                "__restrict",
                "__restrict__",
                "volatile",
                "restrict volatile",
            ][..],
        ),
        (c_ident(), sep(), sep(), sep()),
    )
        .prop_map(
            |(space, short, elem, spelling, const_at, star, qualifier, (name, s1, s2, s3))| {
                let spellings = type_spellings(elem);
                let tyname = spellings[spelling as usize % spellings.len()];
                let space_word = match (space, short) {
                    (AddressSpace::Global, false) => "__global",
                    (AddressSpace::Global, true) => "global",
                    (AddressSpace::Constant, false) => "__constant",
                    (AddressSpace::Constant, true) => "constant",
                    (AddressSpace::Local, false) => "__local",
                    (AddressSpace::Local, true) => "local",
                };
                let mut words: Vec<String> = vec![space_word.into(), tyname.into()];
                match const_at {
                    1 => words.insert(0, "const".into()),
                    2 => words.insert(1, "const".into()),
                    3 => words.push("const".into()),
                    _ => {}
                }
                let is_const = const_at != 0;
                let mut text = words.join(s1);
                let tail = if qualifier.is_empty() {
                    name.clone()
                } else {
                    format!("{qualifier}{s3}{name}")
                };
                match star {
                    0 => text.push_str(&format!("*{s2}{tail}")),
                    1 => text.push_str(&format!("{s2}*{tail}")),
                    2 => text.push_str(&format!("{s2}*{s3}{tail}")),
                    _ => text.push_str(&format!("*{tail}")),
                }
                let arg = KernelArg::Buffer {
                    name,
                    space,
                    elem,
                    read_only: is_const || space == AddressSpace::Constant,
                };
                (arg, text)
            },
        );
    prop_oneof![scalar, buffer]
}

/// A kernel: its expected signature and its source text.
fn kernel_source() -> impl Strategy<Value = (KernelSignature, String)> {
    (
        c_ident(),
        prop::collection::vec(param(), 0..7),
        select(&["__kernel", "kernel"][..]),
        select(
            &[
                "",
                "__attribute__((reqd_work_group_size(64, 1, 1))) ",
                "__attribute__ ((vec_type_hint(float4))) ",
                "__attribute__((work_group_size_hint(8,8,1)))\n",
            ][..],
        ),
        select(&["", "void"][..]),
        select(&[",", ", ", ",\n    ", " , ", ", /* next */ ", ", // next\n"][..]),
        select(
            &[
                "{}",
                "{ out[get_global_id(0)] = (a) * (b); }",
                "{\n  if (x) { y(z(1), 2); }\n}",
                "{ /* ) ( */ }",
            ][..],
        ),
    )
        .prop_filter_map(
            "duplicate parameter names",
            |(name, params, kw, attr, empty, comma, body)| {
                let names: BTreeSet<&str> = params.iter().map(|(a, _)| a.name()).collect();
                if names.len() != params.len() {
                    return None;
                }
                let list = if params.is_empty() {
                    empty.to_string()
                } else {
                    params
                        .iter()
                        .map(|(_, t)| t.as_str())
                        .collect::<Vec<_>>()
                        .join(comma)
                };
                let text = format!("{kw} {attr}void {name}({list}) {body}");
                let args = params.into_iter().map(|(a, _)| a).collect();
                Some((KernelSignature { name, args }, text))
            },
        )
}

/// A source of 1 to 3 kernels with distinct names, mixed with comments, preprocessor lines
/// and helper functions.
fn program() -> impl Strategy<Value = (Vec<KernelSignature>, String)> {
    let junk = select(
        &[
            "",
            "// __kernel void fake(int x) {}\n",
            "/* kernel void fake(global float* f) */\n",
            "#define KERNEL_WG 64\n",
            "#if VEC > 1\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n",
            "#define LONG(x) \\\n   kernel void macro_kernel(x)\n",
            "int kernel_helper(int k) { return k * 2; }\n",
            "float helper2(__global const float* p, int i) { return p[i]; }\n",
            "\n\n",
            "/* unicode: é ü ✓ */\n",
        ][..],
    );
    prop::collection::vec((junk.clone(), kernel_source()), 1..4).prop_filter_map(
        "duplicate kernel names",
        move |kernels| {
            let names: BTreeSet<&str> = kernels.iter().map(|(_, (k, _))| k.name.as_str()).collect();
            if names.len() != kernels.len() {
                return None;
            }
            let mut text = String::new();
            let mut sigs = Vec::new();
            for (junk, (sig, src)) in kernels {
                text.push_str(junk);
                text.push_str(&src);
                text.push('\n');
                sigs.push(sig);
            }
            Some((sigs, text))
        },
    )
}

/// The signature reader on any text: no panic; errors name a line of the text (or none).
fn check_signature_text(text: &str) -> Result<(), TestCaseError> {
    let lines = text.matches('\n').count() + 1;
    match signature::kernels(text) {
        Ok(found) => {
            if let Some(first) = found.first() {
                let again = signature::find_kernel(text, Some(&first.name));
                prop_assert!(
                    again.is_ok(),
                    "kernel `{}` found by kernels() but not by find_kernel: {:?}",
                    first.name,
                    again
                );
            }
        }
        Err(e) => prop_assert!(
            e.line <= lines,
            "error line {} beyond the {} lines of the text: {}",
            e.line,
            lines,
            e
        ),
    }
    let _ = signature::find_kernel(text, None);
    let _ = signature::find_kernel(text, Some("k"));
    Ok(())
}

const SIGNATURE_FRAGMENTS: &[&str] = &[
    "(",
    ")",
    "((",
    "))",
    ",",
    "*",
    "**",
    "[",
    "]",
    "/*",
    "*/",
    "//",
    "\n",
    "#",
    "\\\n",
    "__kernel",
    "kernel",
    "__attribute__((",
    "void",
    "const",
    "__global",
    "__local",
    "__constant",
    "float",
    "float4",
    "unsigned",
    "int",
    " ",
    "é",
    "\u{2028}",
    "\u{a0}",
    "x",
    "0",
    "_",
    "{",
    "}",
    ";",
    "\"",
    "'",
];

proptest! {
    #![proptest_config(config(500))]

    /// Generated kernels parse to exactly the generated signatures.
    #[test]
    fn signature_generated_kernels_parse_exactly((sigs, text) in program()) {
        let found = signature::kernels(&text);
        prop_assert!(found.is_ok(), "{:?}\n--- source ---\n{}", found, text);
        prop_assert_eq!(found.unwrap(), sigs.clone(), "\n--- source ---\n{}", text);
        for sig in &sigs {
            prop_assert_eq!(&signature::find_kernel(&text, Some(&sig.name)).unwrap(), sig);
        }
        if sigs.len() == 1 {
            prop_assert_eq!(&signature::find_kernel(&text, None).unwrap(), &sigs[0]);
        } else {
            prop_assert!(signature::find_kernel(&text, None).is_err());
        }
    }

    /// Mutations of valid sources: never a panic.
    #[test]
    fn signature_mutated_sources((_, text) in program(), ops in mutations()) {
        check_signature_text(&mutate(&text, &ops, SIGNATURE_FRAGMENTS))?;
    }

}

proptest! {
    #![proptest_config(config(2_000))]

    /// Arbitrary strings and token soups: never a panic.
    #[test]
    fn signature_arbitrary_text(text in any_text(160)) {
        check_signature_text(&text)?;
    }

    #[test]
    fn signature_token_soup(text in token_soup(SIGNATURE_FRAGMENTS, 60)) {
        check_signature_text(&text)?;
    }
}

#[test]
fn signature_hostile_inputs() {
    on_small_stack(|| {
        for text in [
            "__kernel void k(".to_string() + &"(".repeat(100_000),
            "__kernel void k(".to_string() + &")".repeat(100_000),
            "__kernel ".repeat(20_000),
            "__kernel __attribute__".repeat(10_000),
            "/*".repeat(50_000),
            "#\\\n".repeat(50_000),
            "__kernel void k(".to_string() + &"int a, ".repeat(2_000) + "int z) {}",
        ] {
            let _ = signature::kernels(&text);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Lockfile

/// Keys and strings: plain ones and arbitrary characters (quotes, control characters,
/// non-ASCII, empty).
fn lock_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9:|._ -]{0,12}",
        1 => prop::collection::vec(any::<char>(), 0..8).prop_map(String::from_iter),
        1 => select(&["", "\"", "'", "\\", "'''", "\"\"\"", "a.b", "[x]", "#", "=", "\n", "\u{0}", "\u{7f}", "é"][..])
            .prop_map(String::from),
    ]
}

/// u64 values TOML can represent (TOML integers are i64; see bug_lockfile_u64_beyond_i64_is_lost).
fn lock_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        select(&[0u64, 1, 2, 1 << 31, 1 << 32, 80 << 30, i64::MAX as u64][..]),
        0..=i64::MAX as u64,
    ]
}

fn device_info() -> impl Strategy<Value = DeviceInfo> {
    (
        (lock_text(), lock_text(), lock_text(), lock_text()),
        (
            any::<u32>(),
            lock_u64(),
            lock_u64(),
            lock_u64(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |((name, vendor, platform, kind), (compute_units, max_wg, local, global, clock))| {
                DeviceInfo {
                    name,
                    vendor,
                    platform,
                    kind,
                    compute_units,
                    max_work_group_size: max_wg,
                    local_mem_bytes: local,
                    global_mem_bytes: global,
                    max_clock_mhz: clock,
                }
            },
        )
}

fn i64_map() -> impl Strategy<Value = BTreeMap<String, i64>> {
    prop::collection::btree_map(lock_text(), interesting_i64(), 0..4)
}

/// Size sets a variant was proven at: every set names the same sizes (as a tune writes them).
fn proven_sets() -> impl Strategy<Value = Vec<BTreeMap<String, i64>>> {
    (prop::collection::btree_set(lock_text(), 1..3), 0usize..4).prop_flat_map(|(names, sets)| {
        let names: Vec<String> = names.into_iter().collect();
        prop::collection::vec(prop::collection::vec(interesting_i64(), names.len()), sets).prop_map(
            move |rows| {
                rows.into_iter()
                    .map(|row| names.iter().cloned().zip(row).collect())
                    .collect()
            },
        )
    })
}

fn variant(devices: Vec<String>) -> impl Strategy<Value = Variant> {
    (
        select(devices),
        lock_text(),
        i64_map(),
        i64_map(),
        (lock_u64(), lock_u64(), lock_u64(), lock_u64()),
        (
            prop::option::of(lock_text()),
            proven_sets(),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                device,
                workload,
                sizes,
                params,
                (time_ns, reference_time_ns, evaluations, failures),
                (source, proven, partial, general),
            )| Variant {
                device,
                workload,
                sizes,
                params,
                time_ns,
                reference_time_ns,
                evaluations,
                failures,
                source,
                proven,
                scalars: Default::default(),
                proof: 0,
                partial,
                general,
                floor: None,
                device_info: None,
            },
        )
}

/// Device keys as OpenCL reports build them (canonical, whatever the strings reported).
fn device_key() -> impl Strategy<Value = String> {
    (any::<u32>(), lock_text(), lock_text(), lock_text()).prop_filter_map(
        "a device with a name",
        |(vendor, name, driver, version)| {
            let key = DeviceKey::from_reported(vendor, &name, &driver, &version).to_string();
            DeviceKey::parse(&key).is_ok().then_some(key)
        },
    )
}

/// Lockfiles whose variants name devices that are in `[devices]`, by canonical keys, one
/// variant per device and workload (what `parse` requires).
fn lockfile() -> impl Strategy<Value = Lockfile> {
    prop_oneof![
        1 => Just(Lockfile::default()),
        9 => (prop::collection::btree_map(device_key(), device_info(), 1..4), 1u32..=2).prop_flat_map(|(devices, version)| {
            let keys: Vec<String> = devices.keys().cloned().collect();
            let entry = (lock_text(), prop::collection::vec(variant(keys), 0..4))
                .prop_map(|(fingerprint, mut variants)| {
                    let mut slots = BTreeSet::new();
                    variants.retain(|v| slots.insert((v.device.clone(), v.workload.clone())));
                    KernelEntry { fingerprint, variants }
                });
            prop::collection::btree_map(lock_text(), entry, 0..4)
                .prop_map(move |kernels| Lockfile { version, devices: devices.clone(), kernels })
        }),
    ]
}

/// What `to_toml` promises to write: schema version, variants sorted by (device, workload).
fn normalised(lock: &Lockfile) -> Lockfile {
    let mut lock = lock.clone();
    lock.version = kfoundry_tooling::lockfile::SCHEMA_VERSION;
    for entry in lock.kernels.values_mut() {
        entry
            .variants
            .sort_by(|a, b| (&a.device, &a.workload).cmp(&(&b.device, &b.workload)));
    }
    lock
}

fn check_lockfile_text(text: &str) {
    let p = Path::new("Kfoundry.lock");
    if let Ok(lock) = Lockfile::parse(text, p) {
        // Whatever is accepted can be written and read back.
        let written = lock.to_toml().unwrap();
        let again = Lockfile::parse(&written, p);
        assert!(again.is_ok(), "accepted lockfile does not survive to_toml: {again:?}\n--- in ---\n{text}\n--- out ---\n{written}");
    }
}

const LOCK_FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "=",
    " = ",
    ",",
    ".",
    "\n",
    "#",
    "\\",
    "\\u0000",
    "version = 1\n",
    "version = 2\n",
    "version = -1\n",
    "version = 4294967296\n",
    "version = \"1\"\n",
    "[devices.\"8086|d|1|3.0\"]\n",
    "[kernels.k]\n",
    "[[kernels.k.variants]]\n",
    "device = \"8086|d|1|3.0\"\n",
    "fingerprint = \"f\"\n",
    "sizes = {}\n",
    "params = { n = 1 }\n",
    "time_ns = 18446744073709551615\n",
    "time_ns = -1\n",
    "9223372036854775808",
    "1979-05-27T07:32:00Z",
    "inf",
    "nan",
    "1e400",
    "0x7f",
    "true",
    "[]",
    "[[]]",
    "é",
    "\u{feff}",
    "\r\n",
];

proptest! {
    #![proptest_config(config(150))]

    /// parse(to_toml(x)) == x (sorted); to_toml is deterministic, independent of the order of
    /// variants, and a fixed point.
    #[test]
    fn lockfile_round_trip(lock in lockfile()) {
        let p = Path::new("Kfoundry.lock");
        let text = lock.to_toml().unwrap();
        prop_assert_eq!(&text, &lock.clone().to_toml().unwrap());
        let back = Lockfile::parse(&text, p);
        prop_assert!(back.is_ok(), "{:?}\n--- text ---\n{}", back.err(), text);
        let back = back.unwrap();
        prop_assert_eq!(&back, &normalised(&lock), "\n--- text ---\n{}", text);
        prop_assert_eq!(&back.to_toml().unwrap(), &text);
        // Reversing every kernel's variants writes the same text, when (device, workload) pairs
        // are unique (equal pairs keep their relative order, as documented by the stable sort).
        let unique = lock.kernels.values().all(|k| {
            k.variants.iter().map(|v| (&v.device, &v.workload)).collect::<BTreeSet<_>>().len() == k.variants.len()
        });
        if unique {
            let mut reversed = lock.clone();
            reversed.kernels.values_mut().for_each(|k| k.variants.reverse());
            prop_assert_eq!(&reversed.to_toml().unwrap(), &text);
        }
    }

    /// Mutations of valid lockfile text: never a panic; what is accepted survives a rewrite.
    #[test]
    fn lockfile_mutated_text(lock in lockfile(), ops in mutations()) {
        check_lockfile_text(&mutate(&lock.to_toml().unwrap(), &ops, LOCK_FRAGMENTS));
    }

}

proptest! {
    #![proptest_config(config(2_000))]

    /// Arbitrary strings and token soups: never a panic.
    #[test]
    fn lockfile_arbitrary_text(text in any_text(160)) {
        check_lockfile_text(&text);
    }

    #[test]
    fn lockfile_token_soup(text in token_soup(LOCK_FRAGMENTS, 40)) {
        check_lockfile_text(&text);
    }
}

#[test]
fn lockfile_hostile_nesting() {
    on_small_stack(|| {
        for open in ["[", "{ a = ", "[{ a = "] {
            let text = format!("version = 1\nx = {}", open.repeat(50_000));
            assert!(Lockfile::parse(&text, Path::new("Kfoundry.lock")).is_err());
        }
        let text = format!("version = 1\n[{}]\n", "a.".repeat(50_000) + "b");
        assert!(Lockfile::parse(&text, Path::new("Kfoundry.lock")).is_err());
    });
}

// ---------------------------------------------------------------------------------------------
// Annotations (`#[kfoundry::evolve(...)]`), feature `parse`

mod annotations {
    use super::*;
    use kfoundry_tooling::annotation::{self, Context};
    use proc_macro2::TokenStream;

    const SAXPY: &str = "__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) { }";

    /// The entries of a valid annotation (it parses without error).
    fn base_entries() -> Vec<String> {
        vec![
            format!("code = {SAXPY:?}"),
            "kernel = \"saxpy\"".into(),
            "name = \"demo::Saxpy\"".into(),
            "params(WG = [32, 64, 128], VEC = pow2(1..=8), ITEMS = 1..4)".into(),
            "reference(WG = 64, VEC = 1, ITEMS = 1)".into(),
            "require(n % (WG * VEC * ITEMS) == 0)".into(),
            "global = n / (VEC * ITEMS)".into(),
            "local = WG".into(),
            "buffers(x = n, y = n)".into(),
            "inputs(x = uniform(-2.0, 2), a = constant(2.5))".into(),
            "check(y, rtol = 1e-4, atol = 1e-6)".into(),
            "workloads(small(n = 1 << 12), large(n = 1 << 20))".into(),
            "cost(bytes = 12 * n, flops = 2 * n)".into(),
            "options = \"-cl-mad-enable\"".into(),
        ]
    }

    const LITERALS: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "3",
        "4096",
        "4097",
        "-4096",
        "9223372036854775807",
        "-9223372036854775807",
        "(-9223372036854775807 - 1)",
        "9223372036854775808",
        "99999999999999999999",
        "0x7fffffffffffffff",
        "1u64",
        "1e400",
        "-1e400",
        "1e-400",
        "0.0",
        "-0.0",
        "2.5f32",
        "\"s\"",
        "'c'",
        "b\"x\"",
        "true",
        "i64::MAX",
        "(1 << 63)",
        "(1 << 62)",
        "[]",
        "[1, 1]",
        "[-9223372036854775807, 9223372036854775807]",
        "..",
        "..=",
        "1..",
        "..=5",
        "0..0",
        "5..=4",
        "pow2(0..=0)",
        "pow2(1..=4096)",
        "-9223372036854775807..=9223372036854775807",
        "0..(-9223372036854775807 - 1)",
        "(a, b)",
        "(n, n, n, n)",
        "()",
        "min(n, WG)",
        "n / 0",
        "log2(0)",
    ];

    const IDENTS: &[&str] = &[
        "n", "x", "y", "a", "WG", "VEC", "ITEMS", "zz", "params", "global", "local", "check",
        "uniform", "normal", "constant", "pow2", "rtol", "atol", "bytes", "flops", "small",
        "large", "code", "source", "r#type", "_",
    ];

    const FRAGMENTS: &[&str] = &[
        "bogus = 1",
        "global = n",
        "local = (WG, 1)",
        "check(x)",
        "check(y, rtol = -1.0)",
        "require(ZZ > 0)",
        "require()",
        "params()",
        "params(WG = [64])",
        "reference(WG = 64, WG = 32)",
        "workloads(w(n = 0))",
        "workloads(w(m = 4))",
        "inputs(y = constant(1.0))",
        "inputs(n = normal(0, 0))",
        "cost(time = n)",
        "source = \"missing.cl\"",
        "code = \"\"",
        "code = \"kernel void k(int) {}\"",
        "kernel = \"nope\"",
        "buffers(n = n)",
        "options(\"x\")",
        "check",
        "= 1",
        ",",
        "(",
        "[",
        "{}",
    ];

    /// Byte ranges (start, end) in a text.
    type Ranges = Vec<(usize, usize)>;

    /// Byte spans of number-like literals and identifiers (outside string literals).
    fn spans(text: &str) -> (Ranges, Ranges) {
        let b = text.as_bytes();
        let (mut nums, mut idents) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b'"' {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            } else if c.is_ascii_digit() {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
                {
                    i += 1;
                }
                nums.push((start, i));
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                idents.push((start, i));
            } else {
                i += 1;
            }
        }
        (nums, idents)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Drop(usize),
        Duplicate(usize),
        Swap(usize, usize),
        Insert(usize, &'static str),
        Literal(usize, &'static str),
        Ident(usize, &'static str),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => any::<usize>().prop_map(Op::Drop),
            1 => any::<usize>().prop_map(Op::Duplicate),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Swap(a, b)),
            1 => (any::<usize>(), select(FRAGMENTS)).prop_map(|(a, f)| Op::Insert(a, f)),
            4 => (any::<usize>(), select(LITERALS)).prop_map(|(a, l)| Op::Literal(a, l)),
            2 => (any::<usize>(), select(IDENTS)).prop_map(|(a, l)| Op::Ident(a, l)),
        ]
    }

    fn apply(ops: &[Op]) -> String {
        let mut entries = base_entries();
        for op in ops {
            let n = entries.len();
            match op {
                Op::Drop(i) if n > 0 => {
                    entries.remove(i % n);
                }
                Op::Duplicate(i) if n > 0 => entries.insert(i % n, entries[i % n].clone()),
                Op::Swap(i, j) if n > 0 => entries.swap(i % n, j % n),
                Op::Insert(i, f) => entries.insert(i % (n + 1), f.to_string()),
                Op::Literal(k, lit) | Op::Ident(k, lit) => {
                    let mut text = entries.join(", ");
                    let (nums, idents) = spans(&text);
                    let pool = if matches!(op, Op::Literal(..)) {
                        nums
                    } else {
                        idents
                    };
                    if !pool.is_empty() {
                        let (s, e) = pool[k % pool.len()];
                        text.replace_range(s..e, lit);
                    }
                    // Re-split is not needed: the text is one entry list from here on.
                    entries = vec![text];
                }
                _ => {}
            }
        }
        entries.join(", ")
    }

    /// `annotation::parse` must answer Ok or Err, never panic.
    fn check_annotation(text: &str) -> Result<(), TestCaseError> {
        let Ok(tokens) = text.parse::<TokenStream>() else {
            return Ok(());
        };
        let item: syn::Item = syn::parse_str("pub struct Saxpy;").unwrap();
        let cx = Context {
            package: "demo",
            manifest_dir: Path::new("/nonexistent/kfoundry-properties"),
        };
        match catch(|| {
            annotation::parse(tokens, &item, &cx).map(|a| kfoundry_tooling::fingerprint(&a.spec))
        }) {
            Ok(_) => Ok(()),
            Err((place, message)) => Err(TestCaseError::fail(format!(
                "panic at {place}: {message}\n--- annotation ---\n{text}"
            ))),
        }
    }

    /// The valid specification of the base annotation, as a bundle carries it (JSON).
    fn base_spec_json() -> serde_json::Value {
        let tokens: TokenStream = apply(&[]).parse().unwrap();
        let item: syn::Item = syn::parse_str("pub struct Saxpy;").unwrap();
        let cx = Context {
            package: "demo",
            manifest_dir: Path::new("/nonexistent"),
        };
        let spec = annotation::parse(tokens, &item, &cx)
            .map(|a| a.spec)
            .map_err(|e| e.to_string())
            .unwrap();
        serde_json::to_value(&spec).unwrap()
    }

    /// Values a hostile or corrupted bundle might hold anywhere.
    fn json_palette() -> Vec<serde_json::Value> {
        use serde_json::json;
        vec![
            json!(0),
            json!(-1),
            json!(1),
            json!(3),
            json!(4096),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1e300),
            json!(-0.5),
            json!(""),
            json!("n"),
            json!("WG"),
            json!("../../x"),
            json!("X -cl-fast-relaxed-math -DVEC"),
            json!("-I/etc"),
            json!("n / 0"),
            json!("n * 9223372036854775807"),
            json!([]),
            json!(["n", "n", "n", "n"]),
            json!([0, 0]),
            json!({}),
            json!(null),
            json!(true),
            json!({"kind": "constant", "value": 1.0}),
        ]
    }

    /// Replaces the `k`-th node (pre-order, modulo the node count) of `v` by `with`.
    fn replace_node(v: &mut serde_json::Value, k: usize, with: &serde_json::Value) {
        fn count(v: &serde_json::Value) -> usize {
            1 + match v {
                serde_json::Value::Array(a) => a.iter().map(count).sum(),
                serde_json::Value::Object(o) => o.values().map(count).sum(),
                _ => 0,
            }
        }
        fn walk(v: &mut serde_json::Value, k: &mut usize, with: &serde_json::Value) -> bool {
            if *k == 0 {
                *v = with.clone();
                return true;
            }
            *k -= 1;
            match v {
                serde_json::Value::Array(a) => a.iter_mut().any(|c| walk(c, k, with)),
                serde_json::Value::Object(o) => o.values_mut().any(|c| walk(c, k, with)),
                _ => false,
            }
        }
        let mut k = k % count(v);
        walk(v, &mut k, with);
    }

    /// What a tune does with a bundle's specification before any OpenCL call, on an accepted
    /// one: never a panic.
    fn exercise_spec(v: serde_json::Value) -> Result<(), TestCaseError> {
        use kfoundry_rt::model::spec::KernelSpec;
        use kfoundry_rt::model::variant::check_variant;
        use kfoundry_tooling::embed::launcher_params;
        let text = v.to_string();
        let outcome = catch(move || {
            let Ok(spec) = serde_json::from_value::<KernelSpec>(v) else {
                return;
            };
            if !spec.validate().is_empty()
                || signature::find_kernel(&spec.source, Some(&spec.signature.name)).ok()
                    != Some(spec.signature.clone())
            {
                return;
            }
            let _ = spec.caller_args().count();
            let _ = launcher_params(&spec);
            let _ = spec.build_options(&spec.reference, &[]);
            let _ = kfoundry_tooling::fingerprint(&spec);
            for w in &spec.workloads {
                let _ = spec.geometry(&spec.reference, &w.sizes, None);
                for name in spec.buffers.keys() {
                    let _ = spec.buffer_len(name, &spec.reference, &w.sizes);
                }
                let doubled: BTreeMap<String, i64> = w
                    .sizes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.saturating_mul(2)))
                    .collect();
                let _ = spec.geometry(&spec.reference, &doubled, None);
                let variant = Variant {
                    device: "10de|gpu|1|3.0".into(),
                    workload: w.name.clone(),
                    sizes: w.sizes.clone(),
                    params: spec.reference.clone(),
                    time_ns: 1,
                    reference_time_ns: 1,
                    evaluations: 1,
                    failures: 0,
                    source: None,
                    proven: vec![w.sizes.clone(), doubled],
                    scalars: Default::default(),
                    proof: 0,
                    partial: false,
                    general: false,
                    floor: None,
                    device_info: None,
                };
                let _ = check_variant(&spec, &variant, &[]);
            }
        });
        match outcome {
            Ok(()) => Ok(()),
            Err((place, message)) => Err(TestCaseError::fail(format!(
                "panic at {place}: {message}\n--- spec ---\n{text}"
            ))),
        }
    }

    #[test]
    fn the_base_annotation_is_valid() {
        let tokens: TokenStream = apply(&[]).parse().unwrap();
        let item: syn::Item = syn::parse_str("pub struct Saxpy;").unwrap();
        let cx = Context {
            package: "demo",
            manifest_dir: Path::new("/nonexistent"),
        };
        if let Err(e) = annotation::parse(tokens, &item, &cx) {
            panic!("{e}");
        }
    }

    proptest! {
        #![proptest_config(config(400))]

        /// A bundle's specification with any nodes of its JSON replaced by hostile values:
        /// refused, or accepted and then handled without a panic.
        #[test]
        fn bundle_spec_mutations_never_panic(edits in prop::collection::vec((any::<usize>(), 0usize..25), 1..5)) {
            let mut v = base_spec_json();
            let palette = json_palette();
            for (k, p) in edits {
                replace_node(&mut v, k, &palette[p % palette.len()]);
            }
            exercise_spec(v)?;
        }

        /// Valid annotations with entries dropped, duplicated, swapped or inserted, literals and
        /// identifiers replaced: Ok or Err, never a panic.
        #[test]
        fn annotation_mutations_never_panic(ops in prop::collection::vec(op(), 1..6)) {
            check_annotation(&apply(&ops))?;
        }

        /// Generated expressions in every expression slot.
        #[test]
        fn annotation_generated_expressions(m in model(), slot in 0usize..6) {
            let e = text_of(&m, None);
            let mut entries = base_entries();
            match slot {
                0 => entries[5] = format!("require({e})"),
                1 => entries[6] = format!("global = {e}"),
                2 => entries[8] = format!("buffers(x = {e}, y = n)"),
                3 => entries[12] = format!("cost(bytes = {e})"),
                4 => entries[4] = format!("reference(WG = {e}, VEC = 1, ITEMS = 1)"),
                _ => entries[3] = format!("params(WG = {e}..=({e}), VEC = [1], ITEMS = [1])"),
            }
            check_annotation(&entries.join(", "))?;
        }

        /// Token soups of annotation vocabulary.
        #[test]
        fn annotation_token_soup(parts in prop::collection::vec(prop_oneof![select(LITERALS), select(IDENTS), select(FRAGMENTS), select(&["=", ",", "(", ")", "[", "]", "..", "..=", "-", "*", "<<"][..])], 0..30)) {
            check_annotation(&parts.join(" "))?;
        }
    }

    // -- reproducers ------------------------------------------------------------------------------

    fn parse_text(text: &str) -> syn::Result<annotation::Annotated> {
        let item: syn::Item = syn::parse_str("pub struct Saxpy;").unwrap();
        let cx = Context {
            package: "demo",
            manifest_dir: Path::new("/nonexistent"),
        };
        annotation::parse(text.parse().unwrap(), &item, &cx)
    }

    /// annotation.rs, `domain()`: `hi - lo >= MAX_DOMAIN` and `hi - 1` are unchecked i64
    /// arithmetic; a parameter range with extreme ends panics with "attempt to subtract with
    /// overflow" (overflow checks on, e.g. the proc macro in a dev build) or, in release, wraps,
    /// passes the size check and panics with "capacity overflow" collecting ~2^64 values, instead
    /// of answering "range has more than 4096 values".
    #[test]
    fn bug_annotation_extreme_range_overflows() {
        let code = format!("code = {SAXPY:?}, global = n");
        let mut panics = Vec::new();
        // `hi - lo` overflows (annotation.rs, `if hi - lo >= MAX_DOMAIN`), then `hi - 1`
        // (`let hi = if ... { hi } else { hi - 1 }`).
        for range in [
            "-9223372036854775807..=9223372036854775807",
            "0..(-9223372036854775807 - 1)",
        ] {
            let text = format!("{code}, params(A = {range})");
            if let Err((place, message)) = catch(|| parse_text(&text).err().map(|e| e.to_string()))
            {
                panics.push(format!(
                    "`params(A = {range})` panicked at {place}: {message}"
                ));
            }
        }
        assert!(panics.is_empty(), "{}", panics.join("\n"));
    }
}

// ---------------------------------------------------------------------------------------------
// Reproducers of the bugs found (ignored until fixed; see the module documentation)

/// expr.rs, `Parser::expr_bp`: `MAX_DEPTH` only counts right operands and parentheses; a
/// left-associative chain (`1 + 1 + ... + 1`) is built by a loop into a tree as deep as the
/// chain, and the recursive `eval` (and `Display`, `PartialEq`, `Drop`) then overflow the stack.
/// In a debug build on a 2 MiB stack ~700 terms (a 2.8 kB expression) abort the process; in
/// release somewhat more. Runs in a child process, since a stack overflow aborts.
#[test]
fn bug_expr_long_left_chain_overflows_the_stack() {
    const INNER: &str = "KFOUNDRY_PROPERTIES_INNER";
    let text = "1 + ".repeat(20_000) + "1";
    if std::env::var_os(INNER).is_some() {
        on_small_stack(move || {
            if let Ok(e) = Expr::parse(&text) {
                let _ = e.eval(&Env::new());
                let _ = Expr::parse(&e.to_string());
            }
        });
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "bug_expr_long_left_chain_overflows_the_stack",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`1 + 1 + ... + 1` (20001 terms) crashed the process: {}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("overflow"))
            .collect::<Vec<_>>()
            .join(" / ")
    );
}

/// expr.rs, `write_node`: a comparison that is the *left* operand of a comparison is printed
/// without parentheses, and the parser refuses chained comparisons. `require((a == b) == c)`
/// therefore serialises (serde uses `Display`) to "a == b == c", which cannot be deserialised:
/// the macro embeds the spec as JSON and the runtime fails to read it back.
#[test]
fn bug_expr_left_nested_comparison_does_not_round_trip() {
    for text in [
        "(a == b) == c",
        "(a < b) != (c < d)",
        "(n % 2 == 0) == (WG > 1)",
    ] {
        let e = Expr::parse(text).unwrap();
        let printed = e.to_string();
        let again = Expr::parse(&printed);
        assert!(
            again.is_ok(),
            "`{text}` prints as `{printed}`: {:?}",
            again.err()
        );
        assert_eq!(again.unwrap(), e);
        let json = serde_json::to_string(&e).unwrap();
        assert!(serde_json::from_str::<Expr>(&json).is_ok(), "{json}");
    }
}

/// expr.rs, `write_node` / `Parser::unary`: `-(5)` parses to Neg(Lit(5)) but prints as `-5`,
/// which parses to Lit(-5): parse → print → parse does not give an equal Expr (the value is the
/// same; equality, and anything keyed on the tree, differ).
#[test]
fn bug_expr_negated_literal_does_not_round_trip() {
    for text in ["-(5)", "-(0)", "a * -(1)", "-(9223372036854775807)"] {
        let e = Expr::parse(text).unwrap();
        assert_eq!(
            Expr::parse(&e.to_string()).unwrap(),
            e,
            "`{text}` printed as `{e}`"
        );
    }
}

/// expr.rs: `Display` puts negative literals in parentheses, and parentheses count towards
/// `MAX_DEPTH`; an accepted expression near the limit prints as text that is "nested too
/// deeply". Smallest case: 64 unary minus signs before a negative literal.
#[test]
fn bug_expr_print_exceeds_the_nesting_limit() {
    for count in [60, 63, 64, 65, 200] {
        let text = "-".repeat(count) + "5";
        match Expr::parse(&text) {
            // Whatever is accepted prints as text that parses back equal...
            Ok(e) => assert_eq!(
                Expr::parse(&e.to_string()).as_ref(),
                Ok(&e),
                "`{text}` prints as `{e}`"
            ),
            // ...and what is too deep is refused up front.
            Err(err) => assert!(err.message.contains("nested too deeply"), "{err}"),
        }
    }
}

/// expr.rs, `Expr::literal` + `write_node`: `Expr::literal(i64::MIN)` prints as
/// `(-9223372036854775808)`, which does not lex (the magnitude exceeds i64::MAX).
#[test]
fn bug_expr_literal_min_does_not_print_parseably() {
    let e = Expr::literal(i64::MIN);
    let again = Expr::parse(&e.to_string());
    assert!(again.is_ok(), "prints as `{e}`: {:?}", again.err());
    assert_eq!(again.unwrap().eval(&Env::new()), Ok(i64::MIN));
}

/// lockfile.rs, `Lockfile::to_toml`: TOML integers are i64; a u64 field above i64::MAX makes
/// `toml::to_string` fail, and `unwrap_or_default()` turns that into a lockfile with only the
/// header comment: no version, no kernels. `write_atomic` would replace a good lockfile with it
/// and the next read fails with "missing `version`".
#[test]
fn bug_lockfile_u64_beyond_i64_is_lost() {
    let mut lock = Lockfile::default();
    let variant = Variant {
        device: "8086|d|1|3.0".into(),
        workload: "w".into(),
        sizes: BTreeMap::new(),
        params: BTreeMap::new(),
        time_ns: i64::MAX as u64 + 1,
        reference_time_ns: 1,
        evaluations: 1,
        failures: 0,
        source: None,
        proven: vec![],
        scalars: Default::default(),
        proof: 0,
        partial: false,
        general: false,
        floor: None,
        device_info: None,
    };
    lock.record(
        "k",
        "f",
        "8086|d|1|3.0",
        DeviceInfo::default(),
        vec![variant],
    );
    let text = lock.to_toml().unwrap();
    let back = Lockfile::parse(&text, Path::new("Kfoundry.lock"));
    assert!(
        back.is_ok(),
        "to_toml wrote:\n{text}\nwhich reads as {:?}",
        back.err()
    );
}

/// `cargo kfoundry merge`: the outcome depends on the inputs, not on their order or grouping,
/// and merging a lockfile with itself changes nothing.
mod merging {
    use super::*;
    use kfoundry_tooling::merge::merge;

    fn arb_variant() -> impl Strategy<Value = Variant> {
        (
            select(vec!["8086|d1|1|3.0", "8086|d2|1|3.0", "8086|d3|1|3.0"]),
            select(vec!["small", "full"]),
            1u64..6,
            1u64..4,
            any::<bool>(),
            0i64..3,
            any::<bool>(),
        )
            .prop_map(
                |(device, workload, time_ns, evaluations, partial, wg, general)| Variant {
                    device: device.into(),
                    workload: workload.into(),
                    sizes: [("n".to_string(), 1024)].into_iter().collect(),
                    params: [("WG".to_string(), wg)].into_iter().collect(),
                    time_ns,
                    reference_time_ns: 10,
                    evaluations,
                    failures: 0,
                    source: None,
                    proven: vec![],
                    scalars: Default::default(),
                    proof: 0,
                    partial,
                    general,
                    floor: None,
                    device_info: None,
                },
            )
    }

    fn arb_lockfile() -> impl Strategy<Value = Lockfile> {
        let entry = (
            select(vec!["f1", "f2"]),
            proptest::collection::vec(arb_variant(), 0..5),
        );
        (
            proptest::collection::btree_map(select(vec!["k1", "k2"]), entry, 0..3),
            0u32..3,
        )
            .prop_map(|(kernels, memory)| {
                let mut l = Lockfile::default();
                for (id, (fp, variants)) in kernels {
                    for v in &variants {
                        // devices described differently in different files
                        l.devices.insert(
                            v.device.clone(),
                            DeviceInfo {
                                name: v.device.clone(),
                                kind: "gpu".into(),
                                global_mem_bytes: u64::from(memory),
                                ..Default::default()
                            },
                        );
                    }
                    l.kernels.insert(
                        id.to_string(),
                        KernelEntry {
                            fingerprint: fp.to_string(),
                            variants,
                        },
                    );
                }
                l
            })
    }

    /// The sources say f1 is current for every kernel: the merged lockfile and its conflicts.
    fn m(inputs: &[&Lockfile]) -> (Lockfile, Vec<kfoundry_tooling::merge::Conflict>) {
        let named: Vec<(&str, &Lockfile)> = inputs.iter().map(|l| ("x", *l)).collect();
        let merged = merge(&named, None, &|_| Ok(Some("f1".to_string()))).expect("merge");
        (merged.lock, merged.conflicts)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn merge_is_commutative_associative_and_idempotent(a in arb_lockfile(), b in arb_lockfile(), c in arb_lockfile()) {
            let (ab, ab_conflicts) = m(&[&a, &b]);
            let (ba, ba_conflicts) = m(&[&b, &a]);
            // The same slots conflict whatever the order (the written side is the first's).
            prop_assert_eq!(&ab_conflicts.iter().map(|c| (&c.kernel, &c.device, &c.workload)).collect::<Vec<_>>(),
                &ba_conflicts.iter().map(|c| (&c.kernel, &c.device, &c.workload)).collect::<Vec<_>>());
            if ab_conflicts.is_empty() {
                prop_assert_eq!(&ab, &ba);
            }
            let clean = |x: &[&Lockfile]| m(x).1.is_empty();
            if clean(&[&a, &b]) && clean(&[&b, &c]) && clean(&[&a, &b, &c]) {
                prop_assert_eq!(m(&[&ab, &c]).0, m(&[&a, &m(&[&b, &c]).0]).0);
                prop_assert_eq!(m(&[&ab, &c]).0, m(&[&a, &b, &c]).0);
            }
            let (aa, aa_conflicts) = m(&[&a, &a]);
            let (alone, alone_conflicts) = m(&[&a]);
            prop_assert_eq!(&aa, &alone);
            prop_assert_eq!(aa_conflicts.len(), alone_conflicts.len());
            if alone_conflicts.is_empty() {
                prop_assert_eq!(m(&[&alone]).0, alone.clone());
            }
            // Nothing is lost: every (kernel, device, workload) of a current entry is in the merge.
            for l in [&a, &b] {
                for (id, e) in l.kernels.iter().filter(|(_, e)| e.fingerprint == "f1") {
                    for v in &e.variants {
                        prop_assert!(ab.kernels[id].variants.iter().any(|w| w.device == v.device && w.workload == v.workload));
                    }
                }
            }
        }
    }
}
