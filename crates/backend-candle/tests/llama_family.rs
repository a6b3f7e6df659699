//! The llama family (`llama`, `qwen2`, `qwen3`) on tiny generated GGUF fixtures, checked
//! against llama.cpp itself (llama-cpp-2) on the same files: no model download needed.
//!
//! Each fixture has 3 layers, GQA and what sets its architecture apart: `llama` has a
//! separate output projection, attention-output and FFN biases, llama 3's RoPE frequency
//! factors (`rope_freqs.weight`) and adjacent-pair RoPE; `qwen2` has Q/K/V and output biases, linear RoPE scaling and a tied
//! output; `qwen3` has per-head Q/K norms and a head size that is not hidden / heads. Each
//! comes with f32 weights (candle and llama.cpp compute the same function: logits agree
//! to float rounding) and with mixed f16/Q8_0 weights (both quantize activations the
//! same way for Q8_0; llama.cpp rounds activations to f16 for f16 weights, candle does
//! not: logits agree to that rounding).
//!
//! `LX_LLAMA_LOG=1` shows llama.cpp's log (why it refuses a fixture, say).

use candle_core::quantized::GgmlDType;
use lx_test_support::steps::chunk;
use lx_format::gguf::synth::{spm_vocabulary, Shape};
use lx_test_support::tiny_gguf::{add_tensor, values, Ty, T};
use lx_backend_candle::{
    Activation, CandleBackend, DeviceChoice, KvCache, Options, RopeStyle, Rows, WeightFormat,
};
use lx_engine::backend::{Backend, BackendError, Batch, Choice, LoadSpec, Outputs, TokenId};
use lx_format::gguf::GgufWriter;
use std::path::{Path, PathBuf};

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

const VOCAB: usize = 128;
const LAYERS: usize = 3;
const H: usize = 64;
const FF: usize = 128;
const PROMPT: usize = 40;
const N_GEN: usize = 32;

/// What a fixture's architecture has.
#[derive(Clone, Copy, Debug)]
struct Spec {
    arch: &'static str,
    nh: usize,
    nkv: usize,
    dk: usize,
    qkv_bias: bool,
    /// Output-projection and FFN biases (optional in llama files).
    other_biases: bool,
    output_bias: bool,
    qk_norm: bool,
    tied: bool,
    rope_freqs: bool,
    rope_base: f32,
    rope_linear: Option<f32>,
}

const LLAMA: Spec = Spec {
    arch: "llama",
    nh: 4,
    nkv: 2,
    dk: 16,
    qkv_bias: false,
    other_biases: true,
    output_bias: false,
    qk_norm: false,
    tied: false,
    rope_freqs: true,
    rope_base: 500_000.0,
    rope_linear: None,
};
const QWEN2: Spec = Spec {
    arch: "qwen2",
    nh: 4,
    nkv: 1,
    dk: 16,
    qkv_bias: true,
    other_biases: false,
    output_bias: true,
    qk_norm: false,
    tied: true,
    rope_freqs: false,
    rope_base: 1_000_000.0,
    rope_linear: Some(2.0),
};
const QWEN3: Spec = Spec {
    arch: "qwen3",
    nh: 4,
    nkv: 2,
    dk: 32,
    qkv_bias: false,
    other_biases: false,
    output_bias: false,
    qk_norm: true,
    tied: true,
    rope_freqs: false,
    rope_base: 1_000_000.0,
    rope_linear: None,
};
const SPECS: [Spec; 3] = [LLAMA, QWEN2, QWEN3];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Weights {
    F32,
    /// Q8_0 embedding, output and Q/V/gate/down projections; f16 K/output/up projections.
    Mixed,
}

