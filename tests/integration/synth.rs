//! Shape-only models against the real file they mimic: the default model's synthetic twin
//! (and the Gemma 3 270M preset) have its tensors, and the twin times like it on llama.cpp,
//! measured in one alternating run so the machine's drift falls on both alike.

use std::time::Instant;

use integration_tests::{heavy, lx_bin, model_path, Run};
use lx_backend_llamacpp::LlamaCppBackend;
use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs, TokenId};
use lx_format::gguf::synth::{self, SYNTHETIC_KEY};
use lx_format::gguf::{GgmlType, GgufFile, ModelFacts};
use lx_client::stats::median;

type Tensors = Vec<(String, Vec<u64>, Option<GgmlType>)>;

fn tensors_of(g: &GgufFile) -> Tensors {
    let mut t: Tensors = g.tensors().iter().map(|t| (t.name.clone(), t.dims.clone(), Some(t.ggml_type))).collect();
    t.sort();
    t
}

fn planned(w: &lx_format::gguf::GgufWriter) -> Tensors {
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

/// One forward pass of `tokens` at `pos` in slot 0; its seconds and its greedy token.
fn pass(backend: &mut LlamaCppBackend, pos: usize, tokens: &[TokenId]) -> (f64, TokenId) {
    let started = Instant::now();
    let out = backend.step(&Batch { chunks: vec![Chunk { slot: 0, pos: pos as u32, tokens: tokens.to_vec(), outputs: Outputs::Last, score: Vec::new() }], top_logprobs: 0 }).unwrap();
    (started.elapsed().as_secs_f64(), out[0].choices[0].token)
}

#[test]
fn a_synthetic_twin_times_like_the_real_model_on_llama_cpp() {
    const ROUNDS: usize = 9;
    const PROMPT: usize = 128;
    const DECODE: usize = 32;
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let twin_path = dir.path().join("twin.gguf");
    synth::twin_of(&GgufFile::open(model_path()).unwrap()).unwrap().write(&twin_path).unwrap();
    let facts = ModelFacts::read(&twin_path).unwrap();
    assert!(facts.synthetic.as_deref().is_some_and(|s| s.starts_with("twin of")), "{:?}", facts.synthetic);
    // The real file is copied just as the twin was just written, so that both are read from
    // memory that the system laid out the same way: at the end of a full test run the cached
    // model file decoded 10% slower than the freshly written twin (standalone: within 1%).
    let real_path = dir.path().join("real.gguf");
    std::fs::copy(model_path(), &real_path).unwrap();

    let load = |path: &std::path::Path| {
        let spec = LoadSpec { model_path: path.to_path_buf(), threads: 0, slots: 1, ctx_per_slot: 512, max_batch_tokens: 512, gpu_layers: None, ..Default::default() };
        LlamaCppBackend::load(&spec).unwrap_or_else(|e| panic!("llama.cpp loads {}: {e}", path.display()))
    };
    let mut models = [load(&real_path), load(&twin_path)];
    // The same token ids for both (the vocabularies have the same size); their values do not
    // matter to the timing.
    let prompt: Vec<TokenId> = (0..PROMPT as u32).map(|i| 2 + (i * 7919) % 200_000).collect();
    let (mut prefill, mut decode) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        // Pass by pass, the two take turns (who goes first alternates), so whatever else the
        // machine is doing falls on both alike.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut secs = [[0.0; 2]; 2];
        let mut next = [0; 2];
        for &m in &order {
            models[m].clear(0);
            let (s, t) = pass(&mut models[m], 0, &prompt);
            secs[m][0] = s;
            next[m] = t;
        }
        for i in 0..DECODE {
            for &m in &order {
                let (s, t) = pass(&mut models[m], PROMPT + i, &[next[m]]);
                secs[m][1] += s;
                next[m] = t;
            }
        }
        let tps = |m: usize| (PROMPT as f64 / secs[m][0], DECODE as f64 / secs[m][1]);
        let (r, t) = (tps(0), tps(1));
        eprintln!("round {round}: prefill real {:.0} twin {:.0} tok/s, decode real {:.1} twin {:.1} tok/s", r.0, t.0, r.1, t.1);
        // Round 0 warms both up and is not counted.
        if round > 0 {
            prefill.push(t.0 / r.0);
            decode.push(t.1 / r.1);
        }
    }
    let (p, d) = (median(&prefill), median(&decode));
    eprintln!("synthetic twin / real file, median of {ROUNDS} rounds: prefill {p:.3}, decode {d:.3}");
    // Within 10%: a fresh-clone CI run here measured decode 1.055, the twin faster in every
    // round for a reason not found (docs/METHODS.md, "Shape-only models").
    assert!((p - 1.0).abs() <= 0.10 && (d - 1.0).abs() <= 0.10, "the twin must time within 10% of the real file: prefill {p:.3}, decode {d:.3}");
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
