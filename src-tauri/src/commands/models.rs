//! The model catalog, opening (and fetching) a model, and the file picker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lx_local::model::OpenModel;
use lx_format::gguf::ModelFacts;
use lx_format::workload::PromptBuilder;
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, State};

use super::blocking;
use crate::error::{CmdError, CmdResult};
use crate::state::{AppState, Locked, Model, Throttle};

/// A catalog model and whether it is downloaded.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct CatalogModel {
    /// Catalog name (what `open_model` takes).
    pub name: String,
    /// One line about it.
    pub description: String,
    /// File size in bytes.
    pub size: u64,
    /// Quantization, e.g. `Q4_K_M`.
    pub quantization: String,
    /// Parameters as usually quoted, e.g. `270M`.
    pub parameters: Option<String>,
    /// GGUF architecture.
    pub architecture: String,
    /// Terms of use of the weights.
    pub license: String,
    /// The default model.
    pub is_default: bool,
    /// The file is in the model cache.
    pub present: bool,
    /// ... and was verified.
    pub verified: bool,
    /// Where the file is or would be.
    pub path: String,
    /// A shape-only model (`synth:NAME`): timings only, text is noise; written on first use.
    pub synthetic: bool,
}

/// An open model, as the UI shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ModelInfo {
    /// What was asked for.
    pub spec: String,
    /// Display name.
    pub name: String,
    /// The file.
    pub path: String,
    /// Context length in tokens (the prompt slider's end).
    pub context_length: usize,
    /// Verified sha256, where known.
    pub sha256: Option<String>,
    /// Header facts: architecture, parameters, quantization, sizes (snake_case, as in run files).
    pub facts: ModelFacts,
}

impl ModelInfo {
    pub fn of(m: &Model) -> Self {
        Self {
            spec: m.spec.clone(),
            name: m.name.clone(),
            path: m.open.path.display().to_string(),
            context_length: m.open.context_length,
            sha256: m.open.sha256.clone(),
            facts: m.open.facts.clone(),
        }
    }
}

/// The catalog, with what the cache holds.
#[tauri::command]
pub async fn models() -> CmdResult<Vec<CatalogModel>> {
    blocking(|| {
        lx_models::list()
            .into_iter()
            .map(|m| CatalogModel {
                is_default: m.entry.is_default(),
                name: m.entry.name,
                description: m.entry.description,
                size: m.entry.size,
                quantization: m.entry.quantization,
                parameters: m.entry.parameters,
                architecture: m.entry.architecture,
                license: m.entry.license,
                present: m.present,
                verified: m.verified,
                path: m.path.display().to_string(),
                synthetic: false,
            })
            .chain(lx_local::synth::listing().iter().map(|p| CatalogModel {
                name: p.spec.clone(),
                description: format!("{}: the shapes and types of {}, made-up weights", lx_format::gguf::synth::SYNTHETIC_NOTE, p.name),
                size: p.bytes,
                quantization: p.quantization.to_uppercase(),
                parameters: Some(format!("{:.2}B", p.parameters as f64 / 1e9)),
                architecture: p.architecture.to_string(),
                license: "none (no weights)".into(),
                is_default: false,
                present: p.path.is_file(),
                verified: false,
                path: p.path.display().to_string(),
                synthetic: true,
            }))
            .collect()
    })
    .await
}

/// The model currently open, if any.
#[tauri::command]
pub async fn current_model(state: State<'_, AppState>) -> CmdResult<Option<ModelInfo>> {
    Ok(state.model.locked().as_deref().map(ModelInfo::of))
}

/// Open a model: a catalog name (fetched and verified when missing, with progress on
/// `on_progress`: [`lx_models::Progress`] reports, byte counters at most 20 a second) or a `.gguf` path.
/// It becomes the model live mode and sweeps use.
#[tauri::command]
pub async fn open_model(state: State<'_, AppState>, spec: String, on_progress: Channel<lx_models::Progress>) -> CmdResult<ModelInfo> {
    let s = spec.clone();
    let model = blocking(move || -> CmdResult<Model> {
        let throttle = Mutex::new(Throttle::new(Duration::from_millis(50)));
        let mut progress = |p: lx_models::Progress| {
            if !p.is_counter() || throttle.locked().ready(Instant::now()) {
                let _ = on_progress.send(p);
            }
        };
        let open = OpenModel::open(&s, &mut progress).map_err(CmdError::model)?;
        let prompts = PromptBuilder::new(&open.tokenizer);
        let name = lx_models::ModelSpec::parse(&s)
            .ok()
            .and_then(|spec| match spec {
                lx_models::ModelSpec::Catalog { name } => lx_models::Catalog::embedded().get(&name).map(|e| e.name.clone()),
                _ => None,
            })
            .unwrap_or_else(|| open.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| s.clone()));
        Ok(Model { spec: s, name, open: std::sync::Arc::new(open), prompts })
    })
    .await??;
    let info = ModelInfo::of(&model);
    *state.model.locked() = Some(Arc::new(model));
    Ok(info)
}

/// Ask the user for a local `.gguf` file. `None` when cancelled.
#[tauri::command]
pub async fn pick_model_file(app: AppHandle) -> CmdResult<Option<String>> {
    super::pick_file(app, "Open a GGUF model", ("GGUF model", "gguf")).await
}
