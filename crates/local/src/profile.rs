//! A tuned profile (one machine, build and model: the settings `lx tune` chose for each
//! backend, with the trials that chose them), where it is kept, and what a worker starts
//! with because of it.
//!
//! Precedence when a worker starts: the run's own (a fidelity candidate's weights,
//! `--gpu-layers`), then a setting's environment variable (`LX_CANDLE_WEIGHTS`, ...) given by
//! the user, then the profile, then the backend's own default; `LX_UNTUNED=1` or
//! [`Use::Untuned`] leaves the profile out. [`applied`] is the one place the variables are
//! read: workers get their settings in the load ([`lx_engine::backend::LoadSpec::settings`]).
//! Each run records the settings its backends ran with and where they came from
//! ([`lx_engine::backend::BackendInfo::settings_from`]). Measuring a profile is [`crate::tune`]'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A backend's settings by name (`threads`, `weights`, `flash_attn`, ...), as text.
pub type Settings = BTreeMap<String, String>;

/// Profile files this build writes and reads.
pub const PROFILE_SCHEMA: u32 = 1;

/// Leaves the profile out when set (to anything but empty or `0`).
pub const UNTUNED_ENV: &str = "LX_UNTUNED";

/// One setting the tuner tries, with the values it tries (the backend's default is
/// whatever it reports when the setting is not given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    pub name: &'static str,
    /// The environment variable that overrides it (`lx_engine::kind::Capabilities::settings`);
    /// `None` for `threads`, which has none.
    pub env: Option<&'static str>,
    pub values: Vec<String>,
}

/// Thread counts worth trying on `cores` physical cores: all of them, and half (one on a
/// two-core machine, where sharing the cores with anything else hurts most).
pub fn thread_values(cores: usize) -> Vec<String> {
    let cores = cores.max(1);
    let mut v = vec![cores.to_string()];
    if cores > 1 {
        v.push((cores / 2).to_string());
    }
    v
}

/// Why `lx tune` has nothing to measure for `backend`, when it has nothing.
pub fn nothing_to_tune(backend: &str) -> Option<&'static str> {
    match crate::BackendKind::of(backend)? {
        crate::BackendKind::Mlx => Some(
            "nothing to tune: MLX takes no thread count (its Linux CPU build runs on one core whatever --threads says; on a Mac it runs on the GPU) and its one other setting, q4, changes the model",
        ),
        _ => None,
    }
}

/// The settings `lx tune` measures for `backend`: the GPU or the CPU first where the build
/// has a GPU, then threads (none for a backend with [`nothing_to_tune`]). Only settings that run the model file's own weights: a comparison
/// compares backends on the same model, so MLX's `q4` (every matrix re-quantized to 4 bits, a
/// coarser model than the file) is never chosen for the user; it is measured on request
/// (`LX_MLX_WEIGHTS=q4`) and against mlx-lm (`scripts/reference-bench mlx`). candle's formats
/// all hold the file's weights exactly.
pub fn knobs(backend: &str, cores: usize) -> Vec<Knob> {
    if nothing_to_tune(backend).is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let Some(kind) = crate::BackendKind::of(backend) else { return out };
    let knob = |name, values: &[&str]| Knob { name, env: kind.capabilities().env_of(name), values: values.iter().map(|s| s.to_string()).collect() };
    // Where the build has a GPU, whether to use it comes first: every later setting is then
    // measured where the model runs. The default is the GPU (every layer on it); the CPU is
    // the other value. On a machine where the build finds no GPU both run on the CPU, and
    // the CPU is not kept unless it scores 5% higher.
    match kind {
        crate::BackendKind::Llama if lx_backend_llamacpp::GPU_BUILD.is_some() => out.push(knob("gpu_layers", &["0"])),
        crate::BackendKind::Candle if lx_backend_candle::gpu_build().is_some() => out.push(knob("device", &["cpu"])),
        _ => {}
    }
    out.push(Knob { name: "threads", env: None, values: thread_values(cores) });
    match kind {
        crate::BackendKind::Llama => {
            out.push(knob("flash_attn", &["on", "off"]));
            out.push(knob("kv", &["per-sequence", "unified"]));
            out.push(knob("ubatch", &["512", "256", "128"]));
        }
        crate::BackendKind::Candle => out.push(knob("weights", &["dual", "q8_0", "f16", "quantized"])),
        crate::BackendKind::Mlx => {}
    }
    out
}

