//! Test support shared by the integration tests (each test uses what it needs).
#![allow(dead_code)]

pub mod bundle;
pub mod mock_llm;

/// Every file below `dir`, at any depth.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
