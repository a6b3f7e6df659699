use std::collections::BTreeMap;

use super::*;
use crate::profile::*;

fn s(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A backend whose speed is a table of its settings: threads 2 beats 1, q8_0 beats the rest;
/// the defaults are threads 2, f16. What it reports is complete, as a real worker's is.
fn fake(asked: &Settings, calls: &mut Vec<Settings>) -> Trial {
    let mut ran = s(&[("threads", "2"), ("weights", "f16")]);
    ran.extend(asked.clone());
    calls.push(ran.clone());
    let t = if ran["threads"] == "2" { 1.0 } else { 0.6 };
    let w = match ran["weights"].as_str() {
        "q8_0" => 2.0,
        "dual" => 1.8,
        "f16" => 1.0,
        _ => 0.5,
    };
    Trial::new(ran, false, 10.0 * t * w, 100.0 * t, 20.0 * t * w, 1.0)
}

#[test]
fn the_search_keeps_each_change_that_scores_higher_and_tries_each_setting_once() {
    let mut calls = Vec::new();
    let (best, trials) = search(&knobs("candle", 2), &mut |asked| Some(fake(asked, &mut calls)));
    assert_eq!(best, Some(s(&[("threads", "2"), ("weights", "q8_0")])));
    // Defaults, threads 1, then the three other formats (f16 is the default's): 5 trials,
    // each setting once; then the defaults and the choice again, to confirm the change.
    assert_eq!(trials.len(), 7);
    let mut distinct = calls[..5].to_vec();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "the search measured a setting twice: {calls:?}");
    assert_eq!(calls[5..], [calls[0].clone(), best.unwrap()], "then the defaults and the choice again");
}

#[test]
fn one_slow_trial_of_the_defaults_does_not_make_a_change_look_better() {
    // The machine was busy during the defaults' first trial only: every setting really
    // scores the same, so the search finds "better" ones, and measuring again undoes it.
    let mut defaults_seen = 0;
    let (best, trials) = search(&knobs("candle", 2), &mut |asked| {
        let mut ran = s(&[("threads", "2"), ("weights", "dual")]);
        ran.extend(asked.clone());
        let busy = if ran == s(&[("threads", "2"), ("weights", "dual")]) {
            defaults_seen += 1;
            if defaults_seen == 1 { 0.7 } else { 1.0 }
        } else {
            1.0
        };
        Some(Trial::new(ran, false, 10.0 * busy, 100.0 * busy, 20.0 * busy, 1.0))
    });
    assert_eq!(best, Some(s(&[("threads", "2"), ("weights", "dual")])), "{trials:?}");
    assert_eq!(defaults_seen, 2, "the defaults were measured again");
}

#[test]
fn a_spent_budget_stops_the_search_and_keeps_the_best_so_far() {
    let mut calls = Vec::new();
    let mut left = 3;
    let (best, trials) = search(&knobs("candle", 2), &mut |asked| {
        if left == 0 {
            return None;
        }
        left -= 1;
        Some(fake(asked, &mut calls))
    });
    assert_eq!(trials.len(), 3);
    // Defaults, threads 1, dual: dual is the best measured.
    assert_eq!(best, Some(s(&[("threads", "2"), ("weights", "dual")])));
}

#[test]
fn a_failing_default_is_no_profile_and_a_failing_setting_is_never_chosen() {
    let (best, trials) = search(&knobs("candle", 2), &mut |asked| Some(Trial::failed(asked.clone(), false, 0.1, "cannot load".into())));
    assert_eq!((best, trials.len()), (None, 1));
    let mut calls = Vec::new();
    let (best, _) = search(&knobs("candle", 2), &mut |asked| {
        let t = fake(asked, &mut calls);
        if t.settings["weights"] == "q8_0" {
            Some(Trial::failed(t.settings, false, 0.1, "crashed".into()))
        } else {
            Some(t)
        }
    });
    assert_eq!(best, Some(s(&[("threads", "2"), ("weights", "dual")])));
}

