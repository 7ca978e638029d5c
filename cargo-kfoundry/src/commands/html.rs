//! `cargo kfoundry report --html [PATH]`: one self-contained HTML file (inline SVG and CSS, no
//! script, nothing fetched) per lockfile: for each kernel, workload and device the reference
//! against the winner and the parameters that differ, the search's convergence (best time
//! against evaluations and against seconds, with the reference's line), its failures by kind,
//! its quality-diversity archive as a heat map, and what dispatch would choose on each device
//! of the lockfile (as `explain()` says it). The plots come from the histories the tune keeps
//! under its state directory ([`History`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use kfoundry_rt::model::select::choose;
use kfoundry_rt::model::spec::{fmt_assignments, KernelSpec};
use kfoundry_rt::model::variant::Variant;
use kfoundry_rt::DeviceKey;
use kfoundry_tooling::lockfile::Lockfile;

use kfoundry_tune::device::peaks::Peaks;
use kfoundry_tune::messages::CrossCell;
use kfoundry_tune::pipeline::discover::Kernel;
use kfoundry_tune::pipeline::history::History;
use kfoundry_tune::text::fmt_ns;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}\
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em;margin:1.4em 0 .4em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-variant-numeric:tabular-nums}\
th{background:#f4f4f4}pre{background:#f8f8f8;padding:.6em;overflow:auto;font-size:12px}\
.plots{display:flex;flex-wrap:wrap;gap:12px}svg{background:#fff;border:1px solid #ddd}.note{color:#666}";

/// Escapes text for HTML.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the report of `lock` (kernels from `kernels`, histories from `state_dir`) to `out`.
pub fn write(
    kernels: &[Kernel],
    lock: &Lockfile,
    state_dir: &Path,
    cross: &[CrossCell],
    out: &Path,
) -> Result<()> {
    let histories = History::load_all(state_dir);
    let peaks = kfoundry_tune::device::peaks::cached();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kfoundry tuning report</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(
        html,
        "<h1>kfoundry tuning report</h1><p>{} kernel(s), {} device(s) in the lockfile.</p>",
        kernels.len(),
        lock.devices.len()
    );
    let _ = write!(html, "<table><tr><th>device key</th><th>name</th><th>kind</th><th>compute units</th><th>local memory</th></tr>");
    for (key, d) in &lock.devices {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} KiB</td></tr>",
            esc(key),
            esc(&d.name),
            esc(&d.kind),
            d.compute_units,
            d.local_mem_bytes / 1024
        );
    }
    html.push_str("</table>");
    for kernel in kernels {
        kernel_section(
            &mut html,
            &kernel.spec,
            &kernel.location(),
            lock,
            &histories,
            state_dir,
            &peaks,
        );
        cross_section(&mut html, &kernel.spec, lock, cross);
    }
    if cross.is_empty() {
        html.push_str("<p class=\"note\">The hardware-awareness matrix (each device's winner measured on the others) is in the report made with <code>cargo kfoundry report --cross --html</code>, on a machine with two or more of the lockfile's devices.</p>");
    }
    html.push_str("</body></html>\n");
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    kfoundry_tooling::files::write_atomic(out, html.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))
}

