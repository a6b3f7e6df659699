//! candle backend for Latency Explorer: our own model code over candle-core and candle-nn
//! (quantized weights through `QMatMul`), behind the engine's step interface
//! ([`lx_engine::backend::Backend`]), for the architectures in [`SUPPORTED_ARCHITECTURES`]:
//! Gemma 3 and the llama family (llama/Mistral, Qwen 2, Qwen 3), one code path
//! parameterized by the engine's [`Config`] (which the MLX backend builds from too).
//!
//! - One copy of the weights, shared by every slot; each slot has its own KV cache in
//!   buffers allocated once (`ctx_per_slot` positions) and written in place.
//! - Any chunk at any position (chunked prefill, prefix copies); logits only for the rows
//!   a chunk asks for (`Outputs::Last` never projects the other rows onto the vocabulary).
//! - Chunks of equal length and outputs in distinct slots share a pass whatever their
//!   positions (each sequence attends over its own cache), and one output projection. The
//!   exception, measured (`examples/batched_decode.rs`): on the CPU, decode steps whose
//!   layers hold f16 run their layers one sequence at a time, because candle's f16 gemm
//!   costs more for B rows than B single rows do (`mixed_position_batches` says which).
//! - Devices: CPU always; the `cuda` and `metal` features add those devices (see [`DeviceChoice`]).
//!
//! # Threads
//! candle sizes its thread pools once, at first use, from `CANDLE_NUM_THREADS` (its own
//! spinning pool, used by the quantized matmuls), then `RAYON_NUM_THREADS` (rayon, used by
//! f32 matmuls), then the number of physical cores. A worker process must therefore call
//! [`set_thread_env`] before anything touches candle. [`CandleBackend::load`] calls it too
//! (which works when the load is the first use of candle in the process) and reports the
//! thread count actually in use in `BackendInfo::threads`.

pub mod bare_loop;
pub mod memory;
pub mod model;
pub mod quant;
pub mod tiles;

pub use lx_format::arch::{Activation, Arch, Config, RopeStyle, SUPPORTED_ARCHITECTURES};
pub use model::{KvCache, Model, LoadOptions, RopeTable, Rows, WeightFormat};

use candle_core::{Device, Tensor};
use lx_engine::backend::{
    choose, Backend, BackendError, BackendInfo, Batch, Capabilities, Choice, ChunkOutput,
    LoadSpec, Outputs, Slot,
};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The candle release this crate is built against.
pub const CANDLE_VERSION: &str = "0.11.1";

/// The layers' weight format on the CPU when nothing else is asked: `dual` (Q8_0 kernels
/// for decode, f16 gemm for prefill) was the fastest on every CPU measured, in decode, in
/// prefill and with several clients (the crate README, "Weight formats"); `lx tune` checks
/// it on each machine, and under a competing load too, where the spinning pool behind the
/// Q8_0 kernels can lose to f16.
pub const CPU_DEFAULT_WEIGHTS: WeightFormat = WeightFormat::Dual;

/// Which device to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The GPU compiled in (`cuda`, else `metal`), unless `LoadSpec::gpu_layers == Some(0)`;
    /// else the CPU.
    #[default]
    Auto,
    Cpu,
    Metal,
    Cuda,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "metal" => Ok(Self::Metal),
            "cuda" => Ok(Self::Cuda),
            other => Err(format!(
                "unknown candle device `{other}` (auto, cpu, metal, cuda)"
            )),
        }
    }
}

impl DeviceChoice {
    /// The name `LX_CANDLE_DEVICE` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Metal => "metal",
            Self::Cuda => "cuda",
        }
    }
}

/// Backend options beyond the engine's [`LoadSpec`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub device: DeviceChoice,
    /// How the layers' weights are held; `None`: [`CPU_DEFAULT_WEIGHTS`] on the CPU,
    /// [`WeightFormat::Quantized`] on a GPU.
    pub layer_weights: Option<WeightFormat>,
}

impl Options {
    /// Options from the load's settings: `device` (auto, cpu, metal, cuda) and `weights`
    /// (quantized, q8_0, f16, dual, f32).
    pub fn from_spec(spec: &LoadSpec) -> Result<Self, BackendError> {
        spec.settings_of(lx_engine::kind::BackendKind::Candle).map_err(BackendError::Load)?;
        let device = spec.setting("device").map_or(Ok(DeviceChoice::Auto), str::parse).map_err(BackendError::Load)?;
        let layer_weights = spec.setting("weights").map(str::parse).transpose().map_err(BackendError::Load)?;
        Ok(Self { device, layer_weights })
    }
}

