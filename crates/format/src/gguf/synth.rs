//! Shape-only ("synthetic") models: GGUF files whose tensors have a real model's names,
//! shapes and ggml types, filled with valid quantized blocks of made-up values, and a
//! made-up vocabulary of the real size.
//!
//! With greedy decoding and EOS ignored, how long a forward pass takes depends on the
//! tensors' shapes and types, not on the weights' values, so such a file times like the
//! model it mimics while its text is noise. That lets a machine with no network measure a
//! model it cannot download (a GPU machine given only our binaries), and a laptop measure
//! the sizes people run (1B to 8B) without fetching gigabytes. Every file made here carries
//! [`SYNTHETIC_KEY`], and every result made with one says so ([`SYNTHETIC_NOTE`]).
//!
//! "Sane" values matter only so that nothing overflows or turns into NaN or denormals (which
//! some kernels handle slowly): each block's scales are chosen so that the weights stay
//! within a few hundredths, and norm weights sit near 1, as in a trained model.

use super::*;

/// Metadata key that marks a shape-only file; its value says what the file mimics.
pub const SYNTHETIC_KEY: &str = "lx.synthetic";
/// What every result made with a shape-only model says about it.
pub const SYNTHETIC_NOTE: &str = "synthetic: timings only, text is noise";

/// How a generated tensor is filled: a seed (so every tensor differs, and every run of the
/// generator writes the same file) and the value its elements scatter around (1 for norm
/// weights, 0 for everything else). Quantized blocks always scatter around 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fill {
    pub seed: u64,
    pub center: f32,
}

impl Fill {
    /// The fill for the tensor called `name` (norm weights near 1, the rest near 0).
    pub fn for_tensor(name: &str) -> Fill {
        // FNV-1a: a stable seed per name, with no dependency.
        let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        Fill { seed: seed | 1, center: if name.contains("norm") { 1.0 } else { 0.0 } }
    }
}

/// The ggml types a shape-only model can be made of.
pub fn can_fill(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K)
}