#[allow(clippy::too_many_arguments)]
fn kernel_section(
    html: &mut String,
    spec: &KernelSpec,
    location: &str,
    lock: &Lockfile,
    histories: &[History],
    state_dir: &Path,
    peaks: &BTreeMap<String, Peaks>,
) {
    let _ = write!(
        html,
        "<h2 id=\"{}\">{}</h2><p class=\"note\">{} · kernel <code>{}</code></p>",
        esc(&spec.id),
        esc(&spec.id),
        esc(location),
        esc(&spec.signature.name)
    );
    let current = kfoundry_tooling::fingerprint(spec).ok();
    let Some(entry) = lock
        .kernels
        .get(&spec.id)
        .filter(|e| Some(&e.fingerprint) == current.as_ref())
    else {
        html.push_str(
            "<p>Not tuned (or its lockfile entry is stale): every call runs the reference.</p>",
        );
        return;
    };
    html.push_str("<table><tr><th>device</th><th>workload</th><th>reference</th><th>winner</th><th>speedup</th><th>evaluations</th><th>parameters that differ from the reference</th></tr>");
    for v in &entry.variants {
        let device = lock
            .devices
            .get(&v.device)
            .map_or(v.device.as_str(), |d| d.name.as_str());
        let differ: Vec<String> = v
            .params
            .iter()
            .filter(|(k, val)| spec.reference.get(*k) != Some(val))
            .map(|(k, val)| {
                format!(
                    "{k}: {} → {val}",
                    spec.reference.get(k).map_or("?".into(), i64::to_string)
                )
            })
            .collect();
        let differ = if differ.is_empty() {
            "none: the reference is kept".to_string()
        } else {
            differ.join(", ")
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}×</td><td>{}</td><td>{}</td></tr>",
            esc(device),
            esc(&v.workload),
            fmt_ns(v.reference_time_ns as f64),
            fmt_ns(v.time_ns as f64),
            v.reference_time_ns as f64 / v.time_ns.max(1) as f64,
            v.evaluations,
            esc(&differ)
        );
    }
    html.push_str("</table>");
    if !spec.ranges.is_empty() {
        let devices: std::collections::BTreeSet<&str> =
            entry.variants.iter().map(|v| v.device.as_str()).collect();
        for d in devices {
            let here: Vec<&Variant> = entry.variants.iter().filter(|v| v.device == d).collect();
            let buckets = kfoundry_rt::model::ranges::describe_buckets(spec, &here);
            if buckets.is_empty() {
                continue;
            }
            let name = lock.devices.get(d).map_or(d, |x| x.name.as_str());
            let _ = write!(
                html,
                "<p>The buckets of <code>ranges({})</code> on {} (each variant proven over its bucket):</p><ul>",
                esc(&kfoundry_rt::model::ranges::display(&spec.ranges)),
                esc(name)
            );
            for b in buckets {
                let _ = write!(html, "<li><code>{}</code></li>", esc(&b));
            }
            html.push_str("</ul>");
        }
    }
    for v in &entry.variants {
        let Some(h) = histories
            .iter()
            .find(|h| h.kernel == spec.id && h.workload == v.workload && h.device == v.device)
        else {
            continue;
        };
        let device = lock
            .devices
            .get(&v.device)
            .map_or(v.device.as_str(), |d| d.name.as_str());
        let _ = write!(
            html,
            "<h3>The search at <code>{}</code> on {}</h3>",
            esc(&v.workload),
            esc(device)
        );
        if let Some(note) = &h.note {
            let _ = write!(
                html,
                "<p class=\"why\"><b>Why this ships:</b> {}</p>",
                esc(note)
            );
        }
        html.push_str("<div class=\"plots\">");
        let reference = v.reference_time_ns as f64 * 1e-9;
        html.push_str(&convergence(h, reference, false));
        html.push_str(&convergence(h, reference, true));
        html.push_str(&archive(h));
        if let Some(p) = peaks.get(&v.device) {
            html.push_str(&roofline(spec, v, p));
        }
        html.push_str("</div>");
        // Failures by kind, each kind with the first lines of its first few reasons.
        let mut failures: BTreeMap<&str, (usize, Vec<&str>)> = BTreeMap::new();
        for p in &h.points {
            if let Some(kind) = &p.failure {
                let e = failures.entry(kind).or_default();
                e.0 += 1;
                if let Some(r) = p
                    .reason
                    .as_deref()
                    .filter(|r| e.1.len() < 3 && !e.1.contains(r))
                {
                    e.1.push(r);
                }
            }
        }
        if failures.is_empty() {
            let _ = write!(html, "<p>{} evaluations, none failed.</p>", h.points.len());
        } else {
            let _ = write!(
                html,
                "<p>{} evaluations; failures by kind:</p><table><tr><th>kind</th><th>count</th><th>first lines</th></tr>",
                h.points.len()
            );
            for (kind, (n, reasons)) in &failures {
                let _ = write!(
                    html,
                    "<tr><td>{}</td><td>{n}</td><td>{}</td></tr>",
                    esc(kind),
                    reasons
                        .iter()
                        .map(|r| esc(r))
                        .collect::<Vec<_>>()
                        .join("<br>")
                );
            }
            html.push_str("</table>");
            let dir = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
            let log = dir
                .join("logs")
                .join(kfoundry_tooling::files::state_file_name(
                    &[&spec.id, &v.workload],
                    "log",
                ));
            if log.is_file() {
                let at = esc(&log.display().to_string());
                let _ = write!(html, "<p>Every failure, with the build logs: <a class=\"log\" href=\"file://{at}\">{at}</a></p>");
            }
        }
    }
    html.push_str("<h3>Dispatch on each device of the lockfile</h3>");
    let devices: std::collections::BTreeSet<&str> =
        entry.variants.iter().map(|v| v.device.as_str()).collect();
    for device in devices {
        let Ok(key) = DeviceKey::parse(device) else {
            continue;
        };
        for w in &spec.workloads {
            let text = match choose(
                spec,
                &entry.variants,
                &key,
                lock.devices.get(device),
                None,
                &w.sizes,
                None,
            ) {
                Ok(choice) => choice.to_string(),
                Err(e) => format!("no launch at these sizes: {e}"),
            };
            let _ = write!(
                html,
                "<p>On <code>{}</code> at <code>{}</code> ({}):</p><pre>{}</pre>",
                esc(device),
                esc(&w.name),
                esc(&fmt_assignments(&w.sizes, ", ")),
                esc(&text)
            );
        }
    }
}

