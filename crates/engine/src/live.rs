//! Live mode: keep N clients busy on one backend at a time and report what happens as it
//! happens, while the settings change under it.
//!
//! A [`LiveSession`] runs on a thread of its own. It owns one worker process per selected
//! backend (reusing [`crate::coordinator::Worker`]) and measures them **in turn, never at the
//! same time**: the active backend gets a closed loop of `concurrency` clients (each sends its
//! next request when its previous one completes, like [`crate::load`]); after
//! [`LiveSettings::rotate_after_s`] seconds (and at least one completed request) the session
//! stops submitting, lets the requests in flight finish, and hands over to the next backend.
//! With one backend selected it never rotates.
//!
//! **Settings changes** ([`LiveSession::update`]) reach the session loop within a few
//! milliseconds (it never waits more than [`LOOP_TICK`] for a reply) and apply to every
//! request submitted after that: prompt length, output length and concurrency at once,
//! the policy through `Worker::configure`. Requests already in flight finish as they were
//! submitted, so nothing measured is lost; they are marked as not settled (see below). Only
//! a change that no longer fits the loaded context (more slots, or a longer prompt + output
//! than each slot holds) reloads the worker; capacities grow in powers of two so that
//! happens rarely, and the requests in flight are then cancelled (reported, not counted).
//!
//! **What counts.** Every completed request is reported ([`LiveEvent::RequestDone`]) with its
//! figures, as defined in [`crate::load::RequestRecord`]. A request is *settled* when nothing
//! from another setting, backend or worker load overlapped it: it was not the first request
//! after a load, every request in flight at its submit had the same setting, and the setting
//! did not change while it ran. Only settled requests enter the per-setting summaries
//! ([`LiveEvent::Summary`], [`LiveSession::results`]); throughput for a setting is the output
//! tokens received ÷ the wall time from its first settled submit to its last token, summed
//! over every stretch the setting was live (the same definition as a sweep's measured window).
//!
//! **Events** are serde-tagged ([`LiveEvent`]) and delivered in batches ([`EventBatcher`]) at
//! most every [`LiveSettings::batch_ms`] (100 ms by default: at most 10 batches a second), so
//! a front end is never asked to render one event per token. Tokens are streamed for one
//! *preview* request at a time only, as decoded text pieces.
//!
//! **Failures.** A worker that dies or hangs is reported ([`LiveEvent::WorkerCrashed`]); its
//! requests in flight end with the reason; the session carries on with the other backends, or
//! pauses when none is left, until [`LiveSession::retry`] starts fresh workers.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::{BackendInfo, LoadSpec, TokenId};
use crate::coordinator::WorkerError;
use crate::load::{PointRun, PointSpec, RequestRecord};
use crate::tokenizer::PieceDecoder;
use crate::protocol::Reply;
use crate::results::PointResult;
use crate::scheduler::{FinishReason, Policy, SchedEvent, SchedulerConfig, WorkRequest};
use crate::stats::Distribution;
use crate::target::{Spawner, Target};

/// The longest the session loop waits for a worker reply before it looks at its commands
/// again: the bound on how late a settings change is seen. Not shorter: every wake-up of the
/// coordinator can preempt a backend thread (on a 2-core machine an OpenMP barrier then
/// stalls the other), and replies wake the loop anyway as they arrive.
pub const LOOP_TICK: Duration = Duration::from_millis(25);

/// How often a [`LiveEvent::Tick`] is emitted while measuring.
pub const TICK_EVERY: Duration = Duration::from_millis(250);

/// The window live throughput ([`LiveEvent::Tick`]) is measured over.
pub const THROUGHPUT_WINDOW: Duration = Duration::from_millis(1000);

/// Settled requests kept per setting for its distributions (the most recent ones).
pub const KEEP_PER_SETTING: usize = 1024;

/// What live mode runs. Every field can change while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LiveSettings {
    /// Backends to measure, in turn (canonical names: `llama`, `candle`, `mlx`).
    pub backends: Vec<String>,
    /// Prompt length of each request, in tokens (BOS included).
    pub prompt_tokens: u32,
    /// Clients kept busy (closed loop).
    pub concurrency: usize,
    /// Output tokens per request (EOS ignored).
    pub max_tokens: u32,
    /// Scheduling policy.
    pub policy: Policy,
    /// `chunked` policy: prompt tokens per pass.
    pub chunk_tokens: usize,
    /// Compute threads; 0 means physical cores. Changing it reloads the workers.
    pub threads: usize,
    /// Layers offloaded to a GPU; `None` means all. Changing it reloads the workers.
    pub gpu_layers: Option<u32>,
    /// With several backends: seconds each one is measured before the next takes over.
    pub rotate_after_s: f64,
    /// Least time between two event batches, in ms.
    pub batch_ms: u64,
    /// A worker silent this long with requests in flight is declared hung and killed, in s.
    pub hang_timeout_s: f64,
}

impl Default for LiveSettings {
    fn default() -> Self {
        Self {
            backends: vec!["llama".into()],
            prompt_tokens: 128,
            concurrency: 1,
            max_tokens: 64,
            policy: Policy::Continuous,
            chunk_tokens: crate::scheduler::DEFAULT_CHUNK_TOKENS,
            threads: 0,
            gpu_layers: None,
            rotate_after_s: 8.0,
            batch_ms: 100,
            hang_timeout_s: 300.0,
        }
    }
}

/// Most concurrent clients live mode accepts.
pub const MAX_CONCURRENCY: usize = 256;

impl LiveSettings {
    /// Check the settings against the model's context. The message names the field.
    pub fn validate(&self, model_context: usize) -> Result<(), String> {
        if self.backends.is_empty() {
            return Err("select at least one backend".into());
        }
        if self.prompt_tokens == 0 {
            return Err("prompt tokens must be at least 1 (the BOS token counts)".into());
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(format!("concurrency must be between 1 and {MAX_CONCURRENCY}"));
        }
        if self.max_tokens == 0 {
            return Err("output tokens must be at least 1".into());
        }
        if self.chunk_tokens == 0 {
            return Err("the prefill chunk must be at least 1 token".into());
        }
        if self.rotate_after_s.is_nan() || self.rotate_after_s <= 0.0 {
            return Err("the rotation period must be positive".into());
        }
        if self.hang_timeout_s.is_nan() || self.hang_timeout_s <= 0.0 {
            return Err("the hang timeout must be positive".into());
        }
        let need = self.prompt_tokens as usize + self.max_tokens as usize;
        if need > model_context {
            return Err(format!(
                "prompt tokens + output tokens = {need} exceeds the model's context of {model_context} tokens"
            ));
        }
        Ok(())
    }

    fn key(&self, backend: &str) -> SettingKey {
        SettingKey {
            backend: backend.to_string(),
            policy: self.policy,
            prompt_tokens: self.prompt_tokens,
            concurrency: self.concurrency,
            max_tokens: self.max_tokens,
            chunk_tokens: self.chunk_tokens,
        }
    }

    /// Tokens per pass the scheduler may use: room for every client's whole prompt, as a
    /// sweep point with the same setting gets (see `SweepSpec::load_spec`), within what the
    /// loaded context allows.
    fn step_budget(&self, capacity: &Capacity) -> usize {
        crate::scheduler::batch_tokens_for(self.prompt_tokens as usize, self.concurrency).min(capacity.max_batch_tokens)
    }

    fn scheduler(&self, capacity: &Capacity) -> SchedulerConfig {
        let mut s = SchedulerConfig::new(self.policy, self.concurrency, self.step_budget(capacity));
        s.chunk_tokens = self.chunk_tokens;
        s
    }
}

/// One setting of one backend: the unit summaries and curves are kept by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingKey {
    /// Backend name.
    pub backend: String,
    /// Scheduling policy.
    pub policy: Policy,
    /// Prompt tokens per request.
    pub prompt_tokens: u32,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Output tokens per request.
    pub max_tokens: u32,
    /// Prefill chunk (matters for `chunked` only).
    pub chunk_tokens: usize,
}

/// What a worker was loaded for: a setting fits when it needs no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    /// Concurrent sequences (KV-cache lanes).
    pub slots: usize,
    /// Context of each sequence, in tokens.
    pub ctx_per_slot: usize,
    /// Most tokens one pass may carry.
    pub max_batch_tokens: usize,
    /// Compute threads asked for (0: physical cores).
    pub threads: usize,
    /// GPU layers asked for.
    pub gpu_layers: Option<u32>,
}

impl Capacity {
    /// The capacity to load for `s`, growing `current` (if any) in powers of two so that
    /// sliding a control back and forth does not reload the model each time.
    pub fn for_settings(s: &LiveSettings, current: Option<&Capacity>, model_context: usize) -> Capacity {
        let need_ctx = s.prompt_tokens as usize + s.max_tokens as usize;
        let mut slots = s.concurrency.next_power_of_two().max(4);
        let mut ctx = need_ctx.next_power_of_two().max(1024);
        if let Some(c) = current.filter(|c| c.threads == s.threads && c.gpu_layers == s.gpu_layers) {
            slots = slots.max(c.slots);
            ctx = ctx.max(c.ctx_per_slot);
        }
        let ctx = ctx.min(model_context.max(need_ctx));
        Capacity {
            slots,
            ctx_per_slot: ctx,
            max_batch_tokens: crate::scheduler::batch_tokens_for(ctx, slots),
            threads: s.threads,
            gpu_layers: s.gpu_layers,
        }
    }

