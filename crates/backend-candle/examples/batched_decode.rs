//! Batched decode on candle, three ways, on the default model: which one the backend should
//! take on this device. B sequences at different positions (prompts of `--prompt` + 8·i
//! tokens) decode `--steps` greedy tokens each way, from the same caches:
//!
//! - **together**: one pass, the layers' matrix products over all B rows at once, attention
//!   per sequence, one output projection (what the backend does on a GPU);
//! - **apart, shared projection**: the layers one sequence at a time, one output projection
//!   for all B rows (what the backend does for decode on the CPU);
//! - **apart**: the layers and the projection one sequence at a time (no batching at all);
//! - **backend step**: the same tokens through `CandleBackend::step`, which picks one of the
//!   first two for this device and weight format (what the engine's worker runs, less IPC).
//!
//! ```text
//! cargo run --release -p lx-backend-candle --example batched_decode -- \
//!     [--threads 2] [--batches 1,2,4,8] [--prompt 128] [--steps 32] [--rounds 3] [--weights f16]
//! ```
//! Prints the median ms per step (medians over steps, then over rounds, the ways alternating
//! within each round), aggregate tok/s, the projection's own time for 1 and B rows, and how
//! many of each way's tokens equal the first way's.

use candle_core::Tensor;
use lx_backend_candle::{set_thread_env, CandleBackend, DeviceChoice, KvCache, Options, Rows, WeightFormat};
use lx_engine::backend::{choose_greedy, Backend, Batch, Chunk, LoadSpec, Outputs, Slot, TokenId};
use std::time::Instant;
use lx_client::stats::median;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Together,
    ApartSharedProjection,
    Apart,
    BackendStep,
}

