//! Result files: plain, versioned JSON with everything needed to trust and re-run a
//! measurement (hardware, model, backend, settings, per-point figures, raw samples).
//! Written atomically: a reader sees the previous file or the new one, never half.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::backend::BackendInfo;
use crate::gguf::ModelFacts;
use crate::hardware::HardwareReport;
use crate::load::{PointRun, PointSpec, RequestRecord, StepRecord};
use crate::scheduler::Policy;
use crate::stats::Distribution;

/// The `schema` field of every run file.
pub const SCHEMA: &str = "latency-explorer/run";
/// Bumped on any change that an old reader would misread.
pub const SCHEMA_VERSION: u32 = 1;

/// Figures of one point: one backend, policy, prompt length, concurrency, output length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub backend: String,
    pub policy: Policy,
    pub prompt_tokens: u32,
    pub concurrency: usize,
    pub max_tokens: u32,
    /// Requests that completed and are counted.
    pub requests: usize,
    /// Requests that failed; their reasons are in `error_messages`.
    pub errors: usize,
    pub ttft_ms: Distribution,
    pub queue_ms: Distribution,
    pub itl_ms: Distribution,
    pub e2e_ms: Distribution,
    pub decode_tps: Distribution,
    pub prefill_tps: Distribution,
    /// All output tokens ÷ wall time of the measured window.
    pub throughput_tps: f64,
    pub requests_per_min: f64,
    pub window_s: f64,
    pub warmup: usize,
    /// The run was stopped before it finished; the figures cover what completed.
    #[serde(default)]
    pub stopped: bool,
    #[serde(default)]
    pub error_messages: Vec<String>,
    /// Raw per-request samples.
    pub samples: Vec<RequestRecord>,
    /// Every forward pass of the measured window.
    #[serde(default)]
    pub steps: Vec<StepRecord>,
}

impl PointResult {
    /// Summarise a run. Only requests that completed count in the distributions.
    pub fn from_run(backend: &str, policy: Policy, spec: &PointSpec, run: PointRun) -> Self {
        let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
        let mut error_messages: Vec<String> = run.records.iter().filter_map(|r| r.error.clone()).collect();
        error_messages.sort();
        error_messages.dedup();
        let errors = run.records.iter().filter(|r| r.error.is_some()).count();
        let output_tokens: usize = ok.iter().map(|r| r.tokens.len()).sum();
        let window_s = run.window_ms / 1e3;
        let per_s = |n: f64| if window_s > 0.0 { n / window_s } else { 0.0 };
        Self {
            backend: backend.to_string(),
            policy,
            prompt_tokens: spec.prompt_tokens,
            concurrency: spec.concurrency,
            max_tokens: spec.max_tokens,
            requests: ok.len(),
            errors,
            ttft_ms: Distribution::of(ok.iter().filter_map(|r| r.ttft_ms())),
            queue_ms: Distribution::of(ok.iter().filter_map(|r| r.queue_ms())),
            itl_ms: Distribution::of(ok.iter().flat_map(|r| r.itl_ms())),
            e2e_ms: Distribution::of(ok.iter().filter_map(|r| r.e2e_ms())),
            decode_tps: Distribution::of(ok.iter().filter_map(|r| r.decode_tps())),
            prefill_tps: Distribution::of(ok.iter().filter_map(|r| r.prefill_tps())),
            throughput_tps: per_s(output_tokens as f64),
            requests_per_min: per_s(ok.len() as f64) * 60.0,
            window_s,
            warmup: spec.warmup,
            stopped: run.stopped,
            error_messages,
            samples: run.records,
            steps: run.steps,
        }
    }
}

/// The model a run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRecord {
    #[serde(flatten)]
    pub facts: ModelFacts,
    /// Verified sha256 where known (catalog models), else computed on demand.
    pub sha256: Option<String>,
}

/// A whole run: what `lx sweep` and the app write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    pub schema: String,
    pub schema_version: u32,
    pub tool_version: String,
    /// Unix time (ms) the run started.
    pub started_unix_ms: u64,
    /// The command that produced it, for re-running.
    pub command: Vec<String>,
    pub hardware: HardwareReport,
    pub model: ModelRecord,
    /// Every backend measured, as loaded.
    pub backends: Vec<BackendInfo>,
    /// Settings not captured per point (threads, warm-up...).
    pub settings: serde_json::Value,
    pub points: Vec<PointResult>,
    /// Set when the run was interrupted.
    #[serde(default)]
    pub stopped: bool,
}

impl RunFile {
    pub fn new(command: Vec<String>, hardware: HardwareReport, model: ModelRecord, settings: serde_json::Value) -> Self {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ms,
            command,
            hardware,
            model,
            backends: Vec::new(),
            settings,
            points: Vec::new(),
            stopped: false,
        }
    }

    /// Read a run file, refusing other schemas and newer versions.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let head: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", path.display()))?;
        if head.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
            anyhow::bail!("{} is not a Latency Explorer run file", path.display());
        }
        let version = head.get("schema_version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version > SCHEMA_VERSION as u64 {
            anyhow::bail!("{} has schema version {version}; this build reads up to {SCHEMA_VERSION}", path.display());
        }
        serde_json::from_value(head).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Write atomically (temp file in the same directory, then rename).
    pub fn write_atomic(&self, path: &Path) -> anyhow::Result<()> {
        write_atomic(path, &serde_json::to_vec_pretty(self)?)
    }
}

/// Replace `path` with `bytes` so that readers never see a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| anyhow::anyhow!("cannot write in {}: {e}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temp file left behind");
    }

    #[test]
    fn foreign_json_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, br#"{"hello": 1}"#).unwrap();
        assert!(RunFile::read(&path).unwrap_err().to_string().contains("not a Latency Explorer run file"));
    }
}
