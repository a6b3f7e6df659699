//! Saved runs opened beside this session's measurements: a run file (from this machine or
//! another) read and checked by the engine, its points as the charts draw them, labelled by
//! the machine that measured them. A file of a newer schema than this build reads, or one
//! that is damaged, is refused with the engine's reason.

use std::path::Path;

use lx_results::results::RunFile;
use serde::Serialize;
use tauri::AppHandle;

use super::blocking;
use crate::error::{CmdError, CmdResult};
use crate::events::PointFigures;

/// A saved run, as the charts overlay it.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct OpenedRun {
    /// The file.
    pub path: String,
    /// The machine and when: `AMD EPYC, 2026-12-02 07:15 UTC` (the first GPU the
    /// system listed, when it had one).
    pub label: String,
    /// The model it measured: its name, else its file's.
    pub model: String,
    /// Set for a shape-only model (timings only).
    pub synthetic: bool,
    /// Weight bytes one decode step of its model reads (the model-size chart's x).
    pub weight_bytes_per_step: Option<u64>,
    /// Each backend and the device it ran on.
    pub backends: Vec<String>,
    /// Its points.
    pub points: Vec<PointFigures>,
}

/// Read the run file at `path` for the charts.
pub fn open_run(path: &Path) -> CmdResult<OpenedRun> {
    let run = RunFile::read(path).map_err(|e| CmdError::Io(format!("cannot open this run: {e:#}")))?;
    if run.points.is_empty() {
        return Err(CmdError::Io(format!("cannot open this run: {} holds no measured point", path.display())));
    }
    let machine = run.hardware.gpus.first().cloned().unwrap_or_else(|| run.hardware.cpu.clone());
    let when = lx_engine::date::UtcDate::from_unix(run.started_unix_ms / 1000).minutes();
    Ok(OpenedRun {
        path: path.display().to_string(),
        label: format!("{}, {when}", machine.trim()),
        model: run.model.facts.name.clone().unwrap_or_else(|| run.model.facts.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())),
        synthetic: run.model.facts.synthetic.is_some(),
        weight_bytes_per_step: run.model_cost.as_ref().map(|c| c.weight_bytes_per_step),
        backends: run.backends.iter().map(|b| format!("{} on {}", b.name, b.device)).collect(),
        points: run.points.iter().map(PointFigures::from).collect(),
    })
}

/// Open a saved run file (`lx sweep --out`, the app's sweeps and saved live runs).
#[tauri::command]
pub async fn run_open(path: String) -> CmdResult<OpenedRun> {
    blocking(move || open_run(Path::new(&path))).await?
}

/// Ask the user for a run file. `None` when cancelled.
#[tauri::command]
pub async fn pick_run_file(app: AppHandle) -> CmdResult<Option<String>> {
    super::pick_file(app, "Open a saved run", ("Latency Explorer run", "json")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/results/ceilings-llama-candle-pp64-512-c1-16.json");

    #[test]
    fn a_saved_run_opens_labelled_by_its_machine_with_every_point() {
        let opened = open_run(Path::new(RUN)).unwrap();
        let run = RunFile::read(Path::new(RUN)).unwrap();
        assert_eq!(opened.points.len(), run.points.len());
        assert!(opened.label.starts_with(run.hardware.cpu.trim()) && opened.label.ends_with(" UTC"), "{}", opened.label);
        assert_eq!(opened.backends.len(), run.backends.len());
        assert!(opened.backends[0].starts_with("llama on CPU"), "{:?}", opened.backends);
        let p = &opened.points[0];
        assert_eq!((p.backend.as_str(), p.ttft_ms.p50), (run.points[0].backend.as_str(), run.points[0].ttft_ms.p50));
        assert!(p.ceiling.is_some());
        assert_eq!(opened.weight_bytes_per_step, Some(run.model_cost.unwrap().weight_bytes_per_step));
        assert!(!opened.synthetic);
    }

    #[test]
    fn a_newer_schema_a_damaged_file_and_a_foreign_one_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(RUN).unwrap();
        let write = |name: &str, body: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            p
        };
        let mut newer: serde_json::Value = serde_json::from_str(&text).unwrap();
        newer["schema_version"] = 99.into();
        let cases = [
            (write("newer.json", &newer.to_string()), "has schema version 99; this build reads up to"),
            (write("cut.json", &text[..text.len() / 2]), "is not JSON"),
            (write("other.json", r#"{"hello": "world"}"#), "is not a Latency Explorer run file"),
            (dir.path().join("absent.json"), "cannot read"),
        ];
        for (path, why) in cases {
            let e = open_run(&path).unwrap_err().to_string();
            assert!(e.starts_with("cannot open this run: ") && e.contains(why), "{}: {e}", path.display());
        }
        let mut empty: serde_json::Value = serde_json::from_str(&text).unwrap();
        empty["points"] = serde_json::json!([]);
        assert!(open_run(&write("empty.json", &empty.to_string())).unwrap_err().to_string().contains("holds no measured point"));
    }
}
