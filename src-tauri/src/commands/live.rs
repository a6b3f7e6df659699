//! Live mode: start, change, retry, stop, save. The engine's [`LiveSession`] does all the
//! measuring; these commands only own it and forward its event batches to the UI.

use std::sync::{Arc, Mutex};

use lx_engine::backend::BackendInfo;
use lx_engine::live::{LiveEvent, LiveSession, LiveSettings};
use tauri::ipc::Channel;
use tauri::State;

use super::{app_threads, blocking};
use crate::error::{CmdError, CmdResult};
use crate::state::{run_file_name, AppState, Live};

/// Start live mode on the open model with `settings`, replacing a session already running.
///
/// Events arrive on `on_event` as batches (`LiveEvent[]`, at most one batch per
/// `settings.batchMs`, 100 ms by default): `settingsApplied`, `backendStatus`,
/// `requestStarted`, `requestAdmitted`, `requestPrefill`, `previewTokens`, `requestDone`,
/// `summary`, `tick`, `workerCrashed`, `paused`, `rejected`, `stopped`. See
/// `lx_engine::live::LiveEvent` for every field.
#[tauri::command]
pub async fn live_start(state: State<'_, AppState>, mut settings: LiveSettings, on_event: Channel<Vec<LiveEvent>>) -> CmdResult<()> {
    settings.threads = app_threads(settings.threads);
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep is running: cancel it or wait for it to finish first".into()));
    }
    let model = state.model.lock().expect("poisoned").clone().ok_or(CmdError::NoModel)?;
    settings.validate(model.open.context_length).map_err(CmdError::Live)?;
    stop_session(&state).await?;

    let backends: Arc<Mutex<Vec<BackendInfo>>> = Arc::default();
    let seen = Arc::clone(&backends);
    let sink = Box::new(move |batch: Vec<LiveEvent>| {
        for e in &batch {
            if let LiveEvent::BackendStatus { info: Some(info), .. } = e {
                let mut seen = seen.lock().expect("poisoned");
                seen.retain(|b| b.name != info.name);
                seen.push(info.clone());
            }
        }
        // A closed window (or a reloaded page) drops the batch; the session carries on
        // until it is stopped.
        let _ = on_event.send(batch);
    });
    let spawner = state.spawner(&model);
    let session = LiveSession::start(settings.clone(), model.open.live_model(), spawner, sink).map_err(CmdError::Live)?;
    *state.live.lock().expect("poisoned") = Some(Live { session, settings, model, backends });
    Ok(())
}

/// Apply new settings to the next requests (within a few ms; see `lx_engine::live`).
#[tauri::command]
pub async fn live_update(state: State<'_, AppState>, mut settings: LiveSettings) -> CmdResult<()> {
    settings.threads = app_threads(settings.threads);
    let mut live = state.live.lock().expect("poisoned");
    let live = live.as_mut().ok_or_else(|| CmdError::Live("live mode is not running".into()))?;
    live.session.update(settings.clone()).map_err(CmdError::Live)?;
    live.settings = settings;
    Ok(())
}

/// Start fresh workers for backends that failed or crashed.
#[tauri::command]
pub async fn live_retry(state: State<'_, AppState>) -> CmdResult<()> {
    let live = state.live.lock().expect("poisoned");
    live.as_ref().ok_or_else(|| CmdError::Live("live mode is not running".into()))?.session.retry().map_err(CmdError::Live)
}

/// Stream the next request as the preview (the UI has shown the last one).
#[tauri::command]
pub async fn live_preview_next(state: State<'_, AppState>) -> CmdResult<()> {
    let live = state.live.lock().expect("poisoned");
    match live.as_ref() {
        Some(l) => l.session.next_preview().map_err(CmdError::Live),
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
    let live = state.live.lock().expect("poisoned").take();
    if let Some(live) = live {
        let backends = live.backends.lock().expect("poisoned").clone();
        let (model, settings) = (Arc::clone(&live.model), live.settings.clone());
        let results = blocking(move || live.session.stop()).await?;
        *state.last_live.lock().expect("poisoned") = Some((results, model, settings, backends));
    }
    Ok(())
}

/// Live results so far (running session first, else the last one), with what produced them.
pub(crate) fn live_results(state: &AppState) -> CmdResult<crate::state::LiveResults> {
    if let Some(l) = state.live.lock().expect("poisoned").as_ref() {
        let results = l.session.results().map_err(CmdError::Live)?;
        let backends = l.backends.lock().expect("poisoned").clone();
        return Ok((results, Arc::clone(&l.model), l.settings.clone(), backends));
    }
    state
        .last_live
        .lock()
        .expect("poisoned")
        .clone()
        .ok_or_else(|| CmdError::Live("nothing measured in live mode yet".into()))
}

/// Save what live mode measured as a run file (the same schema `lx sweep` writes: one point
/// per backend and setting). Returns its path.
#[tauri::command]
pub async fn live_save(state: State<'_, AppState>) -> CmdResult<String> {
    let (points, model, settings, backends) = live_results(&state)?;
    if points.is_empty() {
        return Err(CmdError::Live("no settled request yet: nothing to save".into()));
    }
    let dir = state.runs_dir.clone();
    blocking(move || -> CmdResult<String> {
        let mut run = model.open.live_run_file(vec!["latency-explorer".into(), "live".into()], &settings);
        run.backends = backends;
        run.points = points;
        let path = dir.join(run_file_name("live", run.started_unix_ms / 1000));
        run.write_atomic(&path).map_err(|e| CmdError::Io(format!("{e:#}")))?;
        Ok(path.display().to_string())
    })
    .await?
}
