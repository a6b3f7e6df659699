//! Gemma 3 and the llama family (llama/Mistral, Qwen 2, Qwen 3) over candle-core and
//! candle-nn, written for a step-based server: one code path, parameterized by [`Config`].
//!
//! Follows llama.cpp's graphs (src/models/{gemma3,llama,qwen2,qwen3}.cpp):
//! - input embedding, scaled by `sqrt(hidden)` for Gemma;
//! - per layer: RMS norm → Q/K/V projections (+ bias when the file has one: Qwen 2) →
//!   per-head RMS norm of Q and K (Gemma 3, Qwen 3) → RoPE (NeoX halves for Gemma and
//!   Qwen, adjacent pairs for llama; Gemma's local layers use their own base) → queries
//!   scaled by `attn_scale` → causal attention (sliding window on Gemma's local layers) →
//!   output projection → post-attention RMS norm (Gemma) → residual; then RMS norm →
//!   `act(gate) * up` (GELU-tanh for Gemma, SiLU otherwise) → down → post-FFN RMS norm
//!   (Gemma) → residual;
//! - final RMS norm → output projection (`output.weight`, else tied to the embedding;
//!   optional soft-capping for Gemma).
//!
//! Gemma's `(1 + w)` norm offset needs no code: the GGUF converter stores `1 + w`.
//!
//! Unlike candle-transformers' `quantized_gemma3`, the KV cache lives outside the model
//! in preallocated per-slot buffers written in place, any chunk can be run at any
//! position, RoPE tables are sized to the context and shared, logits are computed only
//! for the rows asked for, and the tied embedding stays quantized (rows are dequantized
//! on lookup).

use lx_format::arch::{Activation, Config, RopeStyle};
use crate::quant;
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Module, Result, Tensor};
use lx_engine::backend::BackendError;
use lx_engine::handoff::F32Cache;
use lx_format::gguf::{GgmlType, GgufFile};
use std::borrow::Cow;
use std::sync::Arc;

/// Rows of query tiles in attention (bounds the score matrix for long chunks).
pub const ATTN_Q_TILE: usize = 256;

/// How the layers' projection matrices are held (the tied embedding / output projection
/// always stays as stored: it is looked up row by row and is the largest tensor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// As stored in the file; candle's quantized kernels.
    Quantized,
    /// As stored, except Q5_0 re-encoded as Q8_0 (lossless, see [`crate::quant`]): candle
    /// has SIMD kernels for Q8_0 but none for Q5_0 on x86.
    Q8_0,
    /// Dequantized to f16 at load; matmuls go through candle's gemm (rayon). On CPU:
    /// ~3.5× the quantized kernels' prefill speed, about their decode speed, five times
    /// closer to the f32 reference than Q8_0 activations allow, and no collapse when other
    /// processes share the cores (candle's spinning pool, which runs its quantized
    /// kernels, does collapse). 2 bytes per weight.
    F16,
    /// Dequantized to f32, the output projection too: no activation quantization, no
    /// half-precision anywhere. The numerical reference for the quantized file (slow,
    /// about 4 bytes per weight: ~1 GB for Gemma 3 270M); for tests, not for measuring.
    F32,
    /// Both: [`WeightFormat::Q8_0`] for passes of few rows (decode) and f16 for passes of
    /// at least [`DUAL_MIN_ROWS`] rows (prefill), except where candle's x86 kernels repack
    /// the stored matrix for several rows and so prefill faster than f16
    /// ([`crate::tiles::dual_keeps_quantized`]): those stay quantized only. Largest in memory; on an idle CPU the
    /// fastest in decode and prefill alike (the CPU default, [`crate::CPU_DEFAULT_WEIGHTS`]);
    /// on a shared one its decode can collapse (the quantized kernels' spinning pool).
    Dual,
}

/// Rows from which a [`WeightFormat::Dual`] projection takes the f16 path.
pub const DUAL_MIN_ROWS: usize = 16;

/// One projection matrix, held as a [`WeightFormat`] says.
struct Proj {
    q: Option<QMatMul>,
    f16: Option<QMatMul>,
}

