//! Compile-time UI tests of `#[kfoundry::evolve(...)]`: each file under `ui/fail/` makes one
//! mistake and its `.stderr` snapshot pins the message and where it points; the files under
//! `ui/pass/` must compile. Regenerate snapshots with `TRYBUILD=overwrite cargo test --test ui`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test says where

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
