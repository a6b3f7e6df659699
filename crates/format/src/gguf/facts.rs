//! Summaries of a file shared by the whole workspace: [`ModelFacts`] (what a result file
//! records) and [`ModelConfig`] (what the candle and MLX backends build their graphs from).

use super::*;

/// llama.cpp's name for a `general.file_type` value (`LLAMA_FTYPE_*`).
pub fn file_type_name(file_type: u32) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        39 => "NVFP4",
        40 => "Q1_0",
        41 => "Q2_0",
        _ => return None,
    })
}

/// How a model's weights are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Quantization {
    /// `general.file_type` as stored, if present.
    pub file_type: Option<u32>,
    /// llama.cpp's name for it, e.g. `Q4_K_M`. When `general.file_type` is absent or unknown,
    /// the most common ggml type of the matrices followed by ` (guessed)`.
    pub name: String,
    /// Number of tensors of each ggml type, e.g. `{"F32": 163, "Q4_K": 50, ...}`.
    pub tensor_types: BTreeMap<String, u64>,
}

/// What a result file records about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ModelFacts {
    pub path: PathBuf,
    pub file_size: u64,
    pub gguf_version: u32,
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Sum of all tensors' elements.
    pub parameter_count: u64,
    pub tensor_count: u64,
    pub quantization: Quantization,
    pub context_length: Option<u64>,
    pub embedding_length: Option<u64>,
    pub block_count: Option<u64>,
    pub head_count: Option<u64>,
    pub head_count_kv: Option<u64>,
    pub vocab_size: Option<u64>,
    /// Set for a shape-only model ([`super::synth`]): what it mimics. Its timings stand for
    /// that model's; its text is noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<String>,
    /// Set for a draft model made from a model itself ([`super::draft`]): what it was made
    /// from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_of: Option<String>,
}

impl ModelFacts {
    /// What to say under a result made with this model, when there is anything to say.
    pub fn synthetic_note(&self) -> Option<String> {
        self.synthetic.as_ref().map(|of| format!("{} ({of})", super::synth::SYNTHETIC_NOTE))
    }

    /// Summarises a parsed file. Fails only if `general.architecture` is missing or not a string;
    /// other missing keys become `None`.
    pub fn from_gguf(g: &GgufFile) -> Result<ModelFacts, GgufError> {
        let arch = g.architecture()?.to_string();
        let arch_u64 = |suffix: &str| -> Option<u64> { g.get_u32_or_max(&format!("{arch}.{suffix}")).ok().map(u64::from) };
        let arch_u64_wide = |suffix: &str| -> Option<u64> {
            g.get_u64(&format!("{arch}.{suffix}")).ok().or_else(|| arch_u64(suffix))
        };

        let mut tensor_types: BTreeMap<String, u64> = BTreeMap::new();
        let mut matrix_types: BTreeMap<GgmlType, u64> = BTreeMap::new();
        for t in g.tensors() {
            *tensor_types.entry(t.ggml_type.name().to_string()).or_default() += 1;
            if t.dims.len() >= 2 {
                *matrix_types.entry(t.ggml_type).or_default() += t.n_elements();
            }
        }
        let file_type = g.get_u32("general.file_type").ok();
        let name = match file_type.and_then(|ft| file_type_name(ft & !1024)) {
            Some(n) if file_type.unwrap_or(0) & 1024 != 0 => format!("{n} (guessed)"),
            Some(n) => n.to_string(),
            None => match matrix_types.iter().max_by_key(|(_, n)| **n) {
                Some((t, _)) => format!("{t} (guessed)"),
                None => "unknown".to_string(),
            },
        };

        Ok(ModelFacts {
            path: g.path().to_path_buf(),
            file_size: g.file_size(),
            gguf_version: g.version(),
            name: g.get_str("general.name").ok().map(str::to_string),
            parameter_count: g.parameter_count(),
            tensor_count: g.tensors().len() as u64,
            quantization: Quantization { file_type, name, tensor_types },
            context_length: arch_u64_wide("context_length"),
            embedding_length: arch_u64_wide("embedding_length"),
            block_count: arch_u64_wide("block_count"),
            head_count: arch_u64("attention.head_count"),
            head_count_kv: arch_u64("attention.head_count_kv"),
            vocab_size: g.vocab_size(),
            synthetic: g.get_str(super::synth::SYNTHETIC_KEY).ok().map(str::to_string),
            draft_of: g.get_str(super::draft::DRAFT_KEY).ok().map(str::to_string),
            architecture: arch,
        })
    }

    /// Opens the file and summarises it.
    pub fn read(path: impl AsRef<Path>) -> Result<ModelFacts, GgufError> {
        ModelFacts::from_gguf(&GgufFile::open(path)?)
    }
}

