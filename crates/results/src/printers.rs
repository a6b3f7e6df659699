//! Tables of results, printed as each point finishes: markdown (the default, like
//! llama-bench), CSV, JSON (the whole run file at the end) and JSON lines (one point per line).

use std::io::Write;

use crate::results::{PointResult, RunFile};
use lx_client::stats::Distribution;

/// Output formats of `lx sweep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Csv,
    Json,
    Jsonl,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "md" | "markdown" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "jsonl" => Ok(Format::Jsonl),
            _ => Err(format!("unknown format '{s}' (expected md, csv, json or jsonl)")),
        }
    }
}

/// Prints a run as it happens. Each method flushes, so rows appear as points finish.
pub trait Printer {
    fn header(&mut self, _run: &RunFile) -> std::io::Result<()> {
        Ok(())
    }
    fn point(&mut self, point: &PointResult) -> std::io::Result<()>;
    fn footer(&mut self, _run: &RunFile) -> std::io::Result<()> {
        Ok(())
    }
}

/// Make the printer for `format`, writing to `out`.
pub fn printer<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Printer + 'a> {
    match format {
        Format::Markdown => Box::new(Markdown { out, started: false, columns: (0..MD_COLUMNS.len()).collect(), full: true }),
        Format::Csv => Box::new(Csv { out, started: false }),
        Format::Json => Box::new(Json { out }),
        Format::Jsonl => Box::new(Jsonl { out }),
    }
}

/// A statistic of `d`, or a dash when `d` has no samples (a server reports no prefill).
fn num(d: &Distribution, value: f64, decimals: usize) -> String {
    if d.count == 0 {
        "-".into()
    } else {
        format!("{value:.decimals$}")
    }
}

/// A fraction as a percentage, or a dash when there is none.
fn percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |f| format!("{:.0}", f * 100.0))
}

/// The markdown table with only `columns` (see [`markdown_columns`]), and no lines under it.
pub fn markdown_with_columns<'a>(out: Box<dyn Write + 'a>, columns: Vec<usize>) -> Box<dyn Printer + 'a> {
    Box::new(Markdown { out, started: false, columns, full: false })
}

struct Markdown<'a> {
    out: Box<dyn Write + 'a>,
    started: bool,
    /// Indices into [`MD_COLUMNS`] then [`EXTRA_COLUMNS`]; a sweep's own table has
    /// [`table_columns`].
    columns: Vec<usize>,
    /// A sweep's own table: its columns are the run's, and the lines under it follow it.
    full: bool,
}

/// A column's key: its name in lower case with every run of other characters as one `_`
/// (`TTFT p50 ms` → `ttft_p50_ms`, `decode tok/s p50` → `decode_tok_s_p50`).
fn column_key(name: &str) -> String {
    let mut key = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(c.to_ascii_lowercase());
        } else if !key.is_empty() && !key.ends_with('_') {
            key.push('_');
        }
    }
    key.trim_end_matches('_').to_string()
}

/// The markdown columns a comma-separated list of keys (or names) picks, in its order: any
/// of [`MD_COLUMNS`], and of [`EXTRA_COLUMNS`] (numbered after them).
pub fn markdown_columns(list: &str) -> Result<Vec<usize>, String> {
    let all = || MD_COLUMNS.iter().chain(&EXTRA_COLUMNS);
    list.split(',')
        .map(|want| {
            let want = column_key(want);
            all().position(|(name, _)| column_key(name) == want).ok_or_else(|| {
                let keys: Vec<String> = all().map(|(n, _)| column_key(n)).collect();
                format!("no column '{want}' (the columns: {})", keys.join(", "))
            })
        })
        .collect()
}

/// Columns only `--columns` asks for, or only some runs have: the fidelity columns are in
/// the table of a run that measured fidelity ([`table_columns`]).
pub const EXTRA_COLUMNS: [(&str, bool); 3] = [("full decode pass ms p50", true), ("mean KL nats", true), ("top-1 agreement %", true)];

