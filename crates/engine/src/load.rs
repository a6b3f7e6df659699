//! Load generation and client-side measurement.
//!
//! A point runs `requests` requests against a worker with `concurrency` clients in a
//! closed loop (each client sends its next request when its previous one completes),
//! after a warm-up that is not counted. Every figure comes from coordinator stamps:
//! submit, and the receipt of each token; the worker's phase stamps (admit, prefill)
//! are mapped onto the same clock for queue wait, prefill rate and the timeline.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::TokenId;
use crate::coordinator::WorkerError;
use crate::client::{Clients, Heard};
use crate::target::Target;
use crate::scheduler::{FinishReason, SchedEvent, WorkRequest};

/// A slice of one request's prompt processed in one forward pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillSlice {
    pub step: u64,
    pub tokens: u32,
    /// Pass start and end, ms after the request's submit.
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Everything measured about one request. Times are ms after its submit, on the
/// coordinator's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: u64,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    /// Submit time, ms after the measured window opened. In open loop this is the request's
    /// arrival, even if a client-side cap held it back for a while.
    pub submit_ms: f64,
    /// When the scheduler gave it a slot.
    pub admit_ms: Option<f64>,
    pub prefill: Vec<PrefillSlice>,
    /// Leading prompt tokens copied from the prefix cache instead of computed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u32,
    /// When each output token was received.
    pub token_ms: Vec<f64>,
    /// The forward pass that produced each token (the timeline shows who shared it).
    pub token_steps: Vec<u64>,
    pub tokens: Vec<TokenId>,
    /// Top alternatives per token, when asked for (parity checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_logprobs: Vec<Vec<crate::backend::Scored>>,
    pub finish: Option<FinishReason>,
    pub error: Option<String>,
    /// What its figures should be read with (see `SchedEvent::Warning`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where its time went, pass by pass (filled in when the point is summarised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One request's way through the scheduler, for the app's per-request timeline. Times are
/// ms after the request's submit; `batch_seqs` is how many sequences shared that pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// admit − submit.
    pub queue_ms: Option<f64>,
    /// Prompt tokens copied from the prefix cache (not computed).
    pub cached_tokens: u32,
    /// Each pass that computed part of its prompt.
    pub prefill: Vec<TimelinePass>,
    /// Each pass that produced one of its tokens (index 0 comes from the last prefill pass).
    pub decode: Vec<TimelinePass>,
}

/// One forward pass as one request saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePass {
    pub step: u64,
    /// This request's tokens in the pass (prompt tokens for prefill, 1 for decode).
    pub tokens: u32,
    pub start_ms: f64,
    pub end_ms: f64,
    /// Sequences in the pass, this one included.
    pub batch_seqs: u32,
    /// All tokens in the pass (prompt and decode, every sequence).
    pub batch_tokens: u32,
}

impl RequestRecord {
    pub fn new(id: u64, prompt_tokens: u32, max_tokens: u32, submit_ms: f64) -> Self {
        Self {
            id,
            prompt_tokens,
            max_tokens,
            submit_ms,
            admit_ms: None,
            prefill: Vec::new(),
            cached_tokens: 0,
            token_ms: Vec::with_capacity(max_tokens as usize),
            token_steps: Vec::with_capacity(max_tokens as usize),
            tokens: Vec::with_capacity(max_tokens as usize),
            top_logprobs: Vec::new(),
            finish: None,
            error: None,
            warnings: Vec::new(),
            timeline: None,
        }
    }

    /// Book one scheduler event about this request: the bookkeeping shared by sweeps and
    /// live mode. `submitted` is its submit instant, `received` when the event arrived, and
    /// `to_local` maps worker stamps onto the coordinator's clock. Returns true when the
    /// request has ended (finished, cancelled or failed).
    pub fn book(&mut self, submitted: Instant, received: Instant, event: &SchedEvent, to_local: &dyn Fn(u64) -> Instant) -> bool {
        match event {
            SchedEvent::Admitted { t, .. } => self.admit_ms = Some(since(submitted, to_local(*t))),
            SchedEvent::Prefill { step, tokens, t_start, t_end, .. } => self.prefill.push(PrefillSlice {
                step: *step,
                tokens: *tokens,
                start_ms: since(submitted, to_local(*t_start)),
                end_ms: since(submitted, to_local(*t_end)),
            }),
            SchedEvent::PrefixReused { tokens, .. } => self.cached_tokens = *tokens,
            SchedEvent::Token { step, token, top, .. } => {
                self.token_ms.push(since(submitted, received));
                self.token_steps.push(*step);
                self.tokens.push(*token);
                if !top.is_empty() {
                    self.top_logprobs.push(top.clone());
                }
            }
            SchedEvent::Finished { reason, .. } => {
                self.finish = Some(*reason);
                return true;
            }
            SchedEvent::Failed { error, .. } => {
                self.error = Some(error.clone());
                return true;
            }
            SchedEvent::Warning { message, .. } => self.warnings.push(message.clone()),
            SchedEvent::Step { .. } => {}
        }
        false
    }