/// Write `len` bytes of made-up tensor data of type `ty`, every block valid for its type and
/// every block different. (Repeating a short pattern would compress well, but measured here
/// it also decoded 7% faster than the real file: identical pages can be merged below the
/// operating system, so the weights are no longer read from memory.)
pub(super) fn fill(ty: GgmlType, len: u64, fill: &Fill, out: &mut dyn Write) -> io::Result<()> {
    if !can_fill(ty) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("a shape-only model cannot hold {ty} tensors (types it can: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)")));
    }
    let size = ty.type_size() as usize;
    let per_chunk = (65_536 / size).max(1);
    let mut rng = Rng(fill.seed);
    let mut chunk = Vec::with_capacity(per_chunk * size);
    let mut left = len;
    while left > 0 {
        chunk.clear();
        for _ in 0..per_chunk {
            block(ty, fill.center, &mut rng, &mut chunk);
        }
        debug_assert_eq!(chunk.len(), per_chunk * size, "{ty}: every block is {size} bytes");
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// One block of type `ty`, appended to `out`. Quantized weights are `d * q` (minus `dmin * m`
/// for the types with minimums); each scale is set so that `|w|` stays below about 0.05.
fn block(ty: GgmlType, center: f32, rng: &mut Rng, out: &mut Vec<u8>) {
    use GgmlType::*;
    let f16 = |out: &mut Vec<u8>, rng: &mut Rng, v: f32| out.extend_from_slice(&f32_to_f16_bits(v * (0.75 + 0.5 * rng.unit())).to_le_bytes());
    // Random bytes, each masked (0x0F keeps K-quant sub-block scales at 15 or less).
    let bytes = |out: &mut Vec<u8>, rng: &mut Rng, n: usize, mask: u8| {
        for i in (0..n).step_by(8) {
            out.extend(rng.next().to_le_bytes().iter().take(n - i).map(|b| b & mask));
        }
    };
    let value = |rng: &mut Rng| center + 0.06 * (rng.unit() - 0.5);
    match ty {
        F32 => out.extend_from_slice(&value(rng).to_le_bytes()),
        F16 => out.extend_from_slice(&f32_to_f16_bits(value(rng)).to_le_bytes()),
        BF16 => out.extend_from_slice(&((value(rng).to_bits() >> 16) as u16).to_le_bytes()),
        // d, then 32 4-bit quants (q - 8).
        Q4_0 => {
            f16(out, rng, 0.004);
            bytes(out, rng, 16, 0xff);
        }
        // d, m, then 32 4-bit quants.
        Q4_1 => {
            f16(out, rng, 0.004);
            f16(out, rng, -0.03);
            bytes(out, rng, 16, 0xff);
        }
        // d, the 32 fifth bits, 32 low nibbles (q - 16).
        Q5_0 => {
            f16(out, rng, 0.002);
            bytes(out, rng, 20, 0xff);
        }
        Q5_1 => {
            f16(out, rng, 0.002);
            f16(out, rng, -0.03);
            bytes(out, rng, 20, 0xff);
        }
        // d, then 32 signed bytes.
        Q8_0 => {
            f16(out, rng, 0.0003);
            bytes(out, rng, 32, 0xff);
        }
        // 16 scale/min nibble pairs, 64 bytes of 2-bit quants, d, dmin.
        Q2_K => {
            bytes(out, rng, 16 + 64, 0xff);
            f16(out, rng, 0.001);
            f16(out, rng, 0.001);
        }
        // high-bit mask, 2-bit quants, 12 bytes of packed 6-bit scales (minus 32), d.
        Q3_K => {
            bytes(out, rng, 32 + 64 + 12, 0xff);
            f16(out, rng, 0.0003);
        }
        // d, dmin, 12 bytes of packed 6-bit scales and mins (kept at 15 or less), 4-bit quants.
        Q4_K => {
            f16(out, rng, 0.00015);
            f16(out, rng, 0.00015);
            bytes(out, rng, 12, 0x0f);
            bytes(out, rng, 128, 0xff);
        }
        Q5_K => {
            f16(out, rng, 0.0001);
            f16(out, rng, 0.0001);
            bytes(out, rng, 12, 0x0f);
            bytes(out, rng, 32 + 128, 0xff);
        }
        // low 4 bits, high 2 bits, 16 signed 8-bit scales (kept at 0..15), d: w = d * s * (q - 32).
        Q6_K => {
            bytes(out, rng, 128 + 64, 0xff);
            bytes(out, rng, 16, 0x0f);
            f16(out, rng, 0.0001);
        }
        _ => unreachable!("can_fill was checked"),
    }
}

/// xorshift64*: a fixed stream from a seed, with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A SentencePiece vocabulary of exactly `size` tokens (at least 3) that llama.cpp and our
/// tokenizer accept: unknown (0), BOS (1) and EOS (2), the 256 byte pieces (so any text has
/// tokens: one per byte), the word boundary `▁`, then made-up words that no text contains.
/// A vocabulary too small for the byte pieces (a test fixture fed token ids) has none.
pub fn spm_vocabulary(w: GgufWriter, size: usize) -> GgufWriter {
    let size = size.max(3);
    let mut tokens = vec!["<unk>".to_string(), "<bos>".to_string(), "<eos>".to_string()];
    // llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte.
    let mut types = vec![2i32, 3, 3];
    if size >= 3 + 256 + 1 {
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
        }
        // The word boundary as a piece of its own, so spaces decode as spaces.
        tokens.push("\u{2581}".to_string());
        types.push(1);
    }
    while tokens.len() < size {
        tokens.push(format!("\u{2581}w{}", tokens.len()));
        types.push(1);
    }
    let scores: Vec<f32> = (0..size).map(|i| -(i as f32)).collect();
    w.kv("tokenizer.ggml.model", "llama")
        .kv("tokenizer.ggml.tokens", tokens)
        .kv("tokenizer.ggml.scores", scores)
        .kv("tokenizer.ggml.token_type", types)
        .kv("tokenizer.ggml.bos_token_id", 1u32)
        .kv("tokenizer.ggml.eos_token_id", 2u32)
        .kv("tokenizer.ggml.unknown_token_id", 0u32)
        .kv("tokenizer.ggml.add_bos_token", true)
}