impl Proj {
    /// Whether a pass of `rows` rows goes through the dequantized (f16 or f32) gemm rather
    /// than candle's quantized kernels.
    fn dequantized_for(&self, rows: usize) -> bool {
        match (&self.q, &self.f16) {
            (Some(_), Some(_)) => rows >= DUAL_MIN_ROWS,
            (Some(q), None) => matches!(q, QMatMul::Tensor(_) | QMatMul::TensorF16(_)),
            (None, _) => true,
        }
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let rows = x.elem_count() / x.dim(candle_core::D::Minus1)?;
        match (&self.q, &self.f16) {
            (Some(q), Some(f)) => {
                if rows >= DUAL_MIN_ROWS {
                    f.forward(x)
                } else {
                    q.forward(x)
                }
            }
            (Some(q), None) => q.forward(x),
            (None, Some(f)) => f.forward(x),
            (None, None) => unreachable!("a projection holds at least one format"),
        }
    }
}

/// Bytes a tensor's data takes.
fn tensor_bytes(t: &Tensor) -> u64 {
    (t.elem_count() * t.dtype().size_in_bytes()) as u64
}

/// Bytes a matrix takes as held (a quantized one as stored; its repacked tiles, made at its
/// first product, are candle's own and not counted).
fn matmul_bytes(m: &QMatMul) -> u64 {
    match m {
        QMatMul::QTensor(q) => q.storage_size_in_bytes() as u64,
        QMatMul::Tensor(t) | QMatMul::TensorF16(t) => tensor_bytes(t),
    }
}

impl Proj {
    fn bytes(&self) -> u64 {
        self.q.iter().chain(self.f16.iter()).map(matmul_bytes).sum()
    }
}

impl Layer {
    fn bytes(&self) -> u64 {
        let projections = [&self.wq, &self.wk, &self.wv, &self.wo, &self.gate, &self.up, &self.down].iter().map(|p| p.bytes()).sum::<u64>();
        let vectors = [&self.bq, &self.bk, &self.bv, &self.bo, &self.q_norm, &self.k_norm, &self.post_attn_norm, &self.b_gate, &self.b_up, &self.b_down, &self.post_ffn_norm]
            .iter()
            .filter_map(|t| t.as_ref())
            .chain([&self.attn_norm, &self.ffn_norm])
            .map(tensor_bytes)
            .sum::<u64>();
        projections + vectors
    }
}

impl WeightFormat {
    /// Every format, in the order `lx tune` tries them.
    pub const ALL: [WeightFormat; 5] = [Self::Dual, Self::Q8_0, Self::F16, Self::Quantized, Self::F32];

    /// The name `LX_CANDLE_WEIGHTS` and `FromStr` take.
    pub fn name(self) -> &'static str {
        match self {
            Self::Quantized => "quantized",
            Self::Q8_0 => "q8_0",
            Self::F16 => "f16",
            Self::F32 => "f32",
            Self::Dual => "dual",
        }
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WeightFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "quantized" | "as-stored" => Ok(Self::Quantized),
            "q8_0" | "q8" => Ok(Self::Q8_0),
            "f16" => Ok(Self::F16),
            "dual" => Ok(Self::Dual),
            "f32" => Ok(Self::F32),
            other => Err(format!(
                "unknown weight format `{other}` (quantized, q8_0, f16, dual, f32)"
            )),
        }
    }
}

/// How the weights are loaded.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub layer_weights: WeightFormat,
}

/// One block's weights; the `Option`s are what some architectures lack.
struct Layer {
    attn_norm: Tensor,
    wq: Proj,
    wk: Proj,
    wv: Proj,
    wo: Proj,
    /// Q/K/V/output biases (Qwen 2; optional in llama files).
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    bo: Option<Tensor>,
    /// Per-head norms of Q and K (`Config::qk_norm`).
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    /// `Config::post_norms`.
    post_attn_norm: Option<Tensor>,
    ffn_norm: Tensor,
    gate: Proj,
    up: Proj,
    down: Proj,
    /// FFN biases (optional in llama files, as llama.cpp loads them).
    b_gate: Option<Tensor>,
    b_up: Option<Tensor>,
    b_down: Option<Tensor>,
    post_ffn_norm: Option<Tensor>,
    local: bool,
}

fn add_bias(x: Tensor, b: &Option<Tensor>) -> Result<Tensor> {
    match b {
        Some(b) => x.broadcast_add(b),
        None => Ok(x),
    }
}

fn opt_rms_norm(x: Tensor, w: &Option<Tensor>, eps: f32) -> Result<Tensor> {
    match w {
        Some(w) => candle_nn::ops::rms_norm(&x, w, eps),
        None => Ok(x),
    }
}

