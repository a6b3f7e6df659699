//! `lx bench`: one standard run whose files compare by design. A bench file describes itself
//! (machine, build, backend versions and settings, model sha256, the suite as it ran) and
//! says nothing private: no user, host or path ([`private`]). Its score is defined in
//! [`score`]; [`gallery`] sets many files side by side; [`sustained`] is the same load kept
//! on for minutes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::results::{PointResult, RunFile};

pub mod gallery;
pub mod private;
pub mod score;
pub mod suite;
pub mod sustained;

pub use suite::{Shape, Suite, SuiteName};

/// The `schema` field of every bench file.
pub const SCHEMA: &str = "latency-explorer/bench";
/// Bumped on any change an old reader would misread.
pub const SCHEMA_VERSION: u32 = 1;

/// What `lx bench` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchFile {
    pub schema: String,
    pub schema_version: u32,
    /// Unix time (ms) the bench started.
    pub started_unix_ms: u64,
    pub suite: Suite,
    pub machine: Machine,
    pub build: Build,
    pub model: BenchModel,
    pub backends: Vec<BackendBench>,
    /// The load kept on for minutes (`--sustained`), where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<sustained::Sustained>,
}

/// The machine, as far as it matters to speed, and nothing that names its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// A short hash of what follows (CPU, cores, memory, GPUs, system): two files with the
    /// same fingerprint came from the same kind of machine.
    pub fingerprint: String,
    pub cpu: String,
    pub physical_cores: usize,
    pub logical_cores: usize,
    /// Total memory, GiB, to a tenth (a machine's exact byte count drifts with the firmware).
    pub memory_gib: f64,
    pub os: String,
    pub arch: String,
    pub cpu_features: Vec<String>,
    pub gpus: Vec<String>,
    pub power: lx_machine::power::Power,
}

impl Machine {
    pub fn new(hw: &lx_machine::hardware::HardwareReport, power: lx_machine::power::Power) -> Machine {
        let memory_gib = (hw.memory_bytes as f64 / (1u64 << 30) as f64 * 10.0).round() / 10.0;
        let identity = format!("{}|{}|{}|{memory_gib:.1}|{}|{}|{}", hw.cpu.trim(), hw.physical_cores, hw.logical_cores, hw.gpus.join(";"), hw.os, hw.arch);
        Machine {
            fingerprint: format!("{:012x}", fnv1a(identity.as_bytes()) >> 16),
            cpu: hw.cpu.trim().to_string(),
            physical_cores: hw.physical_cores,
            logical_cores: hw.logical_cores,
            memory_gib,
            os: hw.os.clone(),
            arch: hw.arch.clone(),
            cpu_features: hw.cpu_features.clone(),
            gpus: hw.gpus.clone(),
            power,
        }
    }

    /// This machine's fingerprint, as a bench here would write it.
    pub fn here() -> String {
        Machine::new(&lx_machine::hardware::probe(), lx_machine::power::Power::default()).fingerprint
    }

    /// `AMD EPYC, 2 cores` or the first GPU's name where there is one: how a table names it.
    pub fn label(&self) -> String {
        match self.gpus.first() {
            Some(gpu) => format!("{gpu} + {}", self.cpu),
            None => format!("{}, {} cores", self.cpu, self.physical_cores),
        }
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms, unlike the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The build that measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub lx_version: String,
    /// Backend features compiled in (cuda, metal, mlx, vulkan).
    pub features: Vec<String>,
    /// The CPU features the build was compiled to use (`lx_machine::hardware::compiled_for`);
    /// empty in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compiled_for: Vec<String>,
}

/// The model, named by its content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchModel {
    /// Its name in the file, else its file name without directories.
    pub name: String,
    pub architecture: String,
    pub parameters: u64,
    pub quantization: String,
    pub file_bytes: u64,
    pub sha256: Option<String>,
    /// Set for a shape-only model: its timings are real, its text is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<String>,
}

