//! Result files: plain, versioned JSON with everything needed to trust and re-run a
//! measurement (hardware, model, backend, settings, per-point figures, raw samples).
//! Written atomically: a reader sees the previous file or the new one, never half.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use lx_engine::backend::BackendInfo;
use lx_format::gguf::ModelFacts;
use lx_machine::hardware::HardwareReport;
use lx_client::records::{RequestRecord, StepRecord};
use lx_client::traffic::{Arrivals, Traffic, PointRun, PointSpec};
use lx_engine::scheduler::Policy;
use lx_client::stats::Distribution;

/// The `schema` field of every run file.
pub const SCHEMA: &str = "latency-explorer/run";
/// Bumped on any change that an old reader would misread. Version 2 added, all optional:
/// per-point `load` (arrivals, length ranges, prefix), `slo`/`slo_met`/`goodput_rpm`, and per
/// request `cached_tokens` and `timeline`. Version 1 files read as version 2 with those absent.
pub const SCHEMA_VERSION: u32 = 2;

/// Service-level objectives a request must meet to count towards goodput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Slo {
    /// Most acceptable TTFT; `None`: no TTFT objective.
    pub ttft_ms: Option<f64>,
    /// Least acceptable per-request decode tok/s; `None`: no decode objective.
    pub decode_tps: Option<f64>,
}

pub use lx_engine::defaults::READING_PACE_TPS;

impl Default for Slo {
    /// No TTFT objective; decode at least at reading pace.
    fn default() -> Self {
        Slo { ttft_ms: None, decode_tps: Some(READING_PACE_TPS) }
    }
}

impl crate::decision::Objectives {
    /// The per-request part, as points are judged.
    pub fn slo(&self) -> Slo {
        Slo { ttft_ms: self.ttft_ms, decode_tps: self.decode_tps }
    }
}

impl Slo {
    /// Whether a completed request met every objective. A one-token answer has no decode
    /// rate and cannot miss the decode objective.
    pub fn met(&self, r: &RequestRecord) -> bool {
        r.ok()
            && self.ttft_ms.is_none_or(|max| r.ttft_ms().is_some_and(|t| t <= max))
            && self.decode_tps.is_none_or(|min| r.decode_tps().is_none_or(|d| d >= min))
    }
}

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
    /// How requests arrived and what they looked like (absent in version 1: closed loop).
    /// Named `load` in run files, as in every version so far.
    #[serde(default, rename = "load")]
    pub traffic: Traffic,
    /// The objectives `slo_met` and `goodput_rpm` were judged against.
    #[serde(default)]
    pub slo: Option<Slo>,
    /// Fraction of the measured requests (failed ones included) that met the SLO.
    #[serde(default)]
    pub slo_met: Option<f64>,
    /// Requests per minute that met the SLO.
    #[serde(default)]
    pub goodput_rpm: Option<f64>,
    /// The worker process's peak resident memory during the point (warm-up included), MiB:
    /// weights, KV cache and scratch. Absent where the platform does not report it.
    #[serde(default)]
    pub worker_peak_rss_mib: Option<f64>,
    /// The target scheduled requests itself (a server): `policy` was not applied, and its
    /// batching, slots and limits are the server's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scheduled_by_server: bool,
    /// The samples' warnings, each once, with how many requests had it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Which measurement of this point it is (1-based) when the sweep repeats every point
    /// (`--repetitions`); absent when each point is measured once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<u32>,
    /// The most this setting allows on the device the backend ran on (from the run's
    /// `limits` and `model_cost`); absent for a server target or without a probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<lx_machine::roofline::PointCeiling>,
    /// Power, energy per token, clocks and throttling over the measured window, from this
    /// machine's sensors (absent for a server target, whose machine they do not see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensors: Option<lx_machine::sensors::SensorSummary>,
    /// How far the point's backend and settings move the model (`--fidelity`), from the
    /// run's [`RunFile::fidelity`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::studies::fidelity::Measured>,
}

