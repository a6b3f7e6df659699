//! Latency Explorer on this machine, shared by the `lx` CLI and the desktop app: the backends
//! this build has, behind their [`BackendKind`] (loading, devices and why one cannot run), and
//! everything that needs them: the worker each runs in (both front ends host workers by
//! re-executing themselves with `worker --backend NAME`, see [`worker::WorkerRole`]), this
//! machine's tuned profiles ([`profile`], [`tune`]), checks against references ([`check`]),
//! limits ([`limits`]), memory and what fits ([`memory`], [`fit`]), draft models ([`draft`]),
//! fidelity jobs ([`fidelity`]), advice ([`advise`]) and sweeps ([`sweep`]).

pub mod advise;
pub mod check;
pub mod draft;
pub mod fidelity;
pub mod fit;
pub mod limits;
pub mod memory;
pub mod model;
pub mod sweep;
pub mod synth;
pub mod profile;
pub mod tune;
pub mod worker;


use lx_engine::backend::{Backend, BackendError, LoadSpec};
use lx_worker::child::WorkerCommand;
use lx_worker::process::Loader;

pub use lx_engine::kind::BackendKind;

/// The canonical name of the backend people call `name` (`llama.cpp` is `llama`).
pub fn canonical(name: &str) -> anyhow::Result<&'static str> {
    BackendKind::parse(name).map(BackendKind::name).map_err(anyhow::Error::msg)
}

/// This build's backends, by canonical name, in the order `lx hw` lists them.
pub fn built() -> Vec<String> {
    BackendKind::ALL.iter().filter(|k| unavailable(k.name()).is_none()).map(|k| k.name().to_string()).collect()
}

/// Why a backend cannot run in this build, or `None` when it can.
pub fn unavailable(name: &str) -> Option<String> {
    let Some(kind) = BackendKind::of(name) else { return Some(format!("unknown backend '{name}'")) };
    match kind {
        BackendKind::Llama | BackendKind::Candle => None,
        // None in a macOS aarch64 or Linux x86_64 build with the `mlx` feature; else why not.
        BackendKind::Mlx => lx_backend_mlx::unavailable(),
    }
}

/// Why backend `name` cannot run the model at `model` (`None`: it can, as far as the file
/// says): [`unavailable`] in this build, or an architecture or feature our model code (candle,
/// MLX) does not implement, named with those it does. llama.cpp's own list is its loader's.
pub fn unavailable_for(name: &str, model: &std::path::Path) -> Option<String> {
    if let Some(why) = unavailable(name) {
        return Some(why);
    }
    if BackendKind::of(name).is_some_and(|k| k.capabilities().own_loader) {
        return None;
    }
    let g = match lx_format::gguf::GgufFile::open(model) {
        Ok(g) => g,
        Err(e) => return Some(e.to_string()),
    };
    lx_format::arch::Config::from_gguf(&g).err().map(|e| e.to_string())
}

/// The loader a worker uses for `kind`.
pub fn loader(kind: BackendKind) -> Loader {
    Box::new(move |spec: &LoadSpec| -> Result<Box<dyn Backend>, BackendError> {
        match kind {
            BackendKind::Llama => Ok(Box::new(lx_backend_llamacpp::LlamaCppBackend::load(spec)?)),
            BackendKind::Candle => {
                // candle sizes its thread pools once, at first use: this load is that first
                // use in a worker process, so the engine's thread setting lands here.
                lx_backend_candle::set_thread_env(spec.threads);
                Ok(Box::new(lx_backend_candle::CandleBackend::load(spec)?))
            }
            #[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
            BackendKind::Mlx => Ok(Box::new(lx_backend_mlx::MlxBackend::load(spec)?)),
            #[allow(unreachable_patterns)]
            other => Err(BackendError::NotCompiled(other.name().to_string(), unavailable(other.name()).unwrap_or_default())),
        }
    })
}

/// This machine (sysinfo's probe) with the devices each backend of this build sees: what
/// `lx hw`, the app's hardware panel and every run file report.
pub fn hardware_report() -> lx_machine::hardware::HardwareReport {
    let mut hardware = lx_machine::hardware::probe();
    hardware.backend_devices = devices();
    hardware.build_features = build_features();
    hardware
}

