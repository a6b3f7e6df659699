//! The candle backend through everything the engine offers: the scheduler, the worker
//! process, `lx sweep` next to llama.cpp, and bad input. (Its model code is tested on
//! tiny fixtures and against llama.cpp in crates/backend-candle/tests.)

use integration_tests::{heavy, lx, model_path};
use lx_backend_candle::CandleBackend;
use serde_json::Value;

use crate::bad_input::alien_gguf;
use crate::batching::check_continuous_matches_serial;

#[test]
fn candle_continuous_batching_gives_serial_tokens_up_to_a_near_tie() {
    check_continuous_matches_serial(|spec| Box::new(CandleBackend::load(spec).expect("candle loads the default model")));
}

#[test]
fn one_sweep_measures_llama_and_candle_side_by_side() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let r = lx(&[
        "sweep", "--backend", "llama,candle", "--model", model.to_str().unwrap(), "--prompt-tokens", "32", "--concurrency", "1,2",
        "--max-tokens", "8", "--requests", "2", "--warmup", "1", "--threads", "2", "--out", out.to_str().unwrap(),
    ])
    .ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let backends: Vec<&str> = run["backends"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(backends, ["llama", "candle"], "{}", r.dump());
    let candle = &run["backends"][1];
    assert!(candle["device"].as_str().unwrap().starts_with("CPU"), "{candle}");
    assert_eq!(candle["threads"], 2, "the engine's thread setting must reach candle: {candle}");
    for backend in ["llama", "candle"] {
        let points: Vec<&Value> = run["points"].as_array().unwrap().iter().filter(|p| p["backend"] == backend).collect();
        assert_eq!(points.len(), 2, "{backend}: {}", r.dump());
        for p in points {
            assert_eq!(p["errors"], 0, "{p}");
            assert!(p["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
            assert!(p["decode_tps"]["p50"].as_f64().unwrap() > 0.0);
            for s in p["samples"].as_array().unwrap() {
                assert_eq!(s["token_ms"].as_array().unwrap().len(), 8);
            }
        }
    }
    // Both backends greedy on the same ids: the first generated token agrees (it is not a
    // near-tie for this prompt; candle's parity with llama.cpp is tested token by token in
    // crates/backend-candle/tests).
    let first_token = |backend: &str| run["points"].as_array().unwrap().iter().find(|p| p["backend"] == backend).unwrap()["samples"][0]["tokens"][0].clone();
    if !first_token("llama").is_null() {
        assert_eq!(first_token("llama"), first_token("candle"));
    }
}

#[test]
fn candle_names_what_it_supports_for_an_unknown_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alien.gguf");
    alien_gguf(&path);
    let r = lx(&["sweep", "--backend", "candle", "--model", path.to_str().unwrap(), "--prompt-tokens", "4", "--concurrency", "1", "--max-tokens", "2", "--requests", "1"]);
    let r = r.fails_with("nosucharch");
    assert!(r.stderr().contains("gemma3"), "the error should name the supported architectures\n{}", r.dump());
}