/// One backend's figures on every shape, and its score. Its first fields are those of
/// [`lx_engine::backend::BackendInfo`] that a comparison needs, kept by themselves: a bench
/// file is made to be shared and kept, so its schema does not move with the engine's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendBench {
    pub name: String,
    /// Library and version (`llama.cpp (llama-cpp-2 0.1.160)`).
    pub version: String,
    /// The device it ran on, as the library said after loading.
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_fallback: Option<String>,
    pub threads: usize,
    /// Its own settings as it ran (`lx tune`'s names).
    pub settings: std::collections::BTreeMap<String, String>,
    /// Whether they came from this machine's tuned profile (`lx tune`), and the sentence
    /// that says where they came from.
    pub tuned: bool,
    pub settings_from: String,
    pub shapes: Vec<ShapeFigures>,
    /// `None` with the reason in `notes`.
    pub score: Option<score::Score>,
    /// Why a figure or the score is missing: stopped at the bound, errors, no reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One shape's figures, one value per finished repetition (`None` where it failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeFigures {
    pub shape: String,
    /// Median prompt tok/s of one request (prompt tokens ÷ its TTFT).
    pub prefill_tps: Vec<Option<f64>>,
    /// Median decode tok/s of one request (its output after the first token ÷ their time).
    pub decode_tps: Vec<Option<f64>>,
    /// Median time to first token, ms.
    pub ttft_ms: Vec<Option<f64>>,
    /// All clients' output tokens ÷ the measured window.
    pub throughput_tps: Vec<Option<f64>>,
    /// Decode as a share of what this machine's memory bandwidth allows (the roofline
    /// ceiling), mean over repetitions; absent without a probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_of_ceiling: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_of_ceiling: Option<f64>,
    /// The worker's peak resident memory, MiB (most over repetitions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
}

