//! kfoundry's search engine.
//!
//! A pure-Rust, OpenCL-free library: quality-diversity evolution (a MAP-Elites archive over
//! binned behavioural descriptors, islands with ring migration, parent sampling mixing
//! exploitation, exploration and randomness) steered by per-cell gradients (∂F, ∂R, ∂E,
//! combined 0.4 / 0.4 / 0.2), plus a simulator that replays brute-forced search spaces in
//! Kernel Tuner's cache format.
//!
//! ```
//! use kfoundry_search::{search, Evaluation, Param, Settings, Space};
//! let space = Space::new(vec![
//!     Param { name: "WG".into(), values: vec![32, 64, 128, 256] },
//!     Param { name: "VEC".into(), values: vec![1, 2, 4] },
//! ]).unwrap();
//! let mut eval = |c: &Vec<i64>| Evaluation::ok(1.0 / (c[0] * c[1]) as f64, 0.1);
//! let valid = |c: &Vec<i64>| c[0] * c[1] <= 512;
//! let settings = Settings { max_evals: Some(12), ..Settings::default() };
//! let r = search(space, settings, Some(&vec![64, 1]), &mut eval, &valid).unwrap();
//! let (best, _time) = r.best.unwrap();
//! assert_eq!(best[0] * best[1], 512);
//! ```
#![forbid(unsafe_code)]

pub mod archive;
pub mod cache;
pub mod cones;
pub mod engine;
pub mod eval;
pub mod gradient;
pub mod methodology;
pub mod operators;
pub mod selection;
pub mod simulate;
pub mod space;
pub mod surrogate;

pub use archive::{Archive, Cell, Elite};
pub use cache::{CacheError, CacheSpace, SimEvaluator};
pub use engine::{
    search, ExternalOperator, Operators, Progress, Record, ResultElite, Sampling, ScreenModel,
    SearchError, SearchResult, SearchState, Settings, Stepped, Stop, MAX_WARM_STARTS,
};
pub use eval::{Evaluation, Evaluator, FailureKind};
pub use gradient::{Gradient, GradientModel, Move, Weights};
pub use operators::Operator;
pub use selection::{Arm, Selection};
pub use simulate::{simulate, simulate_cache, RunSummary, SimulateOptions, SimulationReport};
pub use space::{Config, Descriptor, DescriptorSource, Indices, Param, Space, SpaceError};
pub use surrogate::Surrogate;
