//! One run as one self-contained HTML page (`lx report`): the machine, the model, the
//! ceilings, a chart for every setting the sweep varied and every point's figures. Charts
//! are inline SVG and the style is inline CSS: no script, nothing fetched, so the page opens
//! the same in any browser, mailed or offline.

pub mod chart;
pub mod handout;

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::printers::{column, column_cell, notes, repetitions_table, table_columns};
use crate::results::{PointResult, RunFile};
use crate::studies::fidelity;
use lx_client::traffic::Arrivals;

use chart::{escape, Chart, Series};

/// A setting a sweep can vary, drawn along a chart's x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Prompt tokens (after any depth).
    Prompt,
    Concurrency,
    /// Tokens in the context before the prompt.
    Depth,
    /// Open-loop arrivals per second.
    Rate,
}

impl Axis {
    fn value(self, p: &PointResult) -> Option<f64> {
        match self {
            Axis::Prompt => Some(f64::from(p.prompt_tokens.saturating_sub(p.traffic.depth))),
            Axis::Concurrency => Some(p.concurrency as f64),
            Axis::Depth => Some(f64::from(p.traffic.depth)),
            Axis::Rate => match p.traffic.arrivals {
                Arrivals::Poisson { rate } => Some(rate),
                _ => None,
            },
        }
    }

    fn name(self) -> &'static str {
        match self {
            Axis::Prompt => "prompt tokens",
            Axis::Concurrency => "concurrent requests",
            Axis::Depth => "context depth (tokens before the prompt)",
            Axis::Rate => "arrivals per second",
        }
    }
}

/// A figure a chart draws, with the ceiling that bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    TtftP50,
    PrefillP50,
    DecodeP50,
    Throughput,
}

impl Figure {
    fn value(self, p: &PointResult) -> Option<f64> {
        let d = match self {
            Figure::TtftP50 => &p.ttft_ms,
            Figure::PrefillP50 => &p.prefill_tps,
            Figure::DecodeP50 => &p.decode_tps,
            Figure::Throughput => return (p.requests > 0).then_some(p.throughput_tps),
        };
        (d.count > 0).then_some(d.p50)
    }

    fn ceiling(self, p: &PointResult) -> Option<f64> {
        let c = p.ceiling.as_ref()?;
        Some(match self {
            Figure::TtftP50 => c.least_ttft_ms,
            Figure::PrefillP50 => c.prefill_tps,
            Figure::DecodeP50 => c.decode_tps,
            Figure::Throughput => c.throughput_tps,
        })
    }

    /// Title, unit, and what its ceiling is.
    fn title(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Figure::TtftP50 => ("Time to first token, median", "ms", "the least possible TTFT: the prompt's prefill at this machine's limits"),
            Figure::PrefillP50 => ("Prefill rate, median", "tok/s", "the most prefill this machine allows"),
            Figure::DecodeP50 => ("Decode rate per request, median", "tok/s", "the most decode this machine allows per request"),
            Figure::Throughput => ("Throughput, all requests together", "output tok/s", "the most output this machine allows, all requests together"),
        }
    }
}

/// What each axis teaches: TTFT and prefill grow with the prompt; decode and throughput
/// trade against each other with concurrency; decode falls with depth; TTFT with arrivals.
const CHARTS: [(Axis, &[Figure]); 4] = [
    (Axis::Prompt, &[Figure::TtftP50, Figure::PrefillP50]),
    (Axis::Concurrency, &[Figure::DecodeP50, Figure::Throughput]),
    (Axis::Depth, &[Figure::DecodeP50]),
    (Axis::Rate, &[Figure::TtftP50]),
];

/// Everything that tells one curve from another along `axis`: the point's other settings.
fn series_label(p: &PointResult, axis: Axis) -> String {
    let mut parts = vec![p.backend.clone(), p.policy_label()];
    let prompt = p.prompt_tokens.saturating_sub(p.traffic.depth);
    if axis != Axis::Prompt {
        parts.push(match p.traffic.prompt_tokens_from {
            Some(from) => format!("pp{}..{prompt}", from.saturating_sub(p.traffic.depth)),
            None => format!("pp{prompt}"),
        });
    }
    parts.push(match p.traffic.max_tokens_from {
        Some(from) => format!("tg{from}..{}", p.max_tokens),
        None => format!("tg{}", p.max_tokens),
    });
    if axis != Axis::Concurrency {
        parts.push(format!("c{}", p.concurrency));
    }
    if axis != Axis::Depth && p.traffic.depth > 0 {
        parts.push(format!("depth {}", p.traffic.depth));
    }
    if axis != Axis::Rate {
        if let Arrivals::Poisson { rate } = p.traffic.arrivals {
            parts.push(format!("λ{rate}/s"));
        }
    }
    if p.traffic.prefix_tokens > 0 && p.traffic.depth == 0 {
        parts.push(format!("prefix {}{}", p.traffic.prefix_tokens, if p.traffic.prefix_cache { " cached" } else { "" }));
    }
    parts.join(" · ")
}