/// The columns of a run's own table (`lx sweep`'s, `lx show`'s, the report's): every one
/// of [`MD_COLUMNS`], and the fidelity columns where the run measured fidelity.
pub fn table_columns(run: &RunFile) -> Vec<usize> {
    let mut columns: Vec<usize> = (0..MD_COLUMNS.len()).collect();
    if run.fidelity.is_some() {
        columns.extend([MD_COLUMNS.len() + 1, MD_COLUMNS.len() + 2]);
    }
    columns
}

/// Point `p`'s cell in column `i` (of [`MD_COLUMNS`] then [`EXTRA_COLUMNS`]).
pub fn column_cell(i: usize, p: &PointResult) -> String {
    match cells(p).get(i) {
        Some(cell) => cell.clone(),
        None => extra_cells(p)[i - MD_COLUMNS.len()].clone(),
    }
}

/// A column's name and whether it holds numbers, by its index in [`MD_COLUMNS`] then
/// [`EXTRA_COLUMNS`].
pub fn column(i: usize) -> (&'static str, bool) {
    MD_COLUMNS.get(i).copied().unwrap_or_else(|| EXTRA_COLUMNS[i - MD_COLUMNS.len()])
}

/// The cells of [`EXTRA_COLUMNS`].
fn extra_cells(p: &PointResult) -> [String; 3] {
    let f = p.fidelity.map(|m| m.fidelity);
    [
        full_decode_pass_ms(p).map_or("-".into(), |ms| format!("{ms:.2}")),
        f.map_or("-".into(), |f| crate::studies::fidelity::kl(f.mean_kl)),
        f.map_or("-".into(), |f| format!("{:.2}", 100.0 * f.top1_agreement)),
    ]
}

/// The median wall time of the passes in which every one of the point's `concurrency`
/// sequences decoded (exactly that many decode tokens, no prompt tokens); none when no pass
/// did (a serial point, a server's).
pub fn full_decode_pass_ms(p: &PointResult) -> Option<f64> {
    let ms: Vec<f64> = p.steps.iter().filter(|s| s.decode_tokens as usize == p.concurrency && s.prefill_tokens == 0).map(|s| s.end_ms - s.start_ms).collect();
    Some(crate::studies::numbers::median(&ms)).filter(|m| m.is_finite())
}

/// Every column of the markdown table (and the report's table): name, and whether it holds
/// numbers (right-aligned).
pub const MD_COLUMNS: [(&str, bool); 20] = [
    ("backend", false),
    ("policy", false),
    ("test", false),
    ("TTFT p50 ms", true),
    ("TTFT p95 ms", true),
    ("ITL p50 ms", true),
    ("ITL p99 ms", true),
    ("decode tok/s p50", true),
    ("prefill tok/s p50", true),
    ("throughput tok/s", true),
    ("decode % of ceiling", true),
    ("prefill % of ceiling", true),
    ("req/min", true),
    ("SLO met %", true),
    ("goodput req/min", true),
    ("peak RSS MiB", true),
    ("power W", true),
    ("J/token", true),
    ("clock MHz", true),
    ("errors", true),
];

