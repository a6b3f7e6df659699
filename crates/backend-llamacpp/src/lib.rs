//! llama.cpp behind the engine's step interface, through the `llama-cpp-2` crate.
//!
//! This crate is an adapter and nothing more: it turns an engine [`Batch`] into one
//! `llama_decode` call and reads back the rows of logits the engine asked for. All
//! scheduling, timing and statistics live in `lx-engine` and `lx-client`.
//!
//! It is meant to run inside a worker process (one per backend): llama.cpp may be
//! initialised once per process, and a failed ggml assert aborts the whole process.

mod logs;
pub mod memory;
pub mod probe;
mod state;

use std::num::NonZeroU32;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend as LlamaRuntime;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{list_llama_ggml_backend_devices, LlamaBackendDeviceType};
use lx_engine::backend::{
    choose, Backend, BackendError, BackendInfo, Batch, Capabilities, ChunkOutput, KvType,
    LoadSpec, Outputs, Slot,
};

/// The crate version of the bindings, reported with every result.
pub const BINDINGS_VERSION: &str = "llama-cpp-2 0.1.160";

/// llama.cpp may be initialised once per process; every backend instance shares it, and so
/// must code that calls llama.cpp directly in the same process (tests computing llama.cpp's
/// own answer beside the backend's).
pub fn runtime() -> &'static LlamaRuntime {
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

/// The GPU back end this build of llama.cpp was compiled with, if any.
pub const GPU_BUILD: Option<&str> = if cfg!(feature = "cuda") {
    Some("CUDA")
} else if cfg!(feature = "metal") {
    Some("Metal")
} else if cfg!(feature = "vulkan") {
    Some("Vulkan")
} else {
    None
};

/// Where the layers went, from llama.cpp's own account of placing them (`placement`: one
/// device name per layer, e.g. "CPU" or "Vulkan0"), as the device line of the backend's
/// info and, when a GPU could have taken layers the CPU got, the note that says so.
/// `gpu_layers`: where a layer count was asked for ("--gpu-layers 0"), if one was.
fn describe_placement(
    placement: &[String],
    threads: usize,
    accel: Option<&(String, String)>,
    gpu_layers: Option<&str>,
) -> (String, Option<String>) {
    let cpu = format!("CPU ({threads} threads)");
    let total = placement.len();
    if total == 0 {
        // Another log subscriber took llama.cpp's log, or its wording changed: say so
        // rather than guess from the settings.
        return (format!("{cpu}; layer placement not reported by llama.cpp"), None);
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for device in placement {
        match counts.iter_mut().find(|(d, _)| *d == device.as_str()) {
            Some((_, n)) => *n += 1,
            None => counts.push((device.as_str(), 1)),
        }
    }
    let name = |device: &str| -> String {
        match accel {
            _ if device == "CPU" => cpu.clone(),
            Some((n, description)) if n == device => format!("{n} {description}"),
            _ => device.to_string(),
        }
    };
    let device = match counts.as_slice() {
        [(only, _)] => format!("{}: all {total} layers", name(only)),
        parts => parts.iter().map(|(d, n)| format!("{}: {n} of {total} layers", name(d))).collect::<Vec<_>>().join("; "),
    };
    let on_cpu = counts.iter().find(|(d, _)| *d == "CPU").map_or(0, |(_, n)| *n);
    let offloaded = total - on_cpu;
    let why = match (accel, gpu_layers) {
        _ if on_cpu == 0 => return (device, None),
        (Some(_), Some(asked)) => asked.to_string(),
        (Some(_), None) => "llama.cpp kept them there".to_string(),
        (None, _) => match GPU_BUILD {
            Some(api) => format!("this build has {api} but llama.cpp found no {api} device"),
            None => return (device, None),
        },
    };
    let to = accel.map(|(n, _)| format!(" to {n}")).unwrap_or_default();
    (device, Some(format!("llama.cpp ran on the CPU: {offloaded} of {total} layers offloaded{to} ({why})")))
}

/// Flash attention: llama.cpp decides (`auto`, the default, as its own tools do) unless the
/// load's `flash_attn` is `on` or `off`. Returns llama.cpp's policy and its name.
fn flash_attention(spec: &LoadSpec) -> Result<(i32, &'static str), BackendError> {
    match spec.setting("flash_attn") {
        None | Some("auto") => Ok((-1, "auto")),
        Some("on") => Ok((1, "on")),
        Some("off") => Ok((0, "off")),
        Some(other) => Err(BackendError::Load(format!("flash_attn {other:?}: use auto, on or off"))),
    }
}

fn cache_type(t: KvType) -> KvCacheType {
    match t {
        KvType::F16 => KvCacheType::F16,
        KvType::Q8_0 => KvCacheType::Q8_0,
        KvType::Q4_0 => KvCacheType::Q4_0,
    }
}

/// Flash attention with the V cache's type: llama.cpp keeps a quantized V cache only inside
/// flash attention, so asking for one turns it on, and refuses where it was turned off.
fn flash_attention_for(spec: &LoadSpec, v: KvType) -> Result<(i32, &'static str), BackendError> {
    match flash_attention(spec)? {
        (0, _) if v != KvType::F16 => Err(BackendError::Load(format!(
            "a {} V cache needs flash attention, and flash_attn is off: turn it on (or auto), or keep the V cache f16",
            v.name()
        ))),
        _ if v != KvType::F16 => Ok((1, "on")),
        chosen => Ok(chosen),
    }
}

/// llama.cpp's own tools' micro-batch, in tokens.
pub const DEFAULT_UBATCH: u64 = 512;

/// Most tokens llama.cpp computes in one micro-batch: the load's `ubatch`, else 512 (its own
/// tools' default), never more than the batch.
fn micro_batch(spec: &LoadSpec, n_batch: u32) -> Result<u32, BackendError> {
    let asked = match spec.setting("ubatch") {
        None => DEFAULT_UBATCH as u32,
        Some(s) => s.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| BackendError::Load(format!("ubatch {s:?}: a number of tokens, at least 1")))?,
    };
    Ok(asked.min(n_batch))
}

