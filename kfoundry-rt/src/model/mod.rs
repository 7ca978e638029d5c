//! The OpenCL-free model a shipped binary needs: the kernel specification and its expression
//! language, the OpenCL C signature reader, device keys, tuned variants and the dispatch rules.
//! (Parsing annotations, fingerprints and the lockfile file are tooling: `kfoundry-tooling`.)

pub mod declared;
pub mod device;
pub mod expr;
pub mod ranges;
pub mod select;
pub mod signature;
pub mod source_policy;
pub mod spec;
pub mod variant;

/// TOML integers are i64: larger counts (never met in practice) are written as i64::MAX rather
/// than making the whole file unwritable.
pub fn saturating<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64((*v).min(i64::MAX as u64))
}
