//! How faithfully each backend and setting runs a model (`lx fidelity`): a fixed text scored
//! teacher-forced by a reference (llama.cpp with an f16 KV cache, on the same file or a
//! higher-precision one) and by every candidate, position by position, with the candidate's
//! KL divergence from the reference, how often their top choices agree, and the text's
//! perplexity; speculative decoding against the same backend decoding without drafts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::numbers::{fixed, row, sig3};

pub const KIND: &str = "fidelity";
pub const TABLES: &[&str] = &["candidates", "reference"];

/// A fidelity file: the reference, the text, and every candidate measured against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FidelityRun {
    /// Always [`KIND`].
    pub kind: String,
    pub tool_version: String,
    /// Unix time (ms) the run started.
    pub started_unix_ms: u64,
    pub command: Vec<String>,
    /// `lx hw`'s report of the machine.
    #[ts(type = "unknown")]
    pub hardware: serde_json::Value,
    /// The model the candidates run: its file name and sha256 where known.
    pub model: FileId,
    pub reference: ReferenceRecord,
    pub text: TextRecord,
    /// Tokens per scored chunk: each chunk starts afresh, and its second half is scored
    /// (the first half gives every scored position at least that much context).
    pub context: usize,
    /// The reference's best alternatives kept per position; the divergence is computed
    /// over them and the rest of the vocabulary as one outcome.
    pub top: usize,
    /// Tokens each candidate generates for its decode speed and its drafting comparison.
    pub generated: usize,
    pub candidates: Vec<Candidate>,
    /// The run was stopped before every candidate was measured.
    #[serde(default)]
    pub stopped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FileId {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Who the candidates are measured against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ReferenceRecord {
    /// `llama` with an f16 KV cache.
    pub backend: String,
    pub version: String,
    pub device: String,
    /// The reference's own file: the candidates' file, or `--reference-model`'s.
    pub model: FileId,
    /// The text's perplexity under the reference.
    pub perplexity: f64,
    /// The reference's probability left outside its kept alternatives, mean over positions:
    /// what the divergence sees as one outcome.
    pub uncovered: f64,
}

/// The text scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct TextRecord {
    pub name: String,
    /// Where it comes from and why it may be shipped.
    pub source: String,
    pub sha256: String,
    /// Its tokens under the model's tokenizer, and the chunks and positions scored.
    pub tokens: usize,
    pub chunks: usize,
    pub positions: usize,
}

/// What a candidate is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// The reference, on the text, teacher-forced.
    Reference,
    /// The same backend and settings decoding without drafts, on what both generated.
    Plain,
}

impl Against {
    /// As tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Against::Reference => "reference",
            Against::Plain => "no drafts",
        }
    }
}

/// One backend with one setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Candidate {
    pub backend: String,
    /// What sets it apart, in words: `default`, `KV q8_0`, `weights f16`, `drafts: lookup`.
    pub setting: String,
    /// The backend's settings as it ran with them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    #[serde(default)]
    pub device: String,
    pub against: Against,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<Fidelity>,
    /// Greedy decoding of [`FidelityRun::generated`] tokens, one sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tok_s: Option<f64>,
    /// The worker's peak resident memory while it decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// Drafted tokens the model accepted while it decoded (a drafting candidate): a
    /// comparison over tokens no draft produced would show nothing of drafting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_drafts: Option<u32>,
    /// Why it was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A sweep point's fidelity (`lx sweep --fidelity`): its backend and settings measured
/// before the points, against what [`Candidate::against`] says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Measured {
    pub against: Against,
    #[serde(flatten)]
    pub fidelity: Fidelity,
}

/// The distance of a candidate's next-token distributions from what it is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Fidelity {
    /// KL(compared-with ‖ candidate), nats, mean over positions.
    pub mean_kl: f64,
    pub p99_kl: f64,
    pub max_kl: f64,
    /// Positions where both put the same token first, as a fraction.
    pub top1_agreement: f64,
    /// The text's perplexity under the candidate (teacher-forced candidates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perplexity: Option<f64>,
    pub positions: usize,
}

pub fn header(table: &str) -> [String; 2] {
    match table {
        "reference" => [
            "| reference | model | device | text | tokens | chunks × context | positions | perplexity | mass beyond its best alternatives |".into(),
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |".into(),
        ],
        _ => [
            "| backend | setting | against | mean KL (nats) | p99 KL | top-1 agreement | perplexity | decode tok/s | peak MiB |".into(),
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
        ],
    }
}