/// What one trial measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The settings the backend ran with (what it reported, threads included).
    pub settings: Settings,
    /// Measured with the competing load running.
    pub contended: bool,
    /// One client: median decode tok/s per request.
    pub decode_tps: f64,
    /// One client: median prefill tok/s.
    pub prefill_tps: f64,
    /// [`TRIAL_CLIENTS`] clients: output tokens per second of the measured window.
    pub batched_tps: f64,
    /// The geometric mean of the three figures (0 when the trial failed): one number that
    /// a setting must raise to be kept, which neither a faster prefill nor a faster decode
    /// alone can buy at the other's expense.
    pub score: f64,
    pub seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Trial {
    pub fn new(settings: Settings, contended: bool, decode_tps: f64, prefill_tps: f64, batched_tps: f64, seconds: f64) -> Trial {
        let figures = [decode_tps, prefill_tps, batched_tps];
        let score = if figures.iter().all(|x| x.is_finite() && *x > 0.0) { (figures.iter().map(|x| x.ln()).sum::<f64>() / 3.0).exp() } else { 0.0 };
        Trial { settings, contended, decode_tps, prefill_tps, batched_tps, score, seconds, error: None }
    }

    pub fn failed(settings: Settings, contended: bool, seconds: f64, why: String) -> Trial {
        Trial { settings, contended, decode_tps: 0.0, prefill_tps: 0.0, batched_tps: 0.0, score: 0.0, seconds, error: Some(why) }
    }
}

/// One backend's part of a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendProfile {
    /// The best settings on otherwise idle cores: what sweeps and `lx serve` use.
    pub idle: Settings,
    /// The best settings with the competing load running: what live mode uses. `None`
    /// when the budget ran out before they were measured (live mode then takes `idle`).
    pub contended: Option<Settings>,
    /// Every trial, in the order run: the evidence.
    pub trials: Vec<Trial>,
    /// What was left out, and why (the budget, a setting that failed to load, a choice the
    /// fidelity bound turned down).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Each value of a setting that changes the model, as measured against llama.cpp's f16
    /// cache (`weights f16` → mean KL divergence, nats): what the choice was held to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fidelity: BTreeMap<String, f64>,
}

/// A tuned profile: one machine, build and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub schema: u32,
    /// The machine and build (as the ceilings' probe keys them).
    pub machine: String,
    /// The model: file name and size.
    pub model: String,
    pub measured_unix_ms: u64,
    /// How long tuning took, and the budget it was given.
    pub seconds: f64,
    pub budget_s: f64,
    /// The workload each trial ran, and the competing load.
    pub workload: String,
    pub competing_load: String,
    pub backends: BTreeMap<String, BackendProfile>,
}

/// How a worker's settings are going to be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Sweeps, `lx serve`, `lx generate`: the idle choice.
    Measure,
    /// Live mode, which shares the cores with its own window: the contended choice.
    Interactive,
    /// The backends' defaults, the profile left out (`lx sweep --untuned`).
    Untuned,
}

/// A model's identity for profiles: its file name and size (changing either re-tunes).
pub fn model_key(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    format!("{name} ({size} bytes)")
}

/// Where the profile for `machine` and `model` lives under the cache root: one file per
/// pair (a damaged file costs only its own profile).
pub fn profile_path(cache_root: &Path, machine: &str, model: &str) -> PathBuf {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{machine}\n{model}").as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    cache_root.join("tune").join(format!("{hex}.json"))
}

/// This machine's profile for one model: where it is kept and what it is keyed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    /// The machine and build ([`lx_machine::probe::machine_key`]).
    pub machine: String,
    /// The model ([`model_key`]).
    pub model: String,
}

impl Located {
    /// The profile of `machine` for the model at `model_path`, in this user's cache.
    pub fn new(machine: &str, model_path: &Path) -> Located {
        let model = model_key(model_path);
        Located { path: profile_path(&lx_models::cache_dir(), machine, &model), machine: machine.to_string(), model }
    }

