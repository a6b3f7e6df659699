//! Payloads streamed to the UI over `tauri::ipc::Channel`s, besides live mode's own
//! [`lx_run::live::LiveEvent`] batches and a model fetch's [`lx_models::Progress`].
//! Every enum is tagged by `type` (camelCase); fields keep their Rust names, as in run files.

use std::path::PathBuf;

use lx_engine::backend::BackendInfo;
use lx_client::traffic::PointSpec;
use lx_results::results::PointResult;
use lx_engine::scheduler::Policy;
use lx_client::stats::Distribution;
use serde::Serialize;

/// One sweep point's figures, without the raw samples (those are in the run file).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct PointFigures {
    /// Backend.
    pub backend: String,
    /// Scheduling policy.
    pub policy: Policy,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Output tokens per request.
    pub max_tokens: u32,
    /// Completed requests counted.
    pub requests: usize,
    /// Failed requests.
    pub errors: usize,
    /// first token − submit, ms.
    pub ttft_ms: Distribution,
    /// Per-request decode rate, tok/s.
    pub decode_tps: Distribution,
    /// Queue wait, ms.
    pub queue_ms: Distribution,
    /// Output tokens ÷ measured wall time, tok/s.
    pub throughput_tps: f64,
    /// Why requests failed.
    pub error_messages: Vec<String>,
    /// Low ends of drawn lengths (`None`: fixed).
    pub prompt_tokens_from: Option<u32>,
    pub max_tokens_from: Option<u32>,
    /// Open-loop arrival rate, requests/s (`None`: closed loop).
    pub rate: Option<f64>,
    /// Which measurement of a repeated point (`None`: measured once).
    pub repetition: Option<u32>,
    /// Tokens in the context before the prompt (`prompt_tokens` includes them).
    pub depth: u32,
    /// Prefill tok/s, measured by the worker.
    pub prefill_tps: Distribution,
    /// The most this setting allows on the device (`None`: no probe, or a server).
    pub ceiling: Option<lx_machine::roofline::PointCeiling>,
    /// Mean power over the window of what this machine's sensors can read, W.
    pub power_w: Option<f64>,
    /// Energy ÷ output tokens, J.
    pub joules_per_token: Option<f64>,
    /// Mean clock (the first GPU's, else the CPU's), MHz.
    pub clock_mhz: Option<f64>,
    /// Throttling seen in the window.
    pub throttling: Vec<String>,
    /// What the sensors cannot read here, and why.
    pub sensors_not_available: Vec<String>,
    /// KL divergence of the point's backend and settings from the reference (or, with
    /// drafts, from decoding without them), nats, mean over the text (`None`: not measured).
    pub mean_kl: Option<f64>,
    /// How often its top choice and the reference's agree, as a fraction.
    pub top1_agreement: Option<f64>,
    /// The worker's peak resident memory over the point, warm-up included, MiB (`None`: not
    /// readable here, or a server).
    pub peak_mib: Option<f64>,
}

impl From<&PointResult> for PointFigures {
    fn from(p: &PointResult) -> Self {
        Self {
            backend: p.backend.clone(),
            policy: p.policy,
            prompt_tokens: p.prompt_tokens,
            concurrency: p.concurrency,
            max_tokens: p.max_tokens,
            requests: p.requests,
            errors: p.errors,
            ttft_ms: p.ttft_ms,
            decode_tps: p.decode_tps,
            queue_ms: p.queue_ms,
            throughput_tps: p.throughput_tps,
            error_messages: p.error_messages.clone(),
            prompt_tokens_from: p.traffic.prompt_tokens_from,
            max_tokens_from: p.traffic.max_tokens_from,
            rate: p.rate(),
            repetition: p.repetition,
            depth: p.traffic.depth,
            prefill_tps: p.prefill_tps,
            ceiling: p.ceiling.clone(),
            power_w: p.sensors.as_ref().and_then(|s| s.power_w),
            joules_per_token: p.sensors.as_ref().and_then(|s| s.joules_per_token),
            clock_mhz: p.sensors.as_ref().and_then(|s| s.clock_mhz()),
            throttling: p.sensors.as_ref().map(|s| s.throttling.clone()).unwrap_or_default(),
            sensors_not_available: p.sensors.as_ref().map(|s| s.not_available.clone()).unwrap_or_default(),
            mean_kl: p.fidelity.map(|f| f.fidelity.mean_kl),
            top1_agreement: p.fidelity.map(|f| f.fidelity.top1_agreement),
            peak_mib: p.worker_peak_rss_mib,
        }
    }
}