/// A divergence: `0` where it is exactly nothing, else three significant digits in
/// scientific notation (they span from 1e-9, rounding, to 1, another model).
pub fn kl(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.is_finite() {
        format!("{x:.2e}")
    } else {
        "-".into()
    }
}

impl FidelityRun {
    /// The figures of the candidate `backend` ran as `setting`, where it was measured.
    pub fn measured(&self, backend: &str, setting: &str) -> Option<Measured> {
        let c = self.candidates.iter().find(|c| c.backend == backend && c.setting == setting)?;
        Some(Measured { against: c.against, fidelity: c.fidelity? })
    }

    /// What the figures of a sweep's rows are measured against, and on what; then every
    /// candidate that could not be measured, with why.
    pub fn notes(&self) -> Vec<String> {
        let r = &self.reference;
        let short = &self.text.sha256[..self.text.sha256.len().min(12)];
        let chunks = if self.text.chunks == 1 { "1 chunk".to_string() } else { format!("{} chunks", self.text.chunks) };
        let mut lines = vec![format!(
            "fidelity: mean KL divergence (nats) and top-1 agreement against {} with an f16 KV cache ({}) on {}, over {} positions of {} (sha256 {short}…, {chunks} of {}); a row with drafts against the same settings decoding without drafts (0: drafting changed nothing)",
            r.backend, r.version, r.model.name, self.text.positions, self.text.name, self.context
        )];
        lines.extend(self.candidates.iter().filter(|c| c.fidelity.is_none()).map(|c| {
            format!("warning: fidelity of {} ({}) not measured: {}", c.backend, c.setting, c.error.as_deref().unwrap_or("stopped"))
        }));
        lines
    }

    pub fn rows(&self, table: &str) -> Vec<String> {
        match table {
            "reference" => {
                let r = &self.reference;
                let model = if r.model == self.model { format!("{} (the same file)", r.model.name) } else { r.model.name.clone() };
                let t = &self.text;
                vec![row(&[
                    format!("{} {} (f16 KV cache)", r.backend, r.version),
                    model,
                    r.device.clone(),
                    t.name.clone(),
                    t.tokens.to_string(),
                    format!("{} × {}", t.chunks, self.context),
                    t.positions.to_string(),
                    fixed(r.perplexity, 3),
                    format!("{:.2}%", 100.0 * r.uncovered),
                ])]
            }
            _ => self.candidates.iter().map(Candidate::row).collect(),
        }
    }
}

impl Candidate {
    fn row(&self) -> String {
        let against = self.against.label();
        let opt = |x: Option<f64>, d: usize| x.map_or("-".into(), |v| fixed(v, d));
        match (&self.fidelity, &self.error) {
            (Some(f), _) => row(&[
                self.backend.clone(),
                self.setting.clone(),
                against.into(),
                kl(f.mean_kl),
                kl(f.p99_kl),
                format!("{:.2}%", 100.0 * f.top1_agreement),
                opt(f.perplexity, 3),
                self.decode_tok_s.map_or("-".into(), sig3),
                opt(self.peak_rss_mib, 0),
            ]),
            (None, why) => row(&[
                self.backend.clone(),
                self.setting.clone(),
                against.into(),
                format!("not measured: {}", why.as_deref().unwrap_or("stopped")),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divergences_print_as_measured() {
        assert_eq!(kl(0.0), "0");
        assert_eq!(kl(0.000_123_4), "1.23e-4");
        assert_eq!(kl(f64::NAN), "-");
        let c = Candidate {
            backend: "candle".into(),
            setting: "weights f16".into(),
            settings: BTreeMap::new(),
            device: "CPU".into(),
            against: Against::Reference,
            fidelity: Some(Fidelity { mean_kl: 0.0012, p99_kl: 0.02, max_kl: 0.1, top1_agreement: 0.9876, perplexity: Some(12.3456), positions: 100 }),
            decode_tok_s: Some(41.26),
            peak_rss_mib: Some(612.4),
            accepted_drafts: None,
            error: None,
        };
        assert_eq!(c.row(), "| candle | weights f16 | reference | 1.20e-3 | 2.00e-2 | 98.76% | 12.346 | 41.3 | 612 |");
        let failed = Candidate { fidelity: None, error: Some("the worker crashed".into()), against: Against::Plain, ..c };
        assert!(failed.row().starts_with("| candle | weights f16 | no drafts | not measured: the worker crashed |"));
    }
}