#[test]
fn under_load_the_search_starts_from_the_idle_choice_and_tries_threads_first() {
    // Under load the spinning formats collapse and one thread beats two: the best is f16 on
    // one thread, a pair no idle trial measured.
    let under_load = |settings: &Settings| {
        let collapse = if settings["weights"] == "f16" { 1.0 } else { 0.1 };
        let threads = if settings["threads"] == "1" { 1.5 } else { 1.0 };
        let mut t = Trial::new(settings.clone(), true, 10.0 * collapse * threads, 100.0 * threads, 20.0 * collapse * threads, 1.0);
        t.contended = true;
        t
    };
    // The CPU's settings only (a GPU build's first choice, GPU or CPU, is another test's).
    let cpu_knobs = |b: &str| knobs(b, 2).into_iter().filter(|k| !matches!(k.name, "gpu_layers" | "device")).collect::<Vec<_>>();
    let choice = s(&[("threads", "2"), ("weights", "dual")]);
    let defaults = s(&[("threads", "2"), ("weights", "f16")]);
    let mut order = Vec::new();
    let (best, trials) = search_contended(&choice, &cpu_knobs("candle"), &defaults, &mut |settings| {
        order.push(settings.clone());
        Some(under_load(settings))
    });
    assert_eq!(order[0], choice, "the idle choice first");
    assert_eq!(order[1], s(&[("threads", "1"), ("weights", "dual")]), "then its other thread count");
    assert!(order[2..5].iter().all(|o| o["threads"] == "1"), "every format at the thread count that won: {order:?}");
    assert_eq!(best, Some(s(&[("threads", "1"), ("weights", "f16")])));
    assert_eq!(order[5..], [choice, best.clone().unwrap()], "then the idle choice and the winner again, to confirm it");
    assert_eq!(trials.len(), 7, "the choice, 1 thread, q8_0, f16, quantized at 1 thread, two confirmations: {order:?}");

    // A knob whose list leaves out its default (flash attention's `auto`) tries it too.
    let llama = cpu_knobs("llama");
    let choice = s(&[("threads", "2"), ("flash_attn", "on"), ("kv", "per-sequence"), ("ubatch", "512")]);
    let defaults = s(&[("threads", "2"), ("flash_attn", "auto"), ("kv", "per-sequence"), ("ubatch", "512")]);
    let mut asked = Vec::new();
    search_contended(&choice, &llama, &defaults, &mut |settings| {
        asked.push(settings["flash_attn"].clone());
        Some(Trial::new(settings.clone(), true, 10.0, 100.0, 20.0, 1.0))
    });
    assert!(asked.contains(&"auto".to_string()) && asked.contains(&"off".to_string()), "{asked:?}");
}

#[test]
fn the_score_is_the_geometric_mean_and_zero_when_a_figure_is_missing() {
    let t = Trial::new(Settings::new(), false, 10.0, 1000.0, 100.0, 1.0);
    assert!((t.score - 100.0).abs() < 1e-9, "{}", t.score);
    assert_eq!(Trial::new(Settings::new(), false, 0.0, 1000.0, 100.0, 1.0).score, 0.0);
    assert_eq!(Trial::new(Settings::new(), false, f64::NAN, 1000.0, 100.0, 1.0).score, 0.0);
}

fn profile() -> Profile {
    let b = BackendProfile {
        idle: s(&[("threads", "2"), ("weights", "dual")]),
        contended: Some(s(&[("threads", "1"), ("weights", "f16")])),
        trials: vec![Trial::new(s(&[("threads", "2"), ("weights", "dual")]), false, 38.0, 480.0, 63.0, 9.0)],
        notes: vec![],
        fidelity: BTreeMap::new(),
    };
    Profile {
        schema: PROFILE_SCHEMA,
        machine: "cpu | 2 logical cores".into(),
        model: "m.gguf (10 bytes)".into(),
        measured_unix_ms: 1_764_700_000_000,
        seconds: 120.0,
        budget_s: 300.0,
        workload: "w".into(),
        competing_load: "c".into(),
        backends: [("candle".to_string(), b)].into(),
    }
}

