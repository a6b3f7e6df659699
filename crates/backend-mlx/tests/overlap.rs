//! A decode step whose graph was built while the step before it evaluated (`Options::overlap`)
//! computes exactly what the same step built in turn computes, and the graph is used only for
//! the step it assumed: the tokens of a script in which sequences decode together, one leaves,
//! another joins, one asks for log-probabilities and one is cut back are the same, bit for bit,
//! with the overlap on and off, and the steps that ran a graph built ahead are exactly the ones
//! that continued the step before unchanged.
//!
//! Builds with `--features mlx` on macOS aarch64 and Linux x86_64 (elsewhere this file compiles
//! to nothing); fails, never skips, without SmolLM2 (the smaller catalog model: the tokens need
//! only be the same either way).
#![cfg(all(
    feature = "mlx",
    any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))
))]

use lx_backend_mlx::{MlxBackend, Options};
use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs, TokenId};
use lx_test_support::alone::in_own_process;
use lx_test_support::models::smollm2_path;
use lx_test_support::steps::chunk;

/// One step of the script: which slots decode their last token, which prompts join, and how
/// many log-probabilities it asks for.
struct Step {
    decode: &'static [u32],
    join: &'static [(u32, &'static str)],
    top_logprobs: usize,
    /// Cut slot 0 back by one position before this step.
    rewind: bool,
}

const fn step(decode: &'static [u32], join: &'static [(u32, &'static str)]) -> Step {
    Step { decode, join, top_logprobs: 0, rewind: false }
}

const SCRIPT: &[Step] = &[
    step(&[], &[(0, "Once upon a time, in a small village,"), (1, "The three laws of thermodynamics state that")]),
    step(&[0, 1], &[]),
    step(&[0, 1], &[]),
    step(&[0, 1], &[]),
    // Slot 1's sequence ends.
    step(&[0], &[]),
    step(&[0], &[]),
    // Another joins while slot 0 decodes.
    step(&[0], &[(2, "fn main() {\n    let numbers = vec![1, 2, 3];")]),
    step(&[0, 2], &[]),
    step(&[0, 2], &[]),
    Step { decode: &[0, 2], join: &[], top_logprobs: 2, rewind: false },
    step(&[0, 2], &[]),
    step(&[0, 2], &[]),
    Step { decode: &[0, 2], join: &[], top_logprobs: 0, rewind: true },
    step(&[0, 2], &[]),
    // The same slots in the other order: another layout of rows.
    step(&[2, 0], &[]),
    step(&[2, 0], &[]),
];

/// Every step's tokens, and how many steps ran a graph built ahead.
fn run(overlap: bool) -> (Vec<Vec<TokenId>>, u64, u64) {
    let spec = LoadSpec { model_path: smollm2_path(), threads: 2, slots: 3, ctx_per_slot: 128, max_batch_tokens: 256, gpu_layers: None, ..Default::default() };
    let mut b = MlxBackend::load_with(&spec, &Options { overlap, ..Options::default() }).expect("MLX loads SmolLM2");
    let tok = lx_format::tokenizer::Tokenizer::from_path(smollm2_path()).expect("tokenizer");
    // Each slot's sequence so far: every token in its cache, then the one to feed next.
    let mut seqs: Vec<Vec<TokenId>> = vec![Vec::new(); 3];
    let (mut tokens, mut continued) = (Vec::new(), 0);
    let mut last: Option<Vec<u32>> = None;
    for s in SCRIPT {
        if s.rewind {
            let n = seqs[0].len() - 2;
            b.truncate(0, n as u32).unwrap();
            seqs[0].truncate(n + 1);
        }
        let mut chunks: Vec<Chunk> =
            s.decode.iter().map(|&slot| chunk(slot, seqs[slot as usize].len() - 1, &seqs[slot as usize][seqs[slot as usize].len() - 1..], Outputs::Last)).collect();
        for &(slot, text) in s.join {
            seqs[slot as usize] = tok.encode(text);
            chunks.push(chunk(slot, 0, &seqs[slot as usize], Outputs::Last));
        }
        // A step continues the last one when it decodes the same slots in the same order and
        // neither of them asked for log-probabilities, nor did a rewind come between.
        let order: Vec<u32> = chunks.iter().map(|c| c.slot).collect();
        if s.join.is_empty() && s.top_logprobs == 0 && !s.rewind && last.as_ref() == Some(&order) {
            continued += 1;
        }
        last = (s.top_logprobs == 0).then_some(order);
        let out = b.step(&Batch { chunks, top_logprobs: s.top_logprobs }).expect("MLX step");
        let next: Vec<TokenId> = out.iter().map(|o| o.choices[0].token).collect();
        for (o, &t) in out.iter().zip(&next) {
            seqs[o.slot as usize].push(t);
        }
        tokens.push(next);
    }
    (tokens, b.steps_built_ahead(), continued)
}

#[test]
fn a_graph_built_ahead_gives_the_same_tokens_and_serves_only_the_step_it_assumed() {
    in_own_process("a_graph_built_ahead_gives_the_same_tokens_and_serves_only_the_step_it_assumed", || {
        let (in_turn, none, _) = run(false);
        let (ahead, used, continued) = run(true);
        assert_eq!(none, 0, "with the overlap off no step runs a graph built ahead");
        assert_eq!(ahead, in_turn, "a graph built ahead changed the tokens");
        assert_eq!(used, continued, "steps that ran a graph built ahead: {used}, steps that continued the one before: {continued}");
        assert!(continued >= 8, "the script continues at least 8 steps ({continued})");
    });
}
