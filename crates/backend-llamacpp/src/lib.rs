//! llama.cpp behind the engine's step interface, through the `llama-cpp-2` crate.
//!
//! This crate is an adapter and nothing more: it turns an engine [`Batch`] into one
//! `llama_decode` call and reads back the rows of logits the engine asked for. All
//! scheduling, timing and statistics live in `lx-engine`.
//!
//! It is meant to run inside a worker process (one per backend): llama.cpp may be
//! initialised once per process, and a failed ggml assert aborts the whole process.

mod logs;

use std::num::NonZeroU32;
use std::sync::OnceLock;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend as LlamaRuntime;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{list_llama_ggml_backend_devices, LlamaBackendDeviceType};
use lx_engine::backend::{
    choose_greedy, Backend, BackendError, BackendInfo, Batch, Capabilities, ChunkOutput, LoadSpec,
    Outputs, Slot,
};

/// The crate version of the bindings, reported with every result.
pub const BINDINGS_VERSION: &str = "llama-cpp-2 0.1.160";

/// llama.cpp may be initialised once per process; every backend instance shares it.
fn runtime() -> &'static LlamaRuntime {
    static RUNTIME: OnceLock<LlamaRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        logs::install();
        LlamaRuntime::init().expect("llama.cpp initialised twice in one process")
    })
}

/// A GPU (or other accelerator) llama.cpp can offload to, if this build has one.
fn accelerator() -> Option<llama_cpp_2::LlamaBackendDevice> {
    list_llama_ggml_backend_devices().into_iter().find(|d| {
        matches!(
            d.device_type,
            LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu | LlamaBackendDeviceType::Accelerator
        )
    })
}

/// The devices llama.cpp sees in this build, as "Backend: description" lines (for `lx hw`).
pub fn devices() -> Vec<String> {
    let _ = runtime();
    list_llama_ggml_backend_devices()
        .into_iter()
        .map(|d| {
            let mem = if d.memory_total > 0 {
                format!(" ({:.1} GiB)", d.memory_total as f64 / (1u64 << 30) as f64)
            } else {
                String::new()
            };
            format!("{}: {}{}", d.backend, d.description.trim(), mem)
        })
        .collect()
}

/// Flash attention: llama.cpp decides (`auto`, the default, as its own tools do) unless
/// `LX_LLAMA_FLASH_ATTN` is `on` or `off`.
fn flash_attention() -> i32 {
    match std::env::var("LX_LLAMA_FLASH_ATTN").as_deref() {
        Ok("on") => 1,
        Ok("off") => 0,
        _ => -1,
    }
}

/// A model loaded into one llama.cpp context with `slots` sequences.
pub struct LlamaCppBackend {
    // The context borrows the model for as long as it lives. A worker loads one model
    // for its whole life, so the model is leaked rather than made self-referential.
    ctx: LlamaContext<'static>,
    batch: LlamaBatch<'static>,
    info: BackendInfo,
    /// Scratch: for each output row of the last batch, (chunk index, batch row).
    rows: Vec<(usize, i32)>,
    ctx_per_slot: usize,
}

impl LlamaCppBackend {
    /// Load `spec.model_path` and make a context sized for the requested slots and lengths.
    pub fn load(spec: &LoadSpec) -> Result<Self, BackendError> {
        let rt = runtime();
        let path = &spec.model_path;
        if !path.is_file() {
            return Err(BackendError::Load(format!("model file not found: {}", path.display())));
        }
        let threads = if spec.threads == 0 { lx_engine::hardware::physical_cores() } else { spec.threads };
        let slots = spec.slots.max(1);
        let mut model_params = LlamaModelParams::default();
        if let Some(layers) = spec.gpu_layers {
            model_params = model_params.with_n_gpu_layers(layers);
        }
        logs::take_recent();
        let model = LlamaModel::load_from_file(rt, path, &model_params).map_err(|e| {
            let why = logs::take_recent().join("; ");
            let why = if why.is_empty() { e.to_string() } else { why };
            BackendError::Load(format!("llama.cpp could not load {}: {why}", path.display()))
        })?;
        let model: &'static LlamaModel = Box::leak(Box::new(model));

        let trained = model.n_ctx_train() as usize;
        if spec.ctx_per_slot > trained {
            return Err(BackendError::Load(format!(
                "a context of {} tokens per sequence exceeds the model's trained context of {trained}",
                spec.ctx_per_slot
            )));
        }
        let n_ctx = (spec.ctx_per_slot * slots) as u32;
        let n_batch = spec.max_batch_tokens.max(1) as u32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_batch.min(512))
            .with_n_seq_max(slots as u32)
            // One KV stream per sequence: a sequence attends only to its own cells, as in
            // llama.cpp's server; batched decode then costs what it should.
            .with_kv_unified(false)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32)
            .with_flash_attention_policy(flash_attention());
        let ctx = model.new_context(rt, params).map_err(|e| {
            let why = logs::take_recent().join("; ");
            BackendError::Load(format!("llama.cpp could not create a context: {e} {why}"))
        })?;
        let ctx_per_slot = ctx.n_ctx() as usize / slots;

        let offloaded = spec.gpu_layers != Some(0);
        let device = match accelerator() {
            Some(d) if offloaded => format!("{}: {} (all layers offloaded)", d.backend, d.description.trim()),
            Some(d) => format!("CPU ({threads} threads; {} present but not used)", d.description.trim()),
            None => format!("CPU ({threads} threads)"),
        };
        let info = BackendInfo {
            name: "llama".into(),
            version: format!("llama.cpp ({BINDINGS_VERSION})"),
            device,
            threads,
            capabilities: Capabilities {
                mixed_position_batches: true,
                max_batch_tokens: n_batch as usize,
                slots,
                ctx_per_slot,
                prefix_copy: true,
            },
        };
        Ok(Self { ctx, batch: LlamaBatch::new(n_batch as usize, 1), info, rows: Vec::new(), ctx_per_slot })
    }
}

