//! The commands besides `tune`: `list`, `check`, `report`, `simulate`.

pub mod check;
pub mod list;
pub mod report;
pub mod simulate;
