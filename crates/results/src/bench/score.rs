//! The score: one figure per backend that compares across machines.
//!
//! Each shape of the suite gives two rates, a request's median prefill tok/s and its median
//! decode tok/s. Each rate is divided by the reference machine's for the same shape, and the
//! score of one repetition is 100 × the geometric mean of those ratios: the reference machine's
//! llama.cpp scores 100, a machine twice as fast on every rate scores 200, and no one shape
//! outweighs another. The score is the mean over the repetitions in which every rate was
//! measured, with the 95% interval of that mean (Student's t): two scores whose intervals do
//! not overlap differ by more than the machines' own noise.
//!
//! The reference machine is the one these figures were measured on: the means over the
//! repetitions of llama.cpp's figures in a bench file of this repository
//! (docs/results/bench/), one reference per suite and model: the default model in both
//! suites, and a shape-only twin of Qwen2.5 1.5B (`synth:qwen2.5-1.5b`, the same file on every
//! machine) in the quick suite, the larger tier. A file of another model or suite gets its
//! figures but no score: a score is only defined against the same work.

use serde::{Deserialize, Serialize};

use super::{BackendBench, BenchFile, BenchModel, SuiteName};
use crate::repeats::Spread;

/// The reference figures of one suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub suite: SuiteName,
    /// The reference machine, as a gallery names it.
    pub machine: String,
    pub machine_fingerprint: String,
    pub backend: String,
    pub model: String,
    pub model_sha256: String,
    /// The bench file (in docs/results/bench) whose means these are.
    pub source: String,
    pub figures: Vec<ReferenceShape>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceShape {
    pub shape: String,
    pub prefill_tps: f64,
    pub decode_tps: f64,
}

/// A backend's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Mean over the complete repetitions; 100 is the reference machine's llama.cpp.
    pub value: f64,
    /// The 95% interval of the mean; absent with one repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    /// Each complete repetition's score.
    pub each: Vec<f64>,
    /// Against what: `llama on AMD EPYC, 2 cores (quick suite)`.
    pub reference: String,
}

impl Score {
    /// `143 [138, 149]`, or `143` without an interval.
    pub fn describe(&self) -> String {
        match (self.low, self.high) {
            (Some(l), Some(h)) => format!("{:.0} [{l:.0}, {h:.0}]", self.value),
            _ => format!("{:.0}", self.value),
        }
    }
}

/// Every shipped reference, one per suite and model measured.
const SHIPPED: [&str; 3] = [
    include_str!("../../../../docs/results/bench/reference-quick.json"),
    include_str!("../../../../docs/results/bench/reference-full.json"),
    include_str!("../../../../docs/results/bench/reference-quick-qwen2.5-1.5b.json"),
];

impl Reference {
    /// Every reference this build ships (a file holding `null` is one not measured yet),
    /// parsed once.
    pub fn shipped() -> &'static [Reference] {
        static SHIPPED_REFERENCES: std::sync::OnceLock<Vec<Reference>> = std::sync::OnceLock::new();
        SHIPPED_REFERENCES.get_or_init(|| {
            SHIPPED.iter().filter_map(|text| serde_json::from_str::<Option<Reference>>(text).expect("the shipped reference files are checked by their test")).collect()
        })
    }

    /// The shipped reference for `file`'s suite and model, where one has been measured.
    pub fn for_file(file: &BenchFile) -> Option<Reference> {
        Self::shipped().iter().find(|r| r.suite == file.suite.name && file.model.sha256.as_deref() == Some(r.model_sha256.as_str())).cloned()
    }

    /// The means of `backend`'s figures in `file` over its complete repetitions.
    pub fn from_bench(file: &BenchFile, backend: &str, source: &str) -> Option<Reference> {
        let b = file.backends.iter().find(|b| b.name == backend)?;
        let reps = b.complete_repetitions();
        let at = |v: &[Option<f64>]| super::mean(reps.iter().filter_map(|&r| v.get(r).copied().flatten()));
        let figures = b.shapes.iter().map(|s| Some(ReferenceShape { shape: s.shape.clone(), prefill_tps: at(&s.prefill_tps)?, decode_tps: at(&s.decode_tps)? })).collect::<Option<Vec<_>>>()?;
        Some(Reference {
            suite: file.suite.name,
            machine: file.machine.label(),
            machine_fingerprint: file.machine.fingerprint.clone(),
            backend: backend.to_string(),
            model: file.model.name.clone(),
            model_sha256: file.model.sha256.clone()?,
            source: source.to_string(),
            figures,
        })
    }

    /// `b`'s score against this reference, or why it has none.
    pub fn score(&self, model: &BenchModel, b: &BackendBench) -> Result<Score, String> {
        if model.sha256.as_deref() != Some(self.model_sha256.as_str()) {
            return Err(format!("no score: the {} suite's reference machine measured {} (sha256 {}…), not this model", self.suite, self.model, &self.model_sha256[..12.min(self.model_sha256.len())]));
        }
        let reps = b.complete_repetitions();
        if reps.is_empty() {
            return Err("no score: no repetition measured every shape".into());
        }
        let mut each = Vec::new();
        for r in reps {
            let mut logs = Vec::new();
            for s in &b.shapes {
                let reference = self.figures.iter().find(|f| f.shape == s.shape).ok_or_else(|| format!("no score: the reference has no shape {:?}", s.shape))?;
                for (x, base) in [(s.prefill_tps[r], reference.prefill_tps), (s.decode_tps[r], reference.decode_tps)] {
                    logs.push((x.expect("a complete repetition has every figure") / base).ln());
                }
            }
            each.push(100.0 * (logs.iter().sum::<f64>() / logs.len() as f64).exp());
        }
        let spread = Spread::of(each.iter().copied());
        Ok(Score {
            value: spread.map_or(each[0], |s| s.mean),
            low: spread.map(|s| s.low),
            high: spread.map(|s| s.high),
            each,
            reference: format!("{} on {} ({} suite)", self.backend, self.machine, self.suite),
        })
    }
}

impl BenchFile {
    /// Scores every backend against `reference` (or says why each has none).
    pub fn score(&mut self, reference: Option<&Reference>) {
        let model = self.model.clone();
        let reference = reference.filter(|r| r.suite == self.suite.name);
        for b in &mut self.backends {
            b.notes.retain(|n| !n.starts_with("no score"));
            match reference.map(|r| r.score(&model, b)) {
                Some(Ok(s)) => b.score = Some(s),
                Some(Err(why)) => {
                    b.score = None;
                    b.notes.push(why);
                }
                None => {
                    b.score = None;
                    let measured: Vec<String> = Reference::shipped().iter().map(|r| format!("{} in the {} suite", r.model, r.suite)).collect();
                    b.notes.push(format!("no score: the reference machine has not measured this model in the {} suite (it has: {})", self.suite.name, measured.join("; ")));
                }
            }
        }
    }
}