/// The shape-only twin of a real model: every metadata pair but the tokenizer's, every
/// tensor with its name, shape and type, a made-up vocabulary of the real size, and
/// [`SYNTHETIC_KEY`] naming the original.
pub fn twin_of(real: &GgufFile) -> Result<GgufWriter, GgufError> {
    let bad = |reason: String| GgufError::BadTensor { path: real.path().to_path_buf(), tensor: String::new(), reason };
    let original = real.metadata("general.name").and_then(Value::as_str).map(String::from).unwrap_or_else(|| {
        real.path().file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    });
    let vocab = real.vocab_size().ok_or_else(|| bad("no vocabulary size (no tokenizer.ggml.tokens, no token_embd.weight)".into()))?;
    let mut w = GgufWriter::new();
    for (key, value) in real.metadata_pairs() {
        if !key.starts_with("tokenizer.") && key != SYNTHETIC_KEY {
            w = w.kv(key, value.clone());
        }
    }
    w = spm_vocabulary(w, vocab as usize)
        .kv("general.name", format!("synthetic twin of {original}"))
        .kv(SYNTHETIC_KEY, format!("twin of {original}"));
    for t in real.tensors() {
        if !can_fill(t.ggml_type) {
            return Err(bad(format!("tensor {} is {}: {}", t.name, t.ggml_type, "a shape-only model cannot hold that type")));
        }
        w = w.tensor_synthetic(&t.name, &t.dims, t.ggml_type, Fill::for_tensor(&t.name));
    }
    Ok(w)
}

/// How a preset's matrices are quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    /// llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for the output (or tied embedding) and for
    /// attn_v and ffn_down in a third of the layers; a matrix whose rows are not a multiple
    /// of 256 takes llama.cpp's fallback (Q4_K → Q5_0, Q6_K → Q8_0).
    Q4KM,
    /// Q8_0 everywhere.
    Q8_0,
}

impl Quant {
    pub fn name(self) -> &'static str {
        match self {
            Quant::Q4KM => "q4_k_m",
            Quant::Q8_0 => "q8_0",
        }
    }

    /// `general.file_type` (llama.cpp's `llama_ftype`).
    fn file_type(self) -> u32 {
        match self {
            Quant::Q4KM => 15,
            Quant::Q8_0 => 7,
        }
    }
}

/// What a matrix is, for choosing its type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The output projection, or an embedding that doubles as it (tied).
    Output,
    Embedding,
    AttnV,
    FfnDown,
    Other,
}

/// llama.cpp's rule for which layers get more bits in the _M mixes.
fn more_bits(layer: u64, layers: u64) -> bool {
    layer < layers / 8 || layer >= 7 * layers / 8 || (layer >= layers / 8 && (layer - layers / 8) % 3 == 2)
}

fn matrix_type(quant: Quant, role: Role, layer: u64, layers: u64, row: u64) -> GgmlType {
    let ty = match quant {
        Quant::Q8_0 => return GgmlType::Q8_0,
        Quant::Q4KM => match role {
            Role::Output => GgmlType::Q6_K,
            Role::AttnV | Role::FfnDown if more_bits(layer, layers) => GgmlType::Q6_K,
            _ => GgmlType::Q4_K,
        },
    };
    if row % 256 == 0 {
        ty
    } else if ty == GgmlType::Q6_K {
        GgmlType::Q8_0
    } else {
        GgmlType::Q5_0
    }
}