/// One point's cells, one per [`MD_COLUMNS`] entry.
pub fn cells(p: &PointResult) -> [String; 20] {
    let sensed = |f: &dyn Fn(&lx_machine::sensors::SensorSummary) -> Option<String>| p.sensors.as_ref().and_then(f).unwrap_or_else(|| "-".into());
    [
        p.backend.clone(),
        p.policy_label(),
        p.row_name(),
        num(&p.ttft_ms, p.ttft_ms.p50, 1),
        num(&p.ttft_ms, p.ttft_ms.p95, 1),
        num(&p.itl_ms, p.itl_ms.p50, 2),
        num(&p.itl_ms, p.itl_ms.p99, 2),
        num(&p.decode_tps, p.decode_tps.p50, 2),
        num(&p.prefill_tps, p.prefill_tps.p50, 1),
        format!("{:.2}", p.throughput_tps),
        of_ceiling(p.decode_tps.p50, p.decode_tps.count, p.ceiling.as_ref().map(|c| (c.decode_tps, c.decode_bound))),
        of_ceiling(p.prefill_tps.p50, p.prefill_tps.count, p.ceiling.as_ref().map(|c| (c.prefill_tps, c.prefill_bound))),
        format!("{:.1}", p.requests_per_min),
        percent(p.slo_met),
        p.goodput_rpm.map_or("-".into(), |g| format!("{g:.1}")),
        p.worker_peak_rss_mib.map_or("-".into(), |m| format!("{m:.0}")),
        sensed(&|s| s.power_w.map(|w| format!("{w:.1}"))),
        sensed(&|s| s.joules_per_token.map(|j| format!("{j:.3}"))),
        sensed(&|s| s.clock_mhz().map(|m| format!("{m:.0}"))),
        p.errors.to_string(),
    ]
}

/// What the table needs said under it: where each backend ran, the limits the ceilings come
/// from, a synthetic model, and every point's warnings.
pub fn notes(run: &RunFile) -> Vec<String> {
    let mut lines: Vec<String> = run.preset.iter().map(|p| format!("preset {} ({}; {}-bound): {}", p.name, p.source, p.bound.name(), p.objectives.describe())).collect();
    lines.extend(run.decisions.lines());
    lines.extend(device_lines(&run.backends));
    lines.extend(limits_lines(run));
    lines.extend(sensor_lines(&run.points));
    lines.extend(run.fidelity.iter().flat_map(|f| f.notes()));
    lines.extend(run.model.facts.synthetic_note().map(|note| format!("model: {note}")));
    for p in &run.points {
        lines.extend(p.warnings.iter().map(|w| format!("warning: {} {}: {w}", p.backend, p.row_name())));
    }
    lines
}

/// Under the table: what the power, energy and clock columns were read from, what could not
/// be read here, what reading cost, and every point that throttled.
fn sensor_lines(points: &[PointResult]) -> Vec<String> {
    let sensed: Vec<&lx_machine::sensors::SensorSummary> = points.iter().filter_map(|p| p.sensors.as_ref()).collect();
    let Some(first) = sensed.first() else { return Vec::new() };
    let cost = sensed.iter().map(|s| s.sampler_cpu_share).fold(0.0, f64::max);
    let mut lines = vec![format!(
        "sensors, read every {} ms (at most {:.2}% of one core): {}",
        lx_machine::sensors::SAMPLE_EVERY.as_millis(),
        cost * 100.0,
        if first.sources.is_empty() { "none".to_string() } else { first.sources.join("; ") }
    )];
    if let Some(of) = sensed.iter().find(|s| !s.power_of.is_empty()).map(|s| s.power_of.join(" + ")) {
        lines.push(format!("power W and J/token count {of} only; J/token is the window's energy ÷ its output tokens"));
    }
    lines.extend(first.not_available.iter().map(|m| format!("not available here: {m}")));
    for p in points {
        for t in p.sensors.iter().flat_map(|s| &s.throttling) {
            lines.push(format!("warning: {} {}: throttling: {t}", p.backend, p.row_name()));
        }
    }
    lines
}

