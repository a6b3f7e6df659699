//! The architectures our own model code implements (the candle and MLX backends), and their
//! hyper-parameters as llama.cpp reads them from GGUF metadata.
//!
//! The fields every architecture has come from the shared parser
//! ([`crate::gguf::ModelConfig`]); what differs between the architectures (Gemma 3's
//! local/global layer pattern, local RoPE base, attention scale and soft-capping; the llama
//! family's RoPE layout and activation) is read here, in one function, [`Config::from_gguf`],
//! so both graphs build the same model from the same file.

use crate::gguf::{Array, GgufFile, Value};

/// Architectures our model code implements (the `general.architecture` values). Mistral
/// models are labelled `llama` in GGUF files (same graph), so they load as `llama`.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["gemma3", "llama", "qwen2", "qwen3"];

/// Why a file's hyper-parameters cannot be read for our model code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchError {
    /// An architecture, or a variant of one, that our model code does not implement.
    #[error("{0}")]
    Unsupported(String),
    /// A key missing or of the wrong kind, or shapes that do not fit together.
    #[error("{0}")]
    Malformed(String),
}

/// An architecture our model code implements. What differs between them is small (see
/// [`Config`]): one model code path per backend serves all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Gemma3,
    /// Llama 1/2/3, Mistral and other files labelled `llama`.
    Llama,
    /// Qwen 2 and 2.5 (biases on Q/K/V).
    Qwen2,
    /// Qwen 3 dense (per-head RMS norm of Q and K).
    Qwen3,
}

impl Arch {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "gemma3" => Self::Gemma3,
            "llama" => Self::Llama,
            "qwen2" => Self::Qwen2,
            "qwen3" => Self::Qwen3,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Gemma3 => "gemma3",
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
        }
    }
}

/// Which elements of a head RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i + 1)`: llama.cpp's "normal" RoPE, used for `llama`. The GGUF
    /// converter permutes the rows of llama's Q and K projections so that this layout
    /// computes what the original (half-split) model did.
    Interleaved,
    /// Halves `(i, i + d/2)`: llama.cpp's "neox" RoPE (Gemma, Qwen).
    Neox,
}

/// The gate's activation in the gated feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// tanh approximation of GELU (Gemma).
    GeluTanh,
    /// SiLU (the llama family).
    Silu,
}

/// Hyper-parameters of a model, as llama.cpp reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub arch: Arch,
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, when present.
    pub name: Option<String>,
    pub block_count: usize,
    /// Hidden size.
    pub embedding_length: usize,
    pub feed_forward_length: usize,
    pub head_count: usize,
    pub head_count_kv: usize,
    /// Query/key head size.
    pub key_length: usize,
    /// Value head size.
    pub value_length: usize,
    pub rms_eps: f64,
    /// RoPE base of the global (full-attention) layers: every layer but Gemma's local ones.
    pub rope_base_global: f64,
    /// RoPE base of the local (sliding-window) layers.
    pub rope_base_local: f64,
    /// Linear RoPE scaling factor of the global layers (1 when absent).
    pub rope_scale_global: f64,
    pub rope_style: RopeStyle,
    /// Sliding window of the local layers, in positions (a query sees itself and the
    /// `sliding_window - 1` positions before it); `None` when every layer is global.
    pub sliding_window: Option<usize>,
    /// Per layer: true for a local (sliding-window) layer.
    pub is_local: Vec<bool>,
    /// Multiplier applied to queries before `q·k`.
    pub attn_scale: f64,
    /// Final logit soft-capping (`None` when the model has none).
    pub final_logit_softcap: Option<f64>,
    /// Multiplier of the input embeddings (Gemma: `sqrt(hidden)`; 1 otherwise).
    pub embed_scale: f64,
    pub activation: Activation,
    /// Per-head RMS norm of Q and K before RoPE (`attn_q_norm`/`attn_k_norm`: Gemma 3, Qwen 3).
    pub qk_norm: bool,
    /// RMS norms after attention and after the FFN, before the residual adds (Gemma 3).
    pub post_norms: bool,
    /// Context length the model was trained for.
    pub context_length: Option<usize>,
    /// Vocabulary size, from the embedding tensor's shape.
    pub vocab_size: usize,
}

fn load_err(e: impl std::fmt::Display) -> ArchError {
    ArchError::Malformed(e.to_string())
}

