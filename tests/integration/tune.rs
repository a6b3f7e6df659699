//! `lx tune` end to end on the real default model: the profile it saves is what the next
//! sweep's workers run with (and say so in the run file), `--untuned` and a damaged profile
//! fall back to the backend's defaults, and tuning again replaces a damaged profile.

use integration_tests::{heavy, lx_with, model_path};
use serde_json::Value;

fn profile_file(home: &std::path::Path) -> std::path::PathBuf {
    let dir = home.join(".cache/latency-explorer/tune");
    let files: Vec<_> = std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert_eq!(files.len(), 1, "one profile for one machine and model in {}: {files:?}", dir.display());
    files[0].clone()
}

/// A short sweep of llama.cpp; returns the backend as the run file recorded it.
fn swept_backend(env: &[(&str, &std::path::Path)], dir: &std::path::Path, extra: &[&str]) -> Value {
    let out = dir.join("run.json");
    let mut args = vec!["sweep", "--backend", "llama", "--prompt-tokens", "32", "--concurrency", "1", "--max-tokens", "8", "--requests", "2", "--no-ceilings"];
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    lx_with(&args, env).ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    run["backends"][0].clone()
}

#[test]
fn a_tuned_profile_is_what_the_next_sweep_runs_with_and_a_damaged_one_is_measured_again() {
    let _lock = heavy();
    let home = tempfile::tempdir().unwrap();
    let model = model_path();
    let env = [("HOME", home.path()), ("LX_MODEL_DIR", model.parent().unwrap())];

    let untuned = swept_backend(&env, home.path(), &[]);
    assert!(untuned["settings_from"].as_str().unwrap().contains("not tuned (lx tune)"), "{untuned}");
    assert_eq!(untuned["settings"]["flash_attn"], "auto", "{untuned}");

    let tuned = lx_with(&["tune", "--backend", "llama", "--budget", "60s"], &env).ok();
    let path = profile_file(home.path());
    let profile: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let llama = &profile["backends"]["llama"];
    let idle = llama["idle"].as_object().unwrap();
    for key in ["threads", "flash_attn", "kv", "ubatch"] {
        assert!(idle.contains_key(key), "the profile lacks {key}: {profile}");
    }
    let trials = llama["trials"].as_array().unwrap();
    let idle_trials: Vec<&Value> = trials.iter().filter(|t| t["contended"] == false && t["error"].is_null()).collect();
    assert!(idle_trials.len() >= 2, "the defaults and at least one change in half a minute: {profile}");
    // The choice is a setting measured idle; where it is not the defaults, its best trial
    // beat the defaults' best by the margin a change must clear; every trial's figures are
    // real rates.
    let score = |t: &Value| t["score"].as_f64().unwrap();
    let best_of = |settings: &Value| idle_trials.iter().filter(|t| &t["settings"] == settings).map(|t| score(t)).fold(0.0, f64::max);
    assert!(idle_trials.iter().any(|t| t["settings"] == llama["idle"]), "the choice was measured: {profile}");
    let defaults = &idle_trials[0]["settings"];
    assert!(&llama["idle"] == defaults || best_of(&llama["idle"]) > best_of(defaults) * lx_local::tune::KEEP_MARGIN, "{profile}");
    for t in trials.iter().filter(|t| t["error"].is_null()) {
        for f in ["decode_tps", "prefill_tps", "batched_tps", "score"] {
            assert!(t[f].as_f64().unwrap() > 0.5, "{f} in {t}");
        }
    }
    assert!(trials.iter().any(|t| t["contended"] == true), "some trial ran under the competing load: {profile}");
    assert!(tuned.stdout().contains("sweeps, lx serve:") && tuned.stdout().contains("| idle |"), "{}", tuned.dump());
    let shown = lx_with(&["tune", "--show"], &env).ok();
    assert_eq!(shown.stdout(), tuned.stdout(), "--show prints the saved profile as tuning printed it");

    let ran = swept_backend(&env, home.path(), &[]);
    assert!(ran["settings_from"].as_str().unwrap().contains("tuned profile of"), "{ran}");
    for (key, value) in idle {
        let recorded = if key == "threads" { ran["threads"].to_string() } else { ran["settings"][key].as_str().unwrap().to_string() };
        assert_eq!(&recorded, value.as_str().unwrap(), "{key}: the sweep ran {ran}, the profile says {profile}");
    }
    let plain = swept_backend(&env, home.path(), &["--untuned"]);
    assert!(plain["settings_from"].as_str().unwrap().contains("the backend's defaults (--untuned)"), "{plain}");

    // A damaged profile is refused (never half-applied), said, and measured again.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 3]).unwrap();
    let refused = swept_backend(&env, home.path(), &[]);
    let from = refused["settings_from"].as_str().unwrap();
    assert!(from.contains("is damaged") && from.contains("lx tune measures again"), "{refused}");
    assert_eq!(refused["settings"]["flash_attn"], "auto", "{refused}");
    let show = lx_with(&["tune", "--show"], &env);
    assert_eq!(show.code(), Some(1), "{}", show.dump());
    assert!(show.stderr().contains("is damaged"), "{}", show.dump());
    // One idle trial is enough to write the profile again: 6 s of the 10 s idle share here.
    let again = lx_with(&["tune", "--backend", "llama", "--budget", "20s"], &env).ok();
    assert!(again.stderr().contains("is damaged") && again.stderr().contains("measuring again"), "{}", again.dump());
    let fixed: Value = serde_json::from_slice(&std::fs::read(profile_file(home.path())).unwrap()).unwrap();
    assert!(fixed["backends"]["llama"]["idle"]["flash_attn"].is_string(), "{fixed}");
}
