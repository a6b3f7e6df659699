//! Many streams at once (`cargo run -p lx-openai --example scale`): a scripted server's sent
//! gaps (the truth) against the gaps our client stamped, and our client's CPU time. One file
//! per load, one row per file.

use serde::Deserialize;

use super::numbers::{fixed, row, thousands};

/// What `lx show` reads of a client-scale file.
#[derive(Debug, Deserialize)]
pub struct ClientScale {
    pub streams: u64,
    /// One-token chunks per stream.
    pub tokens: u64,
    pub gap_ms_asked: f64,
    pub chunks_per_s: f64,
    pub truth_itl_ms: Gaps,
    pub ours_itl_ms: Gaps,
    /// Our HTTP client's threads' CPU seconds over the run (absent where /proc is not).
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
}

/// The percentiles of a gap distribution the table shows.
#[derive(Debug, Deserialize)]
pub struct Gaps {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

pub const KIND: &str = "client-scale";
pub const TABLES: &[&str] = &["gaps"];

/// Files written before they said their kind: both sides' gaps.
pub fn looks_like(v: &serde_json::Value) -> bool {
    v.get("truth_itl_ms").is_some() && v.get("ours_itl_ms").is_some()
}

pub fn header(_table: &str) -> [String; 2] {
    [
        "| streams | gap asked | chunks/s | gap p50: truth / ours | p90 | p99 | our client's CPU per chunk |".into(),
        "| ---: | ---: | ---: | --- | --- | --- | ---: |".into(),
    ]
}

impl ClientScale {
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let (t, o) = (&self.truth_itl_ms, &self.ours_itl_ms);
        let pair = |truth: f64, ours: f64| format!("{} / {}", fixed(truth, 3), fixed(ours, 3));
        let cpu = self.client_cpu_s.map_or("-".into(), |s| format!("{:.1} µs", s / (self.streams * self.tokens) as f64 * 1e6));
        vec![row(&[
            self.streams.to_string(),
            format!("{} ms", self.gap_ms_asked),
            thousands(self.chunks_per_s),
            pair(t.p50, o.p50),
            pair(t.p90, o.p90),
            format!("{} ({:+.2})", pair(t.p99, o.p99), o.p99 - t.p99),
            cpu,
        ])]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_file_with_the_p99_difference_and_cpu_per_chunk() {
        let gaps = |p50: f64, p99: f64| serde_json::json!({"count": 10, "p50": p50, "p90": 20.2, "p95": 20.3, "p99": p99, "mean": 20.1, "min": 19.0, "max": 25.0});
        let file = serde_json::json!({
            "command": [], "streams": 64, "tokens": 64, "gap_ms_asked": 20, "chunks_per_s": 3059.76,
            "truth_itl_ms": gaps(20.127, 20.287), "ours_itl_ms": gaps(20.143, 20.399), "client_cpu_s": 0.17, "hardware": {}
        });
        assert!(looks_like(&file));
        let f: ClientScale = serde_json::from_value(file.clone()).unwrap();
        assert_eq!(f.rows("gaps"), ["| 64 | 20 ms | 3,060 | 20.127 / 20.143 | 20.200 / 20.200 | 20.287 / 20.399 (+0.11) | 41.5 µs |"]);
        let mut no_cpu = file;
        no_cpu["client_cpu_s"] = serde_json::Value::Null;
        let f: ClientScale = serde_json::from_value(no_cpu).unwrap();
        assert!(f.rows("gaps")[0].ends_with("| - |"));
    }
}
