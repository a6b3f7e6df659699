//! llama.cpp's KV cache types side by side on one model: what each costs in memory, what it
//! does to prefill and decode speed, and how far it moves the next-token distribution from
//! an f16 cache on the same tokens.
//!
//! ```text
//! cargo run --release -p lx-cli --example kv_cache -- [--model PATH] [--threads 2]
//!     [--rounds 3] [--prompt 256] [--gen 128] [--context 4096] [--memory-budget 256 (MiB)] [--out FILE.json]
//! ```
//! Per round and type (keys and values alike: f16, q8_0, q4_0), each in a fresh context:
//! - bytes per token, measured: the growth of llama.cpp's saved state of the sequence from a
//!   64-token prefix to the whole prompt (every layer still inside its window);
//! - prefill of the prompt and greedy decoding of `--gen` tokens, timed;
//! - fidelity: the f16 cache's own greedy text (prompt + output of the first round) fed back
//!   teacher-forced, with the best 1000 log-probabilities at every position: how often the
//!   top choice agrees with f16's, and the mean KL divergence of f16's distribution from this
//!   type's over f16's best 1000 tokens (a token outside this type's best 1000 is given its
//!   1000th log-probability, an upper bound).
//!
//! Rounds alternate the types, so a drifting machine moves them alike. Writes a `kv-cache`
//! file (`lx_results::studies::kv_cache`) that `lx show` prints.

use std::path::PathBuf;
use std::time::Instant;

use lx_backend_llamacpp::{KvLayout, LlamaCppBackend};
use lx_engine::backend::{Backend, Batch, Chunk, KvType, KvTypes, LoadSpec, Outputs, Scored, TokenId};
use lx_format::gguf::GgufFile;
use lx_format::tokenizer::Tokenizer;
use lx_format::workload::PromptBuilder;
use lx_machine::roofline::ModelCost;
use lx_results::studies::kv_cache::{KvCacheStudy, TypeRound};

/// Alternatives kept per position for the divergence.
const TOP: usize = 1000;
/// Positions per teacher-forced pass: every one of them returns a vocabulary's logits.
const FORCED_CHUNK: usize = 32;
/// The prefix after which the state's growth is measured.
const FIRST: usize = 64;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn load(model: &std::path::Path, threads: usize, ctx: usize, t: KvType) -> LlamaCppBackend {
    let spec = LoadSpec { model_path: model.to_path_buf(), threads, slots: 1, ctx_per_slot: ctx, max_batch_tokens: 512, gpu_layers: Some(0), kv: KvTypes { k: t, v: t }, ..Default::default() };
    LlamaCppBackend::load_with(&spec, KvLayout::PerSequence).unwrap_or_else(|e| panic!("load with a {} cache: {e}", t.name()))
}

fn step(b: &mut LlamaCppBackend, pos: usize, tokens: &[TokenId], outputs: Outputs, top: usize) -> Vec<lx_engine::backend::Choice> {
    let batch = Batch { chunks: vec![Chunk { slot: 0, pos: pos as u32, tokens: tokens.to_vec(), outputs, score: Vec::new() }], top_logprobs: top };
    b.step(&batch).expect("forward pass").into_iter().flat_map(|o| o.choices).collect()
}

