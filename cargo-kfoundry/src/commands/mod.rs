//! The commands besides `tune`: `list`, `check`, `report`, `simulate`, `brute-force`.

pub mod brute_force;
pub mod check;
pub mod list;
pub mod report;
pub mod simulate;
