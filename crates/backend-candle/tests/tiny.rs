//! Mechanics and bad input on tiny generated Gemma 3 GGUF fixtures (no real model needed).
//!
//! The fixture has 2 layers (layer 0 local with a 4-token sliding window, layer 1 global),
//! GQA (2 query heads, 1 KV head) and a mix of tensor types (Q8_0 embedding, Q5_0, Q8_0,
//! Q4_0, F16 and F32 projections), so the paths that matter run in milliseconds.

use candle_core::quantized::GgmlDType;
use lx_test_support::steps::chunk;
use lx_test_support::tiny_gguf::{add_tensor, values, Ty, T};
use lx_backend_candle::{CandleBackend, DeviceChoice, Options, WeightFormat};
use lx_engine::backend::{Backend, BackendError, Batch, Choice, LoadSpec, Outputs, TokenId};
use lx_format::gguf::synth::Shape;
use lx_format::gguf::GgufWriter;
use std::path::{Path, PathBuf};

const VOCAB: usize = 96;
const H: usize = 64;
const FF: usize = 256;
const NH: usize = 2;
const NKV: usize = 1;
const DK: usize = 32;
const WINDOW: u32 = 4;

fn tensors() -> Vec<T> {
    let mut v = Vec::new();
    let mut seed = 1;
    let mut add = |name: &str, shape: &[usize], ty: Ty, norm: bool| {
        seed += 1;
        let n: usize = shape.iter().product();
        let data = if norm {
            values(n, seed, 0.2).into_iter().map(|x| 1.0 + x).collect()
        } else {
            values(n, seed, 0.5)
        };
        v.push(T {
            name: name.to_string(),
            shape: shape.to_vec(),
            ty,
            data,
        });
    };
    add(
        "token_embd.weight",
        &[VOCAB, H],
        Ty::Q(GgmlDType::Q8_0),
        false,
    );
    add("output_norm.weight", &[H], Ty::F32, true);
    for il in 0..2 {
        let n = |s: &str| format!("blk.{il}.{s}.weight");
        add(&n("attn_norm"), &[H], Ty::F32, true);
        add(&n("attn_q"), &[NH * DK, H], Ty::Q(GgmlDType::Q5_0), false);
        add(&n("attn_k"), &[NKV * DK, H], Ty::F32, false);
        add(&n("attn_v"), &[NKV * DK, H], Ty::Q(GgmlDType::Q8_0), false);
        add(
            &n("attn_output"),
            &[H, NH * DK],
            Ty::Q(GgmlDType::Q4_0),
            false,
        );
        add(&n("attn_q_norm"), &[DK], Ty::F32, true);
        add(&n("attn_k_norm"), &[DK], Ty::F32, true);
        add(&n("post_attention_norm"), &[H], Ty::F32, true);
        add(&n("ffn_norm"), &[H], Ty::F32, true);
        add(&n("ffn_gate"), &[FF, H], Ty::Q(GgmlDType::Q8_0), false);
        add(&n("ffn_up"), &[FF, H], Ty::F32, false);
        add(&n("ffn_down"), &[H, FF], Ty::F16, false);
        add(&n("post_ffw_norm"), &[H], Ty::F32, true);
    }
    v
}

fn writer(arch: &'static str) -> GgufWriter {
    let shape = Shape {
        architecture: arch,
        hidden: H as u64,
        layers: 2,
        ffn: FF as u64,
        heads: NH as u64,
        kv_heads: NKV as u64,
        head_dim: DK as u64,
        vocab: VOCAB as u64,
        context: 1024,
        tied: true,
    };
    shape
        .header("tiny gemma3 fixture")
        .kv(format!("{arch}.attention.sliding_window"), WINDOW)
        .kv(format!("{arch}.attention.sliding_window_pattern"), 2u32)
        .kv(format!("{arch}.vocab_size"), VOCAB as u32)
}

/// Writes a fixture; `edit` may drop or change tensors first.
fn fixture(dir: &Path, file: &str, arch: &'static str, edit: impl FnOnce(&mut Vec<T>)) -> PathBuf {
    let mut ts = tensors();
    edit(&mut ts);
    let mut w = writer(arch);
    for t in &ts {
        w = add_tensor(w, t);
    }
    let p = dir.join(file);
    w.write(&p).unwrap();
    p
}

fn spec(path: &Path, slots: usize, ctx: usize) -> LoadSpec {
    LoadSpec {
        model_path: path.to_path_buf(),
        threads: 2,
        slots,
        ctx_per_slot: ctx,
        max_batch_tokens: 4096,
        gpu_layers: Some(0),
        ..Default::default()
    }
}