const WAYS: [(Way, &str); 4] = [(Way::Together, "together"), (Way::ApartSharedProjection, "apart, shared projection"), (Way::Apart, "apart"), (Way::BackendStep, "backend step")];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut threads, mut prompt, mut steps, mut rounds) = (2usize, 128usize, 32usize, 3usize);
    let mut batches = vec![1usize, 2, 4, 8];
    let mut weights = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--threads" => threads = val()?.parse()?,
            "--prompt" => prompt = val()?.parse()?,
            "--steps" => steps = val()?.parse()?,
            "--rounds" => rounds = val()?.parse()?,
            "--batches" => batches = val()?.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--weights" => weights = Some(val()?.parse::<WeightFormat>()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    set_thread_env(threads);
    let max_b = *batches.iter().max().ok_or("--batches is empty")?;
    let ctx = prompt + 8 * max_b + steps + 1;
    let spec = LoadSpec { model_path: lx_models::default_model_path(), threads, slots: 1, ctx_per_slot: ctx, max_batch_tokens: ctx, gpu_layers: None, ..Default::default() };
    let options = Options { device: DeviceChoice::Auto, layer_weights: weights };
    let backend = CandleBackend::load_with(&spec, &options)?;
    // A second copy with a slot per sequence, driven through its step interface.
    let mut stepper = CandleBackend::load_with(&LoadSpec { slots: max_b, ..spec.clone() }, &options)?;
    let model = backend.model();
    let ropes = model.rope_tables(ctx)?;
    let vocab = model.cfg.vocab_size;
    println!("candle batched decode on {}: prompts of {prompt} + 8·i tokens, {steps} steps, {rounds} rounds\n", backend.info().device);

    // Greedy tokens from logits tiles (B, 1, vocab).
    let choose = |logits: &Tensor, out: &mut Vec<TokenId>| -> candle_core::Result<()> {
        let flat = logits.flatten_all()?.to_vec1::<f32>()?;
        out.extend(flat.chunks(vocab).map(|row| choose_greedy(row, 0).token));
        Ok(())
    };

    println!("| B | way | ms per step | tok/s | ÷ apart | tokens as `together` | projection ms, 1 row | B rows |");
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &b in &batches {
        let mut caches: Vec<KvCache> = (0..b).map(|_| KvCache::new(&model.cfg, ctx, model.device())).collect::<Result<_, _>>()?;
        let mut start_pos = Vec::new();
        let mut first_token = Vec::new();
        for (i, cache) in caches.iter_mut().enumerate() {
            let ids: Vec<TokenId> = std::iter::once(2).chain((0..prompt + 8 * i - 1).map(|k| 1000 + (k * 37 + i * 11) as TokenId % 20000)).collect();
            let mut next = Vec::new();
            model.forward(&[&ids], &[0], &mut [cache], &ropes, Rows::Last, &mut |_, l| choose(l, &mut next))?;
            stepper.step(&Batch { chunks: vec![Chunk { slot: i as Slot, pos: 0, tokens: ids.clone(), outputs: Outputs::Last, score: Vec::new() }], top_logprobs: 0 })?;
            start_pos.push(ids.len());
            first_token.push(next[0]);
        }
        let mut ms: Vec<Vec<f64>> = vec![Vec::new(); WAYS.len()];
        let mut tokens: Vec<Vec<TokenId>> = vec![Vec::new(); WAYS.len()];
        let (mut proj_1, mut proj_b) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for (wi, &(way, _)) in WAYS.iter().enumerate() {
                let mut next = first_token.clone();
                let mut per_step = Vec::new();
                let mut emitted = Vec::new();
                for k in 0..steps {
                    let pos: Vec<usize> = start_pos.iter().map(|p| p + k).collect();
                    let toks: Vec<[TokenId; 1]> = next.iter().map(|&t| [t]).collect();
                    let toks: Vec<&[TokenId]> = toks.iter().map(|t| t.as_slice()).collect();
                    let mut refs: Vec<&mut KvCache> = caches.iter_mut().collect();
                    let t0 = Instant::now();
                    let mut chosen = Vec::new();
                    match way {
                        Way::Together => model.forward(&toks, &pos, &mut refs, &ropes, Rows::Last, &mut |_, l| choose(l, &mut chosen))?,
                        Way::ApartSharedProjection => {
                            let mut hidden = Vec::new();
                            for i in 0..b {
                                hidden.extend(model.hidden(&toks[i..=i], &pos[i..=i], &mut refs[i..=i], &ropes, Rows::Last)?);
                            }
                            model.project(&Tensor::cat(&hidden, 0)?, 0, &mut |_, l| choose(l, &mut chosen))?;
                        }
                        Way::Apart => {
                            for i in 0..b {
                                model.forward(&toks[i..=i], &pos[i..=i], &mut refs[i..=i], &ropes, Rows::Last, &mut |_, l| choose(l, &mut chosen))?;
                            }
                        }
                        Way::BackendStep => {
                            let chunks = (0..b).map(|i| Chunk { slot: i as Slot, pos: pos[i] as u32, tokens: toks[i].to_vec(), outputs: Outputs::Last, score: Vec::new() }).collect();
                            let outputs = stepper.step(&Batch { chunks, top_logprobs: 0 })?;
                            chosen.extend(outputs.iter().map(|o| o.choices[0].token));
                        }
                    }
                    per_step.push(t0.elapsed().as_secs_f64() * 1e3);
                    emitted.extend_from_slice(&chosen);
                    next = chosen;
                }
                ms[wi].push(median(&per_step));
                if round == 0 {
                    tokens[wi] = emitted;
                }
            }
            // The output projection alone, for one row and for B (the prompts' last hidden
            // states: the cache is rewritten from `start_pos` by the next round anyway).
            let toks: Vec<[TokenId; 1]> = first_token.iter().map(|&t| [t]).collect();
            let toks: Vec<&[TokenId]> = toks.iter().map(|t| t.as_slice()).collect();
            let mut refs: Vec<&mut KvCache> = caches.iter_mut().collect();
            let x = model.hidden(&toks, &start_pos, &mut refs, &ropes, Rows::Last)?.expect("rows asked for");
            for (rows, out) in [(1, &mut proj_1), (b, &mut proj_b)] {
                let t = Instant::now();
                model.project(&x.narrow(0, 0, rows)?, 0, &mut |_, _| Ok(()))?;
                out.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let apart = median(&ms[2]);
        for (wi, &(_, name)) in WAYS.iter().enumerate() {
            let m = median(&ms[wi]);
            let same = tokens[wi].iter().zip(&tokens[0]).filter(|(a, b)| a == b).count();
            let proj = if wi == 1 { format!("{:.1} | {:.1}", median(&proj_1), median(&proj_b)) } else { " | ".into() };
            println!("| {b} | {name} | {m:.1} | {:.1} | {:.2} | {same}/{} | {proj} |", b as f64 / (m / 1e3), apart / m, tokens[0].len());
        }
    }
    Ok(())
}