/// Sets `CANDLE_NUM_THREADS` and `RAYON_NUM_THREADS` to `threads` (0: leave candle's
/// default, the number of physical cores). Takes effect only before candle's first use
/// in the process: call it at the start of the worker.
pub fn set_thread_env(threads: usize) {
    if threads > 0 {
        let n = threads.to_string();
        std::env::set_var("CANDLE_NUM_THREADS", &n);
        std::env::set_var("RAYON_NUM_THREADS", &n);
    }
}

/// Threads candle's quantized-matmul pool actually uses (sizes the pool on first call).
pub fn candle_threads() -> usize {
    candle_core::utils::barrier_pool().n_workers() + 1
}

fn cpu_features() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            if std::arch::is_x86_feature_detected!("avx512vnni") {
                "AVX-512 VNNI"
            } else {
                "AVX-512"
            }
        } else if std::arch::is_x86_feature_detected!("avx2") {
            "AVX2"
        } else {
            "SSE2 only"
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        "NEON"
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        "scalar"
    }
}

/// A candle error's message alone: with `RUST_BACKTRACE` set, candle appends the stack to
/// its Display, which in a device list is noise (measured on the CUDA archive with the
/// driver stub: 20 lines of frames after the one that says why).
fn without_backtrace(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// The devices a candle worker of this build could use, for `lx hw` and the app. Opening a
/// GPU device here is cheap; the CPU line does not touch candle's thread pools (they would
/// be sized for this process, not for a worker).
pub fn devices() -> Vec<String> {
    let mut found = Vec::new();
    if cfg!(feature = "cuda") {
        found.push(match Device::new_cuda(0) {
            Ok(_) => "CUDA:0".to_string(),
            Err(e) => format!("CUDA compiled in, but device 0 does not open: {}", without_backtrace(&e)),
        });
    }
    if cfg!(feature = "metal") {
        found.push(match Device::new_metal(0) {
            Ok(_) => "Metal:0".to_string(),
            Err(e) => format!("Metal compiled in, but device 0 does not open: {}", without_backtrace(&e)),
        });
    }
    // The cores, not a thread count: `lx` uses them all by default, the app one less where
    // its window needs a core (the app's threads::beside_a_window).
    found.push(format!("CPU ({}, {} physical cores)", cpu_features(), lx_machine::hardware::physical_cores()));
    found
}

/// The GPU API this build of candle can use, if any (its name: `CUDA`, `Metal`).
pub fn gpu_build() -> Option<&'static str> {
    GPU_BUILD.map(|(_, api)| api)
}

/// The GPU API this build of candle can use, if any.
const GPU_BUILD: Option<(DeviceChoice, &str)> = if cfg!(feature = "cuda") {
    Some((DeviceChoice::Cuda, "CUDA"))
} else if cfg!(feature = "metal") {
    Some((DeviceChoice::Metal, "Metal"))
} else {
    None
};

/// The device to load on, its name, and, when a GPU build ends up on the CPU by itself
/// (`Auto`), the note that says so. A device asked for by name must open or fail the load.
fn select_device(choice: DeviceChoice, spec: &LoadSpec) -> Result<(Device, String, Option<String>), BackendError> {
    match (choice, GPU_BUILD) {
        (DeviceChoice::Auto, None) => Ok((Device::Cpu, "CPU".into(), None)),
        (DeviceChoice::Auto, Some((_, api))) if spec.gpu_layers == Some(0) => {
            Ok((Device::Cpu, "CPU".into(), Some(format!("candle ran on the CPU, not {api} (--gpu-layers 0)"))))
        }
        (DeviceChoice::Auto, Some((gpu, api))) => match open(gpu) {
            Ok((device, name)) => Ok((device, name, None)),
            Err(e) => Ok((Device::Cpu, "CPU".into(), Some(format!("candle ran on the CPU: this build has {api} but {e}")))),
        },
        (c, _) => open(c).map(|(device, name)| (device, name, None)),
    }
}

