//! Everything live mode reports ([`LiveEvent`]) and the records those events carry. The
//! serde shape (tagged by `type` in camelCase, fields as named here) is what the front end reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::settings::{Capacity, LiveSettings, SettingKey};
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::{FinishReason, Policy};
use lx_client::stats::Distribution;

/// Lifecycle of one backend's worker, as [`LiveEvent::BackendStatus`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum BackendState {
    /// A worker is starting and loading the model.
    Loading,
    /// Loaded and waiting for its turn.
    Ready,
    /// Loaded and being measured now.
    Measuring,
    /// Failed to load or crashed; waits for a retry.
    Error,
    /// No worker (removed from the selection, or the session stopped).
    Stopped,
}

/// A prompt slice processed in one pass, with times on the session clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct PrefillSpan {
    /// Prompt tokens in this pass.
    pub tokens: u32,
    /// Pass start, ms since the session started.
    pub start_ms: f64,
    /// Pass end, ms since the session started.
    pub end_ms: f64,
}

/// A prefilled sequence's state moving from the prefill worker to the decode worker
/// (`disaggregated`): saved, carried, loaded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct TransferSpan {
    /// The state's bytes, as sent.
    #[ts(type = "number")]
    pub bytes: u64,
    /// The prefill worker began saving it, ms since the session started.
    pub start_ms: f64,
    /// The decode worker had loaded it.
    pub end_ms: f64,
}

/// Distributions of one setting's settled requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SettingSummary {
    /// The setting.
    pub key: SettingKey,
    /// Settled requests summarised (at most [`KEEP_PER_SETTING`](super::KEEP_PER_SETTING) recent ones in the distributions).
    pub requests: u64,
    /// first token received − submit, ms.
    pub ttft_ms: Distribution,
    /// (output tokens − 1) ÷ (last token − first token), per request, tok/s.
    pub decode_tps: Distribution,
    /// admit − submit, ms.
    pub queue_ms: Distribution,
    /// prompt tokens ÷ (prefill end − prefill start), tok/s.
    pub prefill_tps: Distribution,
    /// last token − submit, ms.
    pub e2e_ms: Distribution,
    /// Output tokens received ÷ the setting's measured wall time, tok/s (0 until measurable).
    pub throughput_tps: f64,
    /// The setting's measured wall time, s.
    pub window_s: f64,
    /// Speculative decoding over the summarised requests: tokens drafted, and accepted.
    pub drafted: u64,
    pub accepted: u64,
}

