//! The fastest a model can run on a machine: bytes a decode step must read and FLOPs a prompt
//! token costs (from the GGUF), against the memory bandwidth and compute rate the machine
//! was measured to have ([`crate::probe`]). Decode reads every weight once per step, so one
//! sequence is bound by memory; a batch shares that read and becomes bound by compute.
//! Prefill does P tokens' arithmetic per weight read: bound by compute.

use serde::{Deserialize, Serialize};

use lx_format::gguf::{GgufError, GgufFile, ModelConfig};

/// Bytes of one cached key or value element: llama.cpp's default KV cache type (f16).
pub const KV_ELEMENT_BYTES: u64 = 2;

/// What one token costs a model, read from its GGUF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCost {
    /// Weight bytes one decode step reads: every tensor once, except that the token
    /// embedding table is read one row per token unless the output projection shares it.
    pub weight_bytes_per_step: u64,
    /// FLOPs of the matrix products per token through the blocks (2 per multiply-add).
    pub block_flops_per_token: u64,
    /// FLOPs of the output projection (logits) for one token: every decode step pays it,
    /// a prompt only for its last token.
    pub output_flops_per_token: u64,
    /// KV cache bytes one cached token adds in one layer (keys and values, f16).
    pub kv_bytes_per_token_layer: u64,
    /// Attention FLOPs per attended position in one layer (scores and weighted sum).
    pub attention_flops_per_position_layer: u64,
    /// Per layer, how many past positions attention sees: `None` all of them, `Some(w)` a
    /// sliding window of `w` (Gemma's local layers).
    pub layer_windows: Vec<Option<u32>>,
}

/// A machine's measured limits for one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Limits {
    /// The device measured, e.g. "CPU (2 threads)" or "CUDA 0".
    pub device: String,
    /// Memory read bandwidth, bytes/s.
    pub memory_bytes_per_s: f64,
    /// Matrix-product rate, FLOP/s, and what measured it.
    pub compute_flops_per_s: f64,
    pub compute_method: String,
}

/// Which limit a ceiling comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Memory,
    Compute,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
        })
    }
}

/// The most one point's setting allows on a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct PointCeiling {
    /// Least possible TTFT: the prompt's prefill at the machine's limits.
    pub least_ttft_ms: f64,
    /// Most possible prefill tok/s, and the limit it comes from.
    pub prefill_tps: f64,
    pub prefill_bound: Bound,
    /// Most possible decode tok/s of one request, with `concurrency` sequences decoding
    /// together at the middle of the output, and the limit it comes from.
    pub decode_tps: f64,
    pub decode_bound: Bound,
    /// Most possible output tok/s of all sequences together.
    pub throughput_tps: f64,
    /// The device whose limits it was computed from (the run's `limits` has the figures).
    pub device: String,
}

impl ModelCost {
    pub fn from_gguf(g: &GgufFile) -> Result<ModelCost, GgufError> {
        let config = ModelConfig::from_gguf(g)?;
        let tied = g.tensor("output.weight").is_none();
        let mut weight_bytes = 0u64;
        let mut block_macs = 0u64;
        for t in g.tensors() {
            let bytes = t.n_bytes();
            weight_bytes += match t.name.as_str() {
                // One row per token, unless the output projection reads all of it.
                "token_embd.weight" if !tied => bytes / t.dims.get(1).copied().unwrap_or(1).max(1),
                _ => bytes,
            };
            if t.name.starts_with("blk.") && t.dims.len() == 2 {
                block_macs += t.n_elements();
            }
        }
        let d = config.embedding_length as u64;
        let vocab = config.vocab_size as u64;
        let heads = config.head_count as u64;
        let kv_heads = config.head_count_kv as u64;
        let (k, v) = (config.key_length as u64, config.value_length as u64);
        Ok(ModelCost {
            weight_bytes_per_step: weight_bytes,
            block_flops_per_token: 2 * block_macs,
            output_flops_per_token: 2 * d * vocab,
            kv_bytes_per_token_layer: kv_heads * (k + v) * KV_ELEMENT_BYTES,
            attention_flops_per_position_layer: 2 * heads * (k + v),
            layer_windows: config.layer_windows(),
        })
    }

    /// Past positions attention reads, summed over layers, for a token at `position`.
    fn attended(&self, position: u64) -> u64 {
        self.layer_windows.iter().map(|w| w.map_or(position, |w| position.min(w as u64))).sum()
    }

