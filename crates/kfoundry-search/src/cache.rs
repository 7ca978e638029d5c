//! Reading brute-forced search spaces in Kernel Tuner's cache format (`.json` or
//! `.json.gz`), and the simulation evaluator that replays them.
//!
//! Format: top-level `tune_params_keys` (ordered names), `tune_params` (name → values) and
//! `cache` (key = values joined by commas → record with `time` in milliseconds, or a string
//! `RuntimeFailedConfig` / `CompilationFailedConfig` / `InvalidConfig`, and
//! `compile_time`, `verification_time`, `benchmark_time` in milliseconds). The valid space is
//! exactly the set of keys present.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cones::{GroupSize, WORK_GROUP_LIMIT};
use crate::eval::{Evaluation, Evaluator, FailureKind};
use crate::space::{Config, Param, Space};

/// A cache file that cannot be used, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", path.display())]
pub struct CacheError {
    pub path: PathBuf,
    pub what: String,
}

/// One cached configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Kernel time in milliseconds, or the failure.
    pub time_ms: Result<f64, (FailureKind, String)>,
    /// compile + verification + benchmark time, milliseconds.
    pub cost_ms: f64,
}

/// A brute-forced space read from a cache file.
#[derive(Clone, Debug)]
pub struct CacheSpace {
    pub path: PathBuf,
    pub kernel_name: String,
    pub device_name: String,
    pub space: Space,
    /// Configuration (values in parameter order) → entry.
    pub entries: HashMap<Config, Entry>,
    /// The file says it is an interrupted brute-force run (`"kfoundry": {"complete": false}`):
    /// configurations missing from it were not evaluated, rather than invalid.
    pub incomplete: bool,
    /// What the tuner knows of work-groups before evaluating anything: the parameters whose
    /// product is a configuration's work-group size, and the limit the device reports for the
    /// compiled kernel, if known (every successful evaluation reports it, as the tuner's do:
    /// [`crate::cones::WORK_GROUP_LIMIT`]). From the file's record when it has one
    /// (`"kfoundry": {"work_group": {"params": [names], "limit": N}}`, `limit` optional: the
    /// annotation's `local`); else, in a Kernel Tuner file, the thread-block parameters
    /// Kernel Tuner launches with unless told otherwise ([`BLOCK_SIZE_NAMES`]) with no limit
    /// (the engine then learns one from failures: `selection.learn_group_limit`).
    pub work_group: Option<(Vec<usize>, Option<u64>)>,
}

/// Kernel Tuner's default `block_size_names`: the parameters that give a kernel's thread-block
/// (work-group) dimensions when a tuning script names no others.
pub const BLOCK_SIZE_NAMES: [&str; 3] = ["block_size_x", "block_size_y", "block_size_z"];

fn err(path: &Path, what: impl Into<String>) -> CacheError {
    CacheError {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                .map(|f| f as i64)
        }),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// The largest cache file read, and the largest text one inflates to (Kernel Tuner's largest
/// published spaces are tens of megabytes).
pub const MAX_CACHE_BYTES: u64 = 512 << 20;