    /// Build [`RequestRecord::timeline`] from the passes of the window the request ran in.
    pub fn fill_timeline(&mut self, steps: &[StepRecord]) {
        let by_step = |n: u64| steps.binary_search_by_key(&n, |s| s.step).ok().map(|i| &steps[i]);
        let pass = |step: u64, tokens: u32, start_ms: f64, end_ms: f64| {
            let s = by_step(step);
            TimelinePass {
                step,
                tokens,
                start_ms,
                end_ms,
                batch_seqs: s.map_or(0, |s| s.seqs),
                batch_tokens: s.map_or(0, |s| s.prefill_tokens + s.decode_tokens),
            }
        };
        let prefill = self.prefill.iter().map(|p| pass(p.step, p.tokens, p.start_ms, p.end_ms)).collect();
        let decode = self
            .token_steps
            .iter()
            .zip(&self.token_ms)
            .map(|(&step, &received)| match by_step(step) {
                // Pass stamps are relative to the window; the request's to its submit.
                Some(s) => pass(step, 1, s.start_ms - self.submit_ms, s.end_ms - self.submit_ms),
                None => pass(step, 1, received, received),
            })
            .collect();
        self.timeline = Some(Timeline { queue_ms: self.admit_ms, cached_tokens: self.cached_tokens, prefill, decode });
    }

    /// Completed normally (not failed, not cancelled).
    pub fn ok(&self) -> bool {
        self.error.is_none() && matches!(self.finish, Some(FinishReason::Length | FinishReason::Stop))
    }
    /// first token received − submit.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.token_ms.first().copied()
    }
    /// admit − submit.
    pub fn queue_ms(&self) -> Option<f64> {
        self.admit_ms
    }
    /// prefill end − prefill start.
    pub fn prefill_ms(&self) -> Option<f64> {
        Some(self.prefill.last()?.end_ms - self.prefill.first()?.start_ms)
    }
    /// prompt tokens ÷ (prefill end − prefill start). Tokens copied from the prefix cache
    /// were not computed, so they do not count.
    pub fn prefill_tps(&self) -> Option<f64> {
        let ms = self.prefill_ms()?;
        (ms > 0.0).then(|| (self.prompt_tokens - self.cached_tokens.min(self.prompt_tokens)) as f64 / ms * 1e3)
    }
    /// Gaps between consecutive tokens.
    pub fn itl_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.token_ms.windows(2).map(|w| w[1] - w[0])
    }
    /// (output tokens − 1) ÷ (last token − first token).
    pub fn decode_tps(&self) -> Option<f64> {
        let (first, last) = (self.token_ms.first()?, self.token_ms.last()?);
        (self.token_ms.len() > 1 && last > first).then(|| (self.token_ms.len() - 1) as f64 / (last - first) * 1e3)
    }
    /// last token − submit.
    pub fn e2e_ms(&self) -> Option<f64> {
        self.token_ms.last().copied()
    }
}

/// One forward pass as the worker reported it (ms after the window opened).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u64,
    pub seqs: u32,
    pub prefill_tokens: u32,
    pub decode_tokens: u32,
    pub start_ms: f64,
    pub end_ms: f64,
    /// The part of the pass spent inside the backend's library (llama.cpp's `llama_decode`),
    /// where the backend times it; the rest of `end_ms - start_ms` is the adapter's own work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ms: Option<f64>,
}

/// One point of a sweep: what load to put on the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointSpec {
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub concurrency: usize,
    /// Measured requests.
    pub requests: usize,
    /// Requests run first and not counted (caches, allocators and clocks warm up).
    pub warmup: usize,
    /// Stop at end-of-sequence tokens instead of always making `max_tokens`.
    pub stop_at_eos: bool,
    /// Alternatives to report per token; 0 in measured runs (it costs a vocabulary-wide softmax).
    #[serde(default)]
    pub top_logprobs: usize,
}

