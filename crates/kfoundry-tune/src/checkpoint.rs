//! Crash-safe search state: one checkpoint file per kernel, workload and device, rewritten
//! atomically after every evaluation, under `<target>/kfoundry/checkpoints/`.
//!
//! `cargo kfoundry tune --resume` continues from them after Ctrl-C, SIGTERM or `kill -9`:
//! every configuration recorded in a checkpoint is known and never evaluated again, and a
//! workload whose search had finished is not searched again. A checkpoint is only used when
//! it belongs to the same kernel fingerprint, device and seed; the checkpoints of a run are
//! removed once the whole run has finished and been recorded.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kfoundry_search::SearchState;
use kfoundry_tooling::files::{state_file_name, write_atomic};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::messages::TuneResult;

const VERSION: u32 = 1;
/// The largest checkpoint read (a search of 10000 evaluations writes a few megabytes).
const MAX_CHECKPOINT_BYTES: u64 = 256 << 20;

/// What is saved for one kernel at one workload on one device.
#[derive(Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub kernel: String,
    pub fingerprint: String,
    pub workload: String,
    pub device: String,
    pub seed: u64,
    pub state: SearchState,
    /// The external operator's state (the language model's archive, prompt population and
    /// spending), when one runs; it reads it back itself.
    #[serde(default)]
    pub source_search: Option<serde_json::Value>,
    /// Set once the search, probing and re-measuring are done.
    pub finished: Option<TuneResult>,
}

/// Identifies one checkpoint.
pub struct Key<'a> {
    pub kernel: &'a str,
    pub fingerprint: &'a str,
    pub workload: &'a str,
    pub device: &'a str,
    pub seed: u64,
}

/// The checkpoint directory.
pub struct Checkpoints {
    dir: PathBuf,
}