/// Everything live mode reports. Times named `..._at_ms`/`start_ms`/`end_ms` are ms since the
/// session started, on the coordinator's monotonic clock; durations are ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LiveEvent {
    /// Settings took effect: requests submitted from now on use them.
    SettingsApplied {
        /// The settings now in force.
        settings: LiveSettings,
        /// Each backend's [`SettingKey::id`] under them: the summary
        /// the readout shows is the one with that key.
        key_ids: BTreeMap<String, String>,
        /// When they took effect.
        at_ms: f64,
    },
    /// A backend's worker changed state.
    BackendStatus {
        /// Backend name.
        backend: String,
        /// New state.
        state: BackendState,
        /// What was loaded (name, version, device, threads, capabilities), once loaded.
        info: Option<BackendInfo>,
        /// Model load time in the worker, ms.
        load_ms: Option<f64>,
        /// Worker process id, while it runs.
        pid: Option<u32>,
        /// What the worker was loaded for.
        capacity: Option<Capacity>,
        /// Why it failed (state `error`), or what it is doing (state `loading`).
        message: Option<String>,
        /// When.
        at_ms: f64,
    },
    /// A request was sent to the worker.
    RequestStarted {
        /// Request id (unique in the session).
        id: u64,
        /// Backend it runs on.
        backend: String,
        /// Prompt tokens.
        prompt_tokens: u32,
        /// Output tokens asked for.
        max_tokens: u32,
        /// Policy in force when it was submitted.
        policy: Policy,
        /// Concurrency in force when it was submitted.
        concurrency: usize,
        /// Submit time.
        at_ms: f64,
        /// Its tokens are streamed as [`LiveEvent::PreviewTokens`].
        preview: bool,
        /// Preview only: the end of its prompt as text, to show what the output continues.
        prompt_tail: Option<String>,
    },
    /// The scheduler gave the request a slot.
    RequestAdmitted {
        /// Request id.
        id: u64,
        /// Admit time.
        at_ms: f64,
        /// admit − submit, ms.
        queue_ms: f64,
    },
    /// A pass processed part (or all) of the request's prompt.
    RequestPrefill {
        /// Request id.
        id: u64,
        /// Prompt tokens in this pass.
        tokens: u32,
        /// Pass start.
        start_ms: f64,
        /// Pass end.
        end_ms: f64,
    },
    /// The request's prefilled state reached the decode worker (`disaggregated`).
    RequestTransferred {
        /// Request id.
        id: u64,
        transfer: TransferSpan,
    },
    /// Output of the preview request: decoded text, one piece per token (a piece may be empty
    /// while a character's bytes are split across tokens).
    PreviewTokens {
        /// Request id.
        id: u64,
        /// Index of the first token in this event (0 = the token the prefill produced).
        first_index: u32,
        /// One text piece per token.
        pieces: Vec<String>,
        /// Receipt time of each token.
        at_ms: Vec<f64>,
        /// Per token: it came from a draft the target accepted (speculative decoding).
        drafted: Vec<bool>,
    },
    /// A request ended: completed, cancelled or failed.
    RequestDone {
        /// Request id.
        id: u64,
        /// Backend it ran on.
        backend: String,
        /// Policy it was submitted under.
        policy: Policy,
        /// Prompt tokens.
        prompt_tokens: u32,
        /// Output tokens asked for.
        max_tokens: u32,
        /// Concurrency it was submitted under.
        concurrency: usize,
        /// Submit time.
        submit_at_ms: f64,
        /// Admit time, if it was admitted.
        admit_at_ms: Option<f64>,
        /// Prompt passes.
        prefill: Vec<PrefillSpan>,
        /// Receipt of the first token.
        first_token_at_ms: Option<f64>,
        /// Receipt of the last token.
        last_token_at_ms: Option<f64>,
        /// Receipt of each verify pass that accepted drafted tokens (speculative decoding),
        /// once per pass: where the timeline marks them.
        verified_at_ms: Vec<f64>,
        /// Its state's move between workers (`disaggregated`).
        transfer: Option<TransferSpan>,
        /// Output tokens received.
        output_tokens: u32,
        /// first token − submit, ms.
        ttft_ms: Option<f64>,
        /// admit − submit, ms.
        queue_ms: Option<f64>,
        /// Per-request decode rate, tok/s.
        decode_tps: Option<f64>,
        /// Prefill rate, tok/s.
        prefill_tps: Option<f64>,
        /// last token − submit, ms.
        e2e_ms: Option<f64>,
        /// Counted in the setting's summary (see the `live` module docs).
        settled: bool,
        /// `length`, `stop` or `cancelled`; absent on error.
        finish: Option<FinishReason>,
        /// Why it failed.
        error: Option<String>,
    },
    /// Figures of one setting, updated as its settled requests complete.
    Summary {
        /// The summary.
        summary: SettingSummary,
        /// Its key as one string ([`SettingKey::id`]).
        key_id: String,
    },
    /// A periodic reading (every [`TICK_EVERY`](super::TICK_EVERY)) while a backend is measured.
    Tick {
        /// When.
        at_ms: f64,
        /// Backend being measured.
        backend: String,
        /// Output tokens received over the last [`THROUGHPUT_WINDOW`](super::THROUGHPUT_WINDOW) ÷ that window, tok/s
        /// (absent until 500 ms have been measured).
        throughput_tps: Option<f64>,
        /// Requests in flight.
        in_flight: usize,
        /// Of those, waiting for a slot.
        queued: usize,
        /// Of those, admitted but without a first token.
        prefilling: usize,
        /// The current setting's p50 TTFT so far, ms.
        ttft_p50_ms: Option<f64>,
        /// The current setting's p95 TTFT so far, ms.
        ttft_p95_ms: Option<f64>,
    },
    /// Once, at the start: what this machine's sensors read and what is not available here.
    SensorsOpened {
        /// One line per source read.
        sources: Vec<String>,
        /// What cannot be read, and why.
        not_available: Vec<String>,
        /// How often they are read, ms.
        every_ms: f64,
    },
    /// The newest sensor reading (at most one per tick, whatever the phase).
    Sensors {
        /// When it was read.
        at_ms: f64,
        /// Mean CPU clock, MHz.
        cpu_mhz: Option<f64>,
        /// The first GPU's SM clock, MHz.
        gpu_mhz: Option<f64>,
        /// The first GPU's temperature, else the CPU's, °C.
        temp_c: Option<f64>,
        /// Power since the previous reading (CPU packages and GPUs that can be read), W.
        power_w: Option<f64>,
        /// Throttling now: a clock fallen over 10% while the load held steady, or a GPU's
        /// clocks held back (power cap, thermal slowdown).
        throttling: Vec<String>,
    },
    /// A worker process died or hung; its requests in flight ended with `reason`.
    WorkerCrashed {
        /// Backend name.
        backend: String,
        /// How it ended (exit status or signal, and the end of its stderr).
        reason: String,
        /// Its process id.
        pid: Option<u32>,
        /// When.
        at_ms: f64,
    },
    /// No backend can run (all failed); live mode waits for a retry.
    Paused {
        /// Why.
        reason: String,
        /// When.
        at_ms: f64,
    },
    /// A command was refused (e.g. settings that do not fit the model); nothing changed.
    Rejected {
        /// Why.
        message: String,
    },
    /// The session ended; no more events follow.
    Stopped {
        /// When.
        at_ms: f64,
    },
}