/// Mean of the finite values; `None` without any.
pub fn mean(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl ShapeFigures {
    /// The figures of `points` (one shape of one backend, in repetition order), `repetitions`
    /// slots long: a repetition that did not run or failed is `None`.
    pub fn of(shape: &Shape, points: &[&PointResult], repetitions: usize) -> ShapeFigures {
        let at = |r: usize| points.iter().find(|p| p.repetition.unwrap_or(1) as usize == r + 1 && p.errors == 0 && p.requests > 0 && !p.stopped);
        let each = |f: &dyn Fn(&PointResult) -> f64| (0..repetitions).map(|r| at(r).map(|p| f(p)).filter(|v| v.is_finite() && *v > 0.0)).collect::<Vec<_>>();
        let share = |f: &dyn Fn(&PointResult) -> Option<f64>| mean(points.iter().filter(|p| p.requests > 0 && !p.stopped).filter_map(|p| f(p)));
        ShapeFigures {
            shape: shape.name.clone(),
            prefill_tps: each(&|p| p.prefill_tps.p50),
            decode_tps: each(&|p| p.decode_tps.p50),
            ttft_ms: each(&|p| p.ttft_ms.p50),
            throughput_tps: each(&|p| p.throughput_tps),
            decode_of_ceiling: share(&|p| p.ceiling.as_ref().map(|c| p.decode_tps.p50 / c.decode_tps)),
            prefill_of_ceiling: share(&|p| p.ceiling.as_ref().map(|c| p.prefill_tps.p50 / c.prefill_tps)),
            peak_rss_mib: points.iter().filter_map(|p| p.worker_peak_rss_mib).reduce(f64::max),
        }
    }
}

impl BackendBench {
    /// One backend's part of a sweep run of `suite`: figures per shape; the score is added by
    /// [`score::Reference::score`].
    pub fn from_run(run: &RunFile, backend: &str, suite: &Suite, tuned: bool) -> Option<BackendBench> {
        let info = run.backends.iter().find(|b| b.name == backend)?;
        let points: Vec<&PointResult> = run.points.iter().filter(|p| p.backend == backend).collect();
        let shapes = suite
            .shapes
            .iter()
            .map(|s| {
                let mine: Vec<&PointResult> = points.iter().copied().filter(|p| (p.prompt_tokens, p.max_tokens, p.concurrency) == (s.prompt_tokens, s.max_tokens, s.clients)).collect();
                ShapeFigures::of(s, &mine, suite.repetitions)
            })
            .collect();
        let mut notes: Vec<String> = points.iter().flat_map(|p| p.error_messages.iter().map(move |e| format!("{} (repetition {}): {e}", p.test_name(), p.repetition.unwrap_or(1)))).collect();
        notes.dedup();
        Some(BackendBench {
            name: backend.to_string(),
            version: info.version.clone(),
            device: info.device.clone(),
            cpu_fallback: info.cpu_fallback.clone(),
            threads: info.threads,
            settings: info.settings.clone(),
            tuned,
            settings_from: info.settings_from.clone().unwrap_or_default(),
            shapes,
            score: None,
            notes,
        })
    }

    /// Repetitions in which every shape has both figures: the ones a score is made of.
    pub fn complete_repetitions(&self) -> Vec<usize> {
        let n = self.shapes.iter().map(|s| s.prefill_tps.len()).max().unwrap_or(0);
        (0..n).filter(|&r| self.shapes.iter().all(|s| s.prefill_tps.get(r).copied().flatten().is_some() && s.decode_tps.get(r).copied().flatten().is_some())).collect()
    }
}

impl BenchModel {
    pub fn of(model: &crate::results::ModelRecord) -> BenchModel {
        let f = &model.facts;
        BenchModel {
            name: f.name.clone().unwrap_or_else(|| f.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
            architecture: f.architecture.clone(),
            parameters: f.parameter_count,
            quantization: f.quantization.name.clone(),
            file_bytes: f.file_size,
            sha256: model.sha256.clone(),
            synthetic: f.synthetic_note(),
        }
    }
}

/// Why a file could not be read as a bench file.
#[derive(Debug, thiserror::Error)]
pub enum BenchFileError {
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{} is not JSON: {source}", .path.display())]
    NotJson { path: PathBuf, source: serde_json::Error },
    #[error("{} is not a Latency Explorer bench file (lx bench writes those)", .path.display())]
    NotABenchFile { path: PathBuf },
    #[error("{} has bench schema version {version}; this build reads up to {SCHEMA_VERSION}", .path.display())]
    Newer { path: PathBuf, version: u64 },
    #[error("{} is a bench file this build cannot read: {source}", .path.display())]
    Malformed { path: PathBuf, source: serde_json::Error },
}

impl BenchFile {
    pub fn read(path: &Path) -> Result<BenchFile, BenchFileError> {
        use crate::versioned::{head, Head};
        let p = || path.to_path_buf();
        let bytes = std::fs::read(path).map_err(|source| BenchFileError::Unreadable { path: p(), source })?;
        match head(&bytes, SCHEMA, SCHEMA_VERSION) {
            Head::NotJson(source) => Err(BenchFileError::NotJson { path: p(), source }),
            Head::Other(_) => Err(BenchFileError::NotABenchFile { path: p() }),
            Head::Newer(version) => Err(BenchFileError::Newer { path: p(), version }),
            Head::Ours(v) => serde_json::from_value(v).map_err(|source| BenchFileError::Malformed { path: p(), source }),
        }
    }

    /// Write atomically, with every free text made private first ([`private::scrub`]).
    pub fn write_atomic(&self, path: &Path) -> std::io::Result<()> {
        let value = private::scrub_json(serde_json::to_value(self)?, &private::Private::of_this_machine());
        lx_engine::atomic_file::write(path, &serde_json::to_vec_pretty(&value)?)
    }
}

#[cfg(test)]
mod tests;
