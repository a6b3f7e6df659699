//! MLX against llama.cpp, and against itself, on the default model (builds with `--features
//! mlx` on macOS aarch64 and Linux x86_64; elsewhere this file compiles to nothing). On Linux
//! MLX runs on its CPU device (the mlx-cpu wheel); on a Mac these tests pick MLX's default
//! device. They fail, never skip, without the model (`common::model_path`).
//!
//! Teacher-forced parity, per weight mode: llama.cpp (its defaults) greedily continues each
//! prompt; prompt + continuation go through MLX in one prefill with `Outputs::All`, and at
//! every continuation position MLX's argmax must be llama.cpp's token or a near-tie (llama.cpp's
//! token within the mode's bound of MLX's best). The agreement rate has a floor relative to
//! llama.cpp's agreement with itself, measured in the same run: the same continuations
//! teacher-forced through llama.cpp in its precise configuration (no flash attention, f32 KV
//! cache). Two correct implementations of the same weights disagree about that often, at
//! near-ties (crates/backend-candle/tests/parity_llamacpp.rs measured it).
//!
//! The other tests: batched decode through the engine's scheduler (continuous batching at
//! concurrency 4) gives each sequence the tokens serial decoding gives it, up to a near-tie;
//! a prefix copied from another slot gives the next token a whole prefill gives; a bad model
//! is a clear error.
#![cfg(all(
    feature = "mlx",
    any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))
))]

#[path = "../../backend-candle/tests/common/mod.rs"]
mod common;
use common::{chunk, model_path, ONCE_UPON};

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lx_backend_mlx::{MlxBackend, Options, WeightMode};
use lx_engine::backend::{choose_greedy, Backend, BackendError, Batch, LoadSpec, Outputs, Scored, TokenId};
use lx_engine::parity::{compare, NEAR_TIE_NATS};
use lx_engine::scheduler::{Policy, SchedEvent, Scheduler, SchedulerConfig, WorkRequest};

const N_GEN: usize = 48;

fn spec(slots: usize, ctx: usize) -> LoadSpec {
    LoadSpec { model_path: model_path(), threads: 2, slots, ctx_per_slot: ctx, max_batch_tokens: 4096, gpu_layers: None }
}

fn load(slots: usize, ctx: usize, weights: WeightMode) -> MlxBackend {
    MlxBackend::load_with(&spec(slots, ctx), &Options { weights, cpu: false }).expect("MLX loads the default model")
}

fn long_prompt() -> String {
    // Our own text, over 512 tokens, so the sliding window of the local layers matters.
    let p = "The harbour master kept a logbook of every ship that entered the bay: its name, its \
             cargo, the weather and the state of the tide. Over forty years the entries grew from a few \
             lines a day to whole pages, because the town grew, the quay was extended twice and steam \
             replaced sail. ";
    p.repeat(8) + "On the last page of the last logbook he wrote that the fog had lifted and"
}

const PROMPTS: [&str; 2] = ["Once upon a time, in a small village,", "The three laws of thermodynamics state that"];

struct Llama {
    backend: LlamaBackend,
    model: LlamaModel,
}

impl Llama {
    fn load() -> Self {
        let mut backend = LlamaBackend::init().expect("llama backend");
        backend.void_logs();
        let model = LlamaModel::load_from_file(&backend, model_path(), &LlamaModelParams::default()).expect("llama.cpp load");
        Self { backend, model }
    }