impl PointResult {
    /// Summarise a run. Only requests that completed count in the distributions.
    pub fn from_run(backend: &str, policy: Policy, spec: &PointSpec, run: PointRun) -> Self {
        let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
        let mut error_messages: Vec<String> = run.records.iter().filter_map(|r| r.error.clone()).collect();
        // A worker lost in the warm-up leaves no measured request to carry why.
        error_messages.extend(run.worker_error.clone().filter(|_| run.records.is_empty()));
        error_messages.sort();
        error_messages.dedup();
        let errors = run.records.iter().filter(|r| r.error.is_some()).count().max(usize::from(run.worker_error.is_some() && run.records.is_empty()));
        let mut warnings: Vec<(String, usize)> = Vec::new();
        for w in run.records.iter().flat_map(|r| &r.warnings) {
            match warnings.iter_mut().find(|(m, _)| m == w) {
                Some((_, n)) => *n += 1,
                None => warnings.push((w.clone(), 1)),
            }
        }
        let warnings = warnings.into_iter().map(|(m, n)| if n == 1 { m } else { format!("{n} requests: {m}") }).collect();
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
            traffic: Traffic::default(),
            slo: None,
            slo_met: None,
            goodput_rpm: None,
            worker_peak_rss_mib: None,
            scheduled_by_server: false,
            warnings,
            repetition: None,
            ceiling: None,
            sensors: None,
            fidelity: None,
        }
    }

    /// llama-bench style test name: prompt, generation and concurrency, then what else
    /// shapes the load: `pp64..512+tg32 @ c4 λ2/s prefix1024 cached`.
    pub fn test_name(&self) -> String {
        let range = |from: Option<u32>, to: u32| match from {
            Some(f) if f < to => format!("{f}..{to}"),
            _ => to.to_string(),
        };
        // At a depth, the prompt proper: what follows the tokens already in the context.
        let (t, d) = (&self.traffic, self.traffic.depth);
        let prompt = range(t.prompt_tokens_from.map(|f| f - d.min(f)), self.prompt_tokens - d.min(self.prompt_tokens));
        let mut name = format!("pp{prompt}+tg{} @ c{}", range(t.max_tokens_from, self.max_tokens), self.concurrency);
        if d > 0 {
            name += &format!(" d{d}");
        }
        match &t.arrivals {
            Arrivals::Closed => {}
            Arrivals::Poisson { rate } => name += &format!(" λ{rate}/s"),
            Arrivals::Script { requests } => name += &format!(" script of {}", requests.len()),
        }
        if t.prefix_tokens > 0 && d == 0 {
            name += &format!(" prefix{}{}", t.prefix_tokens, if t.prefix_cache { " cached" } else { "" });
        }
        if t.prompts != lx_format::workload::PromptText::Prose {
            name += &format!(" {}", t.prompts.name());
        }
        if t.spec.is_on() {
            name += &format!(" {}", t.spec.label());
        }
        if !t.kv.is_default() {
            name += &format!(" kv {}", t.kv.label());
        }
        name
    }

    /// The test name of a table's row: [`PointResult::test_name`], and which repetition when
    /// the sweep repeats points.
    pub fn row_name(&self) -> String {
        match self.repetition {
            Some(r) => format!("{} #{r}", self.test_name()),
            None => self.test_name(),
        }
    }

    /// What identifies a point across runs (compare, repeats): its test, backend and policy.
    pub fn key(&self) -> (String, String, String) {
        (self.test_name(), self.backend.clone(), self.policy_label())
    }

    /// The policy column: ours, or "server" when the target scheduled requests itself.
    pub fn policy_label(&self) -> String {
        if self.scheduled_by_server {
            "server".into()
        } else {
            self.policy.to_string()
        }
    }

    /// Record the load the point ran, and build each sample's timeline from its passes.
    pub fn with_traffic(mut self, traffic: &Traffic) -> Self {
        self.traffic = traffic.clone();
        let steps = std::mem::take(&mut self.steps);
        for r in &mut self.samples {
            r.fill_timeline(&steps);
        }
        self.steps = steps;
        self
    }

    /// Judge the samples against `slo`: fraction met and goodput.
    pub fn judge(&mut self, slo: Slo) {
        let measured = self.samples.len();
        let met = self.samples.iter().filter(|r| slo.met(r)).count();
        self.slo = Some(slo);
        self.slo_met = (measured > 0).then(|| met as f64 / measured as f64);
        self.goodput_rpm = Some(if self.window_s > 0.0 { met as f64 / self.window_s * 60.0 } else { 0.0 });
    }

    /// Open-loop arrival rate (requests/s), if the point had one.
    pub fn rate(&self) -> Option<f64> {
        match &self.traffic.arrivals {
            Arrivals::Poisson { rate } => Some(*rate),
            _ => None,
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
    /// Resident memory of the measuring process and its workers, sampled as the run went
    /// on (`lx live`); empty for a sweep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemorySample>,
    /// The machine's measured limits ([`lx_machine::probe`]), where the run was given them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<lx_machine::probe::Probe>,
    /// What a token of the model costs, for ceilings ([`lx_machine::roofline`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_cost: Option<lx_machine::roofline::ModelCost>,
    /// The workload preset the run was made from, with its objectives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<crate::decision::PresetRecord>,
    /// Capacity searches, deadline plans and advice made from the run's points.
    #[serde(default, skip_serializing_if = "crate::decision::Decisions::is_empty")]
    pub decisions: crate::decision::Decisions,
    /// Every backend and setting of the points scored against a reference before them
    /// (`--fidelity`): the text, the reference, and each one's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::studies::fidelity::FidelityRun>,
}

/// One reading of resident memory during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySample {
    /// Seconds since the run started.
    pub at_s: f64,
    /// Requests completed by then.
    pub requests: u64,
    /// Resident bytes by process: `lx` (the one measuring) and `worker BACKEND`.
    pub rss_bytes: std::collections::BTreeMap<String, u64>,
}

