//! The closed loop on the backend being measured: keep `concurrency` requests in flight
//! through the shared client loop ([`lx_client::client`]), and report each request as it goes
//! and when it ends.

use std::time::{Duration, Instant};

use super::accounting::Stint;
use super::rotation::Phase;
use super::Session;
use lx_client::client::{Flight, Heard};
use lx_client::target::TargetError;
use crate::live::{LiveEvent, PrefillSpan, SettingKey, TransferSpan, KEEP_PER_SETTING, LOOP_TICK};
use lx_client::records::RequestRecord;
use lx_engine::scheduler::{FinishReason, SchedEvent, WorkRequest};
use lx_format::tokenizer::PieceDecoder;

/// What live mode keeps beside a request's record while it is in flight.
pub(super) struct LiveRequest {
    pub(super) backend: String,
    pub(super) key: SettingKey,
    pub(super) generation: u64,
    pub(super) prefill_spans: Vec<PrefillSpan>,
    pub(super) settled: bool,
    pub(super) preview: Option<PieceDecoder>,
}

impl Session {
    /// One round of the closed loop on slot `i`: decide whether to hand over, top up the
    /// clients, then take the worker's replies for up to [`LOOP_TICK`].
    pub(super) fn measure(&mut self, i: usize) {
        let draining = matches!(self.phase, Phase::Draining { .. });
        // A setting the loaded worker cannot serve: cancel and reload.
        let misfit = match &self.slots[i].capacity {
            Some(c) => c.misfit(&self.settings),
            None => Some("the new settings"),
        };
        if let Some(why) = misfit {
            self.cancel_in_flight(&format!("the worker is reloading for {why}"));
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
        let hang_timeout = Duration::from_secs_f64(self.settings.hang_timeout_s);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(ep) = self.slots[i].endpoint.as_mut() else { return };
            match self.clients.receive(ep.as_mut(), left, hang_timeout) {
                Ok(Some((at, heard))) => {
                    self.heard(i, at, heard);
                    // A client is free: its next request goes now (a closed loop resubmits on
                    // completion, not on the next tick); then back to the loop, which looks at
                    // commands before waiting again.
                    if !draining && self.clients.len() < self.settings.concurrency {
                        self.fill(i);
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
    }

    /// Submit until every client has a request in flight; false if the worker died.
    fn fill(&mut self, i: usize) -> bool {
        while self.clients.len() < self.settings.concurrency {
            if let Err(e) = self.submit(i) {
                self.crashed(i, e.to_string());
                return false;
            }
        }
        true
    }

    fn submit(&mut self, i: usize) -> Result<(), TargetError> {
        if self.slots[i].endpoint.is_none() {
            return Err(TargetError::Died("is gone".into()));
        }
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
        let settled = !self.first_after_load && self.clients.flights().all(|f| f.tag.generation == self.generation);
        self.first_after_load = false;
        let request = WorkRequest { id, prompt, max_tokens: s.max_tokens, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: None };
        let submitted = Instant::now();
        let at_ms = self.ms(submitted);
        let record = RequestRecord::new(id, s.prompt_tokens, s.max_tokens, at_ms);
        if settled {
            let stint = self.stint.get_or_insert_with(|| Stint { key: key.clone(), generation: self.generation, start_ms: None, last_ms: at_ms, tokens: 0 });
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
        let tag = LiveRequest { backend, key, generation: self.generation, prefill_spans: Vec::new(), settled, preview: preview.then(PieceDecoder::default) };
        let ep = self.slots[i].endpoint.as_mut().expect("checked above");
        self.clients.submit(ep.as_mut(), request, submitted, record, tag)
    }

    /// Report one reply the client loop booked.
    fn heard(&mut self, i: usize, at: Instant, heard: Heard<LiveRequest>) {
        match heard {
            Heard::Booked { id, event } => self.booked(i, id, at, event),
            Heard::Ended(flight) => self.finish(flight),
            // A refused command is a bug on our side; report it and carry on.
            Heard::Refused(error) => self.emit(LiveEvent::Rejected { message: format!("the worker refused a command: {error}") }),
            Heard::Step(_) | Heard::Nothing => {}
        }
    }

    /// What live mode shows of an event on a request in flight: its queue wait, its prefill
    /// passes, its tokens (counted towards throughput, and decoded for the preview).
    fn booked(&mut self, i: usize, id: u64, at: Instant, event: SchedEvent) {
        let (Some(ep), Some(f)) = (self.slots[i].endpoint.as_ref(), self.clients.get_mut(id)) else { return };
        let t0 = self.t0;
        let ms = |at: Instant| at.saturating_duration_since(t0).as_secs_f64() * 1e3;
        match event {
            SchedEvent::Admitted { t, .. } => {
                let at_ms = ms(ep.to_local(t));
                let queue_ms = f.record.admit_ms.unwrap_or(0.0);
                self.batcher.push(LiveEvent::RequestAdmitted { id, at_ms, queue_ms });
            }
            SchedEvent::Prefill { tokens, t_start, t_end, .. } => {
                let (start_ms, end_ms) = (ms(ep.to_local(t_start)), ms(ep.to_local(t_end)));
                f.tag.prefill_spans.push(PrefillSpan { tokens, start_ms, end_ms });
                self.batcher.push(LiveEvent::RequestPrefill { id, tokens, start_ms, end_ms });
            }
            SchedEvent::StateLoaded { .. } => {
                if let Some(t) = f.record.transfer {
                    let transfer = TransferSpan { bytes: t.bytes, start_ms: f.record.submit_ms + t.save_start_ms, end_ms: f.record.submit_ms + t.load_end_ms };
                    self.batcher.push(LiveEvent::RequestTransferred { id, transfer });
                }
            }
            SchedEvent::Token { index, token, drafted, .. } => {
                let at_ms = ms(at);
                self.recent_tokens.push_back(at);
                if let Some(st) = self.stint.as_mut() {
                    if st.generation == f.tag.generation && st.start_ms.is_some_and(|s| at_ms >= s) {
                        st.tokens += 1;
                        st.last_ms = at_ms;
                    }
                }
                if let Some(dec) = f.tag.preview.as_mut() {
                    let piece = dec.push(&(self.model.token_bytes)(token));
                    self.batcher.push(LiveEvent::PreviewTokens { id, first_index: index, pieces: vec![piece], at_ms: vec![at_ms], drafted: vec![drafted] });
                }
            }
            _ => {}
        }
    }

    /// A request ended: report it, and count it when it settled.
    pub(super) fn finish(&mut self, mut f: Flight<LiveRequest>) {
        let id = f.record.id;
        let ok = f.record.ok();
        if let Phase::Measuring { completed, .. } = &mut self.phase {
            if ok {
                *completed += 1;
            }
        }
        let settled = f.tag.settled && ok && f.tag.generation == self.generation;
        let r = &f.record;
        let event = LiveEvent::RequestDone {
            id,
            backend: f.tag.backend.clone(),
            policy: f.tag.key.policy,
            prompt_tokens: r.prompt_tokens,
            max_tokens: r.max_tokens,
            concurrency: f.tag.key.concurrency,
            submit_at_ms: r.submit_ms,
            admit_at_ms: r.admit_ms.map(|q| r.submit_ms + q),
            prefill: std::mem::take(&mut f.tag.prefill_spans),
            first_token_at_ms: r.token_ms.first().map(|t| r.submit_ms + t),
            last_token_at_ms: r.token_ms.last().map(|t| r.submit_ms + t),
            verified_at_ms: verified_at(r),
            transfer: r.transfer.map(|t| TransferSpan { bytes: t.bytes, start_ms: r.submit_ms + t.save_start_ms, end_ms: r.submit_ms + t.load_end_ms }),
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
            let key = f.tag.key.clone();
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
    pub(super) fn cancel_in_flight(&mut self, why: &str) {
        for f in self.clients.end_all(Some(FinishReason::Cancelled), why) {
            self.finish(f);
        }
    }
}

/// When each verify pass that accepted drafted tokens reached the client: a pass's tokens
/// arrive together, so one time per pass.
fn verified_at(r: &lx_client::records::RequestRecord) -> Vec<f64> {
    let mut at: Vec<f64> = r.drafted.iter().filter_map(|&i| r.token_ms.get(i as usize)).map(|t| r.submit_ms + t).collect();
    at.dedup();
    at
}
