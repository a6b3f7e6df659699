//! What a load will hold in memory, before a worker tries it: each backend predicts its own
//! [`Footprint`] from the model file, the load and the settings its worker would start with
//! (the backend crates' `memory` modules); the worker process's own memory is measured. A
//! load whose weights and KV cache alone exceed the memory available is refused with the
//! numbers (those two are counted exactly; the rest is an estimate), before the machine
//! starts swapping or the worker is killed half-way. `lx fit` plans with the same figures.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use lx_engine::backend::LoadSpec;
use lx_engine::footprint::{mib, Footprint};
use lx_format::gguf::GgufFile;

/// Whether `spec`'s load lives in system memory: a build without discrete-GPU features,
/// every layer kept on the CPU (`--gpu-layers 0`), or Apple Silicon's unified memory.
/// A discrete GPU's memory is its own, and not checked here.
pub fn in_system_memory(spec: &LoadSpec) -> bool {
    spec.gpu_layers == Some(0) || !(cfg!(feature = "cuda") || cfg!(feature = "vulkan"))
}

/// `backend`'s footprint for `spec` (its draft model's included, its own settings from
/// `spec.settings`), the worker process itself counted as `runtime` bytes.
pub fn footprint(backend: &str, spec: &LoadSpec, runtime: u64) -> Result<Footprint, String> {
    let setting = |name: &str| spec.setting(name).map(str::to_string);
    let one = |path: &std::path::Path, runtime: u64| -> Result<Footprint, String> {
        let g = header(path)?;
        let spec = LoadSpec { model_path: path.to_path_buf(), ..spec.clone() };
        let Some(kind) = crate::BackendKind::of(backend) else { return Err(format!("no memory figures for backend `{backend}`")) };
        match kind {
            crate::BackendKind::Llama => {
                let layout = setting("kv").map_or(Ok(lx_backend_llamacpp::KvLayout::PerSequence), |s| s.parse())?;
                let ubatch = setting("ubatch").and_then(|s| s.parse().ok()).unwrap_or(lx_backend_llamacpp::DEFAULT_UBATCH);
                lx_backend_llamacpp::memory::footprint(&g, &spec, layout, ubatch, runtime)
            }
            crate::BackendKind::Candle => {
                let on_gpu = spec.gpu_layers != Some(0) && (cfg!(feature = "cuda") || cfg!(feature = "metal"));
                let default = if on_gpu { lx_backend_candle::WeightFormat::Quantized } else { lx_backend_candle::CPU_DEFAULT_WEIGHTS };
                let format = setting("weights").map_or(Ok(default), |s| s.parse())?;
                lx_backend_candle::memory::footprint(&g, &spec, format, runtime)
            }
            crate::BackendKind::Mlx => {
                let mode = setting("weights").map_or(Ok(Default::default()), |s| s.parse())?;
                lx_backend_mlx::memory::footprint(&g, &spec, mode, runtime)
            }
        }
    };
    let mut f = one(&spec.model_path, runtime)?;
    if let Some(draft) = &spec.draft_model {
        let d = one(draft, 0)?;
        (f.weights, f.kv_cache, f.scratch) = (f.weights + d.weights, f.kv_cache + d.kv_cache, f.scratch.max(d.scratch));
    }
    Ok(f)
}