/// Checks `general.architecture` against [`SUPPORTED_ARCHITECTURES`].
pub fn check_architecture(g: &GgufFile) -> Result<Arch, ArchError> {
    let name = g.architecture().map_err(load_err)?;
    Arch::from_name(name).ok_or_else(|| {
        ArchError::Unsupported(format!(
            "architecture `{name}` is not implemented by our model code (candle, MLX) (supported: {})",
            SUPPORTED_ARCHITECTURES.join(", ")
        ))
    })
}

impl Config {
    /// Reads the hyper-parameters from a parsed GGUF header.
    ///
    /// An architecture other than those in [`SUPPORTED_ARCHITECTURES`], a mixture of
    /// experts, partial rotary embeddings or a RoPE scaling other than linear give
    /// `ArchError::Unsupported`; a missing or malformed key gives `ArchError::Malformed`
    /// naming the key.
    pub fn from_gguf(g: &GgufFile) -> Result<Self, ArchError> {
        let arch = check_architecture(g)?;
        let name = arch.name();
        let base = crate::gguf::ModelConfig::from_gguf(g).map_err(load_err)?;
        let key = |k: &str| format!("{name}.{k}");
        let opt_f64 = |k: &str| -> Result<Option<f64>, ArchError> {
            let full = key(k);
            match g.metadata(&full) {
                None => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                    ArchError::Malformed(format!(
                        "GGUF metadata key `{full}` is not a number: {}",
                        v.describe()
                    ))
                }),
            }
        };
        let block_count = base.block_count as usize;
        let embedding_length = base.embedding_length as usize;
        let head_count = base.head_count as usize;
        let head_count_kv = base.head_count_kv as usize;
        let key_length = base.key_length as usize;
        if head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
            return Err(ArchError::Malformed(format!(
                "{} {head_count} is not a multiple of {} {head_count_kv}",
                key("attention.head_count"),
                key("attention.head_count_kv")
            )));
        }
        if !key_length.is_multiple_of(2) {
            return Err(ArchError::Malformed(format!(
                "{} {key_length} is odd",
                key("attention.key_length")
            )));
        }
        // Mixtral and friends are labelled `llama` too; their FFN is a mixture of experts.
        if let Some(n) = opt_f64("expert_count")?.filter(|&n| n > 0.0) {
            return Err(ArchError::Unsupported(format!(
                "`{name}` with a mixture of experts ({} {n}) is not implemented by our model code (candle, MLX)",
                key("expert_count")
            )));
        }
        // Every architecture here rotates whole heads (llama.cpp asserts the same).
        if let Some(n) = base.rope_dimension_count.map(|n| n as usize) {
            if n != key_length {
                return Err(ArchError::Unsupported(format!(
                    "partial rotary embeddings ({} {n}, head size {key_length}) are not implemented by our model code (candle, MLX)",
                    key("rope.dimension_count")
                )));
            }
        }
        let rms_eps = base.layer_norm_rms_epsilon.map(f64::from).unwrap_or(1e-6);
        // llama.cpp's default base is 10000; Gemma 3 files always carry theirs (1e6).
        let default_base = if arch == Arch::Gemma3 {
            1_000_000.0
        } else {
            10_000.0
        };
        let rope_base_global = base.rope_freq_base.map(f64::from).unwrap_or(default_base);
        // As llama.cpp: the scaling type defaults to linear, and the factor comes from
        // `rope.scaling.factor`, else the older `rope.scale_linear`.
        let factor = match opt_f64("rope.scaling.factor")? {
            Some(f) => Some(f),
            None => opt_f64("rope.scale_linear")?,
        };
        let rope_scale_global = match base.rope_scaling.as_ref().map(|s| s.kind.as_str()) {
            Some("none") => 1.0,
            None | Some("linear") => factor.filter(|f| *f > 0.0).unwrap_or(1.0),
            Some(other) => {
                return Err(ArchError::Unsupported(format!(
                    "RoPE scaling `{other}` is not implemented by our model code (candle, MLX) (only linear)"
                )))
            }
        };

        let gemma = arch == Arch::Gemma3;
        // Only Gemma 3 has local layers here: llama.cpp runs `llama` and `qwen2` files
        // with full attention even when they carry a sliding window (Mistral 7B v0.1).
        let sliding_window = if gemma {
            base.sliding_window.map(|w| w as usize).filter(|&w| w > 0)
        } else {
            None
        };
        let is_local = match sliding_window {
            None => vec![false; block_count],
            Some(_) => {
                gemma3_local_layers(g, &key("attention.sliding_window_pattern"), block_count)?
            }
        };
        // llama.cpp (gemma3): local layers use base 10000 (`rope.freq_base_swa`).
        let rope_base_local = if gemma {
            match opt_f64("rope.freq_base_swa")? {
                Some(v) => v,
                None => opt_f64("rope.local.freq_base")?.unwrap_or(10_000.0),
            }
        } else {
            rope_base_global
        };

        // llama.cpp: 1/sqrt(head_dim), except Gemma 3 27B (62 layers), which uses
        // query_pre_attn_scalar = hidden / heads. An explicit key wins when a file has one.
        let attn_scale = match opt_f64("attention.query_pre_attn_scalar")? {
            Some(s) if gemma && s > 0.0 => 1.0 / s.sqrt(),
            _ if gemma && block_count == 62 => {
                1.0 / ((embedding_length / head_count) as f64).sqrt()
            }
            _ => 1.0 / (key_length as f64).sqrt(),
        };
        let final_logit_softcap = if gemma {
            opt_f64("final_logit_softcapping")?.filter(|&c| c > 0.0)
        } else {
            None
        };

        // The output width is the embedding's row count (a tokenizer may list fewer tokens).
        let vocab_size = match g.tensor("token_embd.weight") {
            Some(t) if t.dims.len() == 2 => t.dims[1] as usize,
            Some(t) => {
                return Err(ArchError::Malformed(format!(
                    "tensor `token_embd.weight` has ggml dims {:?}, expected [{embedding_length}, vocab]",
                    t.dims
                )))
            }
            None => return Err(ArchError::Malformed("tensor `token_embd.weight` is missing from the GGUF file".into())),
        };
        if (base.vocab_size as usize) > vocab_size {
            return Err(ArchError::Malformed(format!(
                "the tokenizer has {} tokens but `token_embd.weight` only {vocab_size} rows",
                base.vocab_size
            )));
        }

        Ok(Self {
            arch,
            architecture: name.to_string(),
            name: g.get_str("general.name").ok().map(str::to_string),
            block_count,
            embedding_length,
            feed_forward_length: base.feed_forward_length as usize,
            head_count,
            head_count_kv,
            key_length,
            value_length: base.value_length as usize,
            rms_eps,
            rope_base_global,
            rope_base_local,
            rope_scale_global,
            rope_style: if arch == Arch::Llama {
                RopeStyle::Interleaved
            } else {
                RopeStyle::Neox
            },
            sliding_window,
            is_local,
            attn_scale,
            final_logit_softcap,
            embed_scale: if gemma {
                (embedding_length as f32).sqrt() as f64
            } else {
                1.0
            },
            activation: if gemma {
                Activation::GeluTanh
            } else {
                Activation::Silu
            },
            qk_norm: matches!(arch, Arch::Gemma3 | Arch::Qwen3),
            post_norms: gemma,
            context_length: Some(base.context_length as usize),
            vocab_size,
        })
    }
}

