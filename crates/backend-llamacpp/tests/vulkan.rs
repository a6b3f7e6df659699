//! llama.cpp's Vulkan offload path, on whatever Vulkan device the machine has: on a machine
//! with no GPU, Mesa's lavapipe ("llvmpipe"), a software Vulkan device. What it proves is the
//! offload path (device discovery, layers placed on the device, the device named in results),
//! not speed. `scripts/vulkan-test` runs it (with the environment of `scripts/vulkan-env`),
//! then `lx` on Vulkan end to end.
//!
//! Needs the default model (`lx models fetch default`, or `LX_MODEL`); fails, never skips,
//! without it.
#![cfg(feature = "vulkan")]

use std::path::PathBuf;

use lx_backend_llamacpp::LlamaCppBackend;
use lx_engine::backend::{Backend, Batch, Choice, Chunk, LoadSpec, Outputs, TokenId};
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};

const PROMPT: &str = "Once upon a time, in a small village,";
/// lavapipe makes about one token a second here: enough to pass a near-tie or two.
const NEW_TOKENS: usize = 16;
/// Set in the child process of `no_vulkan_driver_falls_back_to_cpu`.
const CHILD: &str = "LX_VULKAN_TEST_NO_DRIVER";

fn model_path() -> PathBuf {
    let path = lx_models::default_model_path();
    assert!(
        path.is_file(),
        "the Vulkan tests need the default model at {} (run `lx models fetch default`, or set LX_MODEL)",
        path.display()
    );
    path
}

/// Layers llama.cpp places: the model's blocks and its output layer.
fn layer_count() -> u64 {
    let g = lx_format::gguf::GgufFile::open(model_path()).expect("the model's header reads");
    let arch = g.architecture().expect("an architecture").to_string();
    g.get_u64(&format!("{arch}.block_count")).expect("a block count") + 1
}

fn load(gpu_layers: Option<u32>) -> LlamaCppBackend {
    let spec = LoadSpec {
        model_path: model_path(),
        threads: 2,
        slots: 1,
        ctx_per_slot: 256,
        max_batch_tokens: 128,
        gpu_layers,
        ..Default::default()
    };
    LlamaCppBackend::load(&spec).unwrap_or_else(|e| panic!("load with gpu_layers {gpu_layers:?}: {e}"))
}

/// The prompt's token ids, with BOS, as llama.cpp tokenizes it (vocabulary only, no weights).
fn prompt_tokens() -> Vec<TokenId> {
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::model::LlamaModel;
    let params = LlamaModelParams::default().with_vocab_only(true).with_n_gpu_layers(0);
    let model = LlamaModel::load_from_file(lx_backend_llamacpp::runtime(), model_path(), &params).expect("llama.cpp loads the vocabulary");
    model.vocab().tokenize(PROMPT.as_bytes(), true, false).iter().map(|t| t.0 as TokenId).collect()
}

fn step(backend: &mut LlamaCppBackend, pos: usize, tokens: Vec<TokenId>, outputs: Outputs) -> Vec<Choice> {
    let batch = Batch { chunks: vec![Chunk { slot: 0, pos: pos as u32, tokens, outputs, score: Vec::new() }], top_logprobs: ALTERNATIVES };
    let mut out = backend.step(&batch).unwrap_or_else(|e| panic!("{}: step: {e}", backend.info().device));
    out.remove(0).choices
}

/// Greedy continuation of `prompt`: each new token with the top-2 alternatives where it was chosen.
fn greedy(backend: &mut LlamaCppBackend, prompt: &[TokenId], n: usize) -> Vec<Choice> {
    backend.clear(0);
    let mut choices = step(backend, 0, prompt.to_vec(), Outputs::Last);
    while choices.len() < n {
        let last = choices.last().unwrap().token;
        let pos = prompt.len() + choices.len() - 1;
        choices.extend(step(backend, pos, vec![last], Outputs::Last));
    }
    choices
}

#[test]
fn lists_a_vulkan_device() {
    let devices = lx_backend_llamacpp::devices();
    eprintln!("devices: {devices:?}");
    assert!(
        devices.iter().any(|d| d.starts_with("Vulkan")),
        "no Vulkan device (lavapipe shows as \"Vulkan: llvmpipe ...\"); is a Vulkan driver installed \
         and GGML_VK_VISIBLE_DEVICES=0 set (source scripts/vulkan-env)? devices: {devices:?}"
    );
}

