//! The Kernel Tuner cache file a brute force writes (its reader, for `simulate`, is
//! `kfoundry_search::cache`): one record per configuration with its time in milliseconds or
//! Kernel Tuner's failure name, a header that says which kernel, device, workload and settings
//! it holds, and what a resumed run may keep of an earlier file.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use kfoundry_rt::model::spec::{KernelSpec, Param, Workload};
use kfoundry_search::{Config, Evaluation, FailureKind};
use kfoundry_tooling::files::state_file_name;
use serde_json::{json, Map, Value};

/// Failure reasons kept in a record, in characters.
const REASON_CHARS: usize = 200;
/// What the cost fields mean in our files.
const COST_NOTE: &str = "benchmark_time holds the whole evaluation's cost";

/// The cache key of a configuration: its values joined by commas, in parameter order.
pub fn cache_key(config: &Config) -> String {
    config
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Kernel Tuner's name for a failure in the `time` field.
pub fn failure_name(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Build => "CompilationFailedConfig",
        FailureKind::Invalid => "InvalidConfig",
        FailureKind::Runtime | FailureKind::Wrong | FailureKind::Timeout => "RuntimeFailedConfig",
    }
}

/// The first line of `text`, at most [`REASON_CHARS`] characters.
pub fn short(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > REASON_CHARS {
        format!("{}…", line.chars().take(REASON_CHARS).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The cache record of one evaluation: every parameter's value, `time` in milliseconds (or the
/// failure's name, with our kind and reason in `kfoundry_failure`), and the evaluation's whole
/// cost in `benchmark_time` (milliseconds; `compile_time` and `verification_time` are 0: our
/// evaluations are not broken down).
pub fn record(names: &[String], config: &Config, evaluation: &Evaluation) -> Value {
    let mut r = Map::new();
    for (name, value) in names.iter().zip(config) {
        r.insert(name.clone(), json!(value));
    }
    let failure = |kind: FailureKind, reason: String| {
        (
            json!(failure_name(kind)),
            Some(json!({ "kind": kind.name(), "reason": reason })),
        )
    };
    let (time, failure) = match evaluation {
        Evaluation::Ok { time, .. } if time.is_finite() && *time > 0.0 => {
            (json!(time * 1000.0), None)
        }
        Evaluation::Ok { time, .. } => failure(
            FailureKind::Runtime,
            format!("the measured time {time} s is not usable"),
        ),
        Evaluation::Failed { kind, reason, .. } => failure(*kind, short(reason)),
    };
    r.insert("time".into(), time);
    if let Some(f) = failure {
        r.insert("kfoundry_failure".into(), f);
    }
    r.insert("compile_time".into(), json!(0.0));
    r.insert("verification_time".into(), json!(0.0));
    r.insert("benchmark_time".into(), json!(evaluation.cost() * 1000.0));
    Value::Object(r)
}

/// What the file says about itself: everything but `cache`.
pub struct Header {
    pub kernel: String,
    pub fingerprint: String,
    pub params: Vec<Param>,
    /// The workload's sizes in the kernel's declaration order.
    pub sizes: Vec<(String, i64)>,
    pub workload: String,
    pub device_name: String,
    pub device_key: String,
    pub repeats: usize,
    pub seed: u64,
    /// Valid configurations of the space (the file is complete when it holds them all).
    pub valid: usize,
    /// The parameters whose product is the work-group (when every dimension of the
    /// annotation's `local` is one parameter or 1).
    pub work_group: Option<Vec<String>>,
    /// The smallest work-group limit the driver reported for the kernels built
    /// ([`kfoundry_search::cones::WORK_GROUP_LIMIT`]); with `work_group`, written to the file
    /// for `simulate` to replay the engine's work-group limit as a tune would.
    pub work_group_limit: Option<u64>,
}

impl Header {
    pub fn new(
        spec: &KernelSpec,
        workload: &Workload,
        device_name: &str,
        device_key: &str,
        repeats: usize,
        seed: u64,
    ) -> Result<Header, kfoundry_tooling::FingerprintError> {
        Ok(Header {
            kernel: spec.id.clone(),
            fingerprint: kfoundry_tooling::fingerprint(spec)?,
            params: spec.params.clone(),
            sizes: spec
                .sizes
                .iter()
                .filter_map(|s| workload.sizes.get(s).map(|v| (s.clone(), *v)))
                .collect(),
            workload: workload.name.clone(),
            device_name: device_name.to_string(),
            device_key: device_key.to_string(),
            repeats,
            seed,
            valid: 0,
            work_group: work_group_params(spec),
            work_group_limit: None,
        })
    }

    /// Takes the work-group limit an earlier file of this run recorded (its records were kept,
    /// and their evaluations' reports with them), when it names the same parameters.
    pub fn keep_limit(&mut self, existing: &Value) {
        let recorded = existing.pointer("/kfoundry/work_group");
        let params: Option<Vec<String>> = recorded
            .and_then(|w| w.get("params"))
            .and_then(|p| serde_json::from_value(p.clone()).ok());
        if params.is_some() && params == self.work_group {
            if let Some(l) = recorded
                .and_then(|w| w.get("limit"))
                .and_then(Value::as_u64)
            {
                self.lower_limit(l);
            }
        }
    }

    /// The limit so far, or `l` where it is lower.
    fn lower_limit(&mut self, l: u64) {
        self.work_group_limit = Some(self.work_group_limit.map_or(l, |m| m.min(l)));
    }

    /// Notes the work-group limit `evaluation` reports, if any.
    pub fn note_limit(&mut self, evaluation: &Evaluation) {
        if let Evaluation::Ok { descriptors, .. } = evaluation {
            for (name, v) in descriptors {
                if name == kfoundry_search::cones::WORK_GROUP_LIMIT && v.is_finite() && *v >= 1.0 {
                    self.lower_limit(*v as u64);
                }
            }
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }

    /// The top-level fields other than `cache`.
    fn fields(&self) -> Map<String, Value> {
        let mut tune_params = Map::new();
        for p in &self.params {
            tune_params.insert(p.name.clone(), json!(p.values));
        }
        let sizes: Map<String, Value> = self
            .sizes
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let mut m = Map::new();
        m.insert("device_name".into(), json!(self.device_name));
        m.insert("kernel_name".into(), json!(self.kernel));
        m.insert(
            "problem_size".into(),
            json!(self.sizes.iter().map(|(_, v)| *v).collect::<Vec<_>>()),
        );
        m.insert("tune_params_keys".into(), json!(self.names()));
        m.insert("tune_params".into(), Value::Object(tune_params));
        m.insert("objective".into(), json!("time"));
        m.insert(
            "kfoundry".into(),
            json!({
                "tool": "cargo-kfoundry brute-force",
                "version": env!("CARGO_PKG_VERSION"),
                "device_key": self.device_key,
                "workload": self.workload,
                "sizes": sizes,
                "fingerprint": self.fingerprint,
                "repeats": self.repeats,
                "seed": self.seed,
                "note": COST_NOTE,
                "time": "median of `repeats` timed runs after one warm-up, in ms; every configuration was checked against the reference on fresh random inputs first",
            }),
        );
        m
    }

    /// The whole file.
    pub fn document(&self, cache: &Map<String, Value>) -> Value {
        let mut m = self.fields();
        if let Some(Value::Object(k)) = m.get_mut("kfoundry") {
            k.insert("valid_configurations".into(), json!(self.valid));
            k.insert("complete".into(), json!(cache.len() >= self.valid));
            // Without a reported limit (a kernel that fixes its work-group, or none reported
            // yet) the parameters alone: `simulate` then learns the limit from failures, as
            // `tune` does.
            match (&self.work_group, self.work_group_limit) {
                (Some(params), Some(limit)) => {
                    k.insert(
                        "work_group".into(),
                        json!({ "params": params, "limit": limit }),
                    );
                }
                (Some(params), None) => {
                    k.insert("work_group".into(), json!({ "params": params }));
                }
                (None, _) => {}
            }
        }
        m.insert("cache".into(), Value::Object(cache.clone()));
        Value::Object(m)
    }
}

/// The parameters whose product is `spec`'s work-group: every dimension of its `local` one
/// parameter or 1 (`None` otherwise, or without `local`). A source that fixes its work-group
/// has them too; its evaluations report no limit.
fn work_group_params(spec: &KernelSpec) -> Option<Vec<String>> {
    let mut params = Vec::new();
    for dim in spec.local.as_ref()? {
        let text = dim.to_string();
        if text == "1" {
            continue;
        }
        spec.params.iter().find(|p| p.name == text)?;
        params.push(text);
    }
    Some(params)
}

/// The records of an earlier file (`existing`) that this run can keep: those of configurations
/// still valid. `Err` saying what differs when the file is of another kernel version, workload,
/// device or measurement settings.
pub fn resumable(
    existing: &Value,
    header: &Header,
    valid: &BTreeSet<String>,
) -> Result<Map<String, Value>, String> {
    let ours = Value::Object(header.fields());
    let same = |field: &str, pointer: &str| {
        let (theirs, mine) = (existing.pointer(pointer), ours.pointer(pointer));
        if theirs == mine {
            Ok(())
        } else {
            let show = |v: Option<&Value>| v.map_or("missing".to_string(), Value::to_string);
            Err(format!(
                "its {field} is {}, this run's is {}",
                show(theirs),
                show(mine)
            ))
        }
    };
    same("kernel", "/kernel_name")?;
    same(
        "kernel fingerprint (source and annotation)",
        "/kfoundry/fingerprint",
    )?;
    same("parameters", "/tune_params_keys")?;
    same("parameter values", "/tune_params")?;
    same("device key", "/kfoundry/device_key")?;
    same("workload", "/kfoundry/workload")?;
    same("sizes", "/kfoundry/sizes")?;
    same("--repeats", "/kfoundry/repeats")?;
    same("--seed", "/kfoundry/seed")?;
    let cache = existing
        .get("cache")
        .and_then(Value::as_object)
        .ok_or("it has no `cache` object")?;
    Ok(cache
        .iter()
        .filter(|(k, r)| {
            valid.contains(k.as_str())
                && r.get("time")
                    .is_some_and(|t| t.is_number() || t.is_string())
        })
        .map(|(k, r)| (k.clone(), r.clone()))
        .collect())
}

/// Counts of a cache: timed configurations, failures by kind, the best time (ms) and its key.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub timed: usize,
    pub failures: BTreeMap<String, usize>,
    pub best: Option<(String, f64)>,
}

pub fn tally(cache: &Map<String, Value>) -> Tally {
    let mut t = Tally::default();
    for (key, r) in cache {
        match r.get("time") {
            Some(Value::Number(n)) => {
                t.timed += 1;
                let ms = n.as_f64().unwrap_or(f64::INFINITY);
                if t.best.as_ref().is_none_or(|(_, b)| ms < *b) {
                    t.best = Some((key.clone(), ms));
                }
            }
            other => {
                let kind = r
                    .get("kfoundry_failure")
                    .and_then(|f| f.get("kind"))
                    .and_then(Value::as_str)
                    .or_else(|| other.and_then(Value::as_str))
                    .unwrap_or("unknown");
                *t.failures.entry(kind.to_string()).or_default() += 1;
            }
        }
    }
    t
}

/// `<safe kernel id>@<workload>@<safe device key>.json`.
pub fn file_name(kernel: &str, workload: &str, device_key: &str) -> String {
    state_file_name(&[kernel, workload, device_key], "json")
}

/// The file's text in Kernel Tuner's own layout, which its reader relies on: the fields in
/// Kernel Tuner's order with `cache` last, one record per line, ending in `}\n}` (Kernel Tuner
/// reopens a cache file for appending by cutting those three characters).
pub fn kernel_tuner_text(document: &Value) -> Result<String> {
    const ORDER: [&str; 7] = [
        "device_name",
        "kernel_name",
        "problem_size",
        "tune_params_keys",
        "tune_params",
        "objective",
        "kfoundry",
    ];
    let Value::Object(fields) = document else {
        bail!("a cache document is a JSON object")
    };
    let mut out = String::from("{\n");
    for key in ORDER {
        if let Some(v) = fields.get(key) {
            out += &format!(
                "{}: {},\n",
                serde_json::to_string(key)?,
                serde_json::to_string(v)?
            );
        }
    }
    out += "\"cache\": {";
    let empty = Map::new();
    let cache = fields
        .get("cache")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (i, (key, record)) in cache.iter().enumerate() {
        out += if i == 0 { "\n" } else { ",\n" };
        out += &format!(
            "{}: {}",
            serde_json::to_string(key)?,
            serde_json::to_string(record)?
        );
    }
    out += "\n}\n}";
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_spec as spec;
    use super::super::{evaluation_order, fmt_key};
    use super::*;
    use std::path::Path;

    #[test]
    fn records_times_in_milliseconds_and_failures_by_name() {
        let names = vec!["WG".to_string(), "V".to_string()];
        let c = vec![64, 2];
        let ok = record(&names, &c, &Evaluation::ok(0.0125, 1.5));
        assert_eq!(ok["WG"], 64);
        assert_eq!(ok["V"], 2);
        assert!((ok["time"].as_f64().unwrap() - 12.5).abs() < 1e-9);
        assert!((ok["benchmark_time"].as_f64().unwrap() - 1500.0).abs() < 1e-9);
        assert_eq!(ok["compile_time"], 0.0);
        assert_eq!(ok["verification_time"], 0.0);
        assert!(ok.get("kfoundry_failure").is_none());
        let cases = [
            (FailureKind::Build, "CompilationFailedConfig", "build"),
            (FailureKind::Runtime, "RuntimeFailedConfig", "runtime"),
            (FailureKind::Wrong, "RuntimeFailedConfig", "wrong"),
            (FailureKind::Timeout, "RuntimeFailedConfig", "timeout"),
            (FailureKind::Invalid, "InvalidConfig", "invalid"),
        ];
        for (kind, name, ours) in cases {
            let r = record(
                &names,
                &c,
                &Evaluation::failed(
                    kind,
                    format!("\nwhy it failed\nsecond line {}", "x".repeat(500)),
                    0.25,
                ),
            );
            assert_eq!(r["time"], name);
            assert_eq!(r["kfoundry_failure"]["kind"], ours);
            assert_eq!(r["kfoundry_failure"]["reason"], "why it failed");
            assert!((r["benchmark_time"].as_f64().unwrap() - 250.0).abs() < 1e-9);
        }
        let long = record(
            &names,
            &c,
            &Evaluation::failed(FailureKind::Wrong, "y".repeat(500), 0.0),
        );
        assert_eq!(
            long["kfoundry_failure"]["reason"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            REASON_CHARS + 1
        );
        // A zero time would make the file unreadable: it is a runtime failure.
        let zero = record(&names, &c, &Evaluation::ok(0.0, 0.1));
        assert_eq!(zero["time"], "RuntimeFailedConfig");
        assert_eq!(zero["kfoundry_failure"]["kind"], "runtime");
    }

    fn header() -> Header {
        Header::new(
            &spec(),
            &spec().workloads[0],
            "Some Device",
            "1|some device|1.0|3.0",
            5,
            0,
        )
        .unwrap()
    }

    #[test]
    fn the_document_is_a_cache_file_the_simulator_reads() {
        let h = header();
        let names = h.names();
        let mut cache = Map::new();
        cache.insert(
            "16,1".into(),
            record(&names, &vec![16, 1], &Evaluation::ok(0.002, 0.1)),
        );
        cache.insert(
            "64,2".into(),
            record(&names, &vec![64, 2], &Evaluation::ok(0.001, 0.1)),
        );
        cache.insert(
            "16,2".into(),
            record(
                &names,
                &vec![16, 2],
                &Evaluation::failed(FailureKind::Build, "no", 0.05),
            ),
        );
        let doc = h.document(&cache);
        // No limit reported yet: the parameters alone; then the smallest reported.
        assert_eq!(doc["kfoundry"]["work_group"], json!({ "params": ["WG"] }));
        let mut limited = header();
        for l in [512.0, 256.0] {
            limited.note_limit(&Evaluation::Ok {
                time: 0.001,
                cost: 0.1,
                descriptors: vec![(kfoundry_search::cones::WORK_GROUP_LIMIT.into(), l)],
            });
        }
        let with = limited.document(&cache);
        assert_eq!(
            with["kfoundry"]["work_group"],
            json!({ "params": ["WG"], "limit": 256 })
        );
        let replayed = kfoundry_search::CacheSpace::parse(
            Path::new("t.json"),
            &kernel_tuner_text(&with).unwrap(),
        )
        .unwrap();
        assert_eq!(replayed.work_group, Some((vec![0], Some(256))));
        // A kernel compiled for exactly its own work-group: its parameters, and its evaluations
        // report no limit (the engine learns one).
        let mut pinned = spec();
        pinned.source = pinned.source.replace(
            "__kernel",
            "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))",
        );
        let h = Header::new(&pinned, &pinned.workloads[0], "D", "1|d|1.0|3.0", 5, 0).unwrap();
        assert_eq!(h.work_group, Some(vec!["WG".to_string()]));
        assert_eq!(doc["tune_params_keys"], json!(["WG", "V"]));
        assert_eq!(doc["problem_size"], json!([4096]));
        assert_eq!(doc["kfoundry"]["sizes"], json!({ "n": 4096 }));
        assert_eq!(doc["kfoundry"]["note"], COST_NOTE);
        assert_eq!(doc["kfoundry"]["complete"], true);
        assert_eq!(
            Header {
                valid: 4,
                ..header()
            }
            .document(&cache)["kfoundry"]["complete"],
            false
        );
        // Kernel Tuner's layout: `cache` last, the text ending in `}\n}`, the same document
        let text = kernel_tuner_text(&doc).unwrap();
        assert!(text.ends_with("}\n}"), "{text}");
        let cache_at = text.find("\"cache\"").unwrap();
        assert!(["\"device_name\"", "\"tune_params\"", "\"kfoundry\""]
            .iter()
            .all(|k| text.find(k).unwrap() < cache_at));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), doc);
        // Kernel Tuner reopens a closed file for appending by cutting `}\n}` and adding `,`
        let reopened = format!(
            "{},\n\"99,9\": {{\"time\": 1.0}}}}\n}}",
            &text[..text.len() - 3]
        );
        assert_eq!(
            serde_json::from_str::<Value>(&reopened).unwrap()["cache"]
                .as_object()
                .unwrap()
                .len(),
            4
        );
        let space = kfoundry_search::CacheSpace::parse(Path::new("t.json"), &text).unwrap();
        assert_eq!(space.entries.len(), 3);
        assert_eq!(space.kernel_name, "t::K");
        assert_eq!(space.evaluation(&vec![64, 2]), Evaluation::ok(0.001, 0.1));
        assert_eq!(space.sorted_times_ms(), vec![1.0, 2.0]);
        let t = tally(&cache);
        assert_eq!(t.timed, 2);
        assert_eq!(t.failures, [("build".to_string(), 1)].into());
        assert_eq!(t.best, Some(("64,2".to_string(), 1.0)));
        assert_eq!(fmt_key(&names, "64,2"), "WG=64 V=2");
        let name = file_name("t::K", "w", "1|some device|1.0|3.0");
        assert!(
            name.starts_with("t__K-")
                && name.contains("@w@1_some_device_1_0_3_0-")
                && name.ends_with(".json"),
            "{name}"
        );
    }

    #[test]
    fn resume_keeps_what_was_done_and_refuses_other_runs() {
        let h = header();
        let names = h.names();
        let mut cache = Map::new();
        cache.insert(
            "16,1".into(),
            record(&names, &vec![16, 1], &Evaluation::ok(0.002, 0.1)),
        );
        cache.insert(
            "64,4".into(),
            record(
                &names,
                &vec![64, 4],
                &Evaluation::failed(FailureKind::Timeout, "slow", 20.0),
            ),
        );
        cache.insert(
            "256,4".into(),
            record(&names, &vec![256, 4], &Evaluation::ok(0.002, 0.1)),
        );
        let doc = h.document(&cache);
        let valid: Vec<Config> = vec![vec![16, 1], vec![16, 2], vec![64, 4]];
        let keys: BTreeSet<String> = valid.iter().map(cache_key).collect();
        let kept = resumable(&doc, &h, &keys).unwrap();
        // A configuration no longer valid is dropped; the failure is kept (not retried).
        assert_eq!(
            kept.keys().cloned().collect::<Vec<_>>(),
            vec!["16,1".to_string(), "64,4".to_string()]
        );
        let todo: Vec<Config> = evaluation_order(valid, &vec![16, 1])
            .into_iter()
            .filter(|c| !kept.contains_key(&cache_key(c)))
            .collect();
        assert_eq!(todo, vec![vec![16, 2]]);
        // Everything done: nothing to do.
        let mut all = kept.clone();
        all.insert(
            "16,2".into(),
            record(&names, &vec![16, 2], &Evaluation::ok(0.003, 0.1)),
        );
        let again = resumable(&h.document(&all), &h, &keys).unwrap();
        assert!(
            evaluation_order(vec![vec![16, 1], vec![16, 2], vec![64, 4]], &vec![16, 1])
                .iter()
                .all(|c| again.contains_key(&cache_key(c)))
        );

        let mut other = header();
        other.seed = 7;
        let e = resumable(&doc, &other, &keys).unwrap_err();
        assert!(
            e.contains("--seed") && e.contains('0') && e.contains('7'),
            "{e}"
        );
        let mut other = header();
        other.device_key = "2|other|1|3.0".into();
        assert!(resumable(&doc, &other, &keys)
            .unwrap_err()
            .contains("device key"));
        let mut other = header();
        other.fingerprint = "0000".into();
        assert!(resumable(&doc, &other, &keys)
            .unwrap_err()
            .contains("fingerprint"));
        assert!(resumable(&json!({}), &h, &keys).is_err());
    }
}
