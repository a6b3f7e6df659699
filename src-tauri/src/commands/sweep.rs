//! Sweeps: the engine's `run_sweep` (the same grid, points and run files as `lx sweep`),
//! on a thread of its own, with progress streamed to the UI.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_core::backend::BackendInfo;
use lx_core::records::RequestRecord;
use lx_core::traffic::{Observer, PointSpec};
use lx_results::printers::Printer;
use lx_results::results::{PointResult, RunFile, Slo};
use lx_core::scheduler::Policy;
use lx_backends::sweep::SweepJob;
use lx_drivers::sweep::{Length, SweepObserver, SweepPlan};
use serde::Deserialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::events::{PointFigures, SweepEvent};
use crate::state::{run_file_name, AppState, Locked, Sweep, Throttle};

/// A prompt or output length as the UI sends it: a number, or text (`64`, `64..512`).
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
#[serde(untagged)]
pub enum LengthArg {
    Tokens(u32),
    Text(String),
}

impl LengthArg {
    fn length(&self) -> CmdResult<Length> {
        match self {
            LengthArg::Tokens(n) => Ok(Length::fixed(*n)),
            LengthArg::Text(t) => t.parse().map_err(|e| CmdError::Sweep(format!("length '{t}': {e}"))),
        }
    }
}

/// A sweep as the UI asks for it (camelCase): every option `lx sweep` has for the engine's
/// backends; every list is a dimension of the grid. Options left out take `lx sweep`'s
/// defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SweepRequest {
    /// Backends (`llama`, `candle`, `mlx`).
    pub backends: Vec<String>,
    /// Policies.
    pub policies: Vec<Policy>,
    /// Prompt lengths, tokens: fixed or ranges.
    pub prompt_tokens: Vec<LengthArg>,
    /// Concurrencies.
    pub concurrency: Vec<usize>,
    /// Output lengths, tokens: fixed or ranges.
    pub max_tokens: Vec<LengthArg>,
    /// Measured requests per point.
    pub requests: usize,
    /// Warm-up requests per point; default: the largest concurrency (as `lx sweep`).
    #[serde(default)]
    pub warmup: Option<usize>,
    /// Compute threads (0: auto: this machine's tuned choice, else one core left for the
    /// window where that is needed).
    #[serde(default)]
    pub threads: usize,
    /// `chunked`: prompt tokens per pass.
    #[serde(default)]
    pub chunk_tokens: Option<usize>,
    /// Tokens already in the context before each prompt (default: none).
    #[serde(default)]
    pub depths: Vec<u32>,
    /// Open-loop Poisson arrival rates, requests/s; none: closed loop.
    #[serde(default)]
    pub rates: Vec<f64>,
    /// Open loop: most requests in flight.
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    #[serde(default)]
    pub seed: u64,
    /// Seconds per point at most.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Shared prefix of every prompt, tokens.
    #[serde(default)]
    pub prefix_tokens: u32,
    /// Prefix caching off and/or on (default: off).
    #[serde(default)]
    pub prefix_cache: Vec<bool>,
    #[serde(default)]
    pub max_batch_seqs: Option<usize>,
    #[serde(default)]
    pub max_batch_tokens: Option<usize>,
    #[serde(default)]
    pub slo_ttft_ms: Option<f64>,
    /// Default: reading pace.
    #[serde(default)]
    pub slo_decode_tps: Option<f64>,
    /// Each point measured this many times (default 1).
    #[serde(default)]
    pub repetitions: Option<usize>,
    #[serde(default)]
    pub stop_at_eos: bool,
    /// Layers offloaded to the GPU (`None`: all that fit, `0`: none), as `--gpu-layers`.
    #[serde(default)]
    pub gpu_layers: Option<u32>,
    /// Seconds of silence before a worker is given up (default [`lx_core::defaults::HANG_TIMEOUT_S`]), as `--hang-timeout`.
    #[serde(default)]
    pub hang_timeout_s: Option<f64>,
    /// Leave out the ceilings and their probe, as `--no-ceilings`.
    #[serde(default)]
    pub no_ceilings: bool,
}

