//! Load generation and client-side measurement.
//!
//! A point runs `requests` requests against a worker with `concurrency` clients in a
//! closed loop (each client sends its next request when its previous one completes),
//! after a warm-up that is not counted. Every figure comes from coordinator stamps:
//! submit, and the receipt of each token; the worker's phase stamps (admit, prefill)
//! are mapped onto the same clock for queue wait, prefill rate and the timeline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::TokenId;
use crate::coordinator::{Worker, WorkerError};
use crate::protocol::{Command, Reply};
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
    /// Submit time, ms after the measured window opened.
    pub submit_ms: f64,
    /// When the scheduler gave it a slot.
    pub admit_ms: Option<f64>,
    pub prefill: Vec<PrefillSlice>,
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
}

impl RequestRecord {
    fn new(id: u64, prompt_tokens: u32, max_tokens: u32, submit_ms: f64) -> Self {
        Self {
            id,
            prompt_tokens,
            max_tokens,
            submit_ms,
            admit_ms: None,
            prefill: Vec::new(),
            token_ms: Vec::new(),
            token_steps: Vec::new(),
            tokens: Vec::new(),
            top_logprobs: Vec::new(),
            finish: None,
            error: None,
        }
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
    /// prompt tokens ÷ (prefill end − prefill start).
    pub fn prefill_tps(&self) -> Option<f64> {
        let ms = self.prefill_ms()?;
        (ms > 0.0).then(|| self.prompt_tokens as f64 / ms * 1e3)
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
    worker: &mut Worker,
    spec: &PointSpec,
    prompt: &dyn Fn(usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    if spec.warmup > 0 {
        let warm = PointSpec { requests: spec.warmup, warmup: 0, ..spec.clone() };
        let run = run_phase(worker, &warm, prompt, stop_tokens, control, &mut Quiet);
        if run.worker_error.is_some() || run.stopped {
            return PointRun { records: Vec::new(), ..run };
        }
    }
    run_phase(worker, spec, prompt, stop_tokens, control, observer)
}

fn run_phase(
    worker: &mut Worker,
    spec: &PointSpec,
    prompt: &dyn Fn(usize) -> Vec<TokenId>,
    stop_tokens: &[TokenId],
    control: &RunControl,
    observer: &mut dyn Observer,
) -> PointRun {
    let t0 = Instant::now();
    let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
    let mut run = PointRun::default();
    let mut in_flight: HashMap<u64, (Instant, RequestRecord)> = HashMap::new();
    let mut sent = 0usize;
    let mut last_done = t0;
    let mut last_heard = Instant::now();
    let stop_list: Vec<TokenId> = if spec.stop_at_eos { stop_tokens.to_vec() } else { Vec::new() };

    let submit = |worker: &mut Worker, i: usize, in_flight: &mut HashMap<u64, (Instant, RequestRecord)>| -> Result<(), WorkerError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let prompt_ids = prompt(i);
        let request = WorkRequest { id, prompt: prompt_ids, max_tokens: spec.max_tokens, stop_tokens: stop_list.clone(), top_logprobs: spec.top_logprobs };
        let prompt_len = request.prompt.len() as u32;
        let at = Instant::now();
        in_flight.insert(id, (at, RequestRecord::new(id, prompt_len, spec.max_tokens, ms(at))));
        worker.submit(request)
    };

    let fail_all = |run: &mut PointRun, in_flight: &mut HashMap<u64, (Instant, RequestRecord)>, why: String, observer: &mut dyn Observer| {
        for (_, (_, mut rec)) in in_flight.drain() {
            rec.error = Some(why.clone());
            observer.done(&rec);
            run.records.push(rec);
        }
        run.worker_error = Some(why);
    };

    while sent < spec.requests.min(spec.concurrency) {
        if let Err(e) = submit(worker, sent, &mut in_flight) {
            fail_all(&mut run, &mut in_flight, e.to_string(), observer);
            return run;
        }
        sent += 1;
    }
    let mut cancelling = false;
    while !in_flight.is_empty() {
        if control.stop.load(Ordering::Relaxed) && !cancelling {
            cancelling = true;
            run.stopped = true;
            for id in in_flight.keys().copied().collect::<Vec<_>>() {
                let _ = worker.send(&Command::Cancel { id });
            }
        }
        let (at, reply) = match worker.recv(Duration::from_millis(100)) {
            Ok(Some(x)) => x,
            Ok(None) => {
                if last_heard.elapsed() > control.hang_timeout {
                    worker.kill();
                    let why = WorkerError::Hung(control.hang_timeout).to_string();
                    fail_all(&mut run, &mut in_flight, why, observer);
                    break;
                }
                continue;
            }
            Err(e) => {
                fail_all(&mut run, &mut in_flight, e.to_string(), observer);
                break;
            }
        };
        last_heard = Instant::now();
        let event = match reply {
            Reply::Event(e) => e,
            Reply::Error { error } => {
                // A protocol-level complaint is a bug on our side: fail loudly.
                fail_all(&mut run, &mut in_flight, format!("worker refused a command: {error}"), observer);
                break;
            }
            _ => continue,
        };
        let mut finished = None;
        match event {
            SchedEvent::Step { step, seqs, prefill_tokens, decode_tokens, t_start, t_end } => {
                run.steps.push(StepRecord { step, seqs, prefill_tokens, decode_tokens, start_ms: ms(worker.to_local(t_start)), end_ms: ms(worker.to_local(t_end)) });
            }
            SchedEvent::Admitted { id, t, .. } => {
                if let Some((sub, rec)) = in_flight.get_mut(&id) {
                    rec.admit_ms = Some(since(*sub, worker.to_local(t)));
                }
            }
            SchedEvent::Prefill { id, step, tokens, t_start, t_end } => {
                if let Some((sub, rec)) = in_flight.get_mut(&id) {
                    rec.prefill.push(PrefillSlice { step, tokens, start_ms: since(*sub, worker.to_local(t_start)), end_ms: since(*sub, worker.to_local(t_end)) });
                }
            }
            SchedEvent::Token { id, step, index, token, top, .. } => {
                if let Some((sub, rec)) = in_flight.get_mut(&id) {
                    let at_ms = since(*sub, at);
                    rec.token_ms.push(at_ms);
                    rec.token_steps.push(step);
                    rec.tokens.push(token);
                    if !top.is_empty() {
                        rec.top_logprobs.push(top);
                    }
                    observer.token(id, index, token, at_ms);
                }
            }
            SchedEvent::Finished { id, reason, .. } => finished = Some((id, Some(reason), None)),
            SchedEvent::Failed { id, error } => finished = Some((id, None, Some(error))),
        }
        if let Some((id, reason, error)) = finished {
            if let Some((_, mut rec)) = in_flight.remove(&id) {
                rec.finish = reason;
                rec.error = error;
                last_done = at;
                observer.done(&rec);
                run.records.push(rec);
                if sent < spec.requests && !cancelling && !control.stop.load(Ordering::Relaxed) {
                    if let Err(e) = submit(worker, sent, &mut in_flight) {
                        fail_all(&mut run, &mut in_flight, e.to_string(), observer);
                        break;
                    }
                    sent += 1;
                }
            }
        }
    }
    if control.stop.load(Ordering::Relaxed) && sent < spec.requests {
        run.stopped = true;
    }
    run.window_ms = ms(last_done);
    run.records.sort_by_key(|r| r.id);
    run
}

fn since(from: Instant, to: Instant) -> f64 {
    if to >= from {
        (to - from).as_secs_f64() * 1e3
    } else {
        -((from - to).as_secs_f64() * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
