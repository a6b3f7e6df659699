//! `lx live`: the app's live mode in a terminal. N clients stay busy on one backend at a
//! time; a status line every few seconds gives TTFT, throughput and the resident memory of
//! `lx` and each worker; at the end, the table of every setting and, with --out, a run file
//! with the memory samples. Long runs are how live mode is soaked (docs/APP.md).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use lx_machine::hardware::resident_bytes;
use lx_run::live::{BackendState, LiveEvent, LiveSession, LiveSettings};
use lx_results::printers::{printer, Format};
use lx_results::results::{MemorySample, RunFile};

#[derive(Args)]
pub struct LiveArgs {
    #[command(flatten)]
    measured: crate::commands::Measured,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// A workload preset (a built-in name, or a preset file): live mode runs its typical
    /// request (the middle of its prompt and output ranges) on its slots as clients, and
    /// judges every setting against its objectives. The run file records it.
    #[arg(long, conflicts_with_all = ["prompt_tokens", "max_tokens", "concurrency"])]
    preset: Option<String>,
    /// Prompt length in tokens, BOS included.
    #[arg(long, default_value_t = lx_engine::defaults::LIVE_PROMPT_TOKENS)]
    prompt_tokens: u32,
    /// Clients kept busy (closed loop).
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Output tokens per request (EOS ignored).
    #[arg(long, default_value_t = lx_engine::defaults::LIVE_MAX_TOKENS)]
    max_tokens: u32,
    #[command(flatten)]
    engine: crate::commands::EngineArgs,
    /// With several backends (servers included): seconds each is measured before the next
    /// takes over, in turn.
    #[arg(long, default_value_t = lx_engine::defaults::LIVE_ROTATE_AFTER_S)]
    rotate_after: f64,
    /// Stop after this many completed requests (default: run until Ctrl-C or --duration).
    #[arg(long)]
    requests: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds between status lines (and memory samples).
    #[arg(long, default_value_t = 5.0)]
    every: f64,
    /// Seconds without any sign of life before a worker is declared hung and killed.
    #[arg(long, default_value_t = lx_engine::defaults::HANG_TIMEOUT_S as f64)]
    hang_timeout: f64,
    /// Table format on stdout at the end: md, csv, json, jsonl.
    #[arg(long, default_value = "md")]
    format: Format,
    /// Write the run (one point per setting, and the memory samples) here, at the end.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Leave out the ceilings (the table's "% of ceiling" columns), and so the probe of this
    /// machine's limits that a first run on a machine and build takes a few seconds for.
    #[arg(long)]
    no_ceilings: bool,
    #[command(flatten)]
    kv: crate::commands::kv_args::KvArgs,
    #[command(flatten)]
    spec: crate::commands::spec_args::SpecArgs,
}

/// The share of the run counted as warm-up when memory growth is judged: allocators,
/// caches and the per-setting sample windows fill in this stretch.
const WARMUP_SHARE: f64 = 0.1;

