//! Teacher-forced parity with llama.cpp (llama-cpp-2) on the default model.
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
//! less often than that, and wherever candle's argmax is not llama.cpp's token the two must
//! be a near-tie in candle's logits (within `NEAR_TIE`). llama.cpp's own disagreements have
//! gaps of up to about 0.22 nats on this model, so a bound of 0.15 would fail llama.cpp
//! against itself; the bound is 0.25.

mod common;
use common::*;
use lx_backend_candle::CandleBackend;
use lx_engine::backend::{choose_greedy, Backend, Batch, Outputs, TokenId};

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

const N_GEN: usize = 64;
const NEAR_TIE: f32 = 0.25;

fn long_prompt() -> String {
    // Our own text, long enough (> 512 tokens) that the local layers' window matters.
    let paragraphs = [
        "The river town of Alderbrook grew up around a mill that ground wheat for three valleys. In spring the water \
         ran high and brown, and the miller's children counted the logs that floated past the wheel. Traders came \
         from the coast with salt, dyed cloth and iron tools, and left with flour, wool and honey.",
        "When the railway arrived, the old mill lost most of its trade. A new station was built on the hill above \
         the square, and for a few years the town was crowded with engineers, surveyors and labourers who slept in \
         tents along the embankment. Some of them stayed, married local women and opened shops.",
        "By the turn of the century Alderbrook had a school, two churches, a library donated by a wealthy widow and \
         a brass band that played every Sunday in the park. The library kept a ledger of every book borrowed, and \
         historians still read it to learn what farmers, clerks and schoolteachers liked to read.",
        "The winters were hard. In the great frost of 1895 the river froze from bank to bank, and people walked \
         across the ice to the market on the far side. Bakers sold hot bread from carts, children skated between \
         the boats that were trapped in the ice, and an old soldier charged a penny to cross his cleared path.",
        "During the war the station became a depot for horses and grain. Women ran the post office, the telegraph \
         and the mill, which had been repaired to grind oats for the army. Letters from the front were read aloud \
         in the square, and the names of the fallen were later carved on a stone beside the bridge.",
        "After the war the town changed slowly. Electric light reached the main street first, then the farms. A \
         cinema opened in the old corn exchange, and on Saturday nights young people came from the villages on \
         bicycles to watch films about cowboys, detectives and explorers in distant jungles.",
        "Today the mill is a museum. Visitors can watch the wheel turn, grind a handful of wheat between the stones \
         and buy a bag of flour in the shop. The guide, a retired teacher who grew up in the miller's house, tells \
         every group the same story about the winter when the river froze.",
        "The guide also likes to talk about the flood of 1911. After a week of rain the river rose above the \
         bridge, carried away a row of wooden sheds and filled the cellars of the inn with mud. The landlord \
         rescued his barrels by floating them up the stairs, and for years afterwards he served what he called \
         flood ale, which his customers swore tasted of river water.",
        "Schoolchildren who visit the museum are given a worksheet with questions about the machines. How many \
         teeth does the great gear have? Why was the wheel painted red? Who paid for the new roof in 1932? The \
         answers are hidden on labels around the building, and the first class to find them all wins a cake.",
        "On summer evenings the old square fills with people again. Musicians play under the lime trees, the \
         café puts tables on the cobbles, and the oldest residents sit on the bench by the bridge, arguing about \
         whose grandfather built the station and whose grandmother ran the telegraph office during the war. \
         Nobody remembers exactly, but everybody agrees that the best bread in the valley was baked",
    ];
    paragraphs.join("\n\n")
}

struct Llama {
    _backend: LlamaBackend,
    model: &'static LlamaModel,
}

fn llama() -> Llama {
    let mut backend = LlamaBackend::init().expect("llama backend");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, model_path(), &LlamaModelParams::default())
        .expect("llama.cpp load");
    let model: &'static LlamaModel = Box::leak(Box::new(model));
    Llama {
        _backend: backend,
        model,
    }
}

