//! MLX backend for Latency Explorer: our own graph of Gemma 3 and the llama family over mlx-rs, behind the engine's
//! step interface ([`lx_engine::backend::Backend`]).
//!
//! The MLX part ([`MlxBackend`]) is compiled with the `mlx` feature on two platforms:
//! - macOS aarch64: MLX built from source by mlx-sys, on Metal (or MLX's CPU device);
//! - Linux x86_64: MLX's own prebuilt CPU build (the `mlx-cpu` wheel, fetched by
//!   `scripts/mlx-fetch` and linked by the patched mlx-sys in `third_party/mlx-sys`), on
//!   MLX's CPU device only.
//!
//! Everywhere else (and without the feature) this crate is a stub whose [`unavailable`] says
//! why, so `lx hw`, `lx sweep --backend mlx` and the app can show the reason without
//! special cases.
//!
//! Everything that does not call MLX is compiled and unit-tested on every platform: batch
//! validation and layout ([`plan`]), attention windows and masks, and the lossless repacking
//! of GGUF Q4_0 / Q4_1 / Q8_0 blocks into MLX's affine quantized layout ([`repack`]).
//!
//! # Weights
//! MLX's own GGUF loader keeps Q4_0, Q4_1 and Q8_0 tensors quantized and dequantizes every
//! other type to f16, but it cannot read Q5_0 at all (its GGUF library has no Q5_0 decoder),
//! and the default model (Gemma 3 270M Q4_K_M) stores most projections as Q5_0. So this crate
//! reads the file with the engine's GGUF reader and applies the same policy itself
//! ([`WeightMode::AsLoaded`]), or quantizes every matrix as MLX quantizes an f16 model, 4-bit
//! affine, group size 64 ([`WeightMode::Mlx4`], module `mlx4`), for a like-for-like 4-bit
//! comparison.
//! Which one ran is part of `BackendInfo::version`.
//!
//! Status: the graph runs and passes its parity tests against llama.cpp on Linux, on MLX's
//! CPU backend (tests/parity_llamacpp.rs). Metal (kernels, speed) is proven only by a Mac.

pub mod memory;
pub mod plan;
pub mod repack;

#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
pub mod dequant;
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
mod graph;
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
pub use graph::{devices, MlxBackend};
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
pub mod mlx4;

/// The mlx-rs release this crate is written against (it builds MLX 0.32.2 through mlx-sys 0.7).
pub const MLX_RS_VERSION: &str = "0.33.0";
/// The MLX release mlx-rs `MLX_RS_VERSION` compiles.
pub const MLX_VERSION: &str = "0.32.2";

/// True when this build contains the MLX backend.
pub const fn available() -> bool {
    cfg!(all(
        feature = "mlx",
        any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))
    ))
}

/// True when MLX runs on its CPU device only in this build (Linux: the mlx-cpu wheel has no GPU backend).
pub const fn cpu_only() -> bool {
    cfg!(target_os = "linux")
}

/// Why MLX cannot run in this build, or `None` when it can.
pub fn unavailable() -> Option<String> {
    if available() {
        None
    } else if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        Some("not compiled into this build: rebuild with `--features mlx` (needs Xcode and cmake)".into())
    } else if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        Some(
            "not compiled into this build: rebuild with `--features mlx` for MLX's CPU backend (scripts/mlx-fetch \
             first); MLX on Metal needs macOS on Apple Silicon"
                .into(),
        )
    } else {
        Some("not available: needs macOS on Apple Silicon".into())
    }
}

/// How the weights are held on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightMode {
    /// As MLX's own GGUF loader would hold them: Q4_0, Q4_1 and Q8_0 stay quantized (MLX
    /// affine, group size 32, repacked losslessly), every other type becomes f16.
    #[default]
    AsLoaded,
    /// Every matrix (projections and the tied embedding) rounded to f16 and quantized by MLX
    /// to 4 bits, group size 64 (`mlx.core.quantize` defaults), as MLX quantizes an f16
    /// model; norms stay f32.
    Mlx4,
}