/// Mechanics tests hold the layers as Q8_0: candle's quantized kernels treat every row
/// alike, so chunking and batching must not change results beyond float noise. (f16 gemm
/// blocks, and so rounds, by the pass's shape, and `Dual` switches between Q8_0 and f16 by
/// row count; they have their own test below.)
fn load(path: &Path, slots: usize, ctx: usize) -> CandleBackend {
    load_as(path, slots, ctx, WeightFormat::Q8_0)
}

fn load_as(path: &Path, slots: usize, ctx: usize, w: WeightFormat) -> CandleBackend {
    CandleBackend::load_with(
        &spec(path, slots, ctx),
        &Options {
            device: DeviceChoice::Cpu,
            layer_weights: Some(w),
        },
    )
    .expect("load tiny fixture")
}

fn good() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "tiny.gguf", "gemma3", |_| {});
    (dir, p)
}

fn prompt(n: usize, seed: u32) -> Vec<TokenId> {
    (0..n as u32)
        .map(|i| (i * 37 + seed * 11 + 5) % VOCAB as u32)
        .collect()
}

/// All chunks of one step, each with Outputs::All and full log-prob rows.
fn run(b: &mut CandleBackend, chunks: Vec<lx_engine::backend::Chunk>) -> Vec<Vec<Choice>> {
    b.step(&Batch {
        chunks,
        top_logprobs: VOCAB,
    })
    .unwrap()
    .into_iter()
    .map(|o| o.choices)
    .collect()
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
    let (x, y) = (lp(a), lp(b));
    let d = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs())
        .fold(0f32, f32::max);
    assert!(d <= tol, "{what}: log-probs differ by {d}");
}

#[test]
fn loads_and_reads_config() {
    let (_d, p) = good();
    let b = load(&p, 2, 64);
    let c = b.config();
    assert_eq!(c.is_local, vec![true, false]);
    assert_eq!(c.sliding_window, Some(WINDOW as usize));
    assert_eq!((c.head_count, c.head_count_kv, c.key_length), (NH, NKV, DK));
    assert_eq!(c.vocab_size, VOCAB);
    assert!((c.rope_base_local - 10_000.0).abs() < 1e-9 && (c.rope_base_global - 1e6).abs() < 1e-3);
    assert!((c.attn_scale - 1.0 / (DK as f64).sqrt()).abs() < 1e-12);
    let info = b.info();
    assert_eq!(info.name, "candle");
    assert!(info.device.starts_with("CPU ("), "{}", info.device);
    // Q8_0 layers decode sequences at different positions in one pass; f16 layers on the
    // CPU run them apart.
    assert!(info.capabilities.mixed_position_batches);
    assert!(!load_as(&p, 2, 64, WeightFormat::F16).info().capabilities.mixed_position_batches);
    assert_eq!(
        (info.capabilities.slots, info.capabilities.ctx_per_slot),
        (2, 64)
    );
}

/// Every way of cutting a prompt into chunks (down to one token at a time, where the
/// attention takes no mask at all) gives the logits of the whole prompt at once; the
/// prompt is much longer than the sliding window, and one cut crosses the attention's
/// 256-row query tiles.
#[test]
fn chunked_prefill_equals_whole() {
    let (_d, p) = good();
    let mut b = load(&p, 1, 600);
    for &(len, cuts) in &[
        (23usize, &[1usize, 3, 4, 5, 7, 23][..]),
        (530, &[100, 256, 530][..]),
    ] {
        let toks = prompt(len, 1);
        b.clear(0);
        let whole = run(&mut b, vec![chunk(0, 0, &toks, Outputs::All)]).remove(0);
        assert_eq!(whole.len(), len);
        for &cut in cuts {
            b.clear(0);
            let mut rows = Vec::new();
            let mut pos = 0;
            while pos < len {
                let end = (pos + cut).min(len);
                rows.extend(
                    run(&mut b, vec![chunk(0, pos, &toks[pos..end], Outputs::All)]).remove(0),
                );
                pos = end;
            }
            for (i, (a, w)) in rows.iter().zip(&whole).enumerate() {
                assert_close(a, w, 2e-4, &format!("len {len} chunks of {cut}, row {i}"));
            }
        }
    }
}

