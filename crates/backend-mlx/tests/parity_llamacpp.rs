//! MLX against llama.cpp, and against itself, on the default model and on SmolLM2 (the llama
//! family's graph; builds with `--features
//! mlx` on macOS aarch64 and Linux x86_64; elsewhere this file compiles to nothing). On Linux
//! MLX runs on its CPU device (the mlx-cpu wheel); on a Mac these tests pick MLX's default
//! device. They fail, never skip, without the model (`lx_test_support::models::model_path`).
//!
//! Teacher-forced parity, per weight mode, against llama.cpp running the very weights MLX
//! runs: the default model as loaded, or, for MLX's own 4-bit mode, MLX's 4-bit weights
//! written out dequantized (`lx_backend_mlx::mlx4::write_gguf`). llama.cpp (its defaults)
//! greedily continues each prompt; prompt + continuation go through MLX in one prefill, with
//! outputs at every continuation position, where MLX's argmax must be llama.cpp's token or a
//! near-tie: llama.cpp's token within 0.25 nats of MLX's best (the candle backend's bound), or
//! within the largest gap llama.cpp has against itself in the same run if that is larger. The
//! agreement rate may be at most 5 points below llama.cpp's
//! agreement with itself, measured in the same run: the same continuations teacher-forced
//! through llama.cpp in its precise configuration (no flash attention, f32 KV cache). Two
//! correct implementations of the same weights disagree about that often, at near-ties
//! (crates/backend-candle/tests/parity_llamacpp.rs measured it).
//!
//! The other tests: batched decode through the engine's scheduler (continuous batching at
//! concurrency 4) gives each sequence the tokens serial decoding gives it, up to a near-tie;
//! a prefix copied from another slot gives the next token a whole prefill gives; a bad model
//! is a clear error.
//!
//! MLX's CPU build multiplies at about 2 GFLOP/s on one core here (examples/matmul_speed.rs),
//! so these tests take minutes; MLX's evaluation is not meant to be driven from several
//! threads of one process, so each runs in a process of its own (`in_own_process`), two at
//! once on two cores.
#![cfg(all(
    feature = "mlx",
    any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))
))]

use lx_test_support::alone::in_own_process;
use lx_test_support::drive::{drive, streams, Streams};
use lx_test_support::llama_ref::{forced, greedy, llama_at, long_prompt};
use lx_test_support::models::{model_path, smollm2_path};
use lx_test_support::steps::chunk;

use std::path::Path;
use std::time::Instant;

use lx_backend_mlx::{mlx4, MlxBackend, Options, WeightMode};
use lx_engine::backend::{choose_greedy, Backend, BackendError, Batch, LoadSpec, Outputs, TokenId};
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};
use lx_engine::scheduler::{Policy, Scheduler, SchedulerConfig, WorkRequest};

const N_GEN: usize = 48;
/// Nats by which llama.cpp's token may trail MLX's best where the two disagree.
const NEAR_TIE: f32 = 0.25;
/// Points by which MLX's agreement may trail llama.cpp's agreement with itself.
const MARGIN: f64 = 0.05;


fn spec(slots: usize, ctx: usize) -> LoadSpec {
    LoadSpec { model_path: model_path(), threads: 2, slots, ctx_per_slot: ctx, max_batch_tokens: 4096, gpu_layers: None, ..Default::default() }
}

fn load(slots: usize, ctx: usize, weights: WeightMode) -> MlxBackend {
    load_at(&model_path(), slots, ctx, weights)
}

fn load_at(model: &Path, slots: usize, ctx: usize, weights: WeightMode) -> MlxBackend {
    MlxBackend::load_with(&LoadSpec { model_path: model.to_path_buf(), ..spec(slots, ctx) }, &Options { weights, ..Options::default() })
        .unwrap_or_else(|e| panic!("MLX cannot load {}: {e}", model.display()))
}

const PROMPTS: [&str; 4] = [
    "Once upon a time, in a small village,",
    "The three laws of thermodynamics state that",
    "fn main() {\n    let numbers = vec![1, 2, 3];",
    "Die Hauptstadt von Frankreich ist",
];

/// Our own text of more than 512 tokens, so that the local layers' sliding window cuts in:
/// the shared long prompt's first eight paragraphs (the whole one costs MLX's CPU build
/// minutes more to prefill).
fn window_prompt() -> String {
    long_prompt().split("\n\n").take(8).collect::<Vec<_>>().join("\n\n")
}

