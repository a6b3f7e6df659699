//! What a speculative verify pass costs on this machine: one `llama_decode` of the newest
//! token plus k drafted ones after a prompt, with logits at the last position only (as a
//! prefill chunk) and at every position (as a verify pass needs), as multiples of a plain
//! one-token pass. The difference is the output head: every drafted position needs its own
//! logits over the whole vocabulary (262,144 tokens for Gemma 3), which on a small CPU costs
//! most of a pass; on a GPU almost nothing. This is why the scheduler plans drafts from
//! measured pass costs (`lx_engine::speculative::plan`) rather than a fixed length.
//!
//! ```text
//! cargo run --release -p lx-cli --example verify_cost -- [--threads 2] [--prompt 320] [--model PATH]
//! ```
//! Prints the median of 12 passes per size (after 3 warm-ups), on an idle machine.

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

const DRAFTED: [usize; 9] = [0, 1, 2, 3, 4, 6, 8, 12, 16];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let threads: i32 = value("--threads").map_or(Ok(2), |s| s.parse())?;
    let prompt: i32 = value("--prompt").map_or(Ok(320), |s| s.parse())?;
    let model = value("--model").map_or_else(lx_models::default_model_path, Into::into);
    let rt = lx_backend_llamacpp::runtime();
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let model = LlamaModel::load_from_file(rt, &model, &LlamaModelParams::default())?;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new((prompt + 64) as u32))
        .with_n_batch(512)
        .with_n_ubatch(512)
        .with_n_seq_max(1)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(rt, params)?;
    let mut batch = LlamaBatch::new(512, 1);
    // Any prompt does: the cost of a pass does not depend on which tokens it holds.
    for i in 0..prompt {
        batch.add(LlamaToken(100 + i), i, &[0], i + 1 == prompt)?;
    }
    ctx.decode(&mut batch)?;
    let mut pass_ms = |drafted: usize, all: bool| -> anyhow::Result<f64> {
        let mut times = Vec::new();
        for round in 0..15 {
            batch.clear();
            for i in 0..=drafted {
                batch.add(LlamaToken(200 + i as i32), prompt + i as i32, &[0], all || i == drafted)?;
            }
            let started = Instant::now();
            ctx.decode(&mut batch)?;
            if round >= 3 {
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
            ctx.clear_kv_cache_seq(Some(0), Some(prompt as u32), None)?;
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    };
    let plain = pass_ms(0, false)?;
    println!("{threads} threads, after a {prompt}-token prompt; a plain one-token pass: {plain:.2} ms");
    println!("drafted  logits at the last  logits at every position (a verify pass)");
    for k in DRAFTED {
        let (last, all) = (pass_ms(k, false)?, pass_ms(k, true)?);
        println!("{k:>7}  {last:>6.2} ms {:>5.2}x   {all:>6.2} ms {:>5.2}x", last / plain, all / plain);
    }
    Ok(())
}