impl Printer for Markdown<'_> {
    fn point(&mut self, p: &PointResult) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            let names: Vec<&str> = self.columns.iter().map(|&c| column(c).0).collect();
            let rule: Vec<&str> = self.columns.iter().map(|&c| if column(c).1 { "---:" } else { "---" }).collect();
            writeln!(self.out, "| {} |", names.join(" | "))?;
            writeln!(self.out, "| {} |", rule.join(" | "))?;
        }
        let cells: Vec<String> = self.columns.iter().map(|&c| column_cell(c, p)).collect();
        writeln!(self.out, "| {} |", cells.join(" | "))?;
        for e in &p.error_messages {
            writeln!(self.out, "|  | error: {} |", e.replace('|', "/"))?;
        }
        self.out.flush()
    }

    fn header(&mut self, run: &RunFile) -> std::io::Result<()> {
        if self.full {
            self.columns = table_columns(run);
        }
        Ok(())
    }

    fn footer(&mut self, run: &RunFile) -> std::io::Result<()> {
        if !self.full {
            return self.out.flush();
        }
        for line in repetitions_table(&run.points) {
            writeln!(self.out, "{line}")?;
        }
        let spec = crate::speculation::speculation_table(&run.points);
        if !spec.is_empty() {
            writeln!(self.out, "\nSpeculative decoding: drafted tokens the target accepted, and what each pass yielded\n")?;
            for line in spec {
                writeln!(self.out, "{line}")?;
            }
        }
        let lines = notes(run);
        if self.started && !lines.is_empty() {
            writeln!(self.out)?;
            for line in lines {
                writeln!(self.out, "{line}")?;
            }
        }
        self.out.flush()
    }
}

/// Under the table, when the sweep repeated its points: each point's figures across its
/// repetitions (see [`crate::repeats`]); nothing when no point was repeated.
pub fn repetitions_table(points: &[PointResult]) -> Vec<String> {
    let repeated = crate::repeats::summarise(points);
    if repeated.is_empty() {
        return Vec::new();
    }
    let figures = crate::compare::FIGURES;
    let mut lines = vec![
        String::new(),
        "Across repetitions: mean ± standard deviation [95% interval of the mean]".into(),
        String::new(),
        format!("| backend | policy | test | repetitions | {} |", figures.join(" | ")),
        format!("| --- | --- | --- | ---: |{}", " ---: |".repeat(figures.len())),
    ];
    for r in &repeated {
        let cells: Vec<String> = r.figures.iter().zip([1, 1, 2, 2]).map(|(f, d)| f.map_or("-".into(), |f| f.describe(d))).collect();
        lines.push(format!("| {} | {} | {} | {} | {} |", r.backend, r.policy, r.test, r.repetitions, cells.join(" | ")));
    }
    lines
}

/// A measured median as a percentage of its ceiling, with the limit the ceiling comes from:
/// `61% memory`. A dash without samples or without a ceiling.
fn of_ceiling(p50: f64, samples: u64, ceiling: Option<(f64, lx_machine::roofline::Bound)>) -> String {
    match ceiling {
        Some((most, bound)) if samples > 0 && most > 0.0 => format!("{:.0}% {bound}", 100.0 * p50 / most),
        _ => "-".into(),
    }
}

/// Under the table: the limits the ceilings were computed from.
fn limits_lines(run: &RunFile) -> Vec<String> {
    let Some(probe) = &run.limits else { return Vec::new() };
    let mut lines: Vec<String> = probe
        .devices
        .iter()
        .map(|l| {
            format!(
                "ceilings from {}: memory read {:.1} GB/s, compute {:.0} GFLOP/s ({})",
                l.device,
                l.memory_bytes_per_s / 1e9,
                l.compute_flops_per_s / 1e9,
                l.compute_method
            )
        })
        .collect();
    lines.extend(probe.unmeasured.iter().map(|why| format!("no ceilings for {why}")));
    lines.extend(probe.busy_note().map(|note| format!("warning: {note}")));
    lines
}

/// Under the table: the device each backend ran on, and a warning for any that could have
/// used a GPU but ran on the CPU, so a CPU figure is never read as a GPU figure.
fn device_lines(backends: &[lx_engine::backend::BackendInfo]) -> Vec<String> {
    let mut lines = Vec::new();
    for b in backends {
        lines.push(format!("{} ran on {}", b.name, b.device));
        if let Some(why) = &b.cpu_fallback {
            lines.push(format!("warning: {why}"));
        }
    }
    lines
}

struct Csv<'a> {
    out: Box<dyn Write + 'a>,
    started: bool,
}

