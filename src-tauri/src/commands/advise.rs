//! "Advise": `lx advise` in the app (the same presets, searches, plans, budget and
//! confirmation), on a thread of its own, each trial streamed to the UI and the evidence
//! sent when it ends. The run file is written after every trial, like a sweep's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_local::advise::AdviseJob;
use lx_engine::scheduler::Policy;
use lx_decide::advise::Request;
use lx_decide::preset::{Preset, BUILT_IN};
use lx_run::sweep::SweepObserver;
use lx_results::decision::{Advice, Axis, DeadlineRecord, PresetRecord, SearchRecord};
use lx_results::printers::Printer;
use lx_results::results::PointResult;
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::state::{run_file_name, AppState, Locked, Sweep};

/// What the advisor is doing. Sent on the channel `advise_start` takes.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AdviseEvent {
    /// Measuring began: the preset, where the run file goes, the budget.
    Started {
        preset: PresetRecord,
        #[ts(type = "string")]
        path: PathBuf,
        budget_s: f64,
    },
    /// A backend is loading (a server is being asked for its model).
    Loading { backend: String },
    /// A trial ended: its backend, its test (arrival rate or clients), the share of its
    /// requests that met the objectives, and the time spent of the budget. `stopped`: the
    /// user stopped it, and it does not count.
    Trial { backend: String, test: String, slo_met: Option<f64>, errors: usize, stopped: bool, elapsed_s: f64, budget_s: f64 },
    /// The recommendation and the evidence it rests on.
    Finished {
        advice: Advice,
        searches: Vec<SearchRecord>,
        deadlines: Vec<DeadlineRecord>,
        /// The advice as `lx advise` prints it.
        lines: Vec<String>,
        stopped: bool,
    },
    /// It could not finish (cancelled runs finish, marked stopped).
    Failed { message: String },
}

/// The built-in presets, as the picker lists them.
#[tauri::command]
pub async fn advise_presets() -> CmdResult<Vec<PresetRecord>> {
    BUILT_IN.iter().map(|(name, _)| Preset::load(name).map(|p| p.record()).map_err(|e| CmdError::Sweep(e.to_string()))).collect()
}

/// Prints nothing: the app shows trials as they come through the observer.
struct NoTable;
impl Printer for NoTable {
    fn point(&mut self, _point: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
}

struct Progress {
    channel: Channel<AdviseEvent>,
    /// The user's stop: a trial that ends after it was raised was cut short by it.
    stop: Arc<std::sync::atomic::AtomicBool>,
    started: Instant,
    budget_s: f64,
}

impl lx_client::traffic::Observer for Progress {}

impl SweepObserver for Progress {
    fn loading(&mut self, backend: &str) {
        let _ = self.channel.send(AdviseEvent::Loading { backend: backend.into() });
    }
    fn point_done(&mut self, point: &PointResult) {
        let _ = self.channel.send(AdviseEvent::Trial {
            backend: point.backend.clone(),
            test: point.test_name(),
            slo_met: point.slo_met,
            errors: point.errors,
            stopped: self.stop.load(std::sync::atomic::Ordering::SeqCst),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            budget_s: self.budget_s,
        });
    }
}

/// Advise on `preset` (a built-in name) among `backends` (backends of this build and servers
/// the user added) within `budget_s` seconds, as `lx advise` does; returns the run file's
/// path. Live mode must be stopped first; `sweep_cancel` stops it (what was measured is kept).
///
/// Events on `on_event`: `started`, `loading`, `trial` per trial, then `finished` or `failed`.
#[tauri::command]
pub async fn advise_start(state: State<'_, AppState>, preset: String, backends: Vec<String>, budget_s: f64, on_event: Channel<AdviseEvent>) -> CmdResult<String> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before advising".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep, tuning or advice is already running".into()));
    }
    if !(budget_s.is_finite() && budget_s >= 30.0) {
        return Err(CmdError::Sweep("the advice's budget must be at least 30 seconds".into()));
    }
    let preset = Preset::load(&preset).map_err(|e| CmdError::Sweep(e.to_string()))?;
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let servers: Vec<String> = state.servers.locked().iter().map(|s| s.name.clone()).collect();
    let plan = super::sweep::with_backends(lx_run::sweep::SweepPlan { backends, ..Default::default() }, &servers)?;
    let request = Request {
        preset,
        candidates: plan.backends,
        servers: plan.servers,
        axis: Axis::Rate,
        job: None,
        policies: vec![Policy::Continuous],
        most_clients: 16,
        budget: Duration::from_secs_f64(budget_s),
    };
    let spawn = state.spawner(&model, lx_local::profile::Use::Measure);
    let mut job = AdviseJob::new(Arc::clone(&model.open), request, 0, 0, vec!["latency-explorer".into(), "advise".into()], spawn).map_err(|e| CmdError::Sweep(format!("{e:#}")))?;
    let path: PathBuf = state.runs_dir.join(run_file_name("advise", job.run.started_unix_ms / 1000));
    job.out = Some(path.clone());
    let stop = Arc::clone(&job.control.stop);
    let _ = on_event.send(AdviseEvent::Started { preset: job.request.preset.record(), path: path.clone(), budget_s });
    let mut progress = Progress { channel: on_event.clone(), stop: Arc::clone(&stop), started: Instant::now(), budget_s };
    let thread = std::thread::Builder::new()
        .name("lx-advise".into())
        .spawn(move || match job.run(&mut NoTable, &mut progress) {
            (run, Ok(advice)) => drop(on_event.send(AdviseEvent::Finished {
                lines: lx_decide::advise::lines(&advice),
                advice,
                searches: run.decisions.searches,
                deadlines: run.decisions.deadlines,
                stopped: run.stopped,
            })),
            (_, Err(e)) => drop(on_event.send(AdviseEvent::Failed { message: format!("{e:#}") })),
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the advice: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    Ok(path.display().to_string())
}

/// Stop advising: the trial in flight is cancelled; the run file keeps every trial measured
/// and is marked stopped. Returns once the advice's thread has ended.
#[tauri::command]
pub async fn advise_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    super::sweep::sweep_cancel(state).await
}
