//! MLX against llama.cpp on the default model (macOS aarch64 with `--features mlx` only; on
//! every other platform this file compiles to nothing).
//!
//! Same rule as the candle backend's parity test: llama.cpp greedily continues each prompt,
//! prompt + continuation go through MLX in one prefill with `Outputs::All`, and MLX's argmax
//! must be llama.cpp's token at ≥ 95 % of positions, every miss a near-tie (llama.cpp's token
//! within 0.25 nats of MLX's best; llama.cpp's own configurations disagree by that much, see
//! crates/backend-candle/tests/parity_llamacpp.rs). A second test checks MLX against itself:
//! decoding step by step, two sequences at different positions in one batch, must give the
//! tokens its own prefill gives (KV-cache writes, RoPE offsets, masks and row layout).
#![cfg(all(feature = "mlx", target_os = "macos", target_arch = "aarch64"))]

#[path = "../../backend-candle/tests/common/mod.rs"]
mod common;
use common::{chunk, model_path, ONCE_UPON};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lx_backend_mlx::{MlxBackend, Options, WeightMode};
use lx_engine::backend::{choose_greedy, Backend, Batch, LoadSpec, Outputs, TokenId};
use std::num::NonZeroU32;

const N_GEN: usize = 48;
const NEAR_TIE: f32 = 0.25;

fn gpu_spec(slots: usize, ctx: usize) -> LoadSpec {
    LoadSpec { model_path: model_path(), threads: 0, slots, ctx_per_slot: ctx, max_batch_tokens: 4096, gpu_layers: None }
}

fn long_prompt() -> String {
    // Our own text, over 512 tokens, so the sliding window of the local layers matters.
    let p = "The harbour master kept a logbook of every ship that entered the bay: its name, its \
             cargo, the weather and the state of the tide. Over forty years the entries grew from a few \
             lines a day to whole pages, because the town grew, the quay was extended twice and steam \
             replaced sail. ";
    p.repeat(8) + "On the last page of the last logbook he wrote that the fog had lifted and"
}

/// llama.cpp: tokens of `text` (with BOS) and its greedy continuation of `n` tokens.
fn llama_greedy(text: &str, n: usize) -> (Vec<TokenId>, Vec<TokenId>) {
    let mut backend = LlamaBackend::init().expect("llama backend");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, model_path(), &LlamaModelParams::default()).expect("llama.cpp load");
    let prompt: Vec<LlamaToken> = model.vocab().tokenize(text.as_bytes(), true, false);
    let n_ctx = (prompt.len() + n + 8) as u32;
    let params = LlamaContextParams::default().with_n_ctx(NonZeroU32::new(n_ctx)).with_n_batch(n_ctx).with_n_ubatch(512);
    let mut ctx = model.new_context(&backend, params).expect("llama context");
    let mut batch = LlamaBatch::new(n_ctx as usize, 1);
    for (i, &t) in prompt.iter().enumerate() {
        batch.add(t, i as i32, &[0], i + 1 == prompt.len()).unwrap();
    }
    ctx.decode(&mut batch).expect("decode prompt");
    let mut out = Vec::new();
    let mut row = batch.n_tokens() - 1;
    for i in 0..n {
        let t = choose_greedy(ctx.get_logits_ith(row), 0).token;
        out.push(t);
        batch.clear();
        batch.add(LlamaToken(t as i32), (prompt.len() + i) as i32, &[0], true).unwrap();
        ctx.decode(&mut batch).expect("decode");
        row = 0;
    }
    (prompt.iter().map(|t| t.0 as TokenId).collect(), out)
}

fn teacher_forced(mode: WeightMode) {
    let mut b = MlxBackend::load_with(&gpu_spec(1, 1024), &Options { weights: mode, cpu: false }).expect("MLX load");
    eprintln!("{:?}", b.info());
    let (mut agree, mut total, mut failures) = (0usize, 0usize, Vec::new());
    for (pi, text) in ["Once upon a time, in a small village,".to_string(), long_prompt()].iter().enumerate() {
        let (prompt, cont) = llama_greedy(text, N_GEN);
        if pi == 0 {
            assert_eq!(prompt, ONCE_UPON.to_vec(), "llama.cpp's tokenization of the reference prompt");
        }
        let mut seq = prompt.clone();
        seq.extend_from_slice(&cont[..N_GEN - 1]);
        b.clear(0);
        let out = b.step(&Batch { chunks: vec![chunk(0, 0, &seq, Outputs::All)], top_logprobs: 16 }).expect("MLX step");
        let choices = &out[0].choices;
        assert_eq!(choices.len(), seq.len());
        for (i, &want) in cont.iter().enumerate() {
            let c = &choices[prompt.len() - 1 + i];
            total += 1;
            if c.token == want {
                agree += 1;
                continue;
            }
            let gap = c.top.iter().find(|s| s.token == want).map_or(f32::INFINITY, |s| c.top[0].logprob - s.logprob);
            eprintln!("{mode:?} prompt {pi} pos {i}: llama.cpp {want}, MLX {} (gap {gap:.3})", c.token);
            if gap > NEAR_TIE {
                failures.push(format!("prompt {pi} pos {i}: llama.cpp {want}, MLX {} (gap {gap:.3})", c.token));
            }
        }
    }
    let rate = agree as f64 / total as f64;
    eprintln!("{mode:?}: argmax agreement {agree}/{total} = {:.1}%", rate * 100.0);
    assert!(failures.is_empty(), "disagreements that are not near-ties: {failures:?}");
    assert!(rate >= 0.95, "argmax agreement {agree}/{total} below 95%");
}