fn open(choice: DeviceChoice) -> Result<(Device, String), BackendError> {
    match choice {
        DeviceChoice::Cpu | DeviceChoice::Auto => Ok((Device::Cpu, "CPU".into())),
        DeviceChoice::Cuda => {
            if !cfg!(feature = "cuda") {
                return Err(BackendError::NotCompiled(
                    "candle (CUDA)".into(),
                    "rebuild with `--features cuda` (lx-backend-candle/cuda)".into(),
                ));
            }
            Device::new_cuda(0)
                .map(|d| (d, "CUDA:0".to_string()))
                .map_err(|e| BackendError::Load(format!("cannot open CUDA device 0: {e}")))
        }
        DeviceChoice::Metal => {
            if !cfg!(feature = "metal") {
                return Err(BackendError::NotCompiled(
                    "candle (Metal)".into(),
                    "rebuild with `--features metal` (lx-backend-candle/metal)".into(),
                ));
            }
            Device::new_metal(0)
                .map(|d| (d, "Metal:0".to_string()))
                .map_err(|e| BackendError::Load(format!("cannot open Metal device 0: {e}")))
        }
    }
}

/// Loads a model's weights from a GGUF file onto `device`.
pub fn load_model(
    path: &std::path::Path,
    device: &Device,
    opts: LoadOptions,
) -> Result<Model, BackendError> {
    if !path.is_file() {
        return Err(BackendError::Load(format!(
            "model file {} does not exist",
            path.display()
        )));
    }
    let g = lx_format::gguf::GgufFile::open(path).map_err(|e| match e {
        lx_format::gguf::GgufError::UnknownTensorType { .. } => {
            BackendError::Unsupported(e.to_string())
        }
        e => BackendError::Load(e.to_string()),
    })?;
    let cfg = Config::from_gguf(&g)?;
    Model::load(cfg, &g, device, opts).map_err(|e| match e {
        BackendError::Load(m) => BackendError::Load(format!("{}: {m}", path.display())),
        BackendError::Unsupported(m) => {
            BackendError::Unsupported(format!("{}: {m}", path.display()))
        }
        other => other,
    })
}

/// The candle backend: a loaded model and one KV cache per slot.
pub struct CandleBackend {
    model: Model,
    ropes: (RopeTable, RopeTable),
    caches: Vec<KvCache>,
    info: BackendInfo,
    /// How long the last step spent in the model's forward passes, less reading back and
    /// choosing from the logits.
    compute: Option<Duration>,
}

impl std::fmt::Debug for CandleBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleBackend")
            .field("info", &self.info)
            .field("config", &self.model.cfg)
            .finish()
    }
}

fn step_err(e: candle_core::Error) -> BackendError {
    BackendError::Step(e.to_string())
}

impl CandleBackend {
    /// Loads with [`Options::from_spec`].
    pub fn load(spec: &LoadSpec) -> Result<Self, BackendError> {
        Self::load_with(spec, &Options::from_spec(spec)?)
    }

    pub fn load_with(spec: &LoadSpec, opts: &Options) -> Result<Self, BackendError> {
        spec.kv.taken_by(lx_engine::kind::BackendKind::Candle)?;
        if spec.slots == 0 || spec.ctx_per_slot == 0 {
            return Err(BackendError::Load(format!(
                "need at least one slot and a context (got slots={}, ctx_per_slot={})",
                spec.slots, spec.ctx_per_slot
            )));
        }
        // Effective only if nothing has touched candle yet in this process.
        if spec.threads > 0 && std::env::var("CANDLE_NUM_THREADS").is_err() {
            set_thread_env(spec.threads);
        }
        let (device, device_name, cpu_fallback) = select_device(opts.device, spec)?;
        let layer_weights = opts.layer_weights.unwrap_or(if device.is_cpu() {
            CPU_DEFAULT_WEIGHTS
        } else {
            WeightFormat::Quantized
        });
        let model = load_model(&spec.model_path, &device, LoadOptions { layer_weights })?;
        let ctx = spec.ctx_per_slot;
        let ropes = model
            .rope_tables(ctx)
            .map_err(|e| BackendError::Load(e.to_string()))?;
        let caches = (0..spec.slots)
            .map(|_| KvCache::new(&model.cfg, ctx, &device))
            .collect::<candle_core::Result<Vec<_>>>()
            .map_err(|e| BackendError::Load(format!("cannot allocate the KV cache: {e}")))?;
        let threads = if device.is_cpu() {
            candle_threads()
        } else {
            spec.threads
        };
        let device_desc = if device.is_cpu() {
            let mut d = format!("CPU ({}, {threads} threads", cpu_features());
            if spec.threads > 0 && spec.threads != threads {
                d.push_str(&format!(
                    "; {} requested but candle was already initialised",
                    spec.threads
                ));
            }
            d.push(')');
            d
        } else {
            device_name
        };
        let info = BackendInfo {
            name: "candle".into(),
            version: format!(
                "candle {CANDLE_VERSION} (lx-backend-candle {})",
                env!("CARGO_PKG_VERSION")
            ),
            device: device_desc,
            cpu_fallback,
            threads,
            capabilities: Capabilities {
                // Decode tokens at different positions share one pass unless f16 layers
                // on the CPU make it cheaper to run them apart (`layers_together`).
                mixed_position_batches: !device.is_cpu() || !model.dequantized_gemm(1),
                max_batch_tokens: spec.max_batch_tokens.max(1),
                slots: spec.slots,
                ctx_per_slot: ctx,
                prefix_copy: true,
            },
            // The device is a setting only where there is a choice: a CPU build's settings
            // stay as they were.
            settings: [("weights".to_string(), layer_weights.name().to_string())]
                .into_iter()
                .chain(GPU_BUILD.map(|_| ("device".to_string(), opts.device.name().to_string())))
                .collect(),
            settings_from: None,
            draft: None,
            kv_cache_bytes: Some(caches.iter().map(KvCache::bytes).sum()),
            weights_bytes: Some(model.weight_bytes()),
        };
        Ok(Self {
            model,
            ropes,
            caches,
            info,
            compute: None,
        })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.model.cfg
    }