/// A llama.cpp context for one sequence of up to `n_ctx` tokens, all of them in one batch,
/// on 2 threads. `precise`: without flash attention and with an f32 KV cache (llama.cpp's
/// most precise CPU configuration) rather than its defaults.
fn llama_context(l: &Llama, n_ctx: usize, precise: bool) -> LlamaContext<'static> {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx as u32))
        .with_n_batch(n_ctx as u32)
        .with_n_ubatch(512)
        .with_n_threads(2)
        .with_n_threads_batch(2);
    let params = if precise {
        params
            .with_flash_attention_policy(0)
            .with_type_k(KvCacheType::F32)
            .with_type_v(KvCacheType::F32)
    } else {
        params
    };
    l.model
        .new_context(&l._backend, params)
        .expect("llama context")
}

/// Decode `tokens` from position 0 as one batch (of room for `capacity`), with logits for
/// the positions `logits_at` picks; the batch is returned for further steps.
fn prefill(
    ctx: &mut LlamaContext<'static>,
    tokens: &[LlamaToken],
    capacity: usize,
    logits_at: impl Fn(usize) -> bool,
) -> LlamaBatch<'static> {
    let mut batch = LlamaBatch::new(capacity, 1);
    for (i, &t) in tokens.iter().enumerate() {
        batch.add(t, i as i32, &[0], logits_at(i)).unwrap();
    }
    ctx.decode(&mut batch).expect("decode prompt");
    batch
}

/// Tokenize with BOS and greedily continue `n` tokens, single sequence.
fn llama_greedy(l: &Llama, text: &str, n: usize) -> (Vec<TokenId>, Vec<TokenId>, Vec<f32>) {
    let prompt: Vec<LlamaToken> = l.model.vocab().tokenize(text.as_bytes(), true, false);
    let n_ctx = prompt.len() + n + 8;
    let mut ctx = llama_context(l, n_ctx, false);
    let mut batch = prefill(&mut ctx, &prompt, n_ctx, |i| i + 1 == prompt.len());
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    let mut last_row = batch.n_tokens() - 1;
    for i in 0..n {
        let logits = ctx.get_logits_ith(last_row);
        let c = choose_greedy(logits, 2);
        gaps.push(c.top[0].logprob - c.top[1].logprob);
        out.push(c.token);
        if i + 1 == n {
            break;
        }
        batch.clear();
        batch
            .add(
                LlamaToken(c.token as i32),
                (prompt.len() + i) as i32,
                &[0],
                true,
            )
            .unwrap();
        ctx.decode(&mut batch).expect("decode");
        last_row = 0;
    }
    (prompt.iter().map(|t| t.0 as TokenId).collect(), out, gaps)
}

/// llama.cpp's logits for every continuation position of `prompt + cont`, computed in one
/// batch in its precise configuration: the same teacher forcing candle gets, so llama.cpp's
/// agreement with its own greedy stream sets the bar for candle's on this machine.
fn llama_forced(l: &Llama, prompt: &[TokenId], cont: &[TokenId]) -> Vec<Vec<f32>> {
    let seq: Vec<LlamaToken> = prompt.iter().chain(&cont[..cont.len() - 1]).map(|&t| LlamaToken(t as i32)).collect();
    let n = seq.len();
    let mut ctx = llama_context(l, n + 8, true);
    prefill(&mut ctx, &seq, n, |i| i + 1 >= prompt.len());
    (0..cont.len()).map(|i| ctx.get_logits_ith((prompt.len() - 1 + i) as i32).to_vec()).collect()
}

/// How one implementation's argmax compares with llama.cpp's greedy stream, position by
/// position: agreements, and each disagreement's gap (best − llama.cpp's token, nats).
#[derive(Default)]
struct Forced {
    agree: usize,
    total: usize,
    gaps: Vec<(usize, usize, f32)>,
}

