//! The backend check (`lx hw --check`, the app's "Check backends"): a tiny generated
//! model through every backend of this build on every device it can use, a few tokens
//! each, in worker processes, so a backend that crashes or hangs fails its row and
//! nothing else. Proof for *this* machine that a backend loads and runs where it says.

use std::path::Path;
use std::time::{Duration, Instant};

use lx_engine::backend::{LoadSpec, TokenId};
use lx_worker::coordinator::Worker;
use lx_format::gguf::synth::Shape;
use lx_client::traffic::{run_closed_loop, PointSpec, Quiet, RunControl};
use lx_engine::scheduler::{Policy, SchedulerConfig};
use serde::{Deserialize, Serialize};

/// One backend on one device: what was asked, where it ran, and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct CheckRow {
    pub backend: String,
    /// `default` (the backend's own choice: its GPU where it has one) or `cpu`.
    pub requested: String,
    /// Where it ran, read back from the library (empty when it did not load).
    pub device: String,
    /// Set when a GPU-capable backend ran on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_fallback: Option<String>,
    pub ok: bool,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Worker start and model load.
    pub load_ms: f64,
    /// Prefill and decode of the check's tokens.
    pub run_ms: f64,
    pub tokens: usize,
}

/// Tokens each check generates after its prompt.
pub const CHECK_TOKENS: u32 = 8;
const PROMPT: [TokenId; 8] = [1, 20, 21, 22, 23, 24, 25, 26];
/// A tiny model loads in well under a second; this bounds a backend that hangs.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Which devices to try for `backend`: its default, and the CPU too where the default may
/// be a GPU (llama.cpp in a CUDA, Metal or Vulkan build; candle in a CUDA or Metal build;
/// MLX on a Mac).
pub fn devices_to_try(backend: &str) -> Vec<&'static str> {
    if crate::BackendKind::of(backend).is_some_and(|k| k.may_use_gpu(&crate::build_features())) {
        vec!["default", "cpu"]
    } else {
        vec!["default"]
    }
}