/// `path`'s parsed header, kept for the calls after: a fit search asks for dozens of
/// footprints of one file, and parsing a vocabulary of 150,000 tokens again each time made
/// `lx fit` spend seconds in it. A file changed since (its size or time) is read again.
fn header(path: &Path) -> Result<Arc<GgufFile>, String> {
    type Kept = Vec<(PathBuf, Option<SystemTime>, u64, Arc<GgufFile>)>;
    /// The model and its draft, and a model opened before them.
    const KEEP: usize = 3;
    static KEPT: Mutex<Kept> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (modified, len) = (meta.modified().ok(), meta.len());
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((.., g)) = kept.iter().find(|(p, m, l, _)| p == path && *m == modified && *l == len) {
        return Ok(g.clone());
    }
    let g = Arc::new(GgufFile::open(path).map_err(|e| e.to_string())?);
    kept.retain(|(p, ..)| p != path);
    if kept.len() == KEEP {
        kept.remove(0);
    }
    kept.push((path.to_path_buf(), modified, len, g.clone()));
    Ok(g)
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

#[cfg(test)]
mod tests {
    use super::*;
    use lx_engine::backend::{KvType, KvTypes};

    /// A header is parsed once for many footprints, and again once its file changes.
    #[test]
    fn a_header_is_kept_until_its_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let write = |name: &str| lx_format::gguf::GgufWriter::new().kv("general.name", name).write(&path).unwrap();
        write("first");
        let (a, b) = (header(&path).unwrap(), header(&path).unwrap());
        assert!(Arc::ptr_eq(&a, &b), "the second call is answered from the kept header");
        write("second, longer");
        assert_eq!(header(&path).unwrap().get_str("general.name").unwrap(), "second, longer");
        std::fs::remove_file(&path).unwrap();
        assert!(header(&path).unwrap_err().contains("m.gguf"), "a file gone is an error, not the kept header");
    }

    fn spec(slots: usize, ctx: usize) -> LoadSpec {
        LoadSpec { model_path: lx_models::default_model_path(), threads: 0, slots, ctx_per_slot: ctx, max_batch_tokens: 512, gpu_layers: Some(0), ..Default::default() }
    }

    fn llama(s: &LoadSpec) -> Footprint {
        footprint("llama", s, 0).unwrap()
    }

    /// On the default model (18 layers, one KV head of 256 for keys and for values): a q8_0
    /// cache takes 34 bytes where f16 takes 64; a draft model (here the model itself) adds
    /// its weights and its cache; a load whose weights and cache exceed the memory is
    /// refused with both figures.
    #[test]
    fn caches_drafts_and_refusals_follow_the_load() {
        assert!(lx_models::default_model_path().exists(), "the default model is missing: run `lx models fetch default` (scripts/test does)");
        let f16 = llama(&spec(4, 1000));
        assert_eq!(f16.kv_cache, 4 * 1024 * 18 * 1024, "4 sequences of 1000 tokens, padded to 1024 cells");
        // Deeper, the 15 sliding-window layers keep their 512 positions and a micro-batch.
        assert_eq!(llama(&spec(4, 4096)).kv_cache, 4 * (3 * 4096 + 15 * 1024) * 1024);
        let q8 = llama(&LoadSpec { kv: KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 }, ..spec(4, 1000) });
        assert_eq!(q8.kv_cache * 64, f16.kv_cache * 34);
        let drafted = llama(&LoadSpec { draft_model: Some(lx_models::default_model_path()), ..spec(4, 1000) });
        assert_eq!((drafted.weights, drafted.kv_cache), (2 * f16.weights, 2 * f16.kv_cache));
        assert_eq!(check(&spec(4, 1000), &f16, 1 << 30), Ok(()));
        let e = check(&spec(4, 1000), &f16, 100 << 20).unwrap_err();
        assert!(e.contains("does not fit in memory: it needs at least 0.3 GiB (0.2 GiB of weights and 0.1 GiB of KV cache for 4 sequences of 1000 tokens;"), "{e}");
        // candle keeps f32 keys and values at the full context: twice llama.cpp's f16, unpadded.
        let candle = footprint("candle", &spec(4, 1024), 0).unwrap();
        assert_eq!(candle.kv_cache, 2 * f16.kv_cache);
    }

    #[test]
    fn a_model_that_cannot_be_read_has_no_footprint() {
        let mut s = spec(1, 16);
        s.model_path = "/nonexistent/model.gguf".into();
        assert!(footprint("llama", &s, 0).is_err());
        assert!(footprint("nothing", &spec(1, 16), 0).unwrap_err().contains("no memory figures for backend `nothing`"));
    }
}
