//! `lx gallery`: many bench files on one offline page. Files that ran the same suite on the
//! same model compare by design and share a section: each machine and backend's score with
//! its interval as a bar, every shape's rates, filters by CPU and GPU, and this machine marked.
//! The page needs nothing but itself (its one script is inline and only hides rows).

use std::fmt::Write;

use super::{BenchFile, SuiteName};
use crate::report::chart::{escape, label, Chart, Series};
use crate::report::{row, utc, STYLE};

/// One file as the gallery shows it, with the name it is listed under.
pub struct Entry {
    pub file: BenchFile,
    /// The file's name, without its directory.
    pub source: String,
}

impl Entry {
    /// The machine, and the build where it has GPU or MLX features: one machine's two builds
    /// are two rows.
    pub fn label(&self) -> String {
        let features = &self.file.build.features;
        if features.is_empty() { self.file.machine.label() } else { format!("{} ({} build)", self.file.machine.label(), features.join("+")) }
    }
}

const BAR_STYLE: &str = ".bars text{font-size:12px;fill:#222}.bars .mine{font-weight:700}.whisker{stroke:#222;stroke-width:1.5}\
.filters{display:flex;gap:1.5em;flex-wrap:wrap;margin:.6em 0}.filters label{font-size:14px}select{font:inherit;padding:2px 4px}\
tr.mine td{background:#fff4d6}.tag{font-size:11px;background:#1a1a1a;color:#fff;border-radius:3px;padding:0 4px;margin-left:4px}";

/// Hides the rows and bars whose CPU or GPU kind is not the one chosen.
const FILTER_SCRIPT: &str = "function lxFilter(){var c=document.getElementById('cpu').value,g=document.getElementById('gpu').value;\
document.querySelectorAll('[data-cpu]').forEach(function(e){var show=(c===''||e.dataset.cpu===c)&&(g===''||e.dataset.gpu===g);e.style.display=show?'':'none';});}";

/// The bench files among `paths` (files, and the `.json` files of directories), each scored
/// again against this build's reference so that every score on a page has the same basis;
/// with a line for each file that could not be read (other JSON files are passed over).
pub fn load(paths: &[std::path::PathBuf]) -> (Vec<Entry>, Vec<String>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(dir) => {
                    let mut found: Vec<_> = dir.flatten().map(|e| e.path()).filter(|f| f.extension().is_some_and(|x| x == "json")).collect();
                    found.sort();
                    files.extend(found.into_iter().map(|f| (f, false)));
                }
                Err(e) => problems.push(format!("cannot read {}: {e}", p.display())),
            }
        } else {
            files.push((p.clone(), true));
        }
    }
    let mut entries = Vec::new();
    for (path, named) in files {
        match BenchFile::read(&path) {
            Ok(mut file) => {
                let reference = super::score::Reference::for_file(&file);
            file.score(reference.as_ref());
                let source = path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
                entries.push(Entry { file, source });
            }
            // A directory of results holds other files too; a file named on its own is a mistake.
            Err(super::BenchFileError::NotABenchFile { .. }) if !named => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    (entries, problems)
}

/// The bench files this project measured (docs/results/bench), built in: a first gallery
/// has neighbours before the user has any file of their own.
const SHIPPED: [(&str, &str); 4] = [
    ("quick-amd-epyc-avx512-2c.json", include_str!("../../../../docs/results/bench/quick-amd-epyc-avx512-2c.json")),
    ("full-amd-epyc-avx512-2c.json", include_str!("../../../../docs/results/bench/full-amd-epyc-avx512-2c.json")),
    ("quick-amd-epyc-avx512-2c-vulkan-lavapipe.json", include_str!("../../../../docs/results/bench/quick-amd-epyc-avx512-2c-vulkan-lavapipe.json")),
    ("quick-qwen2.5-1.5b-amd-epyc-avx512-2c.json", include_str!("../../../../docs/results/bench/quick-qwen2.5-1.5b-amd-epyc-avx512-2c.json")),
];

/// [`SHIPPED`], scored against this build's reference.
pub fn shipped() -> Vec<Entry> {
    SHIPPED
        .iter()
        .map(|(name, text)| {
            let mut file: BenchFile = serde_json::from_str(text).expect("the shipped bench files are read by their test");
            let reference = super::score::Reference::for_file(&file);
            file.score(reference.as_ref());
            Entry { file, source: format!("{name} (shipped)") }
        })
        .collect()
}

/// `extra` after the shipped files, without a file twice (the same machine at the same start).
pub fn with_shipped(extra: Vec<Entry>) -> Vec<Entry> {
    let mut all = shipped();
    for e in extra {
        if !all.iter().any(|a| a.file.machine.fingerprint == e.file.machine.fingerprint && a.file.started_unix_ms == e.file.started_unix_ms) {
            all.push(e);
        }
    }
    all
}

/// The names of the files [`SHIPPED`] holds (its test checks them against the directory).
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(n, _)| *n).collect()
}