    /// KV cache bytes a decode step at `position` reads for one sequence.
    pub fn kv_bytes_at(&self, position: u64) -> u64 {
        self.attended(position) * self.kv_bytes_per_token_layer
    }

    /// FLOPs of one decoded token at `position` (blocks, attention, logits).
    pub fn decode_flops_at(&self, position: u64) -> u64 {
        self.block_flops_per_token + self.output_flops_per_token + self.attended(position) * self.attention_flops_per_position_layer
    }

    /// FLOPs of a `prompt`-token prefill after `depth` cached tokens: every token through
    /// the blocks, each attending to all before it, logits for the last one only.
    pub fn prefill_flops(&self, depth: u64, prompt: u64) -> u64 {
        let attended: u64 = (depth..depth + prompt).map(|p| self.attended(p + 1)).sum();
        prompt * self.block_flops_per_token + attended * self.attention_flops_per_position_layer + self.output_flops_per_token
    }

    /// The ceilings of a point: `prompt` new tokens after `depth`, `max_tokens` out,
    /// `concurrency` sequences decoding together.
    pub fn ceiling(&self, limits: &Limits, depth: u32, prompt: u32, max_tokens: u32, concurrency: usize) -> PointCeiling {
        let (depth, prompt) = (depth as u64, prompt as u64);
        let bw = limits.memory_bytes_per_s.max(1.0);
        let fl = limits.compute_flops_per_s.max(1.0);
        // Prefill reads the weights once and the cached depth once, and computes everything.
        let read_s = (self.weight_bytes_per_step + self.kv_bytes_at(depth)) as f64 / bw;
        let compute_s = self.prefill_flops(depth, prompt) as f64 / fl;
        let (prefill_s, prefill_bound) = longer(read_s, compute_s);
        // Decode: one step reads the weights once for the whole batch and each sequence's KV.
        let c = concurrency.max(1) as u64;
        let position = depth + prompt + (max_tokens as u64) / 2;
        let read_s = (self.weight_bytes_per_step + c * self.kv_bytes_at(position)) as f64 / bw;
        let compute_s = (c * self.decode_flops_at(position)) as f64 / fl;
        let (step_s, decode_bound) = longer(read_s, compute_s);
        PointCeiling {
            least_ttft_ms: prefill_s * 1e3,
            prefill_tps: prompt as f64 / prefill_s,
            prefill_bound,
            decode_tps: 1.0 / step_s,
            decode_bound,
            throughput_tps: c as f64 / step_s,
            device: limits.device.clone(),
        }
    }
}