#[test]
fn outputs_last_and_none() {
    let (_d, p) = good();
    let mut b = load(&p, 1, 64);
    let toks = prompt(10, 2);
    let all = run(&mut b, vec![chunk(0, 0, &toks, Outputs::All)]).remove(0);
    b.clear(0);
    let none = b
        .step(&Batch {
            chunks: vec![chunk(0, 0, &toks[..6], Outputs::None)],
            top_logprobs: 0,
        })
        .unwrap();
    assert!(none.is_empty());
    let last = run(&mut b, vec![chunk(0, 6, &toks[6..], Outputs::Last)]).remove(0);
    assert_eq!(last.len(), 1);
    assert_close(&last[0], &all[9], 2e-4, "last row");
    assert_eq!(b.cached_len(0), Some(10));
}

/// Sequences at different positions in one step give what they give alone; so do
/// sequences batched at the same position.
#[test]
fn slots_stepped_together_match_alone() {
    let (_d, p) = good();
    let lens = [5usize, 9, 14, 9];
    let prompts: Vec<Vec<TokenId>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| prompt(n, i as u32 + 3))
        .collect();
    let steps = 6;

    // Alone: one slot, one sequence at a time.
    let mut alone = Vec::new();
    let mut b = load(&p, 1, 64);
    for pr in &prompts {
        b.clear(0);
        let mut c = run(&mut b, vec![chunk(0, 0, pr, Outputs::Last)])
            .remove(0)
            .remove(0);
        let mut seq = vec![c.clone()];
        for k in 0..steps {
            c = run(
                &mut b,
                vec![chunk(0, pr.len() + k, &[c.token], Outputs::Last)],
            )
            .remove(0)
            .remove(0);
            seq.push(c.clone());
        }
        alone.push(seq);
    }

    // Together: 4 slots, every step carries all four (prompts 1 and 3 share a length, so
    // they run as one batched pass).
    let mut b = load(&p, 4, 64);
    let chunks = prompts
        .iter()
        .enumerate()
        .map(|(s, pr)| chunk(s as u32, 0, pr, Outputs::Last))
        .collect();
    let mut cur: Vec<Choice> = run(&mut b, chunks)
        .into_iter()
        .map(|mut v| v.remove(0))
        .collect();
    for (s, c) in cur.iter().enumerate() {
        assert_close(c, &alone[s][0], 2e-4, &format!("slot {s} prefill"));
    }
    for k in 0..steps {
        let chunks = (0..4)
            .map(|s| {
                chunk(
                    s as u32,
                    prompts[s].len() + k,
                    &[cur[s].token],
                    Outputs::Last,
                )
            })
            .collect();
        cur = run(&mut b, chunks)
            .into_iter()
            .map(|mut v| v.remove(0))
            .collect();
        for (s, c) in cur.iter().enumerate() {
            assert_close(c, &alone[s][k + 1], 2e-4, &format!("slot {s} step {k}"));
        }
    }
}

#[test]
fn clear_and_copy_prefix() {
    let (_d, p) = good();
    let mut b = load(&p, 3, 64);
    let a = prompt(12, 7);
    let c = prompt(15, 8);
    let fresh_c = run(&mut b, vec![chunk(2, 0, &c, Outputs::Last)])
        .remove(0)
        .remove(0);
    // Slot 0 used for `a`, cleared, reused for `c`.
    run(&mut b, vec![chunk(0, 0, &a, Outputs::Last)]);
    b.clear(0);
    assert_eq!(b.cached_len(0), Some(0));
    let reused = run(&mut b, vec![chunk(0, 0, &c, Outputs::Last)])
        .remove(0)
        .remove(0);
    assert_close(&reused, &fresh_c, 1e-6, "clear then reuse");
    // Slot 1 starts from slot 0's first 8 positions and prefills the rest.
    b.copy_prefix(0, 1, 8).unwrap();
    assert_eq!(b.cached_len(1), Some(8));
    let copied = run(&mut b, vec![chunk(1, 8, &c[8..], Outputs::Last)])
        .remove(0)
        .remove(0);
    assert_close(&copied, &fresh_c, 2e-4, "copy_prefix then prefill");
    // Rewinding a slot: prefill again from position 4 over what was there.
    let rewound = run(&mut b, vec![chunk(1, 4, &c[4..], Outputs::Last)])
        .remove(0)
        .remove(0);
    assert_close(&rewound, &fresh_c, 2e-4, "rewind");
    assert!(b.copy_prefix(0, 1, 40).is_err());
    assert!(b.copy_prefix(0, 9, 1).is_err());
}

