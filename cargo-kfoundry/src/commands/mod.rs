//! The read-only commands: `list`, `check`, `simulate`.

pub mod check;
pub mod list;
pub mod simulate;
