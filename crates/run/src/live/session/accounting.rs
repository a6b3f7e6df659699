//! Which requests count and what they add up to: generations of the setting (a change makes
//! what is in flight unsettled), the measured stretches throughput is taken over, per-setting summaries,
//! periodic ticks, and the results in the run-file schema.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::rotation::Phase;
use super::Session;
use crate::live::{LiveEvent, SettingKey, SettingSummary, THROUGHPUT_WINDOW, TICK_EVERY};
use lx_client::records::RequestRecord;
use lx_client::traffic::{PointRun, PointSpec};
use lx_results::results::PointResult;
use lx_client::stats::Distribution;

/// Per-setting accumulation.
#[derive(Default)]
pub(super) struct SettingStats {
    pub(super) records: VecDeque<RequestRecord>,
    pub(super) requests: u64,
    /// Closed stretches: (tokens, wall ms).
    pub(super) tokens: u64,
    pub(super) window_ms: f64,
}

/// The measured stretch of the current setting on the active backend.
pub(super) struct Stint {
    pub(super) key: SettingKey,
    pub(super) generation: u64,
    pub(super) start_ms: Option<f64>,
    pub(super) last_ms: f64,
    pub(super) tokens: u64,
}

impl Session {
    /// The setting (or backend, or worker) changed: what is in flight no longer counts, and
    /// a new measured stretch begins.
    pub(super) fn new_generation(&mut self) {
        self.generation += 1;
        for f in self.clients.flights_mut() {
            f.tag.settled = false;
        }
        self.close_stint();
    }

    pub(super) fn close_stint(&mut self) {
        if let Some(st) = self.stint.take() {
            if let Some(start) = st.start_ms {
                let s = self.stats.entry(st.key).or_default();
                s.tokens += st.tokens;
                s.window_ms += (st.last_ms - start).max(0.0);
            }
        }
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
            drafted: recs().filter_map(|r| r.spec.as_ref()).map(|t| u64::from(t.drafted)).sum(),
            accepted: recs().filter_map(|r| r.spec.as_ref()).map(|t| u64::from(t.accepted)).sum(),
        })
    }

    pub(super) fn results(&self) -> Vec<PointResult> {
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
                    opened: None,
                    worker_error: None,
                    stopped: false,
                };
                let mut point = PointResult::from_run(&key.backend, key.policy, &spec, run);
                point.traffic.spec = lx_engine::speculative::Speculation { drafter: key.drafter, adaptive: !key.spec_fixed, shared_cache: key.shared_cache, ..self.settings.spec };
                point.traffic.kv = key.kv;
                point.throughput_tps = summary.throughput_tps;
                point.scheduled_by_server = self.servers.contains(&key.backend);
                Some(point)
            })
            .collect()
    }

    /// Ticks, summaries and event batches: summaries are computed once per batch at most.
    pub(super) fn housekeeping(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_tick) >= TICK_EVERY {
            self.last_tick = now;
            self.tick(now);
            self.sense();
        }
        if !self.batcher.due(now) {
            return;
        }
        for key in std::mem::take(&mut self.dirty) {
            if let Some(summary) = self.summary(&key) {
                self.batcher.push(LiveEvent::Summary { key_id: summary.key.id(), summary });
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
        let queued = self.clients.flights().filter(|f| f.record.admit_ms.is_none()).count();
        let prefilling = self.clients.flights().filter(|f| f.record.admit_ms.is_some() && f.record.token_ms.is_empty()).count();
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
            in_flight: self.clients.len(),
            queued,
            prefilling,
            ttft_p50_ms: p50,
            ttft_p95_ms: p95,
        });
    }
}