/// Gemma 3's local layers, as llama.cpp reads them: an explicit per-layer array, or a
/// period n (default 6) whose last layer is global (layer il is local when il % n < n - 1).
fn gemma3_local_layers(
    g: &GgufFile,
    pattern_key: &str,
    block_count: usize,
) -> Result<Vec<bool>, ArchError> {
    match g.metadata(pattern_key) {
        Some(Value::Array(a)) => {
            let flags: Vec<bool> = match a {
                Array::Bool(v) => v.clone(),
                Array::U8(v) => v.iter().map(|&x| x != 0).collect(),
                Array::I8(v) => v.iter().map(|&x| x != 0).collect(),
                Array::U32(v) => v.iter().map(|&x| x != 0).collect(),
                Array::I32(v) => v.iter().map(|&x| x != 0).collect(),
                _ => {
                    return Err(ArchError::Malformed(format!(
                        "{pattern_key} is an array of {:?}, expected booleans",
                        a.element_type()
                    )))
                }
            };
            if flags.len() < block_count {
                return Err(ArchError::Malformed(format!(
                    "{pattern_key} has {} entries for {block_count} layers",
                    flags.len()
                )));
            }
            Ok(flags[..block_count].to_vec())
        }
        other => {
            let n = match other {
                Some(v) => v.as_u64().ok_or_else(|| {
                    ArchError::Malformed(format!(
                        "{pattern_key} is {}, expected an integer",
                        v.describe()
                    ))
                })? as usize,
                None => 6,
            };
            Ok((0..block_count)
                .map(|il| n == 0 || il % n < n - 1)
                .collect())
        }
    }
}
