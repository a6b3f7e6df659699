//! Bare candle loop over our Gemma 3 code: prefill N tokens, then decode M greedily, one
//! sequence, no engine and no backend trait. The reference for the harness-overhead check
//! (the engine path against this loop, same threads, prompt 256, 64 output tokens).
//!
//! ```text
//! cargo run --release -p lx-backend-candle --example bare -- \
//!     [--model PATH] [--threads 2] [--prompt 256] [--gen 64] [--repeat 3] [--weights f16] [--via-backend]
//! ```
//! `--via-backend` runs the same loop through `CandleBackend::step` (the step interface
//! without the engine) instead of calling the model directly.
//! Prints, per repetition, prefill and decode tok/s (wall clock) with the CPU time per
//! token (robust to other processes sharing the cores), then the best of the repetitions.
//! Decode tok/s is (output tokens − 1) ÷ (last token − first token), as the engine reports it.

use lx_backend_candle::bare_loop::BareLoop;
use lx_backend_candle::{set_thread_env, CandleBackend, DeviceChoice, Options, WeightFormat};
use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs, TokenId};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut model_path = lx_models::default_model_path().display().to_string();
    let (mut threads, mut prompt, mut gen, mut repeat) = (2usize, 256usize, 64usize, 3usize);
    let mut weights = WeightFormat::F16;
    let mut via_backend = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--model" => model_path = val()?,
            "--threads" => threads = val()?.parse()?,
            "--prompt" => prompt = val()?.parse()?,
            "--gen" => gen = val()?.parse()?,
            "--repeat" => repeat = val()?.parse()?,
            "--weights" => weights = val()?.parse()?,
            "--via-backend" => via_backend = true,
            "-h" | "--help" => {
                println!(
                    "bare [--model PATH] [--threads N] [--prompt N] [--gen N] [--repeat N] \
                     [--weights f16|dual|q8_0|quantized|f32] [--via-backend]"
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    // Before anything touches candle.
    set_thread_env(threads);
    let ctx = prompt + gen;
    // A fixed prompt: BOS, then the reference sentence's ids over and over.
    let base = [
        14946u32, 3324, 496, 990, 236764, 528, 496, 1944, 9744, 236764,
    ];
    let ids: Vec<TokenId> = std::iter::once(2)
        .chain(base.iter().copied().cycle())
        .take(prompt)
        .collect();

    let t = Instant::now();
    let mut runner: Box<dyn Runner> = if via_backend {
        let spec = LoadSpec {
            model_path: model_path.clone().into(),
            threads,
            slots: 1,
            ctx_per_slot: ctx,
            max_batch_tokens: prompt.max(1),
            gpu_layers: Some(0),
            ..Default::default()
        };
        let opts = Options {
            device: DeviceChoice::Cpu,
            layer_weights: Some(weights),
        };
        Box::new(ViaBackend(CandleBackend::load_with(&spec, &opts)?))
    } else {
        Box::new(BareLoop::load(model_path.as_ref(), ctx, weights)?)
    };
    println!(
        "loaded {model_path} in {:.2} s; candle threads {}; layer weights {weights:?}; {}",
        t.elapsed().as_secs_f64(),
        lx_backend_candle::candle_threads(),
        if via_backend {
            "through CandleBackend::step"
        } else {
            "bare model loop"
        }
    );

    let (mut best_pp, mut best_tg) = (0f64, 0f64);
    for rep in 0..repeat {
        runner.reset();
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let mut next = runner.run(&ids, 0)?;
        let pp = prompt as f64 / t0.elapsed().as_secs_f64();
        let pp_cpu = cpu_seconds() - c0;
        let mut out = vec![next];
        let (t1, c1) = (Instant::now(), cpu_seconds());
        for i in 0..gen.saturating_sub(1) {
            next = runner.run(&[next], prompt + i)?;
            out.push(next);
        }
        let steps = gen.saturating_sub(1).max(1);
        let tg = steps as f64 / t1.elapsed().as_secs_f64();
        let tg_cpu = cpu_seconds() - c1;
        println!(
            "run {rep}: prefill {prompt} tokens: {pp:.1} tok/s ({:.2} ms CPU/token); \
             decode {gen} tokens: {tg:.1} tok/s ({:.2} ms CPU/token)",
            pp_cpu * 1e3 / prompt as f64,
            tg_cpu * 1e3 / steps as f64
        );
        if rep == 0 {
            println!("first generated ids: {:?}", &out[..out.len().min(16)]);
        }
        best_pp = best_pp.max(pp);
        best_tg = best_tg.max(tg);
    }
    println!("best: prefill {best_pp:.1} tok/s, decode {best_tg:.1} tok/s ({threads} threads)");
    Ok(())
}

trait Runner {
    fn reset(&mut self);
    /// Appends `tokens` at `pos` and returns the greedy next token.
    fn run(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
    ) -> Result<TokenId, Box<dyn std::error::Error>>;
}

impl Runner for BareLoop {
    fn reset(&mut self) {
        BareLoop::reset(self);
    }
    fn run(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
    ) -> Result<TokenId, Box<dyn std::error::Error>> {
        Ok(self.append(tokens, pos)?)
    }
}

struct ViaBackend(CandleBackend);

impl Runner for ViaBackend {
    fn reset(&mut self) {
        self.0.clear(0);
    }
    fn run(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
    ) -> Result<TokenId, Box<dyn std::error::Error>> {
        let chunk = Chunk {
            slot: 0,
            pos: pos as u32,
            tokens: tokens.to_vec(),
            outputs: Outputs::Last,
            score: Vec::new(),
        };
        let out = self.0.step(&Batch {
            chunks: vec![chunk],
            top_logprobs: 0,
        })?;
        Ok(out[0].choices[0].token)
    }
}

/// Process CPU time (user + system) in seconds, from /proc/self/stat (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is [0]; utime and stime (fields 14 and 15) are [11] and [12].
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