/// The charts worth drawing: one per figure of each axis the run varies (two or more
/// values in some series); a run of one setting gets none (its table says it all).
pub fn charts(points: &[PointResult]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (axis, figures) in CHARTS {
        for &figure in figures {
            // Series in first-seen order; repetitions of one setting are averaged.
            let mut order: Vec<String> = Vec::new();
            let mut by_series: BTreeMap<String, BTreeMap<u64, (Vec<f64>, Vec<f64>)>> = BTreeMap::new();
            for p in points {
                let (Some(x), Some(y)) = (axis.value(p), figure.value(p)) else { continue };
                let label = series_label(p, axis);
                if !by_series.contains_key(&label) {
                    order.push(label.clone());
                }
                let at = by_series.entry(label).or_default().entry(x.to_bits()).or_default();
                at.0.push(y);
                at.1.extend(figure.ceiling(p));
            }
            if !by_series.values().any(|xs| xs.len() > 1) {
                continue;
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let series = order
                .into_iter()
                .map(|label| {
                    let mut at: Vec<(f64, &(Vec<f64>, Vec<f64>))> = by_series[&label].iter().map(|(x, v)| (f64::from_bits(*x), v)).collect();
                    at.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let points = at.iter().map(|(x, v)| (*x, mean(&v.0))).collect();
                    let ceiling = at.iter().filter(|(_, v)| !v.1.is_empty()).map(|(x, v)| (*x, mean(&v.1))).collect();
                    Series { label, points, ceiling }
                })
                .collect();
            let (title, unit, ceiling) = figure.title();
            out.push(Chart { title: format!("{title} by {}", axis.name()), x_label: axis.name().into(), y_label: unit.into(), series, ceiling_note: ceiling.into(), x_names: Vec::new() });
        }
    }
    out
}

/// A Unix time in ms as a UTC date and time (`2026-12-02 03:14 UTC`).
pub(crate) fn utc(unix_ms: u64) -> String {
    lx_engine::date::UtcDate::from_unix(unix_ms / 1000).minutes()
}

pub(crate) const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:1100px;margin:2em auto;padding:0 1em}\
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ccc}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1.2em}dt{color:#555}dd{margin:0}\
table{border-collapse:collapse;font-size:13px;width:100%}th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#f5f5f5}\
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:1.5em}\
figure{margin:0}svg.chart{width:100%;height:auto;background:#fff}\
.title{font-size:14px;font-weight:600}.tick{font-size:11px;fill:#444}.label{font-size:12px;fill:#222}\
.grid{stroke:#e4e4e4}.axis{stroke:#444}.series{fill:none;stroke-width:2}.ceiling{fill:none;stroke-width:1.5;stroke-dasharray:6 4}\
.legend{list-style:none;padding:0;margin:.3em 0 0;font-size:12px;display:flex;flex-wrap:wrap;gap:.2em 1em}\
.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\
.dash{display:inline-block;width:18px;margin-right:4px;border-top:2px dashed #555;vertical-align:3px}\
.warn{color:#8a4b00}pre{background:#f5f5f5;padding:.6em;overflow-x:auto;font-size:12px}";

/// A markdown table (its header and rule, then its rows) as an HTML table, the columns the
/// rule aligns right right-aligned.
fn markdown_table_html(header: &[String; 2], rows: &[String]) -> String {
    let cells = |line: &str| -> Vec<String> { line.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect() };
    let numeric: Vec<bool> = cells(&header[1]).iter().map(|r| r.ends_with(':')).collect();
    let class = |i: usize| if numeric.get(i).copied().unwrap_or(false) { " class=\"n\"" } else { "" };
    let mut o = String::from("<table><thead><tr>");
    for (i, name) in cells(&header[0]).iter().enumerate() {
        let _ = write!(o, "<th{}>{}</th>", class(i), escape(name));
    }
    o.push_str("</tr></thead><tbody>");
    for line in rows {
        o.push_str("<tr>");
        for (i, cell) in cells(line).iter().enumerate() {
            let _ = write!(o, "<td{}>{}</td>", class(i), escape(cell));
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
    o
}

pub(crate) fn row(o: &mut String, term: &str, value: &str) {
    let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(value));
}

/// The page for `run`; `source` names the file it was made from.
pub fn html(run: &RunFile, source: &str) -> String {
    let m = &run.model.facts;
    let hw = &run.hardware;
    let model = m.name.clone().unwrap_or_else(|| m.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
    let backends: Vec<&str> = run.backends.iter().map(|b| b.name.as_str()).collect();
    let mut o = String::new();
    let title = format!("{model} on {} — {}", hw.cpu, backends.join(", "));
    let _ = write!(o, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>", escape(&title));
    let _ = write!(o, "<h1>{}</h1><p>Latency Explorer run of {}{}, {} points.</p>", escape(&title), utc(run.started_unix_ms), if run.stopped { ", stopped before it finished" } else { "" }, run.points.len());
    if let Some(note) = m.synthetic_note() {
        let _ = write!(o, "<p class=\"warn\">Model: {}</p>", escape(&note));
    }

    o.push_str("<h2>Machine</h2><dl>");
    row(&mut o, "CPU", &format!("{} ({} cores, {} threads)", hw.cpu, hw.physical_cores, hw.logical_cores));
    row(&mut o, "memory", &format!("{:.1} GiB", hw.memory_bytes as f64 / (1u64 << 30) as f64));
    row(&mut o, "system", &format!("{} {}", hw.os, hw.arch));
    row(&mut o, "CPU features", &hw.cpu_features.join(" "));
    row(&mut o, "GPUs", &if hw.gpus.is_empty() { "none found".to_string() } else { hw.gpus.join("; ") });
    row(&mut o, "build", &format!("lx {}{}", run.tool_version, if hw.build_features.is_empty() { String::new() } else { format!(" with {}", hw.build_features.join(", ")) }));
    for b in &run.backends {
        row(&mut o, &b.name, &format!("{} on {}, {} threads", b.version, b.device, b.threads));
    }
    o.push_str("</dl>");

    o.push_str("<h2>Model</h2><dl>");
    row(&mut o, "name", &model);
    row(&mut o, "architecture", &m.architecture);
    row(&mut o, "parameters", &format!("{:.1} M", m.parameter_count as f64 / 1e6));
    row(&mut o, "weights", &format!("{}, {:.1} MB", m.quantization.name, m.file_size as f64 / 1e6));
    if let Some(sha) = &run.model.sha256 {
        row(&mut o, "sha256", sha);
    }
    o.push_str("</dl>");

    o.push_str("<h2>Ceilings</h2>");
    match (&run.limits, &run.model_cost) {
        (Some(probe), Some(cost)) => {
            o.push_str("<dl>");
            for l in &probe.devices {
                row(&mut o, &l.device, &format!("memory read {:.1} GB/s, compute {:.0} GFLOP/s ({})", l.memory_bytes_per_s / 1e9, l.compute_flops_per_s / 1e9, l.compute_method));
            }
            row(&mut o, "measured", &format!("{} in {:.1} s", utc(probe.measured_unix_ms), probe.seconds));
            if let Some(note) = probe.busy_note() {
                row(&mut o, "warning", &note);
            }
            row(&mut o, "one decode step reads", &format!("{:.1} MB of weights, plus the KV cache at its position", cost.weight_bytes_per_step as f64 / 1e6));
            row(&mut o, "one prompt token costs", &format!("{:.2} GFLOP", cost.block_flops_per_token as f64 / 1e9));
            o.push_str("</dl><p>Decode reads every weight once per step, so one request's decode is bound by memory bandwidth; a prompt does many tokens' arithmetic per weight read, so prefill is bound by compute. A measurement near its ceiling has little left to gain on this machine.</p>");
        }
        _ => o.push_str("<p>Not measured for this run (a server target, <code>--no-ceilings</code>, or a file from before probes).</p>"),
    }

    let charts = charts(&run.points);
    if !charts.is_empty() {
        o.push_str("<h2>Charts</h2><div class=\"charts\">");
        for c in &charts {
            let _ = write!(o, "<figure>{}{}</figure>", c.svg(), c.legend());
        }
        o.push_str("</div>");
    }

    o.push_str("<h2>Every point</h2><table><thead><tr>");
    let columns = table_columns(run);
    let class = |i: usize| if column(i).1 { " class=\"n\"" } else { "" };
    for &i in &columns {
        let _ = write!(o, "<th{}>{}</th>", class(i), escape(column(i).0));
    }
    o.push_str("</tr></thead><tbody>");
    for p in &run.points {
        o.push_str("<tr>");
        for &i in &columns {
            let _ = write!(o, "<td{}>{}</td>", class(i), escape(&column_cell(i, p)));
        }
        o.push_str("</tr>");
        for e in &p.error_messages {
            let _ = write!(o, "<tr><td colspan=\"{}\" class=\"warn\">{} {}: {}</td></tr>", columns.len(), escape(&p.backend), escape(&p.test_name()), escape(e));
        }
    }
    o.push_str("</tbody></table>");
    if let Some(f) = &run.fidelity {
        o.push_str("<h2>Fidelity</h2><p>Each backend and setting of the points scored the same text teacher-forced before the points were measured, against the reference below: how far its next-token distributions are from the reference's (KL divergence, nats: 0 is the same model), how often both put the same token first, and the text's perplexity under it.</p>");
        for table in fidelity::TABLES {
            o.push_str(&markdown_table_html(&fidelity::header(table), &f.rows(table)));
        }
    }
    let repeated = repetitions_table(&run.points);
    if !repeated.is_empty() {
        let _ = write!(o, "<pre>{}</pre>", escape(repeated.join("\n").trim()));
    }
    let notes = notes(run);
    if !notes.is_empty() {
        o.push_str("<ul>");
        for n in notes {
            let _ = write!(o, "<li{}>{}</li>", if n.starts_with("warning") { " class=\"warn\"" } else { "" }, escape(&n));
        }
        o.push_str("</ul>");
    }
    let _ = write!(o, "<h2>How it was measured</h2><pre>{}</pre><p>Made by <code>lx report</code> from {}.</p></body></html>\n", escape(&run.command.join(" ")), escape(source));
    o
}

#[cfg(test)]
mod tests;