    /// [`Located::new`] for this machine and build.
    pub fn here(model_path: &Path) -> Located {
        Located::new(&lx_machine::probe::machine_key(&crate::hardware_report()), model_path)
    }

    pub fn read(&self) -> Result<Profile, ProfileError> {
        read_profile(&self.path, &self.machine, &self.model)
    }

    /// Saves `profile` (atomically), keeping from the valid profile already here every
    /// backend it did not tune, each noted with when it was measured: `lx tune --backend
    /// candle` re-measures candle and leaves llama.cpp's choices as they were. Returns what was
    /// saved.
    pub fn save(&self, mut profile: Profile) -> anyhow::Result<Profile> {
        if let Ok(old) = self.read() {
            let kept = format!("kept from the tuning of {}", lx_engine::date::UtcDate::from_unix(old.measured_unix_ms / 1000).minutes());
            for (backend, mut b) in old.backends {
                if profile.backends.contains_key(&backend) {
                    continue;
                }
                if !b.notes.iter().any(|n| n.starts_with("kept from the tuning of")) {
                    b.notes.push(kept.clone());
                }
                profile.backends.insert(backend, b);
            }
        }
        save_profile(&self.path, &profile)?;
        Ok(profile)
    }
}

/// Why a profile file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProfileError {
    #[error("no tuned profile for this machine, build and model")]
    Missing,
    #[error("the tuned profile {path} is damaged ({why})")]
    Damaged { path: String, why: String },
}

/// The profile at `path`, checked: it must parse, be of this schema, and name this machine
/// and model (a file copied from elsewhere is refused, not applied).
pub fn read_profile(path: &Path, machine: &str, model: &str) -> Result<Profile, ProfileError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ProfileError::Missing),
        Err(e) => return Err(damaged(path, e.to_string())),
    };
    let profile: Profile = serde_json::from_slice(&bytes).map_err(|e| damaged(path, e.to_string()))?;
    if profile.schema != PROFILE_SCHEMA {
        return Err(damaged(path, format!("schema {} where this build reads {PROFILE_SCHEMA}", profile.schema)));
    }
    if profile.machine != machine || profile.model != model {
        return Err(damaged(path, format!("it is for {} / {}", profile.machine, profile.model)));
    }
    // A backend with nothing to tune (MLX) runs with its defaults whatever an older build
    // recorded for it.
    for (backend, p) in profile.backends.iter().filter(|(b, _)| nothing_to_tune(b).is_none()) {
        let known: Vec<&str> = knobs(backend, 1).iter().map(|k| k.name).collect();
        if let Some(bad) = p.idle.keys().chain(p.contended.iter().flat_map(|c| c.keys())).find(|k| !known.contains(&k.as_str())) {
            return Err(damaged(path, format!("{backend}: unknown setting `{bad}`")));
        }
    }
    Ok(profile)
}

fn damaged(path: &Path, why: String) -> ProfileError {
    ProfileError::Damaged { path: path.display().to_string(), why }
}

/// Writes the profile atomically.
pub fn save_profile(path: &Path, profile: &Profile) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    Ok(lx_engine::atomic_file::write(path, serde_json::to_string_pretty(profile)?.as_bytes())?)
}