#[test]
fn tuning_some_backends_keeps_the_others_choices() {
    let dir = tempfile::tempdir().unwrap();
    let first = profile();
    let here = Located { path: dir.path().join("p.json"), machine: first.machine.clone(), model: first.model.clone() };
    here.save(first.clone()).unwrap();
    // Then llama.cpp alone, later: candle's choice stays, said to come from the first tuning.
    let llama = BackendProfile { idle: s(&[("threads", "1")]), contended: None, trials: vec![], notes: vec![], fidelity: BTreeMap::new() };
    let later = Profile { measured_unix_ms: first.measured_unix_ms + 3_600_000, backends: [("llama".to_string(), llama.clone())].into(), ..first.clone() };
    let saved = here.save(later).unwrap();
    assert_eq!(here.read().unwrap(), saved);
    assert_eq!(saved.backends["llama"], llama);
    let candle = &saved.backends["candle"];
    assert_eq!((&candle.idle, &candle.trials), (&first.backends["candle"].idle, &first.backends["candle"].trials));
    assert_eq!(candle.notes, ["kept from the tuning of 2025-12-02 18:26 UTC"]);
    // Tuned again without candle: kept once more, noted once.
    let again = here.save(Profile { backends: [("llama".to_string(), llama)].into(), ..first.clone() }).unwrap();
    assert_eq!(again.backends["candle"].notes.len(), 1);
    // A profile for another model is not merged into this one.
    let other = Located { path: dir.path().join("q.json"), ..here.clone() };
    std::fs::copy(&here.path, &other.path).unwrap();
    let foreign = Located { model: "other.gguf (1 bytes)".into(), ..other };
    let fresh = Profile { model: foreign.model.clone(), backends: BTreeMap::new(), ..first.clone() };
    assert!(foreign.save(fresh).unwrap().backends.is_empty());
}

