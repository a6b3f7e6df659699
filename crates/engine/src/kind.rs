//! The local backends as a type, and what each can do: the one place that maps a name
//! people type to a backend and the one table of their capabilities. Everything else asks
//! [`BackendKind::of`] and [`BackendKind::capabilities`] instead of comparing names, so a
//! new backend is a new variant that the compiler walks every `match` to.
//!
//! Lists of what a run measures (`--backend`, the app's selection, run files) keep names:
//! they hold servers too, which are named by the user; a name that is not a [`BackendKind`]
//! is a server's.

use serde::{Deserialize, Serialize};

use crate::backend::{BackendError, KvType, KvTypes, LoadSpec};

/// A backend this project implements (whether this build has it is
/// `lx_local::unavailable`'s to say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// llama.cpp, through llama-cpp-2.
    Llama,
    /// candle, with our model code.
    Candle,
    /// MLX, through mlx-rs, with our model code.
    Mlx,
}

/// What a backend can do, for the checks made before anything loads and for what the
/// front ends offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The name people read: `llama.cpp`, `candle`, `MLX`.
    pub label: &'static str,
    /// KV cache types a load may ask for; the first is the default.
    pub kv_types: &'static [KvType],
    /// The type the cache is kept in whatever a load asks, where the backend keeps its own.
    pub kv_kept_as: Option<&'static str>,
    /// Its model code is llama.cpp's loader (any architecture llama.cpp reads) rather than
    /// ours (the architectures `lx_format::arch` implements).
    pub own_loader: bool,
    /// Build features that can put it on a GPU.
    pub gpu_features: &'static [&'static str],
    /// It runs on the GPU of a Mac without a feature (MLX: Apple's GPU is its device).
    pub gpu_on_macos: bool,
    /// Its own settings ([`LoadSpec::settings`]), each with the environment variable by
    /// which a user overrides it. `gpu_layers` travels as [`LoadSpec::gpu_layers`].
    pub settings: &'static [(&'static str, &'static str)],
}

const ALL_KV: &[KvType] = &KvType::ALL;
const F16_ONLY: &[KvType] = &[KvType::F16];

impl BackendKind {
    /// In the order `lx hw` lists them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Llama, BackendKind::Candle, BackendKind::Mlx];

    /// The backend a command runs when none is named.
    pub const DEFAULT: BackendKind = BackendKind::Llama;

    /// The canonical name: what run files, the worker's `--backend` and the UI carry.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Llama => "llama",
            BackendKind::Candle => "candle",
            BackendKind::Mlx => "mlx",
        }
    }

    /// The backend a name means, accepting the spellings people type (`llama.cpp`,
    /// `LLAMA`); `None` for anything else (a server's name, or a typo).
    pub fn of(name: &str) -> Option<BackendKind> {
        match name.to_ascii_lowercase().as_str() {
            "llama" | "llama.cpp" | "llamacpp" | "llama-cpp" => Some(BackendKind::Llama),
            "candle" => Some(BackendKind::Candle),
            "mlx" => Some(BackendKind::Mlx),
            _ => None,
        }
    }

    /// [`BackendKind::of`], or an error that lists the backends.
    pub fn parse(name: &str) -> Result<BackendKind, String> {
        BackendKind::of(name).ok_or_else(|| format!("unknown backend '{name}' (expected one of: {})", BackendKind::ALL.map(BackendKind::name).join(", ")))
    }

    pub const fn capabilities(self) -> &'static Capabilities {
        match self {
            BackendKind::Llama => &Capabilities {
                label: "llama.cpp",
                kv_types: ALL_KV,
                kv_kept_as: None,
                own_loader: true,
                gpu_features: &["cuda", "metal", "vulkan"],
                gpu_on_macos: false,
                settings: &[("gpu_layers", "LX_LLAMA_GPU_LAYERS"), ("flash_attn", "LX_LLAMA_FLASH_ATTN"), ("kv", "LX_LLAMA_KV"), ("ubatch", "LX_LLAMA_UBATCH")],
            },
            BackendKind::Candle => &Capabilities {
                label: "candle",
                kv_types: F16_ONLY,
                kv_kept_as: Some("f32"),
                own_loader: false,
                gpu_features: &["cuda", "metal"],
                gpu_on_macos: false,
                settings: &[("device", "LX_CANDLE_DEVICE"), ("weights", "LX_CANDLE_WEIGHTS")],
            },
            BackendKind::Mlx => &Capabilities {
                label: "MLX",
                kv_types: F16_ONLY,
                kv_kept_as: Some("f32"),
                own_loader: false,
                gpu_features: &[],
                gpu_on_macos: true,
                settings: &[("device", "LX_MLX_DEVICE"), ("weights", "LX_MLX_WEIGHTS"), ("overlap", "LX_MLX_OVERLAP")],
            },
        }
    }

    /// Whether a build with `features` may put this backend on a GPU (so a check tries the
    /// CPU as well).
    pub fn may_use_gpu(self, features: &[String]) -> bool {
        let c = self.capabilities();
        (c.gpu_on_macos && cfg!(target_os = "macos")) || features.iter().any(|f| c.gpu_features.contains(&f.as_str()))
    }
}