/// A model family's shape, as its GGUF files give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `general.architecture`: `gemma3`, `llama` or `qwen2`.
    pub architecture: &'static str,
    pub hidden: u64,
    pub layers: u64,
    pub ffn: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    pub context: u64,
    /// The output projection is the token embedding (no `output.weight`).
    pub tied: bool,
}

/// A shape people run, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub shape: Shape,
}

const fn shape(architecture: &'static str, hidden: u64, layers: u64, ffn: u64, heads: u64, kv_heads: u64, head_dim: u64, vocab: u64, context: u64, tied: bool) -> Shape {
    Shape { architecture, hidden, layers, ffn, heads, kv_heads, head_dim, vocab, context, tied }
}

/// The shapes people run, from their published configurations (text models only).
pub const PRESETS: &[Preset] = &[
    Preset { name: "smollm2-135m", shape: shape("llama", 576, 30, 1536, 9, 3, 64, 49_152, 8192, true) },
    Preset { name: "gemma3-270m", shape: shape("gemma3", 640, 18, 2048, 4, 1, 256, 262_144, 32_768, true) },
    Preset { name: "gemma3-1b", shape: shape("gemma3", 1152, 26, 6912, 4, 1, 256, 262_144, 32_768, true) },
    Preset { name: "gemma3-4b", shape: shape("gemma3", 2560, 34, 10_240, 8, 4, 256, 262_208, 131_072, true) },
    Preset { name: "llama3.2-1b", shape: shape("llama", 2048, 16, 8192, 32, 8, 64, 128_256, 131_072, true) },
    Preset { name: "llama3.2-3b", shape: shape("llama", 3072, 28, 8192, 24, 8, 128, 128_256, 131_072, true) },
    Preset { name: "llama3.1-8b", shape: shape("llama", 4096, 32, 14_336, 32, 8, 128, 128_256, 131_072, false) },
    Preset { name: "qwen2.5-0.5b", shape: shape("qwen2", 896, 24, 4864, 14, 2, 64, 151_936, 32_768, true) },
    Preset { name: "qwen2.5-1.5b", shape: shape("qwen2", 1536, 28, 8960, 12, 2, 128, 151_936, 32_768, true) },
    Preset { name: "qwen2.5-3b", shape: shape("qwen2", 2048, 36, 11_008, 16, 2, 128, 151_936, 32_768, true) },
    Preset { name: "qwen2.5-7b", shape: shape("qwen2", 3584, 28, 18_944, 28, 4, 128, 152_064, 32_768, false) },
];

/// Every preset name with each quantization, e.g. `gemma3-1b-q4_k_m`.
pub fn preset_names() -> Vec<String> {
    PRESETS.iter().flat_map(|p| [Quant::Q4KM, Quant::Q8_0].map(|q| format!("{}-{}", p.name, q.name()))).collect()
}

/// The preset called `name` (`PRESET-QUANT`, or `PRESET` for its Q4_K_M form).
pub fn preset(name: &str) -> Result<(Preset, Quant), String> {
    let lower = name.to_ascii_lowercase();
    let (base, quant) = [Quant::Q4KM, Quant::Q8_0]
        .into_iter()
        .find_map(|q| lower.strip_suffix(&format!("-{}", q.name())).map(|b| (b.to_string(), q)))
        .unwrap_or((lower.clone(), Quant::Q4KM));
    PRESETS
        .iter()
        .find(|p| p.name == base)
        .map(|p| (*p, quant))
        .ok_or_else(|| format!("no synthetic model is called '{name}' (known: {})", preset_names().join(", ")))
}

