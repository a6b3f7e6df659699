//! Traffic: the requests a point puts on a target, and the run that sends them.
//!
//! A point runs `requests` requests against a target with `concurrency` clients in a
//! closed loop (each client sends its next request when its previous one completes), or
//! open loop at a rate or on a script, after a warm-up that is not counted. The client loop
//! ([`crate::client`]) stamps every reply; this module decides when each request is sent
//! and with which lengths.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use lx_engine::backend::{KvTypes, TokenId};
use crate::client::{Clients, Heard};
use crate::target::TargetError;
use crate::records::{is_zero, RequestRecord, StepRecord};
use lx_engine::scheduler::{SchedEvent, WorkRequest};
use lx_engine::speculative::Speculation;
use lx_format::workload::PromptText;
use crate::target::Target;

/// One point of a sweep: the requests to send and how many at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
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

/// What a point's traffic looks like beyond [`PointSpec`]: arrivals, mixed lengths, a shared
/// prefix. The default is [`PointSpec`]'s closed loop with fixed lengths and no prefix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Traffic {
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
    /// Speculative decoding in the worker's scheduler (off: plain decoding).
    #[serde(skip_serializing_if = "is_plain")]
    pub spec: Speculation,
    /// What the prompts ask for: prose to continue, or a passage to copy.
    #[serde(skip_serializing_if = "is_prose")]
    pub prompts: PromptText,
    /// The KV cache's types in the worker that measured it (llama.cpp's; f16 elsewhere).
    #[serde(skip_serializing_if = "KvTypes::is_default")]
    pub kv: KvTypes,
}

fn is_plain(s: &Speculation) -> bool {
    !s.is_on()
}

fn is_prose(p: &PromptText) -> bool {
    *p == PromptText::Prose
}

impl Traffic {
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
            Some(from) if from < to => from + (lx_format::workload::unit(self.seed, i as u64, stream) * f64::from(to - from + 1)) as u32,
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
                let u = lx_format::workload::unit(self.seed, i as u64, 3);
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
    /// When the measured window's clock started (its first submit is at or after it).
    pub opened: Option<Instant>,
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
        Self { hang_timeout: Duration::from_secs(lx_engine::defaults::HANG_TIMEOUT_S), stop: Default::default() }
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
    run_point(worker, spec, &Traffic::default(), &|_, i| prompt(i), stop_tokens, control, observer)
}

/// Run one point, closed or open loop as `traffic` says: warm-up first (always closed loop,
/// at most `concurrency` at a time), then the measured requests. `prompt(draw, i)` gives the
/// ids of the i-th request's prompt, with the lengths drawn for it.
pub fn run_point(
    worker: &mut dyn Target,
    spec: &PointSpec,
    traffic: &Traffic,
    prompt: &dyn Fn(&Draw, usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    if spec.warmup > 0 {
        let warm = PointSpec { requests: spec.warmup, warmup: 0, ..spec.clone() };
        let warm_traffic = Traffic { arrivals: Arrivals::Closed, duration_s: None, ..traffic.clone() };
        let run = run_phase(worker, &warm, &warm_traffic, prompt, stop_tokens, control, &mut Quiet);
        if run.worker_error.is_some() || run.stopped {
            return PointRun { records: Vec::new(), opened: None, ..run };
        }
    }
    run_phase(worker, spec, traffic, prompt, stop_tokens, control, observer)
}

fn run_phase(
    worker: &mut dyn Target,
    spec: &PointSpec,
    traffic: &Traffic,
    prompt: &dyn Fn(&Draw, usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    let t0 = Instant::now();
    let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
    let mut run = PointRun { opened: Some(t0), ..PointRun::default() };
    let mut clients: Clients<()> = Clients::default();
    let total = traffic.requests(spec);
    let open = traffic.is_open();
    let deadline = traffic.duration_s.map(|s| t0 + Duration::from_secs_f64(s.max(0.0)));
    // Open loop: when request `sent` arrives.
    let mut next_arrival = t0 + Duration::from_secs_f64(traffic.gap_ms(0) / 1e3);
    let mut sent = 0usize;
    let mut last_done = t0;
    let mut cancelling = false;
    let stop_list: Vec<TokenId> = if spec.stop_at_eos { stop_tokens.to_vec() } else { Vec::new() };

    let submit = |worker: &mut dyn Target, i: usize, submitted: Instant, clients: &mut Clients<()>| -> Result<(), TargetError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let draw = traffic.draw(spec, i);
        let prompt_ids = prompt(&draw, i);
        let prefix_tokens = if traffic.prefix_tokens > 0 { draw.prefix_tokens } else { 0 };
        let request = WorkRequest { id, prompt: prompt_ids, max_tokens: draw.max_tokens, stop_tokens: stop_list.clone(), top_logprobs: spec.top_logprobs, prefix_tokens, handoff: Default::default(), score: None };
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
                let capped = traffic.max_in_flight.is_some_and(|cap| clients.len() >= cap);
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
            next_arrival += Duration::from_secs_f64(traffic.gap_ms(sent) / 1e3);
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
            Heard::Step(SchedEvent::Step { step, seqs, prefill_tokens, decode_tokens, draft_tokens, t_start, t_end, compute }) => {
                let (start_ms, end_ms) = (ms(worker.to_local(t_start)), ms(worker.to_local(t_end)));
                let compute_ms = compute.map(|ns| ns as f64 / 1e6);
                run.steps.push(StepRecord { step, seqs, prefill_tokens, decode_tokens, draft_tokens, start_ms, end_ms, compute_ms });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Reply;
    use lx_engine::scheduler::FinishReason;


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
        fn info(&self) -> &lx_engine::backend::BackendInfo {
            unimplemented!("the client loop does not ask")
        }
        fn load_ms(&self) -> f64 {
            0.0
        }
        fn schedules_itself(&self) -> bool {
            true
        }
        fn configure(&mut self, _config: &lx_engine::scheduler::SchedulerConfig) -> Result<(), TargetError> {
            Ok(())
        }
        fn submit(&mut self, r: WorkRequest) -> Result<(), TargetError> {
            let now = Instant::now();
            self.submitted.push(now);
            for i in 0..r.max_tokens {
                let at = now + Duration::from_millis(self.first_ms + self.gap_ms * i as u64);
                let t = (at - self.epoch).as_nanos() as u64;
                self.due.push((at, Reply::Event(SchedEvent::Token { id: r.id, step: 0, index: i, token: 7, t, top: Vec::new(), drafted: false })));
            }
            let at = self.due.last().expect("max_tokens > 0").0;
            self.due.push((at, Reply::Event(SchedEvent::Finished { id: r.id, reason: FinishReason::Length, t: 0 })));
            Ok(())
        }
        fn cancel(&mut self, _id: u64) {}
        fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
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