pub fn run(args: LiveArgs) -> anyhow::Result<i32> {
    if !(args.every > 0.0 && args.every.is_finite()) {
        anyhow::bail!("--every must be a positive number of seconds");
    }
    if args.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) {
        anyhow::bail!("--duration must be a positive number of seconds");
    }
    // Live mode always asks for exactly --max-tokens (EOS ignored), servers included.
    let (servers, backends) = args.measured.resolve(false)?;
    let kv = args.kv.types_for(&backends)?;
    let preset = args.preset.as_deref().map(lx_decide::preset::Preset::load).transpose()?;
    let middle = |l: lx_run::sweep::Length| (l.shortest() + l.to) / 2;
    let settings = LiveSettings {
        backends,
        prompt_tokens: preset.as_ref().map_or(args.prompt_tokens, |p| middle(p.prompt_tokens)),
        concurrency: preset.as_ref().map_or(args.concurrency, |p| p.slots),
        max_tokens: preset.as_ref().map_or(args.max_tokens, |p| middle(p.max_tokens)),
        policy: args.engine.policy,
        chunk_tokens: args.engine.chunk_tokens,
        threads: args.engine.threads,
        gpu_layers: args.engine.gpu_layers,
        rotate_after_s: args.rotate_after,
        hang_timeout_s: args.hang_timeout,
        spec: args.spec.settings(),
        kv,
        ..LiveSettings::default()
    };
    if args.spec.drafters().len() > 1 {
        anyhow::bail!("lx live takes one --spec (none, lookup or draft); `lx sweep` compares them");
    }
    // Cheap checks first, so a typo never waits for a model load; then against the model.
    settings.validate(usize::MAX)?;
    let model = args.model.open()?;
    let checked = settings.clone().check(model.context_length)?;

    let control = lx_client::traffic::RunControl::default();
    crate::commands::stop_on_ctrl_c(&control);
    let mut run = model.live_run_file(std::env::args().collect(), &settings);
    run.preset = preset.as_ref().map(lx_decide::preset::Preset::record);
    // Before any request: the probe (when this machine and build have none yet) never runs
    // beside a measurement.
    if !args.no_ceilings && !settings.backends.iter().all(|b| servers.iter().any(|s| &s.name == b)) {
        crate::commands::add_ceilings(&mut run, &model.path);
    }
    let live_model = model.live_model(args.spec.draft_model(&model.path)?);
    let (tx, events) = mpsc::channel();
    let sink = Box::new(move |batch: Vec<LiveEvent>| {
        let _ = tx.send(batch);
    });
    let spawner = lx_local::spawner_with_servers(servers, std::sync::Arc::new(model.tokenizer.clone()), lx_local::profile::Use::Interactive, 0);
    let session = LiveSession::start(checked, live_model, spawner, sink)?;

    let started = Instant::now();
    let every = Duration::from_secs_f64(args.every);
    let mut watch = Watch::default();
    let mut next_status = started + every;
    let ended = loop {
        if control.stop.load(std::sync::atomic::Ordering::SeqCst) {
            break End::Stopped;
        }
        if let Ok(batch) = events.recv_timeout(Duration::from_millis(100)) {
            for e in batch {
                watch.see(e, &mut run);
            }
        }
        if let Some(end) = watch.end.take() {
            break end;
        }
        if args.requests.is_some_and(|n| watch.completed >= n) || args.duration.is_some_and(|d| started.elapsed().as_secs_f64() >= d) {
            break End::Done;
        }
        if Instant::now() >= next_status {
            next_status += every;
            let sample = watch.sample(started.elapsed().as_secs_f64());
            eprintln!("{}", watch.status_line(&sample));
            run.memory.push(sample);
        }
    };
    // The closing sample, then stop: requests in flight are cancelled, workers shut down.
    let closing = watch.sample(started.elapsed().as_secs_f64());
    if closing.rss_bytes.len() > 1 {
        run.memory.push(closing);
    }
    run.points = session.stop();
    if let Some(p) = &preset {
        for point in &mut run.points {
            point.judge(p.objectives.slo());
        }
    }
    run.fill_ceilings();
    run.stopped = matches!(ended, End::Stopped);

    let mut out = printer(args.format, Box::new(std::io::stdout()));
    out.header(&run)?;
    for p in &run.points {
        out.point(p)?;
    }
    out.footer(&run)?;
    for line in memory_report(&run.memory) {
        eprintln!("{line}");
    }
    if let Some(path) = &args.out {
        run.write_atomic(path)?;
        eprintln!("run written to {}", path.display());
    }
    eprintln!("{} requests completed, {} failed, in {:.0} s", watch.completed, watch.failed, started.elapsed().as_secs_f64());
    Ok(match ended {
        End::Done => 0,
        End::Stopped => {
            eprintln!("stopped by the user");
            130
        }
        End::Paused(why) => {
            eprintln!("error: no backend can run: {why}");
            2
        }
    })
}

enum End {
    /// The requests or the time asked for are done.
    Done,
    /// Ctrl-C.
    Stopped,
    /// Every backend failed (live mode would wait for a retry; a terminal has no button).
    Paused(String),
}

/// A periodic reading of the backend being measured.
struct Reading {
    backend: String,
    throughput_tps: Option<f64>,
    ttft_p50_ms: Option<f64>,
    ttft_p95_ms: Option<f64>,
    in_flight: usize,
}

/// What the events have said so far.
#[derive(Default)]
struct Watch {
    completed: u64,
    failed: u64,
    /// Running workers by backend.
    workers: BTreeMap<String, u32>,
    /// The last periodic reading.
    tick: Option<Reading>,
    end: Option<End>,
}