/// Progress of a sweep (`sweep_start`), at most ~20 messages a second.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SweepEvent {
    /// The sweep began; its run file is kept up to date at `path`.
    Started {
        /// The run file.
        path: PathBuf,
        /// Points in the grid.
        total_points: usize,
        /// Measured requests in the grid (warm-up excluded).
        total_requests: usize,
    },
    /// This machine's limits are being measured for the ceilings (once per machine and build).
    Probing,
    /// The fidelity run before the points is measuring `what` (a plan with `fidelity_chunks`).
    Fidelity {
        what: String,
    },
    /// The run has ceilings: this machine's limits are known, and so are the bytes one
    /// decode step of the model reads. Each backend's device follows with [`Self::DeviceCeilings`].
    Ceilings {
        /// Weight bytes read per decode step.
        weight_bytes_per_step: u64,
        /// Set when other programs ran beside the probe, so its limits read low.
        busy: Option<String>,
    },
    /// A backend loaded on `device`: the limits its points' ceilings come from, or none when
    /// the probe did not measure that device (a model split between devices, or a GPU only
    /// candle or MLX can use).
    DeviceCeilings {
        /// Backend.
        backend: String,
        /// The device as the backend reported it.
        device: String,
        /// The probe's figures for it.
        limits: Option<lx_machine::roofline::Limits>,
    },
    /// No ceilings in this run, and why (the sweep goes on).
    NoCeilings {
        /// What went wrong.
        message: String,
    },
    /// A backend's worker is loading.
    Loading {
        /// Backend.
        backend: String,
    },
    /// A backend's worker loaded.
    Loaded {
        /// Backend.
        backend: String,
        /// What it loaded.
        info: BackendInfo,
        /// Load time, ms.
        load_ms: f64,
    },
    /// A point began.
    PointStarted {
        /// 0-based index.
        index: usize,
        /// Points in the grid.
        total: usize,
        /// Backend.
        backend: String,
        /// Policy.
        policy: Policy,
        /// The point's load.
        spec: PointSpec,
    },
    /// Measured requests completed so far (throttled).
    Progress {
        /// Completed measured requests.
        done: usize,
        /// Measured requests in the grid.
        total: usize,
    },
    /// A point finished.
    PointDone {
        /// Its figures.
        point: PointFigures,
        /// The setting it measured, keyed as live mode keys its summaries.
        key: lx_run::live::SettingKey,
        /// That key as one string ([`lx_run::live::SettingKey::id`]).
        key_id: String,
    },
    /// The sweep ended (completed, cancelled, or with failed points).
    Finished {
        /// The run file.
        path: PathBuf,
        /// Cancelled before the end.
        stopped: bool,
        /// Points with errors.
        failed_points: usize,
    },
    /// The sweep could not run at all.
    Failed {
        /// Why.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_in_camel_case_and_keep_their_fields_names() {
        let v = serde_json::to_value(SweepEvent::Progress { done: 3, total: 10 }).unwrap();
        assert_eq!(v, serde_json::json!({"type": "progress", "done": 3, "total": 10}));
        let v = serde_json::to_value(lx_models::Progress::Transferring { bytes_done: 5, bytes_total: None }).unwrap();
        assert_eq!(v, serde_json::json!({"type": "transferring", "bytes_done": 5, "bytes_total": null}));
        let v = serde_json::to_value(lx_models::Progress::Done { path: "m.gguf".into(), already_present: true }).unwrap();
        assert_eq!(v, serde_json::json!({"type": "done", "path": "m.gguf", "already_present": true}));
        let v = serde_json::to_value(SweepEvent::Finished { path: "r.json".into(), stopped: false, failed_points: 0 }).unwrap();
        assert_eq!((&v["type"], &v["failed_points"]), (&serde_json::json!("finished"), &serde_json::json!(0)));
        let v = serde_json::to_value(SweepEvent::PointStarted { index: 0, total: 1, backend: "llama".into(), policy: Policy::Continuous, spec: PointSpec { prompt_tokens: 8, max_tokens: 4, concurrency: 1, requests: 1, warmup: 0, stop_at_eos: false, top_logprobs: 0 } }).unwrap();
        assert_eq!(v["type"], "pointStarted");
    }

    #[test]
    fn only_byte_counters_may_be_dropped() {
        assert!(lx_models::Progress::Verifying { bytes_done: 1, bytes_total: 2 }.is_counter());
        assert!(!lx_models::Progress::Extracting { part: 1, parts: 2 }.is_counter());
    }
}
