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
    pub measured_unix_ms: u64,
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
        "| machine | backend | load | first trial | score | chosen | score | highest single trial | first ÷ chosen | first ÷ highest | trials |".into(),
        "| --- | --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |".into(),
    ]
}

/// `threads=2 weights=dual`, in name order (how `lx tune` prints settings too).
pub fn settings_text(s: &BTreeMap<String, String>) -> String {
    s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// What `s` changes from `first` (`threads=1`), or "the first" when nothing.
fn change_text(first: &BTreeMap<String, String>, s: &BTreeMap<String, String>) -> String {
    let changed: BTreeMap<String, String> = s.iter().filter(|(k, v)| first.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if changed.is_empty() {
        "the first".into()
    } else {
        settings_text(&changed)
    }
}

impl TuneProfile {
    pub fn rows(&self, _table: &str) -> Vec<String> {
        // Profiles of one machine differ by when they were measured.
        let date = lx_engine::date::UtcDate::from_unix(self.measured_unix_ms / 1000).minutes();
        let fields: Vec<&str> = self.machine.split('|').map(str::trim).collect();
        // The build's GPU API, where it has one: its profile tunes the GPU against the CPU.
        let gpu = fields.last().into_iter().flat_map(|f| f.split(',')).find(|f| matches!(*f, "cuda" | "metal" | "vulkan"));
        let machine = format!("{}{}, {date}", fields[0], gpu.map(|g| format!(" ({g} build)")).unwrap_or_default());
        let mut out = Vec::new();
        for (name, b) in &self.backends {
            for (contended, load, chosen) in [(false, "idle", Some(&b.idle)), (true, "competing", b.contended.as_ref())] {
                let measured: Vec<&Trial> = b.trials.iter().filter(|t| t.contended == contended && t.error.is_none() && t.score > 0.0).collect();
                let (Some(first), Some(chosen)) = (measured.first(), chosen) else { continue };
                let score = |s: &BTreeMap<String, String>| measured.iter().filter(|t| &t.settings == s).map(|t| t.score).fold(f64::NAN, f64::max);
                let (first_score, chosen_score) = (score(&first.settings), score(chosen));
                let highest = measured.iter().copied().fold(*first, |h, t| if t.score > h.score { t } else { h });
                let cut = b.notes.iter().any(|n| n.contains("budget ended"));
                out.push(row(&[
                    machine.clone(),
                    name.clone(),
                    load.to_string(),
                    settings_text(&first.settings),
                    sig3(first_score),
                    change_text(&first.settings, chosen),
                    sig3(chosen_score),
                    format!("{} ({})", sig3(highest.score), change_text(&first.settings, &highest.settings)),
                    fixed(first_score / chosen_score, 2),
                    fixed(first_score / highest.score, 2),
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
            "schema": 1, "machine": "AMD EPYC | 2 logical cores | lx 0.1.0", "measured_unix_ms": 1796400000000_u64, "budget_s": 300.0,
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
                "| AMD EPYC, 2026-12-04 16:00 UTC | candle | idle | threads=2 weights=dual | 100 | the first | 100 | 103 (weights=q8_0) | 1.00 | 0.97 | 4 (budget 300 s ended the search) |",
                "| AMD EPYC, 2026-12-04 16:00 UTC | candle | competing | threads=2 weights=dual | 20.0 | threads=1 | 50.0 | 50.0 (threads=1) | 0.40 | 0.40 | 2 (budget 300 s ended the search) |",
                "| AMD EPYC, 2026-12-04 16:00 UTC | llama | idle | threads=2 | 10.0 | the first | 10.0 | 10.0 (the first) | 1.00 | 1.00 | 1 |",
            ],
            "each setting scores its better trial; a failed trial is not a measurement; no row without trials or a choice"
        );
        assert!(!looks_like(&serde_json::json!({"backends": []})));

        let gpu: TuneProfile = serde_json::from_value(serde_json::json!({
            "machine": "AMD EPYC | 2 logical cores | lx 0.1.0 | vulkan", "measured_unix_ms": 1796400000000_u64, "budget_s": 600.0,
            "backends": {"llama": {"idle": {"gpu_layers": "0"}, "trials": [
                {"settings": {"gpu_layers": "all"}, "contended": false, "score": 3.5},
                {"settings": {"gpu_layers": "0"}, "contended": false, "score": 204.0}
            ]}}
        }))
        .unwrap();
        assert_eq!(gpu.rows("defaults"), ["| AMD EPYC (vulkan build), 2026-12-04 16:00 UTC | llama | idle | gpu_layers=all | 3.50 | gpu_layers=0 | 204 | 204 (gpu_layers=0) | 0.02 | 0.02 | 2 |"]);
    }
}