impl Watch {
    fn see(&mut self, event: LiveEvent, run: &mut RunFile) {
        match event {
            LiveEvent::BackendStatus { backend, state, info, pid, message, .. } => {
                match (state, pid) {
                    (BackendState::Error | BackendState::Stopped, _) | (_, None) => {
                        self.workers.remove(&backend);
                    }
                    (_, Some(pid)) => {
                        self.workers.insert(backend.clone(), pid);
                    }
                }
                if let Some(info) = info {
                    run.backends.retain(|b| b.name != info.name);
                    run.backends.push(info);
                }
                if state == BackendState::Error {
                    eprintln!("{backend}: {}", message.unwrap_or_default());
                }
            }
            LiveEvent::RequestDone { finish, error, .. } => match (finish, error) {
                (_, Some(why)) => {
                    self.failed += 1;
                    eprintln!("request failed: {why}");
                }
                (Some(lx_engine::scheduler::FinishReason::Cancelled), None) => {}
                (_, None) => self.completed += 1,
            },
            LiveEvent::Tick { backend, throughput_tps, in_flight, ttft_p50_ms, ttft_p95_ms, .. } => {
                self.tick = Some(Reading { backend, throughput_tps, ttft_p50_ms, ttft_p95_ms, in_flight });
            }
            LiveEvent::WorkerCrashed { backend, reason, .. } => {
                self.workers.remove(&backend);
                eprintln!("{backend} worker crashed: {reason}");
            }
            LiveEvent::Paused { reason, .. } => self.end = Some(End::Paused(reason)),
            LiveEvent::Rejected { message } => eprintln!("refused: {message}"),
            _ => {}
        }
    }

    /// Resident memory of `lx` and of every running worker now.
    fn sample(&self, at_s: f64) -> MemorySample {
        let mut rss_bytes = BTreeMap::new();
        if let Some(b) = resident_bytes(std::process::id()) {
            rss_bytes.insert("lx".to_string(), b);
        }
        for (backend, pid) in &self.workers {
            if let Some(b) = resident_bytes(*pid) {
                rss_bytes.insert(format!("worker {backend}"), b);
            }
        }
        MemorySample { at_s, requests: self.completed, rss_bytes }
    }

    fn status_line(&self, sample: &MemorySample) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} ms"));
        let figures = match &self.tick {
            Some(r) => format!(
                "{}: TTFT p50 {} p95 {}, {} tok/s, {} in flight",
                r.backend,
                ms(r.ttft_p50_ms),
                ms(r.ttft_p95_ms),
                r.throughput_tps.map_or("-".to_string(), |t| format!("{t:.1}")),
                r.in_flight
            ),
            None => "loading".to_string(),
        };
        let memory: Vec<String> = sample.rss_bytes.iter().map(|(k, b)| format!("{k} {}", mib(*b))).collect();
        format!("{:>6.0} s  {:>7} requests  {figures}  |  RSS {}", sample.at_s, self.completed, memory.join(", "))
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Each process's resident memory after warm-up: its first and last reading and the range
/// between, as a share of the first.
fn memory_report(samples: &[MemorySample]) -> Vec<String> {
    let Some(last) = samples.last() else { return Vec::new() };
    let after = last.at_s * WARMUP_SHARE;
    let mut lines = vec![format!("resident memory after warm-up (from {after:.0} s of {:.0} s):", last.at_s)];
    for name in &last.rss_bytes.keys().cloned().collect::<Vec<_>>() {
        let seen: Vec<u64> = samples.iter().filter(|s| s.at_s >= after).filter_map(|s| s.rss_bytes.get(name).copied()).collect();
        let (Some(&first), Some(&end)) = (seen.first(), seen.last()) else { continue };
        let (lo, hi) = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
        let pct = |v: u64| 100.0 * (v as f64 - first as f64) / first as f64;
        lines.push(format!(
            "  {name}: {} -> {} ({:+.1}%), range {} .. {} ({:.1}% of the first), {} samples",
            mib(first),
            mib(end),
            pct(end),
            mib(lo),
            mib(hi),
            100.0 * (hi - lo) as f64 / first as f64,
            seen.len()
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_s: f64, lx: u64, worker: u64) -> MemorySample {
        let rss_bytes = BTreeMap::from([("lx".to_string(), lx << 20), ("worker llama".to_string(), worker << 20)]);
        MemorySample { at_s, requests: at_s as u64, rss_bytes }
    }

    #[test]
    fn memory_is_judged_after_the_warm_up() {
        // The first tenth (warm-up) grows; afterwards lx is flat and the worker grows 10%.
        let samples = [sample(0.0, 10, 100), sample(5.0, 20, 200), sample(10.0, 40, 300), sample(50.0, 40, 315), sample(100.0, 40, 330)];
        let report = memory_report(&samples).join("\n");
        assert!(report.contains("from 10 s of 100 s"), "{report}");
        assert!(report.contains("lx: 40.0 MiB -> 40.0 MiB (+0.0%), range 40.0 MiB .. 40.0 MiB (0.0% of the first), 3 samples"), "{report}");
        assert!(report.contains("worker llama: 300.0 MiB -> 330.0 MiB (+10.0%)"), "{report}");
        assert!(memory_report(&[]).is_empty());
    }
}
