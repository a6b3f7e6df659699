//! The machine and the backends this build contains.

use lx_machine::hardware::HardwareReport;
use serde::Serialize;

use super::blocking;
use crate::error::CmdResult;
use crate::state::Locked;

/// A backend as the UI lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct BackendAvailability {
    /// Canonical name (`llama`, `candle`, `mlx`): what live mode and sweeps take.
    pub name: String,
    /// Display name (`llama.cpp`, `candle`, `MLX`).
    pub label: String,
    /// Whether this build can run it on this machine.
    pub available: bool,
    /// Why not, when it cannot.
    pub reason: Option<String>,
    /// Devices it would use, e.g. `CPU (AVX2, 2 threads)` or `Metal: Apple M3`.
    pub devices: Vec<String>,
    /// An OpenAI-compatible server the user added (it schedules requests itself, so the
    /// policy settings do not apply to it).
    pub server: bool,
}

impl BackendAvailability {
    /// A server the user added, described by `lines` (what it serves, where).
    pub fn server(name: &str, lines: Vec<String>) -> Self {
        Self { name: name.into(), label: name.into(), available: true, reason: None, devices: lines, server: true }
    }
}

/// How fast this machine can go on the open model: each measured device's limits and what
/// they allow one request (a 1024-token prompt, 64 tokens out).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct MachineSpeed {
    pub devices: Vec<DeviceSpeed>,
    /// When the limits were measured (Unix ms).
    pub measured_unix_ms: u64,
    /// Set when other programs were busy while they were measured (they read low).
    pub busy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct DeviceSpeed {
    pub limits: lx_machine::roofline::Limits,
    /// `None` without an open model.
    pub ceiling: Option<lx_machine::roofline::PointCeiling>,
}

/// The prompt and output the hardware panel's ceilings are for.
const SPEED_PROMPT: u32 = 1024;
const SPEED_OUTPUT: u32 = 64;

/// This machine's limits as last measured for this build (`measure`: measure them now, a
/// few seconds in a child process), with what they allow the open model. `None`: never
/// measured, and not asked to.
#[tauri::command]
pub async fn machine_speed(state: tauri::State<'_, crate::state::AppState>, measure: bool) -> CmdResult<Option<MachineSpeed>> {
    let model = state.model.locked().as_ref().map(|m| m.open.path.clone());
    blocking(move || {
        let probe = if measure { Some(lx_local::limits::limits(true, &mut || {}).map_err(|e| crate::error::CmdError::Io(format!("the machine's limits could not be measured: {e:#}")))?) } else { lx_local::limits::cached_limits() };
        let Some(probe) = probe else { return Ok(None) };
        let cost = model.and_then(|p| lx_format::gguf::GgufFile::open(&p).ok()).and_then(|g| lx_machine::roofline::ModelCost::from_gguf(&g).ok());
        let devices = probe.devices.iter().map(|l| DeviceSpeed { limits: l.clone(), ceiling: cost.as_ref().map(|c| c.ceiling(l, 0, SPEED_PROMPT, SPEED_OUTPUT, 1)) }).collect();
        Ok(Some(MachineSpeed { devices, measured_unix_ms: probe.measured_unix_ms, busy: probe.busy_note() }))
    })
    .await?
}

