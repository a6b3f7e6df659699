//! A backend driven step by step, with no scheduler: load specs, one-chunk steps, and a greedy
//! prefill-then-decode of one sequence.

use lx_engine::backend::{Backend, Batch, Choice, Chunk, LoadSpec, Outputs, Slot, TokenId};
use std::path::PathBuf;

use crate::models::model_path;

/// The default model on the CPU with two threads.
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
        ..Default::default()
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
        score: Vec::new(),
    }
}

/// One pass of the single chunk `c`: the choices of its output rows.
pub fn step1<B: Backend + ?Sized>(b: &mut B, c: Chunk, top: usize) -> Vec<Choice> {
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
pub fn generate<B: Backend + ?Sized>(
    b: &mut B,
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
