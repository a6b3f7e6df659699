//! Teacher-forced parity with llama.cpp (llama-cpp-2) on both real models: the default
//! (Gemma 3 270M Q4_K_M) and SmolLM2 135M Q4_1 (llama architecture, byte-level BPE).
//!
//! For each of three prompts (one longer than the 512-token sliding window of Gemma 3's
//! local layers), llama.cpp tokenizes the prompt and greedily continues it for 64 tokens
//! (its defaults: flash attention auto, f16 KV cache, one token per decode). Then prompt +
//! continuation go through candle in one prefill with `Outputs::All`, and through llama.cpp
//! itself the same way in its precise configuration (no flash attention, f32 KV cache).
//!
//! Kernels round differently on every CPU (AVX2, AVX-512, NEON) and for every batch shape,
//! so no fixed agreement rate holds everywhere: llama.cpp's own agreement with its greedy
//! stream, measured here in the same run, sets the bar. candle must agree at most `MARGIN`
//! less often than that, and wherever candle's argmax is not llama.cpp's token the two tokens
//! must be a near-tie: the bound is `NEAR_TIE` (0.25 nats), or the largest gap llama.cpp has
//! against itself in the same run where that is larger (llama.cpp's own disagreements reached
//! 0.22 nats on Gemma 3 and 0.32 on SmolLM2 on an AVX2 CPU, so a fixed 0.15 would fail
//! llama.cpp against itself). A near-tie is judged from both sides, as two implementations
//! that each round a little rank a close pair differently: one of them (candle, or llama.cpp
//! in its precise configuration) puts the two tokens within the bound, and their two margins
//! together (how far apart the implementations place the pair) stay within `SPREAD` bounds,
//! about a nat: a pair swapped by more than that is a defect, not rounding. Judged from
//! candle's side only, SmolLM2 on an AVX-512 CPU failed a pair candle put 0.311 nats apart and
//! llama.cpp 0.011 (its own largest gap there was 0.159, so the bound stayed 0.25); judged
//! from llama.cpp's side only, Gemma 3 on the same CPU failed a pair llama.cpp put 0.469 apart
//! and candle 0.140. How far apart the logits are, position by position,
//! is printed by `cargo run --release --example logit_profile` (a diagnostic, not a test).

use lx_test_support::llama_ref::{forced, greedy, llama_at, long_prompt};
use lx_test_support::models::*;
use lx_test_support::steps::*;
use lx_backend_candle::CandleBackend;
use lx_engine::backend::{choose_greedy, Backend, Batch, Outputs};
use std::path::Path;

const N_GEN: usize = 64;
const NEAR_TIE: f32 = 0.25;
/// How many bounds the two implementations' margins for a disagreeing pair may add up to.
const SPREAD: f32 = 4.0;

/// How one implementation's argmax compares with llama.cpp's greedy stream, position by
/// position: agreements, and for each disagreement (prompt, position, its gap, the
/// reference's gap): the implementation's best log-probability minus that of llama.cpp's
/// token, and llama.cpp's (precise configuration) log-probability of its token minus that
/// of the implementation's pick, in nats.
#[derive(Default)]
struct Forced {
    agree: usize,
    total: usize,
    gaps: Vec<(usize, usize, f32, f32)>,
}

impl Forced {
    /// `gap` is 0 where the implementation's argmax is llama.cpp's token.
    fn add(&mut self, prompt: usize, pos: usize, gap: f32, reference_gap: f32) -> bool {
        self.total += 1;
        if gap <= 0.0 {
            self.agree += 1;
            return true;
        }
        self.gaps.push((prompt, pos, gap, reference_gap));
        false
    }
    fn rate(&self) -> f64 {
        self.agree as f64 / self.total as f64
    }
}

/// candle may agree with llama.cpp's greedy stream this much less often than llama.cpp's
/// precise configuration agrees with its default one, measured in the same run.
const MARGIN: f64 = 0.05;

#[test]
fn teacher_forced_parity_with_llama_cpp() {
    teacher_forced(&model_path());
}