/// cos/sin tables for positions `0..len`, shape (len, rotary_dim / 2), and how they apply.
#[derive(Clone)]
pub struct RopeTable {
    cos: Tensor,
    sin: Tensor,
    style: RopeStyle,
}

impl RopeTable {
    /// Pair `i` rotates by `pos / scale * base^(-2i/d) / factors[i]` (`factors`: llama 3's
    /// `rope_freqs.weight`, as llama.cpp divides by them); which elements form pair `i`
    /// is `style`'s business.
    pub fn new(
        base: f64,
        scale: f64,
        head_dim: usize,
        len: usize,
        style: RopeStyle,
        factors: Option<&[f32]>,
        device: &Device,
    ) -> Result<Self> {
        let half = head_dim / 2;
        if factors.is_some_and(|f| f.len() != half) {
            candle_core::bail!("RoPE frequency factors: expected {half} values");
        }
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        let inv: Vec<f64> = (0..half)
            .map(|i| {
                let f = base.powf(-2.0 * i as f64 / head_dim as f64);
                f / factors.map_or(1.0, |v| v[i] as f64)
            })
            .collect();
        for p in 0..len {
            let p = p as f64 / scale;
            for &f in &inv {
                let (s, c) = (p * f).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Ok(Self {
            cos: Tensor::from_vec(cos, (len, half), device)?,
            sin: Tensor::from_vec(sin, (len, half), device)?,
            style,
        })
    }

    /// Rotates x (b, heads, l, d) for positions `pos[i] + offset ..` of sequence `i`.
    fn apply_each(&self, x: &Tensor, pos: &[usize], offset: usize) -> Result<Tensor> {
        if pos.iter().all(|&p| p == pos[0]) {
            return self.apply(x, pos[0] + offset);
        }
        let parts = pos
            .iter()
            .enumerate()
            .map(|(i, &p)| self.apply(&x.narrow(0, i, 1)?, p + offset))
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&parts, 0)
    }

    fn apply(&self, x: &Tensor, pos: usize) -> Result<Tensor> {
        let len = x.dim(2)?;
        let cos = self.cos.narrow(0, pos, len)?;
        let sin = self.sin.narrow(0, pos, len)?;
        match self.style {
            RopeStyle::Neox => candle_nn::rotary_emb::rope(x, &cos, &sin),
            RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(x, &cos, &sin),
        }
    }
}

/// One sequence's KV cache: per layer, K (1, n_kv, ctx, key_len) and V (1, n_kv, ctx, value_len),
/// allocated once and written in place.
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    /// Positions `0..len` hold valid entries.
    pub len: usize,
    ctx: usize,
}

impl KvCache {
    /// Written through once (zeros from candle's CPU allocator are pages the system has not
    /// given yet), so the whole cache is held from the load, as llama.cpp's and MLX's are: a
    /// load that does not fit fails then, not when the last slot fills mid-run.
    pub fn new(cfg: &Config, ctx: usize, device: &Device) -> Result<Self> {
        let held = |len: usize| Tensor::zeros((1, cfg.head_count_kv, ctx, len), DType::F32, device)?.affine(1.0, 0.0);
        let layers = (0..cfg.block_count)
            .map(|_| {
                let k = held(cfg.key_length)?;
                let v = held(cfg.value_length)?;
                Ok((k, v))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            layers,
            len: 0,
            ctx,
        })
    }

    pub fn capacity(&self) -> usize {
        self.ctx
    }

