//! The OpenCL-free model a shipped binary needs: the kernel specification and its expression
//! language, the OpenCL C signature reader, device keys, tuned variants and the dispatch rules.
//! (Parsing annotations, fingerprints and the lockfile file are tooling: `kfoundry-tooling`.)

pub mod declared;
pub mod device;
pub mod expr;
pub mod select;
pub mod signature;
pub mod spec;
pub mod variant;