#[test]
fn bad_steps_are_errors_and_leave_state_alone() {
    let (_d, p) = good();
    let mut b = load(&p, 2, 16);
    let err = |b: &mut CandleBackend, c| match b.step(&Batch {
        chunks: vec![c],
        top_logprobs: 0,
    }) {
        Err(BackendError::Step(m)) => m,
        other => panic!("expected a step error, got {other:?}"),
    };
    assert!(err(&mut b, chunk(5, 0, &[1], Outputs::Last)).contains("slot 5"));
    assert!(err(&mut b, chunk(0, 3, &[1], Outputs::Last)).contains("only 0 positions"));
    assert!(err(&mut b, chunk(0, 0, &[1; 17], Outputs::Last)).contains("ctx_per_slot"));
    assert!(err(&mut b, chunk(0, 0, &[VOCAB as u32], Outputs::Last)).contains("out of range"));
    assert!(err(&mut b, chunk(0, 0, &[], Outputs::Last)).contains("empty"));
    assert_eq!(b.cached_len(0), Some(0));
    // Still usable.
    assert_eq!(
        run(&mut b, vec![chunk(0, 0, &[1, 2, 3], Outputs::Last)])[0].len(),
        1
    );
}

fn load_err(path: &Path) -> BackendError {
    match CandleBackend::load_with(
        &spec(path, 1, 16),
        &Options {
            device: DeviceChoice::Cpu,
            layer_weights: None,
        },
    ) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e,
    }
}

#[test]
fn unsupported_architecture_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "mamba.gguf", "mamba", |_| {});
    match load_err(&p) {
        BackendError::Unsupported(m) => {
            assert!(m.contains("`mamba`"), "{m}");
            for arch in lx_backend_candle::SUPPORTED_ARCHITECTURES {
                assert!(m.contains(arch), "{m}");
            }
            assert!(m.contains("gemma3, llama, qwen2, qwen3"), "{m}");
        }
        e => panic!("expected Unsupported, got {e:?}"),
    }
}

#[test]
fn missing_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "missing.gguf", "gemma3", |ts| {
        ts.retain(|t| t.name != "blk.1.ffn_down.weight")
    });
    match load_err(&p) {
        BackendError::Load(m) => assert!(
            m.contains("`blk.1.ffn_down.weight`") && m.contains("missing"),
            "{m}"
        ),
        e => panic!("expected Load, got {e:?}"),
    }
}

#[test]
fn wrong_shape_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "shape.gguf", "gemma3", |ts| {
        let t = ts
            .iter_mut()
            .find(|t| t.name == "blk.0.attn_q.weight")
            .unwrap();
        t.shape = vec![NH * DK + 32, H];
        t.data = values(t.shape.iter().product(), 99, 0.5);
    });
    match load_err(&p) {
        BackendError::Load(m) => assert!(
            m.contains("`blk.0.attn_q.weight`") && m.contains("shape"),
            "{m}"
        ),
        e => panic!("expected Load, got {e:?}"),
    }
}

#[test]
fn quantization_candle_lacks_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("iq4.gguf");
    let mut w = writer("gemma3");
    for t in tensors() {
        if t.name == "blk.0.ffn_down.weight" {
            // IQ4_XS (id 23): 136 bytes per 256 values; rows of FF = 256.
            let dims: Vec<u64> = vec![FF as u64, H as u64];
            w = w.tensor_raw(&t.name, &dims, 23, vec![0u8; H * 136]);
        } else {
            w = add_tensor(w, &t);
        }
    }
    w.write(&p).unwrap();
    match load_err(&p) {
        BackendError::Unsupported(m) => {
            assert!(
                m.contains("`blk.0.ffn_down.weight`") && m.contains("IQ4_XS"),
                "{m}"
            );
        }
        e => panic!("unexpected {e:?}"),
    }
}

#[test]
fn missing_file_and_garbage_are_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        load_err(&dir.path().join("nope.gguf")),
        BackendError::Load(_)
    ));
    let p = dir.path().join("garbage.gguf");
    std::fs::write(&p, b"definitely not a gguf file").unwrap();
    assert!(matches!(load_err(&p), BackendError::Load(_)));
}

#[test]
fn devices_not_compiled_are_reported() {
    let (_d, p) = good();
    for (dev, feature) in [
        (DeviceChoice::Cuda, cfg!(feature = "cuda")),
        (DeviceChoice::Metal, cfg!(feature = "metal")),
    ] {
        if feature {
            continue;
        }
        match CandleBackend::load_with(
            &spec(&p, 1, 16),
            &Options {
                device: dev,
                layer_weights: None,
            },
        ) {
            Err(BackendError::NotCompiled(_, how)) => assert!(how.contains("--features"), "{how}"),
            other => panic!("expected NotCompiled for {dev:?}, got {other:?}"),
        }
    }
}