impl RunFile {
    pub fn new(command: Vec<String>, hardware: HardwareReport, model: ModelRecord, settings: serde_json::Value) -> Self {
        let started_unix_ms = lx_engine::date::now_unix_ms();
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
            memory: Vec::new(),
            limits: None,
            model_cost: None,
            preset: None,
            decisions: Default::default(),
            fidelity: None,
        }
    }

    /// The ceiling of `point`: the run's limits for the device its backend ran on and the
    /// model's cost, at the point's depth, mean prompt and output lengths and concurrency.
    /// `None` for a server (its device is not this machine's) or when either is missing.
    pub fn ceiling_for(&self, point: &PointResult) -> Option<lx_machine::roofline::PointCeiling> {
        if point.scheduled_by_server {
            return None;
        }
        let device = &self.backends.iter().find(|b| b.name == point.backend)?.device;
        let limits = self.limits.as_ref()?.for_device(device)?;
        let mean = |from: Option<u32>, to: u32| from.map_or(to, |f| (f.min(to) + to) / 2);
        let depth = point.traffic.depth;
        let prompt = mean(point.traffic.prompt_tokens_from, point.prompt_tokens).saturating_sub(depth).max(1);
        let output = mean(point.traffic.max_tokens_from, point.max_tokens);
        Some(self.model_cost.as_ref()?.ceiling(limits, depth, prompt, output, point.concurrency))
    }

    /// Gives every point its ceiling ([`ceiling_for`](Self::ceiling_for)): for runs whose
    /// points were summarised before the run had its limits (live mode's).
    pub fn fill_ceilings(&mut self) {
        let ceilings: Vec<_> = self.points.iter().map(|p| self.ceiling_for(p)).collect();
        for (p, c) in self.points.iter_mut().zip(ceilings) {
            p.ceiling = c;
        }
    }

    /// Read a run file, refusing other schemas and newer versions.
    pub fn read(path: &Path) -> Result<Self, RunFileError> {
        let bytes = std::fs::read(path).map_err(|source| RunFileError::Unreadable { path: path.to_path_buf(), source })?;
        Self::read_bytes(&bytes, path)
    }

    /// [`read`](Self::read) for a file's contents; `path` names it in messages.
    pub fn read_bytes(bytes: &[u8], path: &Path) -> Result<Self, RunFileError> {
        use crate::versioned::{head, Head};
        let path = || path.to_path_buf();
        match head(bytes, SCHEMA, SCHEMA_VERSION) {
            Head::NotJson(source) => Err(RunFileError::NotJson { path: path(), source }),
            Head::Other(json) => Err(RunFileError::NotARunFile { path: path(), json }),
            Head::Newer(version) => Err(RunFileError::Newer { path: path(), version }),
            Head::Ours(v) => serde_json::from_value(v).map_err(|source| RunFileError::Malformed { path: path(), source }),
        }
    }

    /// Write atomically (temp file in the same directory, then rename).
    pub fn write_atomic(&self, path: &Path) -> std::io::Result<()> {
        lx_engine::atomic_file::write(path, &serde_json::to_vec_pretty(self)?)
    }
}