/// How requests arrive at a point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Arrivals {
    /// `concurrency` clients, each sending its next request when its previous one completes.
    #[default]
    Closed,
    /// Open loop: Poisson arrivals at `rate` requests per second, from the point's seed.
    /// Arrivals do not wait for completions, so a queue builds when the rate is too high.
    Poisson { rate: f64 },
    /// Open loop: these requests at these times (demos and tests).
    Script { requests: Vec<Scripted> },
}

/// One request of a scripted arrival.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scripted {
    /// Arrival, ms after the window opens.
    pub at_ms: f64,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
}

/// What a point's load looks like beyond [`PointSpec`]: arrivals, mixed lengths, a shared
/// prefix. The default is [`PointSpec`]'s closed loop with fixed lengths and no prefix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PointLoad {
    pub arrivals: Arrivals,
    /// Open loop: most requests in flight from the client side; an arrival beyond it waits
    /// client-side (and its TTFT still counts from its arrival). `None`: no cap.
    pub max_in_flight: Option<usize>,
    /// Prompt lengths drawn uniformly from `prompt_tokens_from..=spec.prompt_tokens`.
    pub prompt_tokens_from: Option<u32>,
    /// Output lengths drawn uniformly from `max_tokens_from..=spec.max_tokens`.
    pub max_tokens_from: Option<u32>,
    /// Seed of every random draw (arrival gaps, lengths): same seed, same workload.
    pub seed: u64,
    /// Stop sending new requests after this many seconds of the measured window.
    pub duration_s: Option<f64>,
    /// Every prompt starts with the same `prefix_tokens` tokens (a system prompt).
    pub prefix_tokens: u32,
    /// Keep the shared prefix's KV and copy it into each request (the worker's scheduler).
    pub prefix_cache: bool,
    /// Tokens already in the context before the measured prompt (`--depth`, as llama-bench's
    /// `-d`): then `prefix_tokens` is this depth, cached and copied into every request, and
    /// `spec.prompt_tokens` is depth + the prompt proper. 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub depth: u32,
}

impl PointLoad {
    pub fn is_open(&self) -> bool {
        !matches!(self.arrivals, Arrivals::Closed)
    }

    /// Requests the measured window sends: the script's length, or `spec.requests`.
    pub fn requests(&self, spec: &PointSpec) -> usize {
        match &self.arrivals {
            Arrivals::Script { requests } => requests.len(),
            _ => spec.requests,
        }
    }

    /// The lengths of request `i`: fixed, scripted or drawn from the seed.
    pub fn draw(&self, spec: &PointSpec, i: usize) -> Draw {
        let pick = |from: Option<u32>, to: u32, stream: u64| match from {
            Some(from) if from < to => from + (crate::workload::unit(self.seed, i as u64, stream) * f64::from(to - from + 1)) as u32,
            _ => to,
        };
        let (prompt_tokens, max_tokens) = match &self.arrivals {
            Arrivals::Script { requests } if i < requests.len() => (requests[i].prompt_tokens, requests[i].max_tokens),
            _ => (pick(self.prompt_tokens_from, spec.prompt_tokens, 1).min(spec.prompt_tokens), pick(self.max_tokens_from, spec.max_tokens, 2).min(spec.max_tokens)),
        };
        Draw { prompt_tokens, max_tokens, prefix_tokens: self.prefix_tokens.min(prompt_tokens.saturating_sub(1)) }
    }

    /// Arrival of measured request `i`, ms after the window opens (open loop only). Poisson
    /// gaps are drawn per index, so the schedule does not depend on how the run went.
    fn gap_ms(&self, i: usize) -> f64 {
        match &self.arrivals {
            Arrivals::Closed => 0.0,
            Arrivals::Poisson { rate } => {
                if i == 0 {
                    return 0.0;
                }
                let u = crate::workload::unit(self.seed, i as u64, 3);
                -(1.0 - u).ln() / rate * 1e3
            }
            Arrivals::Script { requests } => {
                let at = |k: usize| requests.get(k).map_or(0.0, |r| r.at_ms);
                if i == 0 { at(0) } else { (at(i) - at(i - 1)).max(0.0) }
            }
        }
    }
}

/// The lengths of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    /// Leading tokens shared with every other request of the point.
    pub prefix_tokens: u32,
}

