//! What our MLX backend holds for a load, predicted from the model file ([`Footprint`]):
//! - weights: each matrix as [`WeightMode`] keeps it (MLX affine: packed integers with an f32
//!   scale and bias per group; else f16); norms and biases in f32;
//! - KV cache: f32 keys and values for every layer at each slot's full context, allocated
//!   and zeroed at load;
//! - scratch: a row of logits per slot, and the largest step's activations and attention
//!   scores (one batch of tokens against a whole context, untiled).

use lx_engine::backend::LoadSpec;
use lx_engine::footprint::{Footprint, BYTES_PER_VOCABULARY_ENTRY};
use lx_format::gguf::{GgmlType, GgufFile, ModelConfig, TensorInfo};

use crate::WeightMode;

/// MLX's own quantization (`mlx.core.quantize` defaults): group and bits.
pub const MLX4_GROUP: u64 = 64;
pub const MLX4_BITS: u64 = 4;

/// Bytes of an affine matrix of `n` weights at `bits`, an f32 scale and bias per `group`.
fn affine(n: u64, bits: u64, group: u64) -> u64 {
    n * bits / 8 + 2 * (n / group) * 4
}

fn matrix_bytes(t: &TensorInfo, mode: WeightMode) -> u64 {
    let (n, cols) = (t.n_elements(), t.dims[0]);
    match (mode, t.ggml_type) {
        (WeightMode::AsLoaded, GgmlType::Q4_0 | GgmlType::Q4_1) => affine(n, 4, crate::repack::GROUP as u64),
        (WeightMode::AsLoaded, GgmlType::Q8_0) => affine(n, 8, crate::repack::GROUP as u64),
        (WeightMode::Mlx4, _) if cols % MLX4_GROUP == 0 => affine(n, MLX4_BITS, MLX4_GROUP),
        _ => n * 2,
    }
}

/// Bytes of the weights as `mode` holds them.
pub fn weight_bytes(g: &GgufFile, mode: WeightMode) -> u64 {
    g.tensors().iter().map(|t| if t.dims.len() == 2 { matrix_bytes(t, mode) } else { t.n_elements() * 4 }).sum()
}

/// `spec`'s footprint with the weights held as `mode`; `runtime` is the worker process's
/// own (measured by the caller).
pub fn footprint(g: &GgufFile, spec: &LoadSpec, mode: WeightMode, runtime: u64) -> Result<Footprint, String> {
    lx_format::arch::check_architecture(g).map_err(|e| e.to_string())?;
    let c = ModelConfig::from_gguf(g).map_err(|e| e.to_string())?;
    let (slots, ctx) = (spec.slots.max(1) as u64, spec.ctx_per_slot as u64);
    let kv_cache = slots * ctx * c.block_count as u64 * c.head_count_kv as u64 * (c.key_length + c.value_length) as u64 * 4;
    let (vocab, embd, ff, heads) = (c.vocab_size as u64, c.embedding_length as u64, c.feed_forward_length as u64, c.head_count as u64);
    let step = (spec.max_batch_tokens.max(1) as u64).min(slots * ctx);
    // Activations in f32 and again in the f16 each dense product casts them to; attention's
    // scores four times over (MLX's CPU attention materialises the scores, their scaled and
    // masked copies and the probabilities), beside the f32 masks of local and global layers.
    let activations = step * (embd * 6 + ff * 3) * (4 + 2);
    let attention = step * ctx * (heads * 4 * 4 + 2 * 4);
    let scratch = slots * vocab * 4 + vocab * BYTES_PER_VOCABULARY_ENTRY + activations + attention;
    Ok(Footprint { weights: weight_bytes(g, mode), kv_cache, scratch, runtime })
}
