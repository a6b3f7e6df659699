//! Harness overhead (`cargo run -p lx-cli --example overhead`): a backend through engine,
//! worker process and scheduler against a reference doing the same work, alternating in one
//! run: a bare loop over the same library in one process, or an independent build of
//! llama.cpp (llama-cpp-python, `scripts/llama-cpp-python`). The example writes this file
//! and prints its table from it.

use serde::{Deserialize, Serialize};

use super::numbers::{fixed, median, row};

/// A harness-overhead file: every measured request on both sides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HarnessOverhead {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    pub hardware: serde_json::Value,
    /// The backend through the engine (`llama`, `candle`).
    pub backend: String,
    /// The worker's library version and device, as it reported them.
    pub engine: String,
    /// What the engine is held against: `bare loop` or `llama-cpp-python`.
    pub reference: String,
    /// The reference's version and build, where it reports them.
    #[serde(default)]
    pub reference_about: Option<String>,
    pub threads: usize,
    pub rounds: usize,
    /// The long request (one per round and side): prefill and decode rates.
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub long: Sides,
    /// The short requests (several pairs per round): TTFT, compared pair by pair.
    pub short_prompt_tokens: usize,
    pub short: Sides,
}

/// Both sides' requests, in the order measured; the two lists pair up by index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sides {
    pub reference: Vec<Sample>,
    pub engine: Vec<Sample>,
}

/// One request's figures, defined as the engine defines them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sample {
    pub ttft_ms: f64,
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
}

pub const KIND: &str = "harness-overhead";
pub const TABLES: &[&str] = &["overhead"];

pub fn header(_table: &str) -> [String; 2] {
    [
        "| backend | reference | rounds | figure | reference's | engine + worker | engine ÷ reference |".into(),
        "| --- | --- | ---: | --- | ---: | ---: | ---: |".into(),
    ]
}

fn medians(samples: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    median(&samples.iter().map(f).collect::<Vec<_>>())
}

impl HarnessOverhead {
    /// Three rows: the long request's prefill and decode rates (medians, and their ratio),
    /// and the short one's TTFT (medians, and the median of the pairs' differences, engine
    /// less reference: a difference of 2 ms hides in a TTFT's noise, a pair's does not).
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let (l, s) = (&self.long, &self.short);
        let label = [self.backend.clone(), self.reference.clone(), self.rounds.to_string()];
        let rate = |figure: String, f: fn(&Sample) -> f64, decimals: usize| {
            let (theirs, ours) = (medians(&l.reference, f), medians(&l.engine, f));
            let mut cells = label.to_vec();
            cells.extend([figure, fixed(theirs, decimals), fixed(ours, decimals), fixed(ours / theirs, 3)]);
            row(&cells)
        };
        let pairs: Vec<f64> = s.engine.iter().zip(&s.reference).map(|(e, r)| e.ttft_ms - r.ttft_ms).collect();
        let paired = median(&pairs);
        let mut ttft = label.to_vec();
        ttft.extend([
            format!("TTFT ms (pp{}, {} pairs)", self.short_prompt_tokens, pairs.len()),
            fixed(medians(&s.reference, |x| x.ttft_ms), 2),
            fixed(medians(&s.engine, |x| x.ttft_ms), 2),
            if paired.is_finite() { format!("{paired:+.2} ms paired") } else { "-".into() },
        ]);
        vec![
            rate(format!("prefill tok/s (pp{})", self.prompt_tokens), |x| x.prefill_tok_s, 1),
            rate(format!("decode tok/s (tg{})", self.gen_tokens), |x| x.decode_tok_s, 2),
            row(&ttft),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_medians_and_ttft_is_the_median_paired_difference() {
        let s = |ttft_ms: f64, prefill_tok_s: f64, decode_tok_s: f64| Sample { ttft_ms, prefill_tok_s, decode_tok_s };
        let f = HarnessOverhead {
            kind: KIND.into(),
            command: vec![],
            hardware: serde_json::json!({}),
            backend: "llama".into(),
            engine: "llama.cpp b1 on CPU".into(),
            reference: "bare loop".into(),
            reference_about: None,
            threads: 2,
            rounds: 3,
            prompt_tokens: 512,
            gen_tokens: 128,
            long: Sides { reference: vec![s(0.0, 250.0, 47.0), s(0.0, 240.0, 46.0), s(0.0, 260.0, 48.0)], engine: vec![s(0.0, 251.0, 46.5), s(0.0, 249.0, 45.0), s(0.0, 245.0, 47.0)] },
            short_prompt_tokens: 64,
            short: Sides { reference: vec![s(250.0, 0.0, 0.0), s(260.0, 0.0, 0.0), s(240.0, 0.0, 0.0), s(255.0, 0.0, 0.0)], engine: vec![s(252.0, 0.0, 0.0), s(255.0, 0.0, 0.0), s(245.0, 0.0, 0.0), s(256.0, 0.0, 0.0)] },
        };
        // The file reads back as written.
        let back: HarnessOverhead = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        // Paired differences 2, -5, 5, 1: median 1.5.
        assert_eq!(
            back.rows("overhead"),
            [
                "| llama | bare loop | 3 | prefill tok/s (pp512) | 250.0 | 249.0 | 0.996 |",
                "| llama | bare loop | 3 | decode tok/s (tg128) | 47.00 | 46.50 | 0.989 |",
                "| llama | bare loop | 3 | TTFT ms (pp64, 4 pairs) | 252.50 | 253.50 | +1.50 ms paired |",
            ]
        );
    }
}
