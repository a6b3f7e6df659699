//! What `/metrics` reports, in Prometheus' text format: the queue, the running sequences,
//! how requests ended, and TTFT and inter-token latency as histograms.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

const TTFT_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const ITL_BUCKETS: [f64; 11] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    fn observe(&mut self, seconds: f64) {
        for (b, c) in self.bounds.iter().zip(&mut self.counts) {
            if seconds <= *b {
                *c += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}", self.count, self.sum, self.count);
    }
}

/// Counters shared by the engine loop (which updates them) and `/metrics` (which reads them).
pub struct Metrics {
    pub queued: AtomicI64,
    pub running: AtomicI64,
    pub finished: AtomicU64,
    pub cancelled: AtomicU64,
    pub failed: AtomicU64,
    latency: Mutex<(Histogram, Histogram)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            queued: AtomicI64::new(0),
            running: AtomicI64::new(0),
            finished: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            latency: Mutex::new((Histogram::new(&TTFT_BUCKETS), Histogram::new(&ITL_BUCKETS))),
        }
    }
}

impl Metrics {
    pub fn ttft(&self, seconds: f64) {
        self.latency.lock().unwrap_or_else(|e| e.into_inner()).0.observe(seconds);
    }

    pub fn itl(&self, seconds: f64) {
        self.latency.lock().unwrap_or_else(|e| e.into_inner()).1.observe(seconds);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let gauge = |out: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(&mut out, "lx_queue_depth", "Requests waiting for a slot.", self.queued.load(Ordering::Relaxed));
        gauge(&mut out, "lx_running_sequences", "Requests holding a slot.", self.running.load(Ordering::Relaxed));
        let _ = writeln!(out, "# HELP lx_requests_total Requests that ended, by how.\n# TYPE lx_requests_total counter");
        for (how, n) in [("finished", &self.finished), ("cancelled", &self.cancelled), ("failed", &self.failed)] {
            let _ = writeln!(out, "lx_requests_total{{outcome=\"{how}\"}} {}", n.load(Ordering::Relaxed));
        }
        let l = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        l.0.write(&mut out, "lx_time_to_first_token_seconds", "Submit to first token, at the server.");
        l.1.write(&mut out, "lx_inter_token_latency_seconds", "Gaps between a request's tokens, at the server.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_text_is_prometheus_shaped() {
        let m = Metrics::default();
        m.ttft(0.02);
        m.ttft(0.3);
        m.queued.store(2, Ordering::Relaxed);
        let text = m.render();
        assert!(text.contains("lx_queue_depth 2\n"), "{text}");
        assert!(text.contains("lx_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"), "{text}");
        assert!(text.contains("lx_time_to_first_token_seconds_bucket{le=\"0.5\"} 2\n"), "{text}");
        assert!(text.contains("lx_time_to_first_token_seconds_count 2\n"), "{text}");
        assert!(text.contains("lx_inter_token_latency_seconds_bucket{le=\"+Inf\"} 0\n"), "{text}");
    }
}