    /// A context for `n_ctx` tokens in one batch, on 2 threads; `precise`: no flash attention
    /// and an f32 KV cache instead of llama.cpp's defaults.
    fn context(&self, n_ctx: usize, precise: bool) -> LlamaContext<'_> {
        let p = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx as u32))
            .with_n_batch(n_ctx as u32)
            .with_n_ubatch(512)
            .with_n_threads(2)
            .with_n_threads_batch(2);
        let p = if precise { p.with_flash_attention_policy(0).with_type_k(KvCacheType::F32).with_type_v(KvCacheType::F32) } else { p };
        self.model.new_context(&self.backend, p).expect("llama context")
    }

    /// Tokens of `text` (with BOS) and llama.cpp's greedy continuation of `n` tokens.
    fn greedy(&self, text: &str, n: usize) -> (Vec<TokenId>, Vec<TokenId>) {
        let prompt: Vec<LlamaToken> = self.model.vocab().tokenize(text.as_bytes(), true, false);
        let n_ctx = prompt.len() + n + 8;
        let mut ctx = self.context(n_ctx, false);
        let mut batch = LlamaBatch::new(n_ctx, 1);
        for (i, &t) in prompt.iter().enumerate() {
            batch.add(t, i as i32, &[0], i + 1 == prompt.len()).unwrap();
        }
        ctx.decode(&mut batch).expect("decode prompt");
        let mut out = Vec::new();
        let mut row = batch.n_tokens() - 1;
        for i in 0..n {
            let t = choose_greedy(ctx.get_logits_ith(row), 0).token;
            out.push(t);
            if i + 1 == n {
                break;
            }
            batch.clear();
            batch.add(LlamaToken(t as i32), (prompt.len() + i) as i32, &[0], true).unwrap();
            ctx.decode(&mut batch).expect("decode");
            row = 0;
        }
        (prompt.iter().map(|t| t.0 as TokenId).collect(), out)
    }

    /// How many of `cont` llama.cpp's precise configuration picks when teacher-forced
    /// (`seq` = prompt + continuation, the continuation starting at `start`).
    fn self_agreement(&self, seq: &[TokenId], start: usize, cont: &[TokenId]) -> usize {
        let mut ctx = self.context(seq.len() + 8, true);
        let mut batch = LlamaBatch::new(seq.len(), 1);
        for (i, &t) in seq.iter().enumerate() {
            batch.add(LlamaToken(t as i32), i as i32, &[0], i + 1 >= start).unwrap();
        }
        ctx.decode(&mut batch).expect("decode");
        cont.iter().enumerate().filter(|&(i, &want)| choose_greedy(ctx.get_logits_ith((start - 1 + i) as i32), 0).token == want).count()
    }
}

/// Teacher-forced parity of MLX in `mode` with llama.cpp: every miss within `near_tie` nats
/// (`None`: misses are only counted), and an agreement rate no more than `margin` below
/// llama.cpp's agreement with itself.
fn teacher_forced(mode: WeightMode, near_tie: Option<f32>, margin: f64) {
    let l = Llama::load();
    let mut b = load(1, 1024, mode);
    eprintln!("{}", b.info().version);
    let texts: Vec<String> = PROMPTS.iter().map(|s| s.to_string()).chain([long_prompt()]).collect();
    let (mut agree, mut llama_agree, mut total, mut failures) = (0usize, 0usize, 0usize, Vec::new());
    for (pi, text) in texts.iter().enumerate() {
        let (prompt, cont) = l.greedy(text, N_GEN);
        if pi == 0 {
            assert_eq!(prompt, ONCE_UPON.to_vec(), "llama.cpp's tokenization of the reference prompt");
        }
        let mut seq = prompt.clone();
        seq.extend_from_slice(&cont[..N_GEN - 1]);
        llama_agree += l.self_agreement(&seq, prompt.len(), &cont);
        b.clear(0);
        let t0 = Instant::now();
        let out = b.step(&Batch { chunks: vec![chunk(0, 0, &seq, Outputs::All)], top_logprobs: 16 }).expect("MLX step");
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let choices = &out[0].choices;
        assert_eq!(choices.len(), seq.len());
        let mut line = String::new();
        for (i, &want) in cont.iter().enumerate() {
            let c = &choices[prompt.len() - 1 + i];
            total += 1;
            if c.token == want {
                agree += 1;
                continue;
            }
            let gap = c.top.iter().find(|s| s.token == want).map_or(f32::INFINITY, |s| c.top[0].logprob - s.logprob);
            line.push_str(&format!(" [pos {i}: llama.cpp {want}, MLX {} gap {gap:.3}]", c.token));
            if near_tie.is_some_and(|bound| gap > bound) {
                failures.push(format!("prompt {pi} pos {i}: llama.cpp {want}, MLX {} (gap {gap:.3})", c.token));
            }
        }
        eprintln!("{mode:?} prompt {pi}: {} tokens prefilled in {ms:.0} ms;{}", seq.len(), if line.is_empty() { " all agree".into() } else { line });
    }
    let (rate, llama_rate) = (agree as f64 / total as f64, llama_agree as f64 / total as f64);
    eprintln!(
        "{mode:?}: MLX agrees with llama.cpp at {agree}/{total} = {:.1}%; llama.cpp (precise) with llama.cpp (default) at {llama_agree}/{total} = {:.1}%",
        rate * 100.0,
        llama_rate * 100.0
    );
    assert!(failures.is_empty(), "{mode:?}: disagreements that are not near-ties (> {near_tie:?} nats): {failures:?}");
    assert!(
        rate >= llama_rate - margin,
        "{mode:?}: agreement {agree}/{total} is more than {:.0} points below llama.cpp's agreement with itself ({llama_agree}/{total})",
        margin * 100.0
    );
}