/// KL(p ‖ q) over p's alternatives, with q's log-probabilities where q has them and its
/// smallest kept one elsewhere.
fn kl(p: &[Scored], q: &[Scored]) -> f64 {
    let floor = q.last().map_or(f32::NEG_INFINITY, |s| s.logprob);
    p.iter()
        .map(|a| {
            let lq = q.iter().find(|b| b.token == a.token).map_or(floor, |b| b.logprob);
            f64::from(a.logprob).exp() * f64::from(a.logprob - lq)
        })
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = arg(&args, "--model").map(PathBuf::from).unwrap_or_else(lx_models::default_model_path);
    let threads: usize = arg(&args, "--threads").map_or(2, |s| s.parse().expect("--threads"));
    let rounds: usize = arg(&args, "--rounds").map_or(3, |s| s.parse().expect("--rounds"));
    let prompt_len: usize = arg(&args, "--prompt").map_or(256, |s| s.parse().expect("--prompt"));
    let gen: usize = arg(&args, "--gen").map_or(128, |s| s.parse().expect("--gen"));
    let context: u64 = arg(&args, "--context").map_or(4096, |s| s.parse().expect("--context"));
    let budget_mib: u64 = arg(&args, "--memory-budget").map_or(256, |s| s.parse().expect("--memory-budget: MiB"));
    let out = arg(&args, "--out");
    assert!(prompt_len > FIRST, "--prompt must be longer than {FIRST} tokens");

    let gguf = GgufFile::open(&model).expect("read the model");
    let cost = ModelCost::from_gguf(&gguf).expect("the model's shapes");
    let tokenizer = Tokenizer::from_gguf(&gguf).expect("the model's tokenizer");
    let prompt = PromptBuilder::new(&tokenizer).prompt(prompt_len, 0);
    let ctx = prompt_len + gen;
    let types = KvType::ALL;
    let mut reference: Option<(Vec<TokenId>, Vec<Vec<Scored>>)> = None;
    let mut results = Vec::new();
    for round in 0..rounds {
        // Alternate the order round by round.
        let order: Vec<KvType> = if round % 2 == 0 { types.to_vec() } else { types.iter().rev().copied().collect() };
        for t in order {
            let mut b = load(&model, threads, ctx, t);
            // Bytes per token: the saved state's growth over the prompt past its first tokens.
            step(&mut b, 0, &prompt[..FIRST], Outputs::None, 0);
            let first = b.sequence_state_bytes(0);
            step(&mut b, FIRST, &prompt[FIRST..], Outputs::None, 0);
            let measured = (b.sequence_state_bytes(0) - first) as f64 / (prompt_len - FIRST) as f64;
            b.clear(0);
            // Speed: the prompt, then greedy decoding.
            let started = Instant::now();
            let mut next = step(&mut b, 0, &prompt, Outputs::Last, 0)[0].token;
            let prefill_s = started.elapsed().as_secs_f64();
            let mut text = prompt.clone();
            let started = Instant::now();
            for i in 0..gen - 1 {
                text.push(next);
                next = step(&mut b, prompt_len + i, &[next], Outputs::Last, 0)[0].token;
            }
            let decode_s = started.elapsed().as_secs_f64();
            text.push(next);
            // Fidelity: f16's text, teacher-forced, from the position of the prompt's last token.
            b.clear(0);
            let forced_text = reference.as_ref().map_or(&text, |(r, _)| r).clone();
            let mut tops: Vec<Vec<Scored>> = Vec::new();
            let mut choices: Vec<TokenId> = Vec::new();
            let mut pos = 0;
            while pos < forced_text.len() - 1 {
                let end = (pos + FORCED_CHUNK).min(forced_text.len() - 1);
                let outputs = if end <= prompt_len - 1 { Outputs::None } else { Outputs::All };
                for (k, c) in step(&mut b, pos, &forced_text[pos..end], outputs, TOP).into_iter().enumerate() {
                    if pos + k >= prompt_len - 1 {
                        choices.push(c.token);
                        tops.push(c.top);
                    }
                }
                pos = end;
            }
            if reference.is_none() && t == KvType::F16 {
                reference = Some((text.clone(), tops.clone()));
            }
            let (agreement, divergence) = match &reference {
                Some((_, ref_tops)) => {
                    let agree = ref_tops.iter().zip(&choices).filter(|(r, c)| r[0].token == **c).count() as f64 / choices.len() as f64;
                    let kls: Vec<f64> = ref_tops.iter().zip(&tops).map(|(p, q)| kl(p, q)).collect();
                    (agree, kls.iter().sum::<f64>() / kls.len() as f64)
                }
                None => (f64::NAN, f64::NAN),
            };
            eprintln!(
                "round {}, {}: {measured:.0} B/token, prefill {:.0} tok/s, decode {:.1} tok/s, top-1 agreement {:.3}, KL {:.5}",
                round + 1,
                t.name(),
                prompt_len as f64 / prefill_s,
                (gen - 1) as f64 / decode_s,
                agreement,
                divergence
            );
            results.push(TypeRound {
                round: round + 1,
                kv_type: t.name().to_string(),
                bytes_per_token_measured: measured,
                prefill_tok_s: prompt_len as f64 / prefill_s,
                decode_tok_s: (gen - 1) as f64 / decode_s,
                top1_agreement: agreement,
                mean_kl_nats: divergence,
                positions: choices.len(),
            });
        }
        // The f16 text is the first round's: the rounds after it all compare against it.
        if round == 0 && reference.is_none() {
            panic!("no f16 round");
        }
    }
    let study = KvCacheStudy {
        kind: lx_results::studies::kv_cache::KIND.into(),
        command: args.clone(),
        hardware: serde_json::to_value(lx_local::hardware_report()).unwrap_or_default(),
        engine: "llama.cpp (llama-cpp-2 0.1.160), one sequence, per-sequence KV cache".into(),
        threads,
        prompt_tokens: prompt_len,
        gen_tokens: gen,
        top_kept: TOP,
        f16_bytes_per_token_layer: cost.kv_bytes_per_token_layer,
        layers: cost.layer_windows.len(),
        f16_bytes_at_context: cost.kv_bytes_at(context),
        context_tokens: context,
        budget_mib,
        rounds: results,
    };
    let text = serde_json::to_string_pretty(&study).expect("serialise");
    match out {
        Some(path) => {
            lx_engine::atomic_file::write(std::path::Path::new(&path), text.as_bytes()).expect("write the result file");
            for line in lx_results::studies::all_tables(&[lx_results::studies::Study::KvCache(study)]).expect("table") {
                println!("{line}");
            }
        }
        None => println!("{text}"),
    }
}
