//! Batched decode and concurrent serving against llama.cpp's own tools
//! (`scripts/batching-bench`, `crates/cli/examples/batching.rs`): every figure of every round,
//! on both sides. Two tables: aggregate decode at B sequences (`decode`) and closed-loop
//! serving at c clients (`serving`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::numbers::{fixed, median, paired_ratio, row};

/// A side's figures, each one per round, by name.
pub type Rounds = BTreeMap<String, Vec<f64>>;

/// What `lx show` reads of a batching-bench file.
#[derive(Debug, Deserialize)]
pub struct BatchingBench {
    pub decode: Vec<Decode>,
    pub serving: Vec<Serving>,
}

/// Aggregate decode at `b` sequences: llama-batched-bench's S_TG against ours.
#[derive(Debug, Deserialize)]
pub struct Decode {
    pub b: usize,
    pub batched_bench: Rounds,
    pub ours: Rounds,
}

/// `clients` closed-loop streaming clients: llama-server against ours.
#[derive(Debug, Deserialize)]
pub struct Serving {
    pub clients: usize,
    pub llama_server: Rounds,
    pub ours: Rounds,
}

pub const KIND: &str = "batching-bench";
pub const TABLES: &[&str] = &["decode", "serving"];

/// Files written before they said their kind: a decode and a serving list.
pub fn looks_like(v: &serde_json::Value) -> bool {
    v.get("decode").is_some_and(|d| d.is_array()) && v.get("serving").is_some_and(|s| s.is_array())
}

pub fn header(table: &str) -> [String; 2] {
    if table == "serving" {
        ["| c | figure | llama-server | ours | ours ÷ server |".into(), "| ---: | --- | ---: | ---: | ---: |".into()]
    } else {
        [
            "| B | batched-bench S_TG | ours, passes | ÷ | ours, client | ÷ | pass ms | in llama_decode | adapter | between passes | bare loop, slot order | reversed |".into(),
            format!("|{}", " ---: |".repeat(12)),
        ]
    }
}

/// A figure's rounds; none when the file lacks it (its cells then show a dash).
fn of<'a>(side: &'a Rounds, key: &str) -> &'a [f64] {
    side.get(key).map_or(&[], Vec::as_slice)
}

/// Serving's figures: key in the file, and the table's name for it.
const SERVING_FIGURES: [(&str, &str); 3] = [("ttft_ms", "TTFT p50 ms"), ("decode_tps", "decode tok/s per request p50"), ("throughput_tps", "throughput tok/s")];

impl BatchingBench {
    /// Each figure is the median over rounds; each ratio the median of the rounds' own
    /// ratios. "between passes" is the clients' ITL p50 less the pass time.
    pub fn rows(&self, table: &str) -> Vec<String> {
        if table == "serving" {
            let mut rows = Vec::new();
            for s in &self.serving {
                for (key, label) in SERVING_FIGURES {
                    let (theirs, ours) = (of(&s.llama_server, key), of(&s.ours, key));
                    rows.push(row(&[s.clients.to_string(), label.to_string(), fixed(median(theirs), 1), fixed(median(ours), 1), fixed(paired_ratio(ours, theirs), 3)]));
                }
            }
            return rows;
        }
        self.decode
            .iter()
            .map(|d| {
                let m = |key: &str| median(of(&d.ours, key));
                let s_tg = of(&d.batched_bench, "s_tg");
                row(&[
                    d.b.to_string(),
                    fixed(median(s_tg), 1),
                    fixed(m("pass_tps"), 1),
                    fixed(paired_ratio(of(&d.ours, "pass_tps"), s_tg), 2),
                    fixed(m("client_tps"), 1),
                    fixed(paired_ratio(of(&d.ours, "client_tps"), s_tg), 2),
                    fixed(m("pass_ms"), 1),
                    fixed(m("llama_decode_ms"), 1),
                    fixed(m("adapter_ms"), 2),
                    fixed(m("itl_ms") - m("pass_ms"), 2),
                    fixed(m("bare_decode_ms"), 1),
                    fixed(m("bare_reversed_ms"), 1),
                ])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> serde_json::Value {
        serde_json::json!({
            "command": [], "hardware": {}, "settings": {"rounds": 3},
            "decode": [{"b": 4, "batched_bench": {"s_tg": [100.0, 104.0, 110.0]}, "ours": {
                "pass_tps": [101.0, 104.0, 99.0], "client_tps": [98.0, 100.0, 110.0], "pass_ms": [38.0, 39.0, 40.0],
                "llama_decode_ms": [37.5, 38.5, 39.0], "adapter_ms": [0.2, 0.3, 0.25], "itl_ms": [38.1, 39.2, 40.0],
                "bare_decode_ms": [36.0, 36.6, 37.0], "bare_reversed_ms": [63.0, 64.0, 65.0]
            }}],
            "serving": [{"clients": 8, "llama_server": {"ttft_ms": [2000.0, 2100.0, 2200.0], "decode_tps": [15.0, 16.0, 15.5], "throughput_tps": [100.0, 99.0, 98.0]},
                         "ours": {"ttft_ms": [1700.0, 1800.0, 1650.0], "decode_tps": [15.0, 16.0, 15.5], "throughput_tps": [105.0]}}]
        })
    }

    #[test]
    fn decode_rows_are_medians_and_paired_ratios() {
        assert!(looks_like(&file()));
        let f: BatchingBench = serde_json::from_value(file()).unwrap();
        // pass_tps ÷ s_tg per round: 1.01, 1.0, 0.9 → 1.00; client_tps: 0.98, 0.96, 1.0 → 0.98.
        assert_eq!(f.rows("decode"), ["| 4 | 104.0 | 101.0 | 1.00 | 100.0 | 0.98 | 39.0 | 38.5 | 0.25 | 0.20 | 36.6 | 64.0 |"]);
    }

    #[test]
    fn serving_rows_are_three_figures_per_client_count() {
        let f: BatchingBench = serde_json::from_value(file()).unwrap();
        // Throughput has one round of ours: the ratio is that round's (105 ÷ 100).
        assert_eq!(
            f.rows("serving"),
            ["| 8 | TTFT p50 ms | 2100.0 | 1700.0 | 0.850 |", "| 8 | decode tok/s per request p50 | 15.5 | 15.5 | 1.000 |", "| 8 | throughput tok/s | 99.0 | 105.0 | 1.050 |"]
        );
    }
}