/// Every layer on the Vulkan device against the CPU (gpu_layers 0), greedy, in one process:
/// the same tokens up to a near-tie (the parity rule), and where the streams part, every
/// Vulkan token, fed back through the CPU context (teacher forcing), is the CPU's argmax or
/// a near-tie of its choice.
#[test]
fn offloaded_greedy_matches_cpu_and_names_the_device() {
    let prompt = prompt_tokens();
    let clock = std::time::Instant::now();
    let mut cpu = load(Some(0));
    let mut vk = load(None);
    eprintln!("both loaded in {:.1?}", clock.elapsed());
    eprintln!("gpu_layers None: {}\ngpu_layers 0: {}", vk.info().device, cpu.info().device);
    // llama.cpp's own account of the placement: every block and the output layer.
    let layers = layer_count();
    assert!(vk.info().device.starts_with("Vulkan0 ") && vk.info().device.ends_with(&format!(": all {layers} layers")), "gpu_layers None should put every layer on Vulkan0: {}", vk.info().device);
    assert_eq!(vk.info().cpu_fallback, None);
    assert_eq!(cpu.info().device, format!("CPU (2 threads): all {layers} layers"));
    assert_eq!(cpu.info().cpu_fallback.as_deref(), Some(format!("llama.cpp ran on the CPU: 0 of {layers} layers offloaded to Vulkan0 (--gpu-layers 0)").as_str()));
    // A GPU build reports its layer count as a setting (what `lx tune` measures).
    assert_eq!(vk.info().settings.get("gpu_layers").map(String::as_str), Some("all"));
    assert_eq!(cpu.info().settings.get("gpu_layers").map(String::as_str), Some("0"));

    let clock = std::time::Instant::now();
    let want = greedy(&mut cpu, &prompt, NEW_TOKENS);
    let cpu_time = clock.elapsed();
    let got = greedy(&mut vk, &prompt, NEW_TOKENS);
    eprintln!("{NEW_TOKENS} greedy tokens: CPU {cpu_time:.1?}, Vulkan {:.1?}", clock.elapsed() - cpu_time);
    let ids = |c: &[Choice]| c.iter().map(|c| c.token).collect::<Vec<_>>();
    let (want_ids, got_ids) = (ids(&want), ids(&got));
    let want_top: Vec<_> = want.iter().map(|c| c.top.clone()).collect();
    eprintln!("cpu:    {want_ids:?}\nvulkan: {got_ids:?}");
    let agreement = compare(&want_ids, &want_top, &got_ids, NEAR_TIE_NATS).unwrap_or_else(|e| panic!("Vulkan vs CPU: {e}"));
    eprintln!("{} of {NEW_TOKENS} tokens identical; parted at a near-tie: {:?}", agreement.agreed, agreement.parted_at_tie);

    // Teacher forcing: the Vulkan stream through the CPU context, in one pass of over 32
    // tokens, where ggml would hand a GPU build's matrix products to the GPU unless the
    // adapter turns op offload off for --gpu-layers 0: the time says which happened.
    let clock = std::time::Instant::now();
    cpu.clear(0);
    let forced_in: Vec<TokenId> = prompt.iter().copied().chain(got_ids[..NEW_TOKENS - 1].iter().copied()).collect();
    let forced = step(&mut cpu, 0, forced_in, Outputs::All);
    let forced = &forced[prompt.len() - 1..];
    assert_eq!(forced.len(), NEW_TOKENS);
    eprintln!("teacher forcing on the CPU: {:.1?}", clock.elapsed());
    for (i, (f, &t)) in forced.iter().zip(&got_ids).enumerate() {
        compare(&[f.token], std::slice::from_ref(&f.top), &[t], NEAR_TIE_NATS)
            .unwrap_or_else(|e| panic!("Vulkan token {i} is not the CPU's choice, nor a near-tie of it: {e}"));
    }
}

/// With no Vulkan driver visible, a Vulkan build still loads and runs, on the CPU. ggml reads
/// the driver list when llama.cpp is initialised, once per process, so this re-runs itself in a
/// child process with the loader pointed at no driver.
#[test]
fn no_vulkan_driver_falls_back_to_cpu() {
    if std::env::var_os(CHILD).is_some() {
        let devices = lx_backend_llamacpp::devices();
        eprintln!("devices with no driver: {devices:?}");
        assert!(!devices.iter().any(|d| d.starts_with("Vulkan")), "a Vulkan device with no driver: {devices:?}");
        let mut backend = load(None);
        eprintln!("gpu_layers None with no driver: {}", backend.info().device);
        assert!(backend.info().device.starts_with("CPU"), "{}", backend.info().device);
        let layers = layer_count();
        assert_eq!(
            backend.info().cpu_fallback.as_deref(),
            Some(format!("llama.cpp ran on the CPU: 0 of {layers} layers offloaded (this build has Vulkan but llama.cpp found no Vulkan device)").as_str())
        );
        let choices = greedy(&mut backend, &prompt_tokens(), 4);
        assert_eq!(choices.len(), 4);
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args(["--exact", "no_vulkan_driver_falls_back_to_cpu", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        // The loader's driver lists: the older and the newer name.
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .expect("re-run the test binary");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{text}");
    assert!(out.status.success(), "the Vulkan build with no driver failed ({}):\n{text}", out.status);
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}
