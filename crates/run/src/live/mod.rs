//! Live mode: keep N clients busy on one backend at a time and report what happens as it
//! happens, while the settings change under it.
//!
//! A [`LiveSession`] runs on a thread of its own. It owns one target (a worker process, or
//! a server) per selected backend and measures them **in turn, never at the same time**: the
//! active backend gets a closed loop of `concurrency` clients (each sends its next request
//! when its previous one completes, through the same [`lx_client::client`] loop as a
//! sweep's); after [`LiveSettings::rotate_after_s`] seconds (and at least one completed request) the session
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
//! figures, as defined in [`lx_client::records::RequestRecord`]. A request is *settled* when nothing
//! from another setting, backend or worker load overlapped it: it was not the first request
//! after a load, every request in flight at its submit had the same setting, and the setting
//! did not change while it ran. Only settled requests enter the per-setting summaries
//! ([`LiveEvent::Summary`], [`LiveSession::results`]); throughput for a setting is the output
//! tokens received ÷ the wall time from its first settled submit to its last token, summed
//! over every stretch the setting was live (the same definition as a sweep's measured window).
//!
//! **Events** are serde-tagged ([`LiveEvent`]) and delivered in batches ([`EventBatcher`]) at
//! most every [`LiveSettings::batch_ms`] ([`lx_engine::defaults::LIVE_BATCH_MS`] by default), so
//! a front end is never asked to render one event per token. Tokens are streamed for one
//! *preview* request at a time only, as decoded text pieces.
//!
//! **Failures.** A worker that dies or hangs is reported ([`LiveEvent::WorkerCrashed`]); its
//! requests in flight end with the reason; the session carries on with the other backends, or
//! pauses when none is left, until [`LiveSession::retry`] starts fresh workers.

use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use lx_engine::backend::TokenId;
use lx_results::results::PointResult;
use lx_client::target::Spawner;

// The parts: `settings` (what a session runs, and what a worker is loaded for), `events`
// (what it reports), `batcher` (how reports reach the front end), `session` (the session
// thread). The handle, `LiveSession`, and what it is started with are defined here.
mod batcher;
mod events;
mod session;
mod settings;
#[cfg(test)]
mod tests;

pub use batcher::EventBatcher;
pub use events::{BackendState, LiveEvent, PrefillSpan, SettingSummary, TransferSpan};
pub use settings::{Capacity, Checked, LiveSettings, SettingKey, MAX_CONCURRENCY};

use session::Session;

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
    /// The draft model's file for speculative decoding's `draft` drafter, found (or made)
    /// when a worker first needs it, on the loading thread.
    pub draft_model: std::sync::Arc<dyn Fn() -> Result<std::path::PathBuf, String> + Send + Sync>,
    /// Bytes of an f16 KV cache for one sequence of this many tokens (`None` when the
    /// model's shape is not known).
    pub kv_bytes_f16: Box<dyn Fn(usize) -> Option<u64> + Send>,
}

/// Receives event batches, on the session thread: keep it quick (hand off, do not draw).
pub type EventSink = Box<dyn FnMut(Vec<LiveEvent>) + Send>;

enum Control {
    Update(Checked),
    Retry,
    Preview,
    Results(Sender<Vec<PointResult>>),
    Stop,
}

/// Why a live session refused or could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Invalid(#[from] lx_engine::invalid::Invalid),
    #[error("cannot start the live session thread: {0}")]
    Thread(std::io::Error),
    #[error("the live session has ended")]
    Ended,
    #[error("the live session did not answer")]
    NoAnswer,
}

/// A running live session. Dropping it stops it.
pub struct LiveSession {
    tx: Sender<Control>,
    thread: Option<JoinHandle<()>>,
    context_length: usize,
}

impl LiveSession {
    /// Start measuring on a new thread with `settings` (checked against this model's context;
    /// checked again only if they were checked against another). Events go to `sink` in
    /// batches.
    pub fn start(settings: Checked, model: LiveModel, spawner: Spawner, sink: EventSink) -> Result<LiveSession, LiveError> {
        let settings = settings.for_context(model.context_length)?.into_settings();
        let context_length = model.context_length;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lx-live".into())
            .spawn(move || Session::new(settings, model, spawner, sink, rx).run())
            .map_err(LiveError::Thread)?;
        Ok(LiveSession { tx, thread: Some(thread), context_length })
    }

    /// Apply new settings to the next requests. Refused (and nothing changes) when they are invalid.
    pub fn update(&self, settings: LiveSettings) -> Result<(), LiveError> {
        let checked = settings.check(self.context_length)?;
        self.tx.send(Control::Update(checked)).map_err(|_| LiveError::Ended)
    }

    /// Start fresh workers for the backends that failed or crashed, and carry on.
    pub fn retry(&self) -> Result<(), LiveError> {
        self.tx.send(Control::Retry).map_err(|_| LiveError::Ended)
    }

    /// Stream the next submitted request as the preview (the previous preview has been read).
    pub fn next_preview(&self) -> Result<(), LiveError> {
        self.tx.send(Control::Preview).map_err(|_| LiveError::Ended)
    }

    /// Everything measured so far, one point per setting, in the run-file schema.
    pub fn results(&self) -> Result<Vec<PointResult>, LiveError> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Control::Results(tx)).map_err(|_| LiveError::Ended)?;
        rx.recv_timeout(Duration::from_secs(10)).map_err(|_| LiveError::NoAnswer)
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
