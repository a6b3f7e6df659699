//! `lx sweep`: measure a grid, print rows as they finish, keep a run file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lx_results::printers::{printer, Format};
use lx_results::results::{Slo, READING_PACE_TPS};
use lx_engine::scheduler::Policy;
use lx_local::sweep::SweepJob;
use lx_run::sweep::{parse_lengths, Length, SweepPlan};

use crate::commands::list;

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
    #[command(flatten)]
    measured: crate::commands::Measured,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// A workload preset (a built-in name, or a preset file): its prompt and output lengths,
    /// shared prefix, SLOs, and open-loop arrivals at its start rate on its slots unless
    /// --rate or --concurrency is given. The run file records it.
    #[arg(long, conflicts_with_all = ["prompt_tokens", "max_tokens", "prefix_tokens", "prefix_cache", "prompts", "slo_ttft_ms", "slo_decode_tps"])]
    preset: Option<String>,
    /// Prompt lengths in tokens, BOS (and any shared prefix) included; `A..B` draws each
    /// request's length uniformly from A to B with --seed.
    #[arg(long, default_value = "64,256,1024", value_parser = parse_lengths)]
    prompt_tokens: Vec<Vec<Length>>,
    /// Concurrent clients (closed loop); in open loop (--rate), the most sequences the
    /// scheduler runs at once (its slots): later arrivals wait in its queue.
    /// [default: 1,4]
    #[arg(long, value_parser = list::<usize>)]
    concurrency: Vec<Vec<usize>>,
    /// Output tokens per request (EOS ignored unless --stop-at-eos); `A..B` draws a range.
    #[arg(long, default_value = "64", value_parser = parse_lengths)]
    max_tokens: Vec<Vec<Length>>,
    /// Tokens already in the context before each measured prompt (a list, as llama-bench's
    /// -d): filled once by the warm-up, cached and copied into every request, so TTFT is the
    /// prompt's at that depth and decode attends over it.
    #[arg(long, default_value = "0", value_parser = list::<u32>)]
    depth: Vec<Vec<u32>>,
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
    #[command(flatten)]
    spec: crate::commands::spec_args::SpecArgs,
    #[command(flatten)]
    kv: crate::commands::kv_args::KvArgs,
    #[command(flatten)]
    split: crate::commands::split_args::SplitArgs,
    /// What the prompts ask for: prose (text to continue) or copy (a passage to repeat word
    /// for word, where the output is grounded in the prompt).
    #[arg(long, default_value = "prose")]
    prompts: lx_format::workload::PromptText,
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
    /// Scheduling policies: serial, static, continuous, chunked, disaggregated (a prefill
    /// worker and a decode worker; see --prefill-threads and the options after it).
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
    #[arg(long, default_value_t = lx_engine::defaults::CHUNK_TOKENS)]
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
    #[arg(long, default_value_t = lx_engine::defaults::HANG_TIMEOUT_S)]
    hang_timeout: u64,
    /// Leave out the ceilings (the "% of ceiling" columns), and so the probe of this
    /// machine's limits that a first run on a machine and build takes a few seconds for.
    #[arg(long)]
    no_ceilings: bool,
    /// Before the points, score a fixed text (CHUNKS chunks of 512 tokens) with every backend
    /// and setting they run, against llama.cpp with an f16 KV cache on the same file: each
    /// row then has its mean KL divergence and top-1 agreement (as `lx fidelity` measures).
    /// [default CHUNKS: 2]
    #[arg(long, value_name = "CHUNKS", num_args = 0..=1)]
    #[allow(clippy::option_option)]
    fidelity: Option<Option<usize>>,
    /// Run every backend with its own defaults, not this machine's tuned profile (`lx tune`);
    /// the same as LX_UNTUNED=1.
    #[arg(long)]
    untuned: bool,
}

/// The sweep the arguments describe (not yet checked).
fn plan(args: &SweepArgs, servers: &[lx_openai::Server]) -> anyhow::Result<SweepPlan> {
    let backends = crate::commands::backends_and_servers(args.measured.backend.as_deref(), servers)?;
    let mut concurrency: Vec<usize> = args.concurrency.iter().flatten().copied().collect();
    if concurrency.is_empty() {
        concurrency = vec![1, 4];
    }
    if args.spec.spec_draft_model.is_some() && !args.spec.drafters().contains(&lx_engine::speculative::Drafter::Draft) {
        anyhow::bail!("--spec-draft-model is the draft model of --spec draft, which was not asked for");
    }
    Ok(SweepPlan {
        backends,
        servers: servers.iter().map(|s| s.name.clone()).collect(),
        policies: args.policy.iter().flatten().copied().collect(),
        prompt_tokens: args.prompt_tokens.iter().flatten().copied().collect(),
        max_tokens: args.max_tokens.iter().flatten().copied().collect(),
        depths: args.depth.iter().flatten().copied().collect(),
        rates: args.rate.iter().flatten().copied().collect(),
        prefix_cache: args.prefix_cache.iter().flatten().copied().collect(),
        spec: args.spec.drafters(),
        spec_settings: args.spec.settings(),
        draft_model: args.spec.spec_draft_model.clone(),
        // Checked against the backends with the rest of the plan (SweepPlan::validate).
        kv: args.kv.types(),
        prompts: args.prompts,
        warmup: args.warmup,
        concurrency,
        requests: args.requests.unwrap_or(if args.duration.is_some() { usize::MAX } else { 8 }),
        repetitions: args.repetitions,
        threads: args.threads,
        stop_at_eos: args.stop_at_eos,
        chunk_tokens: args.chunk_tokens,
        gpu_layers: args.gpu_layers,
        max_in_flight: args.max_concurrency,
        seed: args.seed,
        duration_s: args.duration,
        prefix_tokens: args.prefix_tokens,
        max_batch_seqs: args.max_batch,
        max_batch_tokens: args.max_batch_tokens,
        slo: Slo { ttft_ms: args.slo_ttft_ms, decode_tps: Some(args.slo_decode_tps) },
        split: args.split.split(),
        fidelity_chunks: args.fidelity.map(|n| n.unwrap_or(lx_run::sweep::fidelity::DEFAULT_CHUNKS)),
    })
}

pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let servers = args.measured.targets.servers(args.stop_at_eos)?;
    let mut plan = plan(&args, &servers)?;
    let preset = args.preset.as_deref().map(lx_decide::preset::Preset::load).transpose()?;
    if let Some(p) = &preset {
        p.apply(&mut plan, !args.rate.is_empty() || !args.concurrency.is_empty());
        if args.requests.is_none() && args.duration.is_none() {
            plan.requests = lx_decide::capacity::TRIAL_REQUESTS;
        }
        plan.warmup = args.warmup.or(Some(lx_engine::defaults::trial_warmup(lx_engine::defaults::sweep_warmup(&plan.concurrency))));
    }
    // Cheap checks first, so a typo never waits for a model load; then against the model.
    plan.validate(None)?;
    let model = args.model.open()?;
    let usage = if args.untuned { lx_local::profile::Use::Untuned } else { lx_local::profile::Use::Measure };
    let spawn = lx_local::spawner_with_servers(servers, std::sync::Arc::new(model.tokenizer.clone()), usage, 0);
    let mut job = SweepJob::new(std::sync::Arc::new(model), plan, std::env::args().collect(), spawn)?;
    job.control.hang_timeout = Duration::from_secs(args.hang_timeout);
    crate::commands::stop_on_ctrl_c(&job.control);
    job.out = args.out.clone();
    job.ceilings = !args.no_ceilings;
    job.run.preset = preset.as_ref().map(lx_decide::preset::Preset::record);
    let points = job.total_points();
    let total = if args.duration.is_some() && args.requests.is_none() { 0 } else { (points * job.plan.requests) as u64 };
    let mut progress = crate::progress::SweepProgress::new(total);
    let mut out = printer(args.format, Box::new(std::io::stdout()));
    let (run, failed) = job.run(out.as_mut(), &mut progress);
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sweep: SweepArgs,
    }

    fn cli_help() -> String {
        use clap::CommandFactory;
        Cli::command().render_long_help().to_string()
    }

    fn plan_of(args: &[&str]) -> SweepPlan {
        let cli = Cli::try_parse_from(std::iter::once("sweep").chain(args.iter().copied())).unwrap();
        plan(&cli.sweep, &[]).unwrap()
    }

    /// `lx sweep`'s documented defaults (its --help) and the plan's are one.
    #[test]
    fn the_command_lines_defaults_are_the_plans() {
        assert_eq!(plan_of(&[]), SweepPlan::default());
    }

    #[test]
    fn every_grid_option_lands_in_the_plan_as_written() {
        let p = plan_of(&[
            "--backend", "llama,candle", "--prompt-tokens", "64..512,512", "--max-tokens", "8..32", "--concurrency", "2,8",
            "--rate", "1.5,3", "--prefix-tokens", "16", "--prefix-cache", "off,on", "--repetitions", "3", "--policy", "serial,chunked",
        ]);
        assert_eq!(p.backends, ["llama", "candle"]);
        assert_eq!(p.prompt_tokens, [Length { from: Some(64), to: 512 }, Length::fixed(512)]);
        assert_eq!(p.max_tokens, [Length { from: Some(8), to: 32 }]);
        assert_eq!((p.prefix_tokens, p.repetitions, p.warmup()), (16, 3, 8));
        assert_eq!((p.concurrency, p.rates, p.prefix_cache), (vec![2, 8], vec![1.5, 3.0], vec![false, true]));
        assert_eq!(p.policies, [Policy::Serial, Policy::Chunked]);
        assert_eq!(plan_of(&["--depth", "0,512,4096"]).depths, [0, 512, 4096]);
        let chunks = lx_run::sweep::fidelity::DEFAULT_CHUNKS;
        assert_eq!((plan_of(&["--fidelity"]).fidelity_chunks, plan_of(&["--fidelity", "5"]).fidelity_chunks), (Some(chunks), Some(5)));
        assert!(cli_help().contains(&format!("[default CHUNKS: {chunks}]")), "the help says the default the plan takes");
    }

    /// A preset sets the workload; flags that would say it again are refused.
    #[test]
    fn a_preset_sets_the_workload_and_refuses_flags_that_repeat_it() {
        let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("sweep").chain(args.iter().copied()));
        assert!(parse(&["--preset", "chat"]).is_ok());
        let e = parse(&["--preset", "chat", "--prompt-tokens", "64"]).err().unwrap().to_string();
        assert!(e.contains("--prompt-tokens") && e.contains("--preset"), "{e}");
        assert!(parse(&["--preset", "chat", "--rate", "1"]).is_ok(), "arrivals may be given beside a preset");
    }
}