/// Teacher-forced parity of MLX in `mode`, loading `model`, with llama.cpp running
/// `reference`, which must hold the same weights, over `texts`.
fn teacher_forced(mode: WeightMode, model: &Path, reference: &Path, texts: &[String]) {
    let l = llama_at(reference);
    let mut b = load_at(model, 1, 1024, mode);
    eprintln!("{}", b.info().version);
    let (mut agree, mut llama_agree, mut total, mut misses) = (0usize, 0usize, 0usize, Vec::new());
    // llama.cpp's own disagreements (precise against default): their gaps, in nats.
    let mut llama_gaps: Vec<f32> = Vec::new();
    for (pi, text) in texts.iter().enumerate() {
        let (prompt, cont, _) = greedy(&l, text, N_GEN);
        for (&want, logits) in cont.iter().zip(&forced(&l, &prompt, &cont)) {
            let best = choose_greedy(logits, 0).token;
            if best == want {
                llama_agree += 1;
            } else {
                llama_gaps.push(logits[best as usize] - logits[want as usize]);
            }
        }
        b.clear(0);
        // The prompt but its last token without outputs, then the rest with all of them: the
        // same one prefill, without 262k-wide logits for every prompt position.
        let split = prompt.len() - 1;
        let rest: Vec<TokenId> = prompt[split..].iter().chain(&cont[..N_GEN - 1]).copied().collect();
        let batch = Batch { chunks: vec![chunk(0, 0, &prompt[..split], Outputs::None), chunk(0, split, &rest, Outputs::All)], top_logprobs: 16 };
        let t0 = Instant::now();
        let out = b.step(&batch).expect("MLX step");
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        // Only the chunk that asked for outputs answers.
        assert_eq!(out.len(), 1);
        let choices = &out[0].choices;
        assert_eq!(choices.len(), N_GEN);
        let mut line = String::new();
        for (i, &want) in cont.iter().enumerate() {
            let c = &choices[i];
            total += 1;
            if c.token == want {
                agree += 1;
                continue;
            }
            let gap = c.top.iter().find(|s| s.token == want).map_or(f32::INFINITY, |s| c.top[0].logprob - s.logprob);
            line.push_str(&format!(" [pos {i}: llama.cpp {want}, MLX {} gap {gap:.3}]", c.token));
            misses.push((format!("prompt {pi} pos {i}: llama.cpp {want}, MLX {}", c.token), gap));
        }
        eprintln!("{mode:?} prompt {pi}: {} tokens prefilled in {ms:.0} ms;{}", split + rest.len(), if line.is_empty() { " all agree".into() } else { line });
    }
    let (rate, llama_rate) = (agree as f64 / total as f64, llama_agree as f64 / total as f64);
    // A near-tie is within NEAR_TIE, or within the largest gap llama.cpp has against itself
    // on these weights in this run, whichever is larger.
    let bound = llama_gaps.iter().copied().fold(NEAR_TIE, f32::max);
    eprintln!(
        "{mode:?}: MLX agrees with llama.cpp at {agree}/{total} = {:.1}%; llama.cpp (precise) with llama.cpp (default) at {llama_agree}/{total} = {:.1}%, its gaps {:?}; near-tie bound {bound:.3} nats",
        rate * 100.0,
        llama_rate * 100.0,
        llama_gaps.iter().map(|g| format!("{g:.3}")).collect::<Vec<_>>()
    );
    let failures: Vec<String> = misses.iter().filter(|m| m.1 > bound).map(|(m, gap)| format!("{m} (gap {gap:.3})")).collect();
    assert!(failures.is_empty(), "{mode:?}: disagreements that are not near-ties (> {bound:.3} nats): {failures:?}");
    assert!(
        rate >= llama_rate - MARGIN,
        "{mode:?}: agreement {agree}/{total} is more than {:.0} points below llama.cpp's agreement with itself ({llama_agree}/{total})",
        MARGIN * 100.0
    );
}

