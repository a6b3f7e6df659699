//! The one tokenizer every backend shares: llama.cpp's SentencePiece-style ("llama" / SPM)
//! tokenizer, re-implemented from the vocabulary embedded in a GGUF file.
//!
//! Prompt lengths must be exact and identical on every backend, so [`Tokenizer::encode`]
//! reproduces `llama_tokenize(text, add_special = true, parse_special = false)` of the llama.cpp
//! version we link (llama-cpp-sys-2 0.1.161, `src/llama-vocab.cpp`) id for id. The integration
//! test `tests/integration/tokenizer.rs` checks that on a varied text of more than 10,000 tokens.
//!
//! What llama.cpp does, and so what we do:
//! 1. **Token attributes.** Each token's GGUF `token_type` becomes an attribute (normal, control,
//!    user-defined, byte, unknown, unused). llama.cpp then patches some by text: tokens whose text
//!    is in its end-of-generation list (`<end_of_turn>`, `</s>`, `<|im_end|>`, ...) or its
//!    fill-in-the-middle lists gain the *control* attribute, and a few model-specific fixes apply.
//!    (Gemma 3 has `</s>` as a user-defined token, which this turns into a control token.)
//! 2. **Special-token partition.** With `parse_special = false`, user-defined tokens that are not
//!    control or unknown (Gemma: runs of newlines, spaces and tabs, some HTML tags) are cut out of
//!    the text first, longest token first; each occurrence becomes that token and splits the text
//!    into fragments.
//! 3. **SPM on each fragment.** Optionally prefix a space (`tokenizer.ggml.add_space_prefix`,
//!    default true, false for Gemma) when the fragment starts the text or follows a special token;
//!    replace every ASCII space with U+2581 `▁`; split into UTF-8 characters; repeatedly merge the
//!    adjacent pair whose concatenation is a vocabulary token with the highest score (ties: the
//!    leftmost); finally emit each symbol's token, or its bytes as `<0xNN>` tokens when the
//!    symbol is not in the vocabulary.
//! 4. **BOS** first when `tokenizer.ggml.add_bos_token` (default true), EOS last when
//!    `tokenizer.ggml.add_eos_token` (default false).
//!
//! Where llama.cpp's own result depends on unspecified C++ container order (the order of
//! equal-length special tokens in an unstable sort, the first of several fill-in-the-middle
//! tokens found in a hash map), we take the lowest token id. This only matters for vocabularies
//! where two equal-length user-defined tokens can overlap in text, or that hold several
//! alternative FIM markers; Gemma 3 has neither.
//!
//! [`Tokenizer::decode`] is the inverse for text we encoded: normal pieces with `▁` turned back
//! into spaces, byte tokens assembled into UTF-8, user-defined tokens as their text, and control
//! tokens (BOS, EOS, `<end_of_turn>`, ...) skipped.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::backend::TokenId;
use crate::gguf::{Array, GgufError, GgufFile, OptionalKey, Value};

/// Errors building a tokenizer from a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(
        "{}: tokenizer type {model:?} is not supported (only \"llama\", SentencePiece-style vocabularies are)",
        path.display()
    )]
    Unsupported { path: PathBuf, model: String },
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