/// Where the machine's GPU kind is listed for the filter: its first GPU, or none.
fn gpu_kind(f: &BenchFile) -> String {
    f.machine.gpus.first().cloned().unwrap_or_else(|| "no GPU".into())
}

/// The page for `entries`; files whose machine fingerprint is `this_machine` are marked.
pub fn html(entries: &[Entry], this_machine: Option<&str>) -> String {
    let mut o = String::new();
    let _ = write!(o, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>Latency Explorer gallery</title><style>{STYLE}{BAR_STYLE}</style><script>{FILTER_SCRIPT}</script></head><body>");
    let machines: std::collections::BTreeSet<&str> = entries.iter().map(|e| e.file.machine.fingerprint.as_str()).collect();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let _ = write!(o, "<h1>Latency Explorer gallery</h1><p>{} from {}. A score is 100 × the geometric mean of a backend's prefill and decode rates over the suite's shapes, each divided by the reference machine's (whose llama.cpp scores 100), with its 95% interval from the repetitions; only files of the same suite and model compare.</p>", plural(entries.len(), "bench file"), plural(machines.len(), "machine"));
    let mine = |e: &Entry| this_machine.is_some_and(|m| m == e.file.machine.fingerprint);
    if this_machine.is_some() && !entries.iter().any(mine) {
        o.push_str("<p class=\"warn\">No file here is from this machine: run <code>lx bench --quick</code> to put it among them.</p>");
    }

    let select = |id: &str, what: &str, kinds: std::collections::BTreeSet<String>| {
        let mut s = format!("<label>{what} <select id=\"{id}\" data-testid=\"filter-{id}\" onchange=\"lxFilter()\"><option value=\"\">all</option>");
        for k in kinds {
            let _ = write!(s, "<option>{}</option>", escape(&k));
        }
        s.push_str("</select></label>");
        s
    };
    let cpus = entries.iter().map(|e| e.file.machine.cpu.clone()).collect();
    let gpus = entries.iter().map(|e| gpu_kind(&e.file)).collect();
    let _ = write!(o, "<div class=\"filters\">{}{}</div>", select("cpu", "CPU", cpus), select("gpu", "GPU", gpus));

    // One section per suite and model: only those compare. A sustained run alone measured no
    // suite: it is only in the sustained section.
    let mut groups: Vec<((SuiteName, String), Vec<&Entry>)> = Vec::new();
    for e in entries.iter().filter(|e| !e.file.backends.is_empty()) {
        let key = (e.file.suite.name, e.file.model.sha256.clone().unwrap_or_else(|| e.file.model.name.clone()));
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(e),
            None => groups.push((key, vec![e])),
        }
    }
    for ((suite, _), group) in &groups {
        let model = &group[0].file.model;
        let _ = write!(o, "<section data-testid=\"gallery-group\"><h2>{} suite on {} ({}, {})</h2>", suite, escape(&model.name), escape(&model.architecture), escape(&model.quantization));
        if let Some(note) = &model.synthetic {
            let _ = write!(o, "<p class=\"warn\">{}</p>", escape(note));
        }
        o.push_str(&score_bars(group, &mine));
        o.push_str(&table(group, &mine));
        let charts = shape_charts(group);
        if !charts.is_empty() {
            o.push_str("<div class=\"charts\">");
            for c in &charts {
                let _ = write!(o, "<figure>{}{}</figure>", c.svg(), c.legend());
            }
            o.push_str("</div>");
        }
        o.push_str("</section>");
    }

    let sustained: Vec<&Entry> = entries.iter().filter(|e| e.file.sustained.is_some()).collect();
    if !sustained.is_empty() {
        o.push_str("<h2>Sustained load</h2>");
        let chart = Chart {
            title: "Decode rate over a sustained load".into(),
            x_label: "time since the load began (s)".into(),
            y_label: "decode tok/s (one request, median)".into(),
            series: sustained
                .iter()
                .filter_map(|e| {
                    let s = e.file.sustained.as_ref()?;
                    Some(Series { label: format!("{} · {}", e.label(), s.backend), points: s.trials.iter().map(|t| (t.end_s, t.decode_tps)).collect(), ceiling: vec![] })
                })
                .collect(),
            ceiling_note: String::new(),
            x_names: vec![],
        };
        let _ = write!(o, "<figure>{}{}</figure><ul>", chart.svg(), chart.legend());
        for e in &sustained {
            let s = e.file.sustained.as_ref().expect("filtered");
            let _ = write!(o, "<li>{} · {}: {}</li>", escape(&e.label()), escape(&s.backend), escape(&s.verdict()));
        }
        o.push_str("</ul>");
    }

    o.push_str("<h2>Machines</h2>");
    for e in entries {
        let m = &e.file.machine;
        let _ = write!(o, "<h3 data-cpu=\"{}\" data-gpu=\"{}\">{}{}</h3><dl data-cpu=\"{}\" data-gpu=\"{}\">", escape(&m.cpu), escape(&gpu_kind(&e.file)), escape(&e.label()), if mine(e) { "<span class=\"tag\">this machine</span>" } else { "" }, escape(&m.cpu), escape(&gpu_kind(&e.file)));
        row(&mut o, "file", &e.source);
        row(&mut o, "measured", &utc(e.file.started_unix_ms));
        row(&mut o, "CPU", &format!("{} ({} cores, {} threads; {})", m.cpu, m.physical_cores, m.logical_cores, m.cpu_features.join(" ")));
        row(&mut o, "memory", &format!("{:.1} GiB", m.memory_gib));
        row(&mut o, "GPUs", &if m.gpus.is_empty() { "none found".into() } else { m.gpus.join("; ") });
        row(&mut o, "system", &format!("{} {}", m.os, m.arch));
        row(&mut o, "power", &power_text(&m.power));
        let b = &e.file.build;
        let with = if b.features.is_empty() { String::new() } else { format!(" with {}", b.features.join(", ")) };
        let for_cpu = if b.compiled_for.is_empty() { String::new() } else { format!("; compiled for {}", b.compiled_for.join(" ")) };
        row(&mut o, "build", &format!("lx {}{with}{for_cpu}", b.lx_version));
        row(&mut o, "fingerprint", &m.fingerprint);
        o.push_str("</dl>");
    }
    o.push_str("<p>Made by <code>lx gallery</code>. Each file was written by <code>lx bench</code>; it names no user, host or path.</p></body></html>\n");
    o
}

