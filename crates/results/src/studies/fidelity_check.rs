//! Our fidelity figures held against llama.cpp's own tool (`scripts/fidelity-check`): for
//! each llama.cpp candidate, mean KL divergence, its 99th percentile, top-1 agreement and
//! perplexity from `lx fidelity` and from `llama-perplexity --kl-divergence` on the same
//! text, model, context and chunks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::numbers::{fixed, row};

pub const KIND: &str = "fidelity-check";
pub const TABLES: &[&str] = &["figures"];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FidelityCheck {
    /// Always [`KIND`].
    pub kind: String,
    pub date: String,
    pub command: Vec<String>,
    pub machine: String,
    pub model: String,
    pub reference_model: String,
    pub text_sha256: String,
    pub context: usize,
    pub chunks: usize,
    pub positions: usize,
    /// The largest gap, as a fraction of llama-perplexity's figure, called agreement.
    pub within: f64,
    pub rows: Vec<CheckRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckRow {
    pub setting: String,
    /// The reference against itself: our divergence is exactly nothing, and
    /// llama-perplexity's is the rounding of the 16-bit log-probabilities it stores.
    #[serde(default)]
    pub itself: bool,
    /// By our file's names: `mean_kl`, `p99_kl`, `top1_agreement`, `perplexity`.
    pub figures: BTreeMap<String, Figure>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Figure {
    pub ours: f64,
    pub theirs: f64,
    pub within: bool,
}

pub fn header(_table: &str) -> [String; 2] {
    [
        "| model | reference | setting | mean KL: ours | llama-perplexity | p99 KL: ours | llama-perplexity | top-1 agreement: ours | llama-perplexity | perplexity: ours | llama-perplexity | within 1% |".into(),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |".into(),
    ]
}

impl FidelityCheck {
    pub fn rows(&self, _table: &str) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| {
                let f = |name: &str| r.figures.get(name).copied();
                let pair = |name: &str, show: &dyn Fn(f64) -> String| match f(name) {
                    Some(x) => [show(x.ours), show(x.theirs)],
                    None => ["-".into(), "-".into()],
                };
                let share = |x: f64| format!("{:.2}%", 100.0 * x);
                // Four digits: enough to read a 1% gap.
                let kl = |x: f64| if x == 0.0 { "0".to_string() } else { format!("{x:.3e}") };
                let [mk, mk_t] = pair("mean_kl", &kl);
                let [pk, pk_t] = pair("p99_kl", &kl);
                let [t1, t1_t] = pair("top1_agreement", &share);
                let [pp, pp_t] = pair("perplexity", &|x| fixed(x, 3));
                let all = r.figures.values().all(|x| x.within);
                let verdict = match (all, r.itself) {
                    (true, true) => "yes (the reference itself: theirs is its 16-bit storage)",
                    (true, false) => "yes",
                    (false, _) => "**no**",
                };
                let reference = if self.reference_model == self.model { "the same file, f16 KV".to_string() } else { self.reference_model.clone() };
                row(&[self.model.as_str(), &reference, &r.setting, &mk, &mk_t, &pk, &pk_t, &t1, &t1_t, &pp, &pp_t, verdict])
            })
            .collect()
    }
}
