//! `lx sweep`: measure a grid, print rows as they finish, keep a run file.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use lx_engine::load::RunControl;
use lx_engine::printers::{printer, Format};
use lx_engine::results::RunFile;
use lx_engine::scheduler::Policy;
use lx_engine::sweep::{run_sweep, SweepContext, SweepSpec};
use lx_engine::workload::PromptBuilder;

use crate::commands::list;

#[derive(Args)]
pub struct SweepArgs {
    /// Backends, comma-separated (llama, candle, mlx).
    #[arg(long, default_value = "llama")]
    backend: String,
    /// Model: a catalog name (default), a .gguf path, or hf:OWNER/REPO/FILE.gguf.
    #[arg(long, default_value = "default")]
    model: String,
    /// Prompt lengths in tokens, BOS included.
    #[arg(long, default_value = "64,256,1024", value_parser = list::<u32>)]
    prompt_tokens: Vec<Vec<u32>>,
    /// Concurrent clients (closed loop).
    #[arg(long, default_value = "1,4", value_parser = list::<usize>)]
    concurrency: Vec<Vec<usize>>,
    /// Output tokens per request (EOS ignored unless --stop-at-eos).
    #[arg(long, default_value = "64", value_parser = list::<u32>)]
    max_tokens: Vec<Vec<u32>>,
    /// Scheduling policies: serial, static, continuous, chunked.
    #[arg(long, default_value = "continuous", value_parser = list::<Policy>)]
    policy: Vec<Vec<Policy>>,
    /// Measured requests per point.
    #[arg(long, default_value_t = 8)]
    requests: usize,
    /// Unmeasured warm-up requests before each point (default: the point's concurrency).
    #[arg(long)]
    warmup: Option<usize>,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Prompt tokens per pass for the chunked policy.
    #[arg(long, default_value_t = 256)]
    chunk_tokens: usize,
    /// Stop at end-of-sequence instead of always generating --max-tokens.
    #[arg(long)]
    stop_at_eos: bool,
    /// Layers to offload to the GPU (default: all, where the backend has a GPU).
    #[arg(long)]
    gpu_layers: Option<u32>,
    /// Table format on stdout: md, csv, json, jsonl.
    #[arg(long, default_value = "md")]
    format: Format,
    /// Also write the full run (JSON, with raw samples) here, updated after every point.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds without any sign of life before a worker is declared hung and killed.
    #[arg(long, default_value_t = 120)]
    hang_timeout: u64,
}

pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let flat = |v: Vec<Vec<u32>>| v.into_iter().flatten().collect::<Vec<_>>();
    let backends = args
        .backend
        .split(',')
        .map(|b| lx_backends::canonical(b.trim()).map(String::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let concurrency: Vec<usize> = args.concurrency.into_iter().flatten().collect();
    let spec = SweepSpec {
        backends,
        policies: args.policy.into_iter().flatten().collect(),
        prompt_tokens: flat(args.prompt_tokens),
        max_tokens: flat(args.max_tokens),
        warmup: args.warmup.unwrap_or_else(|| concurrency.iter().copied().max().unwrap_or(1)),
        concurrency,
        requests: args.requests,
        threads: args.threads,
        stop_at_eos: args.stop_at_eos,
        chunk_tokens: args.chunk_tokens,
        gpu_layers: args.gpu_layers,
    };
    // Cheap checks first, so a typo never waits for a model load.
    spec.validate(usize::MAX).map_err(anyhow::Error::msg)?;
    let model = lx_backends::model::OpenModel::open(&args.model, &mut crate::progress::fetch_reporter())?;
    spec.validate(model.context_length).map_err(anyhow::Error::msg)?;

    let prompts = PromptBuilder::new(&model.tokenizer);
    let prompt = |n: u32, i: usize| prompts.prompt(n as usize, i as u64);
    let control = RunControl { hang_timeout: Duration::from_secs(args.hang_timeout), ..Default::default() };
    let stop = control.stop.clone();
    // First Ctrl-C: stop after bookkeeping and write what was measured. Second: leave now.
    let _ = ctrlc::set_handler(move || {
        if stop.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: finishing in-flight bookkeeping (Ctrl-C again to quit at once)");
    });

    let mut hardware = lx_engine::hardware::probe();
    hardware.backend_devices = lx_backends::devices();
    let settings = serde_json::to_value(&spec)?;
    let mut run = RunFile::new(std::env::args().collect(), hardware, model.record(), settings);
    let ctx = SweepContext {
        model_path: model.path.clone(),
        prompt: &prompt,
        stop_tokens: model.tokenizer.eos_tokens().to_vec(),
        worker_command: &lx_backends::worker_command,
        out: args.out.clone(),
        control,
        load_timeout: Duration::from_secs(300),
    };
    let total = (spec.points().len() * spec.requests) as u64;
    let mut progress = crate::progress::SweepProgress::new(total);
    let mut out = printer(args.format, Box::new(std::io::stdout()));
    let failed = run_sweep(&spec, &ctx, &mut run, out.as_mut(), &mut progress);
    progress.finish();
    let failed = failed?;
    if let Some(path) = &args.out {
        eprintln!("run written to {}", path.display());
    }
    if run.stopped {
        eprintln!("stopped by the user: {} of {} points measured", run.points.len(), spec.points().len());
        return Ok(130);
    }
    if failed > 0 {
        eprintln!("{failed} point(s) had errors; see the error rows above");
        return Ok(2);
    }
    Ok(0)
}