impl SweepRequest {
    /// The engine's plan: this grid, everything else as `lx sweep` does it. A backend may
    /// also be one of `servers` (added by the user), by its name.
    pub fn plan(&self, servers: &[String]) -> CmdResult<SweepPlan> {
        let backends = self
            .backends
            .iter()
            .map(|b| if servers.contains(b) { Ok(b.clone()) } else { lx_backends::canonical(b).map(String::from) })
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| CmdError::Sweep(e.to_string()))?;
        let servers = servers.iter().filter(|s| backends.contains(s)).cloned().collect();
        let lengths = |v: &[LengthArg]| v.iter().map(LengthArg::length).collect::<CmdResult<Vec<_>>>();
        let d = SweepPlan::default();
        Ok(SweepPlan {
            backends,
            servers,
            policies: self.policies.clone(),
            prompt_tokens: lengths(&self.prompt_tokens)?,
            warmup: self.warmup.unwrap_or_else(|| self.concurrency.iter().copied().max().unwrap_or(1)),
            concurrency: self.concurrency.clone(),
            max_tokens: lengths(&self.max_tokens)?,
            requests: self.requests,
            threads: self.threads,
            chunk_tokens: self.chunk_tokens.unwrap_or(d.chunk_tokens),
            depths: if self.depths.is_empty() { d.depths.clone() } else { self.depths.clone() },
            rates: self.rates.clone(),
            max_in_flight: self.max_in_flight,
            seed: self.seed,
            duration_s: self.duration_s,
            prefix_tokens: self.prefix_tokens,
            prefix_cache: if self.prefix_cache.is_empty() { d.prefix_cache.clone() } else { self.prefix_cache.clone() },
            max_batch_seqs: self.max_batch_seqs,
            max_batch_tokens: self.max_batch_tokens,
            slo: Slo { ttft_ms: self.slo_ttft_ms, decode_tps: self.slo_decode_tps.or(d.slo.decode_tps) },
            repetitions: self.repetitions.unwrap_or(d.repetitions),
            stop_at_eos: self.stop_at_eos,
            gpu_layers: self.gpu_layers,
            ..d
        })
    }
}

/// Prints nothing: the app shows points as they come through the observer.
struct NoTable;
impl Printer for NoTable {
    fn point(&mut self, _point: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
}

/// Turns the engine's sweep callbacks into [`SweepEvent`]s.
struct Progress {
    channel: Channel<SweepEvent>,
    done: usize,
    total: usize,
    points_done: usize,
    per_point: usize,
    throttle: Throttle,
    /// The run's probe, when it has ceilings: each loaded backend's device is looked up in it.
    limits: Option<lx_machine::probe::Probe>,
}

impl Progress {
    fn send(&self, e: SweepEvent) {
        let _ = self.channel.send(e);
    }
}

impl Observer for Progress {
    fn done(&mut self, _record: &RequestRecord) {
        self.done += 1;
        if self.throttle.ready(Instant::now()) || self.done == self.total {
            self.send(SweepEvent::Progress { done: self.done, total: self.total });
        }
    }
}

impl SweepObserver for Progress {
    fn loading(&mut self, backend: &str) {
        self.send(SweepEvent::Loading { backend: backend.into() });
    }
    fn loaded(&mut self, backend: &str, info: &BackendInfo, load_ms: f64) {
        self.send(SweepEvent::Loaded { backend: backend.into(), info: info.clone(), load_ms });
        if let Some(probe) = &self.limits {
            self.send(SweepEvent::DeviceCeilings { backend: backend.into(), device: info.device.clone(), limits: probe.for_device(&info.device).cloned() });
        }
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &PointSpec) {
        self.send(SweepEvent::PointStarted { index, total, backend: backend.into(), policy, spec: spec.clone() });
    }
    fn probing(&mut self) {
        self.send(SweepEvent::Probing);
    }
    fn ceilings(&mut self, basis: Result<(&lx_machine::probe::Probe, &lx_machine::roofline::ModelCost), &anyhow::Error>) {
        match basis {
            Ok((limits, cost)) => {
                self.send(SweepEvent::Ceilings { weight_bytes_per_step: cost.weight_bytes_per_step, busy: limits.busy_note() });
                self.limits = Some(limits.clone());
            }
            Err(e) => self.send(SweepEvent::NoCeilings { message: format!("{e:#}") }),
        }
    }
    fn point_done(&mut self, point: &PointResult) {
        // A point that failed before measuring reported no requests: count it as done, so
        // the bar still reaches the end.
        self.points_done += 1;
        self.done = self.done.max(self.points_done * self.per_point).min(self.total);
        self.send(SweepEvent::Progress { done: self.done, total: self.total });
        self.send(SweepEvent::PointDone { point: PointFigures::from(point) });
    }
}

/// Start a sweep on the open model; returns the run file's path (rewritten after every
/// point). Live mode must be stopped first: the two would compete for the machine.
///
/// Events on `on_event`: `started`, `loading`, `loaded`, `pointStarted`, `progress`
/// (at most 20 a second), `pointDone`, then `finished` or `failed`. See [`SweepEvent`].
#[tauri::command]
pub async fn sweep_start(state: State<'_, AppState>, request: SweepRequest, on_event: Channel<SweepEvent>) -> CmdResult<String> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before a sweep".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep is already running".into()));
    }
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let servers: Vec<String> = state.servers.locked().iter().map(|s| s.name.clone()).collect();
    let plan = request.plan(&servers)?;