#[test]
fn teacher_forced_parity_with_llama_cpp_smollm2() {
    teacher_forced(&smollm2_path());
}

fn teacher_forced(path: &Path) {
    let l = llama_at(path);
    let long = long_prompt();
    let prompts = [
        "Once upon a time, in a small village,".to_string(),
        "The most important thing to remember when learning a new programming language is"
            .to_string(),
        long,
    ];
    let mut spec = spec_at(path.to_path_buf(), 1, 1024);
    // The device these run on: `LX_CANDLE_DEVICE` (scripts/gpu-check sets cuda or metal),
    // else the CPU; in `lx` the same variable is read where workers start.
    if let Ok(device) = std::env::var("LX_CANDLE_DEVICE") {
        spec.settings.insert("device".into(), device);
    }
    let mut b = CandleBackend::load(&spec).expect("candle load");
    let (mut candle, mut itself) = (Forced::default(), Forced::default());
    for (pi, text) in prompts.iter().enumerate() {
        let (prompt, cont, llama_gaps) = greedy(&l, text, N_GEN);
        let mut seq = prompt.clone();
        seq.extend_from_slice(&cont[..N_GEN - 1]);
        b.clear(0);
        let out = b
            .step(&Batch {
                chunks: vec![chunk(0, 0, &seq, Outputs::All)],
                top_logprobs: 16,
            })
            .expect("candle step");
        let choices = &out[0].choices;
        assert_eq!(choices.len(), seq.len());
        let precise = forced(&l, &prompt, &cont);
        let mut line = String::new();
        for (i, &want) in cont.iter().enumerate() {
            let c = &choices[prompt.len() - 1 + i];
            let gap = if c.token == want {
                0.0
            } else {
                c.top[0].logprob - c.top.iter().find(|s| s.token == want).map_or(f32::NEG_INFINITY, |s| s.logprob)
            };
            let logits = &precise[i];
            let reference_gap = logits[want as usize] - logits[c.token as usize];
            if !candle.add(pi, i, gap, reference_gap) {
                line.push_str(&format!(
                    " [pos {i}: llama {want} / candle {} gap {gap:.3}, llama.cpp's gap for the pair {reference_gap:.3}, its own top-2 gap {:.3}]",
                    c.token, llama_gaps[i]
                ));
            }
            let best = choose_greedy(logits, 0).token as usize;
            itself.add(pi, i, logits[best] - logits[want as usize], 0.0);
        }
        eprintln!(
            "{}: prompt {pi}: {} prompt tokens; continuation {:?}{}",
            path.display(),
            prompt.len(),
            detokenize(path, &cont[..16]),
            if line.is_empty() { " — all agree".to_string() } else { line }
        );
    }
    eprintln!(
        "{}: argmax agreement with llama.cpp's greedy stream: candle {}/{} = {:.1}%; llama.cpp's precise configuration {}/{} = {:.1}% (gaps {:?})",
        path.display(),
        candle.agree,
        candle.total,
        candle.rate() * 100.0,
        itself.agree,
        itself.total,
        itself.rate() * 100.0,
        itself.gaps.iter().map(|g| format!("{:.3}", g.2)).collect::<Vec<_>>()
    );
    let bound = itself.gaps.iter().map(|g| g.2).fold(NEAR_TIE, f32::max);
    let near_tie = |&&(_, _, gap, reference_gap): &&(usize, usize, f32, f32)| gap.min(reference_gap) <= bound && gap + reference_gap <= SPREAD * bound;
    let not_ties: Vec<_> = candle.gaps.iter().filter(|g| !near_tie(g)).collect();
    assert!(not_ties.is_empty(), "disagreements that are not near-ties (one side within {bound:.3} nats, both within {:.3}): (prompt, position, candle's gap, llama.cpp's) {not_ties:?}", SPREAD * bound);
    assert!(
        candle.rate() >= itself.rate() - MARGIN,
        "candle agrees at {:.1}%, more than {:.0} points below llama.cpp's agreement with itself ({:.1}%)",
        candle.rate() * 100.0,
        MARGIN * 100.0,
        itself.rate() * 100.0
    );
}