/// What fits in the memory available now, for the open model: `lx fit`'s plan per backend
/// and KV cache type (the hardware panel's table).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct MemoryFit {
    pub memory_bytes: u64,
    /// The model's trained context: what a plan's full context is.
    pub full_context: usize,
    pub plans: Vec<FitPlan>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct FitPlan {
    pub backend: String,
    /// How it stores the KV cache: `f16`, `q8_0`, `q4_0`, or `f32` (candle, MLX).
    pub kv: String,
    /// The longest context per sequence that fits at each number of sequences (`None`: not
    /// even one token).
    pub longest: Vec<FitLongest>,
    /// The most sequences that fit at the full context.
    pub most_at_full: usize,
    /// One sequence at the full context, split into what holds it.
    pub one_at_full: lx_engine::footprint::Footprint,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct FitLongest {
    pub sequences: usize,
    pub context: Option<usize>,
}

/// `lx fit` for the open model; `None` without one.
#[tauri::command]
pub async fn memory_fit(state: tauri::State<'_, crate::state::AppState>) -> CmdResult<Option<MemoryFit>> {
    let Some(path) = state.model.locked().as_ref().map(|m| m.open.path.clone()) else { return Ok(None) };
    blocking(move || {
        use lx_local::fit;
        let memory_bytes = lx_machine::hardware::available_memory_bytes();
        let full_context = fit::full_context(&path).map_err(crate::error::CmdError::Io)?;
        let runtime = |b: &str| lx_local::memory::worker_runtime_bytes(b);
        let settings = |b: &str| lx_local::measuring_settings(b, &path);
        let q = fit::Question { model_path: &path, memory: memory_bytes, full_context, runtime: &runtime, settings: &settings };
        let mut plans = Vec::new();
        for b in lx_local::built() {
            for kv in fit::kv_types(&b) {
                // A backend that cannot run this model has no plan; the backend list says why.
                let Ok(p) = fit::plan(&q, &b, kv) else { continue };
                plans.push(FitPlan {
                    kv: fit::kv_label(&b, kv),
                    backend: b.clone(),
                    longest: p.longest.iter().map(|(n, l)| FitLongest { sequences: *n, context: l.map(|(c, _)| c) }).collect(),
                    most_at_full: p.most_at_full.map_or(0, |(n, _)| n),
                    one_at_full: p.one_at_full,
                });
            }
        }
        Ok(Some(MemoryFit { memory_bytes, full_context, plans }))
    })
    .await?
}

/// What the live controls' settings need of the memory available now, per selected local
/// backend, and how far the prompt and the clients can go before a load no longer fits:
/// the controls show it beside the sliders. `None` without a model.
#[tauri::command]
pub async fn settings_fit(state: tauri::State<'_, crate::state::AppState>, settings: lx_run::live::LiveSettings) -> CmdResult<Option<Vec<lx_local::fit::SettingsFit>>> {
    let Some(path) = state.model.locked().as_ref().map(|m| m.open.path.clone()) else { return Ok(None) };
    blocking(move || {
        use lx_local::fit;
        let full_context = fit::full_context(&path).map_err(crate::error::CmdError::Io)?;
        let runtime = |b: &str| lx_local::memory::worker_runtime_bytes(b);
        let env = |b: &str| lx_local::measuring_settings(b, &path);
        let q = fit::Question { model_path: &path, memory: lx_machine::hardware::available_memory_bytes(), full_context, runtime: &runtime, settings: &env };
        // Servers hold their own memory; a backend that cannot run this model has no figure.
        let local = settings.backends.iter().filter(|b| lx_local::unavailable(b).is_none());
        Ok(Some(local.filter_map(|b| fit::for_settings(&q, b, &settings).ok()).collect()))
    })
    .await?
}

/// Display name of a backend.
pub fn label(name: &str) -> String {
    lx_local::BackendKind::of(name).map_or_else(|| name.to_string(), |k| k.capabilities().label.to_string())
}

/// This machine: CPU, cores, memory, OS, and each backend's devices.
#[tauri::command]
pub async fn hardware() -> CmdResult<HardwareReport> {
    blocking(lx_local::hardware_report).await
}

/// Every backend, whether it can run here (and the open model), and on what; then the
/// servers added.
#[tauri::command]
pub async fn backends(state: tauri::State<'_, crate::state::AppState>) -> CmdResult<Vec<BackendAvailability>> {
    let model = state.model.locked().as_ref().map(|m| m.open.path.clone());
    let servers: Vec<BackendAvailability> = state
        .servers
        .locked()
        .iter()
        .map(|s| BackendAvailability::server(&s.name, vec![format!("{} · {}", s.base_url, s.model.as_deref().unwrap_or("the first model it lists"))]))
        .collect();
    let mut all = blocking(move || {
        let devices = lx_local::devices();
        lx_local::BackendKind::ALL
            .iter()
            .map(|kind| {
                let name = kind.name();
                let reason = match &model {
                    Some(path) => lx_local::unavailable_for(name, path),
                    None => lx_local::unavailable(name),
                };
                BackendAvailability {
                    name: name.into(),
                    label: label(name),
                    available: reason.is_none(),
                    devices: if reason.is_none() {
                        devices.iter().find(|(b, _)| b == name).map(|(_, d)| d.clone()).unwrap_or_default()
                    } else {
                        Vec::new()
                    },
                    reason,
                    server: false,
                }
            })
            .collect::<Vec<_>>()
    })
    .await?;
    all.extend(servers);
    Ok(all)
}

/// The backend check: a tiny generated model through every backend and device of this
/// build, a few tokens each, in worker processes. Each row goes to `on_row` as it finishes.
#[tauri::command]
pub async fn check_backends(on_row: tauri::ipc::Channel<lx_local::check::CheckRow>) -> CmdResult<Vec<lx_local::check::CheckRow>> {
    blocking(move || {
        lx_local::check::run(&mut |row| {
            // The window may have gone; the check still ends and its rows are returned.
            let _ = on_row.send(row.clone());
        })
    })
    .await?
    .map_err(|e| crate::error::CmdError::Io(format!("the backend check could not start: {e:#}")))
}
