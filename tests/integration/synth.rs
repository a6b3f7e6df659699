//! Shape-only models against the real file they mimic: the default model's synthetic twin
//! (and the Gemma 3 270M preset) have its tensors, and the twin times like it on llama.cpp,
//! measured in one alternating run so the machine's drift falls on both alike.

use std::time::Instant;

use integration_tests::{heavy, lx_bin, model_path, Run};
use lx_backend_llamacpp::LlamaCppBackend;
use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs, TokenId};
use lx_engine::gguf::synth::{self, SYNTHETIC_KEY};
use lx_engine::gguf::{GgmlType, GgufFile, ModelFacts};

type Tensors = Vec<(String, Vec<u64>, Option<GgmlType>)>;

fn tensors_of(g: &GgufFile) -> Tensors {
    let mut t: Tensors = g.tensors().iter().map(|t| (t.name.clone(), t.dims.clone(), Some(t.ggml_type))).collect();
    t.sort();
    t
}

fn planned(w: &lx_engine::gguf::GgufWriter) -> Tensors {
    let mut t: Tensors = w.planned_tensors().map(|(n, d, ty)| (n.to_string(), d.to_vec(), ty)).collect();
    t.sort();
    t
}

#[test]
fn the_twin_and_the_gemma3_270m_preset_have_the_default_models_tensors() {
    let real = GgufFile::open(model_path()).unwrap();
    let want = tensors_of(&real);
    assert_eq!(planned(&synth::twin_of(&real).unwrap()), want, "the twin copies every tensor's name, shape and type");
    // The preset is written from the published shape and llama.cpp's Q4_K_M rules alone, never
    // from the file: it must come out the same.
    let (preset, quant) = synth::preset("gemma3-270m-q4_k_m").unwrap();
    let got = planned(&preset.shape.writer(quant, preset.name));
    let differ: Vec<String> = want.iter().zip(&got).filter(|(w, g)| w != g).map(|(w, g)| format!("{w:?} vs {g:?}")).collect();
    assert_eq!((got.len(), differ.len()), (want.len(), 0), "tensors that differ from the real file:\n{}", differ.join("\n"));
}