fn tensors(s: &Spec, wt: Weights) -> Vec<T> {
    let mut v = Vec::new();
    let mut seed = 100;
    let mut add = |name: String, shape: &[usize], ty: Ty, data: Vec<f32>| {
        v.push(T {
            name,
            shape: shape.to_vec(),
            ty,
            data,
        });
    };
    let mut next = || {
        seed += 1;
        seed
    };
    let pick = |mixed: Ty| if wt == Weights::Mixed { mixed } else { Ty::F32 };
    let q8 = pick(Ty::Q(GgmlDType::Q8_0));
    let f16 = pick(Ty::F16);
    let n: fn(&[usize]) -> usize = |sh| sh.iter().product();
    let norm = |seed| -> Vec<f32> {
        values(H.max(s.dk), seed, 0.2)
            .into_iter()
            .map(|x| 1.0 + x)
            .collect()
    };
    let (nh, nkv, dk) = (s.nh, s.nkv, s.dk);

    add(
        "token_embd.weight".into(),
        &[VOCAB, H],
        q8,
        values(VOCAB * H, next(), 1.0),
    );
    add(
        "output_norm.weight".into(),
        &[H],
        Ty::F32,
        norm(next())[..H].to_vec(),
    );
    if !s.tied {
        add(
            "output.weight".into(),
            &[VOCAB, H],
            q8,
            values(VOCAB * H, next(), 1.0),
        );
    }
    if s.output_bias {
        add(
            "output.bias".into(),
            &[VOCAB],
            Ty::F32,
            values(VOCAB, next(), 0.5),
        );
    }
    if s.rope_freqs {
        // llama 3 style: factor 1 for the fastest pairs up to 8 for the slowest.
        let half = dk / 2;
        let f = (0..half)
            .map(|i| 1.0 + 7.0 * i as f32 / (half - 1) as f32)
            .collect();
        add("rope_freqs.weight".into(), &[half], Ty::F32, f);
    }
    for il in 0..LAYERS {
        let w = |x: &str| format!("blk.{il}.{x}.weight");
        let b = |x: &str| format!("blk.{il}.{x}.bias");
        add(w("attn_norm"), &[H], Ty::F32, norm(next())[..H].to_vec());
        for (name, shape, ty) in [
            ("attn_q", [nh * dk, H], q8),
            ("attn_k", [nkv * dk, H], f16),
            ("attn_v", [nkv * dk, H], q8),
            ("attn_output", [H, nh * dk], f16),
            ("ffn_gate", [FF, H], q8),
            ("ffn_up", [FF, H], f16),
            ("ffn_down", [H, FF], q8),
        ] {
            add(w(name), &shape, ty, values(n(&shape), next(), 0.3));
        }
        if s.qkv_bias {
            add(
                b("attn_q"),
                &[nh * dk],
                Ty::F32,
                values(nh * dk, next(), 0.5),
            );
            add(
                b("attn_k"),
                &[nkv * dk],
                Ty::F32,
                values(nkv * dk, next(), 0.5),
            );
            add(
                b("attn_v"),
                &[nkv * dk],
                Ty::F32,
                values(nkv * dk, next(), 0.5),
            );
        }
        if s.other_biases {
            add(b("attn_output"), &[H], Ty::F32, values(H, next(), 0.5));
            add(b("ffn_gate"), &[FF], Ty::F32, values(FF, next(), 0.5));
            add(b("ffn_up"), &[FF], Ty::F32, values(FF, next(), 0.5));
            add(b("ffn_down"), &[H], Ty::F32, values(H, next(), 0.5));
        }
        if s.qk_norm {
            add(
                w("attn_q_norm"),
                &[dk],
                Ty::F32,
                norm(next())[..dk].to_vec(),
            );
            add(
                w("attn_k_norm"),
                &[dk],
                Ty::F32,
                norm(next())[..dk].to_vec(),
            );
        }
        add(w("ffn_norm"), &[H], Ty::F32, norm(next())[..H].to_vec());
    }
    v
}

fn fixture(dir: &Path, s: &Spec, wt: Weights, edit: impl FnOnce(&mut Vec<T>)) -> PathBuf {
    let a = s.arch;
    let shape = Shape {
        architecture: a,
        hidden: H as u64,
        layers: LAYERS as u64,
        ffn: FF as u64,
        heads: s.nh as u64,
        kv_heads: s.nkv as u64,
        head_dim: s.dk as u64,
        vocab: VOCAB as u64,
        context: 2048,
        tied: s.tied,
    };
    let mut w = shape
        .header(&format!("tiny {a} fixture"))
        .kv(format!("{a}.attention.layer_norm_rms_epsilon"), 1e-6f32)
        .kv(format!("{a}.rope.freq_base"), s.rope_base);
    if let Some(f) = s.rope_linear {
        w = w
            .kv(format!("{a}.rope.scaling.type"), "linear")
            .kv(format!("{a}.rope.scaling.factor"), f);
    }
    w = spm_vocabulary(w, VOCAB);
    let mut ts = tensors(s, wt);
    edit(&mut ts);
    for t in &ts {
        w = add_tensor(w, t);
    }
    let p = dir.join(format!("{a}-{wt:?}.gguf"));
    w.write(&p).unwrap();
    p
}

