//! Tables of results, printed as each point finishes: markdown (the default, like
//! llama-bench), CSV, JSON (the whole run file at the end) and JSON lines (one point per line).

use std::io::Write;

use crate::results::{PointResult, RunFile};
use crate::stats::Distribution;

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
        Format::Markdown => Box::new(Markdown { out, started: false }),
        Format::Csv => Box::new(Csv { out, started: false }),
        Format::Json => Box::new(Json { out }),
        Format::Jsonl => Box::new(Jsonl { out }),
    }
}

/// llama-bench style test name: prompt, generation and concurrency.
pub fn test_name(p: &PointResult) -> String {
    format!("pp{}+tg{} @ c{}", p.prompt_tokens, p.max_tokens, p.concurrency)
}

struct Markdown<'a> {
    out: Box<dyn Write + 'a>,
    started: bool,
}

const MD_COLUMNS: [(&str, bool); 12] = [
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
    ("req/min", true),
    ("errors", true),
];

impl Printer for Markdown<'_> {
    fn point(&mut self, p: &PointResult) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            let names: Vec<&str> = MD_COLUMNS.iter().map(|(n, _)| *n).collect();
            let rule: Vec<&str> = MD_COLUMNS.iter().map(|(_, num)| if *num { "---:" } else { "---" }).collect();
            writeln!(self.out, "| {} |", names.join(" | "))?;
            writeln!(self.out, "| {} |", rule.join(" | "))?;
        }
        let cells = [
            p.backend.clone(),
            p.policy.to_string(),
            test_name(p),
            format!("{:.1}", p.ttft_ms.p50),
            format!("{:.1}", p.ttft_ms.p95),
            format!("{:.2}", p.itl_ms.p50),
            format!("{:.2}", p.itl_ms.p99),
            format!("{:.2}", p.decode_tps.p50),
            format!("{:.1}", p.prefill_tps.p50),
            format!("{:.2}", p.throughput_tps),
            format!("{:.1}", p.requests_per_min),
            p.errors.to_string(),
        ];
        writeln!(self.out, "| {} |", cells.join(" | "))?;
        for e in &p.error_messages {
            writeln!(self.out, "|  | error: {} |", e.replace('|', "/"))?;
        }
        self.out.flush()
    }
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
            cols.extend(["throughput_tps", "requests_per_min", "window_s", "stopped"].map(String::from));
            writeln!(self.out, "{}", cols.join(","))?;
        }
        let mut vals = vec![
            p.backend.clone(),
            p.policy.to_string(),
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
