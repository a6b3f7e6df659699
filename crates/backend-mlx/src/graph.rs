//! Gemma 3 and the llama family (`llama`, `qwen2`, `qwen3`) over mlx-rs (with the `mlx`
//! feature, on macOS aarch64 and Linux x86_64).
//!
//! The same graph as the candle backend (crates/backend-candle/src/model.rs), from the same
//! configuration, and llama.cpp's: embedding (scaled by `sqrt(hidden)` for Gemma); per layer
//! RMS norm → Q/K/V (with biases where the file has them) → per-head RMS norm of Q and K
//! (Gemma 3, Qwen 3) → RoPE, NeoX halves or llama's adjacent pairs, with llama 3's frequency
//! factors where present (Gemma: local base on sliding-window layers, global base and linear
//! scale on the others) → attention with queries scaled by `attn_scale` → output projection →
//! post-attention norm (Gemma) → residual; RMS norm → `act(gate) * up` (GELU-tanh for Gemma,
//! SiLU otherwise) → down → post-FFN norm (Gemma) → residual; final norm → output projection
//! (tied or not, optional bias and soft-capping).
//!
//! One step is one lazy MLX graph: all chunks' rows go through the projections and the FFN
//! together (see [`crate::plan`]); RoPE, the KV-cache write and attention run per chunk. The
//! next tokens and every KV-cache array the step wrote are evaluated together, once, and only
//! the argmax ids (plus full logits when top log-probabilities are asked for) come back to the
//! host. While MLX evaluates a step whose every chunk ends in a next token, the graph of the
//! step that would follow it is built on the lazy argmax ([`Ahead`]), and used if the engine
//! asks for exactly that step.
//!
//! Run and checked against llama.cpp on Linux x86_64, on MLX's CPU backend (the mlx-cpu
//! 0.32.2 wheel; tests/parity_llamacpp.rs). On a Mac the same graph runs on Metal, which only
//! the macOS CI job exercises.

use std::time::{Duration, Instant};

use lx_format::arch::{Activation, Config, RopeStyle};
use lx_engine::backend::{
    choose, Backend, BackendError, BackendInfo, Batch, Capabilities, Choice, ChunkOutput, LoadSpec, Outputs,
    Slot,
};
use lx_format::gguf::{GgmlType, GgufFile};
use lx_engine::handoff::F32Cache;
use mlx_rs::error::Exception;
use mlx_rs::fast::{self, ScaledDotProductAttentionMask};
use mlx_rs::ops::indexing::{TryIndexMutOp, TryIndexOp};
use mlx_rs::{ops, transforms, Array, Device, Dtype};

use crate::dequant::host_f32;
use crate::plan::{self, StepPlan};
use crate::mlx4;
use crate::repack::{self, Affine};
use crate::{Options, WeightMode, MLX_RS_VERSION, MLX_VERSION};

type MxResult<T> = Result<T, Exception>;

fn load_err(e: impl std::fmt::Display) -> BackendError {
    BackendError::Load(e.to_string())
}

fn step_err(e: impl std::fmt::Display) -> BackendError {
    BackendError::Step(e.to_string())
}

/// The devices an MLX worker of this build could use (cheap: does not start MLX).
pub fn devices() -> Vec<String> {
    let chip = lx_machine::hardware::probe().cpu;
    let cpu = format!("CPU: {chip} (MLX {MLX_VERSION} CPU)");
    if crate::cpu_only() {
        vec![cpu]
    } else {
        vec![format!("Metal: {chip} (MLX {MLX_VERSION} GPU)"), cpu]
    }
}

/// A projection matrix (rows = outputs, cols = inputs) as held on the device.
enum Linear {
    /// f16 (or f32) weights, multiplied by `matmul`.
    Dense(Array),
    /// MLX affine quantized weights.
    Quant { w: Array, scales: Array, biases: Array, group: i32, bits: i32 },
}

impl Linear {
    fn quantized(a: &Affine) -> Self {
        let (rows, words, groups) = (a.rows as i32, (a.cols * a.bits as usize / 32) as i32, (a.cols / a.group) as i32);
        Linear::Quant {
            w: Array::from_slice(&a.packed, &[rows, words]),
            scales: Array::from_slice(&a.scales, &[rows, groups]),
            biases: Array::from_slice(&a.biases, &[rows, groups]),
            group: a.group as i32,
            bits: a.bits as i32,
        }
    }

    /// `x` (rows, cols) f32 → (rows, outputs) f32.
    fn forward(&self, x: &Array) -> MxResult<Array> {
        match self {
            // The activations take the weights' type for the product (MLX has no mixed
            // f16 × f32 matmul; casting the small activation is cheaper than the weight).
            Linear::Dense(w) => ops::matmul(x.as_dtype(w.dtype())?, ops::transpose(w)?)?.as_dtype(Dtype::Float32),
            Linear::Quant { w, scales, biases, group, bits } => {
                ops::quantized_matmul(x, w, scales, biases, true, *group, *bits)
            }
        }
    }