    /// Whether a worker loaded with this capacity can serve `s` as it is.
    pub fn fits(&self, s: &LiveSettings) -> bool {
        self.slots >= s.concurrency
            && self.ctx_per_slot >= s.prompt_tokens as usize + s.max_tokens as usize
            && self.threads == s.threads
            && self.gpu_layers == s.gpu_layers
    }

    fn load_spec(&self, model_path: &std::path::Path) -> LoadSpec {
        LoadSpec {
            model_path: model_path.to_path_buf(),
            threads: self.threads,
            slots: self.slots,
            ctx_per_slot: self.ctx_per_slot,
            max_batch_tokens: self.max_batch_tokens,
            gpu_layers: self.gpu_layers,
        }
    }
}

/// Lifecycle of one backend's worker, as [`LiveEvent::BackendStatus`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefillSpan {
    /// Prompt tokens in this pass.
    pub tokens: u32,
    /// Pass start, ms since the session started.
    pub start_ms: f64,
    /// Pass end, ms since the session started.
    pub end_ms: f64,
}

/// Distributions of one setting's settled requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingSummary {
    /// The setting.
    pub key: SettingKey,
    /// Settled requests summarised (at most [`KEEP_PER_SETTING`] recent ones in the distributions).
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
}

/// Everything live mode reports. Times named `...AtMs`/`startMs`/`endMs` are ms since the
/// session started, on the coordinator's monotonic clock; durations are ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum LiveEvent {
    /// Settings took effect: requests submitted from now on use them.
    SettingsApplied {
        /// The settings now in force.
        settings: LiveSettings,
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
        /// Counted in the setting's summary (see the module docs).
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
    },
    /// A periodic reading (every [`TICK_EVERY`]) while a backend is measured.
    Tick {
        /// When.
        at_ms: f64,
        /// Backend being measured.
        backend: String,
        /// Output tokens received over the last [`THROUGHPUT_WINDOW`] ÷ that window, tok/s
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

/// Collects events and hands them out in batches at most every `interval`. Consecutive
/// preview pieces of one request are merged, and only the latest tick and the latest summary
/// of each setting are kept, so a batch stays small however fast tokens arrive.
#[derive(Debug)]
pub struct EventBatcher {
    pending: Vec<LiveEvent>,
    interval: Duration,
    last_flush: Option<Instant>,
}

impl EventBatcher {
    pub fn new(interval: Duration) -> Self {
        Self { pending: Vec::new(), interval, last_flush: None }
    }

    /// Change the interval (takes effect at the next flush).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// Add an event, merging it into the pending batch where it can be.
    pub fn push(&mut self, event: LiveEvent) {
        match event {
            LiveEvent::PreviewTokens { id, first_index, pieces, at_ms } => {
                if let Some(LiveEvent::PreviewTokens { id: last_id, first_index: last_first, pieces: p, at_ms: a }) =
                    self.pending.last_mut()
                {
                    if *last_id == id && *last_first + p.len() as u32 == first_index {
                        p.extend(pieces);
                        a.extend(at_ms);
                        return;
                    }
                }
                self.pending.push(LiveEvent::PreviewTokens { id, first_index, pieces, at_ms });
            }
            LiveEvent::Tick { .. } => {
                self.pending.retain(|e| !matches!(e, LiveEvent::Tick { .. }));
                self.pending.push(event);
            }
            LiveEvent::Summary { ref summary } => {
                let key = summary.key.clone();
                self.pending.retain(|e| !matches!(e, LiveEvent::Summary { summary } if summary.key == key));
                self.pending.push(event);
            }
            other => self.pending.push(other),
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Whether the interval has passed since the last flush.
    pub fn due(&self, now: Instant) -> bool {
        self.last_flush.is_none_or(|last| now.saturating_duration_since(last) >= self.interval)
    }

    /// The pending batch, if there is one and the interval has passed since the last flush.
    pub fn flush_due(&mut self, now: Instant) -> Option<Vec<LiveEvent>> {
        if self.pending.is_empty() || !self.due(now) {
            return None;
        }
        self.last_flush = Some(now);
        Some(std::mem::take(&mut self.pending))
    }

    /// Everything pending, now (at the end of a session).
    pub fn flush_all(&mut self) -> Option<Vec<LiveEvent>> {
        if self.pending.is_empty() {
            None
        } else {
            self.last_flush = Some(Instant::now());
            Some(std::mem::take(&mut self.pending))
        }
    }
}

/// What the session needs to know about the model. Everything runs on the session thread.
pub struct LiveModel {
    /// The model file the workers load.
    pub model_path: std::path::PathBuf,
    /// The model's context length in tokens.
    pub context_length: usize,
    /// Prompt ids for (prompt tokens, request number): exactly that many tokens.
    pub prompt: Box<dyn Fn(u32, usize) -> Vec<TokenId> + Send>,
    /// One token's decoded bytes (for the preview).
    pub token_bytes: Box<dyn Fn(TokenId) -> Vec<u8> + Send>,
}

/// Receives event batches, on the session thread: keep it quick (hand off, do not draw).
pub type EventSink = Box<dyn FnMut(Vec<LiveEvent>) + Send>;

enum Control {
    Update(LiveSettings),
    Retry,
    Preview,
    Results(Sender<Vec<PointResult>>),
    Stop,
}

/// A running live session. Dropping it stops it.
pub struct LiveSession {
    tx: Sender<Control>,
    thread: Option<JoinHandle<()>>,
    context_length: usize,
}

impl LiveSession {
    /// Validate `settings` and start measuring on a new thread. Events go to `sink` in batches.
    pub fn start(settings: LiveSettings, model: LiveModel, spawner: Spawner, sink: EventSink) -> Result<LiveSession, String> {
        settings.validate(model.context_length)?;
        let context_length = model.context_length;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lx-live".into())
            .spawn(move || Session::new(settings, model, spawner, sink, rx).run())
            .map_err(|e| format!("cannot start the live session thread: {e}"))?;
        Ok(LiveSession { tx, thread: Some(thread), context_length })
    }

    /// Apply new settings to the next requests. Refused (and nothing changes) when they are invalid.
    pub fn update(&self, settings: LiveSettings) -> Result<(), String> {
        settings.validate(self.context_length)?;
        self.tx.send(Control::Update(settings)).map_err(|_| "the live session has ended".to_string())
    }

    /// Start fresh workers for the backends that failed or crashed, and carry on.
    pub fn retry(&self) -> Result<(), String> {
        self.tx.send(Control::Retry).map_err(|_| "the live session has ended".to_string())
    }

    /// Stream the next submitted request as the preview (the previous preview has been read).
    pub fn next_preview(&self) -> Result<(), String> {
        self.tx.send(Control::Preview).map_err(|_| "the live session has ended".to_string())
    }

    /// Everything measured so far, one point per setting, in the run-file schema.
    pub fn results(&self) -> Result<Vec<PointResult>, String> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Control::Results(tx)).map_err(|_| "the live session has ended".to_string())?;
        rx.recv_timeout(Duration::from_secs(10)).map_err(|_| "the live session did not answer".to_string())
    }

    /// Stop: cancel what is in flight, shut the workers down, and return the results.
    pub fn stop(mut self) -> Vec<PointResult> {
        let results = self.results().unwrap_or_default();
        self.halt();
        results
    }

    fn halt(&mut self) {
        let _ = self.tx.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        self.halt();
    }
}

// ---------------------------------------------------------------------------------------
// The session thread.

/// A request in flight.
struct Flight {
    backend: String,
    key: SettingKey,
    epoch: u64,
    submitted: Instant,
    record: RequestRecord,
    prefill_spans: Vec<PrefillSpan>,
    settled: bool,
    preview: Option<PieceDecoder>,
}

/// One backend's worker.
struct Slot {
    name: String,
    endpoint: Option<Box<dyn Target>>,
    capacity: Option<Capacity>,
    failed: Option<String>,
}

enum Phase {
    /// Pick the backend to measure next.
    Choose,
    /// Its worker is loading on a helper thread.
    Loading { slot: usize, capacity: Capacity, done: Receiver<Result<Box<dyn Target>, String>> },
    /// Submitting and receiving.
    Measuring { slot: usize, since: Instant, completed: usize },
    /// Waiting for the requests in flight to finish before handing over.
    Draining { slot: usize },
    /// Every backend failed: waiting for a retry.
    Paused,
}

/// Per-setting accumulation.
#[derive(Default)]
struct SettingStats {
    records: VecDeque<RequestRecord>,
    requests: u64,
    /// Closed stretches: (tokens, wall ms).
    tokens: u64,
    window_ms: f64,
}

/// The measured stretch of the current setting on the active backend.
struct Stint {
    key: SettingKey,
    epoch: u64,
    start_ms: Option<f64>,
    last_ms: f64,
    tokens: u64,
}

struct Session {
    settings: LiveSettings,
    model: LiveModel,
    spawner: Spawner,
    sink: EventSink,
    rx: Receiver<Control>,
    t0: Instant,
    slots: Vec<Slot>,
    phase: Phase,
    /// Round-robin position: the slot measured last.
    last_slot: Option<usize>,
    /// Stay on this slot at the next choice (reload).
    prefer: Option<usize>,
    in_flight: HashMap<u64, Flight>,
    next_id: u64,
    sent: usize,
    epoch: u64,
    first_after_load: bool,
    want_preview: bool,
    stats: HashMap<SettingKey, SettingStats>,
    dirty: Vec<SettingKey>,
    stint: Option<Stint>,
    recent_tokens: VecDeque<Instant>,
    last_tick: Instant,
    last_heard: Instant,
    batcher: EventBatcher,
    paused_reported: bool,
}

impl Session {
    fn new(settings: LiveSettings, model: LiveModel, spawner: Spawner, sink: EventSink, rx: Receiver<Control>) -> Self {
        let slots = settings
            .backends
            .iter()
            .map(|b| Slot { name: b.clone(), endpoint: None, capacity: None, failed: None })
            .collect();
        let batcher = EventBatcher::new(Duration::from_millis(settings.batch_ms));
        let now = Instant::now();
        Self {
            settings,
            model,
            spawner,
            sink,
            rx,
            t0: now,
            slots,
            phase: Phase::Choose,
            last_slot: None,
            prefer: None,
            in_flight: HashMap::new(),
            next_id: 1,
            sent: 0,
            epoch: 0,
            first_after_load: true,
            want_preview: true,
            stats: HashMap::new(),
            dirty: Vec::new(),
            stint: None,
            recent_tokens: VecDeque::new(),
            last_tick: now,
            last_heard: now,
            batcher,
            paused_reported: false,
        }
    }

    fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.t0).as_secs_f64() * 1e3
    }

    fn now_ms(&self) -> f64 {
        self.ms(Instant::now())
    }

    fn emit(&mut self, event: LiveEvent) {
        self.batcher.push(event);
    }

    fn run(mut self) {
        let at_ms = self.now_ms();
        self.emit(LiveEvent::SettingsApplied { settings: self.settings.clone(), at_ms });
        loop {
            if !self.commands() {
                break;
            }
            self.drive();
            self.housekeeping();
        }
        self.shutdown();
    }

    /// Handle every waiting command; false on Stop (or when the handle is gone).
    fn commands(&mut self) -> bool {
        // Block briefly only when there is nothing to receive from a worker.
        let idle = matches!(self.phase, Phase::Paused | Phase::Loading { .. });
        let first = if idle {
            match self.rx.recv_timeout(LOOP_TICK) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        } else {
            match self.rx.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return false,
            }
        };
        let mut next = first;
        while let Some(cmd) = next {
            match cmd {
                Control::Stop => return false,
                Control::Update(s) => self.apply(s),
                Control::Retry => self.retry(),
                Control::Preview => self.want_preview = true,
                Control::Results(reply) => {
                    let _ = reply.send(self.results());
                }
            }
            next = self.rx.try_recv().ok();
        }
        true
    }

    fn apply(&mut self, new: LiveSettings) {
        if let Err(message) = new.validate(self.model.context_length) {
            self.emit(LiveEvent::Rejected { message });
            return;
        }
        let old = std::mem::replace(&mut self.settings, new);
        self.batcher.set_interval(Duration::from_millis(self.settings.batch_ms));
        // The backend selection: keep the workers of backends still selected, in the new order.
        if old.backends != self.settings.backends {
            let active = self.active_slot().map(|i| self.slots[i].name.clone());
            let mut old_slots: Vec<Slot> = std::mem::take(&mut self.slots);
            for name in self.settings.backends.clone() {
                let slot = match old_slots.iter().position(|s| s.name == name) {
                    Some(i) => old_slots.swap_remove(i),
                    None => Slot { name, endpoint: None, capacity: None, failed: None },
                };
                self.slots.push(slot);
            }
            for removed in old_slots {
                let at_ms = self.now_ms();
                self.emit(status(&removed.name, BackendState::Stopped, at_ms));
                drop(removed); // shuts its worker down
            }
            let still = active.as_ref().and_then(|n| self.slots.iter().position(|s| &s.name == n));
            match (&mut self.phase, still) {
                (Phase::Measuring { slot, .. } | Phase::Draining { slot }, Some(i)) => *slot = i,
                (Phase::Loading { slot, .. }, Some(i)) => *slot = i,
                (Phase::Paused, _) => self.phase = Phase::Choose,
                (_, None) if active.is_some() => {
                    // The active backend was removed: its requests go with its worker.
                    self.cancel_in_flight("its backend was deselected");
                    self.phase = Phase::Choose;
                }
                _ => {}
            }
            self.last_slot = still;
            self.prefer = None;
        }
        if old.key("") != self.settings.key("") {
            self.new_epoch();
        }
        // The policy and limits go to the worker now; prompts and lengths apply at the next submit.
        if let Some(i) = self.active_slot() {
            if let Some(cap) = self.slots[i].capacity {
                if cap.fits(&self.settings) {
                    let config = self.settings.scheduler(&cap);
                    if let Some(ep) = self.slots[i].endpoint.as_mut() {
                        if let Err(e) = ep.configure(&config) {
                            self.crashed(i, e.to_string());
                        }
                    }
                }
            }
        }
        let at_ms = self.now_ms();
        self.emit(LiveEvent::SettingsApplied { settings: self.settings.clone(), at_ms });
    }

    fn retry(&mut self) {
        for i in 0..self.slots.len() {
            if self.slots[i].failed.take().is_some() {
                let at_ms = self.now_ms();
                let name = self.slots[i].name.clone();
                self.emit(status(&name, BackendState::Stopped, at_ms));
            }
        }
        if matches!(self.phase, Phase::Paused) {
            self.phase = Phase::Choose;
        }
        self.paused_reported = false;
    }

    fn active_slot(&self) -> Option<usize> {
        match self.phase {
            Phase::Measuring { slot, .. } | Phase::Draining { slot } | Phase::Loading { slot, .. } => Some(slot),
            _ => None,
        }
    }

    /// The setting (or backend, or worker) changed: what is in flight no longer counts, and
    /// a new measured stretch begins.
    fn new_epoch(&mut self) {
        self.epoch += 1;
        for f in self.in_flight.values_mut() {
            f.settled = false;
        }
        self.close_stint();
    }

    fn close_stint(&mut self) {
        if let Some(st) = self.stint.take() {
            if let Some(start) = st.start_ms {
                let s = self.stats.entry(st.key).or_default();
                s.tokens += st.tokens;
                s.window_ms += (st.last_ms - start).max(0.0);
            }
        }
    }

    fn drive(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Paused) {
            Phase::Choose => self.choose(),
            Phase::Loading { slot, capacity, done } => match done.try_recv() {
                Ok(result) => self.loaded(slot, capacity, result),
                Err(TryRecvError::Empty) => self.phase = Phase::Loading { slot, capacity, done },
                Err(TryRecvError::Disconnected) => self.loaded(slot, capacity, Err("the worker loader thread died".into())),
            },
            Phase::Measuring { slot, since, completed } => {
                self.phase = Phase::Measuring { slot, since, completed };
                self.measure(slot);
            }
            Phase::Draining { slot } => {
                self.phase = Phase::Draining { slot };
                if self.in_flight.is_empty() {
                    self.last_slot = Some(slot);
                    self.set_state(slot, BackendState::Ready);
                    self.phase = Phase::Choose;
                } else {
                    self.measure(slot);
                }
            }
            Phase::Paused => {
                self.phase = Phase::Paused;
                if !self.paused_reported {
                    self.paused_reported = true;
                    let reason = self
                        .slots
                        .iter()
                        .filter_map(|s| s.failed.as_ref().map(|f| format!("{}: {f}", s.name)))
                        .collect::<Vec<_>>()
                        .join("; ");
                    let at_ms = self.now_ms();
                    self.emit(LiveEvent::Paused { reason, at_ms });
                }
            }
        }
    }

    fn choose(&mut self) {
        let n = self.slots.len();
        let start = match (self.prefer.take(), self.last_slot) {
            (Some(p), _) if p < n => p,
            (_, Some(l)) => (l + 1) % n.max(1),
            _ => 0,
        };
        let Some(i) = (0..n).map(|k| (start + k) % n).find(|&i| self.slots[i].failed.is_none()) else {
            self.phase = Phase::Paused;
            return;
        };
        self.paused_reported = false;
        let fits = self.slots[i].endpoint.is_some() && self.slots[i].capacity.is_some_and(|c| c.fits(&self.settings));
        if fits {
            let cap = self.slots[i].capacity.expect("checked");
            let config = self.settings.scheduler(&cap);
            if let Err(e) = self.slots[i].endpoint.as_mut().expect("checked").configure(&config) {
                self.crashed(i, e.to_string());
                return;
            }
            self.begin_measuring(i);
            return;
        }
        // Load (or reload with room for the new setting). The old worker goes first, so two
        // models never share the machine.
        let capacity = Capacity::for_settings(&self.settings, self.slots[i].capacity.as_ref(), self.model.context_length);
        if let Some(old) = self.slots[i].endpoint.take() {
            drop(old);
        }
        self.slots[i].capacity = None;
        let spec = capacity.load_spec(&self.model.model_path);
        let config = self.settings.scheduler(&capacity);
        let spawner = Arc::clone(&self.spawner);
        let name = self.slots[i].name.clone();
        let (tx, done) = mpsc::channel();
        let spawned = std::thread::Builder::new().name(format!("lx-load-{name}")).spawn(move || {
            let _ = tx.send(spawner(&name, &spec, &config).map_err(|e| e.to_string()));
        });
        let at_ms = self.now_ms();
        let message = format!("loading for {} sequences × {} tokens", capacity.slots, capacity.ctx_per_slot);
        let name = self.slots[i].name.clone();
        self.emit(LiveEvent::BackendStatus {
            backend: name,
            state: BackendState::Loading,
            info: None,
            load_ms: None,
            pid: None,
            capacity: Some(capacity),
            message: Some(message),
            at_ms,
        });
        match spawned {
            Ok(_) => self.phase = Phase::Loading { slot: i, capacity, done },
            Err(e) => self.loaded(i, capacity, Err(format!("cannot start a loader thread: {e}"))),
        }
    }

    fn loaded(&mut self, i: usize, capacity: Capacity, result: Result<Box<dyn Target>, String>) {
        let at_ms = self.now_ms();
        let name = self.slots[i].name.clone();
        match result {
            Ok(ep) => {
                self.emit(LiveEvent::BackendStatus {
                    backend: name,
                    state: BackendState::Ready,
                    info: Some(ep.info().clone()),
                    load_ms: Some(ep.load_ms()),
                    pid: ep.pid(),
                    capacity: Some(capacity),
                    message: None,
                    at_ms,
                });
                self.slots[i].endpoint = Some(ep);
                self.slots[i].capacity = Some(capacity);
                self.first_after_load = true;
                // Settings may have moved on while it loaded: choose again (it fits or reloads).
                self.prefer = Some(i);
                self.phase = Phase::Choose;
            }
            Err(message) => {
                self.slots[i].failed = Some(message.clone());
                self.emit(LiveEvent::BackendStatus {
                    backend: name,
                    state: BackendState::Error,
                    info: None,
                    load_ms: None,
                    pid: None,
                    capacity: None,
                    message: Some(message),
                    at_ms,
                });
                self.last_slot = Some(i);
                self.phase = Phase::Choose;
            }
        }
    }

    fn begin_measuring(&mut self, i: usize) {
        self.new_epoch();
        self.recent_tokens.clear();
        self.last_heard = Instant::now();
        self.set_state(i, BackendState::Measuring);
        self.phase = Phase::Measuring { slot: i, since: Instant::now(), completed: 0 };
    }

    fn set_state(&mut self, i: usize, state: BackendState) {
        let at_ms = self.now_ms();
        let s = &self.slots[i];
        let event = LiveEvent::BackendStatus {
            backend: s.name.clone(),
            state,
            info: s.endpoint.as_ref().map(|e| e.info().clone()),
            load_ms: s.endpoint.as_ref().map(|e| e.load_ms()),
            pid: s.endpoint.as_ref().and_then(|e| e.pid()),
            capacity: s.capacity,
            message: None,
            at_ms,
        };
        self.emit(event);
    }

    /// One round of the closed loop on slot `i`: decide whether to hand over, top up the
    /// clients, then take the worker's replies for up to [`LOOP_TICK`].
    fn measure(&mut self, i: usize) {
        let draining = matches!(self.phase, Phase::Draining { .. });
        // A setting that no longer fits the loaded context: cancel and reload.
        if !self.slots[i].capacity.is_some_and(|c| c.fits(&self.settings)) {
            self.cancel_in_flight("the worker is reloading for a larger context");
            if let Some(ep) = self.slots[i].endpoint.take() {
                drop(ep);
            }
            self.slots[i].capacity = None;
            self.prefer = Some(i);
            self.phase = Phase::Choose;
            return;
        }
        if let Phase::Measuring { since, completed, .. } = self.phase {
            let others = self.slots.iter().enumerate().any(|(k, s)| k != i && s.failed.is_none());
            if others && completed > 0 && since.elapsed().as_secs_f64() >= self.settings.rotate_after_s {
                self.phase = Phase::Draining { slot: i };
                return;
            }
        }
        if !draining && !self.fill(i) {
            return;
        }
        let deadline = Instant::now() + LOOP_TICK;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = match self.slots[i].endpoint.as_mut() {
                Some(ep) => ep.recv(left),
                None => return,
            };
            match reply {
                Ok(Some((at, reply))) => {
                    self.last_heard = Instant::now();
                    if !self.reply(i, at, reply) {
                        return;
                    }
                    // A client is free: its next request goes now (a closed loop resubmits on
                    // completion, not on the next tick); then back to the loop, which looks at
                    // commands before waiting again.
                    if !draining && self.in_flight.len() < self.settings.concurrency {
                        if !self.fill(i) {
                            return;
                        }
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.crashed(i, e.to_string());
                    return;
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        if !self.in_flight.is_empty() && self.last_heard.elapsed().as_secs_f64() > self.settings.hang_timeout_s {
            if let Some(ep) = self.slots[i].endpoint.as_mut() {
                ep.kill();
            }
            let why = WorkerError::Hung(Duration::from_secs_f64(self.settings.hang_timeout_s)).to_string();
            self.crashed(i, why);
        }
    }

    /// Submit until every client has a request in flight; false if the worker died.
    fn fill(&mut self, i: usize) -> bool {
        while self.in_flight.len() < self.settings.concurrency {
            if let Err(e) = self.submit(i) {
                self.crashed(i, e.to_string());
                return false;
            }
        }
        true
    }

    fn submit(&mut self, i: usize) -> Result<(), WorkerError> {
        let id = self.next_id;
        self.next_id += 1;
        let s = &self.settings;
        let backend = self.slots[i].name.clone();
        let key = s.key(&backend);
        let prompt = (self.model.prompt)(s.prompt_tokens, self.sent);
        self.sent += 1;
        let preview = std::mem::take(&mut self.want_preview);
        let prompt_tail = preview.then(|| {
            let mut d = PieceDecoder::default();
            let tail = &prompt[prompt.len().saturating_sub(24)..];
            let text: String = tail.iter().map(|&t| d.push(&(self.model.token_bytes)(t))).collect();
            text
        });
        let settled = !self.first_after_load && self.in_flight.values().all(|f| f.epoch == self.epoch);
        self.first_after_load = false;
        let request = WorkRequest { id, prompt, max_tokens: s.max_tokens, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: 0 };
        let submitted = Instant::now();
        let at_ms = self.ms(submitted);
        let record = RequestRecord::new(id, s.prompt_tokens, s.max_tokens, at_ms);
        if settled {
            let stint = self.stint.get_or_insert_with(|| Stint { key: key.clone(), epoch: self.epoch, start_ms: None, last_ms: at_ms, tokens: 0 });
            if stint.start_ms.is_none() {
                stint.start_ms = Some(at_ms);
                stint.last_ms = at_ms;
            }
        }
        self.emit(LiveEvent::RequestStarted {
            id,
            backend: backend.clone(),
            prompt_tokens: s.prompt_tokens,
            max_tokens: s.max_tokens,
            policy: s.policy,
            concurrency: s.concurrency,
            at_ms,
            preview,
            prompt_tail,
        });
        self.in_flight.insert(
            id,
            Flight {
                backend,
                key,
                epoch: self.epoch,
                submitted,
                record,
                prefill_spans: Vec::new(),
                settled,
                preview: preview.then(PieceDecoder::default),
            },
        );
        match self.slots[i].endpoint.as_mut() {
            Some(ep) => ep.submit(request),
            None => Err(WorkerError::Died("is gone".into())),
        }
    }

    /// Handle one reply; false when the worker must be dropped.
    fn reply(&mut self, i: usize, at: Instant, reply: Reply) -> bool {
        let event = match reply {
            Reply::Event(e) => e,
            Reply::Error { error } => {
                // A refused command is a bug on our side; report it and carry on.
                self.emit(LiveEvent::Rejected { message: format!("the worker refused a command: {error}") });
                return true;
            }
            _ => return true,
        };
        let Some(ep) = self.slots[i].endpoint.as_ref() else { return false };
        // The request's record is booked exactly as a sweep books it; live mode only adds
        // its events and running figures on top.
        let to_local = |t: u64| ep.to_local(t);
        let t0 = self.t0;
        let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
        match &event {
            SchedEvent::Step { .. } => {}
            SchedEvent::Finished { id, reason, .. } => self.finish(*id, Some(*reason), None),
            SchedEvent::Failed { id, error } => self.finish(*id, None, Some(error.clone())),
            SchedEvent::Admitted { id, .. } | SchedEvent::Prefill { id, .. } | SchedEvent::PrefixReused { id, .. } | SchedEvent::Token { id, .. } | SchedEvent::Warning { id, .. } => {
                let id = *id;
                let Some(f) = self.in_flight.get_mut(&id) else { return true };
                f.record.book(f.submitted, at, &event, &to_local);
                match event {
                    SchedEvent::Admitted { t, .. } => {
                        let at_ms = ms(to_local(t));
                        let queue_ms = f.record.admit_ms.unwrap_or(0.0);
                        self.batcher.push(LiveEvent::RequestAdmitted { id, at_ms, queue_ms });
                    }
                    SchedEvent::Prefill { tokens, t_start, t_end, .. } => {
                        let (start_ms, end_ms) = (ms(to_local(t_start)), ms(to_local(t_end)));
                        f.prefill_spans.push(PrefillSpan { tokens, start_ms, end_ms });
                        self.batcher.push(LiveEvent::RequestPrefill { id, tokens, start_ms, end_ms });
                    }
                    SchedEvent::Token { index, token, .. } => {
                        let at_ms = ms(at);
                        self.recent_tokens.push_back(at);
                        if let Some(st) = self.stint.as_mut() {
                            if st.epoch == f.epoch && st.start_ms.is_some_and(|s| at_ms >= s) {
                                st.tokens += 1;
                                st.last_ms = at_ms;
                            }
                        }
                        if let Some(dec) = f.preview.as_mut() {
                            let piece = dec.push(&(self.model.token_bytes)(token));
                            self.batcher.push(LiveEvent::PreviewTokens { id, first_index: index, pieces: vec![piece], at_ms: vec![at_ms] });
                        }
                    }
                    _ => {}
                }
            }
        }
        true
    }

    fn finish(&mut self, id: u64, reason: Option<FinishReason>, error: Option<String>) {
        let Some(mut f) = self.in_flight.remove(&id) else { return };
        f.record.finish = reason;
        f.record.error = error;
        let ok = f.record.ok();
        if let Phase::Measuring { completed, .. } = &mut self.phase {
            if ok {
                *completed += 1;
            }
        }
        let settled = f.settled && ok && f.epoch == self.epoch;
        let r = &f.record;
        let event = LiveEvent::RequestDone {
            id,
            backend: f.backend.clone(),
            policy: f.key.policy,
            prompt_tokens: r.prompt_tokens,
            max_tokens: r.max_tokens,
            concurrency: f.key.concurrency,
            submit_at_ms: r.submit_ms,
            admit_at_ms: r.admit_ms.map(|q| r.submit_ms + q),
            prefill: std::mem::take(&mut f.prefill_spans),
            first_token_at_ms: r.token_ms.first().map(|t| r.submit_ms + t),
            last_token_at_ms: r.token_ms.last().map(|t| r.submit_ms + t),
            output_tokens: r.tokens.len() as u32,
            ttft_ms: r.ttft_ms(),
            queue_ms: r.queue_ms(),
            decode_tps: r.decode_tps(),
            prefill_tps: r.prefill_tps(),
            e2e_ms: r.e2e_ms(),
            settled,
            finish: r.finish,
            error: r.error.clone(),
        };
        self.emit(event);
        if settled {
            let key = f.key.clone();
            let s = self.stats.entry(key.clone()).or_default();
            s.requests += 1;
            if s.records.len() == KEEP_PER_SETTING {
                s.records.pop_front();
            }
            s.records.push_back(f.record);
            if !self.dirty.contains(&key) {
                self.dirty.push(key);
            }
        }
    }

    /// End every request in flight with `why` (its worker is going away).
    fn cancel_in_flight(&mut self, why: &str) {
        let ids: Vec<u64> = self.in_flight.keys().copied().collect();
        for id in ids {
            self.finish(id, Some(FinishReason::Cancelled), Some(why.to_string()));
        }
    }

    fn crashed(&mut self, i: usize, reason: String) {
        let pid = self.slots[i].endpoint.as_ref().and_then(|e| e.pid());
        let name = self.slots[i].name.clone();
        let at_ms = self.now_ms();
        self.emit(LiveEvent::WorkerCrashed { backend: name.clone(), reason: reason.clone(), pid, at_ms });
        let ids: Vec<u64> = self.in_flight.keys().copied().collect();
        for id in ids {
            self.finish(id, None, Some(format!("worker {name}: {reason}")));
        }
        if let Some(mut ep) = self.slots[i].endpoint.take() {
            ep.kill();
        }
        self.slots[i].capacity = None;
        self.slots[i].failed = Some(reason.clone());
        self.emit(LiveEvent::BackendStatus {
            backend: name,
            state: BackendState::Error,
            info: None,
            load_ms: None,
            pid,
            capacity: None,
            message: Some(reason),
            at_ms,
        });
        self.new_epoch();
        self.last_slot = Some(i);
        self.phase = Phase::Choose;
    }

    fn summary(&self, key: &SettingKey) -> Option<SettingSummary> {
        let s = self.stats.get(key)?;
        let recs = || s.records.iter();
        let (mut tokens, mut window_ms) = (s.tokens, s.window_ms);
        if let Some(st) = self.stint.as_ref().filter(|st| &st.key == key) {
            if let Some(start) = st.start_ms {
                tokens += st.tokens;
                window_ms += (st.last_ms - start).max(0.0);
            }
        }
        let throughput_tps = if window_ms > 0.0 { tokens as f64 / window_ms * 1e3 } else { 0.0 };
        Some(SettingSummary {
            key: key.clone(),
            requests: s.requests,
            ttft_ms: Distribution::of(recs().filter_map(|r| r.ttft_ms())),
            decode_tps: Distribution::of(recs().filter_map(|r| r.decode_tps())),
            queue_ms: Distribution::of(recs().filter_map(|r| r.queue_ms())),
            prefill_tps: Distribution::of(recs().filter_map(|r| r.prefill_tps())),
            e2e_ms: Distribution::of(recs().filter_map(|r| r.e2e_ms())),
            throughput_tps,
            window_s: window_ms / 1e3,
        })
    }

    fn results(&self) -> Vec<PointResult> {
        let mut keys: Vec<&SettingKey> = self.stats.keys().collect();
        keys.sort_by(|a, b| {
            (&a.backend, a.policy.name(), a.concurrency, a.prompt_tokens, a.max_tokens)
                .cmp(&(&b.backend, b.policy.name(), b.concurrency, b.prompt_tokens, b.max_tokens))
        });
        keys.into_iter()
            .filter_map(|key| {
                let summary = self.summary(key)?;
                let s = &self.stats[key];
                let spec = PointSpec {
                    prompt_tokens: key.prompt_tokens,
                    max_tokens: key.max_tokens,
                    concurrency: key.concurrency,
                    requests: s.records.len(),
                    warmup: 0,
                    stop_at_eos: false,
                    top_logprobs: 0,
                };
                let run = PointRun {
                    records: s.records.iter().cloned().collect(),
                    steps: Vec::new(),
                    window_ms: summary.window_s * 1e3,
                    worker_error: None,
                    stopped: false,
                };
                let mut point = PointResult::from_run(&key.backend, key.policy, &spec, run);
                point.throughput_tps = summary.throughput_tps;
                Some(point)
            })
            .collect()
    }

    /// Ticks, summaries and event batches: summaries are computed once per batch at most.
    fn housekeeping(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_tick) >= TICK_EVERY {
            self.last_tick = now;
            self.tick(now);
        }
        if !self.batcher.due(now) {
            return;
        }
        for key in std::mem::take(&mut self.dirty) {
            if let Some(summary) = self.summary(&key) {
                self.batcher.push(LiveEvent::Summary { summary });
            }
        }
        if let Some(batch) = self.batcher.flush_due(now) {
            (self.sink)(batch);
        }
    }

    fn tick(&mut self, now: Instant) {
        let (slot, since) = match self.phase {
            Phase::Measuring { slot, since, .. } => (slot, Some(since)),
            Phase::Draining { slot } => (slot, None),
            _ => return,
        };
        while self.recent_tokens.front().is_some_and(|&t| now.duration_since(t) > THROUGHPUT_WINDOW) {
            self.recent_tokens.pop_front();
        }
        let measured = since.map(|s| now.duration_since(s)).unwrap_or(THROUGHPUT_WINDOW).min(THROUGHPUT_WINDOW);
        let throughput_tps = (measured >= Duration::from_millis(500))
            .then(|| self.recent_tokens.len() as f64 / measured.as_secs_f64());
        let queued = self.in_flight.values().filter(|f| f.record.admit_ms.is_none()).count();
        let prefilling = self.in_flight.values().filter(|f| f.record.admit_ms.is_some() && f.record.token_ms.is_empty()).count();
        let backend = self.slots[slot].name.clone();
        let key = self.settings.key(&backend);
        let (p50, p95) = match self.stats.get(&key) {
            Some(s) if !s.records.is_empty() => {
                let d = Distribution::of(s.records.iter().filter_map(|r| r.ttft_ms()));
                (Some(d.p50), Some(d.p95))
            }
            _ => (None, None),
        };
        let at_ms = self.ms(now);
        self.batcher.push(LiveEvent::Tick {
            at_ms,
            backend,
            throughput_tps,
            in_flight: self.in_flight.len(),
            queued,
            prefilling,
            ttft_p50_ms: p50,
            ttft_p95_ms: p95,
        });
    }

    fn shutdown(&mut self) {
        self.cancel_in_flight("live mode stopped");
        self.close_stint();
        for i in 0..self.slots.len() {
            if let Some(ep) = self.slots[i].endpoint.as_mut() {
                ep.close();
            }
        }
        let names: Vec<String> = self.slots.iter().map(|s| s.name.clone()).collect();
        self.slots.clear(); // waits for each worker to exit
        let at_ms = self.now_ms();
        for name in names {
            self.emit(status(&name, BackendState::Stopped, at_ms));
        }
        self.emit(LiveEvent::Stopped { at_ms });
        if let Some(batch) = self.batcher.flush_all() {
            (self.sink)(batch);
        }
    }
}

fn status(backend: &str, state: BackendState, at_ms: f64) -> LiveEvent {
    LiveEvent::BackendStatus { backend: backend.into(), state, info: None, load_ms: None, pid: None, capacity: None, message: None, at_ms }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Command;
    use crate::backend::{Backend, BackendError, Batch, Capabilities, Choice, ChunkOutput, Outputs};
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    // -- a fake model that takes time like a real one: per prompt token and per pass --------

    struct SlowModel {
        info: BackendInfo,
        prefill_us_per_token: u64,
        step_us: u64,
    }

    impl Backend for SlowModel {
        fn info(&self) -> &BackendInfo {
            &self.info
        }
        fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
            let prompt: usize = batch.chunks.iter().filter(|c| c.tokens.len() > 1).map(|c| c.tokens.len()).sum();
            std::thread::sleep(Duration::from_micros(self.step_us + self.prefill_us_per_token * prompt as u64));
            Ok(batch
                .chunks
                .iter()
                .filter(|c| c.outputs != Outputs::None)
                .map(|c| ChunkOutput { slot: c.slot, choices: vec![Choice { token: 65 + (c.pos % 26), top: Vec::new() }] })
                .collect())
        }
        fn clear(&mut self, _slot: crate::backend::Slot) {}
    }

    /// Bytes in from the coordinator side.
    struct ChanReader {
        rx: Receiver<Vec<u8>>,
        buf: Vec<u8>,
    }
    impl Read for ChanReader {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.buf.is_empty() {
                match self.rx.recv() {
                    Ok(b) => self.buf = b,
                    Err(_) => return Ok(0),
                }
            }
            let n = out.len().min(self.buf.len());
            out[..n].copy_from_slice(&self.buf[..n]);
            self.buf.drain(..n);
            Ok(n)
        }
    }

    /// Lines out to the coordinator side, stamped on receipt; fails once "crashed".
    struct ChanWriter {
        tx: Sender<(Instant, Reply)>,
        line: Vec<u8>,
        crash: Arc<AtomicBool>,
    }
    impl Write for ChanWriter {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.crash.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("crashed"));
            }
            self.line.extend_from_slice(b);
            while let Some(n) = self.line.iter().position(|&c| c == b'\n') {
                let line: Vec<u8> = self.line.drain(..=n).collect();
                let reply: Reply = serde_json::from_slice(&line).expect("worker writes replies");
                let _ = self.tx.send((Instant::now(), reply));
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The worker protocol served on a thread: the real scheduler and serve loop, a fake model.
    struct FakeWorker {
        info: BackendInfo,
        to_worker: Sender<Vec<u8>>,
        from_worker: Receiver<(Instant, Reply)>,
        epoch: Instant,
        crash: Arc<AtomicBool>,
        gone: bool,
    }

    impl FakeWorker {
        fn send(&mut self, cmd: &Command) -> Result<(), WorkerError> {
            if self.gone || self.crash.load(Ordering::SeqCst) {
                self.gone = true;
                return Err(WorkerError::Died("exited on signal 9 (test)".into()));
            }
            let mut line = serde_json::to_vec(cmd).unwrap();
            line.push(b'\n');
            self.to_worker.send(line).map_err(|_| WorkerError::Died("exited".into()))
        }
    }

    impl Target for FakeWorker {
        fn info(&self) -> &BackendInfo {
            &self.info
        }
        fn load_ms(&self) -> f64 {
            1.0
        }
        fn configure(&mut self, config: &SchedulerConfig) -> Result<(), WorkerError> {
            self.send(&Command::Configure { scheduler: config.clone() })
        }
        fn submit(&mut self, request: WorkRequest) -> Result<(), WorkerError> {
            self.send(&Command::Submit { request })
        }
        fn cancel(&mut self, id: u64) {
            let _ = self.send(&Command::Cancel { id });
        }
        fn close(&mut self) {
            let _ = self.send(&Command::Shutdown);
        }
        fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, WorkerError> {
            if self.gone || self.crash.load(Ordering::SeqCst) {
                self.gone = true;
                return Err(WorkerError::Died("exited on signal 9 (test)".into()));
            }
            match self.from_worker.recv_timeout(timeout) {
                Ok(r) => Ok(Some(r)),
                Err(RecvTimeoutError::Timeout) => Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    self.gone = true;
                    let killed = self.crash.load(Ordering::SeqCst);
                    Err(WorkerError::Died(if killed { "exited on signal 9 (test)" } else { "exited" }.into()))
                }
            }
        }
        fn to_local(&self, worker_ns: u64) -> Instant {
            self.epoch + Duration::from_nanos(worker_ns)
        }
        fn kill(&mut self) {
            self.crash.store(true, Ordering::SeqCst);
            self.gone = true;
        }
    }

    /// A spawner of fake workers; `crash` makes the live ones die, `loads` counts starts.
    struct Fakes {
        crash: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
        loads: Arc<AtomicUsize>,
        fail_loads: Arc<AtomicBool>,
    }

    fn fakes(prefill_us_per_token: u64, step_us: u64) -> (Spawner, Fakes) {
        let crash: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Default::default();
        let loads = Arc::new(AtomicUsize::new(0));
        let fail_loads = Arc::new(AtomicBool::new(false));
        let f = Fakes { crash: crash.clone(), loads: loads.clone(), fail_loads: fail_loads.clone() };
        let spawner: Spawner = Arc::new(move |backend: &str, spec: &LoadSpec, config: &SchedulerConfig| {
            loads.fetch_add(1, Ordering::SeqCst);
            if fail_loads.load(Ordering::SeqCst) {
                return Err(WorkerError::Load("cannot load model: test".into()));
            }
            let info = BackendInfo {
                name: backend.into(),
                version: "fake".into(),
                device: "test".into(),
                cpu_fallback: None,
                threads: 1,
                capabilities: Capabilities {
                    mixed_position_batches: true,
                    max_batch_tokens: spec.max_batch_tokens,
                    slots: spec.slots,
                    ctx_per_slot: spec.ctx_per_slot,
                    prefix_copy: false,
                },
            };
            let (to_worker, rx_in) = mpsc::channel::<Vec<u8>>();
            let (tx_out, from_worker) = mpsc::channel();
            let dead = Arc::new(AtomicBool::new(false));
            crash.lock().unwrap().push(dead.clone());
            let model_info = info.clone();
            let epoch = Instant::now();
            let writer = ChanWriter { tx: tx_out, line: Vec::new(), crash: dead.clone() };
            std::thread::spawn(move || {
                let loader: crate::worker::Loader = Box::new(move |_spec: &LoadSpec| {
                    Ok(Box::new(SlowModel { info: model_info, prefill_us_per_token, step_us }) as Box<dyn Backend>)
                });
                let input = BufReader::new(ChanReader { rx: rx_in, buf: Vec::new() });
                let _ = crate::worker::serve(loader, input, writer);
            });
            let mut w = FakeWorker { info, to_worker, from_worker, epoch, crash: dead, gone: false };
            w.send(&Command::Load { spec: spec.clone(), scheduler: config.clone() }).unwrap();
            // Hello, then Loaded.
            for _ in 0..2 {
                match w.recv(Duration::from_secs(5))? {
                    Some((_, Reply::LoadFailed { error })) => return Err(WorkerError::Load(error)),
                    Some(_) => {}
                    None => return Err(WorkerError::Unexpected("fake worker did not answer".into())),
                }
            }
            Ok(Box::new(w) as Box<dyn Target>)
        });
        (spawner, f)
    }

    fn model() -> LiveModel {
        LiveModel {
            model_path: "fake.gguf".into(),
            context_length: 8192,
            prompt: Box::new(|n, _| (0..n).map(|i| 97 + (i % 26)).collect()),
            token_bytes: Box::new(|t| vec![t as u8]),
        }
    }

    /// Collects every event with its arrival time.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<(Instant, LiveEvent)>>>, Arc<Mutex<Vec<(Instant, usize)>>>);

    impl Log {
        fn sink(&self) -> EventSink {
            let (events, batches) = (self.0.clone(), self.1.clone());
            Box::new(move |batch: Vec<LiveEvent>| {
                let now = Instant::now();
                batches.lock().unwrap().push((now, batch.len()));
                events.lock().unwrap().extend(batch.into_iter().map(|e| (now, e)));
            })
        }
        fn events(&self) -> Vec<LiveEvent> {
            self.0.lock().unwrap().iter().map(|(_, e)| e.clone()).collect()
        }
        fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&LiveEvent) -> bool) -> LiveEvent {
            let end = Instant::now() + timeout;
            loop {
                if let Some((_, e)) = self.0.lock().unwrap().iter().find(|(_, e)| pred(e)) {
                    return e.clone();
                }
                assert!(Instant::now() < end, "timed out waiting for {what}; events: {:#?}", self.events().iter().rev().take(12).collect::<Vec<_>>());
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        fn count(&self, pred: impl Fn(&LiveEvent) -> bool) -> usize {
            self.0.lock().unwrap().iter().filter(|(_, e)| pred(e)).count()
        }
    }

    fn done_settled(prompt: u32) -> impl Fn(&LiveEvent) -> bool {
        move |e| matches!(e, LiveEvent::RequestDone { settled: true, prompt_tokens, .. } if *prompt_tokens == prompt)
    }

    // -- pure pieces -------------------------------------------------------------------------

    #[test]
    fn settings_are_checked_against_the_context() {
        let s = LiveSettings::default();
        assert!(s.validate(2048).is_ok());
        assert!(LiveSettings { prompt_tokens: 2000, ..s.clone() }.validate(2048).unwrap_err().contains("context"));
        assert!(LiveSettings { concurrency: 0, ..s.clone() }.validate(2048).unwrap_err().contains("concurrency"));
        assert!(LiveSettings { backends: vec![], ..s.clone() }.validate(2048).unwrap_err().contains("backend"));
        assert!(LiveSettings { max_tokens: 0, ..s }.validate(2048).unwrap_err().contains("output"));
    }

    #[test]
    fn settings_come_from_partial_camel_case_json() {
        let s: LiveSettings = serde_json::from_str(r#"{"promptTokens": 512, "concurrency": 4, "policy": "chunked"}"#).unwrap();
        assert_eq!((s.prompt_tokens, s.concurrency, s.policy), (512, 4, Policy::Chunked));
        assert_eq!(s.max_tokens, LiveSettings::default().max_tokens);
    }

    #[test]
    fn capacity_grows_in_powers_of_two_and_never_shrinks() {
        let s = LiveSettings { prompt_tokens: 100, max_tokens: 64, concurrency: 3, ..Default::default() };
        let c = Capacity::for_settings(&s, None, 32768);
        assert_eq!((c.slots, c.ctx_per_slot), (4, 1024));
        assert!(c.fits(&s));
        let bigger = LiveSettings { prompt_tokens: 1500, concurrency: 5, ..s.clone() };
        assert!(!c.fits(&bigger));
        let c2 = Capacity::for_settings(&bigger, Some(&c), 32768);
        assert_eq!((c2.slots, c2.ctx_per_slot), (8, 2048));
        // Back down: the loaded capacity still fits, no reload.
        assert!(c2.fits(&s));
        assert_eq!(Capacity::for_settings(&s, Some(&c2), 32768).ctx_per_slot, 2048);
        // Never beyond the model's context.
        let long = LiveSettings { prompt_tokens: 30000, max_tokens: 700, ..s.clone() };
        assert_eq!(Capacity::for_settings(&long, None, 32768).ctx_per_slot, 32768);
        // A thread change needs a reload.
        assert!(!c2.fits(&LiveSettings { threads: 3, ..s }));
    }

    #[test]
    fn scheduler_budget_matches_a_sweep_point_within_capacity() {
        let s = LiveSettings { prompt_tokens: 256, concurrency: 4, ..Default::default() };
        let cap = Capacity::for_settings(&s, None, 32768);
        assert_eq!(s.scheduler(&cap).max_batch_tokens, 1024);
        assert_eq!(s.scheduler(&cap).max_batch_seqs, 4);
        let tiny = LiveSettings { prompt_tokens: 16, concurrency: 1, ..Default::default() };
        assert_eq!(tiny.scheduler(&cap).max_batch_tokens, 512);
    }

    #[test]
    fn batcher_merges_preview_pieces_and_keeps_the_latest_tick_and_summary() {
        let mut b = EventBatcher::new(Duration::from_millis(50));
        let t0 = Instant::now();
        let piece = |i: u32| LiveEvent::PreviewTokens { id: 7, first_index: i, pieces: vec![format!("p{i}")], at_ms: vec![i as f64] };
        for i in 0..100 {
            b.push(piece(i));
        }
        let tick = |at: f64| LiveEvent::Tick { at_ms: at, backend: "x".into(), throughput_tps: None, in_flight: 0, queued: 0, prefilling: 0, ttft_p50_ms: None, ttft_p95_ms: None };
        b.push(tick(1.0));
        b.push(tick(2.0));
        let first = b.flush_due(t0).expect("first flush is immediate");
        assert_eq!(first.len(), 2, "{first:?}");
        match &first[0] {
            LiveEvent::PreviewTokens { first_index: 0, pieces, at_ms, .. } => {
                assert_eq!(pieces.len(), 100);
                assert_eq!(pieces[99], "p99");
                assert_eq!(at_ms.len(), 100);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(first[1], LiveEvent::Tick { at_ms, .. } if at_ms == 2.0));
        // Not due again before the interval.
        b.push(piece(100));
        assert!(b.flush_due(t0 + Duration::from_millis(10)).is_none());
        assert!(b.flush_due(t0 + Duration::from_millis(50)).is_some());
        // A gap in indices (another request, or a lost piece) is not merged.
        b.push(piece(101));
        b.push(piece(103));
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn batcher_rate_is_bounded_whatever_the_event_rate() {
        let mut b = EventBatcher::new(Duration::from_millis(50));
        let t0 = Instant::now();
        let mut batches = 0;
        // One simulated second, an event every 100 µs.
        for us in (0..1_000_000u64).step_by(100) {
            b.push(LiveEvent::Rejected { message: String::new() });
            if b.flush_due(t0 + Duration::from_micros(us)).is_some() {
                batches += 1;
            }
        }
        assert!((19..=21).contains(&batches), "{batches} batches in one second");
    }

    #[test]
    fn events_serialise_tagged_and_camel_case() {
        let e = LiveEvent::RequestAdmitted { id: 3, at_ms: 1.5, queue_ms: 0.5 };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v, serde_json::json!({"type": "requestAdmitted", "id": 3, "atMs": 1.5, "queueMs": 0.5}));
        let back: LiveEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    // -- the session over fake workers -------------------------------------------------------

    #[test]
    fn keeps_n_clients_busy_and_reports_requests() {
        let (spawner, _f) = fakes(20, 2000);
        let log = Log::default();
        let settings = LiveSettings { prompt_tokens: 64, max_tokens: 8, concurrency: 3, ..Default::default() };
        let session = LiveSession::start(settings, model(), spawner, log.sink()).unwrap();
        log.wait_for("ready", Duration::from_secs(5), |e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Ready, .. }));
        let done = log.wait_for("a settled request", Duration::from_secs(5), done_settled(64));
        match done {
            LiveEvent::RequestDone { ttft_ms: Some(ttft), decode_tps: Some(tps), output_tokens: 8, prefill, admit_at_ms: Some(_), .. } => {
                assert!(ttft > 0.0 && tps > 0.0);
                assert!(!prefill.is_empty());
            }
            other => panic!("{other:?}"),
        }
        log.wait_for("a summary", Duration::from_secs(5), |e| matches!(e, LiveEvent::Summary { summary } if summary.throughput_tps > 0.0));
        log.wait_for("a tick", Duration::from_secs(5), |e| matches!(e, LiveEvent::Tick { in_flight: 3, .. }));
        // Exactly one preview stream, with one piece per token.
        let previews = log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. }));
        assert_eq!(previews, 1);
        let results = session.stop();
        assert_eq!(results.len(), 1);
        assert!(results[0].requests > 0 && results[0].throughput_tps > 0.0, "{:?}", results[0].ttft_ms);
        assert!(matches!(log.events().last(), Some(LiveEvent::Stopped { .. })));
        // Never more in flight than the concurrency.
        let mut open = std::collections::HashSet::new();
        let mut most = 0;
        for e in log.events() {
            match e {
                LiveEvent::RequestStarted { id, .. } => {
                    open.insert(id);
                }
                LiveEvent::RequestDone { id, .. } => {
                    open.remove(&id);
                }
                _ => {}
            }
            most = most.max(open.len());
        }
        assert_eq!(most, 3);
    }

    #[test]
    fn a_settings_change_applies_to_the_next_requests_within_200_ms() {
        // Prefill 50 µs per token: a 1024-token prompt takes ~50 ms longer than a 64-token one.
        let (spawner, f) = fakes(50, 1000);
        let log = Log::default();
        // Short batches, so the arrival time at the sink is close to the submit time.
        let settings = LiveSettings { prompt_tokens: 64, max_tokens: 4, concurrency: 2, batch_ms: 20, ..Default::default() };
        let session = LiveSession::start(settings.clone(), model(), spawner, log.sink()).unwrap();
        for _ in 0..3 {
            log.wait_for("settled requests at 64", Duration::from_secs(5), done_settled(64));
        }
        let loads_before = f.loads.load(Ordering::SeqCst);
        let changed = Instant::now();
        session.update(LiveSettings { prompt_tokens: 900, ..settings }).unwrap();
        // The first request with the new length is submitted within 200 ms of the change.
        let end = Instant::now() + Duration::from_secs(5);
        let started_at = loop {
            let found = log.0.lock().unwrap().iter().find_map(|(t, e)| matches!(e, LiveEvent::RequestStarted { prompt_tokens: 900, .. }).then_some(*t));
            if let Some(t) = found {
                break t;
            }
            assert!(Instant::now() < end, "no request with the new prompt length");
            std::thread::sleep(Duration::from_millis(1));
        };
        // (The event reaches the sink in the next batch, up to 20 ms after the submit.)
        assert!(started_at.duration_since(changed) < Duration::from_millis(200), "{:?}", started_at.duration_since(changed));
        log.wait_for("settled requests at 900", Duration::from_secs(5), done_settled(900));
        // Nothing was reloaded (900 + 4 fits the 1024-token slots) and nothing measured was lost.
        assert_eq!(f.loads.load(Ordering::SeqCst), loads_before);
        let results = session.stop();
        let ttft = |p: u32| results.iter().find(|r| r.prompt_tokens == p).map(|r| r.ttft_ms.p50).unwrap();
        assert!(ttft(900) > ttft(64), "TTFT at 900 ({}) should exceed TTFT at 64 ({})", ttft(900), ttft(64));
        assert_eq!(results.len(), 2);
    }

    #[test]
    fn a_setting_beyond_the_loaded_context_reloads_and_carries_on() {
        let (spawner, f) = fakes(1, 500);
        let log = Log::default();
        let settings = LiveSettings { prompt_tokens: 64, max_tokens: 4, concurrency: 2, ..Default::default() };
        let session = LiveSession::start(settings.clone(), model(), spawner, log.sink()).unwrap();
        log.wait_for("settled at 64", Duration::from_secs(5), done_settled(64));
        session.update(LiveSettings { prompt_tokens: 3000, concurrency: 6, ..settings }).unwrap();
        log.wait_for("settled at 3000", Duration::from_secs(5), done_settled(3000));
        assert_eq!(f.loads.load(Ordering::SeqCst), 2);
        let reload = log.events().into_iter().rev().find_map(|e| match e {
            LiveEvent::BackendStatus { state: BackendState::Ready, capacity: Some(c), .. } => Some(c),
            _ => None,
        }).unwrap();
        assert_eq!((reload.slots, reload.ctx_per_slot), (8, 4096));
        drop(session);
    }

    #[test]
    fn invalid_updates_are_refused_and_change_nothing() {
        let (spawner, _f) = fakes(1, 500);
        let log = Log::default();
        let session = LiveSession::start(LiveSettings::default(), model(), spawner, log.sink()).unwrap();
        let err = session.update(LiveSettings { prompt_tokens: 9000, ..Default::default() }).unwrap_err();
        assert!(err.contains("context"), "{err}");
        drop(session);
    }

    #[test]
    fn a_crashed_worker_is_reported_and_retry_recovers() {
        let (spawner, f) = fakes(10, 1000);
        let log = Log::default();
        let settings = LiveSettings { prompt_tokens: 32, max_tokens: 16, concurrency: 2, ..Default::default() };
        let session = LiveSession::start(settings, model(), spawner, log.sink()).unwrap();
        log.wait_for("settled", Duration::from_secs(5), done_settled(32));
        for c in f.crash.lock().unwrap().iter() {
            c.store(true, Ordering::SeqCst);
        }
        let crashed = log.wait_for("crash", Duration::from_secs(5), |e| matches!(e, LiveEvent::WorkerCrashed { .. }));
        assert!(matches!(crashed, LiveEvent::WorkerCrashed { ref reason, .. } if reason.contains("signal 9")), "{crashed:?}");
        log.wait_for("paused", Duration::from_secs(5), |e| matches!(e, LiveEvent::Paused { .. }));
        log.wait_for("failed requests", Duration::from_secs(5), |e| matches!(e, LiveEvent::RequestDone { error: Some(_), .. }));
        let before = log.count(done_settled(32));
        // Nothing runs while paused.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(log.count(done_settled(32)), before);
        session.retry().unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while log.count(done_settled(32)) <= before + 2 {
            assert!(Instant::now() < end, "no requests after retry");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(f.loads.load(Ordering::SeqCst), 2);
        drop(session);
    }

    #[test]
    fn a_failed_load_is_reported_and_pauses() {
        let (spawner, f) = fakes(1, 500);
        f.fail_loads.store(true, Ordering::SeqCst);
        let log = Log::default();
        let session = LiveSession::start(LiveSettings::default(), model(), spawner, log.sink()).unwrap();
        let e = log.wait_for("error", Duration::from_secs(5), |e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Error, .. }));
        assert!(matches!(e, LiveEvent::BackendStatus { message: Some(ref m), .. } if m.contains("test")));
        log.wait_for("paused", Duration::from_secs(5), |e| matches!(e, LiveEvent::Paused { .. }));
        f.fail_loads.store(false, Ordering::SeqCst);
        session.retry().unwrap();
        log.wait_for("settled after retry", Duration::from_secs(5), done_settled(128));
        drop(session);
    }

    #[test]
    fn several_backends_take_turns_and_never_overlap() {
        let (spawner, _f) = fakes(5, 1000);
        let log = Log::default();
        let settings = LiveSettings {
            backends: vec!["a".into(), "b".into()],
            prompt_tokens: 32,
            max_tokens: 8,
            concurrency: 2,
            rotate_after_s: 0.15,
            ..Default::default()
        };
        let session = LiveSession::start(settings, model(), spawner, log.sink()).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let rotations = log.count(|e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Measuring, .. }));
            if rotations >= 4 {
                break;
            }
            assert!(Instant::now() < end, "backends did not rotate");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(session);
        // Replay: a request never starts on one backend while another's is in flight.
        let mut open: HashMap<u64, String> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for e in log.events() {
            match e {
                LiveEvent::RequestStarted { id, backend, .. } => {
                    assert!(open.values().all(|b| *b == backend), "{backend} started while {:?} ran", open);
                    seen.insert(backend.clone());
                    open.insert(id, backend);
                }
                LiveEvent::RequestDone { id, .. } => {
                    open.remove(&id);
                }
                _ => {}
            }
        }
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn the_sink_sees_at_most_about_ten_batches_a_second() {
        // Tiny requests: thousands of events a second.
        let (spawner, _f) = fakes(0, 100);
        let log = Log::default();
        let settings = LiveSettings { prompt_tokens: 8, max_tokens: 32, concurrency: 8, ..Default::default() };
        let session = LiveSession::start(settings, model(), spawner, log.sink()).unwrap();
        log.wait_for("settled", Duration::from_secs(5), done_settled(8));
        let from = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        let batches = log.1.lock().unwrap().iter().filter(|(t, _)| *t >= from).count();
        let events = log.0.lock().unwrap().iter().filter(|(t, _)| *t >= from).count();
        drop(session);
        assert!(batches <= 12, "{batches} batches in a second");
        assert!(events > batches * 5, "batching should carry several events each ({events} events in {batches} batches)");
    }

    #[test]
    fn preview_streams_one_request_at_a_time_on_demand() {
        let (spawner, _f) = fakes(1, 1000);
        let log = Log::default();
        let settings = LiveSettings { prompt_tokens: 16, max_tokens: 10, concurrency: 3, ..Default::default() };
        let session = LiveSession::start(settings, model(), spawner, log.sink()).unwrap();
        log.wait_for("settled", Duration::from_secs(5), done_settled(16));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. })), 1);
        session.next_preview().unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. })) < 2 {
            assert!(Instant::now() < end);
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(session);
        let (pieces, ids): (usize, std::collections::HashSet<u64>) = log.events().iter().fold((0, Default::default()), |(n, mut ids), e| {
            if let LiveEvent::PreviewTokens { id, pieces, .. } = e {
                ids.insert(*id);
                (n + pieces.len(), ids)
            } else {
                (n, ids)
            }
        });
        assert!(pieces >= 10 && ids.len() <= 2);
        let tail = log.events().into_iter().find_map(|e| match e {
            LiveEvent::RequestStarted { preview: true, prompt_tail, .. } => prompt_tail,
            _ => None,
        });
        assert_eq!(tail.map(|t| t.chars().count()), Some(16));
    }

    #[allow(dead_code)]
    fn _assert_bufread(_: impl BufRead) {}
}
