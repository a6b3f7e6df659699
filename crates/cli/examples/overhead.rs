//! Harness overhead: the llama.cpp backend measured through engine, worker process and
//! scheduler, against a bare loop over llama-cpp-2 in this process doing the same work
//! (same model, threads, prompt ids and greedy sampling), alternating in one run.
//!
//! ```text
//! cargo build --release -p lx-cli && cargo run --release -p lx-cli --example overhead -- [--threads 2] [--rounds 5]
//! ```
//! Prints medians and the ratios engine ÷ bare (target: ≥ 0.97 for prefill and decode
//! tok/s; TTFT overhead under 2 ms at 64 prompt tokens). Run it on an idle machine: llama.cpp's
//! threads spin-wait, and any other busy process moves these figures more than the harness does.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lx_engine::backend::{choose_greedy, LoadSpec, TokenId};
use lx_engine::coordinator::Worker;
use lx_engine::load::{run_closed_loop, PointSpec, Quiet, RunControl};
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_engine::workload::PromptBuilder;

/// Short-prompt pairs per round, for the TTFT difference.
const SHORT_PAIRS: usize = 6;

struct Sample {
    ttft_ms: f64,
    prefill_tps: f64,
    decode_tps: f64,
}

/// Prefill `prompt` in one batch, then decode `gen` tokens greedily, one per llama_decode,
/// in a context made once and cleared between runs (as the worker does with its slot).
fn bare(ctx: &mut LlamaContext, prompt: &[TokenId], gen: usize) -> Sample {
    ctx.clear_kv_cache();
    let mut batch = LlamaBatch::new(prompt.len().max(512), 1);
    let t0 = Instant::now();
    let last = prompt.len() - 1;
    for (i, &t) in prompt.iter().enumerate() {
        batch.add(LlamaToken(t as i32), i as i32, &[0], i == last).unwrap();
    }
    ctx.decode(&mut batch).unwrap();
    let prefill = t0.elapsed();
    let mut token = choose_greedy(ctx.get_logits_ith(last as i32), 0).token;
    let first = t0.elapsed();
    for i in 0..gen - 1 {
        batch.clear();
        batch.add(LlamaToken(token as i32), (prompt.len() + i) as i32, &[0], true).unwrap();
        ctx.decode(&mut batch).unwrap();
        token = choose_greedy(ctx.get_logits_ith(0), 0).token;
    }
    let end = t0.elapsed();
    Sample {
        ttft_ms: first.as_secs_f64() * 1e3,
        prefill_tps: prompt.len() as f64 / prefill.as_secs_f64(),
        decode_tps: (gen - 1) as f64 / (end - first).as_secs_f64(),
    }
}

fn engine(worker: &mut Worker, prompt: &[TokenId], gen: u32) -> Sample {
    let spec = PointSpec { prompt_tokens: prompt.len() as u32, max_tokens: gen, concurrency: 1, requests: 1, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
    let run = run_closed_loop(worker, &spec, &|_| prompt.to_vec(), &[], &RunControl::default(), &mut Quiet);
    let r = &run.records[0];
    assert!(r.ok(), "engine request failed: {:?}", r.error);
    Sample { ttft_ms: r.ttft_ms().unwrap(), prefill_tps: r.prefill_tps().unwrap(), decode_tps: r.decode_tps().unwrap() }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, default: usize| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default);
    let threads = flag("--threads", lx_engine::hardware::physical_cores());
    let rounds = flag("--rounds", 5);
    let (long, gen, short) = (flag("--prompt", 512), flag("--gen", 128), 64usize);

    let model_spec = lx_backends::model::OpenModel::open("default", &mut |_| {})?;
    let prompts = PromptBuilder::new(&model_spec.tokenizer);
    let long_prompt = prompts.prompt(long, 0);
    let short_prompt = prompts.prompt(short, 0);

    // The worker is our own `lx` binary, built next to this example.
    let exe = std::env::current_exe()?;
    let lx = exe.parent().and_then(|d| d.parent()).map(|d| d.join("lx")).filter(|p| p.is_file()).ok_or_else(|| anyhow::anyhow!("build lx first: cargo build --release -p lx-cli"))?;
    let mut cmd = lx_backends::worker_command("llama");
    cmd.program = lx;
    let load = LoadSpec { model_path: model_spec.path.clone(), threads, slots: 1, ctx_per_slot: long + gen, max_batch_tokens: long.max(512), gpu_layers: None };
    let mut worker = Worker::spawn(&cmd, &load, &SchedulerConfig::new(Policy::Serial, 1, load.max_batch_tokens), Duration::from_secs(300))?;

    let n_ctx = load.ctx_per_slot as u32;
    let rt = LlamaBackend::init()?;
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    // The same context shape as the worker's: one sequence of the worker's context size.
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(load.max_batch_tokens as u32)
        .with_n_ubatch(512)
        .with_n_seq_max(1)
        .with_kv_unified(false)
        .with_n_threads(threads as i32)
        .with_n_threads_batch(threads as i32);
    let model = LlamaModel::load_from_file(&rt, &model_spec.path, &LlamaModelParams::default())?;
    let mut ctx = model.new_context(&rt, params)?;

    // Warm both paths once.
    bare(&mut ctx, &short_prompt, 8);
    engine(&mut worker, &short_prompt, 8);

    let (mut b, mut e, mut b64, mut e64, mut ttft_diffs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so drift on a shared machine hits both alike.
        let mut pair = |first_bare: bool, worker: &mut Worker, p: &[TokenId], g: usize| {
            if first_bare {
                let x = bare(&mut ctx, p, g);
                (x, engine(worker, p, g as u32))
            } else {
                let y = engine(worker, p, g as u32);
                (bare(&mut ctx, p, g), y)
            }
        };
        let (x, y) = pair(round % 2 == 0, &mut worker, &long_prompt, gen);
        b.push(x);
        e.push(y);
        // A 2 ms difference hides in a 160 ms TTFT's noise: many short pairs, and the median
        // of their paired differences.
        for k in 0..SHORT_PAIRS {
            let (x, y) = pair((round + k) % 2 == 1, &mut worker, &short_prompt, 2);
            ttft_diffs.push(y.ttft_ms - x.ttft_ms);
            b64.push(x);
            e64.push(y);
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    let m = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    println!("threads {threads}, prompt {long}, output {gen}, concurrency 1, {rounds} rounds (medians)\n");
    println!("| figure | bare llama-cpp-2 | engine + worker | ratio |");
    println!("| --- | ---: | ---: | ---: |");
    let pf = (m(&b, |s| s.prefill_tps), m(&e, |s| s.prefill_tps));
    let dc = (m(&b, |s| s.decode_tps), m(&e, |s| s.decode_tps));
    let tt = (m(&b64, |s| s.ttft_ms), m(&e64, |s| s.ttft_ms));
    println!("| prefill tok/s (pp{long}) | {:.1} | {:.1} | {:.3} |", pf.0, pf.1, pf.1 / pf.0);
    println!("| decode tok/s (tg{gen}) | {:.2} | {:.2} | {:.3} |", dc.0, dc.1, dc.1 / dc.0);
    let paired = median(ttft_diffs);
    println!("| TTFT ms (pp{short}, {} pairs) | {:.2} | {:.2} | {paired:+.2} ms (median paired difference) |", e64.len(), tt.0, tt.1);
    Ok(())
}