impl Shape {
    /// The metadata every model of this shape carries, named `name`: the architecture's
    /// sizes, its norm epsilon and RoPE base as the family's releases set them, and Gemma 3's
    /// sliding window. No vocabulary and no tensors: the shape-only file
    /// ([`Shape::writer`]) and the tests' tiny models add their own, and a test changes any
    /// pair by writing it again ([`GgufWriter::kv`] replaces).
    pub fn header(&self, name: &str) -> GgufWriter {
        let a = self.architecture;
        let key = |k: &str| format!("{a}.{k}");
        let (rope_base, eps) = match a {
            "llama" => (500_000f32, 1e-5f32),
            _ => (1_000_000f32, 1e-6f32),
        };
        let w = GgufWriter::new()
            .kv("general.architecture", a)
            .kv("general.name", name)
            .kv(key("context_length"), self.context as u32)
            .kv(key("embedding_length"), self.hidden as u32)
            .kv(key("block_count"), self.layers as u32)
            .kv(key("feed_forward_length"), self.ffn as u32)
            .kv(key("attention.head_count"), self.heads as u32)
            .kv(key("attention.head_count_kv"), self.kv_heads as u32)
            .kv(key("attention.key_length"), self.head_dim as u32)
            .kv(key("attention.value_length"), self.head_dim as u32)
            .kv(key("attention.layer_norm_rms_epsilon"), eps)
            .kv(key("rope.freq_base"), rope_base)
            .kv(key("rope.dimension_count"), self.head_dim as u32);
        if a == "gemma3" {
            w.kv(key("attention.sliding_window"), 512u32)
        } else {
            w
        }
    }

    /// The shape-only file for this shape, quantized as `quant`, named `label`.
    pub fn writer(&self, quant: Quant, label: &str) -> GgufWriter {
        let a = self.architecture;
        let mut w = self.header(&format!("synthetic {label}")).kv("general.file_type", quant.file_type());
        w = spm_vocabulary(w, self.vocab as usize).kv(SYNTHETIC_KEY, label.to_string());

        let (h, q, kv) = (self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let matrix = |w: GgufWriter, name: String, cols: u64, rows: u64, role: Role, layer: u64| {
            let ty = matrix_type(quant, role, layer, self.layers, cols);
            w.tensor_synthetic(&name, &[cols, rows], ty, Fill::for_tensor(&name))
        };
        let vector = |w: GgufWriter, name: String, n: u64| w.tensor_synthetic(&name, &[n], GgmlType::F32, Fill::for_tensor(&name));
        let embedding = if self.tied { Role::Output } else { Role::Embedding };
        w = matrix(w, "token_embd.weight".into(), h, self.vocab, embedding, 0);
        w = vector(w, "output_norm.weight".into(), h);
        if !self.tied {
            w = matrix(w, "output.weight".into(), h, self.vocab, Role::Output, 0);
        }
        for l in 0..self.layers {
            let n = |t: &str| format!("blk.{l}.{t}");
            w = vector(w, n("attn_norm.weight"), h);
            w = matrix(w, n("attn_q.weight"), h, q, Role::Other, l);
            w = matrix(w, n("attn_k.weight"), h, kv, Role::Other, l);
            w = matrix(w, n("attn_v.weight"), h, kv, Role::AttnV, l);
            w = matrix(w, n("attn_output.weight"), q, h, Role::Other, l);
            w = vector(w, n("ffn_norm.weight"), h);
            w = matrix(w, n("ffn_gate.weight"), h, self.ffn, Role::Other, l);
            w = matrix(w, n("ffn_up.weight"), h, self.ffn, Role::Other, l);
            w = matrix(w, n("ffn_down.weight"), self.ffn, h, Role::FfnDown, l);
            match a {
                "gemma3" => {
                    w = vector(w, n("attn_q_norm.weight"), self.head_dim);
                    w = vector(w, n("attn_k_norm.weight"), self.head_dim);
                    w = vector(w, n("post_attention_norm.weight"), h);
                    w = vector(w, n("post_ffw_norm.weight"), h);
                }
                "qwen2" => {
                    w = vector(w, n("attn_q.bias"), q);
                    w = vector(w, n("attn_k.bias"), kv);
                    w = vector(w, n("attn_v.bias"), kv);
                }
                _ => {}
            }
        }
        w
    }
}

#[cfg(test)]
#[path = "synth_tests.rs"]
mod tests;