/// How many layers to offload: `LoadSpec::gpu_layers` (`--gpu-layers`; where the run gives
/// none, this machine's tuned choice or `LX_LLAMA_GPU_LAYERS`, which the worker's
/// `settings_from` names), else llama.cpp's own default (every layer on the GPU it finds).
/// Returns the count asked for, as a CPU fallback's note gives it.
fn gpu_layers(spec: &LoadSpec) -> Option<(u32, String)> {
    spec.gpu_layers.map(|n| (n, format!("--gpu-layers {n}")))
}

/// How llama.cpp lays out the KV cache of the context's sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvLayout {
    /// One stream per sequence (llama.cpp's server's choice): a sequence attends only to its
    /// own cells, so a decode step's attention costs what its own context holds. The default.
    PerSequence,
    /// One buffer shared by every sequence: each sequence's attention spans the whole
    /// buffer (masked), so it costs more as the other sequences' contexts grow.
    Unified,
}

impl std::str::FromStr for KvLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "per-sequence" => Ok(Self::PerSequence),
            "unified" => Ok(Self::Unified),
            other => Err(format!("KV layout {other:?}: use per-sequence or unified")),
        }
    }
}

impl KvLayout {
    /// The load's `kv` (`per-sequence`, the default, or `unified`).
    pub fn from_spec(spec: &LoadSpec) -> Result<Self, BackendError> {
        spec.setting("kv").map_or(Ok(Self::PerSequence), str::parse).map_err(|e| BackendError::Load(format!("kv: {e}")))
    }

    /// The name the `kv` setting takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::PerSequence => "per-sequence",
            Self::Unified => "unified",
        }
    }
}

/// `, K q8_0, V q8_0` for a quantized cache; nothing for llama.cpp's default.
fn quantized_note(k: KvType, v: KvType) -> String {
    if (k, v) == (KvType::F16, KvType::F16) {
        String::new()
    } else {
        format!(", K {}, V {}", k.name(), v.name())
    }
}

