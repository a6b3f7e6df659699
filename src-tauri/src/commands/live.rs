//! Live mode: start, change, retry, stop, save. The engine's [`LiveSession`] does all the
//! measuring; these commands only own it and forward its event batches to the UI.

use std::sync::{Arc, Mutex};

use lx_engine::backend::BackendInfo;
use lx_run::live::{LiveEvent, LiveSession, LiveSettings};
use lx_machine::roofline::PointCeiling;
use lx_results::bench::sustained::Sustained;
use lx_results::bench::Shape;
use lx_results::results::PointResult;
use tauri::ipc::Channel;
use tauri::State;

use super::blocking;
use crate::error::{CmdError, CmdResult};
use crate::state::{run_file_name, AppState, Live, Locked};

/// Start live mode on the open model with `settings`, replacing a session already running.
///
/// Events arrive on `on_event` as batches (`LiveEvent[]`, at most one batch per
/// `settings.batch_ms`; the app asks for `lx_engine::defaults::APP_BATCH_MS`): `settingsApplied`, `backendStatus`,
/// `requestStarted`, `requestAdmitted`, `requestPrefill`, `previewTokens`, `requestDone`,
/// `summary`, `tick`, `workerCrashed`, `paused`, `rejected`, `stopped`. See
/// `lx_run::live::LiveEvent` for every field.
#[tauri::command]
pub async fn live_start(state: State<'_, AppState>, settings: LiveSettings, on_event: Channel<Vec<LiveEvent>>) -> CmdResult<()> {
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep is running: cancel it or wait for it to finish first".into()));
    }
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    // Checked before the running session stops: settings it refuses leave that one running.
    let checked = settings.clone().check(model.open.context_length).map_err(CmdError::live)?;
    stop_session(&state).await?;
    // The ceilings' basis, before any request is sent: the probe of this machine's limits
    // runs once per machine and build (a few seconds, then cached), and never beside a
    // measurement.
    let path = model.open.path.clone();
    let ceilings = blocking(move || lx_local::limits::ceilings_basis(&path, &mut || {})).await?.ok();

    let backends: Arc<Mutex<Vec<BackendInfo>>> = Arc::default();
    let seen = Arc::clone(&backends);
    let sink = Box::new(move |batch: Vec<LiveEvent>| {
        for e in &batch {
            if let LiveEvent::BackendStatus { info: Some(info), .. } = e {
                let mut seen = seen.locked();
                seen.retain(|b| b.name != info.name);
                seen.push(info.clone());
            }
        }
        // A closed window (or a reloaded page) drops the batch; the session carries on
        // until it is stopped.
        let _ = on_event.send(batch);
    });
    let spawner = state.spawner(&model, lx_local::profile::Use::Interactive);
    let session = LiveSession::start(checked, model.open.live_model(None), spawner, sink).map_err(CmdError::live)?;
    *state.live.locked() = Some(Live { session, settings, model, backends, ceilings });
    Ok(())
}

/// Apply new settings to the next requests (within a few ms; see `lx_run::live`).
#[tauri::command]
pub async fn live_update(state: State<'_, AppState>, settings: LiveSettings) -> CmdResult<()> {
    let mut live = state.live.locked();
    let live = live.as_mut().ok_or_else(|| CmdError::Live("live mode is not running".into()))?;
    live.session.update(settings.clone()).map_err(CmdError::live)?;
    live.settings = settings;
    Ok(())
}

/// The most this machine allows at the live setting on `backend`'s device, what the readout's
/// "% of ceiling" divides by: `None` before the backend has loaded, for a server (its device
/// is not this machine's), for a GPU (no GPU probe yet) or without a probe.
#[tauri::command]
pub async fn live_ceiling(state: State<'_, AppState>, backend: String) -> CmdResult<Option<PointCeiling>> {
    let live = state.live.locked();
    let Some(live) = live.as_ref() else { return Ok(None) };
    let Some((probe, cost)) = &live.ceilings else { return Ok(None) };
    let backends = live.backends.locked();
    let Some(limits) = backends.iter().find(|b| b.name == backend).and_then(|b| probe.for_device(&b.device)) else { return Ok(None) };
    let s = &live.settings;
    Ok(Some(cost.ceiling(limits, 0, s.prompt_tokens, s.max_tokens, s.concurrency)))
}