#[test]
fn a_profile_is_read_back_as_saved_and_a_damaged_or_foreign_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile_path(dir.path(), "cpu | 2 logical cores", "m.gguf (10 bytes)");
    assert_eq!(read_profile(&path, "cpu | 2 logical cores", "m.gguf (10 bytes)"), Err(ProfileError::Missing));
    save_profile(&path, &profile()).unwrap();
    assert_eq!(read_profile(&path, "cpu | 2 logical cores", "m.gguf (10 bytes)").unwrap(), profile());

    let refused = |why: &str| match read_profile(&path, "cpu | 2 logical cores", "m.gguf (10 bytes)") {
        Err(ProfileError::Damaged { why: w, .. }) => assert!(w.contains(why), "{w}"),
        other => panic!("expected a damaged profile, got {other:?}"),
    };
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    refused("EOF");
    std::fs::write(&path, text.replace("\"schema\": 1", "\"schema\": 99")).unwrap();
    refused("schema 99");
    std::fs::write(&path, text.replace("\"weights\": \"dual\"", "\"wieghts\": \"dual\"")).unwrap();
    refused("unknown setting `wieghts`");
    std::fs::write(&path, &text).unwrap();
    match read_profile(&path, "another machine", "m.gguf (10 bytes)") {
        Err(ProfileError::Damaged { why, .. }) => assert!(why.contains("it is for cpu | 2 logical cores"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Each machine and model has its own file.
    assert_ne!(path, profile_path(dir.path(), "cpu | 2 logical cores", "other.gguf (10 bytes)"));
}

#[test]
fn workers_take_the_profile_unless_the_environment_or_lx_untuned_says_otherwise() {
    let none = |_: &str| None;
    let p = Ok(profile());
    let measure = applied("candle", &p, Use::Measure, &none);
    assert_eq!(measure.settings, s(&[("weights", "dual")]));
    assert_eq!(measure.threads, Some(2));
    assert!(measure.from.contains("tuned profile of 2025-12-02") && measure.from.contains("idle choice"), "{}", measure.from);

    let live = applied("candle", &p, Use::Interactive, &none);
    assert_eq!((live.settings["weights"].as_str(), live.threads), ("f16", Some(1)));
    assert!(live.from.contains("competing load"), "{}", live.from);

    // The environment is read here, once, and travels in the load: over the profile's choice.
    let user = |v: &str| (v == "LX_CANDLE_WEIGHTS").then(|| "q8_0".to_string());
    let a = applied("candle", &p, Use::Measure, &user);
    assert!(a.settings == s(&[("weights", "q8_0")]) && a.threads == Some(2), "{a:?}");
    assert!(a.from.ends_with("LX_CANDLE_WEIGHTS from the environment"), "{}", a.from);

    let untuned = |v: &str| (v == UNTUNED_ENV || v == "LX_CANDLE_WEIGHTS").then(|| "1".to_string());
    let a = applied("candle", &p, Use::Measure, &untuned);
    assert_eq!((a.settings, a.threads), (s(&[("weights", "1")]), None), "the user's variables stand without the profile");
    assert!(a.from.contains("LX_UNTUNED"), "{}", a.from);
    let a = applied("candle", &p, Use::Untuned, &none);
    assert!(a.settings.is_empty() && a.threads.is_none() && a.from.contains("--untuned"), "{a:?}");

    let a = applied("llama", &p, Use::Measure, &none);
    assert!(a.settings.is_empty() && a.from.contains("has no llama"), "{a:?}");
    let a = applied("mlx", &p, Use::Interactive, &none);
    assert!(a.settings.is_empty() && a.threads.is_none() && a.from.contains("nothing to tune: MLX takes no thread count"), "{a:?}");
    let mlx = |v: &str| (v == "LX_MLX_WEIGHTS").then(|| "q4".to_string());
    assert_eq!(applied("mlx", &p, Use::Measure, &mlx).settings, s(&[("weights", "q4")]), "a setting that is no knob is read too");
    let a = applied("candle", &Err(ProfileError::Missing), Use::Measure, &none);
    assert!(a.from.contains("not tuned (lx tune)"), "{}", a.from);
    let damaged = Err(ProfileError::Damaged { path: "/p.json".into(), why: "EOF".into() });
    let a = applied("candle", &damaged, Use::Measure, &none);
    assert!(a.settings.is_empty() && a.from.contains("damaged (EOF)") && a.from.contains("measures again"), "{}", a.from);
}

/// The load's own settings come first, then the applied ones; a layer count travels in its
/// own field, the run's before the profile's or the environment's.
#[test]
fn applied_settings_go_onto_the_load_under_its_own() {
    let applied = Applied { settings: s(&[("weights", "dual"), ("gpu_layers", "12")]), threads: Some(2), from: String::new() };
    let mut spec = lx_engine::backend::LoadSpec::default();
    let on = applied.onto(&spec).unwrap();
    assert_eq!((on.settings, on.gpu_layers, on.threads), (s(&[("weights", "dual")]), Some(12), 2));
    spec.settings = s(&[("weights", "f16")]);
    (spec.gpu_layers, spec.threads) = (Some(0), 1);
    let on = applied.onto(&spec).unwrap();
    assert_eq!((on.settings, on.gpu_layers, on.threads), (s(&[("weights", "f16")]), Some(0), 1));
    let all = Applied { settings: s(&[("gpu_layers", "all")]), ..Applied::default() };
    assert_eq!(all.onto(&lx_engine::backend::LoadSpec::default()).unwrap().gpu_layers, None);
    let bad = Applied { settings: s(&[("gpu_layers", "most")]), ..Applied::default() };
    assert!(bad.onto(&lx_engine::backend::LoadSpec::default()).unwrap_err().contains("gpu_layers \"most\": a number of layers, or all"));
}

#[test]
fn budgets_read_as_people_write_them() {
    assert_eq!(parse_budget("300"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_budget("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_budget("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_budget("1m30s"), Ok(Duration::from_secs(90)));
    for bad in ["", "0", "-5", "5 minutes", "m", "5x"] {
        assert!(parse_budget(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_backend_tunes_threads_and_its_own_settings_by_their_variables() {
    assert_eq!(thread_values(2), ["2", "1"]);
    assert_eq!(thread_values(16), ["16", "8"]);
    assert_eq!(thread_values(1), ["1"]);
    let names = |b: &str| knobs(b, 4).iter().map(|k| (k.name, k.env)).collect::<Vec<_>>();
    // A GPU build first chooses between the GPU and the CPU; a CPU build has no such choice.
    let gpu = |b: &str, knob| match b {
        "llama" => lx_backend_llamacpp::GPU_BUILD.map(|_| knob),
        _ => lx_backend_candle::gpu_build().map(|_| knob),
    };
    let with_gpu = |b: &str, knob, rest: &[(&'static str, Option<&'static str>)]| gpu(b, knob).into_iter().chain(rest.iter().copied()).collect::<Vec<_>>();
    assert_eq!(names("candle"), with_gpu("candle", ("device", Some("LX_CANDLE_DEVICE")), &[("threads", None), ("weights", Some("LX_CANDLE_WEIGHTS"))]));
    assert!(names("mlx").is_empty(), "MLX takes no thread count, and q4 is a coarser model than the file");
    assert!(nothing_to_tune("mlx").is_some_and(|why| why.contains("q4")) && nothing_to_tune("candle").is_none());
    assert_eq!(
        names("llama"),
        with_gpu(
            "llama",
            ("gpu_layers", Some("LX_LLAMA_GPU_LAYERS")),
            &[("threads", None), ("flash_attn", Some("LX_LLAMA_FLASH_ATTN")), ("kv", Some("LX_LLAMA_KV")), ("ubatch", Some("LX_LLAMA_UBATCH"))]
        )
    );
    // The GPU's one other value is the CPU: 0 layers offloaded, or candle's CPU device.
    for (b, value) in [("llama", "0"), ("candle", "cpu")] {
        if let Some(k) = knobs(b, 4).into_iter().find(|k| matches!(k.name, "gpu_layers" | "device")) {
            assert_eq!(k.values, [value], "{b}");
        }
    }
}

#[test]
fn a_competing_load_runs_until_dropped() {
    let load = CompetingLoad::start(1);
    let t0 = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    drop(load);
    assert!(t0.elapsed() < Duration::from_secs(5), "the load did not stop");
    assert_eq!(CompetingLoad::threads_for(2), 1);
    assert_eq!(CompetingLoad::threads_for(8), 4);
}

#[test]
fn a_change_within_the_noise_does_not_replace_the_default() {
    // q8_0 only 3% better than the default f16: the default stays; 10% better: it is taken.
    for (gain, chosen) in [(1.03, "f16"), (1.10, "q8_0")] {
        let (best, _) = search(&knobs("candle", 1), &mut |asked| {
            let mut ran = s(&[("threads", "1"), ("weights", "f16")]);
            ran.extend(asked.clone());
            let f = if ran["weights"] == "q8_0" { gain } else { 1.0 };
            Some(Trial::new(ran, false, 10.0 * f, 100.0 * f, 20.0 * f, 1.0))
        });
        assert_eq!(best.unwrap()["weights"], chosen, "gain {gain}");
    }
}

#[test]
fn a_trial_s_length_is_expected_from_the_same_device_only() {
    use super::measure::duration_key;
    // The defaults' trial is asked with nothing and reports where it ran; a later trial asks.
    let on_gpu = duration_key("llama", &s(&[("gpu_layers", "all"), ("threads", "2")]));
    let on_cpu = duration_key("llama", &s(&[("gpu_layers", "0"), ("threads", "2")]));
    assert_ne!(on_gpu, on_cpu);
    assert_eq!(on_cpu, duration_key("llama", &s(&[("gpu_layers", "0"), ("threads", "1")])), "threads do not change the device");
    assert_eq!(duration_key("candle", &s(&[("device", "cpu")])), "candle on cpu");
    assert_eq!(duration_key("candle", &s(&[("weights", "dual")])), "candle", "a CPU build has one device");
}

#[test]
fn a_runs_recorded_settings_start_a_worker_the_same_way() {
    let recorded: std::collections::BTreeMap<String, String> = [("weights", "f16"), ("threads", "2"), ("unknown", "x")].map(|(k, v)| (k.to_string(), v.to_string())).into();
    assert_eq!(own_settings("candle", &recorded), s(&[("weights", "f16")]));
    let llama = s(&[("kv", "unified"), ("ubatch", "256"), ("gpu_layers", "all"), ("flash_attn", "auto")]);
    assert_eq!(own_settings("llama", &llama), s(&[("kv", "unified"), ("ubatch", "256"), ("flash_attn", "auto")]));
}