    /// Rows `ids` of the matrix as f32 (the embedding lookup).
    fn rows(&self, ids: &Array) -> MxResult<Array> {
        match self {
            Linear::Dense(w) => w.take_axis(ids, 0)?.as_dtype(Dtype::Float32),
            Linear::Quant { w, scales, biases, group, bits } => {
                let b = biases.take_axis(ids, 0)?;
                ops::dequantize(w.take_axis(ids, 0)?, scales.take_axis(ids, 0)?, &b, *group, *bits)
            }
        }
    }

    fn arrays(&self) -> Vec<&Array> {
        match self {
            Linear::Dense(w) => vec![w],
            Linear::Quant { w, scales, biases, .. } => vec![w, scales, biases],
        }
    }
}

/// A projection and its bias, when the file has one.
struct Affinely {
    w: Linear,
    b: Option<Array>,
}

impl Affinely {
    fn forward(&self, x: &Array) -> MxResult<Array> {
        let y = self.w.forward(x)?;
        match &self.b {
            Some(b) => ops::add(&y, b),
            None => Ok(y),
        }
    }
}

struct Layer {
    attn_norm: Array,
    wq: Affinely,
    wk: Affinely,
    wv: Affinely,
    wo: Affinely,
    q_norm: Option<Array>,
    k_norm: Option<Array>,
    post_attn_norm: Option<Array>,
    ffn_norm: Array,
    gate: Affinely,
    up: Affinely,
    down: Affinely,
    post_ffn_norm: Option<Array>,
    local: bool,
}

/// Per slot, per layer: K (1, kv heads, ctx, key length) and V (1, kv heads, ctx, value
/// length), allocated once. Each write replaces the handle with the updated array, so the
/// old buffer has no other owner and MLX can update it in place.
#[derive(Clone)]
struct SlotCache {
    k: Vec<Array>,
    v: Vec<Array>,
}

/// How many matrices ended up in which form (reported in `BackendInfo::version`).
#[derive(Default)]
struct Counts {
    affine_g32: usize,
    mlx4: usize,
    f16: usize,
}

struct Model {
    cfg: Config,
    embed: Linear,
    /// `output.weight` when the file has one; else the tied embedding.
    output: Option<Linear>,
    output_bias: Option<Array>,
    output_norm: Array,
    layers: Vec<Layer>,
    /// MLX multiplies positions by this (candle divides by `rope_scale_global`).
    rope_scale_global: f32,
    /// Global layers' RoPE as MLX's `freqs` (`base^(2i/d) × factor_i`), where the file has
    /// llama 3's frequency factors (`rope_freqs.weight`, which llama.cpp divides by).
    rope_freqs: Option<Array>,
}