    let spawn = state.spawner(&model, lx_backends::tune::Use::Measure);
    let mut job = SweepJob::new(Arc::clone(&model.open), plan, vec!["latency-explorer".into(), "sweep".into()], spawn).map_err(|e| CmdError::Sweep(format!("{e:#}")))?;
    if let Some(s) = request.hang_timeout_s {
        if !(s > 0.0 && s.is_finite()) {
            return Err(CmdError::Sweep("the hang timeout must be a positive number of seconds".into()));
        }
        job.control.hang_timeout = std::time::Duration::from_secs_f64(s);
    }
    job.ceilings = !request.no_ceilings;
    let path: PathBuf = state.runs_dir.join(run_file_name("run", job.run.started_unix_ms / 1000));
    job.out = Some(path.clone());
    let stop = Arc::clone(&job.control.stop);
    let total_points = job.total_points();
    let total_requests = total_points * job.plan.requests;
    let _ = on_event.send(SweepEvent::Started { path: path.clone(), total_points, total_requests });

    let mut progress = Progress {
        channel: on_event.clone(),
        done: 0,
        total: total_requests,
        points_done: 0,
        per_point: job.plan.requests,
        throttle: Throttle::new(Duration::from_millis(50)),
        limits: None,
    };
    let out = path.clone();
    let thread = std::thread::Builder::new()
        .name("lx-sweep".into())
        .spawn(move || match job.run(&mut NoTable, &mut progress) {
            (run, Ok(failed_points)) => drop(on_event.send(SweepEvent::Finished { path: out, stopped: run.stopped, failed_points })),
            (_, Err(e)) => drop(on_event.send(SweepEvent::Failed { message: format!("{e:#}") })),
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the sweep thread: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    *state.last_run.locked() = Some(path.clone());
    Ok(path.display().to_string())
}

/// Cancel the running sweep: requests in flight are cancelled, the run file keeps every
/// completed point and is marked stopped. Returns once the sweep thread has ended.
#[tauri::command]
pub async fn sweep_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    let sweep = state.sweep.locked().take();
    if let Some(s) = sweep {
        s.stop.store(true, Ordering::SeqCst);
        super::blocking(move || {
            let _ = s.thread.join();
        })
        .await?;
    }
    Ok(())
}

/// The points of the last sweep's run file.
pub(crate) fn last_run_points(state: &AppState) -> CmdResult<Vec<PointResult>> {
    let path = state.last_run.locked().clone().ok_or_else(|| CmdError::Sweep("no sweep has run yet".into()))?;
    let run = RunFile::read(&path).map_err(|e| CmdError::Io(format!("{e:#}")))?;
    Ok(run.points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_from_the_ui_becomes_the_engine_plan_with_cli_defaults() {
        let r: SweepRequest = serde_json::from_value(serde_json::json!({
            "backends": ["llama.cpp"], "policies": ["serial", "continuous"], "promptTokens": [64, 256],
            "concurrency": [1, 4], "maxTokens": [32], "requests": 8
        }))
        .unwrap();
        let plan = r.plan(&[]).unwrap();
        assert_eq!(plan.backends, vec!["llama"]);
        assert_eq!(plan.warmup, 4);
        assert_eq!(plan.chunk_tokens, lx_core::defaults::CHUNK_TOKENS);
        assert_eq!(plan.threads, 0, "auto stays auto: the spawner takes the tuned choice, else leaves the window a core");
        assert_eq!(SweepRequest { threads: 3, ..r.clone() }.plan(&[]).unwrap().threads, 3);
        assert_eq!(plan.points().len(), 2 * 2 * 2);
        let bad = SweepRequest { backends: vec!["nope".into()], ..r.clone() };
        assert!(matches!(bad.plan(&[]), Err(CmdError::Sweep(m)) if m.contains("unknown backend")));
        assert_eq!(plan, SweepPlan { threads: plan.threads, ..SweepPlan { backends: vec!["llama".into()], policies: vec![Policy::Serial, Policy::Continuous], prompt_tokens: vec![Length::fixed(64), Length::fixed(256)], max_tokens: vec![Length::fixed(32)], ..SweepPlan::default() } });

        // A server the user added is a backend by its name, measured once per point.
        let with_server = SweepRequest { backends: vec!["llama.cpp".into(), "lab".into()], ..r };
        let plan = with_server.plan(&["lab".into(), "other".into()]).unwrap();
        assert_eq!((plan.backends.clone(), plan.servers.clone()), (vec!["llama".to_string(), "lab".into()], vec!["lab".to_string()]));
        // The server once per prompt length and concurrency, not once per policy.
        assert_eq!(plan.points().len(), 2 * 2 * 2 + 2 * 2);
        assert!(matches!(with_server.plan(&[]), Err(CmdError::Sweep(m)) if m.contains("unknown backend")));
    }

    #[test]
    fn the_ui_can_ask_for_everything_lx_sweep_does() {
        let r: SweepRequest = serde_json::from_value(serde_json::json!({
            "backends": ["candle"], "policies": ["chunked"], "promptTokens": ["64..512", "1024"], "concurrency": [4],
            "maxTokens": ["8..32"], "requests": 6, "depths": [0, 256], "rates": [1.5, 3.0], "maxInFlight": 8, "seed": 7, "durationS": 30.0,
            "prefixTokens": 32, "prefixCache": [false, true], "maxBatchSeqs": 2, "maxBatchTokens": 1024, "sloTtftMs": 500.0,
            "sloDecodeTps": 10.0, "repetitions": 3, "chunkTokens": 128, "stopAtEos": true, "gpuLayers": 0, "hangTimeoutS": 30.0,
            "noCeilings": true
        }))
        .unwrap();
        let p = r.plan(&[]).unwrap();
        assert_eq!(p.prompt_tokens, [Length { from: Some(64), to: 512 }, Length::fixed(1024)]);
        assert_eq!(p.max_tokens, [Length { from: Some(8), to: 32 }]);
        assert_eq!((&p.rates, p.max_in_flight, p.seed, p.duration_s), (&vec![1.5, 3.0], Some(8), 7, Some(30.0)));
        assert_eq!((p.prefix_tokens, &p.prefix_cache), (32, &vec![false, true]));
        assert_eq!((p.max_batch_seqs, p.max_batch_tokens, p.repetitions, p.chunk_tokens, p.stop_at_eos), (Some(2), Some(1024), 3, 128, true));
        assert_eq!(p.slo, Slo { ttft_ms: Some(500.0), decode_tps: Some(10.0) });
        assert_eq!(p.depths, [0, 256]);
        assert_eq!((p.gpu_layers, r.hang_timeout_s, r.no_ceilings), (Some(0), Some(30.0), true));
        // A depth fills and caches its own prefix: not with a shared prefix as well.
        assert!(p.validate(Some(4096)).unwrap_err().contains("--depth"));
        let p = SweepPlan { prefix_tokens: 0, prefix_cache: vec![false], ..p };
        assert_eq!(p.validate(Some(4096)), Ok(()));
        let bad = SweepRequest { prompt_tokens: vec![LengthArg::Text("64..x".into())], ..r };
        assert!(matches!(bad.plan(&[]), Err(CmdError::Sweep(m)) if m.contains("'64..x'")));
    }
}
