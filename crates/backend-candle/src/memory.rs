//! What our candle backend holds for a load, predicted from the model file ([`Footprint`]):
//! - weights: the embedding as stored; each layer's matrices as its [`WeightFormat`] keeps
//!   them (`dual` holds the stored copy and an f16 one, but for [`crate::tiles::dual_keeps_quantized`]); norms and biases in f32; and on an
//!   x86 CPU the copy candle's quantized kernels repack a matrix into at its first product
//!   ([`repacked_bytes`]);
//! - KV cache: f32 keys and values for every layer at each slot's full context;
//! - scratch: the RoPE tables, a row of logits per slot, and the largest prefill step's
//!   activations (every sequence of the step together) and attention scores (materialised,
//!   there is no flash attention, for a tile of queries against the whole context: scores,
//!   masked scores and probabilities).

use lx_engine::backend::LoadSpec;
use lx_engine::footprint::{Footprint, BYTES_PER_VOCABULARY_ENTRY};
use lx_format::gguf::{GgmlType, GgufFile, ModelConfig};

use crate::tiles::{dual_keeps_quantized, repacked_per_weight, whole_tiles};

use crate::model::ATTN_Q_TILE;
use crate::WeightFormat;

/// Bytes of the weights as `format` holds them.
pub fn weight_bytes(g: &GgufFile, format: WeightFormat) -> u64 {
    let tied = g.tensor("output.weight").is_none();
    g.tensors()
        .iter()
        .map(|t| {
            let n = t.n_elements();
            let stored = t.n_bytes();
            let as_q8 = if t.ggml_type == GgmlType::Q5_0 {
                GgmlType::Q8_0.bytes_for(n).unwrap_or(stored)
            } else {
                stored
            };
            match t.name.as_str() {
                "token_embd.weight" if tied && format == WeightFormat::F32 => stored + n * 4,
                "token_embd.weight" => stored,
                "output.weight" if format == WeightFormat::F32 => n * 4,
                "output.weight" => stored,
                name if name.starts_with("blk.") && t.dims.len() == 2 => match format {
                    WeightFormat::Quantized => stored,
                    WeightFormat::Q8_0 => as_q8,
                    WeightFormat::F16 => n * 2,
                    WeightFormat::F32 => n * 4,
                    WeightFormat::Dual if dual_keeps_quantized(t) => as_q8,
                    WeightFormat::Dual => as_q8 + n * 2,
                },
                _ => n * 4,
            }
        })
        .sum()
}

/// The repacked copies candle makes of the matrices its quantized kernels multiply (they
/// keep the stored ones too): each layer's matrices unless `format` dequantizes them (`dual`
/// multiplies fewer than 16 rows through them: several only when several sequences decode
/// together), and the output projection, whose products are one row per sequence. Only
/// matrices of whole 16-row by 256-value tiles are repacked.
pub fn repacked_bytes(g: &GgufFile, format: WeightFormat, slots: usize) -> u64 {
    if format == WeightFormat::F32 {
        return 0;
    }
    let output = if g.tensor("output.weight").is_some() { "output.weight" } else { "token_embd.weight" };
    g.tensors()
        .iter()
        .filter(|t| whole_tiles(t))
        .filter_map(|t| {
            let several_rows = if t.name == output {
                slots > 1
            } else if t.name.starts_with("blk.") {
                match format {
                    WeightFormat::F16 => return None,
                    WeightFormat::Dual => slots > 1 || dual_keeps_quantized(t),
                    _ => true,
                }
            } else {
                return None;
            };
            let stored = if format != WeightFormat::Quantized && t.ggml_type == GgmlType::Q5_0 && t.name.starts_with("blk.") { GgmlType::Q8_0 } else { t.ggml_type };
            repacked_per_weight(stored, several_rows).map(|b| (t.n_elements() as f64 * b) as u64)
        })
        .sum()
}

/// `spec`'s footprint with the layers' weights held as `format`; `runtime` is the worker
/// process's own (measured by the caller).
pub fn footprint(g: &GgufFile, spec: &LoadSpec, format: WeightFormat, runtime: u64) -> Result<Footprint, String> {
    lx_format::arch::check_architecture(g).map_err(|e| e.to_string())?;
    let c = ModelConfig::from_gguf(g).map_err(|e| e.to_string())?;
    let (slots, ctx) = (spec.slots.max(1) as u64, spec.ctx_per_slot as u64);
    let kv_heads = c.head_count_kv as u64;
    let kv_cache = slots * ctx * c.block_count as u64 * kv_heads * (c.key_length + c.value_length) as u64 * 4;
    let (vocab, embd, ff, heads) = (c.vocab_size as u64, c.embedding_length as u64, c.feed_forward_length as u64, c.head_count as u64);
    let tables = if c.sliding_window.is_some() { 2 } else { 1 };
    // A prefill step carries up to a batch of tokens from several sequences, whose layers'
    // products run together (only one-token decode steps go a sequence at a time).
    let step = (spec.max_batch_tokens.max(1) as u64).min(slots * ctx);
    let scratch = tables * ctx * c.key_length as u64 * 4
        + slots * vocab * 4
        + vocab * BYTES_PER_VOCABULARY_ENTRY
        + step * (embd * 6 + ff * 3) * 4
        + (ATTN_Q_TILE as u64).min(step) * ctx * heads * 4 * 3;
    Ok(Footprint { weights: weight_bytes(g, format) + repacked_bytes(g, format, spec.slots), kv_cache, scratch, runtime })
}
