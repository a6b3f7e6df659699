//! Diagnostics, not tests: how far apart the logits of llama.cpp and candle are, position
//! by position, on the long prompt of tests/parity_llamacpp.rs (which holds the pass/fail
//! rule). Needs the default model.
//!
//!     cargo run --release -p lx-backend-candle --example logit_profile            # every implementation against candle F32
//!     cargo run --release -p lx-backend-candle --example logit_profile -- llama   # llama.cpp against itself

use lx_test_support::llama_ref::{llama, llama_context, long_prompt, prefill};
use lx_test_support::steps::*;
use lx_backend_candle::CandleBackend;
use lx_engine::backend::{choose_greedy, TokenId};

use llama_cpp_2::token::LlamaToken;

fn main() {
    match std::env::args().nth(1).as_deref() {
        None => logit_difference_profile(),
        Some("llama") => llama_cpp_self_difference_profile(),
        Some(other) => {
            eprintln!("unknown argument {other:?}: none (every implementation against candle F32) or `llama` (llama.cpp against itself)");
            std::process::exit(2);
        }
    }
}

/// Distance of each implementation's logits from the
/// f32 reference (this backend with every weight dequantized to f32: the quantized
/// file's model computed without activation quantization or half precision), at sampled
/// positions of the long prompt. Prints mean and max |Δlogit| per implementation.
fn logit_difference_profile() {
    use lx_backend_candle::{DeviceChoice, Options, WeightFormat};
    let l = llama();
    let text = long_prompt();
    let prompt: Vec<LlamaToken> = l.model.vocab().tokenize(text.as_bytes(), true, false);
    let n = prompt.len();
    let sample = |i: usize| i.is_multiple_of(16) || i + 1 == n;
    let rows: Vec<usize> = (0..n).filter(|&i| sample(i)).collect();
    let mut impls: Vec<(String, Vec<Vec<f32>>)> = Vec::new();
    for precise in [false, true] {
        let mut ctx = llama_context(&l, n + 8, precise);
        prefill(&mut ctx, &prompt, n, sample);
        let name = if precise {
            "llama.cpp (no FA, f32 KV)"
        } else {
            "llama.cpp (default)"
        };
        impls.push((
            name.into(),
            rows.iter()
                .map(|&i| ctx.get_logits_ith(i as i32).to_vec())
                .collect(),
        ));
    }
    let ids: Vec<TokenId> = prompt.iter().map(|t| t.0 as TokenId).collect();
    for w in [
        WeightFormat::F32,
        WeightFormat::Q8_0,
        WeightFormat::Dual,
        WeightFormat::F16,
    ] {
        let b = CandleBackend::load_with(
            &spec(1, 1024),
            &Options {
                device: DeviceChoice::Cpu,
                layer_weights: Some(w),
            },
        )
        .expect("candle load");
        let model = b.model();
        let ropes = model.rope_tables(1024).unwrap();
        let mut cache = lx_backend_candle::KvCache::new(&model.cfg, 1024, model.device()).unwrap();
        let mut all: Vec<Vec<f32>> = Vec::new();
        model
            .forward(
                &[&ids],
                &[0],
                &mut [&mut cache],
                &ropes,
                lx_backend_candle::Rows::All,
                &mut |_, t| {
                    let (_, r, v) = t.dims3()?;
                    let flat = t.flatten_all()?.to_vec1::<f32>()?;
                    for i in 0..r {
                        if sample(all.len()) {
                            all.push(flat[i * v..(i + 1) * v].to_vec());
                        } else {
                            all.push(Vec::new());
                        }
                    }
                    Ok(())
                },
            )
            .unwrap();
        impls.push((
            format!("candle {w:?}"),
            rows.iter().map(|&i| std::mem::take(&mut all[i])).collect(),
        ));
    }
    let reference = impls.iter().position(|(n, _)| n == "candle F32").unwrap();
    let refl = impls[reference].1.clone();
    for (name, logits) in &impls {
        let (mut sum, mut max, mut cnt, mut argmax_agree) = (0f64, 0f32, 0usize, 0usize);
        for (a, r) in logits.iter().zip(&refl) {
            for (x, y) in a.iter().zip(r) {
                let d = (x - y).abs();
                sum += d as f64;
                max = max.max(d);
                cnt += 1;
            }
            argmax_agree += (choose_greedy(a, 0).token == choose_greedy(r, 0).token) as usize;
        }
        eprintln!(
            "{name:28}: mean |Δlogit| vs f32 reference {:.4}, max {max:.3}, argmax agrees at {argmax_agree}/{}",
            sum / cnt as f64,
            logits.len()
        );
    }
}

/// The same profile between two llama.cpp
/// configurations (default: flash attention auto, f16 KV; precise: no flash attention,
/// f32 KV), for scale: this is how far llama.cpp is from itself.
fn llama_cpp_self_difference_profile() {
    let l = llama();
    let text = long_prompt();
    let prompt: Vec<LlamaToken> = l.model.vocab().tokenize(text.as_bytes(), true, false);
    let n = prompt.len();
    let sample = |i: usize| i.is_multiple_of(32) || i + 1 == n;
    let mut ctxs = Vec::new();
    for precise in [false, true] {
        let mut ctx = llama_context(&l, n + 8, precise);
        prefill(&mut ctx, &prompt, n, sample);
        ctxs.push(ctx);
    }
    for i in (0..n).filter(|&i| sample(i)) {
        let a = ctxs[0].get_logits_ith(i as i32);
        let c = ctxs[1].get_logits_ith(i as i32);
        let max = a
            .iter()
            .zip(c)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        let mean = a.iter().zip(c).map(|(x, y)| (x - y).abs()).sum::<f32>() / a.len() as f32;
        eprintln!("pos {i:4}: max |Δlogit| {max:.3}, mean {mean:.4}");
    }
}
