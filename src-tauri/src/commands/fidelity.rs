//! "Fidelity": `lx fidelity` in the app, a quick run on the open model (two chunks of the
//! shipped text by default), on a thread of its own, each candidate streamed to the UI as it
//! is measured. It answers whether a faster setting still computes the same model: its KL
//! divergence from llama.cpp with an f16 cache beside its decode speed and memory.

use std::path::PathBuf;
use std::sync::Arc;

use lx_local::fidelity::Asked;
use lx_run::fidelity::{Plan, Watch};
use lx_results::studies::fidelity::{Candidate, FidelityRun};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::state::{run_file_name, AppState, Locked, Sweep};

/// Chunks of the text a run from the app scores unless asked otherwise: enough for a
/// divergence to read (about 500 positions), quick enough to wait for.
pub const QUICK_CHUNKS: usize = 2;

/// What a fidelity run is doing. Sent on the channel `fidelity_start` takes.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FidelityEvent {
    /// What is measured now (the reference, or a candidate's backend and setting), with how
    /// many of the run's measurements (the reference and every candidate) have ended.
    Status { what: String, done: usize, of: usize },
    /// A candidate was measured, or failed (its `error` says why).
    Measured { candidate: Candidate },
    /// The run ended (all measured, or cancelled: `run.stopped`); its file is at `path`.
    Finished { run: FidelityRun, path: String },
    /// Nothing could be measured (no text, a reference that does not run), and why.
    Failed { message: String },
}

/// Turns the driver's progress into events on the UI's channel.
struct ToChannel {
    channel: Channel<FidelityEvent>,
    done: usize,
    of: usize,
}

impl Watch for ToChannel {
    fn status(&mut self, what: &str) {
        let _ = self.channel.send(FidelityEvent::Status { what: what.into(), done: self.done, of: self.of });
        // The driver says what it starts; the next status comes once it has ended.
        self.done += 1;
    }
    fn measured(&mut self, candidate: &Candidate) {
        let _ = self.channel.send(FidelityEvent::Measured { candidate: candidate.clone() });
    }
}

/// Measure the fidelity of every backend and setting of this build on the open model, as
/// `lx fidelity --chunks 2` does (`backends`: canonical names, every backend of the build
/// when empty; `chunks`: how much of the text to score). Returns the run file's path in the
/// runs folder. Live mode and sweeps must be stopped first: they would share the cores and
/// move the speed figures; `fidelity_cancel` stops it (what was measured is kept).
///
/// Events on `on_event`: `status` before each measurement, `measured` after each candidate,
/// then `finished` or `failed`.
#[tauri::command]
pub async fn fidelity_start(state: State<'_, AppState>, backends: Vec<String>, chunks: Option<usize>, on_event: Channel<FidelityEvent>) -> CmdResult<String> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before measuring fidelity".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep, tuning, advice or fidelity run is already running".into()));
    }
    if chunks == Some(0) {
        return Err(CmdError::Sweep("a fidelity run scores at least one chunk of the text".into()));
    }
    let backends = backends.iter().map(|b| lx_local::canonical(b).map(str::to_string)).collect::<anyhow::Result<Vec<_>>>().map_err(|e| CmdError::Sweep(format!("{e:#}")))?;
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let path: PathBuf = state.runs_dir.join(run_file_name("fidelity", lx_engine::date::now_unix_ms() / 1000));
    let out = path.clone();
    let plan = Plan { chunks: Some(chunks.unwrap_or(QUICK_CHUNKS)), ..Plan::default() };
    let mut command = vec!["latency-explorer".to_string(), "fidelity".into(), "--chunks".into(), plan.chunks.unwrap_or(QUICK_CHUNKS).to_string()];
    if !backends.is_empty() {
        command.extend(["--backends".into(), backends.join(",")]);
    }
    let asked = Asked { backends, ..Asked::default() };
    // Building the job reads the text and may make the draft model (seconds): on the run's
    // thread, so that the stop flag exists before it starts and a failure is an event.
    let control = lx_client::traffic::RunControl::default();
    let stop = Arc::clone(&control.stop);
    let thread = std::thread::Builder::new()
        .name("lx-fidelity".into())
        .spawn(move || {
            let send = |e: FidelityEvent| drop(on_event.send(e));
            let mut job = match lx_local::fidelity::job(&model.open, &asked, plan, command) {
                Ok(job) => job,
                Err(e) => return send(FidelityEvent::Failed { message: format!("{e:#}") }),
            };
            job.out = Some(out.clone());
            job.control = control;
            let mut watch = ToChannel { channel: on_event.clone(), done: 0, of: job.entries.len() + 1 };
            match lx_run::fidelity::run(&job, &mut watch) {
                Ok(run) => send(FidelityEvent::Finished { run, path: out.display().to_string() }),
                Err(message) => send(FidelityEvent::Failed { message }),
            }
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the fidelity run: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    Ok(path.display().to_string())
}

/// Stop the fidelity run: the candidate in flight is cancelled (recorded as stopped), the run
/// file keeps every candidate measured and is marked stopped. Returns once its thread ended.
#[tauri::command]
pub async fn fidelity_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    super::sweep::sweep_cancel(state).await
}