/// The best time so far against evaluations (or seconds), log-scaled, with the reference's
/// line. An SVG element.
fn convergence(h: &History, reference: f64, by_seconds: bool) -> String {
    let (w, ht, pad) = (340.0, 220.0, 36.0);
    let mut best = f64::INFINITY;
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for (i, p) in h.points.iter().enumerate() {
        if let Some(t) = p.time.filter(|t| *t > 0.0) {
            best = best.min(t);
        }
        if best.is_finite() {
            pts.push((
                if by_seconds {
                    p.elapsed
                } else {
                    (i + 1) as f64
                },
                best,
            ));
        }
    }
    let title = if by_seconds {
        "best time against seconds"
    } else {
        "best time against evaluations"
    };
    let mut svg = format!("<svg class=\"convergence\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\"><title>{title}</title><text x=\"{pad}\" y=\"14\" font-size=\"12\">{title}</text>");
    if pts.is_empty() {
        svg.push_str(
            "<text x=\"40\" y=\"110\" font-size=\"12\">no successful evaluation</text></svg>",
        );
        return svg;
    }
    let x_max = pts.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let lo = pts
        .iter()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min)
        .min(reference)
        .ln();
    let hi = pts
        .iter()
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(reference)
        .ln();
    let span = (hi - lo).max(1e-9);
    let x = |v: f64| pad + (w - 2.0 * pad) * v / x_max;
    let y = |t: f64| ht - pad - (ht - 2.0 * pad) * (t.ln() - lo) / span;
    let path: Vec<String> = pts
        .iter()
        .map(|(a, b)| format!("{:.1},{:.1}", x(*a), y(*b)))
        .collect();
    let _ = write!(
        svg,
        "<line x1=\"{pad}\" y1=\"{r:.1}\" x2=\"{x2}\" y2=\"{r:.1}\" stroke=\"#c33\" stroke-dasharray=\"4 3\"/><text x=\"{x2}\" y=\"{ry:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#c33\">reference {ref_t}</text>\
         <polyline class=\"best\" fill=\"none\" stroke=\"#1565c0\" stroke-width=\"2\" points=\"{}\"/>\
         <line x1=\"{pad}\" y1=\"{b}\" x2=\"{x2}\" y2=\"{b}\" stroke=\"#999\"/><line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{b}\" stroke=\"#999\"/>\
         <text x=\"{x2}\" y=\"{bl}\" font-size=\"11\" text-anchor=\"end\">{xl}</text><text x=\"4\" y=\"{top}\" font-size=\"11\">{hi_t}</text>\
         <text x=\"4\" y=\"{b}\" font-size=\"11\">{lo_t}</text><text x=\"{x2}\" y=\"{best_y:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#1565c0\">best {best_t}</text></svg>",
        path.join(" "),
        r = y(reference),
        ry = y(reference) - 4.0,
        x2 = w - pad,
        ref_t = fmt_ns(reference * 1e9),
        b = ht - pad,
        bl = ht - pad + 16.0,
        xl = if by_seconds { format!("{x_max:.1} s") } else { format!("{} evaluations", h.points.len()) },
        top = pad,
        hi_t = fmt_ns(hi.exp() * 1e9),
        lo_t = fmt_ns(lo.exp() * 1e9),
        best_y = y(best) - 4.0,
        best_t = fmt_ns(best * 1e9),
    );
    svg
}

