//! Compile-time UI tests of `#[kfoundry::evolve(...)]`: each file under `ui/fail/` makes one
//! mistake and its `.stderr` snapshot pins the message and where it points; the files under
//! `ui/pass/` must compile. Regenerate snapshots with `TRYBUILD=overwrite cargo test -p kfoundry --test kfoundry ui::`.

#[test]
fn ui() {
    let _one = crate::common::one_build_at_a_time();
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