/// A SentencePiece-style tokenizer equivalent to llama.cpp's for the same GGUF vocabulary.
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
    byte_ids: [TokenId; 256],
    /// Tokens cut out of the text before SPM when `parse_special` is false (user-defined,
    /// neither control nor unknown), longest first.
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
    add_space_prefix: bool,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.texts.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("eot", &self.eot)
            .field("eog", &self.eog)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("add_space_prefix", &self.add_space_prefix)
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
        if model != "llama" {
            return Err(TokenizerError::Unsupported { path: path.clone(), model: model.to_string() });
        }

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

        // Special ids: SPM defaults, then metadata (ignored when out of range, as llama.cpp does).
        let in_range = |id: u32| (id as usize) < n;
        let meta_id = |key: &str| -> Result<Option<u32>, TokenizerError> {
            Ok(g.get_u32(&format!("tokenizer.ggml.{key}")).optional()?.filter(|&id| in_range(id)))
        };
        let default = |id: u32| Some(id).filter(|&id| in_range(id));
        let bos = meta_id("bos_token_id")?.or(default(1));
        let eos = meta_id("eos_token_id")?.or(default(2));
        let unk = meta_id("unknown_token_id")?.or(default(0));
        let mut eot = meta_id("eot_token_id")?;
        let mut eom = meta_id("eom_token_id")?;
        let add_bos = g.get_bool("tokenizer.ggml.add_bos_token").optional()?.unwrap_or(true);
        let add_eos = g.get_bool("tokenizer.ggml.add_eos_token").optional()?.unwrap_or(false);
        let add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix").optional()?.unwrap_or(true);

        // llama.cpp's text-based attribute patches (llama_vocab::impl::load).
        let find = |text: &str| to_id.get(text).copied();
        let first_of = |list: &[&str]| list.iter().filter_map(|t| find(t)).min();
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

        // Model-specific strip flags (of those llama.cpp sets, only Phi-3's concern SPM vocabularies).
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

        // Byte fallback tokens: <0xNN>, else the single byte as text; the unknown token if neither.
        let mut byte_ids = [0 as TokenId; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            let hex = format!("<0x{b:02X}>");
            let single = (b < 0x80).then(|| (b as u8 as char).to_string());
            *slot = find(&hex)
                .or_else(|| single.and_then(|s| find(&s)))
                .or(unk)
                .ok_or_else(|| invalid(format!("no token for byte 0x{b:02X} and no unknown token")))?;
        }

        let pieces = (0..n)
            .map(|i| {
                let a = gguf_attrs[i];
                let t = &texts[i];
                if a & attr::USER_DEFINED != 0 {
                    t.as_bytes().into()
                } else if a & attr::NORMAL != 0 {
                    t.replace('\u{2581}', " ").into_bytes().into_boxed_slice()
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
            byte_ids,
            partition_plain,
            partition_all,
            bos,
            eos,
            eot,
            unk,
            eog,
            add_bos,
            add_eos,
            add_space_prefix,
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
        let mut prev_special = true;
        let mut buf = String::new();
        for frag in fragments {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(a, b) => {
                    buf.clear();
                    if self.add_space_prefix && prev_special {
                        buf.push(' ');
                    }
                    buf.push_str(&text[a..b]);
                    let escaped = buf.replace(' ', "\u{2581}");
                    self.spm(&escaped, &mut out);
                    prev_special = false;
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

    /// SentencePiece BPE on one escaped fragment (llama.cpp's `llm_tokenizer_spm_session`).
    fn spm(&self, text: &str, out: &mut Vec<TokenId>) {
        let bytes = text.as_bytes();
        let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
        let mut offs = 0usize;
        while offs < bytes.len() {
            let len = utf8_len(bytes[offs]).min(bytes.len() - offs);
            let idx = syms.len() as i32;
            syms.push(Symbol {
                start: offs as u32,
                len: len as u32,
                prev: idx - 1,
                next: if offs + len == bytes.len() { -1 } else { idx + 1 },
            });
            offs += len;
        }

        let mut queue = std::collections::BinaryHeap::with_capacity(syms.len());
        let try_add = |syms: &[Symbol], queue: &mut std::collections::BinaryHeap<Bigram>, left: i32, right: i32| {
            if left < 0 || right < 0 {
                return;
            }
            let (l, r) = (&syms[left as usize], &syms[right as usize]);
            let start = l.start as usize;
            let size = (l.len + r.len) as usize;
            let Some(s) = text.get(start..start + size) else { return };
            if let Some(&id) = self.to_id.get(s) {
                queue.push(Bigram { score: self.scores[id as usize], left, right, size: size as u32 });
            }
        };
        for i in 1..syms.len() as i32 {
            try_add(&syms, &mut queue, i - 1, i);
        }
        while let Some(b) = queue.pop() {
            let (li, ri) = (b.left as usize, b.right as usize);
            let (ln, rn) = (syms[li].len, syms[ri].len);
            if ln == 0 || rn == 0 || ln + rn != b.size {
                continue; // stale: one side was merged since
            }
            syms[li].len = ln + rn;
            syms[ri].len = 0;
            let rnext = syms[ri].next;
            syms[li].next = rnext;
            if rnext >= 0 {
                syms[rnext as usize].prev = b.left;
            }
            let lprev = syms[li].prev;
            try_add(&syms, &mut queue, lprev, b.left);
            try_add(&syms, &mut queue, b.left, rnext);
        }

        let mut i = if syms.is_empty() { -1 } else { 0 };
        while i != -1 {
            let s = &syms[i as usize];
            let piece = &bytes[s.start as usize..(s.start + s.len) as usize];
            match std::str::from_utf8(piece).ok().and_then(|p| self.to_id.get(p)) {
                Some(&id) => out.push(id),
                None => out.extend(piece.iter().map(|&b| self.byte_ids[b as usize])),
            }
            i = s.next;
        }
    }

    /// Text for ids: the inverse of [`Tokenizer::encode`] for text it encoded. Normal pieces
    /// with `▁` as space, byte tokens assembled into UTF-8 (invalid sequences become U+FFFD),
    /// user-defined tokens as their text, control / unknown / unused tokens skipped. With
    /// `add_space_prefix`, the space the encoder added at the start of each text fragment is
    /// removed again.
    pub fn decode(&self, ids: &[TokenId]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// Like [`Tokenizer::decode`], but the raw bytes (for streaming, where a character's bytes
    /// may be split across tokens).
    pub fn decode_bytes(&self, ids: &[TokenId]) -> Vec<u8> {
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
            if self.add_space_prefix && fragment_start && piece.first() == Some(&b' ') {
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

    /// The vocabulary's text for a token, e.g. `▁village`, `<0x0A>`, `<bos>`.
    pub fn token_text(&self, id: TokenId) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The id whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.to_id.get(text).copied()
    }

    /// The token's score (SentencePiece log-probability).
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

    /// The end-of-turn token (Gemma: `<end_of_turn>`), if any.
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

    /// Whether a space is put before text at the start (and after special tokens).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }
}

#[derive(Debug, Clone, Copy)]
enum Fragment {
    /// Byte range of the input text.
    Text(usize, usize),
    Token(TokenId),
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

/// A candidate merge; the heap pops the highest score first, then the leftmost.
#[derive(Debug, Clone, Copy)]
struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // As C++ `<` on floats: equal values (and -0.0 / 0.0) tie, then the smaller left wins.
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

/// Length of a UTF-8 sequence from its first byte (llama.cpp's `unicode_len_utf8`).
fn utf8_len(b: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(b >> 4) as usize]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{default_model_path, GgufWriter};

    /// A toy SPM vocabulary: control 0-2, bytes, some pieces with scores, user-defined tokens.
    fn toy(extra: impl FnOnce(GgufWriter) -> GgufWriter) -> (tempfile::TempDir, Tokenizer) {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        let mut types = vec![2, 3, 3];
        let mut scores = vec![0.0f32, 0.0, 0.0];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        let pieces: &[(&str, f32)] = &[
            ("▁", -1.0),
            ("a", -2.0),
            ("b", -2.0),
            ("c", -2.0),
            ("h", -3.0),
            ("e", -3.0),
            ("l", -3.0),
            ("o", -3.0),
            ("ab", -1.5),
            ("bc", -1.2),
            ("abc", -1.1),
            ("▁a", -1.3),
            ("he", -2.5),
            ("ll", -2.5),
            ("hell", -2.0),
            ("hello", -0.5),
            ("▁hello", -0.4),
            ("é", -4.0),
        ];
        for (p, s) in pieces {
            tokens.push(p.to_string());
            types.push(1);
            scores.push(*s);
        }
        for u in ["\n\n", "  ", "<br>", "<end_of_turn>"] {
            tokens.push(u.to_string());
            types.push(4);
            scores.push(0.0);
        }
        let w = GgufWriter::new()
            .kv("general.architecture", "llama")
            .kv("tokenizer.ggml.model", "llama")
            .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
            .kv("tokenizer.ggml.scores", scores)
            .kv("tokenizer.ggml.token_type", types)
            .kv("tokenizer.ggml.bos_token_id", 1u32)
            .kv("tokenizer.ggml.eos_token_id", 2u32);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("toy.gguf");
        extra(w).write(&p).unwrap();
        let t = Tokenizer::from_path(&p).unwrap();
        (dir, t)
    }

    fn texts(t: &Tokenizer, ids: &[TokenId]) -> Vec<String> {
        ids.iter().map(|&id| t.token_text(id).unwrap().to_string()).collect()
    }

    #[test]
    fn merges_by_score_then_leftmost() {
        let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
        // "abc": bc (-1.2) beats ab (-1.5); then a+bc = "abc" is a token.
        assert_eq!(texts(&t, &t.encode("abc")), ["<s>", "abc"]);
        // "hello" merges through he/ll/hell to hello.
        assert_eq!(texts(&t, &t.encode("hello")), ["<s>", "hello"]);
        assert_eq!(texts(&t, &t.encode(" hello")), ["<s>", "▁hello"]);
        // equal scores: leftmost first. "abab" -> ab ab
        assert_eq!(texts(&t, &t.encode("abab")), ["<s>", "ab", "ab"]);
        assert_eq!(t.encode_with("ab", false, false).len(), 1);
    }

    #[test]
    fn byte_fallback_and_roundtrip() {
        let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
        let ids = t.encode("x\u{1F600}é");
        assert_eq!(texts(&t, &ids), ["<s>", "<0x78>", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "é"]);
        for s in ["x\u{1F600}é", "hello  world\n\n<br> a b", "", "  ", "\t\n", "a\u{0}b"] {
            assert_eq!(t.decode(&t.encode(s)), s, "{s:?}");
        }
    }

    #[test]
    fn user_defined_tokens_split_first_and_control_text_does_not() {
        let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
        let ids = t.encode("ab\n\nab<br>c");
        assert_eq!(texts(&t, &ids), ["<s>", "ab", "\n\n", "ab", "<br>", "c"]);
        // "<end_of_turn>" is user-defined in the GGUF but llama.cpp marks it control (end of
        // generation), so plain text containing it is not split there.
        let ids = t.encode("a<end_of_turn>");
        assert!(!ids.contains(&t.token_id("<end_of_turn>").unwrap()), "{:?}", texts(&t, &ids));
        assert!(t.encode_with("a<end_of_turn>", true, true).contains(&t.token_id("<end_of_turn>").unwrap()));
        assert!(t.is_control(t.token_id("<end_of_turn>").unwrap()));
        assert_eq!(t.eot(), t.token_id("<end_of_turn>"));
        assert_eq!(t.eos_tokens(), &[2, t.token_id("<end_of_turn>").unwrap()]);
        // three newlines: the two-newline token, then the newline byte
        assert_eq!(texts(&t, &t.encode("\n\n\n")), ["<s>", "\n\n", "<0x0A>"]);
    }

    #[test]
    fn space_prefix() {
        let (_d, t) = toy(|w| w);
        assert!(t.add_space_prefix());
        assert_eq!(texts(&t, &t.encode("hello")), ["<s>", "▁hello"]);
        // after a user-defined token the next fragment gets a space too
        assert_eq!(texts(&t, &t.encode("hello<br>hello")), ["<s>", "▁hello", "<br>", "▁hello"]);
        for s in ["hello", "hello<br>hello", " a", "a  b"] {
            assert_eq!(t.decode(&t.encode(s)), s, "{s:?}");
        }
    }

    #[test]
    fn other_vocab_types_are_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bpe.gguf");
        GgufWriter::new()
            .kv("general.architecture", "qwen2")
            .kv("tokenizer.ggml.model", "gpt2")
            .kv("tokenizer.ggml.tokens", vec!["a", "b"])
            .write(&p)
            .unwrap();
        let err = Tokenizer::from_path(&p).unwrap_err();
        assert!(matches!(err, TokenizerError::Unsupported { ref model, .. } if model == "gpt2"), "{err}");
        assert!(err.to_string().contains("\"gpt2\""), "{err}");
        let p = dir.path().join("none.gguf");
        GgufWriter::new().kv("general.architecture", "x").write(&p).unwrap();
        let err = Tokenizer::from_path(&p).unwrap_err();
        assert!(err.to_string().contains("tokenizer.ggml.model"), "{err}");
    }

    pub(crate) fn real() -> Tokenizer {
        let path = default_model_path();
        assert!(
            path.exists(),
            "the real model is missing at {} (set LX_MODEL, or fetch it first: `lx models fetch default`)",
            path.display()
        );
        Tokenizer::from_path(&path).unwrap()
    }

    #[test]
    fn real_model_reference_prompt() {
        let t = real();
        assert_eq!(t.vocab_size(), 262_144);
        assert_eq!(t.bos(), Some(2));
        assert!(t.add_bos());
        assert_eq!(
            t.encode("Once upon a time, in a small village,"),
            vec![2, 14946, 3324, 496, 990, 236764, 528, 496, 1944, 9744, 236764]
        );
        assert_eq!(t.eos(), Some(1));
        assert_eq!(t.eot(), Some(106));
        assert!(t.eos_tokens().contains(&1) && t.eos_tokens().contains(&106));
        assert_eq!(t.decode(&[2, 14946, 3324, 496, 990, 236764]), "Once upon a time,");
        assert_eq!(t.encode(""), vec![2]);
    }

    #[test]
    fn real_model_speed() {
        let t = real();
        let para = "The lighthouse keeper climbed the spiral stairs at dusk, counting each step as her \
            father had, and trimmed the wick before the first ship rounded the headland. 1,234.5 — ok?\n\n";
        let text = para.repeat(1200);
        let start = std::time::Instant::now();
        let ids = t.encode(&text);
        let took = start.elapsed();
        assert!(ids.len() >= 40_000, "{}", ids.len());
        assert_eq!(t.decode(&ids), text);
        eprintln!("encoded {} tokens ({} bytes) in {took:?}", ids.len(), text.len());
        assert!(took.as_secs_f64() < 1.0, "encoding {} tokens took {took:?}", ids.len());
    }
}