/// The archive's cells over its first two dimensions, each coloured by its best time (green
/// fast, red slow; grey: only failures). An SVG element.
fn archive(h: &History) -> String {
    let (w, ht, pad) = (300.0, 220.0, 36.0);
    let mut cells: BTreeMap<(u16, u16), Option<f64>> = BTreeMap::new();
    for p in &h.points {
        let key = (
            p.cell.first().copied().unwrap_or(0),
            p.cell.get(1).copied().unwrap_or(0),
        );
        let e = cells.entry(key).or_insert(None);
        if let Some(t) = p.time {
            *e = Some(e.map_or(t, |b: f64| b.min(t)));
        }
    }
    let names = (
        h.descriptors.first().cloned().unwrap_or_default(),
        h.descriptors.get(1).cloned().unwrap_or_default(),
    );
    let mut svg = format!("<svg class=\"archive\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\"><title>archive</title><text x=\"{pad}\" y=\"14\" font-size=\"12\">archive: {} cells ({} × {})</text>", cells.len(), esc(&names.0), esc(&names.1));
    let (nx, ny) = (
        cells.keys().map(|k| k.0).max().unwrap_or(0) as f64 + 1.0,
        cells.keys().map(|k| k.1).max().unwrap_or(0) as f64 + 1.0,
    );
    let times: Vec<f64> = cells.values().flatten().copied().collect();
    let (lo, hi) = (
        times.iter().copied().fold(f64::INFINITY, f64::min).ln(),
        times.iter().copied().fold(0.0f64, f64::max).ln(),
    );
    let (cw, ch) = ((w - 2.0 * pad) / nx, (ht - 2.0 * pad) / ny);
    for ((cx, cy), t) in &cells {
        let colour = match t {
            Some(t) => {
                let f = if hi > lo {
                    (t.ln() - lo) / (hi - lo)
                } else {
                    0.0
                };
                format!("hsl({:.0},70%,50%)", 120.0 * (1.0 - f))
            }
            None => "#bbb".to_string(),
        };
        let tip = t.map_or("only failures".to_string(), |t| fmt_ns(t * 1e9));
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>cell ({cx}, {cy}): {tip}</title></rect>",
            pad + *cx as f64 * cw,
            ht - pad - (*cy as f64 + 1.0) * ch,
            (cw - 1.0).max(1.0),
            (ch - 1.0).max(1.0)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The roofline of `v`'s device (its measured copy bandwidth and FP32 rate) with the reference
/// and the winner placed by the annotation's `cost(bytes, flops)` at the workload's sizes. An
/// SVG element; empty without both costs.
fn roofline(spec: &KernelSpec, v: &Variant, peaks: &Peaks) -> String {
    let Some(cost) = &spec.cost else {
        return String::new();
    };
    let at = |params: &kfoundry_rt::model::spec::Params| -> Option<(f64, f64)> {
        let env = spec.env(params, &v.sizes);
        let bytes = cost.bytes.as_ref()?.eval(&env).ok()? as f64;
        let flops = cost.flops.as_ref()?.eval(&env).ok()? as f64;
        (bytes > 0.0 && flops > 0.0).then_some((flops, flops / bytes))
    };
    let (Some((flops_r, ai_r)), Some((flops_w, ai_w))) = (at(&spec.reference), at(&v.params))
    else {
        return String::new();
    };
    let points = [
        (
            "reference",
            ai_r,
            flops_r / (v.reference_time_ns.max(1) as f64),
        ),
        ("winner", ai_w, flops_w / (v.time_ns.max(1) as f64)),
    ]; // GFLOP/s
    let ridge = peaks.gflops / peaks.copy_gbytes_per_s;
    let (x_lo, x_hi) = (
        (ai_r.min(ai_w).min(ridge) / 8.0).ln(),
        (ai_r.max(ai_w).max(ridge) * 8.0).ln(),
    );
    let y_hi = peaks.gflops.max(points[0].2).max(points[1].2) * 2.0;
    let y_lo = (points[0]
        .2
        .min(points[1].2)
        .min(x_lo.exp() * peaks.copy_gbytes_per_s)
        / 2.0)
        .max(1e-6);
    let (w, ht, pad) = (340.0, 220.0, 36.0);
    let x = |ai: f64| pad + (w - 2.0 * pad) * (ai.ln() - x_lo) / (x_hi - x_lo);
    let y = |g: f64| ht - pad - (ht - 2.0 * pad) * (g.ln() - y_lo.ln()) / (y_hi.ln() - y_lo.ln());
    let mut svg = format!(
        "<svg class=\"roofline\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\"><title>roofline</title><text x=\"{pad}\" y=\"14\" font-size=\"12\">roofline: {:.0} GB/s, {:.0} GFLOP/s (measured)</text>",
        peaks.copy_gbytes_per_s, peaks.gflops
    );
    let (a0, a1) = (x_lo.exp(), x_hi.exp());
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#555\" stroke-width=\"2\" points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"/>",
        x(a0),
        y((a0 * peaks.copy_gbytes_per_s).max(y_lo)),
        x(ridge),
        y(peaks.gflops),
        x(a1),
        y(peaks.gflops)
    );
    for (i, (label, ai, g)) in points.iter().enumerate() {
        let colour = if i == 0 { "#c33" } else { "#1565c0" };
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{colour}\"><title>{label}: {g:.1} GFLOP/s at {ai:.2} FLOP/byte</title></circle><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{colour}\">{label}</text>",
            x(*ai),
            y(*g),
            x(*ai) + 7.0,
            y(*g) + 4.0 + 12.0 * i as f64
        );
    }
    let _ = write!(svg, "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">FLOP per byte (log)</text></svg>", w - pad, ht - 8.0);
    svg
}

/// The hardware-awareness matrix of `spec` from `report --cross`: each device's winner
/// measured on each device present, hws = its time ÷ that device's own winner's time.
fn cross_section(html: &mut String, spec: &KernelSpec, lock: &Lockfile, cells: &[CrossCell]) {
    let mine: Vec<&CrossCell> = cells.iter().filter(|c| c.kernel == spec.id).collect();
    if mine.is_empty() {
        return;
    }
    let name = |key: &str| {
        lock.devices
            .get(key)
            .map_or_else(|| key.to_string(), |d| d.name.clone())
    };
    let workloads: std::collections::BTreeSet<&str> =
        mine.iter().map(|c| c.workload.as_str()).collect();
    for workload in workloads {
        let here: Vec<&&CrossCell> = mine.iter().filter(|c| c.workload == workload).collect();
        let owners: std::collections::BTreeSet<&str> =
            here.iter().map(|c| c.owner.as_str()).collect();
        let ons: std::collections::BTreeSet<&str> = here.iter().map(|c| c.on.as_str()).collect();
        let _ = write!(html, "<h3>Hardware awareness at <code>{}</code> (hws: the winner's time on the row's device ÷ that device's own winner's)</h3><table class=\"cross\"><tr><th>measured on \\ winner of</th>", esc(workload));
        for o in &owners {
            let _ = write!(html, "<th>{}</th>", esc(&name(o)));
        }
        html.push_str("</tr>");
        for on in &ons {
            let _ = write!(html, "<tr><th>{}</th>", esc(&name(on)));
            for o in &owners {
                let cell = here.iter().find(|c| c.on == *on && c.owner == *o);
                let text = match cell {
                    Some(c) if c.owner == c.on => "1.00 (itself)".to_string(),
                    Some(c) => c.hws.map_or_else(
                        || c.failure.clone().unwrap_or_else(|| "-".into()),
                        |h| format!("{h:.2}"),
                    ),
                    None => "-".to_string(),
                };
                let _ = write!(html, "<td>{}</td>", esc(&text));
            }
            html.push_str("</tr>");
        }
        html.push_str("</table>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfoundry_rt::model::device::DeviceInfo;

    #[test]
    fn a_kept_reference_says_why_and_text_is_escaped() {
        let args: proc_macro2::TokenStream =
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = K; }", params(K = [0, 1]), reference(K = 0),
            global = n, buffers(y = n), check(y), workloads(w(n = 64))"#
                .parse()
                .unwrap();
        let item: syn::Item = syn::parse_str("pub struct K;").unwrap();
        let cx = kfoundry_tooling::annotation::Context {
            package: "t",
            manifest_dir: std::path::Path::new("."),
        };
        let spec = kfoundry_tooling::annotation::parse(args, &item, &cx)
            .unwrap()
            .spec;
        let device = "10de|gpu <b>|1|3.0";
        let variant = Variant {
            device: device.into(),
            workload: "w".into(),
            sizes: [("n".to_string(), 64)].into(),
            params: [("K".to_string(), 0)].into(),
            time_ns: 100,
            reference_time_ns: 100,
            evaluations: 2,
            failures: 0,
            source: None,
            proven: vec![],
            scalars: Default::default(),
            proof: 0,
            partial: false,
            general: false,
            floor: None,
            device_info: None,
        };
        let mut lock = Lockfile::default();
        lock.record(
            &spec.id,
            &kfoundry_tooling::fingerprint(&spec).unwrap(),
            device,
            DeviceInfo {
                name: "GPU <b>".into(),
                ..Default::default()
            },
            vec![variant],
        );
        let point = |time| kfoundry_tune::pipeline::history::Point {
            elapsed: 1.0,
            time,
            failure: None,
            reason: None,
            cell: vec![0, 0],
        };
        let history = History {
            kernel: spec.id.clone(),
            workload: "w".into(),
            device: device.into(),
            descriptors: vec!["a".into(), "b".into()],
            points: vec![point(Some(1e-7)), point(Some(2e-7))],
            note: Some("no finalist was faster than the reference on re-measure".into()),
        };
        let mut html = String::new();
        kernel_section(
            &mut html,
            &spec,
            "src/lib.rs:1",
            &lock,
            &[history],
            Path::new("."),
            &BTreeMap::new(),
        );
        assert!(html.contains("none: the reference is kept"), "{html}");
        assert!(
            html.contains(
                "<b>Why this ships:</b> no finalist was faster than the reference on re-measure"
            ),
            "{html}"
        );
        assert!(
            html.contains("GPU &lt;b&gt;") && !html.contains("GPU <b>"),
            "names are escaped"
        );
    }

    #[test]
    fn the_buckets_of_ranges_are_shown() {
        let args: proc_macro2::TokenStream =
            r#"code = "__kernel void k(const int n, __global float* y) { y[0] = K; }", params(K = [0, 1]), reference(K = 0),
            global = n, buffers(y = n), check(y), ranges(n = 1..=64)"#
                .parse()
                .unwrap();
        let item: syn::Item = syn::parse_str("pub struct K;").unwrap();
        let cx = kfoundry_tooling::annotation::Context {
            package: "t",
            manifest_dir: std::path::Path::new("."),
        };
        let spec = kfoundry_tooling::annotation::parse(args, &item, &cx)
            .unwrap()
            .spec;
        let device = "10de|gpu|1|3.0";
        // two buckets: n 1..=5 runs K = 1, n 6..=64 the reference
        let variants = spec
            .workloads
            .iter()
            .map(|w| {
                let n = w.sizes["n"];
                let (lo, hi, k) = if n <= 4 { (1, 5, 1) } else { (6, 64, 0) };
                Variant {
                    device: device.into(),
                    workload: w.name.clone(),
                    sizes: w.sizes.clone(),
                    params: [("K".to_string(), k)].into(),
                    time_ns: 100,
                    reference_time_ns: 100,
                    evaluations: 2,
                    failures: 0,
                    source: None,
                    proven: vec![
                        [("n".to_string(), lo)].into(),
                        w.sizes.clone(),
                        [("n".to_string(), hi)].into(),
                    ],
                    scalars: Default::default(),
                    proof: 2,
                    partial: false,
                    general: false,
                    floor: None,
                    device_info: None,
                }
            })
            .collect();
        let mut lock = Lockfile::default();
        lock.record(
            &spec.id,
            &kfoundry_tooling::fingerprint(&spec).unwrap(),
            device,
            DeviceInfo {
                name: "GPU".into(),
                ..Default::default()
            },
            variants,
        );
        let mut html = String::new();
        kernel_section(
            &mut html,
            &spec,
            "src/lib.rs:1",
            &lock,
            &[],
            Path::new("."),
            &BTreeMap::new(),
        );
        assert!(
            html.contains("The buckets of <code>ranges(n = 1..=64)</code> on GPU"),
            "{html}"
        );
        assert!(html.contains("<li><code>n 1..=5: K=1</code></li><li><code>n 6..=64: K=0 (the reference)</code></li>"), "{html}");
    }
}
