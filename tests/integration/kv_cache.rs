//! A quantized KV cache: llama.cpp's cache types through `--kv-type`, recorded with the run,
//! with flash attention turned on for a quantized V cache; refused, with the reason, where a
//! backend's cache cannot take them or flash attention was turned off.

use std::path::Path;

use integration_tests::{lx, lx_with, model_path};

fn sweep<'a>(model: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["sweep", "--model", model, "--prompt-tokens", "32", "--concurrency", "1", "--max-tokens", "8", "--requests", "2", "--warmup", "1", "--threads", "2", "--no-ceilings", "--untuned", "--out", out];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_quantized_cache_is_measured_and_recorded() {
    let _lock = integration_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let model = model_path();
    let model = model.to_str().unwrap();
    let out = dir.path().join("q8.json");
    let out = out.to_str().unwrap();
    lx(&sweep(model, out, &["--backend", "llama", "--kv-type", "q8_0", "--kv-type-v", "q4_0"])).ok();
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let backend = &run["backends"][0];
    assert!(backend["version"].as_str().unwrap().ends_with(", K q8_0, V q4_0"), "{backend}");
    let settings = &backend["settings"];
    assert_eq!((settings["kv_type_k"].as_str(), settings["kv_type_v"].as_str()), (Some("q8_0"), Some("q4_0")), "{settings}");
    assert_eq!(settings["flash_attn"].as_str(), Some("on"), "a quantized V cache needs flash attention: {settings}");
    assert_eq!(run["points"][0]["requests"].as_u64(), Some(2));
    // Without the options, nothing of them is recorded.
    let plain = dir.path().join("f16.json");
    lx(&sweep(model, plain.to_str().unwrap(), &["--backend", "llama"])).ok();
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    assert!(run["backends"][0]["settings"].get("kv_type_k").is_none() && !run["backends"][0]["version"].as_str().unwrap().contains(", K "), "{}", run["backends"][0]);
}

#[test]
fn a_cache_type_a_backend_cannot_take_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_path();
    let model = model.to_str().unwrap();
    let out = dir.path().join("x.json");
    let out = out.to_str().unwrap();
    lx(&sweep(model, out, &["--backend", "llama,candle", "--kv-type", "q8_0"])).fails_with("KV cache type q8_0 is llama.cpp's, and candle keeps its KV cache in f32");
    lx(&["generate", "--backend", "mlx", "--prompt", "Hi", "--kv-type-k", "q4_0"]).fails_with("MLX keeps its KV cache in f32");
    lx(&sweep(model, out, &["--kv-type", "q3"])).fails_with("unknown KV cache type 'q3' (expected f16, q8_0 or q4_0)");
    // llama.cpp keeps a quantized V cache only inside flash attention.
    let off = lx_with(&sweep(model, out, &["--backend", "llama", "--kv-type-v", "q8_0"]), &[("LX_LLAMA_FLASH_ATTN", Path::new("off"))]);
    assert!(off.stdout().contains("a q8_0 V cache needs flash attention, and flash_attn is off") || off.stderr().contains("a q8_0 V cache needs flash attention, and flash_attn is off"), "{}", off.dump());
    assert_eq!(off.code(), Some(2), "{}", off.dump());
}