/// Of a run's recorded `settings` (by the names results record them under, threads
/// included), those that are `backend`'s own ([`lx_engine::backend::LoadSpec::settings`]): what
/// a saved run's load is predicted with.
pub fn own_settings(backend: &str, settings: &Settings) -> Settings {
    let Some(kind) = crate::BackendKind::of(backend) else { return Settings::new() };
    settings.iter().filter(|(k, _)| kind.capabilities().has_setting(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// What a worker of one backend starts with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// The backend's own settings (the environment's over the profile's), for
    /// [`lx_engine::backend::LoadSpec::settings`]; `gpu_layers` among them is the load's
    /// `gpu_layers`.
    pub settings: Settings,
    /// Threads, when the profile has them (used unless the run asks for a number).
    pub threads: Option<usize>,
    /// Where the settings came from, in words: recorded with every result.
    pub from: String,
}

impl Applied {
    /// `spec` with these settings where it gives none of its own: its settings over these,
    /// its thread count unless 0, its layer count unless `None` (`all` is llama.cpp's
    /// default).
    pub fn onto(&self, spec: &lx_engine::backend::LoadSpec) -> Result<lx_engine::backend::LoadSpec, String> {
        let mut out = spec.clone();
        let mut settings = self.settings.clone();
        if let Some(layers) = settings.remove("gpu_layers") {
            if out.gpu_layers.is_none() && layers != "all" {
                out.gpu_layers = Some(layers.parse().map_err(|_| format!("gpu_layers {layers:?}: a number of layers, or all"))?);
            }
        }
        settings.extend(std::mem::take(&mut out.settings));
        out.settings = settings;
        if out.threads == 0 {
            out.threads = self.threads.unwrap_or(0);
        }
        Ok(out)
    }
}

/// How [`Applied::from`] begins when the settings came from this machine's tuned profile.
const TUNED_FROM: &str = "this machine's tuned profile";

/// Whether a worker's settings came from this machine's tuned profile, from where it said
/// they came from ([`lx_engine::backend::BackendInfo::settings_from`]).
pub fn is_tuned(from: &str) -> bool {
    from.starts_with(TUNED_FROM)
}

/// The settings a `backend` worker starts with on this machine: see the module's
/// precedence. `profile` is what [`read_profile`] gave for this machine and model; `env`
/// reads the environment.
pub fn applied(backend: &str, profile: &Result<Profile, ProfileError>, usage: Use, env: &dyn Fn(&str) -> Option<String>) -> Applied {
    let own: &[(&str, &str)] = crate::BackendKind::of(backend).map_or(&[], |k| k.capabilities().settings);
    let from_env: Settings = own.iter().filter_map(|(name, var)| Some((name.to_string(), env(var)?))).filter(|(_, v)| !v.is_empty()).collect();
    let said = |mut s: String| {
        let vars: Vec<&str> = own.iter().filter(|(name, _)| from_env.contains_key(*name)).map(|(_, var)| *var).collect();
        if !vars.is_empty() {
            s.push_str(&format!("; {} from the environment", vars.join(", ")));
        }
        s
    };
    let defaults = |why: String| Applied { settings: from_env.clone(), threads: None, from: said(why) };
    if usage == Use::Untuned {
        return defaults("the backend's defaults (--untuned)".into());
    }
    if env(UNTUNED_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return defaults(format!("the backend's defaults ({UNTUNED_ENV} is set)"));
    }
    let profile = match profile {
        Ok(p) => p,
        Err(ProfileError::Missing) => return defaults("the backend's defaults: this machine is not tuned (lx tune)".into()),
        Err(e) => return defaults(format!("the backend's defaults: {e}; lx tune measures again")),
    };
    if let Some(why) = nothing_to_tune(backend) {
        return defaults(format!("the backend's defaults: {why}"));
    }
    let Some(b) = profile.backends.get(backend) else {
        return defaults(format!("the backend's defaults: the tuned profile has no {backend} (lx tune --backend {backend})"));
    };
    let (chosen, which) = match (usage, &b.contended) {
        (Use::Interactive, Some(c)) => (c, "choice under a competing load"),
        (Use::Interactive, None) => (&b.idle, "idle choice; the contended one was not measured"),
        (Use::Measure | Use::Untuned, _) => (&b.idle, "idle choice"),
    };
    let mut out = Applied { settings: from_env.clone(), ..Applied::default() };
    for knob in knobs(backend, 1) {
        let Some(value) = chosen.get(knob.name) else { continue };
        match knob.env {
            None => out.threads = value.parse().ok(),
            Some(_) => {
                out.settings.entry(knob.name.to_string()).or_insert_with(|| value.clone());
            }
        }
    }
    let date = lx_engine::date::UtcDate::from_unix(profile.measured_unix_ms / 1000).minutes();
    out.from = said(format!("{TUNED_FROM} of {date} ({which})"));
    out
}