/// What ran, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct PointRun {
    pub records: Vec<RequestRecord>,
    pub steps: Vec<StepRecord>,
    /// Measured window: first measured submit to last completion, ms.
    pub window_ms: f64,
    /// Set when the worker died or hung; the worker must then be replaced.
    pub worker_error: Option<String>,
    /// Set when the run was stopped by the user before it finished.
    pub stopped: bool,
}

/// Sees the run as it happens (progress bars, the app's live charts).
pub trait Observer {
    /// A token arrived for request `id` (`at_ms` after its submit).
    fn token(&mut self, _id: u64, _index: u32, _token: TokenId, _at_ms: f64) {}
    /// A measured request ended (successfully or not).
    fn done(&mut self, _record: &RequestRecord) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// Knobs of a run that are not part of the workload.
#[derive(Debug, Clone)]
pub struct RunControl {
    /// A worker that sends nothing for this long while requests are in flight is killed.
    pub hang_timeout: Duration,
    /// Raised by Ctrl-C (or the app's Stop): submit nothing more, cancel what is in flight.
    pub stop: std::sync::Arc<AtomicBool>,
}

impl Default for RunControl {
    fn default() -> Self {
        Self { hang_timeout: Duration::from_secs(120), stop: Default::default() }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Run one closed-loop point: warm-up first, then the measured requests. `prompt(i)`
/// gives the ids of the i-th request's prompt.
pub fn run_closed_loop(
    worker: &mut dyn Target,
    spec: &PointSpec,
    prompt: &dyn Fn(usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    run_point(worker, spec, &PointLoad::default(), &|_, i| prompt(i), stop_tokens, control, observer)
}

/// Run one point, closed or open loop as `load` says: warm-up first (always closed loop,
/// at most `concurrency` at a time), then the measured requests. `prompt(draw, i)` gives the
/// ids of the i-th request's prompt, with the lengths drawn for it.
pub fn run_point(
    worker: &mut dyn Target,
    spec: &PointSpec,
    load: &PointLoad,
    prompt: &dyn Fn(&Draw, usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    if spec.warmup > 0 {
        let warm = PointSpec { requests: spec.warmup, warmup: 0, ..spec.clone() };
        let warm_load = PointLoad { arrivals: Arrivals::Closed, duration_s: None, ..load.clone() };
        let run = run_phase(worker, &warm, &warm_load, prompt, stop_tokens, control, &mut Quiet);
        if run.worker_error.is_some() || run.stopped {
            return PointRun { records: Vec::new(), ..run };
        }
    }
    run_phase(worker, spec, load, prompt, stop_tokens, control, observer)
}

fn run_phase(
    worker: &mut dyn Target,
    spec: &PointSpec,
    load: &PointLoad,
    prompt: &dyn Fn(&Draw, usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    let t0 = Instant::now();
    let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
    let mut run = PointRun::default();
    let mut clients: Clients<()> = Clients::default();
    let total = load.requests(spec);
    let open = load.is_open();
    let deadline = load.duration_s.map(|s| t0 + Duration::from_secs_f64(s.max(0.0)));
    // Open loop: when request `sent` arrives.
    let mut next_arrival = t0 + Duration::from_secs_f64(load.gap_ms(0) / 1e3);
    let mut sent = 0usize;
    let mut last_done = t0;
    let mut cancelling = false;
    let stop_list: Vec<TokenId> = if spec.stop_at_eos { stop_tokens.to_vec() } else { Vec::new() };

    let submit = |worker: &mut dyn Target, i: usize, submitted: Instant, clients: &mut Clients<()>| -> Result<(), WorkerError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let draw = load.draw(spec, i);
        let prompt_ids = prompt(&draw, i);
        let prefix_tokens = if load.prefix_tokens > 0 { draw.prefix_tokens } else { 0 };
        let request = WorkRequest { id, prompt: prompt_ids, max_tokens: draw.max_tokens, stop_tokens: stop_list.clone(), top_logprobs: spec.top_logprobs, prefix_tokens };
        let record = RequestRecord::new(id, request.prompt.len() as u32, draw.max_tokens, ms(submitted));
        clients.submit(worker, request, submitted, record, ())
    };

    let fail_all = |run: &mut PointRun, clients: &mut Clients<()>, why: String, observer: &mut dyn Observer| {
        for flight in clients.end_all(None, &why) {
            observer.done(&flight.record);
            run.records.push(flight.record);
        }
        run.worker_error = Some(why);
    };

    loop {
        if control.stop.load(Ordering::Relaxed) && !cancelling {
            // Ctrl-C: send nothing more; cancel what is in flight and book how it ended.
            cancelling = true;
            run.stopped = true;
            for id in clients.ids() {
                worker.cancel(id);
            }
        }
        let sending = |sent: usize| !cancelling && sent < total && deadline.is_none_or(|d| Instant::now() < d);
        // Send everything that is due now.
        let mut failed = None;
        while sending(sent) {
            let now = Instant::now();
            let submitted = if open {
                let capped = load.max_in_flight.is_some_and(|cap| clients.len() >= cap);
                if capped || next_arrival > now {
                    break;
                }
                next_arrival
            } else {
                if clients.len() >= spec.concurrency {
                    break;
                }
                now
            };
            if let Err(e) = submit(worker, sent, submitted, &mut clients) {
                failed = Some(e.to_string());
                break;
            }
            sent += 1;
            next_arrival += Duration::from_secs_f64(load.gap_ms(sent) / 1e3);
        }
        if let Some(why) = failed {
            fail_all(&mut run, &mut clients, why, observer);
            break;
        }
        let more = sending(sent);
        if clients.is_empty() && !more {
            break;
        }
        // Wait for the worker, but no later than the next arrival.
        let mut wait = Duration::from_millis(100);
        if open && more {
            wait = wait.min(next_arrival.saturating_duration_since(Instant::now()));
        }
        let (at, heard) = match clients.receive(worker, wait, control.hang_timeout) {
            Ok(Some(x)) => x,
            Ok(None) => continue,
            Err(e) => {
                fail_all(&mut run, &mut clients, e.to_string(), observer);
                break;
            }
        };
        match heard {
            Heard::Step(SchedEvent::Step { step, seqs, prefill_tokens, decode_tokens, t_start, t_end, compute }) => {
                let (start_ms, end_ms) = (ms(worker.to_local(t_start)), ms(worker.to_local(t_end)));
                let compute_ms = compute.map(|ns| ns as f64 / 1e6);
                run.steps.push(StepRecord { step, seqs, prefill_tokens, decode_tokens, start_ms, end_ms, compute_ms });
            }
            Heard::Booked { id, event: SchedEvent::Token { index, token, .. } } => {
                if let Some(at_ms) = clients.get(id).and_then(|f| f.record.token_ms.last()) {
                    observer.token(id, index, token, *at_ms);
                }
            }
            Heard::Ended(flight) => {
                last_done = at;
                observer.done(&flight.record);
                run.records.push(flight.record);
            }
            Heard::Refused(error) => {
                // A protocol-level complaint is a bug on our side: fail loudly.
                fail_all(&mut run, &mut clients, format!("worker refused a command: {error}"), observer);
                break;
            }
            Heard::Step(_) | Heard::Booked { .. } | Heard::Nothing => {}
        }
    }
    if control.stop.load(Ordering::Relaxed) && sent < total {
        run.stopped = true;
    }
    run.window_ms = ms(last_done);
    run.records.sort_by_key(|r| r.id);
    run
}

/// Milliseconds from `from` to `to`, negative when `to` is earlier.
pub fn since(from: Instant, to: Instant) -> f64 {
    if to >= from {
        (to - from).as_secs_f64() * 1e3
    } else {
        -((from - to).as_secs_f64() * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Reply;

    fn record(token_ms: &[f64]) -> RequestRecord {
        let mut r = RequestRecord::new(1, 100, token_ms.len() as u32, 0.0);
        r.token_ms = token_ms.to_vec();
        r.admit_ms = Some(2.0);
        r.prefill = vec![PrefillSlice { step: 1, tokens: 60, start_ms: 2.0, end_ms: 10.0 }, PrefillSlice { step: 2, tokens: 40, start_ms: 12.0, end_ms: 22.0 }];
        r.finish = Some(FinishReason::Length);
        r
    }

    #[test]
    fn per_request_metrics_follow_their_definitions() {
        let r = record(&[25.0, 35.0, 55.0, 65.0]);
        assert_eq!(r.ttft_ms(), Some(25.0));
        assert_eq!(r.queue_ms(), Some(2.0));
        assert_eq!(r.prefill_ms(), Some(20.0));
        assert_eq!(r.prefill_tps(), Some(5000.0));
        assert_eq!(r.itl_ms().collect::<Vec<_>>(), vec![10.0, 20.0, 10.0]);
        assert_eq!(r.decode_tps(), Some(75.0));
        assert_eq!(r.e2e_ms(), Some(65.0));
        assert!(r.ok());
    }

    #[test]
    fn one_token_has_no_decode_rate() {
        let r = record(&[25.0]);
        assert_eq!(r.decode_tps(), None);
        assert_eq!(r.itl_ms().count(), 0);
    }

    /// A remote-style target: it schedules each request itself (no passes, no admit stamps)
    /// and streams tokens at fixed times after submission, as a server would.
    struct ScriptedServer {
        first_ms: u64,
        gap_ms: u64,
        epoch: Instant,
        due: Vec<(Instant, Reply)>,
        submitted: Vec<Instant>,
    }

    impl ScriptedServer {
        fn new(first_ms: u64, gap_ms: u64) -> Self {
            Self { first_ms, gap_ms, epoch: Instant::now(), due: Vec::new(), submitted: Vec::new() }
        }
    }

    impl Target for ScriptedServer {
        fn info(&self) -> &crate::backend::BackendInfo {
            unimplemented!("the client loop does not ask")
        }
        fn load_ms(&self) -> f64 {
            0.0
        }
        fn schedules_itself(&self) -> bool {
            true
        }
        fn configure(&mut self, _config: &crate::scheduler::SchedulerConfig) -> Result<(), WorkerError> {
            Ok(())
        }
        fn submit(&mut self, r: WorkRequest) -> Result<(), WorkerError> {
            let now = Instant::now();
            self.submitted.push(now);
            for i in 0..r.max_tokens {
                let at = now + Duration::from_millis(self.first_ms + self.gap_ms * i as u64);
                let t = (at - self.epoch).as_nanos() as u64;
                self.due.push((at, Reply::Event(SchedEvent::Token { id: r.id, step: 0, index: i, token: 7, t, top: Vec::new() })));
            }
            let at = self.due.last().expect("max_tokens > 0").0;
            self.due.push((at, Reply::Event(SchedEvent::Finished { id: r.id, reason: FinishReason::Length, t: 0 })));
            Ok(())
        }
        fn cancel(&mut self, _id: u64) {}
        fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, WorkerError> {
            let Some(i) = (0..self.due.len()).min_by_key(|&i| self.due[i].0) else {
                std::thread::sleep(timeout);
                return Ok(None);
            };
            let wait = self.due[i].0.saturating_duration_since(Instant::now());
            if wait > timeout {
                std::thread::sleep(timeout);
                return Ok(None);
            }
            std::thread::sleep(wait);
            // Received when it was due: the figures below are then exact.
            Ok(Some(self.due.remove(i)))
        }
        fn kill(&mut self) {}
        fn to_local(&self, target_ns: u64) -> Instant {
            self.epoch + Duration::from_nanos(target_ns)
        }
    }

    #[test]
    fn a_target_that_schedules_itself_is_measured_on_the_client_side() {
        let mut server = ScriptedServer::new(30, 10);
        let spec = PointSpec { prompt_tokens: 4, max_tokens: 5, concurrency: 2, requests: 4, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let run = run_closed_loop(&mut server, &spec, &|_| vec![1, 2, 3, 4], &[], &RunControl::default(), &mut Quiet);
        assert_eq!(run.records.len(), 4);
        assert!(run.worker_error.is_none());
        for r in &run.records {
            assert!(r.ok(), "{r:?}");
            assert_eq!(r.tokens, vec![7; 5]);
            // Submission is stamped a few microseconds before the server sees it.
            let ttft = r.ttft_ms().unwrap();
            assert!((30.0..31.0).contains(&ttft), "TTFT {ttft}");
            assert!(r.itl_ms().all(|g| (g - 10.0).abs() < 1e-6), "{:?}", r.token_ms);
            assert!((r.decode_tps().unwrap() - 100.0).abs() < 1e-6);
            // No passes or phase stamps from such a target: those figures are absent, not zero.
            assert_eq!((r.queue_ms(), r.prefill_tps()), (None, None));
        }
        assert!(run.steps.is_empty());
        // Closed loop with two clients: the third and fourth requests go out only when the
        // first two have finished (70 ms after they were sent).
        let s = &server.submitted;
        assert!(s[2] >= s[0] + Duration::from_millis(70) && s[3] >= s[1] + Duration::from_millis(70), "{s:?}");
    }
}
