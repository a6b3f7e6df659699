//! The one tokenizer every backend shares: llama.cpp's tokenizers for SentencePiece-style
//! ("llama") and byte-level BPE ("gpt2") vocabularies, re-implemented from the vocabulary
//! embedded in a GGUF file.
//!
//! Prompt lengths must be exact and identical on every backend, so [`Tokenizer::encode`]
//! reproduces `llama_tokenize(text, add_special = true, parse_special = false)` of the llama.cpp
//! version we link (llama-cpp-sys-2 0.1.161, `src/llama-vocab.cpp`) id for id. The integration
//! tests `tests/integration/tokenizer.rs` (Gemma 3, SPM) and `tokenizer_bpe.rs` (Llama 3, Qwen2,
//! GPT-2 vocabularies) check that on a varied text of more than 10,000 tokens.
//!
//! Supported: `tokenizer.ggml.model = "llama"` (Gemma 3, Llama 2, Mistral 7B, ...) and `"gpt2"`
//! with `tokenizer.ggml.pre` one of llama.cpp's Llama 3 names (`llama-bpe`, `llama3`, ...), its
//! Qwen2 names (`qwen2`, ...; Qwen2, 2.5 and 3), its GPT-2 names (`gpt-2`, ...) or `default`
//! (also when the key is missing); see `pretok.rs` for the list.
//!
//! What llama.cpp does, and so what we do:
//! 1. **Token attributes.** Each token's GGUF `token_type` becomes an attribute (normal, control,
//!    user-defined, byte, unknown, unused). llama.cpp then patches some by text: tokens whose text
//!    is in its end-of-generation list (`<end_of_turn>`, `</s>`, `<|im_end|>`, ...) or its
//!    fill-in-the-middle lists gain the *control* attribute, and a few model-specific fixes apply.
//!    (Gemma 3 has `</s>` as a user-defined token, which this turns into a control token.)
//! 2. **Special-token partition.** With `parse_special = false`, user-defined tokens that are not
//!    control or unknown (Gemma: runs of newlines, spaces and tabs, some HTML tags; Qwen2:
//!    `[PAD151646]`...) are cut out of the text first, longest token first; each occurrence
//!    becomes that token and splits the text into fragments. With `parse_special = true`, control
//!    tokens (`<|im_start|>`, `<|eot_id|>`, ...) are cut out too.
//! 3. **Each fragment** goes through the vocabulary's model:
//!    - SPM (`spm.rs`): optionally prefix a space (`tokenizer.ggml.add_space_prefix`, default true,
//!      false for Gemma) when the fragment starts the text or follows a special token; replace
//!      every ASCII space with U+2581 `▁`; merge UTF-8 characters pairwise by the highest score
//!      of the merged piece (ties: the leftmost); emit each symbol's token, or its bytes as
//!      `<0xNN>` tokens.
//!    - BPE (`bpe.rs`): cut into words by the pre-tokenizer (`pretok.rs`), write each word's bytes
//!      in GPT-2's byte alphabet, merge by the rank in `tokenizer.ggml.merges` (ties: the
//!      leftmost), emit each symbol's token. Llama 3 emits a word that is itself a token whole.
//! 4. **BOS** first when `tokenizer.ggml.add_bos_token` (default: true for SPM and Llama 3,
//!    false for other BPE vocabularies), EOS last when `tokenizer.ggml.add_eos_token` (default
//!    false).
//!
//! Where llama.cpp's own result depends on unspecified C++ container order, we pick a fixed
//! answer. Equal-length special tokens (an unstable sort): the lowest token id first; this only
//! matters where two such tokens can overlap in text. The end-of-turn or a fill-in-the-middle
//! token when the GGUF names none and several candidate texts are in the vocabulary (the first
//! found in a hash map): the first in llama.cpp's list of texts, which is what it picks on the
//! vocabularies we test (Llama 3 has `<|eot_id|>` and `<|end_of_text|>`: EOT is `<|eot_id|>`;
//! Qwen2 has `<|im_end|>` and `<|endoftext|>`: `<|im_end|>`). Gemma 3 has one candidate. SmolLM2
//! has the same two as Qwen2 and there llama.cpp (built with libstdc++) picks `<|endoftext|>`:
//! we keep `<|im_end|>`, the end of a turn in its chat template; both end generation.
//!
//! [`Tokenizer::decode`] is the inverse for text we encoded: normal pieces (`▁` turned back into
//! spaces for SPM, the byte alphabet turned back into bytes for BPE), byte tokens assembled into
//! UTF-8, user-defined tokens as their text, and control tokens (BOS, EOS, `<end_of_turn>`, ...)
//! skipped. Unlike `llama_detokenize`, it never "cleans up" spaces before punctuation (which
//! llama.cpp does for GPT-2 and Llama 3 vocabularies), so decoding gives back the text exactly.