    /// Bytes its keys and values take.
    pub fn bytes(&self) -> u64 {
        self.layers.iter().map(|(k, v)| ((k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes()) as u64).sum()
    }

    /// Makes `self` hold the first `len` positions of `src`.
    pub fn copy_prefix_from(&mut self, src: &KvCache, len: usize) -> Result<()> {
        if len > 0 {
            for ((dk, dv), (sk, sv)) in self.layers.iter().zip(src.layers.iter()) {
                dk.slice_set(&sk.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                dv.slice_set(&sv.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
            }
        }
        self.len = len;
        Ok(())
    }

    /// Its `len` positions as bytes ([`F32Cache`]'s layout).
    pub fn save(&self) -> Result<Vec<u8>> {
        let mut out = self.layout().begin(self.len);
        if self.len > 0 {
            for (k, v) in &self.layers {
                for t in [k, v] {
                    F32Cache::push(&mut out, &t.narrow(2, 0, self.len)?.flatten_all()?.to_vec1::<f32>()?);
                }
            }
        }
        Ok(out)
    }

    /// Makes it hold `positions` positions from bytes [`KvCache::save`] wrote, refusing bytes
    /// of another shape with what differs.
    pub fn load(&mut self, bytes: &[u8], positions: usize) -> std::result::Result<(), String> {
        if positions > self.ctx {
            return Err(format!("a state of {positions} positions does not fit a slot of {}", self.ctx));
        }
        let layout = self.layout();
        for ((k, v), (keys, values)) in self.layers.iter().zip(layout.read(bytes, positions)?) {
            for (t, data, d) in [(k, keys, layout.key_length), (v, values, layout.value_length)] {
                let part = Tensor::from_vec(data, (1, layout.kv_heads, positions, d), t.device()).map_err(|e| e.to_string())?;
                t.slice_set(&part, 2, 0).map_err(|e| e.to_string())?;
            }
        }
        self.len = positions;
        Ok(())
    }

    fn layout(&self) -> F32Cache {
        let (k, v) = &self.layers[0];
        F32Cache { layers: self.layers.len(), kv_heads: k.dims()[1], key_length: k.dims()[3], value_length: v.dims()[3] }
    }
}
/// Which rows of a chunk need logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    None,
    Last,
    All,
}

impl Rows {
    /// The first row of an `l`-token chunk whose hidden state is needed after the last layer.
    pub fn first(self, l: usize) -> usize {
        match self {
            Rows::None | Rows::All => 0,
            Rows::Last => l - 1,
        }
    }
}

/// A model's weights; cheap to share (every slot uses the same copy).
pub struct Model {
    pub cfg: Config,
    embed: Arc<QTensor>,
    output: QMatMul,
    /// `output.bias` (some Qwen 2 files).
    output_bias: Option<Tensor>,
    output_norm: Tensor,
    /// llama 3's RoPE frequency factors (`rope_freqs.weight`), applied to global layers.
    rope_freqs: Option<Vec<f32>>,
    layers: Vec<Layer>,
    device: Device,
}

/// candle's type for a ggml type, when candle has it.
pub fn candle_dtype(t: GgmlType) -> Option<GgmlDType> {
    Some(match t {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}

/// The ggml types candle can load, for error messages.
pub const CANDLE_TYPES: &str =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K";

/// Reads tensor `name` onto `device`, checking its shape (in candle's order: outermost
/// first, so a projection is (out, in)) and type. Errors name the tensor.
fn load_tensor(
    g: &GgufFile,
    name: &str,
    expect: &[usize],
    device: &Device,
    opts: LoadOptions,
) -> std::result::Result<QTensor, BackendError> {
    let info = g.tensor(name).ok_or_else(|| {
        BackendError::Load(format!("tensor `{name}` is missing from the GGUF file"))
    })?;
    let shape: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
    if shape != expect {
        return Err(BackendError::Load(format!(
            "tensor `{name}` has shape {shape:?}, expected {expect:?} (from the model's metadata)"
        )));
    }
    let dtype = candle_dtype(info.ggml_type).ok_or_else(|| {
        BackendError::Unsupported(format!(
            "tensor `{name}` is {}, a type candle {} cannot run (it has {CANDLE_TYPES})",
            info.ggml_type.name(),
            crate::CANDLE_VERSION
        ))
    })?;
    let bytes = g
        .read_tensor_bytes(name)
        .map_err(|e| BackendError::Load(e.to_string()))?;
    let to_q8 = matches!(opts.layer_weights, WeightFormat::Q8_0 | WeightFormat::Dual);
    let (bytes, dtype) = if to_q8 && dtype == GgmlDType::Q5_0 {
        (quant::q5_0_to_q8_0_bytes(&bytes), GgmlDType::Q8_0)
    } else {
        (bytes, dtype)
    };
    let err = |e: candle_core::Error| BackendError::Load(format!("tensor `{name}`: {e}"));
    let storage = QStorage::from_data(Cow::Owned(bytes), device, dtype).map_err(err)?;
    QTensor::new(storage, shape).map_err(err)
}

/// Turns a candle error about tensor `name` into a load error naming it.
fn tensor_err(name: &str) -> impl Fn(candle_core::Error) -> BackendError + Copy + '_ {
    move |e| BackendError::Load(format!("tensor `{name}`: {e}"))
}

impl Model {
    /// Loads the weights `cfg` calls for; errors name the tensor at fault.
    pub fn load(
        cfg: Config,
        g: &GgufFile,
        device: &Device,
        opts: LoadOptions,
    ) -> std::result::Result<Self, BackendError> {
        let h = cfg.embedding_length;
        let (nh, nkv, dk, dv, ff) = (
            cfg.head_count,
            cfg.head_count_kv,
            cfg.key_length,
            cfg.value_length,
            cfg.feed_forward_length,
        );
        let vocab = cfg.vocab_size;
        // The embedding is only looked up row by row (and is the output projection when
        // tied): keep it as stored (never re-encoded, never expanded to f32).
        let no_conv = LoadOptions {
            layer_weights: WeightFormat::Quantized,
        };
        let embed = Arc::new(load_tensor(
            g,
            "token_embd.weight",
            &[vocab, h],
            device,
            no_conv,
        )?);
        let qt = |name: &str, shape: &[usize]| load_tensor(g, name, shape, device, opts);
        let mm = |t: QTensor, name: &str| -> std::result::Result<Proj, BackendError> {
            let err = tensor_err(name);
            let f16 = |t: &QTensor| {
                t.dequantize_f16(device)
                    .map(QMatMul::TensorF16)
                    .map_err(err)
            };
            Ok(match opts.layer_weights {
                WeightFormat::F16 => Proj {
                    q: None,
                    f16: Some(f16(&t)?),
                },
                WeightFormat::F32 => Proj {
                    q: Some(QMatMul::Tensor(t.dequantize(device).map_err(err)?)),
                    f16: None,
                },
                WeightFormat::Dual if g.tensor(name).is_some_and(crate::tiles::dual_keeps_quantized) => Proj {
                    q: Some(QMatMul::from_qtensor(t).map_err(err)?),
                    f16: None,
                },
                WeightFormat::Dual => Proj {
                    f16: Some(f16(&t)?),
                    q: Some(QMatMul::from_qtensor(t).map_err(err)?),
                },
                _ => Proj {
                    q: Some(QMatMul::from_qtensor(t).map_err(err)?),
                    f16: None,
                },
            })
        };
        let vec = |name: &str, len: usize| -> std::result::Result<Tensor, BackendError> {
            qt(name, &[len])?
                .dequantize(device)
                .map_err(tensor_err(name))
        };
        // Biases and other tensors some files of an architecture have and others lack.
        let opt_vec =
            |name: &str, len: usize| -> std::result::Result<Option<Tensor>, BackendError> {
                match g.tensor(name) {
                    Some(_) => vec(name, len).map(Some),
                    None => Ok(None),
                }
            };
        let output_norm = vec("output_norm.weight", h)?;
        // The output projection: `output.weight` when the file has one, else the embedding
        // (tied). The f32 reference expands either to f32, like every other weight.
        let output = match g.tensor("output.weight") {
            Some(_) => {
                let t = load_tensor(g, "output.weight", &[vocab, h], device, no_conv)?;
                if opts.layer_weights == WeightFormat::F32 {
                    QMatMul::Tensor(t.dequantize(device).map_err(tensor_err("output.weight"))?)
                } else {
                    QMatMul::from_qtensor(t).map_err(tensor_err("output.weight"))?
                }
            }
            None if opts.layer_weights == WeightFormat::F32 => QMatMul::Tensor(
                embed
                    .dequantize(device)
                    .map_err(tensor_err("token_embd.weight"))?,
            ),
            None => QMatMul::from_arc(embed.clone()).map_err(tensor_err("token_embd.weight"))?,
        };
        let output_bias = opt_vec("output.bias", vocab)?;
        let rope_freqs = opt_vec("rope_freqs.weight", dk / 2)?
            .map(|t| t.to_vec1::<f32>().map_err(tensor_err("rope_freqs.weight")))
            .transpose()?;
        let mut layers = Vec::with_capacity(cfg.block_count);
        for il in 0..cfg.block_count {
            let n = |s: &str| format!("blk.{il}.{s}.weight");
            let b = |s: &str| format!("blk.{il}.{s}.bias");
            let w = |s: &str, shape: &[usize]| mm(qt(&n(s), shape)?, &n(s));
            let norm = |s: &str, len: usize, present: bool| {
                if present {
                    vec(&n(s), len).map(Some)
                } else {
                    Ok(None)
                }
            };
            let layer = Layer {
                attn_norm: vec(&n("attn_norm"), h)?,
                wq: w("attn_q", &[nh * dk, h])?,
                wk: w("attn_k", &[nkv * dk, h])?,
                wv: w("attn_v", &[nkv * dv, h])?,
                wo: w("attn_output", &[h, nh * dv])?,
                bq: opt_vec(&b("attn_q"), nh * dk)?,
                bk: opt_vec(&b("attn_k"), nkv * dk)?,
                bv: opt_vec(&b("attn_v"), nkv * dv)?,
                bo: opt_vec(&b("attn_output"), h)?,
                q_norm: norm("attn_q_norm", dk, cfg.qk_norm)?,
                k_norm: norm("attn_k_norm", dk, cfg.qk_norm)?,
                post_attn_norm: norm("post_attention_norm", h, cfg.post_norms)?,
                ffn_norm: vec(&n("ffn_norm"), h)?,
                gate: w("ffn_gate", &[ff, h])?,
                up: w("ffn_up", &[ff, h])?,
                down: w("ffn_down", &[h, ff])?,
                b_gate: opt_vec(&b("ffn_gate"), ff)?,
                b_up: opt_vec(&b("ffn_up"), ff)?,
                b_down: opt_vec(&b("ffn_down"), h)?,
                post_ffn_norm: norm("post_ffw_norm", h, cfg.post_norms)?,
                local: cfg.is_local[il],
            };
            layers.push(layer);
        }
        Ok(Self {
            cfg,
            embed,
            output,
            output_bias,
            output_norm,
            rope_freqs,
            layers,
            device: device.clone(),
        })
    }

    /// Whether the layers' matrix products over `rows` rows take a dequantized gemm (f16,
    /// or f32) rather than candle's quantized kernels.
    pub fn dequantized_gemm(&self, rows: usize) -> bool {
        self.layers.first().is_some_and(|l| l.wq.dequantized_for(rows))
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Bytes of every weight as held, counted from the tensors themselves (a tied output
    /// projection, which shares the embedding's, once).
    pub fn weight_bytes(&self) -> u64 {
        let output = match &self.output {
            QMatMul::QTensor(q) if Arc::ptr_eq(q, &self.embed) => 0,
            other => matmul_bytes(other),
        };
        let vectors = self.output_bias.iter().chain([&self.output_norm]).map(tensor_bytes).sum::<u64>()
            + self.rope_freqs.as_ref().map_or(0, |f| (f.len() * 4) as u64);
        self.embed.storage_size_in_bytes() as u64 + output + vectors + self.layers.iter().map(Layer::bytes).sum::<u64>()
    }

    /// RoPE tables for local and global layers, `ctx` positions each (the local one is
    /// unused when the model has no local layers).
    pub fn rope_tables(&self, ctx: usize) -> Result<(RopeTable, RopeTable)> {
        let c = &self.cfg;
        let local = RopeTable::new(
            c.rope_base_local,
            1.0,
            c.key_length,
            if c.is_local.contains(&true) { ctx } else { 0 },
            c.rope_style,
            None,
            &self.device,
        )?;
        let global = RopeTable::new(
            c.rope_base_global,
            c.rope_scale_global,
            c.key_length,
            ctx,
            c.rope_style,
            self.rope_freqs.as_deref(),
            &self.device,
        )?;
        Ok((local, global))
    }

    /// Runs `tokens` (B sequences of L tokens each, sequence `b` at position `pos[b]`) through
    /// the model, writing K/V into `caches[b]` at `pos[b]..pos[b] + L`, and calls `sink` with
    /// the logits of the requested rows, in tiles of shape (B, rows, vocab) together with the
    /// first row's index.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        tokens: &[&[u32]],
        pos: &[usize],
        caches: &mut [&mut KvCache],
        ropes: &(RopeTable, RopeTable),
        rows: Rows,
        sink: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
    ) -> Result<()> {
        match self.hidden(tokens, pos, caches, ropes, rows)? {
            Some(x) => self.project(&x, rows.first(tokens[0].len()), sink),
            None => Ok(()),
        }
    }

    /// The layers of [`forward`](Self::forward): K/V written as there, and the last layer's
    /// output for the requested rows, (B, rows, hidden), before the final norm (`None` for
    /// [`Rows::None`]). Sequences attend each over their own cache, so they may sit at
    /// different positions; the matrix products take all B together.
    pub fn hidden(
        &self,
        tokens: &[&[u32]],
        pos: &[usize],
        caches: &mut [&mut KvCache],
        ropes: &(RopeTable, RopeTable),
        rows: Rows,
    ) -> Result<Option<Tensor>> {
        let c = &self.cfg;
        let b = tokens.len();
        let l = tokens[0].len();
        assert_eq!((caches.len(), pos.len()), (b, b));
        let flat: Vec<u32> = tokens.iter().flat_map(|t| t.iter().copied()).collect();
        let ids = Tensor::from_vec(flat, (b, l), &self.device)?;
        let mut x = self.embed.embedding(&ids)?;
        if c.embed_scale != 1.0 {
            x = (x * c.embed_scale)?;
        }
        let (nh, nkv, dk, dv) = (c.head_count, c.head_count_kv, c.key_length, c.value_length);
        let eps = c.rms_eps as f32;
        let n_layers = self.layers.len();
        let first_out = rows.first(l);

        for (il, layer) in self.layers.iter().enumerate() {
            let last = il + 1 == n_layers;
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, eps)?;
            let rope = if layer.local { &ropes.0 } else { &ropes.1 };

            let k = add_bias(layer.wk.forward(&h)?, &layer.bk)?.reshape((b, l, nkv, dk))?;
            let k = opt_rms_norm(k, &layer.k_norm, eps)?
                .transpose(1, 2)?
                .contiguous()?;
            let k = rope.apply_each(&k, pos, 0)?;
            let v = add_bias(layer.wv.forward(&h)?, &layer.bv)?
                .reshape((b, l, nkv, dv))?
                .transpose(1, 2)?
                .contiguous()?;
            for (bi, cache) in caches.iter_mut().enumerate() {
                let (ck, cv) = &cache.layers[il];
                ck.slice_set(&k.narrow(0, bi, 1)?, 2, pos[bi])?;
                cv.slice_set(&v.narrow(0, bi, 1)?, 2, pos[bi])?;
            }
            if last && rows == Rows::None {
                // Only this layer's K/V were needed.
                return Ok(None);
            }
            // In the last layer only the output rows go on (as llama.cpp's inp_out_ids).
            let (q_first, h, x_res) = if last && first_out > 0 {
                let n = l - first_out;
                (
                    first_out,
                    h.narrow(1, first_out, n)?.contiguous()?,
                    x.narrow(1, first_out, n)?.contiguous()?,
                )
            } else {
                (0, h, x)
            };
            let lq = l - q_first;
            let q = add_bias(layer.wq.forward(&h)?, &layer.bq)?.reshape((b, lq, nh, dk))?;
            let q = opt_rms_norm(q, &layer.q_norm, eps)?
                .transpose(1, 2)?
                .contiguous()?;
            let q = (rope.apply_each(&q, pos, q_first)? * c.attn_scale)?;

            let mut outs = Vec::with_capacity(b);
            for (bi, cache) in caches.iter().enumerate() {
                let (ck, cv) = &cache.layers[il];
                let qb = q.narrow(0, bi, 1)?;
                outs.push(self.attend(&qb, ck, cv, pos[bi] + q_first, layer.local)?);
            }
            let attn = if b == 1 {
                outs.pop().unwrap()
            } else {
                Tensor::cat(&outs, 0)?
            };
            let attn = add_bias(layer.wo.forward(&attn)?, &layer.bo)?;
            let attn = opt_rms_norm(attn, &layer.post_attn_norm, eps)?;
            let sa = (attn + x_res)?;

            let h = candle_nn::ops::rms_norm(&sa, &layer.ffn_norm, eps)?;
            let g = add_bias(layer.gate.forward(&h)?, &layer.b_gate)?;
            let g = match c.activation {
                // candle's `gelu` is the tanh approximation, as llama.cpp's.
                Activation::GeluTanh => g.gelu()?,
                Activation::Silu => g.silu()?,
            };
            let u = add_bias(layer.up.forward(&h)?, &layer.b_up)?;
            let f = add_bias(layer.down.forward(&(g * u)?)?, &layer.b_down)?;
            let f = opt_rms_norm(f, &layer.post_ffn_norm, eps)?;
            x = (f + sa)?;
        }
        Ok(Some(x))
    }

    /// The final norm and the output projection of [`hidden`](Self::hidden)'s rows
    /// (B, rows, hidden), whose first row is row `first_row` of the chunk: `sink` as in
    /// [`forward`](Self::forward). The vocabulary's matrix is read once for all B × rows
    /// (candle's quantized matmul tiles the rows), so sequences that share this call share
    /// its cost, whichever way their layers ran.
    pub fn project(
        &self,
        x: &Tensor,
        first_row: usize,
        sink: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
    ) -> Result<()> {
        let c = &self.cfg;
        // Project in tiles so that `Outputs::All` over a long chunk never holds more than a
        // tile's worth of 262k-wide logits.
        let x = candle_nn::ops::rms_norm(x, &self.output_norm, c.rms_eps as f32)?;
        let n_rows = x.dim(1)?;
        const OUT_TILE: usize = 32;
        let mut r0 = 0;
        while r0 < n_rows {
            let n = OUT_TILE.min(n_rows - r0);
            let xt = if n == n_rows {
                x.clone()
            } else {
                x.narrow(1, r0, n)?.contiguous()?
            };
            let mut logits = add_bias(self.output.forward(&xt)?, &self.output_bias)?;
            if let Some(cap) = c.final_logit_softcap {
                logits = ((logits / cap)?.tanh()? * cap)?;
            }
            sink(first_row + r0, &logits)?;
            r0 += n;
        }
        Ok(())
    }

    /// Attention of one sequence's queries q (1, nh, lq, dk) at positions `q_pos..q_pos + lq`
    /// over its cache (positions `0..q_pos + lq` valid). Returns (1, lq, nh * dv).
    fn attend(
        &self,
        q: &Tensor,
        ck: &Tensor,
        cv: &Tensor,
        q_pos: usize,
        local: bool,
    ) -> Result<Tensor> {
        let c = &self.cfg;
        let (nh, nkv, dk, dv) = (c.head_count, c.head_count_kv, c.key_length, c.value_length);
        let rep = nh / nkv;
        let lq = q.dim(2)?;
        let window = if local { c.sliding_window } else { None };
        let mut tiles = Vec::new();
        let mut t0 = 0;
        while t0 < lq {
            let n = ATTN_Q_TILE.min(lq - t0);
            let qp = q_pos + t0; // position of the tile's first query
            let k_end = qp + n;
            let k_start = match window {
                Some(w) => (qp + 1).saturating_sub(w),
                None => 0,
            };
            let t = k_end - k_start;
            let mut k = ck.narrow(2, k_start, t)?;
            let mut v = cv.narrow(2, k_start, t)?;
            if !self.device.is_cpu() {
                k = k.contiguous()?;
                v = v.contiguous()?;
            }
            let qt = if n == lq {
                q.clone()
            } else {
                q.narrow(2, t0, n)?.contiguous()?
            };
            // Grouped-query attention without repeating K/V: fold the `rep` query heads
            // that share a KV head into the row dimension.
            let qt = qt.reshape((1, nkv, rep * n, dk))?;
            let scores = qt.matmul(&k.t()?)?; // (1, nkv, rep * n, t)
            let probs = if n > 1 {
                let mut m = vec![0f32; n * t];
                for i in 0..n {
                    let qpos = qp + i;
                    for j in 0..t {
                        let kpos = k_start + j;
                        let hidden = kpos > qpos || window.is_some_and(|w| qpos - kpos >= w);
                        if hidden {
                            m[i * t + j] = f32::NEG_INFINITY;
                        }
                    }
                }
                let mask = Tensor::from_vec(m, (n, t), &self.device)?;
                let s = scores.reshape((1, nkv, rep, n, t))?.broadcast_add(&mask)?;
                candle_nn::ops::softmax_last_dim(&s)?.reshape((1, nkv, rep * n, t))?
            } else {
                // One query at the newest position sees exactly the keys in range.
                candle_nn::ops::softmax_last_dim(&scores)?
            };
            let o = probs.matmul(&v)?; // (1, nkv, rep * n, dv)
            tiles.push(o.reshape((1, nh, n, dv))?);
            t0 += n;
        }
        let o = if tiles.len() == 1 {
            tiles.pop().unwrap()
        } else {
            Tensor::cat(&tiles, 2)?
        };
        o.transpose(1, 2)?.contiguous()?.reshape((1, lq, nh * dv))
    }
}