const DISTRIBUTIONS: [&str; 6] = ["ttft_ms", "queue_ms", "itl_ms", "e2e_ms", "decode_tps", "prefill_tps"];
const STATS: [&str; 7] = ["p50", "p90", "p95", "p99", "mean", "min", "max"];

fn distributions(p: &PointResult) -> [&Distribution; 6] {
    [&p.ttft_ms, &p.queue_ms, &p.itl_ms, &p.e2e_ms, &p.decode_tps, &p.prefill_tps]
}

impl Printer for Csv<'_> {
    fn point(&mut self, p: &PointResult) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            let mut cols: Vec<String> = ["backend", "policy", "prompt_tokens", "concurrency", "max_tokens", "requests", "errors"].map(String::from).to_vec();
            for d in DISTRIBUTIONS {
                cols.extend(STATS.iter().map(|s| format!("{d}_{s}")));
            }
            // New columns go last, so readers of the older layout keep working.
            cols.extend(["throughput_tps", "requests_per_min", "window_s", "stopped"].map(String::from));
            cols.extend(["arrivals", "rate", "prompt_tokens_from", "max_tokens_from", "prefix_tokens", "prefix_cache", "slo_ttft_ms", "slo_decode_tps", "slo_met", "goodput_rpm"].map(String::from));
            cols.extend(["worker_peak_rss_mib", "repetition"].map(String::from));
            cols.extend(["power_w", "energy_j", "joules_per_token", "tokens_per_s_per_w", "cpu_mhz", "gpu_mhz", "throttling"].map(String::from));
            cols.extend(["fidelity_against", "mean_kl", "p99_kl", "top1_agreement", "perplexity"].map(String::from));
            writeln!(self.out, "{}", cols.join(","))?;
        }
        let mut vals = vec![
            p.backend.clone(),
            p.policy_label(),
            p.prompt_tokens.to_string(),
            p.concurrency.to_string(),
            p.max_tokens.to_string(),
            p.requests.to_string(),
            p.errors.to_string(),
        ];
        for d in distributions(p) {
            vals.extend([d.p50, d.p90, d.p95, d.p99, d.mean, d.min, d.max].map(|v| format!("{v:.4}")));
        }
        vals.extend([format!("{:.4}", p.throughput_tps), format!("{:.4}", p.requests_per_min), format!("{:.4}", p.window_s), p.stopped.to_string()]);
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
        let arrivals = match &p.traffic.arrivals {
            lx_client::traffic::Arrivals::Closed => "closed",
            lx_client::traffic::Arrivals::Poisson { .. } => "poisson",
            lx_client::traffic::Arrivals::Script { .. } => "script",
        };
        vals.extend([
            arrivals.to_string(),
            opt(p.rate()),
            p.traffic.prompt_tokens_from.map_or(String::new(), |v| v.to_string()),
            p.traffic.max_tokens_from.map_or(String::new(), |v| v.to_string()),
            p.traffic.prefix_tokens.to_string(),
            p.traffic.prefix_cache.to_string(),
            opt(p.slo.and_then(|s| s.ttft_ms)),
            opt(p.slo.and_then(|s| s.decode_tps)),
            opt(p.slo_met),
            opt(p.goodput_rpm),
            opt(p.worker_peak_rss_mib),
            p.repetition.map_or(String::new(), |r| r.to_string()),
        ]);
        let s = p.sensors.as_ref();
        vals.extend([
            opt(s.and_then(|s| s.power_w)),
            opt(s.and_then(|s| s.energy_j)),
            opt(s.and_then(|s| s.joules_per_token)),
            opt(s.and_then(|s| s.tokens_per_s_per_w)),
            opt(s.and_then(|s| s.cpu_mhz).map(|c| c.mean)),
            opt(s.and_then(|s| s.gpus.iter().find_map(|g| g.clock_mhz)).map(|c| c.mean)),
            s.map_or(0, |s| s.throttling.len()).to_string(),
        ]);
        let f = p.fidelity.as_ref();
        let against = f.map_or("", |m| m.against.label());
        let kl = |x: f64| format!("{x:.6e}");
        vals.extend([
            against.to_string(),
            f.map_or(String::new(), |m| kl(m.fidelity.mean_kl)),
            f.map_or(String::new(), |m| kl(m.fidelity.p99_kl)),
            opt(f.map(|m| m.fidelity.top1_agreement)),
            opt(f.and_then(|m| m.fidelity.perplexity)),
        ]);
        writeln!(self.out, "{}", vals.join(","))?;
        self.out.flush()
    }
}