impl Backend for LlamaCppBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        let total = batch.token_count();
        if total == 0 {
            return Ok(Vec::new());
        }
        if total > self.info.capabilities.max_batch_tokens {
            return Err(BackendError::Step(format!(
                "batch of {total} tokens exceeds the {} tokens one step may carry",
                self.info.capabilities.max_batch_tokens
            )));
        }
        self.batch.clear();
        self.rows.clear();
        let mut row = 0i32;
        for (ci, chunk) in batch.chunks.iter().enumerate() {
            let end = chunk.pos as usize + chunk.tokens.len();
            if end > self.ctx_per_slot {
                return Err(BackendError::Step(format!(
                    "sequence in slot {} would reach position {end}, past its context of {}",
                    chunk.slot, self.ctx_per_slot
                )));
            }
            let last = chunk.tokens.len() - 1;
            for (i, &tok) in chunk.tokens.iter().enumerate() {
                let wants = match chunk.outputs {
                    Outputs::None => false,
                    Outputs::Last => i == last,
                    Outputs::All => true,
                };
                self.batch
                    .add(LlamaToken(tok as i32), (chunk.pos as usize + i) as i32, &[chunk.slot as i32], wants)
                    .map_err(|e| BackendError::Step(e.to_string()))?;
                if wants {
                    self.rows.push((ci, row));
                }
                row += 1;
            }
        }
        self.ctx.decode(&mut self.batch).map_err(|e| BackendError::Step(format!("llama_decode: {e}")))?;

        let mut outputs: Vec<ChunkOutput> = Vec::new();
        let mut last_chunk = usize::MAX;
        for &(ci, r) in &self.rows {
            let choice = choose_greedy(self.ctx.get_logits_ith(r), batch.top_logprobs);
            if ci != last_chunk {
                outputs.push(ChunkOutput { slot: batch.chunks[ci].slot, choices: Vec::new() });
                last_chunk = ci;
            }
            outputs.last_mut().expect("pushed above").choices.push(choice);
        }
        Ok(outputs)
    }

    fn clear(&mut self, slot: Slot) {
        // Removing a whole sequence cannot fail in llama.cpp; only partial removals can.
        let _ = self.ctx.clear_kv_cache_seq(Some(slot), None, None);
    }

    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        self.clear(to);
        // Each slot has its own KV stream (kv_unified off), and llama.cpp copies across
        // streams only whole (a partial range aborts the process in `seq_cp`). So copy the
        // whole sequence, then drop anything past `len`; the engine's prefix cache keeps a
        // slot that holds exactly the prefix, so the trim normally has nothing to do.
        self.ctx
            .copy_kv_cache_seq(from as i32, to as i32, None, None)
            .map_err(|e| BackendError::Step(format!("copy prefix: {e}")))?;
        match self.ctx.clear_kv_cache_seq(Some(to), Some(len), None) {
            Ok(true) => Ok(()),
            Ok(false) => Err(BackendError::Step(format!("copy prefix: could not trim slot {to} to {len} positions"))),
            Err(e) => Err(BackendError::Step(format!("copy prefix: {e}"))),
        }
    }
}