/// As loaded, MLX computes the file's own weights (Q8_0 kept exactly as MLX affine, the rest
/// dequantized to f16), so llama.cpp runs the file itself. One prompt runs past the sliding
/// window.
#[test]
fn teacher_forced_parity_with_llama_cpp_as_loaded() {
    in_own_process("teacher_forced_parity_with_llama_cpp_as_loaded", || {
        let window = lx_format::arch::Config::from_gguf(&lx_format::gguf::GgufFile::open(model_path()).unwrap()).unwrap().sliding_window;
        let long = window_prompt();
        let tokens = lx_format::tokenizer::Tokenizer::from_path(model_path()).unwrap().encode(&long).len();
        assert!(window.is_some_and(|w| tokens > w), "the long prompt ({tokens} tokens) must pass the sliding window ({window:?})");
        teacher_forced(WeightMode::AsLoaded, &model_path(), &model_path(), &[PROMPTS[0].into(), PROMPTS[1].into(), long]);
    });
}

/// `src` with every matrix dequantized to f32 (exact) and everything else as it is.
fn write_f32_gguf(src: &Path, dst: &Path) {
    let g = lx_format::gguf::GgufFile::open(src).unwrap();
    let mut w = lx_format::gguf::GgufWriter::new();
    for (k, v) in g.metadata_pairs() {
        w = w.kv(k, v.clone());
    }
    for t in g.tensors() {
        w = match t.dims[..] {
            [cols, rows] => {
                let values = lx_backend_mlx::dequant::host_f32(&g, &t.name, t.ggml_type, rows as usize, cols as usize).unwrap();
                w.tensor_f32(&t.name, &t.dims, &values)
            }
            _ => w.tensor(&t.name, &t.dims, t.ggml_type, g.read_tensor_bytes(&t.name).unwrap()),
        };
    }
    w.write(dst).unwrap();
}

