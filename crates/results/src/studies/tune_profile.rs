//! A profile `lx tune` saved (kept in docs/results as the evidence for the backends'
//! defaults): for each backend, how the first settings it measured score against the ones it
//! chose, idle and under the competing load. Idle, the first trial is the backend's defaults,
//! so the ratio says how much a user without a profile gives up on that machine; under load
//! it is the idle choice, so the ratio says what measuring contention bought. A setting
//! measured more than once (the tuner measures its choice and the start again before it
//! replaces one with the other) scores its better trial, as the tuner judges it.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::numbers::{fixed, row, sig3};

/// What `lx show` reads of a profile (the tuner's own type lives with the tuner; this reader
/// needs only the trials).
#[derive(Debug, Deserialize)]
pub struct TuneProfile {
    /// The machine and build, `|`-separated, the CPU's name first.
    pub machine: String,
    pub budget_s: f64,
    pub backends: BTreeMap<String, Backend>,
}

#[derive(Debug, Deserialize)]
pub struct Backend {
    /// The choices: idle, and under the competing load (absent when not measured).
    pub idle: BTreeMap<String, String>,
    #[serde(default)]
    pub contended: Option<BTreeMap<String, String>>,
    pub trials: Vec<Trial>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct Trial {
    pub settings: BTreeMap<String, String>,
    pub contended: bool,
    pub score: f64,
    #[serde(default)]
    pub error: Option<String>,
}

pub const KIND: &str = "tune-profile";
pub const TABLES: &[&str] = &["defaults"];

/// Profiles carry no `kind`: they are the tuner's cache files, copied.
pub fn looks_like(v: &serde_json::Value) -> bool {
    v.get("competing_load").is_some() && v.get("backends").is_some_and(|b| b.is_object())
}

pub fn header(_table: &str) -> [String; 2] {
    [
        "| machine | backend | load | first trial | score | chosen | score | first ÷ chosen | trials |".into(),
        "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: |".into(),
    ]
}

/// `threads=2 weights=dual`, in name order.
fn settings_text(s: &BTreeMap<String, String>) -> String {
    s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

impl TuneProfile {
    pub fn rows(&self, _table: &str) -> Vec<String> {
        let machine = self.machine.split('|').next().unwrap_or_default().trim();
        let mut out = Vec::new();
        for (name, b) in &self.backends {
            for (contended, load, chosen) in [(false, "idle", Some(&b.idle)), (true, "competing", b.contended.as_ref())] {
                let measured: Vec<&Trial> = b.trials.iter().filter(|t| t.contended == contended && t.error.is_none() && t.score > 0.0).collect();
                let (Some(first), Some(chosen)) = (measured.first(), chosen) else { continue };
                let score = |s: &BTreeMap<String, String>| measured.iter().filter(|t| &t.settings == s).map(|t| t.score).fold(f64::NAN, f64::max);
                let (first_score, chosen_score) = (score(&first.settings), score(chosen));
                let cut = b.notes.iter().any(|n| n.contains("budget ended"));
                out.push(row(&[
                    machine.to_string(),
                    name.clone(),
                    load.to_string(),
                    settings_text(&first.settings),
                    sig3(first_score),
                    settings_text(chosen),
                    sig3(chosen_score),
                    fixed(first_score / chosen_score, 2),
                    if cut { format!("{} (budget {} s ended the search)", measured.len(), self.budget_s) } else { measured.len().to_string() },
                ]));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_trial_is_held_against_the_choice_for_each_load() {
        let file = serde_json::json!({
            "schema": 1, "machine": "AMD EPYC | 2 logical cores | lx 0.1.0", "budget_s": 300.0,
            "workload": "w", "competing_load": "1 busy thread",
            "backends": {
                "candle": {"idle": {"threads": "2", "weights": "dual"}, "contended": {"threads": "1", "weights": "dual"}, "trials": [
                    {"settings": {"threads": "2", "weights": "dual"}, "contended": false, "score": 90.0},
                    {"settings": {"threads": "2", "weights": "f16"}, "contended": false, "score": 0.0, "error": "would not load"},
                    {"settings": {"threads": "2", "weights": "q8_0"}, "contended": false, "score": 103.0},
                    {"settings": {"threads": "2", "weights": "dual"}, "contended": false, "score": 100.0},
                    {"settings": {"threads": "2", "weights": "q8_0"}, "contended": false, "score": 101.0},
                    {"settings": {"threads": "2", "weights": "dual"}, "contended": true, "score": 20.0},
                    {"settings": {"threads": "1", "weights": "dual"}, "contended": true, "score": 50.0}
                ], "notes": ["the budget ended the search after 7 trials"]},
                "llama": {"idle": {"threads": "2"}, "trials": [
                    {"settings": {"threads": "2"}, "contended": false, "score": 10.0}
                ]},
                "mlx": {"idle": {}, "trials": []}
            }
        });
        assert!(looks_like(&file));
        let p: TuneProfile = serde_json::from_value(file).unwrap();
        let rows = p.rows("defaults");
        assert_eq!(
            rows,
            [
                "| AMD EPYC | candle | idle | threads=2 weights=dual | 100 | threads=2 weights=dual | 100 | 1.00 | 4 (budget 300 s ended the search) |",
                "| AMD EPYC | candle | competing | threads=2 weights=dual | 20.0 | threads=1 weights=dual | 50.0 | 0.40 | 2 (budget 300 s ended the search) |",
                "| AMD EPYC | llama | idle | threads=2 | 10.0 | threads=2 | 10.0 | 1.00 | 1 |",
            ],
            "each setting scores its better trial; a failed trial is not a measurement; no row without trials or a choice"
        );
        assert!(!looks_like(&serde_json::json!({"backends": []})));
    }
}