    /// The model, for callers that drive it directly (examples, tests).
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Cached positions in `slot`.
    pub fn cached_len(&self, slot: Slot) -> Option<usize> {
        self.caches.get(slot as usize).map(|c| c.len)
    }

    fn validate(&self, batch: &Batch) -> Result<(), BackendError> {
        let cached: Vec<usize> = self.caches.iter().map(|c| c.len).collect();
        batch.check(&self.info.capabilities, &cached, self.model.cfg.vocab_size)?;
        Ok(())
    }

    /// Groups of chunk indices that share a step's passes: equal length and outputs, distinct
    /// slots (positions may differ: each sequence attends over its own cache). When a slot
    /// appears twice in the batch, everything runs in order.
    fn plan(batch: &Batch) -> Vec<Vec<usize>> {
        let chunks = &batch.chunks;
        let distinct = chunks.iter().map(|c| c.slot).collect::<HashSet<_>>().len() == chunks.len();
        if !distinct {
            return (0..chunks.len()).map(|i| vec![i]).collect();
        }
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let key = (c.tokens.len(), c.outputs);
            match groups.iter_mut().find(|g| {
                let f = &chunks[g[0]];
                (f.tokens.len(), f.outputs) == key
            }) {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            }
        }
        groups
    }

    /// Whether `b` chunks of `len` tokens take their layers' matrix products together. On
    /// the CPU, decode steps (one token per sequence) whose B rows would go through the
    /// dequantized gemm run their layers one sequence at a time instead, sharing only the
    /// output projection: measured on the default model (`examples/batched_decode.rs`, crate
    /// README), f16 layers decode 4 sequences in 204 ms a step together and 108 ms apart,
    /// while Q8_0 layers take 65 ms together and 74 ms apart.
    fn layers_together(&self, b: usize, len: usize) -> bool {
        len > 1 || !self.model.device().is_cpu() || !self.model.dequantized_gemm(b)
    }
}

