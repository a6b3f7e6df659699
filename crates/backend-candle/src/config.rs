//! Model hyper-parameters read from GGUF metadata.
//!
//! The fields every architecture has come from the engine's shared parser
//! ([`lx_engine::gguf::ModelConfig`]); the Gemma 3 specifics (local/global layer pattern,
//! local RoPE base, attention scale, soft-capping) are read here, in one function,
//! [`Gemma3Config::from_gguf`].

use lx_engine::backend::BackendError;
use lx_engine::gguf::{Array, GgufFile, Value};

/// Architectures this backend implements (the `general.architecture` values).
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["gemma3"];

/// Hyper-parameters of a Gemma 3 model, as llama.cpp reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct Gemma3Config {
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
    /// RoPE base of the global (full-attention) layers.
    pub rope_base_global: f64,
    /// RoPE base of the local (sliding-window) layers.
    pub rope_base_local: f64,
    /// Linear RoPE scaling factor of the global layers (1 when absent).
    pub rope_scale_global: f64,
    /// Sliding window of the local layers, in positions (a query sees itself and the
    /// `sliding_window - 1` positions before it); `None` when every layer is global.
    pub sliding_window: Option<usize>,
    /// Per layer: true for a local (sliding-window) layer.
    pub is_local: Vec<bool>,
    /// Multiplier applied to queries before `q·k` (Gemma: `query_pre_attn_scalar^-1/2`).
    pub attn_scale: f64,
    /// Final logit soft-capping (`None` when the model has none).
    pub final_logit_softcap: Option<f64>,
    /// Context length the model was trained for.
    pub context_length: Option<usize>,
    /// Vocabulary size, from the embedding tensor's shape.
    pub vocab_size: usize,
}

fn load_err(e: impl std::fmt::Display) -> BackendError {
    BackendError::Load(e.to_string())
}

/// Checks `general.architecture` against [`SUPPORTED_ARCHITECTURES`].
pub fn check_architecture(g: &GgufFile) -> Result<String, BackendError> {
    let arch = g.architecture().map_err(load_err)?;
    if !SUPPORTED_ARCHITECTURES.contains(&arch) {
        return Err(BackendError::Unsupported(format!(
            "architecture `{arch}` is not implemented by the candle backend (supported: {})",
            SUPPORTED_ARCHITECTURES.join(", ")
        )));
    }
    Ok(arch.to_string())
}

