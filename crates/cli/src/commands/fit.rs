//! `lx fit`: what fits in this machine's memory (or `--memory`) before anything loads, for
//! each backend of this build; `--check` sets the same predictions beside the peaks saved
//! runs measured.

use std::path::PathBuf;

use clap::Args;
use lx_local::fit::{self, Question, SEQUENCES};
use lx_engine::footprint::{mib, Footprint};
use lx_results::results::RunFile;
use lx_results::studies::memory_fit::{self, FitPoint, MemoryFit};

#[derive(Args)]
pub struct FitArgs {
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Backends, comma-separated (default: every backend of this build).
    #[arg(long, value_delimiter = ',')]
    backends: Vec<String>,
    /// The memory to plan for, e.g. 16GiB or 8000MiB (default: what the system has available now).
    #[arg(long)]
    memory: Option<String>,
    /// Instead of planning: each point of these saved runs (of --model) beside the footprint
    /// predicted for its load, and how far the prediction is from the peak it measured.
    #[arg(long, num_args = 1..)]
    check: Vec<PathBuf>,
    /// Write the plan (or the check) as JSON here too.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `16GiB`, `8000MiB`, `512MB`, or bytes.
fn parse_memory(s: &str) -> anyhow::Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let (num, unit) = t.split_at(t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len()));
    let n: f64 = num.trim().parse().map_err(|_| anyhow::anyhow!("--memory {s:?}: a size such as 16GiB or 8000MiB"))?;
    let scale = match unit {
        "" | "b" => 1.0,
        "kib" | "k" => 1024.0,
        "mib" | "m" => (1u64 << 20) as f64,
        "gib" | "g" => (1u64 << 30) as f64,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => anyhow::bail!("--memory {s:?}: the unit is one of B, KiB, MiB, GiB, KB, MB, GB"),
    };
    anyhow::ensure!(n > 0.0 && n.is_finite(), "--memory {s:?}: more than nothing");
    Ok((n * scale) as u64)
}

fn gib(b: u64) -> String {
    format!("{:.2}", mib(b) / 1024.0)
}

fn split(f: &Footprint) -> String {
    format!("{} = {} weights + {} KV + {} buffers + {} process", gib(f.total()), gib(f.weights), gib(f.kv_cache), gib(f.scratch), gib(f.runtime))
}

pub fn run(args: FitArgs) -> anyhow::Result<i32> {
    let model = args.model.open()?;
    let backends: Vec<String> = if args.backends.is_empty() {
        lx_local::built()
    } else {
        args.backends.iter().map(|b| lx_local::canonical(b).map(String::from)).collect::<anyhow::Result<_>>()?
    };
    if !args.check.is_empty() {
        return check(&model.path, &args.check, args.out.as_deref());
    }
    let memory = match &args.memory {
        Some(s) => parse_memory(s)?,
        None => lx_machine::hardware::available_memory_bytes(),
    };
    let full_context = fit::full_context(&model.path).map_err(anyhow::Error::msg)?;
    let runtime = |b: &str| lx_local::memory::worker_runtime_bytes(b);
    let settings = |b: &str| lx_local::measuring_settings(b, &model.path);
    let q = Question { model_path: &model.path, memory, full_context, runtime: &runtime, settings: &settings };
    println!("{} ({} tokens of context) in {} GiB{}", model.path.file_name().unwrap_or_default().to_string_lossy(), full_context, gib(memory), if args.memory.is_none() { " (available now)" } else { "" });
    println!();
    let head: Vec<String> = SEQUENCES.iter().map(|n| format!("longest context, {n} seq")).collect();
    println!("| backend | KV cache | {} | sequences at {full_context} | at 1 × {full_context}: GiB |", head.join(" | "));
    println!("| --- | --- |{} ---: | --- |", " ---: |".repeat(SEQUENCES.len()));
    let mut plans = Vec::new();
    for b in &backends {
        for kv in fit::kv_types(b) {
            let p = match fit::plan(&q, b, kv) {
                Ok(p) => p,
                Err(e) => {
                    println!("| {b} | {} | {e} |", fit::kv_label(b, kv));
                    continue;
                }
            };
            let cells: Vec<String> = p.longest.iter().map(|(_, l)| l.map_or("-".to_string(), |(ctx, _)| ctx.to_string())).collect();
            println!("| {b} | {} | {} | {} | {} |", fit::kv_label(b, kv), cells.join(" | "), p.most_at_full.map_or(0, |(n, _)| n), split(&p.one_at_full));
            plans.push(p);
        }
    }
    println!();
    println!("KV cache and weights are counted from the file as each backend holds them; buffers are estimated, the process measured. `lx fit --check RUN.json` sets the prediction beside measured peaks.");
    if let Some(out) = &args.out {
        lx_engine::atomic_file::write(out, &serde_json::to_vec_pretty(&plans)?)?;
    }
    Ok(0)
}

fn check(model: &std::path::Path, runs: &[PathBuf], out: Option<&std::path::Path>) -> anyhow::Result<i32> {
    let mut points = Vec::new();
    for path in runs {
        let run = RunFile::read(path)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for info in &run.backends {
            let settings = lx_local::profile::own_settings(&info.name, &info.settings);
            let runtime = lx_local::memory::worker_runtime_bytes(&info.name);
            let c = &info.capabilities;
            for p in run.points.iter().filter(|p| p.backend == info.name) {
                let Some(measured_peak_mib) = p.worker_peak_rss_mib else { continue };
                // The point's largest step: its warm-up's requests (each its whole prompt,
                // a depth included, before the depth is cached) together, within the load's.
                let step = (p.warmup.min(p.concurrency).max(1) * p.prompt_tokens as usize).min(c.max_batch_tokens);
                let spec = lx_engine::backend::LoadSpec { max_batch_tokens: step, settings: settings.clone(), ..fit::load(model, c.slots, c.ctx_per_slot, run_kv(&info.settings)) };
                let predicted = lx_local::memory::footprint(&info.name, &spec, runtime).map_err(anyhow::Error::msg)?;
                points.push(FitPoint { run: name.clone(), backend: info.name.clone(), test: p.test_name(), slots: c.slots, ctx_per_slot: c.ctx_per_slot, predicted, measured_peak_mib });
            }
        }
    }
    let file = MemoryFit {
        kind: memory_fit::KIND.into(),
        command: std::env::args().collect(),
        hardware: serde_json::to_value(lx_local::hardware_report())?,
        model: model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        points,
    };
    for line in memory_fit::header("points").iter().chain(file.rows("points").iter()) {
        println!("{line}");
    }
    println!();
    println!("{} points; the prediction is at most {:.1}% from the measured peak", file.points.len(), file.worst() * 100.0);
    if let Some(out) = out {
        lx_engine::atomic_file::write(out, &serde_json::to_vec_pretty(&file)?)?;
    }
    Ok(0)
}

/// The KV cache types a run's llama.cpp settings record (f16 where they say none).
fn run_kv(settings: &std::collections::BTreeMap<String, String>) -> lx_engine::backend::KvTypes {
    let of = |k: &str| settings.get(k).and_then(|t| t.parse().ok()).unwrap_or_default();
    lx_engine::backend::KvTypes { k: of("kv_type_k"), v: of("kv_type_v") }
}