/// Checks that tensor `name` is `rows` × `cols` (outermost first) and returns its type.
fn check_shape(g: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<GgmlType, BackendError> {
    let t = g.tensor(name).ok_or_else(|| BackendError::Load(format!("tensor `{name}` is missing from the GGUF file")))?;
    let want: &[u64] = if rows == 1 { &[cols as u64] } else { &[cols as u64, rows as u64] };
    if t.dims != want {
        return Err(BackendError::Load(format!(
            "tensor `{name}` has ggml dims {:?}, expected {want:?} (from the model's metadata)",
            t.dims
        )));
    }
    Ok(t.ggml_type)
}

fn vector(g: &GgufFile, name: &str, len: usize) -> Result<Array, BackendError> {
    let t = check_shape(g, name, 1, len)?;
    let v = Array::from_slice(&host_f32(g, name, t, 1, len)?, &[len as i32]);
    v.eval().map_err(load_err)?;
    Ok(v)
}

/// A vector some files of an architecture have and others lack (biases).
fn optional_vector(g: &GgufFile, name: &str, len: usize) -> Result<Option<Array>, BackendError> {
    g.tensor(name).map(|_| vector(g, name, len)).transpose()
}

fn matrix(g: &GgufFile, name: &str, rows: usize, cols: usize, mode: WeightMode, counts: &mut Counts) -> Result<Linear, BackendError> {
    let t = check_shape(g, name, rows, cols)?;
    let lin = if mode == WeightMode::AsLoaded && repack::repackable(t) {
        let bytes = g.read_tensor_bytes(name).map_err(load_err)?;
        let a = repack::to_affine(t, &bytes, rows, cols)
            .ok_or_else(|| BackendError::Load(format!("tensor `{name}`: cannot repack {} as MLX affine", t.name())))?;
        counts.affine_g32 += 1;
        Linear::quantized(&a)
    } else if mode == WeightMode::Mlx4 && mlx4::applies(cols) {
        counts.mlx4 += 1;
        Linear::quantized(&mlx4::quantize(&host_f32(g, name, t, rows, cols)?, rows, cols)?)
    } else {
        counts.f16 += 1;
        let w = Array::from_slice(&host_f32(g, name, t, rows, cols)?, &[rows as i32, cols as i32]);
        Linear::Dense(w.as_dtype(Dtype::Float16).map_err(load_err)?)
    };
    // Materialise now, one tensor at a time, so the host copy and any f32 intermediate are
    // freed before the next tensor is read.
    transforms::eval(lin.arrays()).map_err(load_err)?;
    Ok(lin)
}

impl Layer {
    fn arrays(&self) -> impl Iterator<Item = &Array> {
        let linears = [&self.wq, &self.wk, &self.wv, &self.wo, &self.gate, &self.up, &self.down];
        let biases = linears.into_iter().filter_map(|a| a.b.as_ref());
        let norms = [&self.q_norm, &self.k_norm, &self.post_attn_norm, &self.post_ffn_norm].into_iter().filter_map(|n| n.as_ref());
        linears.into_iter().flat_map(|a| a.w.arrays()).chain(biases).chain(norms).chain([&self.attn_norm, &self.ffn_norm])
    }
}

impl Model {
    /// Bytes of every weight as held, counted from the arrays themselves.
    fn weight_bytes(&self) -> u64 {
        let arrays = self.embed.arrays().into_iter().chain(self.output.iter().flat_map(Linear::arrays)).chain(self.output_bias.iter()).chain([&self.output_norm]);
        arrays.chain(self.rope_freqs.iter()).chain(self.layers.iter().flat_map(Layer::arrays)).map(|a| a.nbytes() as u64).sum()
    }

    fn load(g: &GgufFile, mode: WeightMode, counts: &mut Counts) -> Result<Self, BackendError> {
        // The engine's parser, as the candle backend: the same architectures, read the same way.
        let cfg = Config::from_gguf(g)?;
        let h = cfg.embedding_length;
        let (nh, nkv, dk, dv, ff, vocab) =
            (cfg.head_count, cfg.head_count_kv, cfg.key_length, cfg.value_length, cfg.feed_forward_length, cfg.vocab_size);
        let embed = matrix(g, "token_embd.weight", vocab, h, mode, counts)?;
        let output = match g.tensor("output.weight") {
            Some(_) => Some(matrix(g, "output.weight", vocab, h, mode, counts)?),
            None => None,
        };
        let output_bias = optional_vector(g, "output.bias", vocab)?;
        let output_norm = vector(g, "output_norm.weight", h)?;
        let rope_freqs = match g.tensor("rope_freqs.weight") {
            Some(_) => {
                let t = check_shape(g, "rope_freqs.weight", 1, dk / 2)?;
                let factors = host_f32(g, "rope_freqs.weight", t, 1, dk / 2)?;
                let base = cfg.rope_base_global;
                let freqs: Vec<f32> =
                    factors.iter().enumerate().map(|(i, f)| (base.powf(2.0 * i as f64 / dk as f64) * *f as f64) as f32).collect();
                Some(Array::from_slice(&freqs, &[freqs.len() as i32]))
            }
            None => None,
        };
        let mut layers = Vec::with_capacity(cfg.block_count);
        for il in 0..cfg.block_count {
            let n = |s: &str| format!("blk.{il}.{s}.weight");
            let mut m = |s: &str, rows: usize, cols: usize| -> Result<Affinely, BackendError> {
                let w = matrix(g, &n(s), rows, cols, mode, counts)?;
                Ok(Affinely { w, b: optional_vector(g, &format!("blk.{il}.{s}.bias"), rows)? })
            };
            let norm = |s: &str, len: usize, present: bool| present.then(|| vector(g, &n(s), len)).transpose();
            layers.push(Layer {
                wq: m("attn_q", nh * dk, h)?,
                wk: m("attn_k", nkv * dk, h)?,
                wv: m("attn_v", nkv * dv, h)?,
                wo: m("attn_output", h, nh * dv)?,
                gate: m("ffn_gate", ff, h)?,
                up: m("ffn_up", ff, h)?,
                down: m("ffn_down", h, ff)?,
                attn_norm: vector(g, &n("attn_norm"), h)?,
                q_norm: norm("attn_q_norm", dk, cfg.qk_norm)?,
                k_norm: norm("attn_k_norm", dk, cfg.qk_norm)?,
                post_attn_norm: norm("post_attention_norm", h, cfg.post_norms)?,
                ffn_norm: vector(g, &n("ffn_norm"), h)?,
                post_ffn_norm: norm("post_ffw_norm", h, cfg.post_norms)?,
                local: cfg.is_local[il],
            });
        }
        Ok(Self {
            rope_scale_global: (1.0 / cfg.rope_scale_global) as f32,
            cfg,
            embed,
            output,
            output_bias,
            output_norm,
            layers,
            rope_freqs,
        })
    }

    /// Builds the step's graph over the tokens `ids` (the host's, or a step's argmax not yet
    /// evaluated) laid out as `p`; writes K/V into `caches` and returns the logits of the rows
    /// in `p.out_rows` (None when no chunk asks for outputs). Nothing is evaluated here.
    fn forward(&self, caches: &mut [SlotCache], p: &StepPlan, ids: &Array) -> MxResult<Option<Array>> {
        let c = &self.cfg;
        let (nh, nkv, dk, dv) = (c.head_count as i32, c.head_count_kv as i32, c.key_length as i32, c.value_length as i32);
        let eps = c.rms_eps as f32;
        let mut x = self.embed.rows(ids)?;
        if c.embed_scale != 1.0 {
            x = ops::multiply(&x, Array::from_f32(c.embed_scale as f32))?;
        }
        // MLX's `traditional` RoPE rotates adjacent pairs, llama.cpp's "normal" style.
        let traditional = c.rope_style == RopeStyle::Interleaved;
        // Optional RMS norm: the norms only some architectures have.
        let norm = |t: Array, w: Option<&Array>| -> MxResult<Array> {
            match w {
                Some(w) => fast::rms_norm(&t, Some(w), eps),
                None => Ok(t),
            }
        };
        for (il, layer) in self.layers.iter().enumerate() {
            let h = fast::rms_norm(&x, Some(&layer.attn_norm), eps)?;
            let q = layer.wq.forward(&h)?;
            let k = layer.wk.forward(&h)?;
            let v = layer.wv.forward(&h)?;
            // MLX takes either a base or explicit frequencies.
            let (base, freqs, scale, window) = if layer.local {
                (Some(c.rope_base_local as f32), None, 1.0, c.sliding_window)
            } else {
                let base = if self.rope_freqs.is_some() { None } else { Some(c.rope_base_global as f32) };
                (base, self.rope_freqs.as_ref(), self.rope_scale_global, None)
            };
            let mut outs = Vec::with_capacity(p.chunks.len());
            for ch in &p.chunks {
                let (r, n, pos) = (ch.row as i32, ch.len as i32, ch.pos as i32);
                // (rows, heads * d) → (1, heads, n, d), normalised per head when `norm_w` is given.
                let heads = |a: &Array, heads: i32, d: i32, norm_w: Option<&Array>| -> MxResult<Array> {
                    let t = norm(ops::reshape(a.try_index((r..r + n, ..))?, &[1, n, heads, d])?, norm_w)?;
                    ops::transpose_axes(&t, &[0, 2, 1, 3])
                };
                let qc = fast::rope(heads(&q, nh, dk, layer.q_norm.as_ref())?, dk, traditional, base, scale, pos, freqs)?;
                let kc = fast::rope(heads(&k, nkv, dk, layer.k_norm.as_ref())?, dk, traditional, base, scale, pos, freqs)?;
                let vc = heads(&v, nkv, dv, None)?;
                let cache = &mut caches[ch.slot];
                cache.k[il].try_index_mut((.., .., pos..pos + n, ..), &kc)?;
                cache.v[il].try_index_mut((.., .., pos..pos + n, ..), &vc)?;
                let (ks, ke) = plan::key_span(ch.pos, ch.len, window);
                let (ks, ke) = (ks as i32, ke as i32);
                let keys = cache.k[il].try_index((.., .., ks..ke, ..))?;
                let values = cache.v[il].try_index((.., .., ks..ke, ..))?;
                let mask = plan::mask(ch.pos, ch.len, window).map(|m| Array::from_slice(&m, &[n, ke - ks]));
                let o = fast::scaled_dot_product_attention(
                    &qc,
                    &keys,
                    &values,
                    c.attn_scale as f32,
                    mask.as_ref().map(ScaledDotProductAttentionMask::Array),
                    None::<&Array>,
                )?;
                outs.push(ops::reshape(ops::transpose_axes(&o, &[0, 2, 1, 3])?, &[n, nh * dv])?);
            }
            let attn = if outs.len() == 1 { outs.pop().expect("one chunk") } else { ops::concatenate(&outs, 0)? };
            let attn = norm(layer.wo.forward(&attn)?, layer.post_attn_norm.as_ref())?;
            let sa = ops::add(&x, &attn)?;
            let h = fast::rms_norm(&sa, Some(&layer.ffn_norm), eps)?;
            let g = layer.gate.forward(&h)?;
            let g = match c.activation {
                Activation::GeluTanh => mlx_rs::nn::gelu_approximate(g)?,
                Activation::Silu => mlx_rs::nn::silu(g)?,
            };
            let gated = ops::multiply(g, layer.up.forward(&h)?)?;
            let f = norm(layer.down.forward(&gated)?, layer.post_ffn_norm.as_ref())?;
            x = ops::add(&sa, &f)?;
        }
        if p.out_rows.is_empty() {
            return Ok(None);
        }
        let x = if p.out_rows.len() == p.tokens.len() {
            x
        } else {
            x.take_axis(Array::from_slice(&p.out_rows, &[p.out_rows.len() as i32]), 0)?
        };
        let x = fast::rms_norm(&x, Some(&self.output_norm), eps)?;
        let mut logits = self.output.as_ref().unwrap_or(&self.embed).forward(&x)?;
        if let Some(b) = &self.output_bias {
            logits = ops::add(&logits, b)?;
        }
        if let Some(cap) = c.final_logit_softcap {
            let cap = Array::from_f32(cap as f32);
            logits = ops::multiply(ops::tanh(ops::divide(&logits, &cap)?)?, &cap)?;
        }
        Ok(Some(logits))
    }
}

/// The MLX backend: one copy of the weights on the device and a preallocated KV cache per slot.
pub struct MlxBackend {
    model: Model,
    caches: Vec<SlotCache>,
    lens: Vec<usize>,
    info: BackendInfo,
    /// How long the last step's graph took to build and evaluate.
    compute: Option<Duration>,
    /// Whether each step builds the next one's graph while it evaluates ([`Ahead`]).
    overlap: bool,
    ahead: Option<Ahead>,
    /// Steps that ran a graph built ahead.
    built_ahead: u64,
}

/// How many layers of a step built ahead [`Ahead::start`] sets computing before the engine has
/// asked for the step: enough to cover the host's turn between two steps (about 3 ms on
/// SmolLM2, a layer's worth), little to throw away when the next batch is another.
const HEAD_START_LAYERS: usize = 2;

/// The next decode step's graph, built on this step's argmax while MLX evaluates this step, as
/// mlx-lm's `generate_step` does with `mx.async_eval`: building a graph is host work (a few
/// hundred calls into MLX a step) that otherwise leaves the device idle between steps.
///
/// It is built only when every chunk of the step ends in one next token, and but for its first
/// layers ([`Ahead::start`]) stays lazy: the
/// engine may change the batch between steps (a sequence ends, another joins, a client cancels),
/// so it is evaluated only when the next batch is exactly the one it assumed (the same slots in
/// the same order, each fed the token this step returned at the next position, no
/// log-probabilities) and dropped otherwise, at the cost of the layers [`Ahead::start`] began.
/// Its cache writes land past each slot's cached length until it is used, where nothing reads
/// them.
struct Ahead {
    /// The step it computes; its tokens are filled in once this step's are read back.
    plan: StepPlan,
    caches: Vec<SlotCache>,
    logits: Array,
    best: Array,
}

impl Ahead {
    /// The plan of the step after `p` when every chunk of `p` asks for its last token's output
    /// and every slot has room for one more position; `None` otherwise.
    fn plan_after(p: &StepPlan, batch: &Batch, ctx_per_slot: usize) -> Option<StepPlan> {
        let mut slots: Vec<usize> = p.chunks.iter().map(|c| c.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        let decodable = !batch.wants_logprobs()
            && slots.len() == p.chunks.len()
            && p.chunks.iter().all(|c| c.outputs == Outputs::Last && p.lens_after[c.slot] < ctx_per_slot);
        if !decodable {
            return None;
        }
        let mut lens_after = p.lens_after.clone();
        let chunks = p
            .chunks
            .iter()
            .enumerate()
            .map(|(row, c)| {
                lens_after[c.slot] += 1;
                plan::ChunkPlan { slot: c.slot, pos: p.lens_after[c.slot], len: 1, row, outputs: Outputs::Last }
            })
            .collect::<Vec<_>>();
        Some(StepPlan { tokens: Vec::new(), out_rows: (0..chunks.len() as u32).collect(), chunks, lens_after })
    }

    /// Sets MLX computing this step's first layers before the last step's tokens go back, so
    /// that it is not idle while the host hands them over and the engine picks the next batch
    /// (mlx-lm's loop queues its whole next step; our next batch may differ, so only a few
    /// layers are risked). Their cache writes become the caches now: they land at each slot's
    /// next position, past what any other step reads, and MLX writes them in place only when
    /// nothing else holds the arrays they replace.
    fn start(&self, caches: &mut [SlotCache]) -> MxResult<()> {
        let mut started = Vec::new();
        for c in &self.plan.chunks {
            for il in 0..HEAD_START_LAYERS.min(caches[c.slot].k.len()) {
                caches[c.slot].k[il] = self.caches[c.slot].k[il].clone();
                caches[c.slot].v[il] = self.caches[c.slot].v[il].clone();
                started.extend([&self.caches[c.slot].k[il], &self.caches[c.slot].v[il]]);
            }
        }
        transforms::async_eval(started)
    }

    /// Whether `batch` is the step this graph computes.
    fn computes(&self, batch: &Batch) -> bool {
        !batch.wants_logprobs()
            && batch.chunks.len() == self.plan.chunks.len()
            && batch.chunks.iter().zip(&self.plan.chunks).zip(&self.plan.tokens).all(|((c, a), &t)| {
                c.slot as usize == a.slot && c.pos as usize == a.pos && c.tokens == [t] && c.outputs == Outputs::Last
            })
    }
}

impl MlxBackend {
    /// The shape its caches save in.
    fn layout(&self) -> F32Cache {
        let cfg = &self.model.cfg;
        F32Cache { layers: cfg.block_count, kv_heads: cfg.head_count_kv, key_length: cfg.key_length, value_length: cfg.value_length }
    }
}

impl std::fmt::Debug for MlxBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MlxBackend").field("info", &self.info).field("config", &self.model.cfg).finish()
    }
}

