//! The reference's runs on proof cases, kept for the next proof that meets the same case.
//!
//! A proof case's input sets are seeded from the proof's seed ([`super::Shape::of`]), and
//! every proof of one tune uses the same seed: the next finalist after a refused one, and each
//! of a portfolio's candidates, meet the same cases in the same order. The reference's run on
//! such a set (its inputs, its outputs, and how far its outputs move when its inputs move by one
//! unit) is the same each time, and for a slow reference it is most of a case's cost (a
//! KernelBench matrix product's reference takes 27-150 ms a run on an H100). So it is kept,
//! device buffers and all, and a later case with the same key compares the next candidate
//! against it.
//!
//! What is kept is bounded: at most [`SHARE`] of the device's memory and [`MAX_ENTRIES`]
//! entries, the oldest dropped first, and all of it whenever the device runs short of memory
//! for a case's own buffers (a kept run must never make a proof case fail to allocate) or a
//! candidate wrote outside its buffers or broke its run (it may have reached the kept runs, as
//! [`super::Bench`]'s pool is renewed then). Only seeded input sets are kept: the search's
//! draws are never the same twice.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use kfoundry_rt::model::spec::Sizes;

use super::{Prefill, Prepared, Run, Slack, Values};

/// The share of the device's global memory that kept runs may hold.
const SHARE: u64 = 16;
/// At most this many runs are kept.
const MAX_ENTRIES: usize = 64;

/// What makes two input sets the same: the seed and everything the draw depends on, with each
/// caller buffer's length (which a candidate's parameters may change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub seed: u64,
    pub sizes: Sizes,
    pub scalars: BTreeMap<String, i64>,
    pub prefill: Prefill,
    pub values: Values,
    pub in_place: bool,
    pub lens: Vec<usize>,
}

/// The reference's finished run on one input set: the set, the run, and the slack its
/// sensitivity gives a candidate there.
pub(super) struct Kept {
    pub prepared: Prepared,
    pub run: Run,
    pub slack: Slack,
}

/// The kept runs, oldest first.
#[derive(Default)]
pub(super) struct ReferenceRuns {
    entries: VecDeque<(Key, Rc<Kept>, u64)>,
    bytes: u64,
    /// How many cases found their reference run here (for tests and phases).
    pub hits: usize,
}

impl ReferenceRuns {
    /// The kept run for `key`, if any.
    pub fn get(&mut self, key: &Key) -> Option<Rc<Kept>> {
        let found = self
            .entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, kept, _)| kept.clone());
        if found.is_some() {
            self.hits += 1;
        }
        found
    }

    /// Keeps `kept` under `key` when it takes at most the share of `global_mem_bytes`,
    /// dropping the oldest runs until it fits.
    pub fn keep(&mut self, key: Key, kept: Rc<Kept>, global_mem_bytes: u64) {
        let room = global_mem_bytes / SHARE;
        let bytes = footprint(&kept.prepared);
        if room == 0 || bytes > room {
            return;
        }
        while !self.entries.is_empty()
            && (self.bytes + bytes > room || self.entries.len() >= MAX_ENTRIES)
        {
            if let Some((_, _, b)) = self.entries.pop_front() {
                self.bytes -= b;
            }
        }
        self.bytes += bytes;
        self.entries.push_back((key, kept, bytes));
    }

    /// Drops every kept run (their device memory is freed once no case holds them).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Whether any run is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The bytes a kept run holds: each buffer on the device (elements and guards) and, where its
/// values were drawn on the host, once more there.
fn footprint(prepared: &Prepared) -> u64 {
    prepared
        .buffers
        .iter()
        .map(|b| {
            let device = b.len * b.ty.size() + b.front.len() + b.back.len();
            let host = match &b.fill {
                super::Fill::Host(bytes) => bytes.len(),
                _ => 0,
            };
            (device + host) as u64
        })
        .sum()
}