/// The backend features this build was compiled with (cuda, metal, mlx, vulkan); empty for a
/// CPU-only build without MLX.
pub fn build_features() -> Vec<String> {
    [("cuda", cfg!(feature = "cuda")), ("metal", cfg!(feature = "metal")), ("mlx", cfg!(feature = "mlx")), ("vulkan", cfg!(feature = "vulkan"))]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Devices each backend sees, for `lx hw` and result files.
pub fn devices() -> Vec<(String, Vec<String>)> {
    BackendKind::ALL
        .iter()
        .map(|&kind| {
            let devices = match (unavailable(kind.name()), kind) {
                (Some(why), _) => vec![why],
                (None, BackendKind::Llama) => lx_backend_llamacpp::devices(),
                (None, BackendKind::Candle) => lx_backend_candle::devices(),
                #[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
                (None, BackendKind::Mlx) => lx_backend_mlx::devices(),
                #[allow(unreachable_patterns)]
                (None, _) => Vec::new(),
            };
            (kind.name().to_string(), devices)
        })
        .collect()
}

/// Serve the worker protocol on stdin/stdout for `backend` (the `worker` subcommand).
pub fn serve_worker(backend: &str) -> anyhow::Result<()> {
    let kind = BackendKind::parse(backend).map_err(anyhow::Error::msg)?;
    // Room for a burst of submissions in one read (see `lx_worker::process::serve`).
    let stdin = std::io::BufReader::with_capacity(1 << 20, std::io::stdin());
    let stdout = std::io::BufWriter::new(std::io::stdout().lock());
    lx_worker::process::serve(loader(kind), stdin, stdout)?;
    Ok(())
}

/// A binary's entry point when its arguments ask for a worker ([`worker::WorkerRole`]):
/// serves until the coordinator closes stdin (a backend) or every device is measured (the
/// probe), then exits the process (0, or 1 with the error on stderr). Returns when they ask
/// for something else.
pub fn serve_if_asked(args: &[String]) {
    let Some(role) = worker::WorkerRole::from_args(args) else { return };
    let served = role.map_err(anyhow::Error::msg).and_then(|role| match role {
        worker::WorkerRole::Backend(name) => serve_worker(&name),
        worker::WorkerRole::Probe => limits::serve_probe(),
    });
    let code = match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// Starts this build's worker processes by backend name, with this machine's tuned settings
/// for the model ([`tune`]: the idle choice to measure, the contended one for live mode).
/// `untuned_threads` is the thread count when neither the run nor the profile gives one (0:
/// the backend's own default; the app leaves a core for its window).
pub fn spawner(usage: profile::Use, untuned_threads: usize) -> lx_client::target::Spawner {
    let machine = std::sync::OnceLock::new();
    worker_spawner(move |name: &str, spec: &LoadSpec| {
        let machine: &String = machine.get_or_init(|| lx_machine::probe::machine_key(&hardware_report()));
        let profile = profile::Located::new(machine, &spec.model_path).read();
        let mut applied = profile::applied(name, &profile, usage, &|var| std::env::var(var).ok());
        if applied.threads.is_none() && untuned_threads > 0 {
            applied.threads = Some(untuned_threads);
        }
        applied
    })
}

/// The settings a `backend` worker for `model` would be started with to measure (this
/// machine's tuned profile's, under the environment's): what its memory is predicted with.
pub fn measuring_settings(backend: &str, model: &std::path::Path) -> profile::Settings {
    let machine = lx_machine::probe::machine_key(&hardware_report());
    let profile = profile::Located::new(&machine, model).read();
    profile::applied(backend, &profile, profile::Use::Measure, &|var| std::env::var(var).ok()).settings
}

/// Starts worker processes with the settings `settings` gives for each backend and load
/// ([`profile::Applied::onto`] the load, which carries them to the worker), once the load is
/// known to fit in memory ([`memory`]). A first load may compile GPU kernels or page a
/// large model in from a slow disk, hence the generous timeout.
pub fn worker_spawner(settings: impl Fn(&str, &LoadSpec) -> profile::Applied + Send + Sync + 'static) -> lx_client::target::Spawner {
    std::sync::Arc::new(move |name: &str, spec: &LoadSpec, config: &lx_engine::scheduler::SchedulerConfig| {
        let applied = settings(name, spec);
        let spec = applied.onto(spec).map_err(lx_client::target::TargetError::Load)?;
        if memory::in_system_memory(&spec) {
            // A model that cannot be read is left to the worker, which says what is wrong with it.
            if let Ok(f) = memory::footprint(name, &spec, 0) {
                memory::check(&spec, &f, lx_machine::hardware::available_memory_bytes()).map_err(lx_client::target::TargetError::Load)?;
            }
        }
        let mut command = worker_command(name);
        command.env.push((lx_engine::backend::SETTINGS_FROM_ENV.to_string(), applied.from));
        lx_worker::spawn::spawn_workers(&command, &spec, config, std::time::Duration::from_secs(300), lx_machine::hardware::physical_cores())
    })
}

/// [`spawner`], and for each of `servers` (by its name) a client of that OpenAI-compatible
/// server, whose prompts are written and whose streamed text is counted with `codec`.
pub fn spawner_with_servers(servers: Vec<lx_openai::Server>, codec: std::sync::Arc<dyn lx_openai::TextCodec>, usage: profile::Use, untuned_threads: usize) -> lx_client::target::Spawner {
    let workers = spawner(usage, untuned_threads);
    std::sync::Arc::new(move |name: &str, spec: &LoadSpec, config: &lx_engine::scheduler::SchedulerConfig| match servers.iter().find(|s| s.name == name) {
        Some(server) => lx_openai::ServerTarget::connect(server.clone(), codec.clone()).map(|t| Box::new(t) as Box<dyn lx_client::target::Target>),
        None => workers(name, spec, config),
    })
}

/// How to start `backend`'s worker: this very binary as `worker --backend NAME`.
pub fn worker_command(backend: &str) -> WorkerCommand {
    worker::WorkerRole::Backend(backend.to_string()).command()
}

#[cfg(test)]
mod tests {
    use super::unavailable_for;

    /// A file of an architecture our model code lacks is refused by candle and MLX with the
    /// ones it has; llama.cpp's loader decides for itself; the default model runs everywhere.
    #[test]
    fn a_backend_without_the_models_architecture_says_which_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mamba.gguf");
        lx_format::gguf::GgufWriter::new().kv("general.architecture", "mamba").tensor_f32("token_embd.weight", &[4, 2], &[0.0; 8]).write(&path).unwrap();
        let why = unavailable_for("candle", &path).expect("candle has no mamba");
        assert!(why.contains("architecture `mamba` is not implemented by our model code (candle, MLX) (supported: ") && why.contains("gemma3"), "{why}");
        assert_eq!(unavailable_for("llama", &path), None);
        assert!(unavailable_for("mlx", &path).is_some(), "MLX: not in this build, or no mamba");
        let model = lx_models::default_model_path();
        assert!(model.exists(), "the default model is missing: run `lx models fetch default` (scripts/test does)");
        for b in ["llama", "candle"] {
            assert_eq!(unavailable_for(b, &model), None, "{b}");
        }
        assert_eq!(unavailable_for("mlx", &model), super::unavailable("mlx"));
    }
}