impl Forced {
    /// `gap`: the implementation's best log-probability minus that of llama.cpp's token
    /// (0 where its argmax is llama.cpp's token).
    fn add(&mut self, prompt: usize, pos: usize, gap: f32) -> bool {
        self.total += 1;
        if gap <= 0.0 {
            self.agree += 1;
            return true;
        }
        self.gaps.push((prompt, pos, gap));
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
    let l = llama();
    let long = long_prompt();
    let prompts = [
        "Once upon a time, in a small village,".to_string(),
        "The most important thing to remember when learning a new programming language is"
            .to_string(),
        long,
    ];
    let mut b = CandleBackend::load(&spec(1, 1024)).expect("candle load");
    let (mut candle, mut itself) = (Forced::default(), Forced::default());
    for (pi, text) in prompts.iter().enumerate() {
        let (prompt, cont, llama_gaps) = llama_greedy(&l, text, N_GEN);
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
        let precise = llama_forced(&l, &prompt, &cont);
        let mut line = String::new();
        for (i, &want) in cont.iter().enumerate() {
            let c = &choices[prompt.len() - 1 + i];
            let gap = if c.token == want {
                0.0
            } else {
                c.top[0].logprob - c.top.iter().find(|s| s.token == want).map_or(f32::NEG_INFINITY, |s| s.logprob)
            };
            if !candle.add(pi, i, gap) {
                line.push_str(&format!(
                    " [pos {i}: llama {want} / candle {} gap {gap:.3}, llama's own top-2 gap {:.3}]",
                    c.token, llama_gaps[i]
                ));
            }
            let logits = &precise[i];
            let best = choose_greedy(logits, 0).token as usize;
            itself.add(pi, i, logits[best] - logits[want as usize]);
        }
        eprintln!(
            "prompt {pi}: {} prompt tokens; continuation {:?}{}",
            prompt.len(),
            detokenize(&model_path(), &cont[..16]),
            if line.is_empty() { " — all agree".to_string() } else { line }
        );
    }
    eprintln!(
        "argmax agreement with llama.cpp's greedy stream: candle {}/{} = {:.1}%; llama.cpp's precise configuration {}/{} = {:.1}% (gaps {:?})",
        candle.agree,
        candle.total,
        candle.rate() * 100.0,
        itself.agree,
        itself.total,
        itself.rate() * 100.0,
        itself.gaps.iter().map(|g| format!("{:.3}", g.2)).collect::<Vec<_>>()
    );
    let not_ties: Vec<_> = candle.gaps.iter().filter(|g| g.2 > NEAR_TIE).collect();
    assert!(not_ties.is_empty(), "disagreements that are not near-ties (prompt, position, gap): {not_ties:?}");
    assert!(
        candle.rate() >= itself.rate() - MARGIN,
        "candle agrees at {:.1}%, more than {:.0} points below llama.cpp's agreement with itself ({:.1}%)",
        candle.rate() * 100.0,
        MARGIN * 100.0,
        itself.rate() * 100.0
    );
}

/// Diagnostics (ignored by default): distance of each implementation's logits from the
/// f32 reference (this backend with every weight dequantized to f32: the quantized
/// file's model computed without activation quantization or half precision), at sampled
/// positions of the long prompt. Prints mean and max |Δlogit| per implementation.
#[test]
#[ignore]
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
        prefill(&mut ctx, &prompt, n, &sample);
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
                0,
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

/// Diagnostics (ignored by default): the same profile between two llama.cpp
/// configurations (default: flash attention auto, f16 KV; precise: no flash attention,
/// f32 KV), for scale: this is how far llama.cpp is from itself.
#[test]
#[ignore]
fn llama_cpp_self_difference_profile() {
    let l = llama();
    let text = long_prompt();
    let prompt: Vec<LlamaToken> = l.model.vocab().tokenize(text.as_bytes(), true, false);
    let n = prompt.len();
    let sample = |i: usize| i.is_multiple_of(32) || i + 1 == n;
    let mut ctxs = Vec::new();
    for precise in [false, true] {
        let mut ctx = llama_context(&l, n + 8, precise);
        prefill(&mut ctx, &prompt, n, &sample);
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
