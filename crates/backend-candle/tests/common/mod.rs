//! Helpers shared by this crate's integration tests.
#![allow(dead_code)]

pub mod fixture;
pub mod llama_ref;

use lx_backend_candle::CandleBackend;
use lx_core::backend::{Backend, Batch, Choice, Chunk, LoadSpec, Outputs, Slot, TokenId};
use std::path::PathBuf;

/// The default model: `LX_MODEL`, else the cache path. Panics with a clear message when
/// it is absent: a test that needs the real model must never pass without it.
pub fn model_path() -> PathBuf {
    let p = lx_models::default_model_path();
    assert!(
        p.is_file(),
        "this test needs the default model (Gemma 3 270M Q4_K_M GGUF) at {}; fetch it (`lx models fetch`) or set LX_MODEL",
        p.display()
    );
    p
}

/// The second real model (SmolLM2 135M Instruct Q4_1, llama architecture, byte-level BPE)
/// in the model cache. Panics with what to do when it is absent.
pub fn smollm2_path() -> PathBuf {
    let p = lx_models::catalog_model_path("smollm2").expect("the catalog names smollm2");
    assert!(p.is_file(), "this test needs SmolLM2 at {}; fetch it (`lx models fetch smollm2`)", p.display());
    p
}

pub fn spec(slots: usize, ctx: usize) -> LoadSpec {
    spec_at(model_path(), slots, ctx)
}

pub fn spec_at(model_path: PathBuf, slots: usize, ctx: usize) -> LoadSpec {
    LoadSpec {
        model_path,
        threads: 2,
        slots,
        ctx_per_slot: ctx,
        max_batch_tokens: 4096,
        gpu_layers: Some(0),
    }
}

/// The text of `ids` in the model at `path`, for printing only.
pub fn detokenize(path: &std::path::Path, ids: &[TokenId]) -> String {
    lx_format::tokenizer::Tokenizer::from_path(path).expect("tokenizer").decode(ids)
}

pub fn chunk(slot: Slot, pos: usize, tokens: &[TokenId], outputs: Outputs) -> Chunk {
    Chunk {
        slot,
        pos: pos as u32,
        tokens: tokens.to_vec(),
        outputs,
    }
}

pub fn step1(b: &mut CandleBackend, c: Chunk, top: usize) -> Vec<Choice> {
    let out = b
        .step(&Batch {
            chunks: vec![c],
            top_logprobs: top,
        })
        .expect("step");
    out.into_iter()
        .next()
        .map(|o| o.choices)
        .unwrap_or_default()
}

/// Prefill `prompt` into `slot` (in chunks of `chunk_len`) and decode `n` tokens greedily.
/// Returns the generated ids and the top-`top` of each choice.
pub fn generate(
    b: &mut CandleBackend,
    slot: Slot,
    prompt: &[TokenId],
    chunk_len: usize,
    n: usize,
    top: usize,
) -> (Vec<TokenId>, Vec<Choice>) {
    let mut pos = 0;
    let mut last = None;
    while pos < prompt.len() {
        let end = (pos + chunk_len).min(prompt.len());
        let outputs = if end == prompt.len() {
            Outputs::Last
        } else {
            Outputs::None
        };
        let ch = step1(b, chunk(slot, pos, &prompt[pos..end], outputs), top);
        if end == prompt.len() {
            last = ch.into_iter().next();
        }
        pos = end;
    }
    let mut choices = vec![last.expect("prefill output")];
    let mut ids = vec![choices[0].token];
    while ids.len() < n {
        let t = *ids.last().unwrap();
        let c = step1(
            b,
            chunk(slot, prompt.len() + ids.len() - 1, &[t], Outputs::Last),
            top,
        )
        .remove(0);
        ids.push(c.token);
        choices.push(c);
    }
    (ids, choices)
}
