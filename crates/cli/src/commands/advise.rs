//! `lx advise`: from a workload preset to what to run it on, measured on this machine (or
//! on servers) within a time budget.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lx_engine::scheduler::Policy;
use lx_local::advise::AdviseJob;
use lx_decide::advise::{lines, Request};
use lx_decide::preset::{parse_duration, Job, Preset};
use lx_results::decision::Axis;
use lx_results::printers::{printer, Format};

#[derive(Args)]
pub struct AdviseArgs {
    /// The workload: a built-in preset (code-completion, chat, voice-agent, rag,
    /// batch-enrichment, overnight-eval, agent-pipeline) or a preset file's path.
    #[arg(long)]
    preset: String,
    #[command(flatten)]
    measured: crate::commands::Measured,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Time for all the measurements, confirmation included: 90s, 5m, 1h.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    budget: f64,
    /// The job's deadline (throughput-bound presets; default: the preset's).
    #[arg(long, value_parser = parse_duration)]
    deadline: Option<f64>,
    /// The job's size in requests (throughput-bound presets; default: the preset's).
    #[arg(long)]
    requests: Option<usize>,
    /// What the capacity search varies for TTFT-bound and mixed presets: rate (open-loop
    /// arrivals on the preset's slots) or concurrency (closed-loop clients).
    #[arg(long, default_value = "rate", value_parser = axis)]
    by: Axis,
    /// Most clients a concurrency search or a deadline plan tries.
    #[arg(long, default_value_t = 16)]
    most_clients: usize,
    /// Our engine's scheduling policies to compare on each backend (serial, static,
    /// continuous, chunked; a server schedules itself).
    #[arg(long, default_value = "continuous", value_parser = crate::commands::list::<Policy>)]
    policy: Vec<Vec<Policy>>,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Seed of arrivals and drawn lengths.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the run (every trial's point, the searches, plans and advice) here, after every trial.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds without any sign of life before a worker is declared hung and killed.
    #[arg(long, default_value_t = lx_engine::defaults::HANG_TIMEOUT_S)]
    hang_timeout: u64,
}

fn axis(s: &str) -> Result<Axis, String> {
    match s {
        "rate" => Ok(Axis::Rate),
        "concurrency" => Ok(Axis::Concurrency),
        other => Err(format!("'{other}': expected rate or concurrency")),
    }
}

pub fn run(args: AdviseArgs) -> anyhow::Result<i32> {
    let preset = Preset::load(&args.preset)?;
    let (servers, candidates) = args.measured.resolve(false)?;
    let job = match (preset.job, args.requests, args.deadline) {
        (_, Some(requests), Some(deadline_s)) => Some(Job { requests, deadline_s }),
        (Some(j), r, d) => Some(Job { requests: r.unwrap_or(j.requests), deadline_s: d.unwrap_or(j.deadline_s) }),
        (None, None, None) => None,
        (None, _, _) => anyhow::bail!("--deadline and --requests go together for a preset without a job ({} is {}-bound)", preset.name, preset.bound.name()),
    };
    if job.is_some() && preset.bound != lx_results::decision::Bound::Throughput {
        anyhow::bail!("--deadline plans a batch job; {} is {}-bound and is judged by its objectives ({})", preset.name, preset.bound.name(), preset.objectives.describe());
    }
    let model = args.model.open()?;
    let spawn = lx_local::spawner_with_servers(servers.clone(), std::sync::Arc::new(model.tokenizer.clone()), lx_local::profile::Use::Measure, 0);
    eprintln!("{} ({}-bound): {}; {}", preset.name, preset.bound.name(), preset.summary, preset.objectives.describe());
    let request = Request {
        preset,
        candidates,
        servers: servers.iter().map(|s| s.name.clone()).collect(),
        axis: args.by,
        job,
        policies: args.policy.iter().flatten().copied().collect(),
        most_clients: args.most_clients,
        budget: Duration::from_secs_f64(args.budget),
    };
    let mut job = AdviseJob::new(std::sync::Arc::new(model), request, args.threads, args.seed, std::env::args().collect(), spawn)?;
    job.control.hang_timeout = Duration::from_secs(args.hang_timeout);
    crate::commands::stop_on_ctrl_c(&job.control);
    job.out = args.out.clone();
    let mut progress = crate::progress::SweepProgress::new(0);
    let mut out = printer(Format::Markdown, Box::new(std::io::stdout()));
    let (run, advice) = job.run(out.as_mut(), &mut progress);
    drop(out);
    progress.finish();
    let advice = advice?;
    for s in &run.decisions.searches {
        println!("\nCapacity search, {} ({}; {}): {}\n", s.backend, s.axis.unit(), s.ended, s.answer());
        for row in s.table() {
            println!("{row}");
        }
    }
    for d in &run.decisions.deadlines {
        println!("\nDeadline plan, {} ({}): {}\n", d.backend, d.ended, d.answer());
        for row in d.table() {
            println!("{row}");
        }
    }
    println!();
    for line in lines(&advice) {
        println!("{line}");
    }
    if let Some(path) = &args.out {
        eprintln!("run written to {}", path.display());
    }
    Ok(if run.stopped { 130 } else if advice.confirmed == Some(true) { 0 } else { 2 })
}
