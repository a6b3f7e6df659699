//! "Tune this machine": `lx tune` in the app (the same trials, budget and profile), on a
//! thread of its own, each trial streamed to the UI. The profile it saves is what the app's
//! later sweeps (the idle choice) and live mode (the choice under a competing load) run with.

use std::sync::Arc;
use std::time::Duration;

use lx_local::profile::{self, ProfileError};
use lx_local::tune::{self, text, Event};
use lx_client::traffic::RunControl;
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::state::{AppState, Locked, Model, Sweep};

/// Whether this machine is tuned for the open model, as the hardware panel says it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct TuneStatus {
    /// A profile for this machine, build and model exists and reads.
    pub tuned: bool,
    /// One line per backend tuned: what sweeps and live mode run it with.
    pub backends: Vec<String>,
    /// When not tuned: why (none yet, or damaged and why).
    pub why: Option<String>,
    /// The profile as `lx tune --show` prints it (Markdown), when tuned.
    pub report: Option<String>,
}

/// What the tuner is doing. Sent on the channel `tune_start` takes.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum TuneEvent {
    /// A trial starts: its backend, the settings asked for ("defaults" for the first), whether
    /// the competing load runs, and the time spent of the budget.
    Trial { backend: String, settings: String, contended: bool, elapsed_s: f64, budget_s: f64 },
    /// The trial ended: its figures, or why it failed.
    Measured { backend: String, text: String },
    /// Something was left out, and why.
    Note { backend: String, note: String },
    /// The profile was saved; later runs use it.
    Finished { status: TuneStatus },
    /// Tuning stopped (cancelled, or failed): nothing saved.
    Failed { message: String },
}

fn status_of(model: &Model) -> TuneStatus {
    let here = profile::Located::here(&model.open.path);
    match here.read() {
        Ok(p) => TuneStatus {
            tuned: true,
            backends: p
                .backends
                .iter()
                .map(|(b, bp)| {
                    let name = crate::commands::system::label(b);
                    if bp.idle.is_empty() {
                        return format!("{name}: untuned, its defaults ({})", bp.notes.first().map_or("nothing was measured", String::as_str));
                    }
                    let live = bp.contended.as_ref().map_or("the same".to_string(), text::settings_text);
                    format!("{name}: {} · live mode: {live}", text::settings_text(&bp.idle))
                })
                .collect(),
            why: None,
            report: Some(text::describe(&p, &here.path.display().to_string())),
        },
        Err(e @ ProfileError::Missing) => TuneStatus { tuned: false, backends: vec![], why: Some(format!("{e}: each backend runs with its own defaults")), report: None },
        Err(e) => TuneStatus { tuned: false, backends: vec![], why: Some(format!("{e}: each backend runs with its own defaults until tuned again")), report: None },
    }
}

/// Whether this machine is tuned for the open model.
#[tauri::command]
pub async fn tune_status(state: State<'_, AppState>) -> CmdResult<TuneStatus> {
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    super::blocking(move || status_of(&model)).await
}

/// Tune every backend of this build on the open model within `budget_s` seconds, as
/// `lx tune --budget` does. Live mode and sweeps must be stopped first (they would compete
/// for the machine); `tune_cancel` stops it (nothing is saved then).
///
/// Events on `on_event`: `trial`, `measured`, `note`, then `finished` or `failed`.
#[tauri::command]
pub async fn tune_start(state: State<'_, AppState>, budget_s: f64, on_event: Channel<TuneEvent>) -> CmdResult<()> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before tuning".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep or tuning is already running".into()));
    }
    if !(budget_s.is_finite() && budget_s >= 10.0) {
        return Err(CmdError::Sweep("the tuning budget must be at least 10 seconds".into()));
    }
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let control = RunControl::default();
    let stop = Arc::clone(&control.stop);
    let backends = lx_local::built();
    let thread = std::thread::Builder::new()
        .name("lx-tune".into())
        .spawn(move || {
            let send = |e: TuneEvent| drop(on_event.send(e));
            let request = tune::Request { model: &model.open, backends, budget: Duration::from_secs_f64(budget_s), control };
            let tuned = tune::tune(&request, &mut |event| match event {
                Event::Trial { backend, asked, contended, elapsed, budget } => send(TuneEvent::Trial {
                    backend: backend.into(),
                    settings: if asked.is_empty() { "defaults".into() } else { text::settings_text(asked) },
                    contended,
                    elapsed_s: elapsed.as_secs_f64(),
                    budget_s: budget.as_secs_f64(),
                }),
                Event::Measured { backend, trial } => send(TuneEvent::Measured { backend: backend.into(), text: text::trial_text(trial) }),
                Event::Note { backend, note } => send(TuneEvent::Note { backend: backend.into(), note: note.into() }),
            });
            let saved = tuned.and_then(|profile| profile::Located::new(&profile.machine, &model.open.path).save(profile).map(drop));
            match saved {
                Ok(()) => send(TuneEvent::Finished { status: status_of(&model) }),
                Err(e) => send(TuneEvent::Failed { message: format!("{e:#}") }),
            }
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start tuning: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    Ok(())
}

/// Stop tuning: the trial in flight is cancelled and nothing is saved. Returns once the
/// tuning thread has ended.
#[tauri::command]
pub async fn tune_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    super::sweep::sweep_cancel(state).await
}
