//! A tuned setting must not buy its speed with the model: where the tuner's choice changes
//! what a backend computes (candle's weight format), the choice and the backend's default are
//! scored against llama.cpp's f16 cache on the shipped text ([`crate::fidelity`]), and a
//! choice that moves the model more than [`KL_BOUND`] further than the default does is not
//! kept: the default's value stays, and the profile says why.

use std::collections::BTreeMap;

use lx_run::fidelity::{self as measure, Plan};

use crate::profile::Settings;
use crate::model::OpenModel;

/// How much further (mean KL divergence from the reference, nats) a tuned setting may move the
/// model than the backend's default does: an eighth of what llama.cpp's q8_0 KV cache moves
/// the default model (8.6e-3, docs/MEASUREMENTS.md), which nobody would call the same model.
pub const KL_BOUND: f64 = 1e-3;

/// The settings that change what a backend computes, not only how fast.
pub fn changes_the_model(knob: &str) -> bool {
    knob == "weights"
}

/// What to do with a choice, given its and the default's mean KL divergence.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Keep(String),
    Revert(String),
}

pub fn judge(knob: &str, chosen: &str, default: &str, chosen_kl: f64, default_kl: f64) -> Verdict {
    let figures = format!("mean KL from llama.cpp's f16 cache {chosen_kl:.2e} against the default {default}'s {default_kl:.2e}");
    if chosen_kl <= default_kl + KL_BOUND {
        Verdict::Keep(format!("{knob} {chosen}: {figures}, within the bound of {KL_BOUND:.0e} nats"))
    } else {
        Verdict::Revert(format!("{knob} {chosen} scored higher but moves the model further ({figures}, more than {KL_BOUND:.0e} nats above it): kept {default}"))
    }
}

/// Checks `chosen` against `defaults` for every setting that changes the model, measuring
/// each value once (`measured` keeps what was scored). Returns the settings to keep and what
/// to note.
pub fn bound(model: &OpenModel, backend: &str, chosen: &Settings, defaults: &Settings, measured: &mut BTreeMap<String, f64>) -> (Settings, Vec<String>) {
    let mut kept = chosen.clone();
    let mut notes = Vec::new();
    for (knob, value) in chosen.iter().filter(|(k, _)| changes_the_model(k)) {
        let Some(default) = defaults.get(knob).filter(|d| *d != value) else { continue };
        let kls = match score(model, backend, knob, &[default.as_str(), value.as_str()], measured) {
            Ok(k) => k,
            Err(e) => {
                notes.push(format!("{knob} {value}: its fidelity was not measured ({e}); kept {default}"));
                kept.insert(knob.clone(), default.clone());
                continue;
            }
        };
        match judge(knob, value, default, kls[1], kls[0]) {
            Verdict::Keep(n) => notes.push(n),
            Verdict::Revert(n) => {
                notes.push(n);
                kept.insert(knob.clone(), default.clone());
            }
        }
    }
    (kept, notes)
}

/// Mean KL divergence of `backend` with `knob` at each of `values`, from those already
/// measured or by one quick fidelity run (one chunk of the shipped text).
fn score(model: &OpenModel, backend: &str, knob: &str, values: &[&str], measured: &mut BTreeMap<String, f64>) -> Result<Vec<f64>, String> {
    let key = |v: &str| format!("{knob} {v}");
    let missing: Vec<&str> = values.iter().copied().filter(|v| !measured.contains_key(&key(v))).collect();
    if !missing.is_empty() {
        let asked = crate::fidelity::Asked { backends: vec![backend.to_string()], no_drafts: true, ..Default::default() };
        let plan = Plan { chunks: Some(1), generated: 4, ..Plan::default() };
        let mut job = crate::fidelity::job(model, &asked, plan, vec!["lx".into(), "tune".into()]).map_err(|e| format!("{e:#}"))?;
        job.entries.retain(|e| missing.iter().any(|v| e.setting == key(v)));
        let run = measure::run(&job, &mut Quiet)?;
        for c in run.candidates {
            let kl = c.fidelity.map(|f| f.mean_kl).ok_or_else(|| c.error.unwrap_or_else(|| "not measured".into()))?;
            measured.insert(c.setting, kl);
        }
    }
    values.iter().map(|v| measured.get(&key(v)).copied().ok_or_else(|| format!("{knob} {v} is not a setting `lx fidelity` measures"))).collect()
}

struct Quiet;

impl measure::Watch for Quiet {
    fn status(&mut self, _what: &str) {}
    fn measured(&mut self, _candidate: &lx_results::studies::fidelity::Candidate) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_faster_setting_is_kept_only_within_the_bound() {
        match judge("weights", "f16", "dual", 0.0050, 0.0064) {
            Verdict::Keep(n) => assert!(n.contains("within the bound of 1e-3 nats"), "{n}"),
            v => panic!("{v:?}"),
        }
        match judge("weights", "q8_0", "dual", 0.0064 + KL_BOUND * 1.3, 0.0064) {
            Verdict::Revert(n) => assert!(n.ends_with("kept dual") && n.contains("moves the model further"), "{n}"),
            v => panic!("{v:?}"),
        }
        assert!(changes_the_model("weights") && !changes_the_model("threads") && !changes_the_model("flash_attn"));
    }
}