#[test]
fn teacher_forced_parity_with_llama_cpp_as_loaded() {
    teacher_forced(WeightMode::AsLoaded);
}

/// MLX's own 4-bit weights are a different model numerically: reported, held to a loose bar
/// (most argmaxes agree), never to the near-tie rule.
#[test]
fn mlx_4bit_mostly_agrees_with_llama_cpp() {
    let mut b = MlxBackend::load_with(&gpu_spec(1, 256), &Options { weights: WeightMode::Mlx4, cpu: false }).expect("MLX load");
    let (prompt, cont) = llama_greedy("Once upon a time, in a small village,", 32);
    let mut seq = prompt.clone();
    seq.extend_from_slice(&cont[..31]);
    let out = b.step(&Batch { chunks: vec![chunk(0, 0, &seq, Outputs::All)], top_logprobs: 0 }).expect("MLX step");
    let agree = cont.iter().enumerate().filter(|&(i, &t)| out[0].choices[prompt.len() - 1 + i].token == t).count();
    eprintln!("MLX 4-bit g64: {agree}/32 argmaxes agree with llama.cpp ({})", b.info().version);
    assert!(agree >= 24, "MLX 4-bit agrees with llama.cpp at only {agree}/32 positions");
}

/// Step-by-step decoding of two sequences at different positions in the same batch gives
/// what one prefill with all outputs gives.
#[test]
fn incremental_batched_decode_matches_prefill() {
    let mut b = MlxBackend::load_with(&gpu_spec(2, 1024), &Options::default()).expect("MLX load");
    let long = {
        let tok = lx_engine::tokenizer::Tokenizer::from_path(model_path()).expect("tokenizer");
        tok.encode(&long_prompt())
    };
    let short = ONCE_UPON.to_vec();
    // Greedy continuations, one sequence at a time, by prefill + decode in separate steps.
    let mut greedy = |p: &[TokenId], n: usize, slot: u32| -> Vec<TokenId> {
        b.clear(slot);
        let mut out = vec![b.step(&Batch { chunks: vec![chunk(slot, 0, p, Outputs::Last)], top_logprobs: 0 }).unwrap()[0].choices[0].token];
        for i in 1..n {
            let t = *out.last().unwrap();
            let s = b.step(&Batch { chunks: vec![chunk(slot, p.len() + i - 1, &[t], Outputs::Last)], top_logprobs: 0 }).unwrap();
            out.push(s[0].choices[0].token);
        }
        out
    };
    let alone_short = greedy(&short, 16, 0);
    let alone_long = greedy(&long, 16, 1);
    // The same two sequences decoded together, one step carrying both.
    b.clear(0);
    b.clear(1);
    let first = b
        .step(&Batch { chunks: vec![chunk(0, 0, &short, Outputs::Last), chunk(1, 0, &long, Outputs::Last)], top_logprobs: 0 })
        .unwrap();
    let (mut s, mut l) = (vec![first[0].choices[0].token], vec![first[1].choices[0].token]);
    for i in 1..16 {
        let out = b
            .step(&Batch {
                chunks: vec![
                    chunk(0, short.len() + i - 1, &[*s.last().unwrap()], Outputs::Last),
                    chunk(1, long.len() + i - 1, &[*l.last().unwrap()], Outputs::Last),
                ],
                top_logprobs: 0,
            })
            .unwrap();
        s.push(out[0].choices[0].token);
        l.push(out[1].choices[0].token);
    }
    // Batching changes rounding; report the first difference rather than demand bit-equality
    // over all 16 tokens, but the first tokens (from identical prefills) must agree.
    assert_eq!(s[0], alone_short[0]);
    assert_eq!(l[0], alone_long[0]);
    let same = |a: &[TokenId], b: &[TokenId]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    eprintln!("batched vs alone: short {}/16, long {}/16 tokens identical", same(&s, &alone_short), same(&l, &alone_long));
    assert!(same(&s, &alone_short) >= 8 && same(&l, &alone_long) >= 8, "batched decode diverged early: {s:?} vs {alone_short:?}, {l:?} vs {alone_long:?}");
}