fn load(
    path: &Path,
    slots: usize,
    ctx: usize,
    w: WeightFormat,
) -> Result<CandleBackend, BackendError> {
    CandleBackend::load_with(
        &LoadSpec {
            model_path: path.to_path_buf(),
            threads: 2,
            slots,
            ctx_per_slot: ctx,
            max_batch_tokens: 4096,
            gpu_layers: Some(0),
            ..Default::default()
        },
        &Options {
            device: DeviceChoice::Cpu,
            layer_weights: Some(w),
        },
    )
}

fn prompt(n: usize, seed: u32) -> Vec<TokenId> {
    // Starts with BOS; avoids the control tokens after it.
    std::iter::once(1)
        .chain((1..n as u32).map(|i| 3 + (i * 37 + seed * 11) % (VOCAB as u32 - 3)))
        .collect()
}

/// Candle's raw logits for every position of `toks` in one prefill.
fn candle_logits(b: &CandleBackend, toks: &[TokenId]) -> Vec<Vec<f32>> {
    let model = b.model();
    let ropes = model.rope_tables(toks.len()).unwrap();
    let mut cache = KvCache::new(&model.cfg, toks.len(), model.device()).unwrap();
    let mut rows = Vec::new();
    model
        .forward(
            &[toks],
            &[0],
            &mut [&mut cache],
            &ropes,
            Rows::All,
            &mut |_, t| {
                let (_, r, v) = t.dims3()?;
                let flat = t.flatten_all()?.to_vec1::<f32>()?;
                rows.extend((0..r).map(|i| flat[i * v..(i + 1) * v].to_vec()));
                Ok(())
            },
        )
        .unwrap();
    rows
}

fn candle_greedy(b: &mut CandleBackend, prompt: &[TokenId], n: usize) -> Vec<TokenId> {
    b.clear(0);
    let mut out = Vec::new();
    let mut c = step(b, chunk(0, 0, prompt, Outputs::Last)).remove(0);
    out.push(c.token);
    while out.len() < n {
        let pos = prompt.len() + out.len() - 1;
        c = step(b, chunk(0, pos, &[c.token], Outputs::Last)).remove(0);
        out.push(c.token);
    }
    out
}

fn step(b: &mut CandleBackend, c: lx_engine::backend::Chunk) -> Vec<Choice> {
    b.step(&Batch {
        chunks: vec![c],
        top_logprobs: VOCAB,
    })
    .unwrap()
    .into_iter()
    .flat_map(|o| o.choices)
    .collect()
}

fn argmax(v: &[f32]) -> TokenId {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as TokenId
}

/// llama.cpp in its most precise CPU configuration: no flash attention, f32 KV cache.
fn llama_context<'m>(
    backend: &LlamaBackend,
    model: &'m LlamaModel,
    n_ctx: usize,
) -> llama_cpp_2::context::LlamaContext<'m> {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx as u32))
        .with_n_batch(n_ctx as u32)
        .with_n_ubatch(n_ctx as u32)
        .with_n_threads(2)
        .with_n_threads_batch(2)
        .with_flash_attention_policy(0)
        .with_type_k(KvCacheType::F32)
        .with_type_v(KvCacheType::F32);
    model
        .new_context(backend, params)
        .expect("llama.cpp context")
}

/// llama.cpp's logits for every position of `toks`, and its greedy continuation.
fn llama_cpp_run(
    backend: &LlamaBackend,
    path: &Path,
    toks: &[TokenId],
    n_gen: usize,
) -> (Vec<Vec<f32>>, Vec<TokenId>) {
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .unwrap_or_else(|e| {
            panic!(
                "llama.cpp refuses {}: {e} (LX_LLAMA_LOG=1 shows why)",
                path.display()
            )
        });
    assert_eq!(model.n_vocab() as usize, VOCAB);
    let n_ctx = toks.len() + n_gen + 8;
    let mut ctx = llama_context(backend, &model, n_ctx);
    let mut batch = LlamaBatch::new(n_ctx, 1);
    for (i, &t) in toks.iter().enumerate() {
        batch
            .add(LlamaToken(t as i32), i as i32, &[0], true)
            .unwrap();
    }
    ctx.decode(&mut batch).expect("llama.cpp decode");
    let logits: Vec<Vec<f32>> = (0..toks.len())
        .map(|i| ctx.get_logits_ith(i as i32).to_vec())
        .collect();
    let mut out = vec![argmax(logits.last().unwrap())];
    while out.len() < n_gen {
        batch.clear();
        let pos = toks.len() + out.len() - 1;
        batch
            .add(
                LlamaToken(*out.last().unwrap() as i32),
                pos as i32,
                &[0],
                true,
            )
            .unwrap();
        ctx.decode(&mut batch).expect("llama.cpp decode");
        out.push(argmax(ctx.get_logits_ith(0)));
    }
    (logits, out)
}