impl CacheSpace {
    /// Reads a cache file; gzip is recognised by its magic bytes, whatever the extension. The
    /// file must be a regular file of at most [`MAX_CACHE_BYTES`], and so must its text once
    /// decompressed (a small file that inflates to gigabytes is refused, not read).
    pub fn load(path: &Path) -> Result<CacheSpace, CacheError> {
        let meta =
            std::fs::metadata(path).map_err(|e| err(path, format!("cannot read the file: {e}")))?;
        if !meta.is_file() {
            return Err(err(path, "not a regular file"));
        }
        let file = std::fs::File::open(path)
            .map_err(|e| err(path, format!("cannot read the file: {e}")))?;
        let mut raw = Vec::new();
        file.take(MAX_CACHE_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(|e| err(path, format!("cannot read the file: {e}")))?;
        let too_large = || {
            err(
                path,
                format!(
                    "more than {} MiB of text; larger spaces are not read",
                    MAX_CACHE_BYTES >> 20
                ),
            )
        };
        if raw.len() as u64 > MAX_CACHE_BYTES {
            return Err(too_large());
        }
        let text = if raw.starts_with(&[0x1f, 0x8b]) {
            let mut bytes = Vec::new();
            flate2::read::MultiGzDecoder::new(&raw[..])
                .take(MAX_CACHE_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| err(path, format!("not a valid gzip stream: {e}")))?;
            if bytes.len() as u64 > MAX_CACHE_BYTES {
                return Err(too_large());
            }
            String::from_utf8(bytes).map_err(|_| err(path, "its gzip stream is not UTF-8 text"))?
        } else {
            String::from_utf8(raw).map_err(|_| err(path, "not UTF-8 text (nor gzip)"))?
        };
        Self::parse(path, &text)
    }

    /// Parses the text of a cache file (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<CacheSpace, CacheError> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| err(path, format!("invalid JSON: {e}")))?;
        let obj = root
            .as_object()
            .ok_or_else(|| err(path, "the top level is not a JSON object"))?;
        let names: Vec<String> = obj
            .get("tune_params_keys")
            .ok_or_else(|| err(path, "missing `tune_params_keys`"))?
            .as_array()
            .ok_or_else(|| err(path, "`tune_params_keys` is not a list"))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(path, "`tune_params_keys` holds a non-string"))
            })
            .collect::<Result<_, _>>()?;
        if names.is_empty() {
            return Err(err(path, "`tune_params_keys` is empty"));
        }
        let tp = obj
            .get("tune_params")
            .ok_or_else(|| err(path, "missing `tune_params`"))?
            .as_object()
            .ok_or_else(|| err(path, "`tune_params` is not an object"))?;
        let mut params = Vec::new();
        for n in &names {
            let vals = tp
                .get(n)
                .ok_or_else(|| {
                    err(
                        path,
                        format!(
                            "`tune_params` has no entry for `{n}` (named in `tune_params_keys`)"
                        ),
                    )
                })?
                .as_array()
                .ok_or_else(|| err(path, format!("`tune_params.{n}` is not a list")))?;
            let values = vals
                .iter()
                .map(|v| int_value(v).ok_or_else(|| err(path, format!("`tune_params.{n}` holds {v}: only integer parameter values are supported"))))
                .collect::<Result<Vec<i64>, _>>()?;
            params.push(Param {
                name: n.clone(),
                values,
            });
        }
        let space = Space::new(params).map_err(|e| err(path, format!("bad parameters: {e}")))?;
        let cache = obj
            .get("cache")
            .ok_or_else(|| err(path, "missing `cache`"))?
            .as_object()
            .ok_or_else(|| err(path, "`cache` is not an object"))?;
        let mut entries = HashMap::with_capacity(cache.len());
        for (k, rec) in cache {
            let parts: Vec<&str> = k.split(',').collect();
            if parts.len() != names.len() {
                return Err(err(
                    path,
                    format!(
                        "cache key \"{k}\" has {} values, expected {}",
                        parts.len(),
                        names.len()
                    ),
                ));
            }
            let mut config = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                let v: i64 = part
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .or_else(|| {
                        part.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|f| f.fract() == 0.0)
                            .map(|f| f as i64)
                    })
                    .ok_or_else(|| {
                        err(
                            path,
                            format!("cache key \"{k}\": `{part}` is not an integer"),
                        )
                    })?;
                if !space.params[i].values.contains(&v) {
                    return Err(err(
                        path,
                        format!(
                            "cache key \"{k}\": {v} is not a value of `{}` in `tune_params`",
                            names[i]
                        ),
                    ));
                }
                config.push(v);
            }
            let r = rec
                .as_object()
                .ok_or_else(|| err(path, format!("cache record \"{k}\" is not an object")))?;
            for (i, n) in names.iter().enumerate() {
                if let Some(v) = r.get(n) {
                    if int_value(v) != Some(config[i]) {
                        return Err(err(
                            path,
                            format!(
                                "cache record \"{k}\": `{n}` is {v}, but the key says {}",
                                config[i]
                            ),
                        ));
                    }
                }
            }
            let time_ms = match r.get("time") {
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(t) if t.is_finite() && t > 0.0 => Ok(t),
                    _ => return Err(err(path, format!("cache record \"{k}\": `time` {n} is not a positive number"))),
                },
                Some(Value::String(s)) => {
                    let kind = match s.as_str() {
                        "CompilationFailedConfig" => FailureKind::Build,
                        "RuntimeFailedConfig" => FailureKind::Runtime,
                        "InvalidConfig" => FailureKind::Invalid,
                        other => return Err(err(path, format!("cache record \"{k}\": unknown `time` value \"{other}\""))),
                    };
                    Err((kind, s.clone()))
                }
                Some(other) => return Err(err(path, format!("cache record \"{k}\": `time` is {other}, expected a number or a failure name"))),
                None => return Err(err(path, format!("cache record \"{k}\" has no `time`"))),
            };
            let mut cost_ms = 0.0;
            for f in ["compile_time", "verification_time", "benchmark_time"] {
                match r.get(f) {
                    None | Some(Value::Null) => {}
                    Some(v) => match v.as_f64() {
                        Some(x) if x.is_finite() && x >= 0.0 => cost_ms += x,
                        _ => return Err(err(path, format!("cache record \"{k}\": `{f}` is {v}, expected a number of milliseconds"))),
                    },
                }
            }
            entries.insert(config, Entry { time_ms, cost_ms });
        }
        if !entries.values().any(|e| e.time_ms.is_ok()) {
            return Err(err(
                path,
                "`cache` holds no successfully timed configuration",
            ));
        }
        let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        // written by `cargo kfoundry brute-force`, interrupted: configurations are missing
        let incomplete = obj
            .get("kfoundry")
            .and_then(|k| k.get("complete"))
            .and_then(Value::as_bool)
            == Some(false);
        let work_group = match obj.get("kfoundry").and_then(|k| k.get("work_group")) {
            None => {
                let params: Vec<usize> = BLOCK_SIZE_NAMES
                    .iter()
                    .filter_map(|n| space.params.iter().position(|p| p.name == *n))
                    .collect();
                (!params.is_empty()).then_some((params, None))
            }
            Some(w) => {
                let bad = || {
                    err(path, "`kfoundry.work_group` must be {\"params\": [parameter names], \"limit\": a positive integer (optional)}")
                };
                let limit = match w.get("limit") {
                    None => None,
                    Some(l) => Some(l.as_u64().filter(|l| *l > 0).ok_or_else(bad)?),
                };
                let params = w
                    .get("params")
                    .and_then(Value::as_array)
                    .ok_or_else(bad)?
                    .iter()
                    .map(|n| {
                        n.as_str()
                            .and_then(|n| space.params.iter().position(|p| p.name == n))
                            .ok_or_else(bad)
                    })
                    .collect::<Result<Vec<usize>, _>>()?;
                Some((params, limit))
            }
        };
        Ok(CacheSpace {
            path: path.to_path_buf(),
            kernel_name: s("kernel_name"),
            device_name: s("device_name"),
            space,
            entries,
            incomplete,
            work_group,
        })
    }

    /// The validity predicate: the configuration is in the cache.
    pub fn is_valid(&self, config: &Config) -> bool {
        self.entries.contains_key(config)
    }

    /// The evaluation a real run would have produced (seconds).
    pub fn evaluation(&self, config: &Config) -> Evaluation {
        match self.entries.get(config) {
            Some(Entry {
                time_ms: Ok(t),
                cost_ms,
            }) => Evaluation::Ok {
                time: t / 1000.0,
                cost: cost_ms / 1000.0,
                descriptors: self
                    .work_group
                    .iter()
                    .filter_map(|(_, limit)| *limit)
                    .map(|limit| (WORK_GROUP_LIMIT.to_string(), limit as f64))
                    .collect(),
            },
            Some(Entry {
                time_ms: Err((kind, reason)),
                cost_ms,
            }) => Evaluation::failed(*kind, reason.clone(), cost_ms / 1000.0),
            None => Evaluation::failed(
                FailureKind::Invalid,
                "not in the cache (violates the space's restrictions)",
                0.0,
            ),
        }
    }

    /// Each configuration's work-group size, when the file says which parameters make it.
    pub fn group_size(&self) -> Option<GroupSize> {
        let (params, _) = self.work_group.clone()?;
        Some(GroupSize::new(move |c| {
            params
                .iter()
                .try_fold(1u64, |n, &p| n.checked_mul(u64::try_from(c[p]).ok()?))
        }))
    }

    /// Successful times (milliseconds), ascending.
    pub fn sorted_times_ms(&self) -> Vec<f64> {
        let mut t: Vec<f64> = self
            .entries
            .values()
            .filter_map(|e| e.time_ms.as_ref().ok().copied())
            .collect();
        t.sort_by(f64::total_cmp);
        t
    }
}