/// Every weight format computes the same model: logits agree up to quantization noise.
#[test]
fn weight_formats_agree() {
    let (_d, p) = good();
    let toks = prompt(40, 4);
    let mut results = Vec::new();
    for w in [
        WeightFormat::Quantized,
        WeightFormat::Q8_0,
        WeightFormat::F16,
        WeightFormat::Dual,
    ] {
        let mut b = load_as(&p, 1, 64, w);
        let whole = run(&mut b, vec![chunk(0, 0, &toks, Outputs::All)]).remove(0);
        b.clear(0);
        // Dual takes the f16 path for the 40-row prefill and Q8_0 for single tokens.
        let mut stepped = Vec::new();
        for (i, &t) in toks.iter().enumerate() {
            stepped.extend(run(&mut b, vec![chunk(0, i, &[t], Outputs::Last)]).remove(0));
        }
        results.push((w, whole, stepped));
    }
    let lp = |c: &Choice| {
        let mut v = vec![0f32; VOCAB];
        for s in &c.top {
            v[s.token as usize] = s.logprob;
        }
        v
    };
    let (_, reference, _) = &results[0];
    for (w, whole, stepped) in &results {
        for rows in [whole, stepped] {
            for (i, (a, r)) in rows.iter().zip(reference).enumerate() {
                let d = lp(a)
                    .iter()
                    .zip(lp(r))
                    .map(|(x, y)| (x - y).abs())
                    .fold(0f32, f32::max);
                assert!(
                    d < 0.25,
                    "{w:?} row {i}: log-probs differ from the stored format's by {d}"
                );
            }
        }
    }
}

/// The model's one-pass path for sequences at different positions (what the backend takes
/// on a GPU, and on any device for equal-length prompt chunks): three sequences whose
/// prompts differ in length, so their decode tokens sit at positions 5, 9 and 14 (on both
/// sides of the local layer's 4-token window), give each sequence the logits it gets alone,
/// for decode tokens and for 2-token chunks.
#[test]
fn one_pass_at_mixed_positions_matches_each_alone() {
    use lx_backend_candle::{KvCache, Rows};
    let (_d, p) = good();
    let b = load(&p, 1, 64);
    let model = b.model();
    let ropes = model.rope_tables(64).unwrap();
    let prompts: Vec<Vec<TokenId>> = [5usize, 9, 14].iter().enumerate().map(|(i, &n)| prompt(n, i as u32 + 7)).collect();
    let fresh = || -> Vec<KvCache> {
        prompts
            .iter()
            .map(|pr| {
                let mut c = KvCache::new(&model.cfg, 64, model.device()).unwrap();
                model.forward(&[pr], &[0], &mut [&mut c], &ropes, Rows::Last, &mut |_, _| Ok(())).unwrap();
                c
            })
            .collect()
    };
    let rows_of = |t: &candle_core::Tensor| -> Vec<Vec<f32>> { t.flatten_all().unwrap().to_vec1::<f32>().unwrap().chunks(VOCAB).map(<[f32]>::to_vec).collect() };
    let (mut alone, mut together) = (fresh(), fresh());
    let mut pos: Vec<usize> = prompts.iter().map(Vec::len).collect();
    for (step, len) in [1usize, 2, 1, 2, 1].into_iter().enumerate() {
        let toks: Vec<Vec<TokenId>> = (0..3).map(|s| prompt(len, (10 * step + s) as u32)).collect();
        let mut want = Vec::new();
        for s in 0..3 {
            model.forward(&[&toks[s]], &pos[s..=s], &mut [&mut alone[s]], &ropes, Rows::All, &mut |_, t| {
                want.extend(rows_of(t));
                Ok(())
            })
            .unwrap();
        }
        let mut got = Vec::new();
        let refs: Vec<&[TokenId]> = toks.iter().map(Vec::as_slice).collect();
        let mut caches: Vec<&mut KvCache> = together.iter_mut().collect();
        model.forward(&refs, &pos, &mut caches, &ropes, Rows::All, &mut |_, t| {
            got.extend(rows_of(t));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), want.len());
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            let diff = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 2e-4, "step {step} (chunks of {len}), row {r}: logits differ by {diff}");
        }
        for p in &mut pos {
            *p += len;
        }
    }
}
