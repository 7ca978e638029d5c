//! One module per command besides `tune` (which is the [`pipeline`](kfoundry_tune::pipeline)).

pub mod brute_force;
pub mod bundle;
pub mod check;
pub mod devices;
pub mod html;
pub mod import;
pub mod list;
pub mod merge;
pub mod report;
pub mod run;
pub mod simulate;
pub mod verify;