/// The cache types each backend takes, checked before anything loads.
impl KvTypes {
    /// Refuses types a backend cannot keep its cache in (every one but f16 for a backend
    /// other than llama.cpp), or anything but the default for a server, saying why, before
    /// anything loads.
    pub fn for_backend(&self, backend: &str) -> Result<(), String> {
        let Some(kind) = BackendKind::of(backend) else {
            return if self.is_default() { Ok(()) } else { Err(format!("KV cache type {}: a server's cache is set where the server is started: measure {backend} with an f16 cache", self.label())) };
        };
        let c = kind.capabilities();
        let Some(&odd) = [self.k, self.v].iter().find(|t| !c.kv_types.contains(t)) else { return Ok(()) };
        let takers: Vec<&str> = BackendKind::ALL.iter().map(|k| k.capabilities()).filter(|c| c.kv_types.contains(&odd)).map(|c| c.label).collect();
        let kept = c.kv_kept_as.unwrap_or(KvType::default().name());
        Err(format!("KV cache type {} is {}'s, and {} keeps its KV cache in {kept}: measure {backend} with an f16 cache", self.label(), takers.join(" and "), c.label))
    }

    /// What a backend's own load says of types it cannot keep: [`KvTypes::for_backend`]'s
    /// refusal, as a load error.
    pub fn taken_by(&self, kind: BackendKind) -> Result<(), BackendError> {
        self.for_backend(kind.name()).map_err(BackendError::Load)
    }
}

impl Capabilities {
    /// Whether `name` is one of its own settings ([`LoadSpec::settings`]; `gpu_layers` has a
    /// field of its own).
    pub fn has_setting(&self, name: &str) -> bool {
        name != "gpu_layers" && self.env_of(name).is_some()
    }

    /// The environment variable that overrides setting `name`.
    pub fn env_of(&self, name: &str) -> Option<&'static str> {
        self.settings.iter().find(|(n, _)| *n == name).map(|(_, env)| *env)
    }
}

/// A backend's own settings, read where it loads.
impl LoadSpec {
    /// The setting `name`, where the load gives it.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(String::as_str)
    }

    /// Refuses a setting `kind` does not have, naming those it has.
    pub fn settings_of(&self, kind: BackendKind) -> Result<(), String> {
        let c = kind.capabilities();
        match self.settings.keys().find(|k| !c.has_setting(k)) {
            None => Ok(()),
            Some(bad) => {
                let has: Vec<&str> = c.settings.iter().map(|(n, _)| *n).filter(|n| c.has_setting(n)).collect();
                Err(format!("{} has no setting `{bad}` (its settings: {})", c.label, has.join(", ")))
            }
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        BackendKind::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_people_spellings_are_accepted() {
        for k in BackendKind::ALL {
            assert_eq!(BackendKind::of(k.name()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.name()));
        }
        assert_eq!(BackendKind::of("llama.cpp"), Some(BackendKind::Llama));
        assert_eq!(BackendKind::of("MLX"), Some(BackendKind::Mlx));
        assert_eq!(BackendKind::of("lab-server"), None);
        assert_eq!(BackendKind::parse("vllm").unwrap_err(), "unknown backend 'vllm' (expected one of: llama, candle, mlx)");
    }

    #[test]
    fn quantized_cache_types_are_llama_cpps_only() {
        let q8 = KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 };
        assert_eq!(q8.label(), "q8_0");
        assert_eq!(KvTypes { v: KvType::F16, ..q8 }.label(), "K q8_0, V f16");
        assert!(q8.for_backend("llama").is_ok());
        assert!(KvTypes::default().for_backend("candle").is_ok());
        assert_eq!(q8.for_backend("candle").unwrap_err(), "KV cache type q8_0 is llama.cpp's, and candle keeps its KV cache in f32: measure candle with an f16 cache");
        assert!(q8.for_backend("lab-server").unwrap_err().contains("a server's cache is set where the server is started"));
        let e = q8.taken_by(BackendKind::Candle).unwrap_err().to_string();
        assert_eq!(e, "cannot load model: KV cache type q8_0 is llama.cpp's, and candle keeps its KV cache in f32: measure candle with an f16 cache");
    }

    #[test]
    fn a_setting_a_backend_lacks_is_refused_with_those_it_has() {
        let mut spec = LoadSpec::default();
        spec.settings.insert("weights".into(), "f16".into());
        assert!(spec.settings_of(BackendKind::Candle).is_ok());
        assert_eq!(spec.setting("weights"), Some("f16"));
        let e = spec.settings_of(BackendKind::Llama).unwrap_err();
        assert_eq!(e, "llama.cpp has no setting `weights` (its settings: flash_attn, kv, ubatch)");
        // gpu_layers travels in its own field.
        spec.settings = [("gpu_layers".to_string(), "0".to_string())].into();
        assert!(spec.settings_of(BackendKind::Llama).is_err());
    }

    #[test]
    fn every_backend_takes_the_default_cache_type_first() {
        for k in BackendKind::ALL {
            assert_eq!(k.capabilities().kv_types.first(), Some(&KvType::default()), "{k}");
        }
    }
}
