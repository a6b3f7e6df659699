//! Delivery of events in batches ([`EventBatcher`]), so that a front end is asked to
//! render a few times a second however fast tokens arrive.

use std::time::{Duration, Instant};

use super::events::LiveEvent;

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
            LiveEvent::PreviewTokens { id, first_index, pieces, at_ms, drafted } => {
                if let Some(LiveEvent::PreviewTokens { id: last_id, first_index: last_first, pieces: p, at_ms: a, drafted: d }) =
                    self.pending.last_mut()
                {
                    if *last_id == id && *last_first + p.len() as u32 == first_index {
                        p.extend(pieces);
                        a.extend(at_ms);
                        d.extend(drafted);
                        return;
                    }
                }
                self.pending.push(LiveEvent::PreviewTokens { id, first_index, pieces, at_ms, drafted });
            }
            LiveEvent::Tick { .. } => {
                self.pending.retain(|e| !matches!(e, LiveEvent::Tick { .. }));
                self.pending.push(event);
            }
            LiveEvent::Summary { ref key_id, .. } => {
                let newer = key_id.clone();
                self.pending.retain(|e| !matches!(e, LiveEvent::Summary { key_id, .. } if *key_id == newer));
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