impl Checkpoints {
    pub fn new(dir: PathBuf) -> Checkpoints {
        Checkpoints { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<kernel>@<workload>@<hash of device key>.json`, each part made file-name safe.
    pub fn path(&self, key: &Key) -> PathBuf {
        let hash = Sha256::digest(key.device.as_bytes());
        let short: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
        self.dir
            .join(state_file_name(&[key.kernel, key.workload, &short], "json"))
    }

    /// The checkpoint for `key`, if one exists and belongs to it. A checkpoint of another
    /// fingerprint, device or seed is ignored (`Ok(None)`, with the reason in the second value).
    pub fn load(&self, key: &Key) -> Result<(Option<Checkpoint>, Option<String>)> {
        let path = self.path(key);
        let text = match kfoundry_tooling::files::read_text_bounded(
            &path,
            MAX_CHECKPOINT_BYTES,
            "checkpoint",
        ) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok((None, None)),
            Err(e) => return Ok((None, Some(format!("{e}; starting afresh")))),
        };
        let mut ck: Checkpoint = match serde_json::from_str(&text) {
            Ok(c) => c,
            Err(e) => {
                return Ok((
                    None,
                    Some(format!(
                        "{} is unreadable ({e}); starting afresh",
                        path.display()
                    )),
                ))
            }
        };
        // Anyone could have edited it: a state that replaying its own history does not
        // reproduce is not resumed.
        ck.state = match ck.state.validated() {
            Ok(state) => state,
            Err(e) => {
                return Ok((
                    None,
                    Some(format!(
                        "{} is not a valid checkpoint ({e}); starting afresh",
                        path.display()
                    )),
                ))
            }
        };
        let why = if ck.version != VERSION {
            Some(format!(
                "checkpoint format {} (this tool writes {VERSION})",
                ck.version
            ))
        } else if ck.kernel != key.kernel || ck.fingerprint != key.fingerprint {
            Some("the kernel changed since".to_string())
        } else if ck.device != key.device || ck.workload != key.workload {
            Some("it belongs to another device or workload".to_string())
        } else if ck.seed != key.seed {
            Some(format!("it was made with --seed {}", ck.seed))
        } else {
            None
        };
        match why {
            None => Ok((Some(ck), None)),
            Some(why) => Ok((
                None,
                Some(format!("not resuming from {}: {why}", path.display())),
            )),
        }
    }

    /// Replaces the checkpoint atomically (temporary file + fsync + rename).
    pub fn save(
        &self,
        key: &Key,
        state: &SearchState,
        source_search: Option<&serde_json::Value>,
        finished: Option<&TuneResult>,
    ) -> Result<()> {
        #[derive(Serialize)]
        struct Out<'a> {
            version: u32,
            kernel: &'a str,
            fingerprint: &'a str,
            workload: &'a str,
            device: &'a str,
            seed: u64,
            state: &'a SearchState,
            source_search: Option<&'a serde_json::Value>,
            finished: Option<&'a TuneResult>,
        }
        let out = Out {
            version: VERSION,
            kernel: key.kernel,
            fingerprint: key.fingerprint,
            workload: key.workload,
            device: key.device,
            seed: key.seed,
            state,
            source_search,
            finished,
        };
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let path = self.path(key);
        let json = serde_json::to_vec(&out)?;
        write_atomic(&path, &json)
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))?;
        Ok(())
    }

    pub fn remove(&self, key: &Key) {
        let _ = std::fs::remove_file(self.path(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_search::{Param, Settings, Space};

    fn state(seed: u64) -> SearchState {
        let space = Space::new(vec![Param {
            name: "A".into(),
            values: vec![1, 2, 3],
        }])
        .expect("space");
        SearchState::new(
            space,
            Settings {
                seed,
                ..Settings::default()
            },
            None,
        )
        .expect("state")
    }

    #[test]
    fn saves_loads_and_refuses_foreign_checkpoints() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cks = Checkpoints::new(dir.path().join("ck"));
        let key = Key {
            kernel: "a::K",
            fingerprint: "f1",
            workload: "small",
            device: "dev|x",
            seed: 3,
        };
        assert!(cks.load(&key).expect("load").0.is_none());
        cks.save(&key, &state(3), None, None).expect("save");
        let (ck, why) = cks.load(&key).expect("load");
        assert!(why.is_none());
        assert_eq!(ck.expect("checkpoint").kernel, "a::K");
        for other in [
            Key {
                fingerprint: "f2",
                ..key
            },
            Key { seed: 4, ..key },
        ] {
            // Same file name (kernel, workload, device), different owner: ignored, with a reason.
            let (ck, why) = cks.load(&other).expect("load");
            assert!(ck.is_none());
            assert!(why.expect("reason").contains("not resuming"));
        }
        std::fs::write(cks.path(&key), "{ torn").expect("write");
        let (ck, why) = cks.load(&key).expect("load");
        assert!(ck.is_none() && why.expect("reason").contains("unreadable"));
        // A checkpoint that deserializes but whose state is inconsistent: ignored, with a note.
        cks.save(&key, &state(3), None, None).expect("save");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(cks.path(&key)).expect("read"))
                .expect("json");
        v["state"]["settings"]["islands"] = 0.into();
        std::fs::write(cks.path(&key), v.to_string()).expect("write");
        let (ck, why) = cks.load(&key).expect("load");
        assert!(ck.is_none() && why.expect("reason").contains("not a valid checkpoint"));
        cks.remove(&key);
        assert!(!cks.path(&key).exists());
    }

    #[test]
    fn file_names_are_safe_and_distinct_per_device() {
        let cks = Checkpoints::new(PathBuf::from("/x"));
        let a = cks.path(&Key {
            kernel: "pkg::Sgemm",
            fingerprint: "",
            workload: "large",
            device: "10de|h200",
            seed: 0,
        });
        let b = cks.path(&Key {
            kernel: "pkg::Sgemm",
            fingerprint: "",
            workload: "large",
            device: "8086|pocl",
            seed: 0,
        });
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(
            name.starts_with("pkg__Sgemm-") && name.contains("@large@") && name.ends_with(".json"),
            "{name}"
        );
        let escape = cks.path(&Key {
            kernel: "../../x",
            fingerprint: "",
            workload: "../..",
            device: "d",
            seed: 0,
        });
        assert_eq!(escape.parent(), Some(Path::new("/x")), "{escape:?}");
    }
}