impl MlxBackend {
    /// How many steps so far ran a graph built while the step before them evaluated.
    pub fn steps_built_ahead(&self) -> u64 {
        self.built_ahead
    }

    /// Loads with [`Options::from_spec`].
    pub fn load(spec: &LoadSpec) -> Result<Self, BackendError> {
        Self::load_with(spec, &Options::from_spec(spec).map_err(BackendError::Load)?)
    }

    pub fn load_with(spec: &LoadSpec, opts: &Options) -> Result<Self, BackendError> {
        spec.kv.taken_by(lx_engine::kind::BackendKind::Mlx)?;
        if spec.slots == 0 || spec.ctx_per_slot == 0 {
            return Err(BackendError::Load(format!(
                "need at least one slot and a context (got slots={}, ctx_per_slot={})",
                spec.slots, spec.ctx_per_slot
            )));
        }
        if !spec.model_path.is_file() {
            return Err(BackendError::Load(format!("model file {} does not exist", spec.model_path.display())));
        }
        // Linux's MLX (the mlx-cpu wheel) has no GPU backend: always its CPU device there.
        let cpu = crate::cpu_only() || opts.cpu || spec.gpu_layers == Some(0);
        // Every array this process creates from here on lives on this device.
        Device::set_default(&if cpu { Device::cpu() } else { Device::gpu() });
        let g = GgufFile::open(&spec.model_path).map_err(|e| match e {
            lx_format::gguf::GgufError::UnknownTensorType { .. } => BackendError::Unsupported(e.to_string()),
            e => load_err(e),
        })?;
        let mut counts = Counts::default();
        let model = Model::load(&g, opts.weights, &mut counts).map_err(|e| match e {
            BackendError::Load(m) => BackendError::Load(format!("{}: {m}", spec.model_path.display())),
            BackendError::Unsupported(m) => BackendError::Unsupported(format!("{}: {m}", spec.model_path.display())),
            other => other,
        })?;
        let cfg = &model.cfg;
        let ctx = spec.ctx_per_slot as i32;
        let mut caches = Vec::with_capacity(spec.slots);
        for _ in 0..spec.slots {
            let zeros = |d: usize| ops::zeros::<f32>(&[1, cfg.head_count_kv as i32, ctx, d as i32]);
            let k = (0..cfg.block_count).map(|_| zeros(cfg.key_length)).collect::<MxResult<Vec<_>>>();
            let v = (0..cfg.block_count).map(|_| zeros(cfg.value_length)).collect::<MxResult<Vec<_>>>();
            let cache = SlotCache {
                k: k.map_err(|e| BackendError::Load(format!("cannot allocate the KV cache: {e}")))?,
                v: v.map_err(|e| BackendError::Load(format!("cannot allocate the KV cache: {e}")))?,
            };
            transforms::eval(cache.k.iter().chain(cache.v.iter()))
                .map_err(|e| BackendError::Load(format!("cannot allocate the KV cache: {e}")))?;
            caches.push(cache);
        }
        let chip = lx_machine::hardware::probe().cpu;
        // Read back the device MLX will use rather than trusting the request above.
        let on_gpu = matches!(Device::default().get_type(), Ok(mlx_rs::DeviceType::Gpu));
        let cpu_fallback = match (on_gpu, crate::cpu_only()) {
            (false, false) if spec.gpu_layers == Some(0) => Some("MLX ran on the CPU, not Metal (--gpu-layers 0)".to_string()),
            (false, false) => Some("MLX ran on the CPU, not Metal (its setting device = cpu)".to_string()),
            _ => None,
        };
        let mut weights = format!("weights {}", opts.weights.describe());
        weights.push_str(&format!(
            ": {} matrices MLX affine g32 (from GGUF), {} MLX 4-bit g64, {} f16",
            counts.affine_g32, counts.mlx4, counts.f16
        ));
        let info = BackendInfo {
            name: "mlx".into(),
            version: format!("MLX {MLX_VERSION} (mlx-rs {MLX_RS_VERSION}, lx-backend-mlx {}); {weights}", env!("CARGO_PKG_VERSION")),
            device: if on_gpu { format!("Metal: {chip} (MLX)") } else { format!("CPU: {chip} (MLX)") },
            cpu_fallback,
            threads: spec.threads,
            capabilities: Capabilities {
                // Projections and the FFN run once over every chunk's rows; attention per chunk.
                mixed_position_batches: true,
                max_batch_tokens: spec.max_batch_tokens.max(1),
                slots: spec.slots,
                ctx_per_slot: spec.ctx_per_slot,
                prefix_copy: true,
            },
            settings: [("weights".to_string(), opts.weights.name().to_string()), ("overlap".to_string(), if opts.overlap { "on" } else { "off" }.to_string())].into(),
            settings_from: None,
            draft: None,
            kv_cache_bytes: Some(caches.iter().flat_map(|c| c.k.iter().chain(c.v.iter())).map(|a| a.nbytes() as u64).sum()),
            weights_bytes: Some(model.weight_bytes()),
        };
        Ok(Self { model, caches, lens: vec![0; spec.slots], info, compute: None, overlap: opts.overlap, ahead: None, built_ahead: 0 })
    }
}