impl Gemma3Config {
    /// Reads the hyper-parameters from a parsed GGUF header.
    ///
    /// An architecture other than those in [`SUPPORTED_ARCHITECTURES`] gives
    /// `BackendError::Unsupported`; a missing or malformed key gives `BackendError::Load`
    /// naming the key.
    pub fn from_gguf(g: &GgufFile) -> Result<Self, BackendError> {
        let arch = check_architecture(g)?;
        let base = lx_engine::gguf::ModelConfig::from_gguf(g).map_err(load_err)?;
        let key = |k: &str| format!("{arch}.{k}");
        let opt_f64 = |k: &str| -> Result<Option<f64>, BackendError> {
            let full = key(k);
            match g.metadata(&full) {
                None => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                    BackendError::Load(format!(
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
            return Err(BackendError::Load(format!(
                "{} {head_count} is not a multiple of {} {head_count_kv}",
                key("attention.head_count"),
                key("attention.head_count_kv")
            )));
        }
        if !key_length.is_multiple_of(2) {
            return Err(BackendError::Load(format!(
                "{} {key_length} is odd",
                key("attention.key_length")
            )));
        }
        let rms_eps = base.layer_norm_rms_epsilon.map(f64::from).unwrap_or(1e-6);
        let rope_base_global = base.rope_freq_base.map(f64::from).unwrap_or(1_000_000.0);
        // llama.cpp: `{arch}.rope.freq_base_swa`, default 10000 for the local layers.
        let rope_base_local = match opt_f64("rope.freq_base_swa")? {
            Some(v) => v,
            None => opt_f64("rope.local.freq_base")?.unwrap_or(10_000.0),
        };
        let rope_scale_global = match &base.rope_scaling {
            None => 1.0,
            Some(s) if s.kind == "none" => 1.0,
            Some(s) if s.kind == "linear" => {
                s.factor.map(f64::from).filter(|f| *f > 0.0).unwrap_or(1.0)
            }
            Some(s) => {
                return Err(BackendError::Unsupported(format!(
                    "RoPE scaling `{}` is not implemented by the candle backend (only linear)",
                    s.kind
                )))
            }
        };

        let sliding_window = base.sliding_window.map(|w| w as usize).filter(|&w| w > 0);
        let is_local = match sliding_window {
            None => vec![false; block_count],
            // As llama.cpp: an explicit per-layer array, or a period n (default 6) whose
            // last layer is global: layer il is local when il % n < n - 1.
            Some(_) => match g.metadata(&key("attention.sliding_window_pattern")) {
                Some(Value::Array(a)) => {
                    let flags: Vec<bool> = match a {
                        Array::Bool(v) => v.clone(),
                        Array::U8(v) => v.iter().map(|&x| x != 0).collect(),
                        Array::I8(v) => v.iter().map(|&x| x != 0).collect(),
                        Array::U32(v) => v.iter().map(|&x| x != 0).collect(),
                        Array::I32(v) => v.iter().map(|&x| x != 0).collect(),
                        _ => {
                            return Err(BackendError::Load(format!(
                                "{} is an array of {:?}, expected booleans",
                                key("attention.sliding_window_pattern"),
                                a.element_type()
                            )))
                        }
                    };
                    if flags.len() < block_count {
                        return Err(BackendError::Load(format!(
                            "{} has {} entries for {block_count} layers",
                            key("attention.sliding_window_pattern"),
                            flags.len()
                        )));
                    }
                    flags[..block_count].to_vec()
                }
                other => {
                    let n = match other {
                        Some(v) => v.as_u64().ok_or_else(|| {
                            BackendError::Load(format!(
                                "{} is {}, expected an integer",
                                key("attention.sliding_window_pattern"),
                                v.describe()
                            ))
                        })? as usize,
                        None => 6,
                    };
                    (0..block_count)
                        .map(|il| n == 0 || il % n < n - 1)
                        .collect()
                }
            },
        };

        // llama.cpp (gemma3): 1/sqrt(head_dim), except Gemma 3 27B (62 layers), which uses
        // query_pre_attn_scalar = hidden / heads. An explicit key wins when a file has one.
        let attn_scale = match opt_f64("attention.query_pre_attn_scalar")? {
            Some(s) if s > 0.0 => 1.0 / s.sqrt(),
            _ if block_count == 62 => 1.0 / ((embedding_length / head_count) as f64).sqrt(),
            _ => 1.0 / (key_length as f64).sqrt(),
        };
        let final_logit_softcap = opt_f64("final_logit_softcapping")?.filter(|&c| c > 0.0);

        // The output width is the embedding's row count (a tokenizer may list fewer tokens).
        let vocab_size = match g.tensor("token_embd.weight") {
            Some(t) if t.dims.len() == 2 => t.dims[1] as usize,
            Some(t) => {
                return Err(BackendError::Load(format!(
                    "tensor `token_embd.weight` has ggml dims {:?}, expected [{embedding_length}, vocab]",
                    t.dims
                )))
            }
            None => return Err(BackendError::Load("tensor `token_embd.weight` is missing from the GGUF file".into())),
        };
        if (base.vocab_size as usize) > vocab_size {
            return Err(BackendError::Load(format!(
                "the tokenizer has {} tokens but `token_embd.weight` only {vocab_size} rows",
                base.vocab_size
            )));
        }

        Ok(Self {
            architecture: arch,
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
            sliding_window,
            is_local,
            attn_scale,
            final_logit_softcap,
            context_length: Some(base.context_length as usize),
            vocab_size,
        })
    }
}