/// A model loaded into one llama.cpp context with `slots` sequences.
pub struct LlamaCppBackend {
    // The context borrows the model for as long as it lives. A worker loads one model
    // for its whole life, so the model is leaked rather than made self-referential.
    ctx: LlamaContext<'static>,
    batch: LlamaBatch<'static>,
    info: BackendInfo,
    /// Scratch: each chunk's first output row in the last batch (`None`: it asked for none).
    rows: Vec<Option<i32>>,
    /// Scratch: chunk indices in the order their tokens go into llama.cpp's batch.
    order: Vec<usize>,
    /// How many positions each slot holds, so a bad batch is refused before ggml sees it.
    cached: Vec<usize>,
    vocab: usize,
    /// How long the last step's `llama_decode` took.
    compute: Option<Duration>,
    /// The narrowest sliding window of the model's layers (`None`: every layer is global).
    window: Option<u32>,
}

impl LlamaCppBackend {
    /// Whether `slot`, cut back to `len` positions, still holds the window the next
    /// position attends to. A sliding-window layer's cache reuses the cells that fell out of
    /// the window as the sequence grows, so a cut deeper than the last step may find them
    /// gone; the sequence is cleared then rather than left to compute on a partial window.
    fn window_kept(&mut self, slot: Slot, len: u32) -> Result<(), BackendError> {
        let Some(w) = self.window else { return Ok(()) };
        let needed = (len as i64 + 1 - w as i64).max(0);
        let oldest = self.ctx.kv_cache_seq_pos_min(slot as i32) as i64;
        if len == 0 || oldest <= needed {
            return Ok(());
        }
        self.clear(slot);
        Err(BackendError::Step(format!(
            "slot {slot} cut back to {len} positions no longer holds its sliding window of {w} (positions from {needed} were overwritten)"
        )))
    }

    /// Load `spec.model_path` and make a context sized for the requested slots and lengths,
    /// with the KV layout the load's `kv` setting asks for.
    pub fn load(spec: &LoadSpec) -> Result<Self, BackendError> {
        spec.settings_of(lx_engine::kind::BackendKind::Llama).map_err(BackendError::Load)?;
        Self::load_with(spec, KvLayout::from_spec(spec)?)
    }

