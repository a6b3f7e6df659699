//! The defaults every front end shares: the CLI's options, the app's back end, and the UI,
//! which reads them from `ui/src/ipc/generated/defaults.ts` (generated from this module by
//! the app's bindings test, which fails while that file is stale). A default typed anywhere
//! else is a copy that can drift.

/// Seconds a worker may stay silent with requests in flight before it is declared hung and
/// killed. Generous on purpose: a forward pass sends nothing until it ends, a large model on
/// a slow machine can take minutes over one, and a false alarm kills a healthy measurement
/// (sweeps used 120 s and live mode 300 s; the longer was kept).
pub const HANG_TIMEOUT_S: u64 = 300;

/// Human reading pace in tokens per second: decode faster than this buys a reader nothing.
/// The preview pane reads at it, and a sweep's decode objective defaults to it.
pub const READING_PACE_TPS: f64 = 4.5;

/// Prompt tokens per pass for the `chunked` policy unless told otherwise.
pub const CHUNK_TOKENS: usize = 256;

/// Live mode's prompt length, in tokens (BOS included), until the user moves the slider.
pub const LIVE_PROMPT_TOKENS: u32 = 256;

/// Live mode's output tokens per request.
pub const LIVE_MAX_TOKENS: u32 = 64;

/// With several backends in live mode: seconds each is measured before the next takes over.
pub const LIVE_ROTATE_AFTER_S: f64 = 8.0;

/// Most concurrent clients live mode accepts: the slider's end and the settings' check.
pub const LIVE_MAX_CONCURRENCY: usize = 256;

/// Least time between two of live mode's event batches, in ms, in a terminal (`lx live`).
pub const LIVE_BATCH_MS: u64 = 100;

/// The desktop app's batch interval: 4 batches a second, as often as the preview draws.
/// Each batch wakes the app and the web view, which take their time from the model being
/// measured, so the app asks for fewer than a terminal does.
pub const APP_BATCH_MS: u64 = 250;

/// Context length assumed for a model file whose metadata gives none.
pub const CONTEXT_FALLBACK_TOKENS: usize = 2048;

/// A capacity trial's warm-up is at most this many requests: a search runs many trials, and
/// a few requests already bring the worker's caches and threads up.
pub const TRIAL_WARMUP_MAX: usize = 4;

/// Unmeasured warm-up requests before each of a sweep's points unless told: one per client
/// of the busiest point, so that every slot has run once before anything is measured.
pub fn sweep_warmup(concurrency: &[usize]) -> usize {
    concurrency.iter().copied().max().unwrap_or(1).max(1)
}

/// Warm-up requests before a capacity trial at `concurrency` clients.
pub fn trial_warmup(concurrency: usize) -> usize {
    concurrency.min(TRIAL_WARMUP_MAX)
}

/// A sustained run's trial, seconds (`lx bench --sustained --trial`, and the app's sustained
/// view of live mode): long enough for a few whole requests of the chat shape on a slow
/// machine, short enough that a minute holds several.
pub const SUSTAINED_TRIAL_S: f64 = 15.0;
