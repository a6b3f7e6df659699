//! llama.cpp's KV cache types side by side (`cargo run --example kv_cache`): bytes per
//! token computed from the model's shapes and measured from llama.cpp's saved state, how
//! many sequences of a context fit a memory budget, prefill and decode speed, and how far
//! the next-token distribution moves from an f16 cache's on the same tokens.

use serde::{Deserialize, Serialize};

use lx_engine::backend::KvType;

use super::numbers::{fixed, median, paired_ratio, row};

/// A kv-cache file: every round's figures per type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KvCacheStudy {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    pub hardware: serde_json::Value,
    pub engine: String,
    pub threads: usize,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    /// Alternatives kept per position for the divergence.
    pub top_kept: usize,
    /// What one token adds to one layer's cache in f16 (keys and values), from the GGUF.
    pub f16_bytes_per_token_layer: u64,
    pub layers: usize,
    /// An f16 cache's bytes for one sequence of `context_tokens` (sliding-window layers at
    /// their window), from the GGUF.
    pub f16_bytes_at_context: u64,
    pub context_tokens: u64,
    pub budget_mib: u64,
    pub rounds: Vec<TypeRound>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TypeRound {
    pub round: usize,
    pub kv_type: String,
    pub bytes_per_token_measured: f64,
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
    /// Positions where the top choice is f16's, as a fraction.
    pub top1_agreement: f64,
    /// Mean KL(f16 ‖ this) over the positions, nats.
    pub mean_kl_nats: f64,
    pub positions: usize,
}

pub const KIND: &str = "kv-cache";
pub const TABLES: &[&str] = &["types"];

pub fn header(_table: &str) -> [String; 2] {
    [
        "| KV type | bytes/token computed | measured | sequences of the context in the budget | × f16 | prefill tok/s | ÷ f16 | decode tok/s | ÷ f16 | top-1 agreement with f16 | mean KL from f16 (nats) |".into(),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
    ]
}

impl KvCacheStudy {
    fn of(&self, name: &str, f: fn(&TypeRound) -> f64) -> Vec<f64> {
        self.rounds.iter().filter(|r| r.kv_type == name).map(f).collect()
    }

    /// Sequences of `context_tokens` whose cache of type `t` fits the budget.
    fn admitted(&self, t: KvType) -> u64 {
        let per_sequence = self.f16_bytes_at_context as f64 * t.bytes_per_element() / KvType::F16.bytes_per_element();
        ((self.budget_mib << 20) as f64 / per_sequence).floor() as u64
    }

    /// A row per type measured, f16 first: medians over rounds, speeds against f16 as the
    /// median of each round's own ratio.
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let f16 = KvType::F16.name();
        KvType::ALL
            .into_iter()
            .filter(|t| self.rounds.iter().any(|r| r.kv_type == t.name()))
            .map(|t| {
                let name = t.name();
                let computed = self.f16_bytes_per_token_layer as f64 * self.layers as f64 * t.bytes_per_element() / KvType::F16.bytes_per_element();
                let (prefill, decode) = (self.of(name, |r| r.prefill_tok_s), self.of(name, |r| r.decode_tok_s));
                row(&[
                    name.to_string(),
                    fixed(computed, 0),
                    fixed(median(&self.of(name, |r| r.bytes_per_token_measured)), 0),
                    self.admitted(t).to_string(),
                    format!("{}x", fixed(self.admitted(t) as f64 / self.admitted(KvType::F16) as f64, 2)),
                    fixed(median(&prefill), 1),
                    fixed(paired_ratio(&prefill, &self.of(f16, |r| r.prefill_tok_s)), 3),
                    fixed(median(&decode), 2),
                    fixed(paired_ratio(&decode, &self.of(f16, |r| r.decode_tok_s)), 3),
                    format!("{:.1}%", 100.0 * median(&self.of(name, |r| r.top1_agreement))),
                    fixed(median(&self.of(name, |r| r.mean_kl_nats)), 5),
                ])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_held_against_f16_round_by_round() {
        let r = |round, t: &str, decode: f64, agree: f64, kl: f64| TypeRound {
            round,
            kv_type: t.into(),
            bytes_per_token_measured: match t {
                "f16" => 18432.0,
                "q8_0" => 9792.0,
                _ => 5184.0,
            },
            prefill_tok_s: 1000.0,
            decode_tok_s: decode,
            top1_agreement: agree,
            mean_kl_nats: kl,
            positions: 128,
        };
        let study = KvCacheStudy {
            kind: KIND.into(),
            command: vec![],
            hardware: serde_json::json!({}),
            engine: "llama.cpp".into(),
            threads: 2,
            prompt_tokens: 256,
            gen_tokens: 128,
            top_kept: 1000,
            f16_bytes_per_token_layer: 1024,
            layers: 18,
            f16_bytes_at_context: 4 << 20,
            context_tokens: 4096,
            budget_mib: 64,
            rounds: vec![r(1, "f16", 80.0, 1.0, 0.0), r(1, "q8_0", 76.0, 0.99, 0.002), r(2, "q8_0", 78.0, 0.98, 0.004), r(2, "f16", 78.0, 1.0, 0.0)],
        };
        let rows = study.rows("types");
        assert_eq!(rows.len(), 2, "only the types measured");
        // 64 MiB holds 16 f16 sequences of 4 MiB, and 30 of q8_0's 2.125 MiB.
        assert_eq!(rows[0], "| f16 | 18432 | 18432 | 16 | 1.00x | 1000.0 | 1.000 | 79.00 | 1.000 | 100.0% | 0.00000 |");
        assert_eq!(rows[1], "| q8_0 | 9792 | 9792 | 30 | 1.88x | 1000.0 | 1.000 | 77.00 | 0.975 | 98.5% | 0.00300 |");
    }
}