/// Why a file could not be read as a run file.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{} is not JSON: {source}", .path.display())]
    NotJson { path: PathBuf, source: serde_json::Error },
    /// JSON of another kind: kept, so a caller that reads other result files can try them.
    #[error("{} is not a Latency Explorer run file", .path.display())]
    NotARunFile { path: PathBuf, json: serde_json::Value },
    #[error("{} has schema version {version}; this build reads up to {SCHEMA_VERSION}", .path.display())]
    Newer { path: PathBuf, version: u64 },
    #[error("{}: {source}", .path.display())]
    Malformed { path: PathBuf, source: serde_json::Error },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: u64, token_ms: &[f64], ok: bool) -> RequestRecord {
        let mut r = RequestRecord::new(id, 16, token_ms.len() as u32, 0.0);
        r.token_ms = token_ms.to_vec();
        r.tokens = vec![1; token_ms.len()];
        r.token_steps = (1..=token_ms.len() as u64).collect();
        if ok {
            r.finish = Some(lx_engine::scheduler::FinishReason::Length);
        } else {
            r.error = Some("boom".into());
        }
        r
    }

    fn point(samples: Vec<RequestRecord>, window_ms: f64) -> PointResult {
        let spec = PointSpec { prompt_tokens: 16, max_tokens: 4, concurrency: 2, requests: samples.len(), warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let run = PointRun { records: samples, steps: Vec::new(), window_ms, worker_error: None, stopped: false, opened: None };
        PointResult::from_run("hash", Policy::Continuous, &spec, run)
    }

    #[test]
    fn a_worker_lost_in_the_warm_up_is_an_error_that_says_why() {
        let spec = PointSpec { prompt_tokens: 16, max_tokens: 4, concurrency: 1, requests: 4, warmup: 1, stop_at_eos: false, top_logprobs: 0 };
        let why = "the worker answered nothing for 300 s";
        let run = PointRun { records: Vec::new(), steps: Vec::new(), window_ms: 0.0, worker_error: Some(why.into()), stopped: false, opened: None };
        let p = PointResult::from_run("hash", Policy::Continuous, &spec, run);
        assert_eq!((p.errors, p.requests, p.error_messages.clone()), (1, 0, vec![why.to_string()]));
    }

    #[test]
    fn goodput_counts_requests_meeting_every_objective() {
        // decode tok/s: 3 tokens over 100 ms = 20/s; over 1000 ms = 2/s (below reading pace).
        let fast = sample(1, &[50.0, 100.0, 150.0], true);
        let slow_decode = sample(2, &[50.0, 550.0, 1050.0], true);
        let slow_ttft = sample(3, &[900.0, 950.0, 1000.0], true);
        let failed = sample(4, &[10.0], false);
        let one_token = sample(5, &[40.0], true);
        let mut p = point(vec![fast, slow_decode, slow_ttft, failed, one_token], 60_000.0);
        p.judge(Slo::default());
        assert_eq!(p.slo_met, Some(3.0 / 5.0), "reading pace alone: all but the slow decoder and the failure");
        assert!((p.goodput_rpm.unwrap() - 3.0).abs() < 1e-9);
        p.judge(Slo { ttft_ms: Some(500.0), decode_tps: Some(4.5) });
        assert_eq!(p.slo_met, Some(2.0 / 5.0));
        p.judge(Slo { ttft_ms: None, decode_tps: None });
        assert_eq!(p.slo_met, Some(4.0 / 5.0));
        let mut empty = point(Vec::new(), 0.0);
        empty.judge(Slo::default());
        assert_eq!((empty.slo_met, empty.goodput_rpm), (None, Some(0.0)));
    }

    #[test]
    fn timelines_name_the_passes_and_who_shared_them() {
        let mut r = sample(1, &[30.0, 45.0], true);
        r.submit_ms = 5.0;
        r.admit_ms = Some(1.0);
        r.prefill = vec![lx_client::records::PrefillSlice { step: 1, tokens: 16, start_ms: 1.0, end_ms: 20.0 }];
        r.token_steps = vec![1, 2];
        let steps = vec![
            StepRecord { step: 1, seqs: 3, prefill_tokens: 16, decode_tokens: 2, draft_tokens: 0, start_ms: 6.0, end_ms: 25.0, compute_ms: None },
            StepRecord { step: 2, seqs: 2, prefill_tokens: 0, decode_tokens: 2, draft_tokens: 0, start_ms: 40.0, end_ms: 48.0, compute_ms: Some(7.5) },
        ];
        let mut p = point(vec![r], 100.0);
        p.steps = steps;
        let p = p.with_traffic(&Traffic::default());
        let t = p.samples[0].timeline.as_ref().unwrap();
        assert_eq!(t.queue_ms, Some(1.0));
        assert_eq!((t.prefill.len(), t.prefill[0].batch_seqs, t.prefill[0].batch_tokens), (1, 3, 18));
        assert_eq!(t.decode.len(), 2);
        assert_eq!((t.decode[1].step, t.decode[1].batch_seqs), (2, 2));
        assert_eq!((t.decode[1].start_ms, t.decode[1].end_ms), (35.0, 43.0), "relative to the request's submit");
    }

    #[test]
    fn version_1_points_still_read_and_newer_files_are_refused() {
        let mut v = serde_json::to_value(point(vec![sample(1, &[10.0, 20.0], true)], 100.0)).unwrap();
        for key in ["load", "slo", "slo_met", "goodput_rpm"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v["samples"][0].as_object_mut().unwrap().remove("timeline");
        let back: PointResult = serde_json::from_value(v).unwrap();
        assert_eq!(back.traffic, Traffic::default());
        assert_eq!((back.slo_met, back.samples[0].timeline.as_ref()), (None, None));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("future.json");
        std::fs::write(&path, format!(r#"{{"schema": "{SCHEMA}", "schema_version": {}}}"#, SCHEMA_VERSION + 1)).unwrap();
        assert!(RunFile::read(&path).unwrap_err().to_string().contains("schema version"));
    }

    /// Damaged run files (a real one from docs/results, edited at random: bytes, bits,
    /// planted lengths, cut short, spans dropped or repeated) are read or refused with a
    /// message naming the file, never a panic.
    #[test]
    fn damaged_run_files_are_read_or_refused_never_a_panic() {
        let valid = include_bytes!("../../../docs/results/mlx-cpu-pp64-256-c1-4.json").to_vec();
        RunFile::read_bytes(&valid, Path::new("valid.json")).expect("the real file reads");
        let mut m = lx_test_support::fuzz::Mutator::new(0x005e_ed0f_4a11);
        let (mut read, mut refused) = (0, 0);
        for case in 0..1000 {
            let mut bytes = valid.clone();
            m.mutate(&mut bytes, 0);
            match std::panic::catch_unwind(|| RunFile::read_bytes(&bytes, Path::new("damaged.json"))) {
                Ok(Ok(_)) => read += 1,
                Ok(Err(e)) => {
                    assert!(e.to_string().contains("damaged.json"), "case {case}: {e}");
                    refused += 1;
                }
                Err(_) => panic!("case {case} panicked"),
            }
        }
        eprintln!("1000 damaged run files: {read} read, {refused} refused");
        assert!(read > 0 && refused > 0, "read {read}, refused {refused}");
    }

    #[test]
    fn foreign_json_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, br#"{"hello": 1}"#).unwrap();
        assert!(RunFile::read(&path).unwrap_err().to_string().contains("not a Latency Explorer run file"));
    }
}