fn power_text(p: &lx_machine::power::Power) -> String {
    let said: Vec<String> = [p.source.clone(), p.mode.clone()].into_iter().flatten().collect();
    if said.is_empty() { "not readable on this machine".into() } else { said.join("; ") }
}

/// Each machine and backend's score as a bar with its interval, highest first.
fn score_bars(group: &[&Entry], mine: &dyn Fn(&Entry) -> bool) -> String {
    let mut bars: Vec<(&Entry, &super::BackendBench)> = group.iter().flat_map(|e| e.file.backends.iter().map(move |b| (*e, b))).collect();
    bars.sort_by(|a, b| b.1.score.as_ref().map_or(-1.0, |s| s.value).total_cmp(&a.1.score.as_ref().map_or(-1.0, |s| s.value)));
    let top = crate::report::chart::nice_above(bars.iter().filter_map(|(_, b)| b.score.as_ref().map(|s| s.high.unwrap_or(s.value))).fold(100.0, f64::max));
    // Each bar under its own label, so a long machine name is never cut.
    let (left, width, row_h) = (8.0, 900.0, 40.0);
    let plot = width - left - 150.0;
    let x = |v: f64| left + v / top * plot;
    let height = 30.0 + row_h * bars.len() as f64;
    let mut o = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" aria-label="Score by machine and backend" class="chart bars" data-testid="score-bars">"#);
    let _ = write!(o, r#"<line x1="{0:.1}" x2="{0:.1}" y1="4" y2="{1:.1}" class="grid" stroke-dasharray="4 3"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">100 (reference)</text>"#, x(100.0), height - 16.0, height - 4.0);
    for (i, (e, b)) in bars.iter().enumerate() {
        let y = 6.0 + i as f64 * row_h;
        let bar_y = y + 18.0;
        let name = format!("{} · {}", e.label(), b.name);
        let class = if mine(e) { " class=\"mine\"" } else { "" };
        let _ = write!(o, r#"<g data-cpu="{}" data-gpu="{}"><text x="{left}" y="{:.1}"{class}>{}{}</text>"#, escape(&e.file.machine.cpu), escape(&gpu_kind(&e.file)), y + 12.0, escape(&name), if mine(e) { " (this machine)" } else { "" });
        match &b.score {
            Some(s) => {
                let colour = if mine(e) { "#d55e00" } else { "#0072b2" };
                let _ = write!(o, r#"<rect x="{left}" y="{bar_y:.1}" width="{:.1}" height="14" fill="{colour}"><title>{}: score {}</title></rect>"#, (x(s.value) - left).max(1.0), escape(&name), escape(&s.describe()));
                if let (Some(l), Some(h)) = (s.low, s.high) {
                    let mid = bar_y + 7.0;
                    let _ = write!(o, r#"<line class="whisker" x1="{:.1}" x2="{:.1}" y1="{mid:.1}" y2="{mid:.1}"/><line class="whisker" x1="{0:.1}" x2="{0:.1}" y1="{2:.1}" y2="{3:.1}"/><line class="whisker" x1="{1:.1}" x2="{1:.1}" y1="{2:.1}" y2="{3:.1}"/>"#, x(l.max(0.0)), x(h), bar_y + 2.0, bar_y + 12.0);
                }
                let _ = write!(o, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, x(s.high.unwrap_or(s.value)) + 6.0, bar_y + 11.0, escape(&s.describe()));
            }
            None => {
                // Why: stopped at the bound says more than the score's own reason.
                let why = b.notes.iter().find(|n| n.starts_with("stopped")).or_else(|| b.notes.iter().find(|n| n.starts_with("no score"))).cloned().unwrap_or_else(|| "no score".into());
                let _ = write!(o, r##"<text x="{left}" y="{:.1}" fill="#8a4b00">no score: {}</text>"##, bar_y + 11.0, escape(why.trim_start_matches("no score: ")));
            }
        }
        o.push_str("</g>");
    }
    o.push_str("</svg>");
    o
}

/// One row per machine and backend: score and every shape's rates (means over repetitions).
fn table(group: &[&Entry], mine: &dyn Fn(&Entry) -> bool) -> String {
    let shapes = &group[0].file.suite.shapes;
    let mut o = String::from("<table data-testid=\"gallery-table\"><thead><tr><th>machine</th><th>backend</th><th>device</th><th>tuned</th><th class=\"n\">score [95%]</th>");
    for s in shapes {
        let _ = write!(o, "<th class=\"n\">{} prefill tok/s</th><th class=\"n\">{} decode tok/s</th>", escape(&s.name), escape(&s.name));
    }
    o.push_str("<th>measured</th></tr></thead><tbody>");
    for e in group {
        for b in &e.file.backends {
            let _ = write!(o, "<tr data-cpu=\"{}\" data-gpu=\"{}\"{}>", escape(&e.file.machine.cpu), escape(&gpu_kind(&e.file)), if mine(e) { " class=\"mine\"" } else { "" });
            let _ = write!(o, "<td>{}{}</td><td>{}</td><td>{}</td><td>{}</td>", escape(&e.label()), if mine(e) { "<span class=\"tag\">this machine</span>" } else { "" }, escape(&b.name), escape(&b.device), if b.tuned { "yes" } else { "no" });
            let _ = write!(o, "<td class=\"n\">{}</td>", b.score.as_ref().map_or("—".into(), |s| escape(&s.describe())));
            for s in shapes {
                let f = b.shapes.iter().find(|f| f.shape == s.name);
                let cell = |v: Option<&Vec<Option<f64>>>| v.and_then(|v| super::mean(v.iter().flatten().copied())).map_or("—".into(), label);
                let _ = write!(o, "<td class=\"n\">{}</td><td class=\"n\">{}</td>", cell(f.map(|f| &f.prefill_tps)), cell(f.map(|f| &f.decode_tps)));
            }
            let _ = write!(o, "<td>{}</td></tr>", utc(e.file.started_unix_ms));
        }
    }
    o.push_str("</tbody></table>");
    o
}

/// Prefill and decode rates by shape, one line per machine and backend.
fn shape_charts(group: &[&Entry]) -> Vec<Chart> {
    let shapes = &group[0].file.suite.shapes;
    let chart = |title: &str, y: &str, pick: &dyn Fn(&super::ShapeFigures) -> &Vec<Option<f64>>| Chart {
        title: title.into(),
        x_label: "shape".into(),
        y_label: y.into(),
        series: group
            .iter()
            .flat_map(|e| e.file.backends.iter().map(move |b| (e, b)))
            .map(|(e, b)| Series {
                label: format!("{} · {}", e.label(), b.name),
                points: shapes.iter().enumerate().filter_map(|(i, s)| Some((i as f64, super::mean(pick(b.shapes.iter().find(|f| f.shape == s.name)?).iter().flatten().copied())?))).collect(),
                ceiling: vec![],
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
        ceiling_note: String::new(),
        x_names: shapes.iter().map(|s| s.name.clone()).collect(),
    };
    [chart("Prefill by shape", "prompt tok/s (one request, median)", &|f| &f.prefill_tps), chart("Decode by shape", "decode tok/s (one request, median)", &|f| &f.decode_tps)].into_iter().filter(|c| !c.series.is_empty()).collect()
}