impl Backend for MlxBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        let vocab = self.model.cfg.vocab_size;
        let p = plan::plan(batch, &self.lens, &self.info.capabilities, vocab)?;
        let ahead = self.ahead.take().filter(|a| a.computes(batch));
        let next_plan = if self.overlap { Ahead::plan_after(&p, batch, self.info.capabilities.ctx_per_slot) } else { None };
        self.compute = None;
        let started = Instant::now();
        let result = (|| -> MxResult<(Option<Array>, Option<Array>, Option<Ahead>)> {
            let (logits, best) = match ahead {
                Some(a) => {
                    // The graph built during the last step: its cache writes become the caches.
                    self.caches = a.caches;
                    self.built_ahead += 1;
                    (Some(a.logits), Some(a.best))
                }
                None => {
                    let ids = Array::from_slice(&p.tokens, &[p.tokens.len() as i32]);
                    let logits = self.model.forward(&mut self.caches, &p, &ids)?;
                    let best = logits.as_ref().map(|l| ops::indexing::argmax_axis(l, -1, false)).transpose()?;
                    (logits, best)
                }
            };
            // The one evaluation of the step: next tokens, logits when asked for, and every
            // cache array written (so the next step's graph starts from materialised caches).
            let mut targets: Vec<&Array> = best.iter().collect();
            if batch.wants_logprobs() {
                targets.extend(logits.iter());
            }
            let mut touched: Vec<usize> = p.chunks.iter().map(|c| c.slot).collect();
            touched.sort_unstable();
            touched.dedup();
            for &s in &touched {
                targets.extend(self.caches[s].k.iter().chain(self.caches[s].v.iter()));
            }
            let next = match (&next_plan, &best) {
                (Some(np), Some(best)) => {
                    transforms::async_eval(targets.iter().copied())?;
                    // Host work while MLX computes; a graph that cannot be built is only a
                    // step not overlapped.
                    let mut caches = self.caches.clone();
                    self.model.forward(&mut caches, np, best).ok().flatten().and_then(|logits| {
                        let best = ops::indexing::argmax_axis(&logits, -1, false).ok()?;
                        Some(Ahead { plan: np.clone(), caches, logits, best })
                    })
                }
                _ => None,
            };
            transforms::eval(targets)?;
            Ok((logits, best, next))
        })();
        let (logits, best, next) = match result {
            Ok(r) => r,
            Err(e) => {
                // What this step wrote is unusable: keep only positions before each chunk.
                for c in &p.chunks {
                    self.lens[c.slot] = self.lens[c.slot].min(c.pos);
                }
                return Err(step_err(e));
            }
        };
        self.compute = Some(started.elapsed());
        self.lens = p.lens_after.clone();
        let (Some(logits), Some(best)) = (logits, best) else { return Ok(Vec::new()) };
        let ids = best.try_as_slice::<u32>().map_err(step_err)?;
        self.ahead = next.map(|mut a| {
            a.plan.tokens = ids.to_vec();
            a
        });
        if let Some(a) = &self.ahead {
            if a.start(&mut self.caches).is_err() {
                // Only a head start lost: the step is built again if it is asked for.
                self.ahead = None;
            }
        }
        let rows = if batch.wants_logprobs() { Some(logits.try_as_slice::<f32>().map_err(step_err)?) } else { None };
        let choice = |r: usize, score: &[u32]| -> Choice {
            match rows {
                Some(all) => choose(&all[r * vocab..(r + 1) * vocab], batch.top_logprobs, score),
                None => Choice { token: ids[r], ..Default::default() },
            }
        };
        let mut out = Vec::new();
        let mut r = 0;
        for (c, chunk) in p.chunks.iter().zip(&batch.chunks) {
            let n = match c.outputs {
                Outputs::None => continue,
                Outputs::Last => 1,
                Outputs::All => c.len,
            };
            out.push(ChunkOutput { slot: c.slot as Slot, choices: (0..n).map(|k| choice(r + k, chunk.score_row(k))).collect() });
            r += n;
        }
        Ok(out)
    }

    fn last_compute(&self) -> Option<Duration> {
        self.compute
    }

    fn clear(&mut self, slot: Slot) {
        // A graph built ahead assumed the caches as the last step left them.
        self.ahead = None;
        if let Some(l) = self.lens.get_mut(slot as usize) {
            *l = 0;
        }
    }

    fn truncate(&mut self, slot: Slot, len: u32) -> Result<(), BackendError> {
        self.ahead = None;
        // Positions are written in place: what lies past `len` is never read again.
        let l = self.lens.get_mut(slot as usize).ok_or_else(|| BackendError::Step(format!("truncate: no slot {slot}")))?;
        *l = (*l).min(len as usize);
        Ok(())
    }

    fn save_state(&mut self, slot: Slot) -> Result<Vec<u8>, BackendError> {
        let (c, n) = match (self.caches.get(slot as usize), self.lens.get(slot as usize)) {
            (Some(c), Some(&n)) => (c, n),
            _ => return Err(BackendError::Step(format!("save state: no slot {slot}"))),
        };
        let layout = self.layout();
        let mut out = layout.begin(n);
        if n > 0 {
            let end = n as i32;
            for (k, v) in c.k.iter().zip(&c.v) {
                for t in [k, v] {
                    let part = t.try_index((.., .., 0..end, ..)).and_then(|p| ops::flatten(&p, None, None)).map_err(step_err)?;
                    part.eval().map_err(step_err)?;
                    F32Cache::push(&mut out, part.try_as_slice::<f32>().map_err(step_err)?);
                }
            }
        }
        Ok(out)
    }

    fn load_state(&mut self, slot: Slot, state: &[u8], positions: u32) -> Result<(), BackendError> {
        self.ahead = None;
        let s = slot as usize;
        if s >= self.caches.len() {
            return Err(BackendError::Step(format!("load state: no slot {slot}")));
        }
        if positions as usize > self.info.capabilities.ctx_per_slot {
            return Err(BackendError::Step(format!("a state of {positions} positions does not fit a slot of {}", self.info.capabilities.ctx_per_slot)));
        }
        self.lens[s] = 0;
        let layout = self.layout();
        let (p, heads) = (positions as i32, layout.kv_heads as i32);
        let c = &mut self.caches[s];
        for (il, (keys, values)) in layout.read(state, positions as usize).map_err(BackendError::Step)?.enumerate() {
            let k = Array::from_slice(&keys, &[1, heads, p, layout.key_length as i32]);
            let v = Array::from_slice(&values, &[1, heads, p, layout.value_length as i32]);
            c.k[il].try_index_mut((.., .., 0..p, ..), &k).map_err(step_err)?;
            c.v[il].try_index_mut((.., .., 0..p, ..), &v).map_err(step_err)?;
        }
        transforms::eval(c.k.iter().chain(c.v.iter())).map_err(step_err)?;
        self.lens[s] = positions as usize;
        Ok(())
    }

    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        self.ahead = None;
        let (f, t, n) = (from as usize, to as usize, len as usize);
        if f >= self.caches.len() || t >= self.caches.len() {
            return Err(BackendError::Step(format!(
                "copy_prefix: slot out of range ({from} -> {to}, slots: {})",
                self.caches.len()
            )));
        }
        if n > self.lens[f] {
            return Err(BackendError::Step(format!("copy_prefix: slot {from} holds {} positions, {len} requested", self.lens[f])));
        }
        if f != t && n > 0 {
            let end = n as i32;
            let copy = |caches: &mut [SlotCache]| -> MxResult<()> {
                for il in 0..caches[f].k.len() {
                    let k = caches[f].k[il].try_index((.., .., 0..end, ..))?;
                    let v = caches[f].v[il].try_index((.., .., 0..end, ..))?;
                    caches[t].k[il].try_index_mut((.., .., 0..end, ..), &k)?;
                    caches[t].v[il].try_index_mut((.., .., 0..end, ..), &v)?;
                }
                transforms::eval(caches[t].k.iter().chain(caches[t].v.iter()))
            };
            if let Err(e) = copy(&mut self.caches) {
                self.lens[t] = 0;
                return Err(step_err(e));
            }
        }
        self.lens[t] = n;
        Ok(())
    }
}
