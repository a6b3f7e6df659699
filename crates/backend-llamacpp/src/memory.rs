//! What llama.cpp holds for a load, predicted from the model file ([`Footprint`]):
//! - weights: the file's tensors, mapped, and on an x86 CPU a second copy of the matrices
//!   ggml repacks into interleaved rows at load (read through the mapping, which keeps them);
//! - KV cache: a global layer keeps its full context, padded to 256 cells a sequence (one
//!   stream of `slots × ctx` padded once in the unified layout); a sliding-window layer
//!   only its window and a micro-batch with a stream per sequence (as llama.cpp's own tools
//!   run it: `swa_full` off), the whole context in the unified layout; at the cache's key
//!   and value types;
//! - scratch: the output buffer (a row of logits per sequence), the token tables, and the
//!   micro-batch's activations and attention masks over the context.

use lx_engine::backend::{KvType, LoadSpec};
use lx_engine::footprint::{Footprint, BYTES_PER_VOCABULARY_ENTRY};
use lx_format::gguf::{GgufFile, ModelConfig};

use crate::KvLayout;

/// llama.cpp pads a context (a sequence's, or the unified stream's) to this many cells.
const CELL_PAD: u64 = 256;

fn padded(n: u64) -> u64 {
    n.div_ceil(CELL_PAD) * CELL_PAD
}

/// Bytes of `n` cached values of type `t` (whole blocks).
fn cache_bytes(t: KvType, n: u64) -> u64 {
    (n as f64 * t.bytes_per_element()).ceil() as u64
}

/// Cells a layer's KV cache holds for `spec`, over all its sequences: the whole context for
/// a global layer (`window` `None`) and for every layer of the unified layout; a sequence's
/// window and a micro-batch of `ubatch` tokens for a sliding-window layer with a stream per
/// sequence.
pub fn kv_cells(spec: &LoadSpec, layout: KvLayout, window: Option<u32>, ubatch: u64) -> u64 {
    let slots = spec.slots.max(1) as u64;
    match (layout, window) {
        (KvLayout::Unified, _) => padded(slots * spec.ctx_per_slot as u64),
        (KvLayout::PerSequence, None) => slots * padded(spec.ctx_per_slot as u64),
        (KvLayout::PerSequence, Some(w)) => slots * padded((spec.ctx_per_slot as u64).min(w as u64 + ubatch)),
    }
}

/// `spec`'s footprint with the cache laid out as `layout` and micro-batches of `ubatch`
/// tokens; `runtime` is the worker process's own (measured by the caller).
pub fn footprint(g: &GgufFile, spec: &LoadSpec, layout: KvLayout, ubatch: u64, runtime: u64) -> Result<Footprint, String> {
    let on_cpu = spec.gpu_layers == Some(0) || crate::GPU_BUILD.is_none();
    let c = ModelConfig::from_gguf(g).map_err(|e| e.to_string())?;
    let weights: u64 = g.tensors().iter().map(|t| t.n_bytes() + if on_cpu && repacked(t) { t.n_bytes() } else { 0 }).sum();
    let per_cell_layer = cache_bytes(spec.kv.k, c.head_count_kv as u64 * c.key_length as u64) + cache_bytes(spec.kv.v, c.head_count_kv as u64 * c.value_length as u64);
    let kv_cache = c.layer_windows().into_iter().map(|w| kv_cells(spec, layout, w, ubatch) * per_cell_layer).sum();
    let (vocab, embd, ff, heads) = (c.vocab_size as u64, c.embedding_length as u64, c.feed_forward_length as u64, c.head_count as u64);
    // llama.cpp reserves its compute buffer for a whole micro-batch (the batch is never
    // smaller: the engine asks for at least 512 tokens), whatever a step then carries.
    let stream = match layout {
        KvLayout::PerSequence => padded(spec.ctx_per_slot as u64),
        KvLayout::Unified => kv_cells(spec, layout, None, ubatch),
    };
    let scratch = spec.slots.max(1) as u64 * vocab * 4
        + vocab * BYTES_PER_VOCABULARY_ENTRY
        + ubatch * (embd * 6 + ff * 3 + heads * c.key_length as u64 * 2) * 4
        + ubatch * stream * 2 * 2;
    Ok(Footprint { weights, kv_cache, scratch, runtime })
}

/// Whether ggml's x86 CPU backend repacks `t` at load: a layer's matrix of a type it has
/// interleaved x86 kernels for (Q4_0, Q4_K: its Q8_0 matrices stay as stored, as the
/// default model's account of its buffers shows), with rows in eights.
fn repacked(t: &lx_format::gguf::TensorInfo) -> bool {
    use lx_format::gguf::GgmlType;
    cfg!(target_arch = "x86_64")
        && t.name.starts_with("blk.")
        && t.dims.len() == 2
        && t.dims[1] % 8 == 0
        && matches!(t.ggml_type, GgmlType::Q4_0 | GgmlType::Q4_K)
}

#[cfg(test)]
mod tests {
    use super::{kv_cells, KvLayout};
    use lx_engine::backend::LoadSpec;

    fn spec(slots: usize, ctx: usize) -> LoadSpec {
        LoadSpec { slots, ctx_per_slot: ctx, max_batch_tokens: 512, ..LoadSpec::default() }
    }

    #[test]
    fn a_sliding_window_layer_keeps_its_window_and_a_micro_batch() {
        // Global layers: the whole context, padded to 256 cells a stream.
        assert_eq!(kv_cells(&spec(1, 32_768), KvLayout::PerSequence, None, 512), 32_768);
        assert_eq!(kv_cells(&spec(4, 1000), KvLayout::PerSequence, None, 512), 4 * 1024);
        assert_eq!(kv_cells(&spec(4, 1000), KvLayout::Unified, None, 512), 4096);
        // A window of 512 and micro-batches of 512: 1024 cells a sequence, at any depth.
        assert_eq!(kv_cells(&spec(1, 32_768), KvLayout::PerSequence, Some(512), 512), 1024);
        assert_eq!(kv_cells(&spec(4, 32_768), KvLayout::PerSequence, Some(512), 512), 4 * 1024);
        // One unified stream keeps every layer's whole context.
        assert_eq!(kv_cells(&spec(4, 32_768), KvLayout::Unified, Some(512), 512), 4 * 32_768);
        // Never more than the whole context, and padded like it.
        assert_eq!(kv_cells(&spec(1, 600), KvLayout::PerSequence, Some(512), 512), 768);
        assert_eq!(kv_cells(&spec(1, 600), KvLayout::PerSequence, Some(512), 100), 768);
        assert_eq!(kv_cells(&spec(1, 600), KvLayout::PerSequence, Some(100), 100), 256);
        assert_eq!(kv_cells(&spec(3, 600), KvLayout::PerSequence, Some(100), 100), 3 * 256);
    }
}
