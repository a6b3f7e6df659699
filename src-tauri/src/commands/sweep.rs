//! Sweeps: the engine's `run_sweep` (the same grid, points and run files as `lx sweep`),
//! on a thread of its own, with progress streamed to the UI.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::BackendInfo;
use lx_engine::load::{Observer, PointSpec, RequestRecord, RunControl};
use lx_engine::printers::Printer;
use lx_engine::results::{PointResult, RunFile};
use lx_engine::scheduler::Policy;
use lx_engine::sweep::{run_sweep, Length, SweepObserver, SweepPlan};
use serde::Deserialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::events::{PointFigures, SweepEvent};
use crate::state::{run_file_name, AppState, Sweep, Throttle};

/// A sweep as the UI asks for it (camelCase); every list is a dimension of the grid.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepRequest {
    /// Backends (`llama`, `candle`, `mlx`).
    pub backends: Vec<String>,
    /// Policies.
    pub policies: Vec<Policy>,
    /// Prompt lengths, tokens.
    pub prompt_tokens: Vec<u32>,
    /// Concurrencies.
    pub concurrency: Vec<usize>,
    /// Output lengths, tokens.
    pub max_tokens: Vec<u32>,
    /// Measured requests per point.
    pub requests: usize,
    /// Warm-up requests per point; default: the largest concurrency (as `lx sweep`).
    #[serde(default)]
    pub warmup: Option<usize>,
    /// Compute threads (0: auto, one core left for the window where that is needed).
    #[serde(default)]
    pub threads: usize,
    /// `chunked`: prompt tokens per pass.
    #[serde(default = "default_chunk")]
    pub chunk_tokens: usize,
}

fn default_chunk() -> usize {
    lx_engine::scheduler::DEFAULT_CHUNK_TOKENS
}

impl SweepRequest {
    /// The engine's plan: this grid, everything else as `lx sweep` does it.
    pub fn plan(&self) -> CmdResult<SweepPlan> {
        let backends = self
            .backends
            .iter()
            .map(|b| lx_backends::canonical(b).map(String::from))
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| CmdError::Sweep(e.to_string()))?;
        Ok(SweepPlan {
            backends,
            policies: self.policies.clone(),
            prompt_tokens: self.prompt_tokens.iter().copied().map(Length::fixed).collect(),
            warmup: self.warmup.unwrap_or_else(|| self.concurrency.iter().copied().max().unwrap_or(1)),
            concurrency: self.concurrency.clone(),
            max_tokens: self.max_tokens.iter().copied().map(Length::fixed).collect(),
            requests: self.requests,
            threads: super::app_threads(self.threads),
            chunk_tokens: self.chunk_tokens,
            ..SweepPlan::default()
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
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &PointSpec) {
        self.send(SweepEvent::PointStarted { index, total, backend: backend.into(), policy, spec: spec.clone() });
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
    if state.live.lock().expect("poisoned").is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before a sweep".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep is already running".into()));
    }
    let model = state.model.lock().expect("poisoned").clone().ok_or(CmdError::NoModel)?;
    let plan = request.plan()?;
    plan.validate(Some(model.open.context_length)).map_err(CmdError::Sweep)?;

    let control = RunControl::default();
    let stop = Arc::clone(&control.stop);
    let hardware = lx_backends::hardware_report();
    let settings = serde_json::to_value(&plan).map_err(|e| CmdError::Sweep(e.to_string()))?;
    let run = RunFile::new(vec!["latency-explorer".into(), "sweep".into()], hardware, model.open.record(), settings);
    let path: PathBuf = state.runs_dir.join(run_file_name("run", run.started_unix_ms / 1000));
    let total_points = plan.points().len();
    let total_requests = total_points * plan.requests;
    let _ = on_event.send(SweepEvent::Started { path: path.clone(), total_points, total_requests });

    let out = path.clone();
    let thread = std::thread::Builder::new()
        .name("lx-sweep".into())
        .spawn(move || {
            let mut run = run;
            let prompt = |n: u32, i: usize| model.prompts.prompt(n as usize, i as u64);
            let ctx = model.open.sweep_context(&prompt, Some(out.clone()), control);
            let mut progress = Progress {
                channel: on_event.clone(),
                done: 0,
                total: total_requests,
                points_done: 0,
                per_point: plan.requests,
                throttle: Throttle::new(Duration::from_millis(50)),
            };
            match run_sweep(&plan, &ctx, &mut run, &mut NoTable, &mut progress) {
                Ok(failed_points) => {
                    let _ = on_event.send(SweepEvent::Finished { path: out, stopped: run.stopped, failed_points });
                }
                Err(e) => {
                    let _ = on_event.send(SweepEvent::Failed { message: format!("{e:#}") });
                }
            }
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the sweep thread: {e}")))?;
    *state.sweep.lock().expect("poisoned") = Some(Sweep { stop, thread });
    *state.last_run.lock().expect("poisoned") = Some(path.clone());
    Ok(path.display().to_string())
}

/// Cancel the running sweep: requests in flight are cancelled, the run file keeps every
/// completed point and is marked stopped. Returns once the sweep thread has ended.
#[tauri::command]
pub async fn sweep_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    let sweep = state.sweep.lock().expect("poisoned").take();
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
    let path = state.last_run.lock().expect("poisoned").clone().ok_or_else(|| CmdError::Sweep("no sweep has run yet".into()))?;
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
        let plan = r.plan().unwrap();
        assert_eq!(plan.backends, vec!["llama"]);
        assert_eq!(plan.warmup, 4);
        assert_eq!(plan.chunk_tokens, lx_engine::scheduler::DEFAULT_CHUNK_TOKENS);
        assert_eq!(plan.threads, lx_engine::hardware::threads_beside_a_window(), "auto leaves the window a core where needed");
        assert_eq!(SweepRequest { threads: 3, ..r.clone() }.plan().unwrap().threads, 3);
        assert_eq!(plan.points().len(), 2 * 2 * 2);
        let bad = SweepRequest { backends: vec!["nope".into()], ..r };
        assert!(matches!(bad.plan(), Err(CmdError::Sweep(m)) if m.contains("unknown backend")));
    }
}