impl WeightMode {
    /// The name `LX_MLX_WEIGHTS` takes.
    pub fn name(self) -> &'static str {
        match self {
            WeightMode::AsLoaded => "as-loaded",
            WeightMode::Mlx4 => "q4",
        }
    }

    /// The words results use for this mode.
    pub fn describe(self) -> &'static str {
        match self {
            WeightMode::AsLoaded => "as loaded (Q4_0/Q4_1/Q8_0 kept as MLX affine g32, other types f16)",
            WeightMode::Mlx4 => "MLX 4-bit affine, group 64, f16 scales",
        }
    }
}

impl std::str::FromStr for WeightMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "" | "as-loaded" | "as_loaded" | "asloaded" => Ok(Self::AsLoaded),
            "q4" | "mlx-q4" | "mlx4" | "4bit" | "4-bit" => Ok(Self::Mlx4),
            other => Err(format!("unknown MLX weight mode `{other}` (as-loaded, q4)")),
        }
    }
}

/// Backend options beyond the engine's `LoadSpec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub weights: WeightMode,
    /// Run on MLX's CPU device instead of the GPU (also chosen by `LoadSpec::gpu_layers == Some(0)`).
    pub cpu: bool,
    /// Build each decode step's graph while the step before it evaluates (on unless the
    /// setting `overlap` is `off`; off only to measure what it is worth).
    pub overlap: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { weights: WeightMode::AsLoaded, cpu: false, overlap: true }
    }
}

impl Options {
    /// Options from the load's settings: `weights` (as-loaded, q4), `device` (gpu, cpu) and
    /// `overlap` (on, off).
    pub fn from_spec(spec: &lx_engine::backend::LoadSpec) -> Result<Self, String> {
        spec.settings_of(lx_engine::kind::BackendKind::Mlx)?;
        let weights = spec.setting("weights").map_or(Ok(WeightMode::AsLoaded), str::parse)?;
        let cpu = match spec.setting("device").map(str::to_ascii_lowercase) {
            Some(s) if s == "cpu" => true,
            None => false,
            Some(s) if s.is_empty() || s == "gpu" || s == "metal" => false,
            Some(other) => return Err(format!("unknown MLX device `{other}` (gpu, cpu)")),
        };
        let overlap = match spec.setting("overlap").map(str::to_ascii_lowercase).as_deref() {
            None | Some("" | "on" | "1" | "true") => true,
            Some("off" | "0" | "false") => false,
            Some(other) => return Err(format!("unknown MLX overlap `{other}` (on, off)")),
        };
        Ok(Self { weights, cpu, overlap })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_matches_the_platform() {
        let mac_arm = cfg!(all(target_os = "macos", target_arch = "aarch64"));
        let linux_x86 = cfg!(all(target_os = "linux", target_arch = "x86_64"));
        if !mac_arm && !linux_x86 {
            assert!(!available());
            assert_eq!(unavailable().as_deref(), Some("not available: needs macOS on Apple Silicon"));
        }
        if linux_x86 {
            assert_eq!(available(), cfg!(feature = "mlx"));
        }
        // Every reason mentions what Metal needs (tests/integration/cli.rs relies on it).
        if let Some(why) = unavailable() {
            assert!(why.contains("macOS") || why.contains("Xcode"), "{why}");
        }
        assert_eq!(available(), unavailable().is_none());
    }

    #[test]
    fn overlap_is_on_unless_turned_off() {
        let with = |v: Option<&str>| {
            let mut spec = lx_engine::backend::LoadSpec::default();
            if let Some(v) = v {
                spec.settings.insert("overlap".into(), v.into());
            }
            Options::from_spec(&spec).map(|o| o.overlap)
        };
        assert_eq!(with(None), Ok(true));
        assert_eq!(with(Some("off")), Ok(false));
        assert_eq!(with(Some("ON")), Ok(true));
        assert_eq!(with(Some("sometimes")), Err("unknown MLX overlap `sometimes` (on, off)".to_string()));
    }

    #[test]
    fn weight_modes_parse() {
        assert_eq!("as-loaded".parse::<WeightMode>(), Ok(WeightMode::AsLoaded));
        assert_eq!("Q4".parse::<WeightMode>(), Ok(WeightMode::Mlx4));
        assert!("q8".parse::<WeightMode>().is_err());
    }
}