/// Start fresh workers for backends that failed or crashed.
#[tauri::command]
pub async fn live_retry(state: State<'_, AppState>) -> CmdResult<()> {
    let live = state.live.locked();
    live.as_ref().ok_or_else(|| CmdError::Live("live mode is not running".into()))?.session.retry().map_err(CmdError::live)
}

/// Stream the next request as the preview (the UI has shown the last one).
#[tauri::command]
pub async fn live_preview_next(state: State<'_, AppState>) -> CmdResult<()> {
    let live = state.live.locked();
    match live.as_ref() {
        Some(l) => l.session.next_preview().map_err(CmdError::live),
        None => Ok(()),
    }
}

/// Stop live mode: requests in flight are cancelled, workers shut down; what was measured
/// is kept for `live_save` and `export_csv`.
#[tauri::command]
pub async fn live_stop(state: State<'_, AppState>) -> CmdResult<()> {
    stop_session(&state).await
}

async fn stop_session(state: &State<'_, AppState>) -> CmdResult<()> {
    let live = state.live.locked().take();
    if let Some(live) = live {
        let backends = live.backends.locked().clone();
        let (model, settings, ceilings) = (Arc::clone(&live.model), live.settings.clone(), live.ceilings.clone());
        let points = blocking(move || live.session.stop()).await?;
        *state.last_live.locked() = Some(crate::state::LiveResults { points, model, settings, backends, ceilings });
    }
    Ok(())
}

/// Live results so far (running session first, else the last one), with what produced them.
pub(crate) fn live_results(state: &AppState) -> CmdResult<crate::state::LiveResults> {
    if let Some(l) = state.live.locked().as_ref() {
        let points = l.session.results().map_err(CmdError::live)?;
        let backends = l.backends.locked().clone();
        return Ok(crate::state::LiveResults { points, model: Arc::clone(&l.model), settings: l.settings.clone(), backends, ceilings: l.ceilings.clone() });
    }
    state
        .last_live
        .locked()
        .clone()
        .ok_or_else(|| CmdError::Live("nothing measured in live mode yet".into()))
}

/// Live mode's load read as a sustained run (what `lx bench --sustained` measures): the
/// setting measured longest this session, its requests cut into trials by when they ended,
/// and how far its decode rate fell from its first minute. `None` before a request ended.
#[tauri::command]
pub async fn live_sustained(state: State<'_, AppState>) -> CmdResult<Option<Sustained>> {
    let results = live_results(&state)?;
    blocking(move || sustained_of(&results.points)).await
}

/// The sustained run of the point with the most requests among `points`.
pub(crate) fn sustained_of(points: &[PointResult]) -> Option<Sustained> {
    let p = points.iter().max_by_key(|p| p.samples.len())?;
    let trial_s = lx_engine::defaults::SUSTAINED_TRIAL_S;
    let trials = lx_results::bench::sustained::trials_of_samples(&p.samples, trial_s);
    let end = trials.last()?.end_s;
    let shape = Shape { name: p.test_name(), prompt_tokens: p.prompt_tokens, max_tokens: p.max_tokens, clients: p.concurrency, requests: p.samples.len(), warmup: p.warmup };
    let sensors = vec!["clock and power over the same time: the strip under the tokens/s chart".to_string()];
    Some(Sustained::of(&p.backend, shape, end, trial_s, 0.0, trials, sensors, vec![]))
}

/// Save what live mode measured as a run file (the same schema `lx sweep` writes: one point
/// per backend and setting). Returns its path.
#[tauri::command]
pub async fn live_save(state: State<'_, AppState>) -> CmdResult<String> {
    let crate::state::LiveResults { points, model, settings, backends, ceilings } = live_results(&state)?;
    if points.is_empty() {
        return Err(CmdError::Live("no settled request yet: nothing to save".into()));
    }
    let dir = state.runs_dir.clone();
    blocking(move || -> CmdResult<String> {
        let mut run = model.open.live_run_file(vec!["latency-explorer".into(), "live".into()], &settings);
        run.backends = backends;
        (run.limits, run.model_cost) = ceilings.unzip();
        run.points = points;
        run.fill_ceilings();
        let path = dir.join(run_file_name("live", run.started_unix_ms / 1000));
        run.write_atomic(&path).map_err(|e| CmdError::Io(format!("{e:#}")))?;
        Ok(path.display().to_string())
    })
    .await?
}