fn longer(read_s: f64, compute_s: f64) -> (f64, Bound) {
    if read_s >= compute_s {
        (read_s, Bound::Memory)
    } else {
        (compute_s, Bound::Compute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_format::gguf::GgufWriter;

    /// Two blocks of a llama-shaped model: d 8, 2 heads of 4, 1 KV head, ff 16, vocab 32.
    fn fixture(dir: &std::path::Path, arch: &str, tied: bool, window: Option<u32>) -> GgufFile {
        let (d, ff, vocab) = (8u64, 16u64, 32u64);
        let mut w = GgufWriter::new()
            .kv("general.architecture", arch)
            .kv(format!("{arch}.context_length"), 64u32)
            .kv(format!("{arch}.embedding_length"), d as u32)
            .kv(format!("{arch}.feed_forward_length"), ff as u32)
            .kv(format!("{arch}.block_count"), 2u32)
            .kv(format!("{arch}.attention.head_count"), 2u32)
            .kv(format!("{arch}.attention.head_count_kv"), 1u32)
            .kv("tokenizer.ggml.tokens", (0..vocab).map(|i| format!("t{i}")).collect::<Vec<_>>());
        if let Some(win) = window {
            w = w.kv(format!("{arch}.attention.sliding_window"), win);
        }
        let zeros = |n: u64| vec![0f32; n as usize];
        w = w.tensor_f32("token_embd.weight", &[d, vocab], &zeros(d * vocab)).tensor_f32("output_norm.weight", &[d], &zeros(d));
        if !tied {
            w = w.tensor_f32("output.weight", &[d, vocab], &zeros(d * vocab));
        }
        for b in 0..2 {
            for (name, dims) in [("attn_q", [d, d]), ("attn_k", [d, 4]), ("attn_v", [d, 4]), ("attn_output", [d, d]), ("ffn_gate", [d, ff]), ("ffn_up", [d, ff]), ("ffn_down", [ff, d])] {
                w = w.tensor_f32(format!("blk.{b}.{name}.weight"), &dims, &zeros(dims[0] * dims[1]));
            }
            w = w.tensor_f32(format!("blk.{b}.attn_norm.weight"), &[d], &zeros(d));
        }
        let path = dir.join(format!("{arch}-{tied}.gguf"));
        w.write(&path).unwrap();
        GgufFile::open(&path).unwrap()
    }

    // Per block: q 64 + k 32 + v 32 + o 64 + gate 128 + up 128 + down 128 = 576 weights,
    // plus the 8-element norm; two blocks 1168 f32 values. Output norm 8.
    #[test]
    fn costs_from_the_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let untied = ModelCost::from_gguf(&fixture(dir.path(), "llama", false, None)).unwrap();
        // Embedding: one row of 8 f32; output 256 f32; blocks 1168; output norm 8.
        assert_eq!(untied.weight_bytes_per_step, 4 * (8 + 256 + 1168 + 8));
        assert_eq!(untied.block_flops_per_token, 2 * 2 * 576);
        assert_eq!(untied.output_flops_per_token, 2 * 8 * 32);
        // One KV head of 4: (4 + 4) f16 values.
        assert_eq!(untied.kv_bytes_per_token_layer, 16);
        assert_eq!(untied.attention_flops_per_position_layer, 2 * 2 * 8);
        assert_eq!(untied.layer_windows, vec![None, None]);

        let tied = ModelCost::from_gguf(&fixture(dir.path(), "llama", true, None)).unwrap();
        // The output projection reads the whole shared table.
        assert_eq!(tied.weight_bytes_per_step, 4 * (256 + 1168 + 8));
    }

    #[test]
    fn sliding_windows_follow_the_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let gemma2 = ModelCost::from_gguf(&fixture(dir.path(), "gemma2", false, Some(4))).unwrap();
        assert_eq!(gemma2.layer_windows, vec![Some(4), None]);
        // At position 10: 4 in the local layer, 10 in the global one.
        assert_eq!(gemma2.kv_bytes_at(10), (4 + 10) * 16);
        let llama = ModelCost::from_gguf(&fixture(dir.path(), "llama", false, Some(4))).unwrap();
        assert_eq!(llama.kv_bytes_at(10), 20 * 16);
    }

    #[test]
    fn ceilings_from_known_limits() {
        let dir = tempfile::tempdir().unwrap();
        let cost = ModelCost::from_gguf(&fixture(dir.path(), "llama", false, None)).unwrap();
        let limits = Limits { device: "test".into(), memory_bytes_per_s: 1e6, compute_flops_per_s: 1e6, compute_method: "given".into() };
        // Decode of one sequence at position 2 + 4 + 2 = 8: reads 5760 + 8·2·16 = 6016 bytes
        // (6.016 ms) and computes 2304 + 512 + 16·32 = 3328 FLOPs (3.328 ms): memory-bound.
        let one = cost.ceiling(&limits, 2, 4, 4, 1);
        assert_eq!(one.decode_bound, Bound::Memory);
        assert!((one.decode_tps - 1e6 / 6016.0).abs() < 1e-9);
        assert!((one.throughput_tps - one.decode_tps).abs() < 1e-12);
        // Prefill of 4 after 2: 4·2304 + (3+4+5+6)·2·32 + 512 = 10880 FLOPs (10.88 ms) against
        // 5760 + 2·2·16 = 5824 bytes read: compute-bound.
        assert_eq!(one.prefill_bound, Bound::Compute);
        assert!((one.least_ttft_ms - 10.88).abs() < 1e-9);
        assert!((one.prefill_tps - 4.0 / 0.01088).abs() < 1e-6);
        // Eight sequences share the weight read: 5760 + 8·256 = 7808 bytes against
        // 8·3328 = 26624 FLOPs: compute-bound, 8 tokens per 26.624 ms.
        let eight = cost.ceiling(&limits, 2, 4, 4, 8);
        assert_eq!(eight.decode_bound, Bound::Compute);
        assert!((eight.throughput_tps - 8.0 / 0.026624).abs() < 1e-6);
        assert!((eight.decode_tps - 1.0 / 0.026624).abs() < 1e-6);
    }
}