/// Near-tie bound for the quantized fixtures: where candle's and llama.cpp's argmax differ,
/// llama.cpp's own logits for the two tokens must be closer than this. Their distance
/// from the exact (f32) computation of the same file is of this order (see the test's output).
const NEAR_TIE: f32 = 0.5;

fn mean_max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f32) {
    let (mut sum, mut max, mut n) = (0f64, 0f32, 0usize);
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            sum += (p - q).abs() as f64;
            max = max.max((p - q).abs());
            n += 1;
        }
    }
    (sum / n as f64, max)
}

/// Teacher-forced logits and free-running greedy tokens, candle against llama.cpp, on every
/// fixture. One test, because llama.cpp's backend initialises once per process.
///
/// f32 weights: candle and llama.cpp compute the same function, so logits agree to float
/// rounding and every argmax and greedy token is identical. Mixed f16/Q8_0 weights: both
/// quantize activations to Q8_0 for Q8_0 weights, and llama.cpp also rounds activations to
/// f16 for f16 weights; a rounding that flips in one layer changes the next layer's input,
/// so logits agree to quantization noise. Then every argmax disagreement must be a near-tie
/// for llama.cpp, and greedy streams may part only at a near-tie.
#[test]
fn llama_family_matches_llama_cpp() {
    let mut backend = LlamaBackend::init().expect("llama.cpp backend");
    if std::env::var_os("LX_LLAMA_LOG").is_none() {
        backend.void_logs();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for s in SPECS {
        for wt in [Weights::F32, Weights::Mixed] {
            let what = format!("{} {wt:?}", s.arch);
            let path = fixture(dir.path(), &s, wt, |_| {});
            let toks = prompt(PROMPT, 1);
            let (want, want_gen) = llama_cpp_run(&backend, &path, &toks, N_GEN);
            // Candle holds the weights as stored: its kernels for f32, f16 and Q8_0 are
            // the counterparts of llama.cpp's.
            let mut b = load(&path, 1, PROMPT + N_GEN + 8, WeightFormat::Quantized).unwrap();
            let got = candle_logits(&b, &toks);
            let (mean_d, max_d) = mean_max_abs_diff(&got, &want);
            let scale = want.iter().flatten().fold(0f32, |m, x| m.max(x.abs()));
            let mut agree = 0;
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (cg, cw) = (argmax(g), argmax(w));
                if cg == cw {
                    agree += 1;
                } else {
                    let gap = w[cw as usize] - w[cg as usize];
                    if wt == Weights::F32 || gap > NEAR_TIE {
                        failures.push(format!("{what}: position {i}: llama.cpp {cw}, candle {cg}, llama.cpp's gap {gap}"));
                    }
                }
            }
            let gen = candle_greedy(&mut b, &toks, N_GEN);
            let same = gen
                .iter()
                .zip(&want_gen)
                .take_while(|(a, b)| a == b)
                .count();
            let mut line = format!(
                "{what:12}: max |Δlogit| {max_d:.2e}, mean {mean_d:.2e} (logits up to {scale:.1}); \
                 argmax {agree}/{PROMPT}; greedy {same}/{N_GEN} identical"
            );
            let tol = match wt {
                // The same function up to float rounding.
                Weights::F32 => 1e-4 * scale.max(1.0),
                // Quantization noise: a few percent of the logit scale at worst.
                Weights::Mixed => 0.05 * scale.max(1.0),
            };
            if max_d > tol {
                failures.push(format!("{what}: max |Δlogit| {max_d} > {tol}"));
            }
            if wt == Weights::Mixed {
                // For scale: how far each is from the exact computation of this file
                // (candle with every weight expanded to f32, no activation rounding).
                let exact =
                    candle_logits(&load(&path, 1, PROMPT, WeightFormat::F32).unwrap(), &toks);
                let (lm, _) = mean_max_abs_diff(&want, &exact);
                let (cm, _) = mean_max_abs_diff(&got, &exact);
                line.push_str(&format!(
                    "; mean |Δ| from exact f32: llama.cpp {lm:.2e}, candle {cm:.2e}"
                ));
                if same < N_GEN {
                    // Greedy streams may part only where llama.cpp itself nearly tied.
                    let gap = llama_cpp_gaps(&backend, &path, &toks, &want_gen)[same];
                    line.push_str(&format!(
                        " (parted where llama.cpp's top-2 gap is {gap:.3})"
                    ));
                    if gap > NEAR_TIE {
                        failures.push(format!("{what}: greedy parts at step {same}, where llama.cpp's top-2 gap is {gap}\n  llama.cpp {want_gen:?}\n  candle    {gen:?}"));
                    }
                }
            } else if same != N_GEN {
                failures.push(format!(
                    "{what}: greedy {same}/{N_GEN}\n  llama.cpp {want_gen:?}\n  candle    {gen:?}"
                ));
            }
            eprintln!("{line}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// llama.cpp's top-2 logit gap at each step of its own greedy stream `gen` after `toks`.
fn llama_cpp_gaps(
    backend: &LlamaBackend,
    path: &Path,
    toks: &[TokenId],
    gen: &[TokenId],
) -> Vec<f32> {
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).unwrap();
    let mut seq = toks.to_vec();
    seq.extend_from_slice(&gen[..gen.len() - 1]);
    let mut ctx = llama_context(backend, &model, seq.len() + 8);
    let mut batch = LlamaBatch::new(seq.len(), 1);
    for (i, &t) in seq.iter().enumerate() {
        batch
            .add(LlamaToken(t as i32), i as i32, &[0], i + 1 >= toks.len())
            .unwrap();
    }
    ctx.decode(&mut batch).expect("llama.cpp decode");
    (0..gen.len())
        .map(|k| {
            let mut l = ctx.get_logits_ith((toks.len() - 1 + k) as i32).to_vec();
            l.sort_by(|a, b| b.total_cmp(a));
            l[0] - l[1]
        })
        .collect()
}

/// The step mechanics on every llama-family fixture: chunked prefill (down to one token)
/// equals the whole prompt; `Outputs::Last`/`None`; sequences at the same position run as
/// one batched pass give what they give alone.
#[test]
fn chunking_and_batching_per_architecture() {
    let dir = tempfile::tempdir().unwrap();
    for s in SPECS {
        // f32 weights: no activation quantization, so a different cut changes results by
        // float rounding only. (With quantized activations a rounding that flips in one
        // layer is amplified through this random model; tiny.rs covers quantized layers.)
        let path = fixture(dir.path(), &s, Weights::F32, |_| {});
        let mut b = load(&path, 3, 96, WeightFormat::F32).unwrap();
        let toks = prompt(45, 2);
        let whole = step(&mut b, chunk(0, 0, &toks, Outputs::All));
        assert_eq!(whole.len(), toks.len());
        for cut in [1usize, 7, 16] {
            b.clear(0);
            let mut rows = Vec::new();
            let mut pos = 0;
            while pos < toks.len() {
                let end = (pos + cut).min(toks.len());
                rows.extend(step(&mut b, chunk(0, pos, &toks[pos..end], Outputs::All)));
                pos = end;
            }
            for (i, (a, w)) in rows.iter().zip(&whole).enumerate() {
                assert_close(a, w, 2e-4, &format!("{} chunks of {cut}, row {i}", s.arch));
            }
        }
        // None then Last continues where the cache left off.
        b.clear(0);
        assert!(step(&mut b, chunk(0, 0, &toks[..30], Outputs::None)).is_empty());
        let last = step(&mut b, chunk(0, 30, &toks[30..], Outputs::Last));
        assert_eq!(last.len(), 1);
        assert_close(
            &last[0],
            whole.last().unwrap(),
            2e-4,
            &format!("{} last", s.arch),
        );
        // Three slots at the same position and length: one batched pass.
        let prompts: Vec<Vec<TokenId>> = (0..3).map(|k| prompt(20, 10 + k)).collect();
        let mut alone = Vec::new();
        for p in &prompts {
            b.clear(0);
            alone.push(step(&mut b, chunk(0, 0, p, Outputs::Last)).remove(0));
        }
        let out = b
            .step(&Batch {
                chunks: (0..3)
                    .map(|k| chunk(k as u32, 0, &prompts[k], Outputs::Last))
                    .collect(),
                top_logprobs: VOCAB,
            })
            .unwrap();
        for (k, o) in out.iter().enumerate() {
            assert_close(
                &o.choices[0],
                &alone[k],
                2e-4,
                &format!("{} batched slot {k}", s.arch),
            );
        }
    }
}

fn assert_close(a: &Choice, b: &Choice, tol: f32, what: &str) {
    assert_eq!(a.token, b.token, "{what}: argmax differs");
    let lp = |c: &Choice| {
        let mut v = vec![0f32; VOCAB];
        for s in &c.top {
            v[s.token as usize] = s.logprob;
        }
        v
    };
    let d = lp(a)
        .iter()
        .zip(lp(b))
        .map(|(p, q)| (p - q).abs())
        .fold(0f32, f32::max);
    assert!(d <= tol, "{what}: log-probs differ by {d}");
}

/// What the configuration makes of each architecture.
#[test]
fn config_per_architecture() {
    let dir = tempfile::tempdir().unwrap();
    for s in SPECS {
        let path = fixture(dir.path(), &s, Weights::F32, |_| {});
        let b = load(&path, 1, 16, WeightFormat::F32).unwrap();
        let c = b.config();
        assert_eq!(c.architecture, s.arch);
        assert_eq!(
            (c.head_count, c.head_count_kv, c.key_length),
            (s.nh, s.nkv, s.dk)
        );
        let style = if s.arch == "llama" {
            RopeStyle::Interleaved
        } else {
            RopeStyle::Neox
        };
        assert_eq!(c.rope_style, style, "{}", s.arch);
        assert_eq!(c.activation, Activation::Silu);
        assert_eq!(c.qk_norm, s.qk_norm);
        assert!(!c.post_norms && c.embed_scale == 1.0 && c.final_logit_softcap.is_none());
        assert!(c.is_local.iter().all(|&l| !l) && c.sliding_window.is_none());
        assert_eq!(c.rope_scale_global, s.rope_linear.unwrap_or(1.0) as f64);
        assert!((c.attn_scale - 1.0 / (s.dk as f64).sqrt()).abs() < 1e-12);
    }
}

/// What a llama-family file may lack, and what it must not.
#[test]
fn llama_family_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let err = |p: &Path| match load(p, 1, 16, WeightFormat::F16) {
        Ok(_) => panic!("{} loaded", p.display()),
        Err(e) => e,
    };
    // Qwen 3 needs its Q/K norms.
    let p = fixture(dir.path(), &QWEN3, Weights::F32, |ts| {
        ts.retain(|t| t.name != "blk.2.attn_k_norm.weight")
    });
    match err(&p) {
        BackendError::Load(m) => assert!(
            m.contains("`blk.2.attn_k_norm.weight`") && m.contains("missing"),
            "{m}"
        ),
        e => panic!("expected Load, got {e:?}"),
    }
    // A bias of the wrong length is named.
    let p = fixture(dir.path(), &QWEN2, Weights::F32, |ts| {
        let t = ts
            .iter_mut()
            .find(|t| t.name == "blk.0.attn_k.bias")
            .unwrap();
        t.shape = vec![3];
        t.data = vec![0.0; 3];
    });
    match err(&p) {
        BackendError::Load(m) => assert!(
            m.contains("`blk.0.attn_k.bias`") && m.contains("shape"),
            "{m}"
        ),
        e => panic!("expected Load, got {e:?}"),
    }
    // A mixture of experts (Mixtral is labelled `llama`) is refused up front.
    let p = dir.path().join("moe.gguf");
    let mut w = GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("llama.block_count", 1u32)
        .kv("llama.context_length", 64u32)
        .kv("llama.embedding_length", H as u32)
        .kv("llama.feed_forward_length", FF as u32)
        .kv("llama.attention.head_count", 4u32)
        .kv("llama.expert_count", 8u32)
        .kv("llama.expert_used_count", 2u32);
    w = spm_vocabulary(w, VOCAB);
    w.tensor_f32(
        "token_embd.weight",
        &[H as u64, VOCAB as u64],
        &vec![0.0; H * VOCAB],
    )
    .write(&p)
    .unwrap();
    match err(&p) {
        BackendError::Unsupported(m) => assert!(m.contains("mixture of experts"), "{m}"),
        e => panic!("expected Unsupported, got {e:?}"),
    }
}