/// As loaded, MLX computes the file's own weights (Q8_0 kept exactly as MLX affine, the rest
/// dequantized): held to the candle backend's bounds, a 0.25-nat near-tie and at most 5
/// points below llama.cpp's self-agreement. Measured on Linux CPU: 142/144, both misses
/// near-ties (0.135, 0.081 nats); llama.cpp with itself 141/144.
#[test]
fn teacher_forced_parity_with_llama_cpp_as_loaded() {
    teacher_forced(WeightMode::AsLoaded, Some(0.25), 0.05);
}

/// MLX's own 4-bit weights (every matrix, the tied embedding and output head included,
/// requantized from the file's Q8_0/Q5_0/Q4_K to 4-bit affine, group 64) are a different,
/// coarser model than the one llama.cpp runs, so the near-tie rule cannot hold: measured on
/// Linux CPU, 112/144 agreement (llama.cpp with itself: 141/144), misses up to 2.1 nats and
/// one outside MLX's top 16. This test only keeps that from getting worse (at most 25
/// points below llama.cpp's self-agreement); like-for-like parity of a 4-bit MLX model
/// needs llama.cpp running the same 4-bit weights (see the report in issue 14).
#[test]
fn mlx_4bit_agreement_with_llama_cpp_does_not_regress() {
    teacher_forced(WeightMode::Mlx4, None, 0.25);
}

/// Runs `prompts` through the engine's scheduler on MLX: each request's greedy tokens and
/// their top-2 alternatives.
fn scheduled(policy: Policy, prompts: &[Vec<TokenId>], n: u32) -> BTreeMap<u64, (Vec<TokenId>, Vec<Vec<Scored>>)> {
    let backend = MlxBackend::load(&LoadSpec { max_batch_tokens: 1024, ..spec(4, 256) }).expect("MLX loads the default model");
    let mut s = Scheduler::new(Box::new(backend), SchedulerConfig::new(policy, 4, 1024), Instant::now());
    let mut events = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let req = WorkRequest { id: i as u64, prompt: p.clone(), max_tokens: n, stop_tokens: vec![], top_logprobs: 2, prefix_tokens: 0 };
        s.submit(req, &mut |e| events.push(e));
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    let mut out: BTreeMap<u64, (Vec<TokenId>, Vec<Vec<Scored>>)> = BTreeMap::new();
    for e in events {
        match e {
            SchedEvent::Token { id, token, top, .. } => {
                let entry = out.entry(id).or_default();
                entry.0.push(token);
                entry.1.push(top);
            }
            SchedEvent::Failed { id, error } => panic!("request {id} failed: {error}"),
            _ => {}
        }
    }
    out
}

/// Continuous batching at concurrency 4 (four sequences at different positions in every
/// step) gives each sequence the tokens it gets decoded alone (serial), up to a near-tie.
#[test]
fn batched_decode_through_the_engine_matches_decoding_alone() {
    let tok = lx_engine::tokenizer::Tokenizer::from_path(model_path()).expect("tokenizer");
    let texts = [PROMPTS[0], PROMPTS[1], "fn main() {\n    let numbers = vec![1, 2, 3];", "Die Hauptstadt von Frankreich ist"];
    let prompts: Vec<Vec<TokenId>> = texts.iter().map(|t| tok.encode(t)).collect();
    let n = 24;
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
}

/// The backend claims prefix copy: a slot that takes another slot's first 64 positions and
/// prefills the rest predicts what a whole prefill predicts.
#[test]
fn copied_prefix_gives_the_whole_prefills_next_token() {
    let tok = lx_engine::tokenizer::Tokenizer::from_path(model_path()).expect("tokenizer");
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
}

/// Missing, non-GGUF and truncated model files, and an impossible cache, are load errors
/// that say what is wrong, never a crash inside MLX.
#[test]
fn a_bad_model_is_a_clear_error() {
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
}