/// One prefill of `prompt` and `decode` single-token steps on a fresh cache: (prefill tok/s,
/// decode tok/s).
fn time_once(backend: &mut LlamaCppBackend, prompt: &[TokenId], decode: usize) -> (f64, f64) {
    backend.clear(0);
    let started = Instant::now();
    let out = backend.step(&Batch { chunks: vec![Chunk { slot: 0, pos: 0, tokens: prompt.to_vec(), outputs: Outputs::Last }], top_logprobs: 0 }).unwrap();
    let prefill = prompt.len() as f64 / started.elapsed().as_secs_f64();
    let mut next = out[0].choices[0].token;
    let started = Instant::now();
    for i in 0..decode {
        let chunk = Chunk { slot: 0, pos: (prompt.len() + i) as u32, tokens: vec![next], outputs: Outputs::Last };
        next = backend.step(&Batch { chunks: vec![chunk], top_logprobs: 0 }).unwrap()[0].choices[0].token;
    }
    (prefill, decode as f64 / started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn a_synthetic_twin_times_like_the_real_model_on_llama_cpp() {
    const ROUNDS: usize = 7;
    const PROMPT: usize = 128;
    const DECODE: usize = 32;
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let twin_path = dir.path().join("twin.gguf");
    let real_path = model_path();
    synth::twin_of(&GgufFile::open(&real_path).unwrap()).unwrap().write(&twin_path).unwrap();
    let facts = ModelFacts::read(&twin_path).unwrap();
    assert!(facts.synthetic.as_deref().is_some_and(|s| s.starts_with("twin of")), "{:?}", facts.synthetic);

    let load = |path: &std::path::Path| {
        let spec = LoadSpec { model_path: path.to_path_buf(), threads: 0, slots: 1, ctx_per_slot: 512, max_batch_tokens: 512, gpu_layers: None };
        LlamaCppBackend::load(&spec).unwrap_or_else(|e| panic!("llama.cpp loads {}: {e}", path.display()))
    };
    let (mut real, mut twin) = (load(&real_path), load(&twin_path));
    // The same token ids for both (the vocabularies have the same size); their values do not
    // matter to the timing.
    let prompt: Vec<TokenId> = (0..PROMPT as u32).map(|i| 2 + (i * 7919) % 200_000).collect();
    time_once(&mut real, &prompt, 4);
    time_once(&mut twin, &prompt, 4);
    let (mut prefill, mut decode) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate who goes first, so neither always runs on a warmer or cooler machine.
        let (r, t) = if round % 2 == 0 {
            let r = time_once(&mut real, &prompt, DECODE);
            (r, time_once(&mut twin, &prompt, DECODE))
        } else {
            let t = time_once(&mut twin, &prompt, DECODE);
            (time_once(&mut real, &prompt, DECODE), t)
        };
        eprintln!("round {round}: prefill real {:.0} twin {:.0} tok/s, decode real {:.1} twin {:.1} tok/s", r.0, t.0, r.1, t.1);
        prefill.push(t.0 / r.0);
        decode.push(t.1 / r.1);
    }
    let (p, d) = (median(prefill), median(decode));
    eprintln!("synthetic twin / real file, median of {ROUNDS} rounds: prefill {p:.3}, decode {d:.3}");
    assert!((p - 1.0).abs() <= 0.05 && (d - 1.0).abs() <= 0.05, "the twin must time within 5% of the real file: prefill {p:.3}, decode {d:.3}");
}

#[test]
fn lx_models_synth_writes_presets_and_twins_and_results_say_synthetic() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = std::process::Command::new(lx_bin()).args(args).env("LX_MODEL_DIR", dir.path()).output().unwrap();
        Run { args: args.iter().map(|a| a.to_string()).collect(), output }
    };
    let list = run(&["models", "synth", "--list"]).ok();
    for name in ["gemma3-270m-q4_k_m", "llama3.1-8b-q8_0", "qwen2.5-7b-q4_k_m", "smollm2-135m-q8_0"] {
        assert!(list.stdout().lines().any(|l| l.starts_with(&format!("| {name} |")) && l.contains(&format!("synth:{name}"))), "{}", list.dump());
    }
    // A twin of a file, written where asked.
    let out = dir.path().join("twin.gguf");
    let real = model_path();
    let made = run(&["models", "synth", "--like", real.to_str().unwrap(), "--out", out.to_str().unwrap()]).ok();
    assert_eq!(made.stdout().trim(), out.to_str().unwrap(), "{}", made.dump());
    assert!(made.stderr().contains("synthetic: timings only, text is noise"), "{}", made.dump());
    assert!(GgufFile::open(&out).unwrap().metadata(SYNTHETIC_KEY).is_some());
    // synth:NAME anywhere a model is named: made on first use into the model directory, and
    // every result made with it says what it is.
    let sweep = run(&["sweep", "--model", "synth:smollm2-135m-q8_0", "--prompt-tokens", "16", "--max-tokens", "4", "--requests", "1", "--concurrency", "1", "--policy", "serial", "--warmup", "0", "--out", dir.path().join("run.json").to_str().unwrap()]).ok();
    assert!(dir.path().join("synthetic").join("smollm2-135m-q8_0.gguf").is_file(), "{}", sweep.dump());
    assert!(sweep.stdout().contains("model: synthetic: timings only, text is noise (smollm2-135m-q8_0)"), "{}", sweep.dump());
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(saved["model"]["synthetic"], "smollm2-135m-q8_0");
    let bad = run(&["models", "synth", "gpt-5"]);
    assert_eq!(bad.code(), Some(1), "{}", bad.dump());
    assert!(bad.stderr().contains("no synthetic model is called 'gpt-5'"), "{}", bad.dump());
}