    /// [`load`](Self::load) with the KV layout given.
    pub fn load_with(spec: &LoadSpec, kv: KvLayout) -> Result<Self, BackendError> {
        let rt = runtime();
        let path = &spec.model_path;
        if !path.is_file() {
            return Err(BackendError::Load(format!("model file not found: {}", path.display())));
        }
        let threads = lx_machine::hardware::threads_or_cores(spec.threads);
        let slots = spec.slots.max(1);
        let gpu_layers = gpu_layers(spec);
        let mut model_params = LlamaModelParams::default();
        if let Some((layers, _)) = gpu_layers {
            model_params = model_params.with_n_gpu_layers(layers);
        }
        logs::take_recent();
        logs::start_placement();
        let model = LlamaModel::load_from_file(rt, path, &model_params).map_err(|e| {
            logs::take_placement();
            let why = logs::take_recent().join("; ");
            let why = if why.is_empty() { e.to_string() } else { why };
            BackendError::Load(format!("llama.cpp could not load {}: {why}", path.display()))
        })?;
        // llama.cpp places the layers while loading the model's tensors.
        let placement = logs::take_placement();
        let weights_bytes = logs::take_model_buffers();
        let model: &'static LlamaModel = Box::leak(Box::new(model));

        // llama.cpp loads architectures whose metadata our reader does not know: those keep
        // no window we could check (`truncate` then trusts llama.cpp).
        let window = lx_format::gguf::GgufFile::open(path)
            .and_then(|g| lx_format::gguf::ModelConfig::from_gguf(&g))
            .ok()
            .and_then(|c| c.layer_windows().into_iter().flatten().min());
        let trained = model.n_ctx_train() as usize;
        if spec.ctx_per_slot > trained {
            return Err(BackendError::Load(format!(
                "a context of {} tokens per sequence exceeds the model's trained context of {trained}",
                spec.ctx_per_slot
            )));
        }
        let n_ctx = (spec.ctx_per_slot * slots) as u32;
        let n_batch = spec.max_batch_tokens.max(1) as u32;
        let n_ubatch = micro_batch(spec, n_batch)?;
        let (type_k, type_v) = (spec.kv.k, spec.kv.v);
        let (flash_attn, flash_attn_name) = flash_attention_for(spec, type_v)?;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_ubatch)
            .with_n_seq_max(slots as u32)
            // A sliding-window layer keeps its window and a micro-batch, not the whole
            // context, as llama.cpp's own tools run it (the C API's default keeps it all:
            // 5 of Gemma 3's 6 layers then attend over the whole context, 0.68x
            // llama-bench's prefill at depth 4096). `truncate` checks what that leaves. Not
            // in one unified cache: a prefix shared by several sequences pins its cells there
            // (a cell is reused only when one sequence holds it), and the window's few cells
            // fill up (no slot for the next batch).
            .with_swa_full(kv == KvLayout::Unified)
            .with_kv_unified(kv == KvLayout::Unified)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32)
            .with_flash_attention_policy(flash_attn)
            .with_type_k(cache_type(type_k))
            .with_type_v(cache_type(type_v))
            // A GPU build otherwise hands large batches' matrix products to the GPU even
            // with every layer on the CPU (ggml's op offload): --gpu-layers 0 means the CPU.
            .with_op_offload(!matches!(gpu_layers, Some((0, _))))
            .with_offload_kqv(!matches!(gpu_layers, Some((0, _))));
        logs::start_kv_buffers();
        let ctx = model.new_context(rt, params).map_err(|e| {
            logs::take_kv_buffers();
            let why = logs::take_recent().join("; ");
            BackendError::Load(format!("llama.cpp could not create a context: {e} {why}"))
        })?;
        let kv_cache_bytes = logs::take_kv_buffers();
        let ctx_per_slot = ctx.n_ctx() as usize / slots;
        let vocab = model.n_vocab() as usize;

        let accel = accelerator().map(|d| (d.name, d.description.trim().to_string()));
        let (device, cpu_fallback) =
            describe_placement(&placement, threads, accel.as_ref(), gpu_layers.as_ref().map(|(_, asked)| asked.as_str()));
        let info = BackendInfo {
            name: "llama".into(),
            version: format!("llama.cpp ({BINDINGS_VERSION}); KV cache {}{}", kv.name(), quantized_note(type_k, type_v)),
            device,
            cpu_fallback,
            threads,
            capabilities: Capabilities {
                mixed_position_batches: true,
                max_batch_tokens: n_batch as usize,
                slots,
                ctx_per_slot,
                prefix_copy: true,
            },
            settings: [("flash_attn", flash_attn_name.to_string()), ("kv", kv.name().to_string()), ("ubatch", n_ubatch.to_string())]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                // Only a GPU build has layers to place: a CPU build's settings stay as they were.
                .chain(GPU_BUILD.map(|_| ("gpu_layers".to_string(), gpu_layers.as_ref().map_or("all".to_string(), |(n, _)| n.to_string()))))
                // Cache types other than the default only, so runs without them read as before.
                .chain([("kv_type_k", type_k), ("kv_type_v", type_v)].into_iter().filter(|(_, t)| *t != KvType::F16).map(|(k, t)| (k.to_string(), t.name().to_string())))
                .collect(),
            settings_from: None,
            draft: None,
            kv_cache_bytes,
            weights_bytes,
        };
        Ok(Self {
            ctx,
            batch: LlamaBatch::new(n_batch as usize, 1),
            info,
            rows: Vec::new(),
            order: Vec::new(),
            cached: vec![0; slots],
            vocab,
            compute: None,
            window,
        })
    }
}

impl LlamaCppBackend {
    /// Bytes llama.cpp would save of `slot`'s state now: its cached keys and values (and a
    /// little bookkeeping), so the growth between two lengths is the cache's bytes per token
    /// as llama.cpp stores them.
    pub fn sequence_state_bytes(&self, slot: Slot) -> usize {
        self.ctx.state_seq_get_size_ext(slot as i32, llama_cpp_2::context::session::LlamaStateSeqFlags::empty())
    }
}