/// RoPE context scaling, from `{arch}.rope.scaling.*`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// `none`, `linear`, `yarn`, `longrope`, ...
    pub kind: String,
    pub factor: Option<f32>,
    pub original_context_length: Option<u32>,
}

/// Transformer hyper-parameters from `{arch}.*` keys, shared by the candle and MLX backends.
///
/// Defaults follow llama.cpp: `head_count_kv` defaults to `head_count`, `key_length` and
/// `value_length` to `embedding_length / head_count`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub architecture: String,
    pub context_length: u32,
    pub embedding_length: u32,
    pub feed_forward_length: u32,
    pub block_count: u32,
    pub head_count: u32,
    pub head_count_kv: u32,
    /// Per-head size of keys (and queries).
    pub key_length: u32,
    /// Per-head size of values.
    pub value_length: u32,
    /// `attention.layer_norm_rms_epsilon` (RMSNorm models).
    pub layer_norm_rms_epsilon: Option<f32>,
    /// `attention.layer_norm_epsilon` (LayerNorm models).
    pub layer_norm_epsilon: Option<f32>,
    /// `rope.freq_base`, when present (llama.cpp's default is 10000).
    pub rope_freq_base: Option<f32>,
    /// `rope.dimension_count`, when present.
    pub rope_dimension_count: Option<u32>,
    /// `attention.sliding_window`, when present (Gemma 2/3, Mistral).
    pub sliding_window: Option<u32>,
    /// `rope.scaling.*`, when present.
    pub rope_scaling: Option<RopeScaling>,
    /// Number of tokens in the vocabulary.
    pub vocab_size: u32,
}

impl ModelConfig {
    /// Each layer's sliding window as llama.cpp lays them out, `None` for a layer that
    /// attends to everything: Gemma 3 has five local layers to each global one (every
    /// sixth is global), Gemma 2 alternates starting with a local one. Other architectures
    /// attend to everything in every layer, even with a window in their metadata (llama.cpp
    /// runs Mistral 7B v0.1's `llama` file with full attention).
    pub fn layer_windows(&self) -> Vec<Option<u32>> {
        let every = match self.architecture.as_str() {
            "gemma3" => 6,
            "gemma2" => 2,
            _ => 0,
        };
        (0..self.block_count)
            .map(|il| match self.sliding_window {
                Some(w) if w > 0 && every > 0 && (il + 1) % every != 0 => Some(w),
                _ => None,
            })
            .collect()
    }

    pub fn from_gguf(g: &GgufFile) -> Result<ModelConfig, GgufError> {
        let arch = g.architecture()?.to_string();
        let key = |s: &str| format!("{arch}.{s}");
        let req = |s: &str| g.get_u32(&key(s));
        let head_count = req("attention.head_count")?;
        let embedding_length = req("embedding_length")?;
        if head_count == 0 {
            return Err(GgufError::BadMetadata { path: g.path().to_path_buf(), reason: format!("{} is 0", key("attention.head_count")) });
        }
        let default_head = embedding_length / head_count;
        let rope_scaling = match g.get_str(&key("rope.scaling.type")).optional()? {
            None => None,
            Some(kind) => Some(RopeScaling {
                kind: kind.to_string(),
                factor: g.get_f32(&key("rope.scaling.factor")).optional()?,
                original_context_length: g.get_u32(&key("rope.scaling.original_context_length")).optional()?,
            }),
        };
        let vocab_size = match g.vocab_size() {
            Some(v) => u32::try_from(v).map_err(|_| GgufError::BadMetadata {
                path: g.path().to_path_buf(),
                reason: format!("vocabulary of {v} tokens is too large"),
            })?,
            None => return Err(g.missing("tokenizer.ggml.tokens")),
        };
        Ok(ModelConfig {
            context_length: req("context_length")?,
            embedding_length,
            feed_forward_length: g.get_u32_or_max(&key("feed_forward_length"))?,
            block_count: req("block_count")?,
            head_count,
            head_count_kv: req("attention.head_count_kv").optional()?.unwrap_or(head_count),
            key_length: req("attention.key_length").optional()?.unwrap_or(default_head),
            value_length: req("attention.value_length").optional()?.unwrap_or(default_head),
            layer_norm_rms_epsilon: g.get_f32(&key("attention.layer_norm_rms_epsilon")).optional()?,
            layer_norm_epsilon: g.get_f32(&key("attention.layer_norm_epsilon")).optional()?,
            rope_freq_base: g.get_f32(&key("rope.freq_base")).optional()?,
            rope_dimension_count: req("rope.dimension_count").optional()?,
            sliding_window: req("attention.sliding_window").optional()?,
            rope_scaling,
            vocab_size,
            architecture: arch,
        })
    }
}
