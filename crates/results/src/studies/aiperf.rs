//! Our client against NVIDIA's AIPerf on the same server and load (`scripts/aiperf-compare`):
//! each figure's median over the rounds, both clients', and their ratio.

use serde::Deserialize;

use super::numbers::{fixed, row};

/// What `lx show` reads of an aiperf-compare file.
#[derive(Debug, Deserialize)]
pub struct AiperfCompare {
    /// Medians over rounds, one per server, concurrency and figure, in the order measured.
    pub medians: Vec<Median>,
}

#[derive(Debug, Deserialize)]
pub struct Median {
    pub server: String,
    pub concurrency: u32,
    /// The figure's name, with its unit: `TTFT p50 ms`.
    pub figure: String,
    pub ours: f64,
    pub aiperf: f64,
}

pub const KIND: &str = "aiperf-compare";
pub const TABLES: &[&str] = &["medians"];

/// Files written before they said their kind: medians and AIPerf's version.
pub fn looks_like(v: &serde_json::Value) -> bool {
    v.get("medians").is_some_and(|m| m.is_array()) && v.get("aiperf_version").is_some()
}

pub fn header(_table: &str) -> [String; 2] {
    ["| server | concurrency | figure | ours | AIPerf | ours ÷ AIPerf |".into(), "| --- | ---: | --- | ---: | ---: | ---: |".into()]
}

impl AiperfCompare {
    pub fn rows(&self, _table: &str) -> Vec<String> {
        self.medians
            .iter()
            .map(|m| row(&[m.server.clone(), m.concurrency.to_string(), m.figure.clone(), fixed(m.ours, 2), fixed(m.aiperf, 2), fixed(m.ours / m.aiperf, 3)]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_median() {
        let file = serde_json::json!({
            "command": ["scripts/aiperf-compare"], "aiperf_version": "0.13.0", "settings": {},
            "medians": [
                {"server": "lx", "concurrency": 1, "figure": "TTFT p50 ms", "ours": 521.727, "aiperf": 525.3719, "ratio": 0.99306},
                {"server": "llama-server", "concurrency": 4, "figure": "gap p90 ms", "ours": 83.0, "aiperf": 80.0, "ratio": 1.0375}
            ],
            "runs": []
        });
        assert!(looks_like(&file));
        let f: AiperfCompare = serde_json::from_value(file).unwrap();
        assert_eq!(f.rows("medians"), ["| lx | 1 | TTFT p50 ms | 521.73 | 525.37 | 0.993 |", "| llama-server | 4 | gap p90 ms | 83.00 | 80.00 | 1.038 |"]);
    }
}
