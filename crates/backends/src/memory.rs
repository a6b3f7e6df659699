//! What a load will hold in memory, before a worker tries it: each backend predicts its own
//! [`Footprint`] from the model file, the load and the settings its worker would start with
//! (the backend crates' `memory` modules); the worker process's own memory is measured. A
//! load whose weights and KV cache alone exceed the memory available is refused with the
//! numbers (those two are counted exactly; the rest is an estimate), before the machine
//! starts swapping or the worker is killed half-way. `lx fit` plans with the same figures.

use std::time::{Duration, Instant};

use lx_core::backend::LoadSpec;
use lx_core::footprint::{mib, Footprint};
use lx_format::gguf::GgufFile;

/// Whether `spec`'s load lives in system memory: a build without discrete-GPU features,
/// every layer kept on the CPU (`--gpu-layers 0`), or Apple Silicon's unified memory.
/// A discrete GPU's memory is its own, and not checked here.
pub fn in_system_memory(spec: &LoadSpec) -> bool {
    spec.gpu_layers == Some(0) || !(cfg!(feature = "cuda") || cfg!(feature = "vulkan"))
}

/// A setting's value as `backend`'s worker would see it: from `env` (the tuned profile's and
/// the run's settings), else this process's environment.
fn lookup<'a>(env: &'a [(String, String)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).or_else(|| std::env::var(name).ok())
}

/// `backend`'s footprint for `spec` (its draft model's included) with the worker settings
/// `env`, the worker process itself counted as `runtime` bytes.
pub fn footprint(backend: &str, spec: &LoadSpec, env: &[(String, String)], runtime: u64) -> Result<Footprint, String> {
    let setting = lookup(env);
    let one = |path: &std::path::Path, runtime: u64| -> Result<Footprint, String> {
        let g = GgufFile::open(path).map_err(|e| e.to_string())?;
        let spec = LoadSpec { model_path: path.to_path_buf(), ..spec.clone() };
        match backend {
            "llama" => {
                let layout = setting("LX_LLAMA_KV").map_or(Ok(lx_backend_llamacpp::KvLayout::PerSequence), |s| s.parse())?;
                let ubatch = setting("LX_LLAMA_UBATCH").and_then(|s| s.parse().ok()).unwrap_or(lx_backend_llamacpp::DEFAULT_UBATCH);
                lx_backend_llamacpp::memory::footprint(&g, &spec, layout, ubatch, runtime)
            }
            "candle" => {
                let on_gpu = spec.gpu_layers != Some(0) && (cfg!(feature = "cuda") || cfg!(feature = "metal"));
                let default = if on_gpu { lx_backend_candle::WeightFormat::Quantized } else { lx_backend_candle::CPU_DEFAULT_WEIGHTS };
                let format = setting("LX_CANDLE_WEIGHTS").map_or(Ok(default), |s| s.parse())?;
                lx_backend_candle::memory::footprint(&g, &spec, format, runtime)
            }
            "mlx" => {
                let mode = setting("LX_MLX_WEIGHTS").map_or(Ok(Default::default()), |s| s.parse())?;
                lx_backend_mlx::memory::footprint(&g, &spec, mode, runtime)
            }
            other => Err(format!("no memory figures for backend `{other}`")),
        }
    };
    let mut f = one(&spec.model_path, runtime)?;
    if let Some(draft) = &spec.draft_model {
        let d = one(draft, 0)?;
        (f.weights, f.kv_cache, f.scratch) = (f.weights + d.weights, f.kv_cache + d.kv_cache, f.scratch.max(d.scratch));
    }
    Ok(f)
}

/// The resident memory of `backend`'s worker process before it loads anything, measured
/// once per process: one is started, looked at once its memory stops growing, and stopped.
/// 0 when it cannot be.
pub fn worker_runtime_bytes(backend: &str) -> u64 {
    static MEASURED: std::sync::Mutex<Vec<(String, u64)>> = std::sync::Mutex::new(Vec::new());
    let mut measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, b)) = measured.iter().find(|(name, _)| name == backend) {
        return *b;
    }
    let bytes = measure_runtime(backend);
    measured.push((backend.to_string(), bytes));
    bytes
}

fn measure_runtime(backend: &str) -> u64 {
    let command = crate::worker_command(backend);
    let Ok(mut child) = std::process::Command::new(&command.program)
        .args(&command.args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return 0;
    };
    let started = Instant::now();
    let mut last = 0;
    while started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        let now = lx_machine::hardware::resident_bytes(child.id()).unwrap_or(0);
        if now > 0 && now == last {
            break;
        }
        last = now;
    }
    let _ = child.kill();
    let _ = child.wait();
    last
}

/// Refuse a load whose weights and KV cache (counted exactly, `f`) need more than
/// `available` bytes, with the numbers and what to change.
pub fn check(spec: &LoadSpec, f: &Footprint, available: u64) -> Result<(), String> {
    if f.weights + f.kv_cache <= available {
        return Ok(());
    }
    let gib = |b: u64| mib(b) / 1024.0;
    Err(format!(
        "{}{} does not fit in memory: it needs at least {:.1} GiB ({:.1} GiB of weights and {:.1} GiB of KV cache{} for {} sequences of {} tokens; about {:.1} GiB in all with its buffers), and {:.1} GiB is available; ask for fewer concurrent requests or shorter ones, or close other programs",
        spec.model_path.display(),
        if spec.draft_model.is_some() { " with its draft model" } else { "" },
        gib(f.weights + f.kv_cache),
        gib(f.weights),
        gib(f.kv_cache),
        if spec.kv.is_default() { String::new() } else { format!(" (K {}, V {})", spec.kv.k.name(), spec.kv.v.name()) },
        spec.slots.max(1),
        spec.ctx_per_slot,
        gib(f.total()),
        gib(available),
    ))
}