struct Json<'a> {
    out: Box<dyn Write + 'a>,
}

impl Printer for Json<'_> {
    fn point(&mut self, _p: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
    fn footer(&mut self, run: &RunFile) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, run)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

struct Jsonl<'a> {
    out: Box<dyn Write + 'a>,
}

impl Printer for Jsonl<'_> {
    fn point(&mut self, p: &PointResult) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, p)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_client::traffic::{Arrivals, Traffic, PointRun, PointSpec};
    use crate::results::Slo;
    use lx_engine::scheduler::Policy;
    use lx_client::stats::Distribution;

    fn point() -> PointResult {
        let spec = PointSpec { prompt_tokens: 512, max_tokens: 32, concurrency: 4, requests: 0, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let traffic = Traffic { arrivals: Arrivals::Poisson { rate: 2.0 }, prompt_tokens_from: Some(64), prefix_tokens: 48, prefix_cache: true, ..Default::default() };
        let mut p = PointResult::from_run("llama", Policy::Chunked, &spec, PointRun::default()).with_traffic(&traffic);
        p.judge(Slo { ttft_ms: Some(1000.0), decode_tps: Some(4.5) });
        p
    }

    fn print(format: Format, p: &PointResult) -> String {
        let mut buf = Vec::new();
        {
            let mut pr = printer(format, Box::new(&mut buf));
            pr.point(p).unwrap();
        }
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn a_backend_that_fell_back_to_the_cpu_is_flagged_under_the_table() {
        let caps = lx_engine::backend::Capabilities { mixed_position_batches: true, max_batch_tokens: 512, slots: 1, ctx_per_slot: 512, prefix_copy: true };
        let info = |name: &str, device: &str, fallback: Option<&str>| lx_engine::backend::BackendInfo {
            name: name.into(),
            version: "test".into(),
            device: device.into(),
            cpu_fallback: fallback.map(String::from),
            threads: 2,
            capabilities: caps.clone(),
            ..Default::default()
        };
        let lines = device_lines(&[
            info("llama", "CPU (2 threads): all 19 layers", Some("llama.cpp ran on the CPU: 0 of 19 layers offloaded to CUDA0 (--gpu-layers 0)")),
            info("candle", "CUDA:0", None),
        ]);
        assert_eq!(
            lines,
            [
                "llama ran on CPU (2 threads): all 19 layers",
                "warning: llama.cpp ran on the CPU: 0 of 19 layers offloaded to CUDA0 (--gpu-layers 0)",
                "candle ran on CUDA:0",
            ]
        );
    }

    #[test]
    fn columns_are_picked_by_key_or_name_in_the_order_given() {
        assert_eq!(column_key("decode tok/s p50"), "decode_tok_s_p50");
        assert_eq!(column_key("SLO met %"), "slo_met");
        assert_eq!(markdown_columns("test,TTFT p50 ms,decode_tok_s_p50").unwrap(), [2, 3, 7]);
        assert!(markdown_columns("backend,nope").unwrap_err().contains("no column 'nope'"));
        let mut buf = Vec::new();
        {
            let mut pr = markdown_with_columns(Box::new(&mut buf), markdown_columns("test,backend,errors").unwrap());
            pr.point(&point()).unwrap();
        }
        let md = String::from_utf8(buf).unwrap();
        assert_eq!(md, "| test | backend | errors |\n| --- | --- | ---: |\n| pp64..512+tg32 @ c4 λ2/s prefix48 cached | llama | 0 |\n");
    }

    #[test]
    fn the_full_decode_pass_column_is_the_median_pass_in_which_every_sequence_decoded() {
        let step = |prefill_tokens: u32, decode_tokens: u32, ms: f64| lx_client::records::StepRecord { step: 0, seqs: 4, prefill_tokens, decode_tokens, draft_tokens: 0, start_ms: 100.0, end_ms: 100.0 + ms, compute_ms: None };
        let mut p = point();
        // Passes of 4 decode tokens (the point's concurrency) count; a pass with prompt
        // tokens in it, or fewer sequences decoding, does not.
        p.steps = vec![step(0, 4, 40.0), step(64, 4, 900.0), step(0, 3, 30.0), step(0, 4, 44.0), step(0, 4, 41.0), step(0, 4, 90.0)];
        assert_eq!(full_decode_pass_ms(&p), Some(42.5));
        assert!(markdown_columns("backend").unwrap().len() == 1 && !MD_COLUMNS.iter().any(|(n, _)| n.contains("pass")), "a sweep's own table leaves it out");
        let mut buf = Vec::new();
        {
            let mut pr = markdown_with_columns(Box::new(&mut buf), markdown_columns("policy,full_decode_pass_ms_p50").unwrap());
            pr.point(&p).unwrap();
            p.steps.clear();
            pr.point(&p).unwrap();
        }
        assert_eq!(String::from_utf8(buf).unwrap(), "| policy | full decode pass ms p50 |\n| --- | ---: |\n| chunked | 42.50 |\n| chunked | - |\n");
    }

    #[test]
    fn names_say_rate_range_and_prefix() {
        assert_eq!(point().test_name(), "pp64..512+tg32 @ c4 λ2/s prefix48 cached");
        // At a depth the name gives the prompt proper, as llama-bench's `pp64 @ d4096` does.
        let mut p = point();
        (p.prompt_tokens, p.traffic.prompt_tokens_from, p.traffic.depth, p.traffic.prefix_tokens) = (4096 + 64, Some(4096 + 16), 4096, 4096);
        assert_eq!(&p.test_name(), "pp16..64+tg32 @ c4 d4096 λ2/s");
    }

    #[test]
    fn every_format_carries_goodput() {
        let p = point();
        let md = print(Format::Markdown, &p);
        assert!(md.contains("SLO met %") && md.contains("goodput req/min"), "{md}");
        let csv = print(Format::Csv, &p);
        let lines: Vec<&str> = csv.lines().collect();
        let head: Vec<&str> = lines[0].split(',').collect();
        let row: Vec<&str> = lines[1].split(',').collect();
        assert_eq!(head.len(), row.len());
        let col = |name: &str| row[head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"))];
        assert_eq!((col("arrivals"), col("rate"), col("slo_ttft_ms"), col("goodput_rpm")), ("poisson", "2.0000", "1000.0000", "0.0000"));
        let jsonl = print(Format::Jsonl, &p);
        let v: serde_json::Value = serde_json::from_str(jsonl.trim()).unwrap();
        assert_eq!(v["goodput_rpm"], 0.0);
        assert_eq!(v["slo"]["decode_tps"], 4.5);
    }

    #[test]
    fn repeated_points_are_numbered_and_summarised_under_the_table() {
        let rep = |r: u32, ttft: f64, throughput: f64| {
            let mut p = point();
            p.repetition = Some(r);
            p.requests = 4;
            p.ttft_ms = Distribution::of([ttft]);
            p.throughput_tps = throughput;
            p
        };
        let points = [rep(1, 100.0, 10.0), rep(2, 120.0, 12.0)];
        let md = print(Format::Markdown, &points[1]);
        assert!(md.contains("| pp64..512+tg32 @ c4 λ2/s prefix48 cached #2 |"), "{md}");
        // Throughput 10 and 12: mean 11, sd 1.41, interval ± 12.706 · 1.414 / √2 = ± 12.71;
        // TTFT 100 and 120 likewise (to the histogram's 3 significant digits).
        let table = repetitions_table(&points);
        let summary = table.iter().find(|l| l.starts_with("| llama | chunked | pp64..512+tg32 @ c4 λ2/s prefix48 cached | 2 |")).unwrap_or_else(|| panic!("{table:?}"));
        assert!(summary.ends_with("| - | - | 11.00 ± 1.41 [-1.71, 23.71] |"), "{summary}");
        let ttft = crate::repeats::summarise(&points)[0].figures[0].unwrap();
        assert!((ttft.mean - 110.0).abs() < 0.2 && (ttft.sd - 14.14).abs() < 0.2 && ttft.n == 2, "{ttft:?}");
        assert!(repetitions_table(&[point()]).is_empty());
        let csv = print(Format::Csv, &points[1]);
        let (head, row): (Vec<&str>, Vec<&str>) = (csv.lines().next().unwrap().split(',').collect(), csv.lines().nth(1).unwrap().split(',').collect());
        assert_eq!(row[head.iter().position(|h| *h == "repetition").unwrap()], "2", "{csv}");
    }

    #[test]
    fn sensor_figures_fill_their_columns_and_say_what_they_count() {
        let empty = tempfile::tempdir().unwrap();
        let readings = (0..=8)
            .map(|i| lx_machine::sensors::Reading { t_ms: i as f64 * 250.0, cpu_mhz: Some(3000.0 - 100.0 * i as f64), cpu_energy_j: Some(0.045 * i as f64 * 250.0), cpu_temp_c: None, gpus: vec![] })
            .collect();
        let trace = lx_machine::sensors::Trace {
            readings,
            cost: std::time::Duration::from_micros(400),
            span: std::time::Duration::from_secs(2),
            sensors: lx_machine::sensors::Sensors::open_at(empty.path(), empty.path(), Err("no NVIDIA driver library here".into())),
        };
        let mut p = point();
        p.traffic.arrivals = Arrivals::Closed;
        p.sensors = Some(lx_machine::sensors::SensorSummary::of(&trace, 0.0, 2000.0, 450, true));
        let row = cells(&p);
        let col = |name: &str| row[MD_COLUMNS.iter().position(|c| c.0 == name).unwrap()].clone();
        // 45 W for 2 s over 450 tokens: 0.2 J a token; the clock's mean over the window.
        assert_eq!((col("power W"), col("J/token"), col("clock MHz")), ("45.0".into(), "0.200".into(), "2600".into()));
        let lines = sensor_lines(std::slice::from_ref(&p));
        let find = |start: &str| lines.iter().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no '{start}' in {lines:?}")).clone();
        assert_eq!(find("sensors, read every"), "sensors, read every 250 ms (at most 0.02% of one core): none");
        assert_eq!(find("power W"), "power W and J/token count CPU packages only; J/token is the window's energy ÷ its output tokens");
        assert!(find("not available here: CPU clock: ").len() > 30 && find("not available here: GPU power and clocks: ").ends_with("no NVIDIA driver library here"));
        assert_eq!(find("warning: llama"), "warning: llama pp64..512+tg32 @ c4 prefix48 cached: throttling: CPU clock fell from 2950 to 2250 MHz (-24%) while the load was steady");
        let csv = print(Format::Csv, &p);
        let (head, row): (Vec<&str>, Vec<&str>) = (csv.lines().next().unwrap().split(',').collect(), csv.lines().nth(1).unwrap().split(',').collect());
        let col = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
        assert_eq!((col("power_w"), col("joules_per_token"), col("tokens_per_s_per_w"), col("gpu_mhz"), col("throttling")), ("45.0000", "0.2000", "5.0000", "", "1"));
        // No sensors (a server): dashes, and nothing said.
        assert_eq!(cells(&point())[MD_COLUMNS.len() - 2], "-");
        assert!(sensor_lines(&[point()]).is_empty());
    }
}