/// Runs the check for every backend of this build on every device it can use, calling
/// `progress` with each row as it finishes. Backends this build lacks are left out.
pub fn run(progress: &mut dyn FnMut(&CheckRow)) -> anyhow::Result<Vec<CheckRow>> {
    let dir = tempfile::tempdir()?;
    let model = dir.path().join("tiny-gemma3-q8_0.gguf");
    write_tiny_model(&model)?;
    let mut rows = Vec::new();
    for backend in crate::built() {
        for requested in devices_to_try(&backend) {
            let row = check_one(&backend, requested, &model);
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

fn check_one(backend: &str, requested: &str, model: &Path) -> CheckRow {
    let mut row = CheckRow {
        backend: backend.into(),
        requested: requested.into(),
        device: String::new(),
        cpu_fallback: None,
        ok: false,
        error: None,
        load_ms: 0.0,
        run_ms: 0.0,
        tokens: 0,
    };
    let spec = LoadSpec {
        model_path: model.to_path_buf(),
        threads: 0,
        slots: 1,
        ctx_per_slot: 64,
        max_batch_tokens: 64,
        gpu_layers: (requested == "cpu").then_some(0),
        ..Default::default()
    };
    let scheduler = SchedulerConfig::new(Policy::Serial, 1, spec.max_batch_tokens);
    let started = Instant::now();
    let mut worker = match Worker::spawn(&crate::worker_command(backend), &spec, &scheduler, LOAD_TIMEOUT) {
        Ok(w) => w,
        Err(e) => {
            row.load_ms = started.elapsed().as_secs_f64() * 1e3;
            row.error = Some(e.to_string());
            return row;
        }
    };
    row.load_ms = started.elapsed().as_secs_f64() * 1e3;
    row.device = worker.info().device.clone();
    row.cpu_fallback = worker.info().cpu_fallback.clone();
    let point = PointSpec {
        prompt_tokens: PROMPT.len() as u32,
        max_tokens: CHECK_TOKENS,
        concurrency: 1,
        requests: 1,
        warmup: 0,
        stop_at_eos: false,
        top_logprobs: 0,
    };
    let started = Instant::now();
    let run = run_closed_loop(&mut worker, &point, &|_| PROMPT.to_vec(), &[], &RunControl::default(), &mut Quiet);
    row.run_ms = started.elapsed().as_secs_f64() * 1e3;
    match run.records.first() {
        Some(r) if r.error.is_none() => {
            row.tokens = r.tokens.len();
            row.ok = row.tokens == CHECK_TOKENS as usize;
            if !row.ok {
                row.error = Some(format!("made {} of {CHECK_TOKENS} tokens", row.tokens));
            }
        }
        Some(r) => row.error = r.error.clone(),
        None => row.error = Some("the worker returned no result".into()),
    }
    row
}

// The tiny model: Gemma 3's layout (so every backend's real code path runs) at a size that
// loads in milliseconds. Matrices are Q8_0 (the quantized kernels are what a GPU build
// most often gets wrong), norms f32; values are a fixed pseudo-random pattern.
const TINY: Shape = Shape { architecture: "gemma3", hidden: 64, layers: 2, ffn: 128, heads: 2, kv_heads: 1, head_dim: 32, vocab: 512, context: 1024, tied: true };

/// Writes the check's tiny Gemma 3 model (about 100 KB) to `path`.
pub fn write_tiny_model(path: &Path) -> anyhow::Result<()> {
    const VOCAB: usize = TINY.vocab as usize;
    const HIDDEN: usize = TINY.hidden as usize;
    const FFN: usize = TINY.ffn as usize;
    const HEAD_DIM: usize = TINY.head_dim as usize;
    let mut w = lx_format::gguf::synth::spm_vocabulary(TINY.header("latency-explorer backend check (tiny, generated)"), VOCAB);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut values = |n: usize, scale: f32, offset: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                // xorshift64: a fixed pattern with no dependency.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                offset + scale * ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            })
            .collect()
    };
    let dims = |rows: usize, cols: usize| [cols as u64, rows as u64];
    w = w.tensor_q8_0("token_embd.weight", &dims(VOCAB, HIDDEN), &values(VOCAB * HIDDEN, 1.0, 0.0));
    w = w.tensor_f32("output_norm.weight", &[HIDDEN as u64], &values(HIDDEN, 0.2, 1.0));
    for l in 0..TINY.layers {
        let name = |t: &str| format!("blk.{l}.{t}.weight");
        for norm in ["attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"] {
            w = w.tensor_f32(name(norm), &[HIDDEN as u64], &values(HIDDEN, 0.2, 1.0));
        }
        for norm in ["attn_q_norm", "attn_k_norm"] {
            w = w.tensor_f32(name(norm), &[HEAD_DIM as u64], &values(HEAD_DIM, 0.2, 1.0));
        }
        let q = TINY.heads as usize * HEAD_DIM;
        let kv = TINY.kv_heads as usize * HEAD_DIM;
        for (t, rows, cols) in [
            ("attn_q", q, HIDDEN),
            ("attn_k", kv, HIDDEN),
            ("attn_v", kv, HIDDEN),
            ("attn_output", HIDDEN, q),
            ("ffn_gate", FFN, HIDDEN),
            ("ffn_up", FFN, HIDDEN),
            ("ffn_down", HIDDEN, FFN),
        ] {
            w = w.tensor_q8_0(name(t), &dims(rows, cols), &values(rows * cols, 0.5, 0.0));
        }
    }
    w.write(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiny_model_reads_back_as_gemma3_with_q8_0_matrices() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny_model(&path).unwrap();
        let g = lx_format::gguf::GgufFile::open(&path).unwrap();
        assert_eq!(g.architecture().unwrap(), "gemma3");
        let q = g.tensor("blk.1.attn_q.weight").unwrap();
        assert_eq!(q.ggml_type, lx_format::gguf::GgmlType::Q8_0);
        assert_eq!(g.get_str_array("tokenizer.ggml.tokens").unwrap().len() as u64, TINY.vocab);
        // The tokenizer the engine builds from it encodes text through the byte pieces.
        let tok = lx_format::tokenizer::Tokenizer::from_gguf(&g).unwrap();
        assert!(!tok.encode("hi").is_empty());
    }
}