mod bpe;
mod pretok;
mod spm;
mod stream;
mod unicode;
mod unicode_tables;

pub use stream::PieceDecoder;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use self::bpe::Bpe;
use self::pretok::PreConfig;
use self::spm::Spm;
/// A token's id in the model's vocabulary: what tokenizers produce and models consume.
pub type TokenId = u32;
use crate::gguf::{Array, GgufError, GgufFile, OptionalKey, Value};

/// Errors building a tokenizer from a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(
        "{}: tokenizer type {model:?} is not supported (supported: \"llama\", SentencePiece-style, and \"gpt2\", byte-level BPE)",
        path.display()
    )]
    Unsupported { path: PathBuf, model: String },
    #[error(
        "{}: BPE pre-tokenizer {pre:?} (tokenizer.ggml.pre) is not supported (supported: {})",
        path.display(),
        pretok::supported_names()
    )]
    UnsupportedPreTokenizer { path: PathBuf, pre: String },
    #[error("{}: invalid tokenizer metadata: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// llama.cpp's token attribute bits (`llama_token_attr`).
mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// GGUF `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
fn attr_from_token_type(t: i32) -> u16 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => 0, // undefined
    }
}

/// Token texts llama.cpp treats as end of generation (and marks as control tokens).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts llama.cpp picks the end-of-turn token from when the GGUF does not name one.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Fill-in-the-middle marker texts: (metadata key suffix, texts, is end of generation).
const FIM_TEXTS: &[(&str, &[&str], bool)] = &[
    (
        "fim_pre_token_id",
        &["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"],
        false,
    ),
    (
        "fim_suf_token_id",
        &["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"],
        false,
    ),
    (
        "fim_mid_token_id",
        &["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"],
        false,
    ),
    ("fim_pad_token_id", &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"], true),
    ("fim_rep_token_id", &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"], true),
    ("fim_sep_token_id", &["<|file_sep|>"], true),
];

/// A tokenizer equivalent to llama.cpp's for the same GGUF vocabulary.
#[derive(Clone)]
pub struct Tokenizer {
    /// Vocabulary text of each token (empty texts replaced by `[EMPTY_i]`, as llama.cpp does).
    texts: Vec<String>,
    scores: Vec<f32>,
    /// Attributes as llama.cpp ends up with them (after its text-based patches): drive encoding.
    attrs: Vec<u16>,
    /// Decoded bytes of each token, from its GGUF token type alone (empty for control, unknown,
    /// unused tokens).
    pieces: Vec<Box<[u8]>>,
    to_id: HashMap<String, TokenId>,
    /// Tokens cut out of the text before the model runs when `parse_special` is false
    /// (user-defined, neither control nor unknown), longest first.
    partition_plain: Vec<TokenId>,
    /// Same when `parse_special` is true (adds control and unknown tokens).
    partition_all: Vec<TokenId>,
    bos: Option<TokenId>,
    eos: Option<TokenId>,
    eot: Option<TokenId>,
    unk: Option<TokenId>,
    eog: Vec<TokenId>,
    add_bos: bool,
    add_eos: bool,
    model: Model,
}

/// How text between special tokens becomes tokens.
#[derive(Clone)]
enum Model {
    Spm(Spm),
    Bpe(Bpe),
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Tokenizer");
        match &self.model {
            Model::Spm(s) => d.field("model", &"spm").field("add_space_prefix", &s.add_space_prefix),
            Model::Bpe(b) => d
                .field("model", &"bpe")
                .field("pre", &b.pre)
                .field("ignore_merges", &b.ignore_merges)
                .field("merges", &b.n_merges()),
        };
        d.field("vocab_size", &self.texts.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("eot", &self.eot)
            .field("eog", &self.eog)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("special_tokens", &self.partition_plain.len())
            .finish()
    }
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(g: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let path = g.path().to_path_buf();
        let invalid = |reason: String| TokenizerError::Invalid { path: path.clone(), reason };

        let model = g.get_str("tokenizer.ggml.model")?;
        let bpe_cfg = match model {
            "llama" => None,
            "gpt2" => {
                let pre = g.get_str("tokenizer.ggml.pre").optional()?;
                let cfg = PreConfig::from_name(pre).ok_or_else(|| TokenizerError::UnsupportedPreTokenizer {
                    path: path.clone(),
                    pre: pre.unwrap_or_default().to_string(),
                })?;
                Some(cfg)
            }
            _ => return Err(TokenizerError::Unsupported { path: path.clone(), model: model.to_string() }),
        };

        let mut texts: Vec<String> = g.get_str_array("tokenizer.ggml.tokens")?.to_vec();
        let n = texts.len();
        if n == 0 || n > i32::MAX as usize {
            return Err(invalid(format!("vocabulary has {n} tokens")));
        }
        let scores: Vec<f32> = match g.metadata("tokenizer.ggml.scores") {
            None => vec![0.0; n],
            Some(Value::Array(Array::F32(s))) if s.len() >= n => s[..n].to_vec(),
            Some(Value::Array(Array::I32(s))) if s.len() >= n => s[..n].iter().map(|&v| v as f32).collect(),
            Some(v) => {
                return Err(invalid(format!(
                    "tokenizer.ggml.scores is {}, expected {n} f32 or i32 values",
                    v.describe()
                )))
            }
        };
        let mut attrs: Vec<u16> = match g.metadata("tokenizer.ggml.token_type") {
            None => vec![attr::NORMAL; n],
            Some(Value::Array(Array::I32(t))) if t.len() >= n => t[..n].iter().map(|&t| attr_from_token_type(t)).collect(),
            Some(v) => {
                return Err(invalid(format!("tokenizer.ggml.token_type is {}, expected {n} i32 values", v.describe())))
            }
        };
        let gguf_attrs = attrs.clone();

        let mut to_id: HashMap<String, TokenId> = HashMap::with_capacity(n);
        for (i, t) in texts.iter_mut().enumerate() {
            if t.is_empty() {
                *t = format!("[EMPTY_{i}]");
            }
            if to_id.insert(t.clone(), i as TokenId).is_some() {
                return Err(invalid(format!("token text {t:?} appears twice (second time as id {i})")));
            }
        }

        // Special ids: llama.cpp's defaults per vocabulary type, then metadata (ignored when out
        // of range, as llama.cpp does).
        let in_range = |id: u32| (id as usize) < n;
        let meta_id = |key: &str| -> Result<Option<u32>, TokenizerError> {
            Ok(g.get_u32(&format!("tokenizer.ggml.{key}")).optional()?.filter(|&id| in_range(id)))
        };
        let default = |id: u32| Some(id).filter(|&id| in_range(id));
        let (bos_default, eos_default, unk_default, add_bos_default) = match bpe_cfg {
            None => (default(1), default(2), default(0), true),
            Some(cfg) => (default(11), default(11), None, cfg.add_bos_default),
        };
        let bos = meta_id("bos_token_id")?.or(bos_default);
        let eos = meta_id("eos_token_id")?.or(eos_default);
        let unk = meta_id("unknown_token_id")?.or(unk_default);
        let mut eot = meta_id("eot_token_id")?;
        let mut eom = meta_id("eom_token_id")?;
        let add_bos = g.get_bool("tokenizer.ggml.add_bos_token").optional()?.unwrap_or(add_bos_default);
        let add_eos = g.get_bool("tokenizer.ggml.add_eos_token").optional()?.unwrap_or(false);

        // llama.cpp's text-based attribute patches (llama_vocab::impl::load).
        let find = |text: &str| to_id.get(text).copied();
        // the first text of the list that is in the vocabulary (see the module docs)
        let first_of = |list: &[&str]| list.iter().find_map(|t| find(t));
        if eot.is_none() {
            eot = first_of(EOT_TEXTS);
            if let Some(id) = eot {
                attrs[id as usize] |= attr::CONTROL;
            }
        }
        if eom.is_none() {
            eom = find("<|eom_id|>");
            if let Some(id) = eom {
                attrs[id as usize] |= attr::CONTROL;
            }
        }
        let mut eog: Vec<TokenId> = Vec::new();
        for (key, list, is_eog) in FIM_TEXTS {
            let mut id = meta_id(key)?;
            if id.is_none() {
                id = first_of(list);
                if let Some(id) = id {
                    attrs[id as usize] |= attr::CONTROL;
                }
            }
            if let (Some(id), true) = (id, is_eog) {
                eog.push(id);
            }
        }
        for text in EOG_TEXTS {
            if let Some(id) = find(text) {
                eog.push(id);
                attrs[id as usize] |= attr::CONTROL;
            }
        }
        for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = find(text) {
                attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        eog.extend([eos, eot, eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        let eog_has = |eog: &[TokenId], text: &str| eog.iter().any(|&id| texts[id as usize] == text);
        if let Some(end) = find("<|end|>").filter(|id| eog.contains(id)) {
            if (eog_has(&eog, "<|return|>") && eog_has(&eog, "<|call|>"))
                || (eog_has(&eog, "<|calls|>") && eog_has(&eog, "<|flush|>"))
            {
                eog.retain(|&id| id != end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        if let Some(s) = find("</s>").filter(|id| eog.contains(id)) {
            if eog_has(&eog, "<|tool_response>") || eog_has(&eog, "<|plamo:eos|>") {
                eog.retain(|&id| id != s);
                attrs[s as usize] = attr::NORMAL;
            }
        }

        // Special-token cache: control, user-defined and unknown tokens, longest first.
        let mut cache: Vec<TokenId> = (0..n as TokenId)
            .filter(|&id| attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0)
            .collect();
        cache.sort_by(|&a, &b| texts[b as usize].len().cmp(&texts[a as usize].len()).then(a.cmp(&b)));

        // Model-specific strip flags (of those llama.cpp sets, only Phi-3's concern the
        // vocabularies we support).
        let name = g.get_str("general.name").unwrap_or("").to_lowercase();
        if name.contains("phi-3") || name.contains("phi3") {
            for &id in &cache {
                attrs[id as usize] |= attr::RSTRIP;
            }
            if let Some(id) = find("</s>") {
                attrs[id as usize] |= attr::RSTRIP;
            }
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                if let Some(id) = find(t) {
                    attrs[id as usize] &= !attr::RSTRIP;
                }
            }
        }

        let partition_all = cache.clone();
        let partition_plain: Vec<TokenId> =
            cache.into_iter().filter(|&id| attrs[id as usize] & (attr::CONTROL | attr::UNKNOWN) == 0).collect();

        let model = match bpe_cfg {
            None => {
                // Byte fallback tokens: <0xNN>, else the single byte as text; unknown if neither.
                let mut byte_ids = Box::new([0 as TokenId; 256]);
                for (b, slot) in byte_ids.iter_mut().enumerate() {
                    let hex = format!("<0x{b:02X}>");
                    let single = (b < 0x80).then(|| (b as u8 as char).to_string());
                    *slot = find(&hex)
                        .or_else(|| single.and_then(|s| find(&s)))
                        .or(unk)
                        .ok_or_else(|| invalid(format!("no token for byte 0x{b:02X} and no unknown token")))?;
                }
                let add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix").optional()?.unwrap_or(true);
                Model::Spm(Spm { byte_ids, add_space_prefix })
            }
            Some(cfg) => {
                let merges = match g.metadata("tokenizer.ggml.merges") {
                    Some(Value::Array(Array::String(m))) => m,
                    Some(v) => return Err(invalid(format!("tokenizer.ggml.merges is {}, expected strings", v.describe()))),
                    None => return Err(invalid("a \"gpt2\" vocabulary needs tokenizer.ggml.merges".to_string())),
                };
                Model::Bpe(Bpe::new(cfg, merges))
            }
        };

        let pieces = (0..n)
            .map(|i| {
                let a = gguf_attrs[i];
                let t = &texts[i];
                if a & attr::USER_DEFINED != 0 {
                    t.as_bytes().into()
                } else if a & attr::NORMAL != 0 {
                    match model {
                        Model::Spm(_) => t.replace('\u{2581}', " ").into_bytes().into_boxed_slice(),
                        Model::Bpe(_) => bpe::decode_token_text(t).into_boxed_slice(),
                    }
                } else if a & attr::BYTE != 0 {
                    match parse_byte_token(t) {
                        Some(b) => Box::from([b]),
                        None => t.as_bytes().into(),
                    }
                } else {
                    Box::from([])
                }
            })
            .collect();

        Ok(Tokenizer {
            texts,
            scores,
            attrs,
            pieces,
            to_id,
            partition_plain,
            partition_all,
            bos,
            eos,
            eot,
            unk,
            eog,
            add_bos,
            add_eos,
            model,
        })
    }

    /// Opens a GGUF file and builds its tokenizer.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_gguf(&GgufFile::open(path)?)
    }

    /// Tokenizes like `llama_tokenize(text, add_special = true, parse_special = false)`:
    /// BOS first (when the model adds one), special-looking text treated as plain text except
    /// for user-defined tokens.
    pub fn encode(&self, text: &str) -> Vec<TokenId> {
        self.encode_with(text, true, false)
    }

    /// Tokenizes like `llama_tokenize(text, add_special, parse_special)`.
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            if let Some(bos) = self.bos {
                out.push(bos);
            }
        }
        let specials = if parse_special { &self.partition_all } else { &self.partition_plain };
        let fragments = if text.is_empty() { Vec::new() } else { self.partition(text, specials) };
        let mut after_special = true;
        for frag in fragments {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(a, b) => {
                    match &self.model {
                        Model::Spm(s) => s.encode_fragment(&self.to_id, &self.scores, &text[a..b], after_special, &mut out),
                        Model::Bpe(m) => m.encode_fragment(&self.to_id, &text[a..b], &mut out),
                    }
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            if let Some(eos) = self.eos {
                out.push(eos);
            }
        }
        out
    }

    /// Cuts special tokens out of the text, longest first (llama.cpp's `tokenizer_st_partition`).
    fn partition(&self, text: &str, specials: &[TokenId]) -> Vec<Fragment> {
        let bytes = text.as_bytes();
        let mut frags = vec![Fragment::Text(0, text.len())];
        let mut next = Vec::new();
        for &id in specials {
            let needle = self.texts[id as usize].as_str();
            let a = self.attrs[id as usize];
            // Quick reject: most special tokens never occur.
            if !text.contains(needle) {
                continue;
            }
            next.clear();
            for &frag in &frags {
                let Fragment::Text(mut start, end) = frag else {
                    next.push(frag);
                    continue;
                };
                while let Some(rel) = text[start..end].find(needle) {
                    let m = start + rel;
                    let mut left_end = m;
                    if a & attr::LSTRIP != 0 {
                        while left_end > start && is_c_space(bytes[left_end - 1]) {
                            left_end -= 1;
                        }
                    }
                    if left_end > start {
                        next.push(Fragment::Text(start, left_end));
                    }
                    next.push(Fragment::Token(id));
                    start = m + needle.len();
                    if a & attr::RSTRIP != 0 {
                        while start < end && is_c_space(bytes[start]) {
                            start += 1;
                        }
                    }
                }
                if start < end {
                    next.push(Fragment::Text(start, end));
                }
            }
            std::mem::swap(&mut frags, &mut next);
        }
        frags
    }

    /// Text for ids: the inverse of [`Tokenizer::encode`] for text it encoded. Normal pieces
    /// (SPM: `▁` as space; BPE: GPT-2's byte alphabet as bytes), byte tokens assembled into UTF-8
    /// (invalid sequences become U+FFFD), user-defined tokens as their text, control / unknown /
    /// unused tokens skipped. With `add_space_prefix` (SPM), the space the encoder added at the
    /// start of each text fragment is removed again.
    pub fn decode(&self, ids: &[TokenId]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// Like [`Tokenizer::decode`], but the raw bytes (for streaming, where a character's bytes
    /// may be split across tokens).
    pub fn decode_bytes(&self, ids: &[TokenId]) -> Vec<u8> {
        let strip_prefix = self.add_space_prefix();
        let mut out = Vec::new();
        let mut fragment_start = true;
        for &id in ids {
            let Some(piece) = self.pieces.get(id as usize) else { continue };
            let a = self.attrs[id as usize];
            if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
                out.extend_from_slice(piece);
                fragment_start = true;
                continue;
            }
            let piece: &[u8] = piece;
            if strip_prefix && fragment_start && piece.first() == Some(&b' ') {
                out.extend_from_slice(&piece[1..]);
            } else {
                out.extend_from_slice(piece);
            }
            fragment_start = false;
        }
        out
    }

    /// One token's decoded text (lossy for a lone byte token; empty for control tokens).
    pub fn token_to_piece(&self, id: TokenId) -> String {
        String::from_utf8_lossy(self.token_bytes(id)).into_owned()
    }

    /// One token's decoded bytes (empty for control, unknown and unused tokens and unknown ids).
    pub fn token_bytes(&self, id: TokenId) -> &[u8] {
        self.pieces.get(id as usize).map(|p| &p[..]).unwrap_or(&[])
    }

    /// The vocabulary's text for a token, e.g. `▁village`, `<0x0A>`, `<bos>`, `Ġworld`.
    pub fn token_text(&self, id: TokenId) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The id whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.to_id.get(text).copied()
    }

    /// The token's score (SentencePiece log-probability; BPE vocabularies usually have none: 0).
    pub fn score(&self, id: TokenId) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// True for control tokens (BOS, EOS, `<end_of_turn>`, ...) as llama.cpp sees them.
    pub fn is_control(&self, id: TokenId) -> bool {
        self.attrs.get(id as usize).is_some_and(|a| a & attr::CONTROL != 0)
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<TokenId> {
        self.bos
    }

    /// Whether [`Tokenizer::encode`] puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// The end-of-sequence token named by the GGUF.
    pub fn eos(&self) -> Option<TokenId> {
        self.eos
    }

    /// The end-of-turn token (Gemma: `<end_of_turn>`, Llama 3: `<|eot_id|>`), if any.
    pub fn eot(&self) -> Option<TokenId> {
        self.eot
    }

    /// The unknown token, if any.
    pub fn unk(&self) -> Option<TokenId> {
        self.unk
    }

    /// Every token that ends generation, as llama.cpp's `llama_vocab_is_eog` decides: EOS, EOT,
    /// and tokens with end-of-generation text. Gemma 3: `<eos>` 1, `<end_of_turn>` 106, `</s>` 212.
    /// Sorted ascending.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.eog
    }

    /// Whether generation should stop at this token.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.texts.len()
    }

    /// Whether a space is put before text at the start (and after special tokens): SPM
    /// vocabularies by default (not Gemma), never byte-level BPE ones.
    pub fn add_space_prefix(&self) -> bool {
        match &self.model {
            Model::Spm(s) => s.add_space_prefix,
            Model::Bpe(_) => false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Fragment {
    /// Byte range of the input text.
    Text(usize, usize),
    Token(TokenId),
}

/// C `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `<0xNN>` → NN.
fn parse_byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
