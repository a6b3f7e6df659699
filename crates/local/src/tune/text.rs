//! A profile and its trials in words: what `lx tune` prints, `lx tune --show` prints again,
//! and the app shows.

use crate::profile::{Profile, Trial};

/// One setting list on one line: the same text `lx show` prints from a saved profile.
pub use lx_results::studies::tune_profile::settings_text;

/// A trial's figures on one line, or why it failed.
pub fn trial_text(t: &Trial) -> String {
    match &t.error {
        Some(e) => format!("failed ({e})"),
        None => format!(
            "decode {:.1} tok/s, prefill {:.0} tok/s, {} clients {:.1} tok/s; score {:.1} ({:.0} s)",
            t.decode_tps,
            t.prefill_tps,
            super::TRIAL_CLIENTS,
            t.batched_tps,
            t.score,
            t.seconds
        ),
    }
}

/// The profile as `lx tune` and `lx tune --show` print it: each backend's choices, then the
/// trials behind them.
pub fn describe(p: &Profile, path: &str) -> String {
    let mut out = String::new();
    let date = lx_engine::date::UtcDate::from_unix(p.measured_unix_ms / 1000).minutes();
    out.push_str(&format!("# Tuned profile ({path})\n\n"));
    out.push_str(&format!("machine: {}\nmodel: {}\nmeasured: {date}, {:.0} s of a {:.0} s budget\n", p.machine, p.model, p.seconds, p.budget_s));
    out.push_str(&format!("workload: {}\ncompeting load: {}\n", p.workload, p.competing_load));
    out.push_str("score: geometric mean of one client's decode and prefill tok/s and the clients' total tok/s\n\n");
    for (backend, b) in &p.backends {
        out.push_str(&format!("## {backend}\n\n"));
        out.push_str(&format!("- sweeps, lx serve: {}\n", if b.idle.is_empty() { "defaults (nothing measured)".into() } else { settings_text(&b.idle) }));
        out.push_str(&format!("- live mode: {}\n", b.contended.as_ref().map_or("the same (not measured under load)".into(), settings_text)));
        for n in &b.notes {
            out.push_str(&format!("- note: {n}\n"));
        }
        for (setting, kl) in &b.fidelity {
            out.push_str(&format!("- fidelity of {setting}: mean KL {kl:.2e} nats from llama.cpp's f16 cache\n"));
        }
        if b.trials.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str("\n| settings | load | decode tok/s | prefill tok/s | clients tok/s | score |\n| --- | --- | ---: | ---: | ---: | ---: |\n");
        for t in &b.trials {
            let load = if t.contended { "competing" } else { "idle" };
            match &t.error {
                Some(e) => out.push_str(&format!("| {} | {load} | failed: {e} | | | |\n", settings_text(&t.settings))),
                None => out.push_str(&format!(
                    "| {} | {load} | {:.1} | {:.0} | {:.1} | {:.1} |\n",
                    settings_text(&t.settings),
                    t.decode_tps,
                    t.prefill_tps,
                    t.batched_tps,
                    t.score
                )),
            }
        }
        out.push('\n');
    }
    out
}
