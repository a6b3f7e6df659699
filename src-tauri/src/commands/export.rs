//! Exports: CSV of live or sweep results, PNG of a chart. The file name comes from a
//! native save dialog on the Rust side; the web view never names a path.

use std::path::PathBuf;

use lx_results::printers::{printer, Format};
use lx_results::results::PointResult;
use serde::Deserialize;
use tauri::ipc::{InvokeBody, Request};
use tauri::{AppHandle, State};
use tauri_plugin_dialog::DialogExt;

use super::blocking;
use crate::error::{CmdError, CmdResult};
use crate::state::AppState;

/// Which results to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum ExportSource {
    /// What live mode measured (running or last session): one row per backend and setting.
    Live,
    /// The last sweep's run file: one row per point.
    Sweep,
}

/// Points as CSV, the same columns `lx sweep --format csv` prints.
pub fn csv(points: &[PointResult]) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut p = printer(Format::Csv, Box::new(&mut buf));
        for point in points {
            p.point(point)?;
        }
    }
    Ok(buf)
}

fn save_dialog(app: &AppHandle, title: &str, filter: (&str, &str), file_name: &str) -> Option<PathBuf> {
    app.dialog()
        .file()
        .set_title(title)
        .add_filter(filter.0, &[filter.1])
        .set_file_name(file_name)
        .blocking_save_file()
        .and_then(|f| f.into_path().ok())
}

/// Export results as CSV to a file the user picks. Returns its path, or `None` when the
/// dialog was cancelled.
#[tauri::command]
pub async fn export_csv(app: AppHandle, state: State<'_, AppState>, source: ExportSource) -> CmdResult<Option<String>> {
    let points = match source {
        ExportSource::Live => super::live::live_results(&state)?.points,
        ExportSource::Sweep => super::sweep::last_run_points(&state)?,
    };
    if points.is_empty() {
        return Err(CmdError::Io("nothing to export yet".into()));
    }
    let bytes = csv(&points).map_err(|e| CmdError::Io(e.to_string()))?;
    let name = match source {
        ExportSource::Live => "latency-explorer-live.csv",
        ExportSource::Sweep => "latency-explorer-sweep.csv",
    };
    blocking(move || -> CmdResult<Option<String>> {
        let Some(path) = save_dialog(&app, "Export CSV", ("CSV", "csv"), name) else { return Ok(None) };
        std::fs::write(&path, bytes).map_err(|e| CmdError::Io(format!("cannot write {}: {e}", path.display())))?;
        Ok(Some(path.display().to_string()))
    })
    .await?
}

/// Save a chart as PNG: the request body is the PNG's bytes, the `x-file-name` header the
/// suggested file name. Returns the path, or `None` when the dialog was cancelled.
#[tauri::command]
pub async fn export_png(app: AppHandle, request: Request<'_>) -> CmdResult<Option<String>> {
    let InvokeBody::Raw(bytes) = request.body() else {
        return Err(CmdError::Io("expected the PNG bytes as the request body".into()));
    };
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(CmdError::Io("the data is not a PNG image".into()));
    }
    let bytes = bytes.clone();
    let name = request
        .headers()
        .get("x-file-name")
        .and_then(|v| v.to_str().ok())
        .filter(|n| n.ends_with(".png") && !n.contains(['/', '\\']))
        .unwrap_or("chart.png")
        .to_string();
    blocking(move || -> CmdResult<Option<String>> {
        let Some(path) = save_dialog(&app, "Save chart as PNG", ("PNG image", "png"), &name) else { return Ok(None) };
        std::fs::write(&path, bytes).map_err(|e| CmdError::Io(format!("cannot write {}: {e}", path.display())))?;
        Ok(Some(path.display().to_string()))
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_client::traffic::{PointRun, PointSpec};
    use lx_engine::scheduler::Policy;

    #[test]
    fn csv_has_the_cli_columns_and_one_row_per_point() {
        let spec = PointSpec { prompt_tokens: 64, max_tokens: 8, concurrency: 2, requests: 0, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let p = PointResult::from_run("llama", Policy::Continuous, &spec, PointRun::default());
        let text = String::from_utf8(csv(&[p.clone(), p]).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("backend,policy,prompt_tokens,concurrency,max_tokens"));
        assert!(lines[1].starts_with("llama,continuous,64,2,8"));
    }
}
