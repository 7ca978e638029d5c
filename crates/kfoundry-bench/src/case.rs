//! [`Case`]: one run of a finalist's proof, and what it varies of the ways a real call can
//! differ from the search's runs: the sizes, the integer scalars, what the outputs held before,
//! the input values, and whether written buffers alias their inputs.

use std::collections::BTreeMap;
use std::fmt;

use kfoundry_rt::model::spec::{fmt_assignments, Sizes};
use serde::{Deserialize, Serialize};

pub use super::inputs::{Prefill, Values};

/// One case of a proof: the candidate and the reference run on the same fresh inputs, `sets`
/// times (input set `k` pre-fills outputs with `prefill.nth(k)`), and must agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub sizes: Sizes,
    /// Values of the kernel's integer scalars that are not sizes (the others are drawn from
    /// their declared distributions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scalars: BTreeMap<String, i64>,
    pub prefill: Prefill,
    pub values: Values,
    /// Written buffers that `in_place(...)` pairs with an input are that input's buffer.
    #[serde(default)]
    pub in_place: bool,
    pub sets: usize,
    /// The reference is first checked at these sizes as at the tune's start (it launches, stays
    /// within its buffers, its outputs react to its inputs); otherwise only that it stays within
    /// its buffers on each input set. Either way, where the reference cannot be trusted the
    /// case proves nothing and is skipped.
    pub check_reference: bool,
    /// The seed of the case's input sets (0: the bench's own stream). A proof draws it from
    /// its own seed, so that its inputs are as unpredictable as its sizes.
    #[serde(default)]
    pub seed: u64,
}

impl Case {
    /// The plain case at `sizes`: declared inputs, poisoned outputs (then zeros, then random
    /// values on the next input sets), three input sets, the reference checked first.
    pub fn at(sizes: Sizes) -> Case {
        Case {
            sizes,
            scalars: BTreeMap::new(),
            prefill: Prefill::Poison,
            values: Values::Declared,
            in_place: false,
            sets: 3,
            check_reference: true,
            seed: 0,
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sizes {}", fmt_assignments(&self.sizes, ", "))?;
        if !self.scalars.is_empty() {
            write!(f, " with {}", fmt_assignments(&self.scalars, ", "))?;
        }
        if self.values != Values::Declared {
            write!(f, ", {}", self.values.describe())?;
        }
        if self.in_place {
            f.write_str(", in place")?;
        }
        Ok(())
    }
}
