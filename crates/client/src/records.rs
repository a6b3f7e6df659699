//! What the client measures of each request, and what the worker reports of each pass.
//!
//! Every time is on the coordinator's clock: submit, and the receipt of each token; the
//! worker's phase stamps (admit, prefill) are mapped onto the same clock for queue wait,
//! prefill rate and the timeline.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use lx_engine::backend::TokenId;
use lx_engine::scheduler::{FinishReason, SchedEvent};

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
    pub top_logprobs: Vec<Vec<lx_engine::backend::Scored>>,
    /// Its prompt scored teacher-forced, position by position from the first scored one,
    /// when asked for ([`lx_engine::scheduler::WorkRequest::score`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scored: Vec<lx_engine::backend::Choice>,
    pub finish: Option<FinishReason>,
    pub error: Option<String>,
    /// What its figures should be read with (see `SchedEvent::Warning`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where its time went, pass by pass (filled in when the point is summarised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Speculative decoding's account of it: none when nothing was drafted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecTally>,
    /// Which of its tokens (indices into `tokens`) came from an accepted draft.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drafted: Vec<u32>,
    /// Disaggregated serving: its state's way from the prefill worker to the decode worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<Transfer>,
}

/// A prefilled sequence's state moving between workers, as one request saw it: saved by the
/// prefill worker, carried, loaded by the decode worker. Times are ms after the request's
/// submit; the first token reaches the client only after `load_end_ms`, so TTFT includes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    /// The state as sent (framed).
    pub bytes: u64,
    pub save_start_ms: f64,
    pub save_end_ms: f64,
    pub load_start_ms: f64,
    pub load_end_ms: f64,
}

impl Transfer {
    /// From the start of the save to the end of the load.
    pub fn ms(&self) -> f64 {
        self.load_end_ms - self.save_start_ms
    }
    /// Bytes per second over [`Transfer::ms`].
    pub fn bytes_per_s(&self) -> Option<f64> {
        let ms = self.ms();
        (ms > 0.0).then(|| self.bytes as f64 / ms * 1e3)
    }
}

/// One request's drafts: how many tokens were proposed, how many the target accepted, over
/// how many verify passes, and the time spent drafting them (outside the passes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecTally {
    pub drafted: u32,
    pub accepted: u32,
    pub passes: u32,
    pub draft_ms: f64,
}

impl SpecTally {
    /// Accepted ÷ drafted.
    pub fn acceptance(&self) -> Option<f64> {
        (self.drafted > 0).then(|| f64::from(self.accepted) / f64::from(self.drafted))
    }
    /// Accepted drafted tokens per verify pass.
    pub fn accepted_per_pass(&self) -> Option<f64> {
        (self.passes > 0).then(|| f64::from(self.accepted) / f64::from(self.passes))
    }
}

pub(crate) fn is_zero(n: &u32) -> bool {
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
    /// Disaggregated serving: when its state moved from the prefill worker to the decode
    /// worker (between its prefill and its first token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<Transfer>,
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
            scored: Vec::new(),
            finish: None,
            error: None,
            warnings: Vec::new(),
            timeline: None,
            spec: None,
            drafted: Vec::new(),
            transfer: None,
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
            SchedEvent::Token { step, token, top, drafted, .. } => {
                if *drafted {
                    self.drafted.push(self.tokens.len() as u32);
                }
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
            SchedEvent::Scored { rows, .. } => self.scored.extend(rows.iter().cloned()),
            SchedEvent::Verified { drafted, accepted, draft_ns, .. } => {
                let s = self.spec.get_or_insert_with(SpecTally::default);
                s.drafted += drafted;
                s.accepted += accepted;
                s.passes += 1;
                s.draft_ms += *draft_ns as f64 / 1e6;
            }
            SchedEvent::HandedOff { bytes, t_start, t_end, .. } => {
                let t = self.transfer.get_or_insert_with(Transfer::default);
                t.bytes = *bytes;
                t.save_start_ms = since(submitted, to_local(*t_start));
                t.save_end_ms = since(submitted, to_local(*t_end));
            }
            SchedEvent::StateLoaded { t_start, t_end, .. } => {
                let t = self.transfer.get_or_insert_with(Transfer::default);
                t.load_start_ms = since(submitted, to_local(*t_start));
                t.load_end_ms = since(submitted, to_local(*t_end));
            }
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
        self.timeline = Some(Timeline { queue_ms: self.admit_ms, cached_tokens: self.cached_tokens, prefill, decode, transfer: self.transfer });
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
    /// Drafted tokens it verified (beside one decode token per decoding sequence).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_tokens: u32,
    pub start_ms: f64,
    pub end_ms: f64,
    /// The part of the pass spent inside the backend's library (llama.cpp's `llama_decode`),
    /// where the backend times it; the rest of `end_ms - start_ms` is the adapter's own work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ms: Option<f64>,
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
