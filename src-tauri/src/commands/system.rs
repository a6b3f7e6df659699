//! The machine and the backends this build contains.

use lx_machine::hardware::HardwareReport;
use serde::Serialize;

use super::blocking;
use crate::error::CmdResult;
use crate::state::Locked;

/// A backend as the UI lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
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
    /// What proves it on this platform, one line per device (docs/PLATFORMS.md's status table).
    pub proven: Vec<String>,
    /// An OpenAI-compatible server the user added (it schedules requests itself, so the
    /// policy settings do not apply to it).
    pub server: bool,
}

impl BackendAvailability {
    /// A server the user added, described by `lines` (what it serves, where).
    pub fn server(name: &str, lines: Vec<String>) -> Self {
        Self { name: name.into(), label: name.into(), available: true, reason: None, devices: lines, proven: Vec::new(), server: true }
    }
}

/// Display name of a backend.
pub fn label(name: &str) -> String {
    match name {
        "llama" => "llama.cpp".into(),
        "candle" => "candle".into(),
        "mlx" => "MLX".into(),
        other => other.into(),
    }
}

/// This machine: CPU, cores, memory, OS, and each backend's devices.
#[tauri::command]
pub async fn hardware() -> CmdResult<HardwareReport> {
    blocking(lx_backends::hardware_report).await
}

/// Every backend, whether it can run here, and on what; then the servers added.
#[tauri::command]
pub async fn backends(state: tauri::State<'_, crate::state::AppState>) -> CmdResult<Vec<BackendAvailability>> {
    let servers: Vec<BackendAvailability> = state
        .servers
        .locked()
        .iter()
        .map(|s| BackendAvailability::server(&s.name, vec![format!("{} · {}", s.base_url, s.model.as_deref().unwrap_or("the first model it lists"))]))
        .collect();
    let mut all = blocking(|| {
        let devices = lx_backends::devices();
        let status = lx_backends::platforms::here();
        lx_backends::ALL
            .iter()
            .map(|&name| {
                let reason = lx_backends::unavailable(name);
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
                    proven: status
                        .iter()
                        .filter(|r| r.backend == label(name))
                        .map(|r| format!("{}: built in CI: {}; tested in CI: {}; measured: {}", r.device, r.built_in_ci, r.tested_in_ci, r.measured))
                        .collect(),
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
pub async fn check_backends(on_row: tauri::ipc::Channel<lx_backends::check::CheckRow>) -> CmdResult<Vec<lx_backends::check::CheckRow>> {
    blocking(move || {
        lx_backends::check::run(&mut |row| {
            // The window may have gone; the check still ends and its rows are returned.
            let _ = on_row.send(row.clone());
        })
    })
    .await?
    .map_err(|e| crate::error::CmdError::Io(format!("the backend check could not start: {e:#}")))
}