impl Backend for CandleBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        self.validate(batch)?;
        self.compute = None;
        let started = Instant::now();
        let mut reading = Duration::ZERO;
        let mut results: Vec<Option<ChunkOutput>> = vec![None; batch.chunks.len()];
        let vocab = self.model.cfg.vocab_size;
        for group in Self::plan(batch) {
            let first = &batch.chunks[group[0]];
            let len = first.tokens.len();
            let rows = match first.outputs {
                Outputs::None => Rows::None,
                Outputs::Last => Rows::Last,
                Outputs::All => Rows::All,
            };
            let tokens: Vec<&[u32]> = group.iter().map(|&i| batch.chunks[i].tokens.as_slice()).collect();
            let pos: Vec<usize> = group.iter().map(|&i| batch.chunks[i].pos as usize).collect();
            let step = if self.layers_together(group.len(), len) { group.len() } else { 1 };
            // Mutable references to the group's caches (distinct slots).
            let mut caches: Vec<&mut KvCache> = Vec::with_capacity(group.len());
            {
                let mut rest: Vec<Option<&mut KvCache>> = self.caches.iter_mut().map(Some).collect();
                for &i in &group {
                    caches.push(rest[batch.chunks[i].slot as usize].take().expect("distinct slots in a group"));
                }
            }
            let mut choices: Vec<Vec<Choice>> = vec![Vec::new(); group.len()];
            let top = batch.top_logprobs;
            let mut sink = |_row: usize, logits: &Tensor| -> candle_core::Result<()> {
                let read_start = Instant::now();
                let (b, n, _) = logits.dims3()?;
                let flat = logits.flatten_all()?.to_vec1::<f32>()?;
                for (bi, ch) in choices.iter_mut().enumerate().take(b) {
                    let chunk = &batch.chunks[group[bi]];
                    for r in 0..n {
                        let off = (bi * n + r) * vocab;
                        // Tiles arrive in order: the output rows so far number this one.
                        let scored = chunk.score_row(ch.len());
                        ch.push(choose(&flat[off..off + vocab], top, scored));
                    }
                }
                reading += read_start.elapsed();
                Ok(())
            };
            let res = (|| -> candle_core::Result<()> {
                let mut hidden = Vec::new();
                for s in (0..group.len()).step_by(step) {
                    let e = s + step;
                    hidden.extend(self.model.hidden(&tokens[s..e], &pos[s..e], &mut caches[s..e], &self.ropes, rows)?);
                }
                match hidden.len() {
                    0 => Ok(()),
                    1 => self.model.project(&hidden[0], rows.first(len), &mut sink),
                    _ => self.model.project(&Tensor::cat(&hidden, 0)?, rows.first(len), &mut sink),
                }
            })();
            // Whatever happened, positions from `pos` on are what this pass wrote (or garbage).
            for (c, &p) in caches.iter_mut().zip(&pos) {
                c.len = if res.is_ok() { p + len } else { p };
            }
            res.map_err(step_err)?;
            if rows != Rows::None {
                for (k, &i) in group.iter().enumerate() {
                    results[i] = Some(ChunkOutput { slot: batch.chunks[i].slot, choices: std::mem::take(&mut choices[k]) });
                }
            }
        }
        self.compute = Some(started.elapsed().saturating_sub(reading));
        Ok(results.into_iter().flatten().collect())
    }

    fn last_compute(&self) -> Option<Duration> {
        self.compute
    }

    fn clear(&mut self, slot: Slot) {
        if let Some(c) = self.caches.get_mut(slot as usize) {
            c.len = 0;
        }
    }

    fn truncate(&mut self, slot: Slot, len: u32) -> Result<(), BackendError> {
        // Positions are written in place: what lies past `len` is never read again.
        let c = self.caches.get_mut(slot as usize).ok_or_else(|| BackendError::Step(format!("truncate: no slot {slot}")))?;
        c.len = c.len.min(len as usize);
        Ok(())
    }

    fn save_state(&mut self, slot: Slot) -> Result<Vec<u8>, BackendError> {
        let c = self.caches.get(slot as usize).ok_or_else(|| BackendError::Step(format!("save state: no slot {slot}")))?;
        c.save().map_err(step_err)
    }

    fn load_state(&mut self, slot: Slot, state: &[u8], positions: u32) -> Result<(), BackendError> {
        let c = self.caches.get_mut(slot as usize).ok_or_else(|| BackendError::Step(format!("load state: no slot {slot}")))?;
        c.len = 0;
        c.load(state, positions as usize).map_err(BackendError::Step)
    }

    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        let (f, t, len) = (from as usize, to as usize, len as usize);
        let n = self.caches.len();
        if f >= n || t >= n {
            return Err(BackendError::Step(format!(
                "copy_prefix: slot out of range ({from} -> {to}, slots: {n})"
            )));
        }
        if len > self.caches[f].len {
            return Err(BackendError::Step(format!(
                "copy_prefix: slot {from} holds {} positions, {len} requested",
                self.caches[f].len
            )));
        }
        if f == t {
            self.caches[t].len = len;
            return Ok(());
        }
        let (src, dst) = if f < t {
            let (a, b) = self.caches.split_at_mut(t);
            (&a[f], &mut b[0])
        } else {
            let (a, b) = self.caches.split_at_mut(f);
            (&b[0], &mut a[t])
        };
        dst.copy_prefix_from(src, len).map_err(step_err)
    }
}

// The worker may move the backend to its engine thread.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<CandleBackend>();
};
