//! `lx fit --check`: each point of saved runs beside the memory `lx fit` predicts for its
//! load (weights, KV cache, buffers, the worker process), and how far the prediction is from
//! the peak the point measured.

use serde::{Deserialize, Serialize};

use lx_engine::footprint::{mib, Footprint};

use super::numbers::{fixed, row};

/// A memory-fit file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryFit {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    pub hardware: serde_json::Value,
    /// The model file's name.
    pub model: String,
    pub points: Vec<FitPoint>,
}

/// One measured point beside its prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitPoint {
    /// The run file's name.
    pub run: String,
    pub backend: String,
    pub test: String,
    pub slots: usize,
    pub ctx_per_slot: usize,
    pub predicted: Footprint,
    /// The worker's peak resident memory over the point, warm-up included.
    pub measured_peak_mib: f64,
}

impl FitPoint {
    /// Predicted over measured.
    pub fn ratio(&self) -> f64 {
        mib(self.predicted.total()) / self.measured_peak_mib
    }
}

impl MemoryFit {
    /// The farthest any prediction is from its measured peak, as a fraction of the peak.
    pub fn worst(&self) -> f64 {
        self.points.iter().map(|p| (p.ratio() - 1.0).abs()).fold(0.0, f64::max)
    }

    pub fn rows(&self, _table: &str) -> Vec<String> {
        self.points
            .iter()
            .map(|p| {
                let f = &p.predicted;
                row(&[
                    p.backend.clone(),
                    p.test.clone(),
                    format!("{} × {}", p.slots, p.ctx_per_slot),
                    fixed(mib(f.weights), 0),
                    fixed(mib(f.kv_cache), 0),
                    fixed(mib(f.scratch), 0),
                    fixed(mib(f.runtime), 0),
                    fixed(mib(f.total()), 0),
                    fixed(p.measured_peak_mib, 0),
                    fixed(p.ratio(), 3),
                ])
            })
            .collect()
    }
}

pub const KIND: &str = "memory-fit";
pub const TABLES: &[&str] = &["points"];

pub fn header(_table: &str) -> [String; 2] {
    [
        "| backend | test | slots × context | weights MiB | KV cache MiB | buffers MiB | process MiB | predicted MiB | measured peak MiB | predicted / measured |".into(),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_shown_with_its_prediction_split_and_the_ratio() {
        let p = FitPoint {
            run: "r.json".into(),
            backend: "llama".into(),
            test: "pp64+tg8 @ c1".into(),
            slots: 2,
            ctx_per_slot: 4352,
            predicted: Footprint { weights: 250 << 20, kv_cache: 153 << 20, scratch: 60 << 20, runtime: 12 << 20 },
            measured_peak_mib: 500.0,
        };
        let file = MemoryFit { kind: KIND.into(), command: vec![], hardware: serde_json::Value::Null, model: "m.gguf".into(), points: vec![p] };
        assert_eq!(file.rows("points"), vec!["| llama | pp64+tg8 @ c1 | 2 × 4352 | 250 | 153 | 60 | 12 | 475 | 500 | 0.950 |"]);
        assert!((file.worst() - 0.05).abs() < 1e-12);
    }
}
