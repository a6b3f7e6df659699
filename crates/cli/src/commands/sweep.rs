//! `lx sweep`: measure a grid, print rows as they finish, keep a run file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lx_engine::load::RunControl;
use lx_engine::printers::{printer, Format};
use lx_engine::results::{RunFile, Slo, READING_PACE_TPS};
use lx_engine::scheduler::Policy;
use lx_engine::sweep::{run_sweep_with, SweepExtras, SweepSpec};
use lx_engine::workload::PromptBuilder;

use crate::commands::list;

/// A length or a range of lengths: `64` or `64..512`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Len {
    pub from: Option<u32>,
    pub to: u32,
}

impl std::str::FromStr for Len {
    type Err = String;
    fn from_str(s: &str) -> Result<Len, String> {
        let num = |t: &str| t.trim().parse::<u32>().map_err(|e| format!("'{t}': {e}"));
        match s.split_once("..") {
            Some((a, b)) => Ok(Len { from: Some(num(a)?), to: num(b.trim_start_matches('='))? }),
            None => Ok(Len { from: None, to: num(s)? }),
        }
    }
}

/// `on`, `off`, or both.
fn on_off(s: &str) -> Result<Vec<bool>, String> {
    s.split(',')
        .map(|p| match p.trim() {
            "on" => Ok(true),
            "off" => Ok(false),
            other => Err(format!("'{other}': expected on or off")),
        })
        .collect()
}

