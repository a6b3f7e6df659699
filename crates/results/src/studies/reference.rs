//! Each backend against its own project's reference implementation (`scripts/reference-bench`:
//! the `candle-reference` and `mlx-reference` binaries of lx-reference-bench): every
//! implementation's prefill and decode rate in every round, at each batch size.

use serde::Deserialize;

use super::numbers::{paired_ratio, per_round, row, sig3};

/// What `lx show` reads of a reference-bench file.
#[derive(Debug, Deserialize)]
pub struct ReferenceBench {
    /// The GGUF file's name.
    pub model: String,
    /// The reference, where the file names one for all its ratios (the first candle files).
    #[serde(default)]
    pub reference: Option<String>,
    pub figures: Vec<Figures>,
    pub ratios: Vec<Ratio>,
}

/// One implementation at one batch size, per round.
#[derive(Debug, Deserialize)]
pub struct Figures {
    pub implementation: String,
    pub batch: usize,
    pub prefill_tok_s: Vec<f64>,
    pub decode_tok_s: Vec<f64>,
}

/// Which of ours is held against which reference, at one batch size.
#[derive(Debug, Deserialize)]
pub struct Ratio {
    pub ours: String,
    /// Absent in the first candle files, which name their one reference at the top.
    #[serde(default)]
    pub reference: Option<String>,
    pub batch: usize,
}

pub const KIND: &str = "reference-bench";
pub const TABLES: &[&str] = &["ratios"];

/// Files written before they said their kind: figures and ratios at the top.
pub fn looks_like(v: &serde_json::Value) -> bool {
    v.get("figures").is_some_and(|f| f.is_array()) && v.get("ratios").is_some_and(|r| r.is_array())
}

pub fn header(_table: &str) -> [String; 2] {
    [
        "| model | ours | reference | B | prefill tok/s, ours / reference | decode tok/s, ours / reference | decode ours ÷ reference, per round |".into(),
        "| --- | --- | --- | ---: | --- | --- | --- |".into(),
    ]
}

impl ReferenceBench {
    fn figures(&self, implementation: &str, batch: usize) -> Option<&Figures> {
        self.figures.iter().find(|f| f.implementation == implementation && f.batch == batch)
    }

    /// One row per ratio the file holds, in its order: medians over rounds, and ours ÷
    /// reference as the median of the rounds' own ratios.
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let mut rows = Vec::new();
        for r in &self.ratios {
            let Some(reference) = r.reference.as_deref().or(self.reference.as_deref()) else { continue };
            let (Some(o), Some(t)) = (self.figures(&r.ours, r.batch), self.figures(reference, r.batch)) else { continue };
            let pair = |ours: &[f64], theirs: &[f64]| {
                format!("{} / {} ({:.2}×)", sig3(super::numbers::median(ours)), sig3(super::numbers::median(theirs)), paired_ratio(ours, theirs))
            };
            let rounds: Vec<String> = per_round(&o.decode_tok_s, &t.decode_tok_s).iter().map(|x| format!("{x:.2}")).collect();
            rows.push(row(&[
                self.model.clone(),
                r.ours.strip_prefix("ours ").unwrap_or(&r.ours).to_string(),
                reference.to_string(),
                r.batch.to_string(),
                pair(&o.prefill_tok_s, &t.prefill_tok_s),
                pair(&o.decode_tok_s, &t.decode_tok_s),
                rounds.join(", "),
            ]));
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_ratio_with_medians_and_per_round_ratios() {
        // A candle file of the first kind: its one reference named at the top, an
        // implementation that could not run, no reference in the ratios.
        let file = serde_json::json!({
            "schema": 1, "model": "m.gguf", "reference": "ref q",
            "figures": [
                {"implementation": "ours dual", "batch": 1, "prefill_tok_s": [300.0, 280.0, 290.0], "decode_tok_s": [30.0, 33.0, 31.5]},
                {"implementation": "ours dual", "batch": 4, "prefill_tok_s": [310.0], "decode_tok_s": [40.0]},
                {"implementation": "ref q", "batch": 1, "prefill_tok_s": [100.0, 140.0, 145.0], "decode_tok_s": [30.0, 30.0, 35.0]},
                {"implementation": "ref q", "batch": 4, "prefill_tok_s": [], "decode_tok_s": [], "error": "input has to be contiguous"}
            ],
            "ratios": [{"ours": "ours dual", "batch": 1, "prefill": 2.0, "decode": 1.1}]
        });
        assert!(looks_like(&file));
        let f: ReferenceBench = serde_json::from_value(file).unwrap();
        // Ratios per round: prefill 3, 2, 2 → 2; decode 1, 1.1, 0.9 → 1.
        assert_eq!(f.rows("ratios"), ["| m.gguf | dual | ref q | 1 | 290 / 140 (2.00×) | 31.5 / 30.0 (1.00×) | 1.00, 1.10, 0.90 |"]);
        // MLX's files name the reference in each ratio.
        let file = serde_json::json!({
            "model": "s.gguf",
            "figures": [
                {"implementation": "ours q4", "batch": 4, "prefill_tok_s": [8.0, 9.0], "decode_tok_s": [6.0, 5.0]},
                {"implementation": "mlx-lm float32", "batch": 4, "prefill_tok_s": [8.0, 10.0], "decode_tok_s": [6.0, 10.0]}
            ],
            "ratios": [{"ours": "ours q4", "reference": "mlx-lm float32", "batch": 4}]
        });
        let f: ReferenceBench = serde_json::from_value(file).unwrap();
        assert_eq!(f.rows("ratios"), ["| s.gguf | q4 | mlx-lm float32 | 4 | 8.50 / 9.00 (0.95×) | 5.50 / 8.00 (0.75×) | 1.00, 0.50 |"]);
    }
}