/// The llama family on real weights: SmolLM2 135M, with llama's adjacent-pair RoPE, SiLU and
/// none of Gemma's extra norms. MLX keeps its Q4_1 and Q8_0 matrices exactly (affine 4- and
/// 8-bit) and multiplies them with f32 activations, where llama.cpp would round activations
/// to 8 bits for a quantized matrix: so llama.cpp runs the file with every matrix dequantized
/// to f32, the very weights MLX runs, in the same arithmetic.
#[test]
fn teacher_forced_parity_with_llama_cpp_smollm2() {
    in_own_process("teacher_forced_parity_with_llama_cpp_smollm2", || {
        let smollm2 = smollm2_path();
        let dir = std::env::temp_dir().join(format!("lx-mlx-smollm2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f32_file = dir.join("smollm2-f32.gguf");
        write_f32_gguf(&smollm2, &f32_file);
        teacher_forced(WeightMode::AsLoaded, &smollm2, &f32_file, &PROMPTS.map(String::from));
        std::fs::remove_dir_all(&dir).ok();
    });
}

/// MLX's own 4-bit weights are a coarser model than the file (every matrix requantized from
/// Q8_0/Q5_0/Q4_K/Q6_K), so llama.cpp runs them too: the model as MLX holds it, written out
/// in f32. Every matrix of the default model is quantized in this mode. The graph is the one
/// above, so short prompts suffice here.
#[test]
fn teacher_forced_parity_with_llama_cpp_on_mlx_4bit_weights() {
    in_own_process("teacher_forced_parity_with_llama_cpp_on_mlx_4bit_weights", || {
        let dir = std::env::temp_dir().join(format!("lx-mlx4-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("default-model-as-mlx-4bit.gguf");
        let quantized = mlx4::write_gguf(&model_path(), &file).expect("the model as MLX's 4-bit mode holds it");
        let matrices = lx_format::gguf::GgufFile::open(model_path()).unwrap().tensors().iter().filter(|t| t.dims.len() == 2).count();
        assert_eq!(quantized, matrices, "every matrix of the default model is quantized");
        teacher_forced(WeightMode::Mlx4, &model_path(), &file, &PROMPTS.map(String::from));
        std::fs::remove_dir_all(&dir).ok();
    });
}

/// Runs `prompts` through the engine's scheduler on MLX: each request's greedy tokens and
/// their top-2 alternatives.
fn scheduled(policy: Policy, prompts: &[Vec<TokenId>], n: u32) -> Streams {
    let backend = MlxBackend::load(&LoadSpec { max_batch_tokens: 1024, ..spec(4, 256) }).expect("MLX loads the default model");
    let mut s = Scheduler::new(Box::new(backend), SchedulerConfig::new(policy, 4, 1024), Instant::now());
    let requests = prompts.iter().enumerate().map(|(i, p)| WorkRequest { id: i as u64, prompt: p.clone(), max_tokens: n, stop_tokens: vec![], top_logprobs: ALTERNATIVES, prefix_tokens: 0, handoff: Default::default(), score: None }).collect();
    streams(&drive(&mut s, requests, 0))
}

/// Continuous batching at concurrency 4 (four sequences at different positions in every
/// step) gives each sequence the tokens it gets decoded alone (serial), up to a near-tie.
#[test]
fn batched_decode_through_the_engine_matches_decoding_alone() {
    in_own_process("batched_decode_through_the_engine_matches_decoding_alone", || {
        let tok = lx_format::tokenizer::Tokenizer::from_path(model_path()).expect("tokenizer");
        let prompts: Vec<Vec<TokenId>> = PROMPTS.iter().map(|t| tok.encode(t)).collect();
        let n = 16;
        let serial = scheduled(Policy::Serial, &prompts, n);
        let batched = scheduled(Policy::Continuous, &prompts, n);
        for (id, (want, top)) in &serial {
            let (got, _) = &batched[id];
            assert_eq!((want.len(), got.len()), (n as usize, n as usize));
            match compare(want, top, got, NEAR_TIE_NATS) {
                Ok(a) => eprintln!(
                    "prompt {id}: {} of {n} tokens identical{}",
                    a.agreed,
                    a.parted_at_tie.map_or(String::new(), |(at, gap)| format!(", parted at a near-tie at {at} (gap {gap:.3})"))
                ),
                Err(e) => panic!("prompt {id}: batching changed the tokens: {e}\nalone   {want:?}\nbatched {got:?}"),
            }
        }
    });
}

/// The backend claims prefix copy: a slot that takes another slot's first 64 positions and
/// prefills the rest predicts what a whole prefill predicts.
#[test]
fn copied_prefix_gives_the_whole_prefills_next_token() {
    in_own_process("copied_prefix_gives_the_whole_prefills_next_token", || {
        let tok = lx_format::tokenizer::Tokenizer::from_path(model_path()).expect("tokenizer");
        let seq = tok.encode(&long_prompt())[..100].to_vec();
        let mut b = load(2, 256, WeightMode::AsLoaded);
        assert!(b.info().capabilities.prefix_copy);
        let whole = b.step(&Batch { chunks: vec![chunk(0, 0, &seq, Outputs::Last)], top_logprobs: 2 }).unwrap().remove(0).choices.remove(0);
        b.copy_prefix(0, 1, 64).unwrap();
        let rest = b.step(&Batch { chunks: vec![chunk(1, 64, &seq[64..], Outputs::Last)], top_logprobs: 2 }).unwrap().remove(0).choices.remove(0);
        assert_eq!(rest.token, whole.token);
        let d = (rest.top[0].logprob - whole.top[0].logprob).abs();
        assert!(d < 0.02, "next-token log-probability moved by {d} nats");
        assert!(b.copy_prefix(0, 1, 101).is_err(), "copying more than the slot holds must fail");
    });
}

/// Missing, non-GGUF and truncated model files, and an impossible cache, are load errors
/// that say what is wrong, never a crash inside MLX.
#[test]
fn a_bad_model_is_a_clear_error() {
    in_own_process("a_bad_model_is_a_clear_error", || {
        let dir = std::env::temp_dir().join(format!("lx-mlx-bad-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = |path: &std::path::Path| match MlxBackend::load_with(&LoadSpec { model_path: path.to_path_buf(), ..spec(1, 64) }, &Options::default()) {
            Ok(_) => panic!("{} loaded", path.display()),
            Err(e) => e,
        };
        let missing = dir.join("missing.gguf");
        let e = err(&missing);
        assert!(matches!(e, BackendError::Load(_)) && e.to_string().contains("does not exist"), "{e}");

        let junk = dir.join("junk.gguf");
        std::fs::write(&junk, b"this is not a GGUF file at all, just text").unwrap();
        let e = err(&junk);
        assert!(matches!(e, BackendError::Load(_) | BackendError::Unsupported(_)), "{e}");
        eprintln!("junk file: {e}");

        // The real model cut off after its header and a little of its tensor data.
        let cut = dir.join("truncated.gguf");
        let bytes = std::fs::read(model_path()).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
        let e = err(&cut);
        assert!(matches!(e, BackendError::Load(_) | BackendError::Unsupported(_)), "{e}");
        eprintln!("truncated file: {e}");

        let e = MlxBackend::load_with(&LoadSpec { slots: 0, ..spec(1, 64) }, &Options::default()).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("at least one slot"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    });
}