#[derive(Args)]
pub struct SweepArgs {
    /// Backends, comma-separated (llama, candle, mlx). Default: llama, or none when
    /// --target names servers.
    #[arg(long)]
    backend: Option<String>,
    /// OpenAI-compatible servers to measure too, `URL` or `NAME=URL` (comma-separated or
    /// repeated), e.g. `http://127.0.0.1:8080/v1`. Prompts are built with --model's
    /// tokenizer; an API key comes from LX_API_KEY.
    #[arg(long, value_parser = list::<String>)]
    target: Vec<Vec<String>>,
    /// The model to ask the servers for (default: the first each lists).
    #[arg(long)]
    target_model: Option<String>,
    /// Which endpoint to stream from: completions (the prompt as is) or chat (the prompt as
    /// one user message, in the server's chat template).
    #[arg(long, default_value = "completions")]
    api: lx_openai::Api,
    /// Seconds a server may send nothing before its request fails.
    #[arg(long, default_value_t = 60.0)]
    target_timeout: f64,
    /// Retries of a request a server answers with HTTP 429 or 503 (after its Retry-After).
    #[arg(long, default_value_t = 3)]
    target_retries: u32,
    /// Model: a catalog name (default), a .gguf path, or hf:OWNER/REPO/FILE.gguf.
    #[arg(long, default_value = "default")]
    model: String,
    /// Prompt lengths in tokens, BOS (and any shared prefix) included; `A..B` draws each
    /// request's length uniformly from A to B with --seed.
    #[arg(long, default_value = "64,256,1024", value_parser = list::<Len>)]
    prompt_tokens: Vec<Vec<Len>>,
    /// Concurrent clients (closed loop); in open loop (--rate), the most sequences the
    /// scheduler runs at once (its slots): later arrivals wait in its queue.
    #[arg(long, default_value = "1,4", value_parser = list::<usize>)]
    concurrency: Vec<Vec<usize>>,
    /// Output tokens per request (EOS ignored unless --stop-at-eos); `A..B` draws a range.
    #[arg(long, default_value = "64", value_parser = list::<Len>)]
    max_tokens: Vec<Vec<Len>>,
    /// Open loop: Poisson arrival rates in requests/s (a list); without it, closed loop.
    #[arg(long, value_parser = list::<f64>)]
    rate: Vec<Vec<f64>>,
    /// Open loop: most requests in flight from the client side (default: no cap).
    #[arg(long)]
    max_concurrency: Option<usize>,
    /// Send requests for at most this many seconds per point (with no --requests: until then).
    #[arg(long)]
    duration: Option<f64>,
    /// Seed of arrival times and drawn lengths.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Every prompt starts with the same this many tokens (a shared system prompt).
    #[arg(long, default_value_t = 0)]
    prefix_tokens: u32,
    /// Prefix caching: compute the shared prefix once and reuse it (on, off, or on,off).
    #[arg(long, default_value = "off", value_parser = on_off)]
    prefix_cache: Vec<Vec<bool>>,
    /// Most sequences per forward pass (the static batch size; default: the concurrency).
    #[arg(long)]
    max_batch: Option<usize>,
    /// Most tokens per forward pass (default: room for every slot's longest prompt).
    #[arg(long)]
    max_batch_tokens: Option<usize>,
    /// SLO: a request meets it only if its TTFT is at most this (ms).
    #[arg(long)]
    slo_ttft_ms: Option<f64>,
    /// SLO: a request meets it only if it decodes at least this fast (tok/s; default: reading pace).
    #[arg(long, default_value_t = READING_PACE_TPS)]
    slo_decode_tps: f64,
    /// Scheduling policies: serial, static, continuous, chunked.
    #[arg(long, default_value = "continuous", value_parser = list::<Policy>)]
    policy: Vec<Vec<Policy>>,
    /// Measured requests per point (default 8, or unlimited with --duration).
    #[arg(long)]
    requests: Option<usize>,
    /// Unmeasured warm-up requests before each point (default: the point's concurrency).
    #[arg(long)]
    warmup: Option<usize>,
    /// Measure every point this many times (the whole grid again, backend by backend) and
    /// report each figure's mean, standard deviation and 95% interval across them.
    #[arg(long, default_value_t = 1)]
    repetitions: usize,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Prompt tokens per pass for the chunked policy.
    #[arg(long, default_value_t = lx_engine::scheduler::DEFAULT_CHUNK_TOKENS)]
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
    let servers = servers(&args)?;
    let prompts: Vec<Len> = args.prompt_tokens.into_iter().flatten().collect();
    let outputs: Vec<Len> = args.max_tokens.into_iter().flatten().collect();
    let default_backend = if servers.is_empty() { "llama" } else { "" };
    let mut backends = args
        .backend
        .as_deref()
        .unwrap_or(default_backend)
        .split(',')
        .filter(|b| !b.trim().is_empty())
        .map(|b| lx_backends::canonical(b.trim()).map(String::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for s in &servers {
        if backends.contains(&s.name) {
            anyhow::bail!("--target: '{}' is already the name of a backend or another server; name it with NAME=URL", s.name);
        }
        backends.push(s.name.clone());
    }
    let concurrency: Vec<usize> = args.concurrency.into_iter().flatten().collect();
    let spec = SweepSpec {
        backends,
        policies: args.policy.into_iter().flatten().collect(),
        prompt_tokens: prompts.iter().map(|l| l.to).collect(),
        max_tokens: outputs.iter().map(|l| l.to).collect(),
        warmup: args.warmup.unwrap_or_else(|| concurrency.iter().copied().max().unwrap_or(1)),
        concurrency,
        requests: args.requests.unwrap_or(if args.duration.is_some() { usize::MAX } else { 8 }),
        threads: args.threads,
        stop_at_eos: args.stop_at_eos,
        chunk_tokens: args.chunk_tokens,
        gpu_layers: args.gpu_layers,
        servers: servers.iter().map(|s| s.name.clone()).collect(),
    };
    let extras = SweepExtras {
        rates: args.rate.into_iter().flatten().collect(),
        max_in_flight: args.max_concurrency,
        prompt_tokens_from: prompts.iter().map(|l| l.from).collect(),
        max_tokens_from: outputs.iter().map(|l| l.from).collect(),
        seed: args.seed,
        duration_s: args.duration,
        prefix_tokens: args.prefix_tokens,
        prefix_cache: args.prefix_cache.into_iter().flatten().collect(),
        max_batch_seqs: args.max_batch,
        max_batch_tokens: args.max_batch_tokens,
        slo: Slo { ttft_ms: args.slo_ttft_ms, decode_tps: Some(args.slo_decode_tps) },
        repetitions: args.repetitions,
    };
    // Cheap checks first, so a typo never waits for a model load.
    spec.validate(usize::MAX).map_err(anyhow::Error::msg)?;
    extras.validate(&spec, usize::MAX).map_err(anyhow::Error::msg)?;
    let model = lx_backends::model::OpenModel::open(&args.model, &mut crate::progress::fetch_reporter())?;
    // The prefix first: a prefix past the context is the clearer message of the two.
    extras.validate(&spec, model.context_length).map_err(anyhow::Error::msg)?;
    spec.validate(model.context_length).map_err(anyhow::Error::msg)?;

    let prompts = PromptBuilder::new(&model.tokenizer);
    let prompt = |n: u32, i: usize| prompts.prompt(n as usize, i as u64);
    let control = RunControl { hang_timeout: Duration::from_secs(args.hang_timeout), ..Default::default() };
    crate::commands::stop_on_ctrl_c(&control);
    let hardware = lx_backends::hardware_report();
    let mut settings = serde_json::to_value(&spec)?;
    settings["serving"] = serde_json::to_value(&extras)?;
    let mut run = RunFile::new(std::env::args().collect(), hardware, model.record(), settings);
    let mut ctx = model.sweep_context(&prompt, args.out.clone(), control);
    if !servers.is_empty() {
        ctx.spawn = lx_backends::spawner_with_servers(servers, std::sync::Arc::new(model.tokenizer.clone()));
    }
    let points = spec.points_with(&extras).len();
    let total = if args.duration.is_some() && args.requests.is_none() { 0 } else { (points * spec.requests) as u64 };
    let mut progress = crate::progress::SweepProgress::new(total);
    let mut out = printer(args.format, Box::new(std::io::stdout()));
    let failed = run_sweep_with(&spec, &extras, &ctx, &mut run, out.as_mut(), &mut progress);
    progress.finish();
    let failed = failed?;
    if let Some(path) = &args.out {
        eprintln!("run written to {}", path.display());
    }
    if run.stopped {
        eprintln!("stopped by the user: {} of {points} points measured (the last one may be partial)", run.points.len());
        return Ok(130);
    }
    if failed > 0 {
        eprintln!("{failed} point(s) had errors; see the error rows above");
        return Ok(2);
    }
    Ok(0)
}

/// The servers `--target` names, with the options that apply to all of them.
fn servers(args: &SweepArgs) -> anyhow::Result<Vec<lx_openai::Server>> {
    let api_key = std::env::var("LX_API_KEY").ok().filter(|k| !k.is_empty());
    if !(args.target_timeout > 0.0 && args.target_timeout.is_finite()) {
        anyhow::bail!("--target-timeout must be a positive number of seconds");
    }
    args.target
        .iter()
        .flatten()
        .map(|spec| {
            let mut s = lx_openai::Server::parse(spec).map_err(|e| anyhow::anyhow!("--target {e}"))?;
            s.model = args.target_model.clone();
            s.api = args.api;
            s.api_key = api_key.clone();
            s.ignore_eos = !args.stop_at_eos;
            s.idle_timeout = Duration::from_secs_f64(args.target_timeout);
            s.max_retries = args.target_retries;
            Ok(s)
        })
        .collect()
}