/// The simulation evaluator: answers from the cache and counts evaluations.
#[derive(Debug)]
pub struct SimEvaluator<'a> {
    pub cache: &'a CacheSpace,
    pub evaluations: usize,
}

impl<'a> SimEvaluator<'a> {
    pub fn new(cache: &'a CacheSpace) -> SimEvaluator<'a> {
        SimEvaluator {
            cache,
            evaluations: 0,
        }
    }
}

impl Evaluator for SimEvaluator<'_> {
    fn evaluate(&mut self, config: &Config) -> Evaluation {
        self.evaluations += 1;
        self.cache.evaluation(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CacheSpace, CacheError> {
        CacheSpace::parse(Path::new("x.json"), text)
    }

    const GOOD: &str = r#"{"device_name":"D","kernel_name":"k","tune_params_keys":["a","b"],
        "tune_params":{"a":[1,2],"b":[0,1]},"objective":"time",
        "cache":{"1,0":{"a":1,"b":0,"time":2.0,"compile_time":10,"verification_time":0,"benchmark_time":5},
                 "2,1":{"a":2,"b":1,"time":"CompilationFailedConfig","compile_time":7,"verification_time":0,"benchmark_time":0}}}"#;

    #[test]
    fn reads_what_a_file_says_of_work_groups() {
        let with = |w: &str| {
            GOOD.replacen(
                "\"objective\"",
                &format!("\"kfoundry\":{{\"work_group\":{w}}},\"objective\""),
                1,
            )
        };
        let c = parse(&with(r#"{"params":["b","a"],"limit":256}"#)).unwrap();
        assert_eq!(c.work_group, Some((vec![1, 0], Some(256))));
        assert_eq!(c.group_size().unwrap().of(&vec![2, 3]), Some(6));
        let Evaluation::Ok { descriptors, .. } = c.evaluation(&vec![1, 0]) else {
            panic!("a timed configuration")
        };
        assert_eq!(descriptors, vec![(WORK_GROUP_LIMIT.to_string(), 256.0)]);
        assert!(parse(GOOD).unwrap().work_group.is_none());
        // Without a limit: the size only, and evaluations report none.
        let c = parse(&with(r#"{"params":["a"]}"#)).unwrap();
        assert_eq!(c.work_group, Some((vec![0], None)));
        let Evaluation::Ok { descriptors, .. } = c.evaluation(&vec![1, 0]) else {
            panic!("a timed configuration")
        };
        assert!(descriptors.is_empty());
        // A Kernel Tuner file: its default thread-block parameters, no limit.
        let kt = GOOD
            .replace("\"a\"", "\"block_size_y\"")
            .replace("\"b\"", "\"block_size_x\"");
        let c = parse(&kt).unwrap();
        assert_eq!(c.work_group, Some((vec![1, 0], None)));
        assert_eq!(c.group_size().unwrap().of(&vec![2, 3]), Some(6));
        for bad in [
            r#"{"params":["c"],"limit":256}"#,
            r#"{"params":["a"],"limit":0}"#,
            r#"{"params":"a","limit":8}"#,
        ] {
            let e = parse(&with(bad)).unwrap_err().to_string();
            assert!(e.contains("kfoundry.work_group"), "{e}");
        }
    }

    #[test]
    fn reads_a_good_file() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.space.len(), 2);
        assert!(c.is_valid(&vec![1, 0]));
        assert!(!c.is_valid(&vec![1, 1]));
        assert_eq!(c.evaluation(&vec![1, 0]), Evaluation::ok(0.002, 0.015));
        match c.evaluation(&vec![2, 1]) {
            Evaluation::Failed { kind, cost, .. } => {
                assert_eq!(kind, FailureKind::Build);
                assert!((cost - 0.007).abs() < 1e-12);
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(c.sorted_times_ms(), vec![2.0]);
    }

    fn assert_err(text: &str, needle: &str) {
        match parse(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => {
                let m = e.to_string();
                assert!(m.starts_with("x.json: "), "{m}");
                assert!(m.contains(needle), "{m} does not mention {needle}");
            }
        }
    }

    #[test]
    fn interrupted_brute_force_files_are_flagged() {
        assert!(!parse(GOOD).unwrap().incomplete);
        let partial = GOOD.replacen('{', r#"{"kfoundry":{"complete":false},"#, 1);
        assert!(parse(&partial).unwrap().incomplete);
        let complete = GOOD.replacen('{', r#"{"kfoundry":{"complete":true},"#, 1);
        assert!(!parse(&complete).unwrap().incomplete);
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        assert_err("{", "invalid JSON");
        assert_err("[]", "not a JSON object");
        assert_err(r#"{"tune_params":{}}"#, "missing `tune_params_keys`");
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{},"cache":{}}"#,
            "no entry for `a`",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":["x"]},"cache":{}}"#,
            "only integer",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]}}"#,
            "missing `cache`",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1,2":{"time":1}}}"#,
            "has 2 values",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"3":{"time":1}}}"#,
            "not a value of `a`",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"a":2,"time":1}}}"#,
            "the key says 1",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"time":"Oops"}}}"#,
            "unknown `time`",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{}}}"#,
            "has no `time`",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"time":-1}}}"#,
            "not a positive",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"time":1,"compile_time":"x"}}}"#,
            "compile_time",
        );
        assert_err(
            r#"{"tune_params_keys":["a"],"tune_params":{"a":[1]},"cache":{"1":{"time":"InvalidConfig"}}}"#,
            "no successfully timed",
        );
    }

    #[test]
    fn unreadable_and_corrupt_gzip_files() {
        let dir = std::env::temp_dir().join(format!("kfoundry-search-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.json.gz");
        let e = CacheSpace::load(&missing).unwrap_err().to_string();
        assert!(
            e.contains("missing.json.gz") && e.contains("cannot read"),
            "{e}"
        );
        let bad = dir.join("bad.json.gz");
        std::fs::write(&bad, [0x1f, 0x8b, 8, 0, 1, 2, 3]).unwrap();
        let e = CacheSpace::load(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json.gz") && e.contains("gzip"), "{e}");
        // a good gzip file
        let good = dir.join("good.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, GOOD.as_bytes()).unwrap();
        std::fs::write(&good, enc.finish().unwrap()).unwrap();
        assert_eq!(CacheSpace::load(&good).unwrap().entries.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