impl Backend for LlamaCppBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        if batch.token_count() == 0 {
            return Ok(Vec::new());
        }
        // ggml aborts the process on a bad id or position; refuse the batch instead.
        let cached_after = batch.check(&self.info.capabilities, &self.cached, self.vocab)?;
        // With one KV stream per sequence, llama.cpp splits a batch into micro-batches of
        // consecutive sequence ids, in the order the tokens arrive: slots 3, 0, 1, 2 cost
        // three passes over the weights where 0, 1, 2, 3 cost one. So tokens go in by slot
        // (which costs nothing with a unified cache).
        self.order.clear();
        self.order.extend(0..batch.chunks.len());
        self.order.sort_by_key(|&ci| batch.chunks[ci].slot);
        self.batch.clear();
        self.rows.clear();
        self.rows.resize(batch.chunks.len(), None);
        let mut row = 0i32;
        for &ci in &self.order {
            let chunk = &batch.chunks[ci];
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
                if wants && self.rows[ci].is_none() {
                    self.rows[ci] = Some(row);
                }
                row += 1;
            }
        }
        self.compute = None;
        let started = Instant::now();
        self.ctx.decode(&mut self.batch).map_err(|e| BackendError::Step(format!("llama_decode: {e}")))?;
        self.compute = Some(started.elapsed());
        self.cached = cached_after;

        // Outputs in the batch's chunk order, whatever order llama.cpp saw them in.
        let mut outputs = Vec::new();
        for (chunk, first) in batch.chunks.iter().zip(&self.rows) {
            let Some(first) = *first else { continue };
            let n = if chunk.outputs == Outputs::All { chunk.tokens.len() } else { 1 };
            let choices = (first..first + n as i32)
                .enumerate()
                .map(|(k, r)| choose(self.ctx.get_logits_ith(r), batch.top_logprobs, chunk.score_row(k)))
                .collect();
            outputs.push(ChunkOutput { slot: chunk.slot, choices });
        }
        Ok(outputs)
    }

    fn last_compute(&self) -> Option<Duration> {
        self.compute
    }

    fn clear(&mut self, slot: Slot) {
        // Removing a whole sequence cannot fail in llama.cpp; only partial removals can.
        let _ = self.ctx.clear_kv_cache_seq(Some(slot), None, None);
        if let Some(len) = self.cached.get_mut(slot as usize) {
            *len = 0;
        }
    }

    fn truncate(&mut self, slot: Slot, len: u32) -> Result<(), BackendError> {
        let have = self.cached.get(slot as usize).copied().ok_or_else(|| BackendError::Step(format!("truncate: no slot {slot}")))?;
        if len as usize >= have {
            return Ok(());
        }
        match self.ctx.clear_kv_cache_seq(Some(slot), Some(len), None) {
            Ok(true) => {
                self.cached[slot as usize] = len as usize;
                self.window_kept(slot, len)
            }
            Ok(false) => Err(BackendError::Step(format!("llama.cpp could not remove positions {len}.. of slot {slot}"))),
            Err(e) => Err(BackendError::Step(format!("truncate slot {slot}: {e}"))),
        }
    }

    fn save_state(&mut self, slot: Slot) -> Result<Vec<u8>, BackendError> {
        if slot as usize >= self.cached.len() {
            return Err(BackendError::Step(format!("save state: no slot {slot}")));
        }
        state::save(&self.ctx, slot)
    }

    fn load_state(&mut self, slot: Slot, bytes: &[u8], positions: u32) -> Result<(), BackendError> {
        if slot as usize >= self.cached.len() {
            return Err(BackendError::Step(format!("load state: no slot {slot}")));
        }
        if positions as usize > self.info.capabilities.ctx_per_slot {
            return Err(BackendError::Step(format!("a state of {positions} positions does not fit a slot of {}", self.info.capabilities.ctx_per_slot)));
        }
        self.clear(slot);
        logs::take_recent();
        if let Err(e) = state::load(&mut self.ctx, slot, bytes) {
            self.clear(slot);
            return Err(e);
        }
        self.cached[slot as usize] = positions as usize;
        Ok(())
    }

    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        self.clear(to);
        // With a stream per slot llama.cpp copies across streams only whole (a partial range
        // aborts the process in `seq_cp`). So copy the whole sequence, then drop anything
        // past `len`; the engine's prefix cache keeps a slot that holds exactly the prefix,
        // so the trim normally has nothing to do. (A unified cache shares cells instead.)
        self.ctx
            .copy_kv_cache_seq(from as i32, to as i32, None, None)
            .map_err(|e| BackendError::Step(format!("copy prefix: {e}")))?;
        match self.ctx.clear_kv_cache_seq(Some(to), Some(len), None) {
            Ok(true) => {
                let have = self.cached.get(from as usize).copied().unwrap_or(0);
                if let Some(c) = self.cached.get_mut(to as usize) {
                    *c = have.min(len as usize);
                }
                self.window_kept(to, have.min(len as usize) as u32)
            }
            Ok(false) => Err(BackendError::Step(format!("copy prefix: could not trim slot {to} to {len} positions"))),
            Err(e) => Err(BackendError::Step(format!("copy prefix: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{describe_placement, KvLayout};

    #[test]
    fn kv_layouts_are_named_and_a_wrong_name_is_refused() {
        for kv in [KvLayout::PerSequence, KvLayout::Unified] {
            assert_eq!(kv.name().parse(), Ok(kv));
        }
        assert!("shared".parse::<KvLayout>().unwrap_err().contains("per-sequence or unified"));
    }

    fn layers(spec: &[(&str, usize)]) -> Vec<String> {
        spec.iter().flat_map(|(d, n)| std::iter::repeat_n(d.to_string(), *n)).collect()
    }

    #[test]
    fn a_cpu_only_build_names_the_cpu_and_flags_nothing() {
        let (device, note) = describe_placement(&layers(&[("CPU", 19)]), 2, None, None);
        assert_eq!(device, "CPU (2 threads): all 19 layers");
        assert_eq!(note, super::GPU_BUILD.map(|api| format!("llama.cpp ran on the CPU: 0 of 19 layers offloaded (this build has {api} but llama.cpp found no {api} device)")));
    }

    #[test]
    fn every_layer_on_the_gpu_is_not_flagged() {
        let gpu = ("Vulkan0".to_string(), "llvmpipe (LLVM 15.0.6, 256 bits)".to_string());
        let (device, note) = describe_placement(&layers(&[("Vulkan0", 19)]), 2, Some(&gpu), None);
        assert_eq!(device, "Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits): all 19 layers");
        assert_eq!(note, None);
    }

    #[test]
    fn layers_kept_on_the_cpu_beside_a_gpu_are_flagged_with_the_reason() {
        let gpu = ("CUDA0".to_string(), "NVIDIA H200".to_string());
        let (device, note) = describe_placement(&layers(&[("CPU", 19)]), 8, Some(&gpu), Some("--gpu-layers 0"));
        assert_eq!(device, "CPU (8 threads): all 19 layers");
        assert_eq!(note.as_deref(), Some("llama.cpp ran on the CPU: 0 of 19 layers offloaded to CUDA0 (--gpu-layers 0)"));
        let (device, note) = describe_placement(&layers(&[("CPU", 9), ("CUDA0", 10)]), 8, Some(&gpu), Some("--gpu-layers 10"));
        assert_eq!(device, "CPU (8 threads): 9 of 19 layers; CUDA0 NVIDIA H200: 10 of 19 layers");
        assert_eq!(note.as_deref(), Some("llama.cpp ran on the CPU: 10 of 19 layers offloaded to CUDA0 (--gpu-layers 10)"));
    }

    #[test]
    fn a_missing_account_is_said_not_guessed() {
        let (device, note) = describe_placement(&[], 2, None, None);
        assert!(device.contains("not reported"), "{device}");
        assert_eq!(note, None);
    }
}
