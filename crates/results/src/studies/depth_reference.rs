//! Our llama.cpp backend against `llama-bench -d` at each context depth
//! (`scripts/depth-check`): every round's prefill and decode rate of both, at each depth.

use serde::Deserialize;

use super::numbers::{median, paired_ratio, per_round, row, sig3};

/// A depth-reference file.
#[derive(Debug, Deserialize)]
pub struct DepthReference {
    pub model: String,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub rounds: Vec<Round>,
}

/// One implementation at one depth in one round.
#[derive(Debug, Deserialize)]
pub struct Round {
    pub round: usize,
    pub depth: u64,
    pub implementation: String,
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
}

pub const KIND: &str = "depth-reference";
pub const TABLES: &[&str] = &["depths"];
/// The reference every file holds ours against.
const REFERENCE: &str = "llama-bench";

pub fn header(_table: &str) -> [String; 2] {
    [
        "| model | depth | prefill tok/s, ours / llama-bench | decode tok/s, ours / llama-bench | decode ours ÷ llama-bench, per round |".into(),
        "| --- | ---: | --- | --- | --- |".into(),
    ]
}

impl DepthReference {
    /// One implementation's figure at `depth`, in round order.
    fn of(&self, implementation: &str, depth: u64, f: fn(&Round) -> f64) -> Vec<f64> {
        let mut rounds: Vec<&Round> = self.rounds.iter().filter(|r| r.depth == depth && r.implementation == implementation).collect();
        rounds.sort_by_key(|r| r.round);
        rounds.into_iter().map(f).collect()
    }

    /// A row per depth, shallowest first: medians over rounds, and ours ÷ llama-bench as the
    /// median of the rounds' own ratios.
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let mut depths: Vec<u64> = self.rounds.iter().map(|r| r.depth).collect();
        depths.sort_unstable();
        depths.dedup();
        let ours = self.rounds.iter().find(|r| r.implementation != REFERENCE).map_or("ours llama", |r| r.implementation.as_str());
        depths
            .into_iter()
            .map(|d| {
                let pair = |f: fn(&Round) -> f64| {
                    let (o, t) = (self.of(ours, d, f), self.of(REFERENCE, d, f));
                    format!("{} / {} ({:.2}×)", sig3(median(&o)), sig3(median(&t)), paired_ratio(&o, &t))
                };
                let decode = per_round(&self.of(ours, d, |r| r.decode_tok_s), &self.of(REFERENCE, d, |r| r.decode_tok_s));
                row(&[
                    format!("{} (pp{}, tg{})", self.model, self.prompt_tokens, self.gen_tokens),
                    d.to_string(),
                    pair(|r| r.prefill_tok_s),
                    pair(|r| r.decode_tok_s),
                    decode.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", "),
                ])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_depth_is_a_row_with_paired_ratios() {
        let r = |round, depth, implementation: &str, pp, tg| Round { round, depth, implementation: implementation.into(), prefill_tok_s: pp, decode_tok_s: tg };
        let file = DepthReference {
            model: "m.gguf".into(),
            prompt_tokens: 512,
            gen_tokens: 128,
            rounds: vec![
                r(0, 4096, "ours llama", 400.0, 50.0),
                r(0, 4096, REFERENCE, 500.0, 50.0),
                r(1, 4096, REFERENCE, 400.0, 40.0),
                r(1, 4096, "ours llama", 400.0, 44.0),
                r(0, 0, "ours llama", 700.0, 80.0),
                r(0, 0, REFERENCE, 700.0, 80.0),
            ],
        };
        assert_eq!(
            file.rows("depths"),
            vec![
                "| m.gguf (pp512, tg128) | 0 | 700 / 700 (1.00×) | 80.0 / 80.0 (1.00×) | 1.00 |",
                "| m.gguf (pp512, tg128) | 4096 | 400 / 450 (0.90×) | 47.0 / 45.0 (1.05×) | 1.00, 1.10 |",
            ]
        );
    }
}
