//! The step interface every backend implements.
//!
//! A backend only knows how to run one forward pass over a batch of chunks and
//! return, for each chunk that asks for it, the greedy choice of next token. It
//! knows nothing of requests, queues or timing: scheduling lives once, in
//! [`crate::scheduler`], so every backend is scheduled the same way.

use serde::{Deserialize, Serialize};

/// A token id in the model's vocabulary (the same ids on every backend).
pub use lx_format::tokenizer::TokenId;

/// A backend-side sequence slot: one KV-cache lane. Slots are reused across requests.
pub type Slot = u32;

/// Which positions of a chunk need a next-token choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outputs {
    /// None: an intermediate prefill chunk.
    #[default]
    None,
    /// The last position only: the usual prefill end or decode step.
    Last,
    /// Every position: teacher-forced parity checks.
    All,
}

/// Tokens of one sequence to append to its KV cache at positions `pos..pos + tokens.len()`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub slot: Slot,
    pub pos: u32,
    pub tokens: Vec<TokenId>,
    pub outputs: Outputs,
    /// For each output row (one for `Last`, one per token for `All`), the tokens whose
    /// log-probabilities to report in [`Choice::scored`]: scoring a text teacher-forced (the
    /// token that follows, a reference's best alternatives). Empty for none; a row past the
    /// end asks for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub score: Vec<Vec<TokenId>>,
}

impl Chunk {
    /// The tokens to score at output row `row` of this chunk.
    pub fn score_row(&self, row: usize) -> &[TokenId] {
        self.score.get(row).map_or(&[], Vec::as_slice)
    }
}

/// One forward pass: several sequences' chunks together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    pub chunks: Vec<Chunk>,
    /// How many top alternatives (with log-probabilities) to report per output; 0 for none.
    /// Computing them costs a log-softmax over the whole vocabulary, so measured runs keep this 0.
    pub top_logprobs: usize,
}

impl Batch {
    /// Total tokens in the pass.
    pub fn token_count(&self) -> usize {
        self.chunks.iter().map(|c| c.tokens.len()).sum()
    }

    /// Whether any output needs log-probabilities (alternatives or scored tokens), which
    /// costs a log-softmax over the vocabulary per output row.
    pub fn wants_logprobs(&self) -> bool {
        self.top_logprobs > 0 || self.chunks.iter().any(|c| !c.score.is_empty())
    }

    /// Checks this batch against a backend's limits and its slots' cached lengths
    /// (`cached[slot]`), for backends that keep their own caches: the batch fits
    /// `max_batch_tokens`, every chunk names a slot, has tokens, starts at or before the
    /// cached end (a rewind is allowed), ends within `ctx_per_slot`, and carries only ids
    /// below `vocab`. Returns every slot's cached length after the step.
    pub fn check(&self, caps: &Capabilities, cached: &[usize], vocab: usize) -> Result<Vec<usize>, BackendError> {
        let total = self.token_count();
        if total > caps.max_batch_tokens {
            return Err(BackendError::Step(format!("batch carries {total} tokens, more than max_batch_tokens {}", caps.max_batch_tokens)));
        }
        let mut lens = cached.to_vec();
        for c in &self.chunks {
            let s = c.slot as usize;
            if s >= lens.len() {
                return Err(BackendError::Step(format!("slot {} out of range (slots: {})", c.slot, lens.len())));
            }
            if c.tokens.is_empty() {
                return Err(BackendError::Step(format!("empty chunk for slot {}", c.slot)));
            }
            let pos = c.pos as usize;
            if pos > lens[s] {
                return Err(BackendError::Step(format!("chunk for slot {} starts at position {pos} but only {} positions are cached", c.slot, lens[s])));
            }
            let end = pos + c.tokens.len();
            if end > caps.ctx_per_slot {
                return Err(BackendError::Step(format!("chunk for slot {} ends at position {end}, past ctx_per_slot {}", c.slot, caps.ctx_per_slot)));
            }
            if let Some(t) = c.tokens.iter().chain(c.score.iter().flatten()).find(|&&t| t as usize >= vocab) {
                return Err(BackendError::Step(format!("token id {t} out of range (vocabulary: {vocab})")));
            }
            lens[s] = end;
        }
        Ok(lens)
    }
}

/// A token with its log-probability under the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub token: TokenId,
    pub logprob: f32,
}

/// The greedy choice at one position.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The argmax token.
    pub token: TokenId,
    /// The best alternatives, most likely first (empty unless `Batch::top_logprobs > 0`).
    pub top: Vec<Scored>,
    /// The log-probabilities of the tokens the chunk asked to score at this row
    /// ([`Chunk::score`]), in the order asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scored: Vec<Scored>,
}

/// Output for one chunk of a batch, in the same order as the chunks that asked for outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkOutput {
    pub slot: Slot,
    /// One choice per requested position: 1 for `Outputs::Last`, `tokens.len()` for `Outputs::All`.
    pub choices: Vec<Choice>,
}

/// What a backend can do; the scheduler and the charts rely on it being true.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Capabilities {
    /// Sequences at different positions run in one fused pass. When false the backend
    /// runs them one after another inside the step, and results say so.
    pub mixed_position_batches: bool,
    /// Most tokens one step may carry.
    pub max_batch_tokens: usize,
    /// Number of slots (concurrent sequences) the loaded context has.
    pub slots: usize,
    /// Context length available to each slot.
    pub ctx_per_slot: usize,
    /// `copy_prefix` shares one sequence's cached prefix with another.
    pub prefix_copy: bool,
}

/// How a KV cache stores its keys or its values (llama.cpp's cache types).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum KvType {
    /// 16-bit floats: llama.cpp's default.
    #[default]
    F16,
    /// 8-bit blocks of 32 with a scale: 34 bytes per 32 values.
    Q8_0,
    /// 4-bit blocks of 32 with a scale: 18 bytes per 32 values.
    Q4_0,
}

impl KvType {
    pub const ALL: [KvType; 3] = [KvType::F16, KvType::Q8_0, KvType::Q4_0];

    pub fn name(self) -> &'static str {
        match self {
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
            KvType::Q4_0 => "q4_0",
        }
    }

    /// Bytes one cached value takes.
    pub fn bytes_per_element(self) -> f64 {
        match self {
            KvType::F16 => 2.0,
            KvType::Q8_0 => 34.0 / 32.0,
            KvType::Q4_0 => 18.0 / 32.0,
        }
    }
}

impl std::str::FromStr for KvType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KvType::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| format!("unknown KV cache type '{s}' (expected f16, q8_0 or q4_0)"))
    }
}

/// Who is measured: reported with every result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct BackendInfo {
    /// Short name: `llama`, `candle`, `mlx`.
    pub name: String,
    /// Library and version, e.g. `llama.cpp (llama-cpp-2 0.1.160)`.
    pub version: String,
    /// The device actually used, read back from the library after loading, e.g.
    /// `CPU (AVX2, 2 threads)` or `Vulkan0: llvmpipe (all 19 layers)`.
    pub device: String,
    /// Set when a backend that could have used a GPU ran wholly or partly on the CPU: how
    /// much and why ("llama.cpp ran on the CPU: 0 of 19 layers offloaded ..."). Results,
    /// tables and the app show it beside the figures, which are not GPU figures then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_fallback: Option<String>,
    /// Compute threads in use.
    pub threads: usize,
    pub capabilities: Capabilities,
    /// The draft model loaded beside the model for speculative decoding, when there is one:
    /// its name and file (a draft made from the model itself says what from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
    /// The KV cache's bytes as the library allocated them for every slot (llama.cpp's own
    /// account; candle's and MLX's count of their caches); `None` where the backend does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_bytes: Option<u64>,
    /// The weights' bytes as the backend holds them (llama.cpp's own account of its buffers;
    /// candle's and MLX's count of what they keep); `None` where the backend does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_bytes: Option<u64>,
    /// The backend's own settings as it ran with them, by the names `lx tune` uses (e.g.
    /// candle's `weights`, llama.cpp's `flash_attn`); threads are [`BackendInfo::threads`].
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
    /// Where those settings came from: this machine's tuned profile, the environment, or
    /// the backend's defaults (set by whoever started the worker: [`SETTINGS_FROM_ENV`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_from: Option<String>,
}

/// The environment variable through which whoever starts a worker says where its settings
/// came from; the worker copies it into [`BackendInfo::settings_from`].
pub const SETTINGS_FROM_ENV: &str = "LX_SETTINGS_FROM";

/// How to load a model into a backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    pub model_path: std::path::PathBuf,
    /// Compute threads; 0 means the number of physical cores.
    pub threads: usize,
    /// Concurrent sequences to make room for.
    pub slots: usize,
    /// Context length per slot (prompt + output).
    pub ctx_per_slot: usize,
    /// Most tokens one step may carry.
    pub max_batch_tokens: usize,
    /// Layers to offload to a GPU where the backend has one; `None` means all.
    pub gpu_layers: Option<u32>,
    /// A draft model to load beside the model, on the same backend with the same slots and
    /// context, for speculative decoding's `draft` drafter. It must share the model's
    /// vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<std::path::PathBuf>,
    /// How the KV cache stores keys and values. Only llama.cpp takes other types than f16;
    /// the other backends refuse them when they load.
    #[serde(default, skip_serializing_if = "KvTypes::is_default")]
    pub kv: KvTypes,
    /// The backend's own settings, by the names `lx tune`, its profiles and run files give
    /// them (llama.cpp: `flash_attn`, `kv`, `ubatch`; candle: `weights`, `device`; MLX:
    /// `weights`, `device`; `crate::kind::Capabilities::settings`). Each backend parses the
    /// ones it has when it loads and refuses a name it does not have; empty: its defaults.
    /// The environment variables that override them are read where workers are started
    /// (`lx_local::profile::applied`), never by a backend.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

/// A KV cache's key and value types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct KvTypes {
    pub k: KvType,
    pub v: KvType,
}

impl KvTypes {
    pub fn is_default(&self) -> bool {
        *self == KvTypes::default()
    }

    /// The cache's size against an f16 cache of the same sequences (keys and values alike
    /// in size): 1 for f16, 0.53 for q8_0, 0.28 for q4_0.
    pub fn of_f16(&self) -> f64 {
        (self.k.bytes_per_element() + self.v.bytes_per_element()) / (2.0 * KvType::F16.bytes_per_element())
    }

    /// `q8_0`, or `K q8_0, V f16` when they differ.
    pub fn label(&self) -> String {
        if self.k == self.v {
            self.k.name().to_string()
        } else {
            format!("K {}, V {}", self.k.name(), self.v.name())
        }
    }

}

/// Errors a backend reports. The worker turns them into protocol errors.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot load model: {0}")]
    Load(String),
    #[error("unsupported model: {0}")]
    Unsupported(String),
    #[error("forward pass failed: {0}")]
    Step(String),
    #[error("{0} is not supported by this backend")]
    NotSupported(&'static str),
    #[error("backend {0} is not compiled into this build: {1}")]
    NotCompiled(String, String),
}

impl From<lx_format::arch::ArchError> for BackendError {
    fn from(e: lx_format::arch::ArchError) -> Self {
        match e {
            lx_format::arch::ArchError::Unsupported(m) => BackendError::Unsupported(m),
            lx_format::arch::ArchError::Malformed(m) => BackendError::Load(m),
        }
    }
}

/// A loaded model on one backend. Owned by the worker's engine thread.
pub trait Backend {
    /// Who this is and what it can do.
    fn info(&self) -> &BackendInfo;

    /// Run one forward pass. Outputs come back for each chunk whose `outputs` is not `None`,
    /// in batch order.
    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError>;

    /// How long the last `step` spent inside the backend's own library (llama.cpp's
    /// `llama_decode`), so a pass's time splits into the library's compute and the adapter's
    /// work around it (building the batch, reading logits, the greedy choice). `None` where
    /// the backend has no such boundary to time.
    fn last_compute(&self) -> Option<std::time::Duration> {
        None
    }

    /// Forget everything cached for `slot`, so it can serve a new request.
    fn clear(&mut self, slot: Slot);

    /// Forget `slot`'s cached positions from `len` on: a speculative pass wrote drafted
    /// tokens the target rejected, and the cache must hold exactly what plain decoding
    /// would have written.
    fn truncate(&mut self, slot: Slot, len: u32) -> Result<(), BackendError>;

    /// Make `to` start with the first `len` cached positions of `from` (prefix caching).
    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        let _ = (from, to, len);
        Err(BackendError::NotSupported("prefix copy"))
    }

    /// Everything `slot` has cached, as bytes of the backend's own format that another
    /// process with the same model and backend can load into any of its slots
    /// (disaggregated prefill and decode: [`crate::handoff`] frames and moves them).
    fn save_state(&mut self, slot: Slot) -> Result<Vec<u8>, BackendError> {
        let _ = slot;
        Err(BackendError::NotSupported("moving a sequence's state between workers"))
    }

    /// Make `slot` hold a state [`Backend::save_state`] made, of `positions` positions,
    /// replacing whatever it held. A state of another model or shape is refused.
    fn load_state(&mut self, slot: Slot, state: &[u8], positions: u32) -> Result<(), BackendError> {
        let _ = (slot, state, positions);
        Err(BackendError::NotSupported("moving a sequence's state between workers"))
    }
}

/// Greedy choice over one row of logits, with the `top` best as log-probabilities.
///
/// Shared by every backend that hands back raw logits, so all of them break ties
/// the same way (lowest token id wins, as llama.cpp's greedy sampler does).
pub fn choose_greedy(logits: &[f32], top: usize) -> Choice {
    choose(logits, top, &[])
}

/// [`choose_greedy`], with the log-probabilities of the tokens in `score` as well.
pub fn choose(logits: &[f32], top: usize, score: &[TokenId]) -> Choice {
    let best = argmax(logits);
    let mut choice = Choice { token: best as TokenId, ..Default::default() };
    if top == 0 && score.is_empty() {
        return choice;
    }
    let max = logits[best];
    // Summed in f64: over a 262k vocabulary an f32 sum drifts in its last digits, and a
    // fidelity figure is a difference of such sums.
    let log_sum = (logits.iter().map(|&v| f64::from(v - max).exp()).sum::<f64>().ln() + f64::from(max)) as f32;
    choice.scored = score.iter().map(|&t| Scored { token: t, logprob: logits.get(t as usize).map_or(f32::NEG_INFINITY, |&v| v - log_sum) }).collect();
    if top > 0 {
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        let k = top.min(logits.len());
        idx.select_nth_unstable_by(k - 1, |&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        idx.truncate(k);
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        choice.top = idx.into_iter().map(|i| Scored { token: i as TokenId, logprob: logits[i] - log_sum }).collect();
    }
    choice
}

/// The lowest index of the largest value (NaN never wins; 0 for an empty or all-NaN row).
///
/// Block by block: each block's maximum over lanes the compiler turns into vector
/// instructions (a running index would make every step wait on the last comparison), then
/// where the best value first occurs, searched in its block only. A scan of the whole row for
/// the position cost more than the maximum itself: over a 262k vocabulary, 0.35 ms for eight
/// rows where this takes 0.10 ms (AVX-512 and AVX2 alike), which a decode pass of many
/// sequences pays once per sequence.
fn argmax(row: &[f32]) -> usize {
    const BLOCK: usize = 2048;
    let (mut best, mut block) = (f32::NEG_INFINITY, 0);
    for (b, values) in row.chunks(BLOCK).enumerate() {
        let m = lanes_max(values);
        if m > best {
            (best, block) = (m, b);
        }
    }
    let start = block * BLOCK;
    row[start..].iter().position(|&v| v == best).map_or(0, |i| start + i)
}

/// The largest value of `values` (NaN never wins; -inf for none).
fn lanes_max(values: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = if v > *m { v } else { *m };
        }
    }
    lanes.iter().chain(rest).fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_is_the_first_largest_value_whatever_the_row() {
        // The one-pass rule it replaces, as the reference.
        let reference = |row: &[f32]| {
            let mut best = 0;
            for (i, &v) in row.iter().enumerate() {
                if v > row[best] || row[best].is_nan() && !v.is_nan() {
                    best = i;
                }
            }
            best
        };
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        for len in [1usize, 2, 15, 16, 17, 33, 1000, 2047, 2048, 2049, 4097, 262_144] {
            // Coarse values, so that ties are common, and the largest at the very end too.
            let mut row: Vec<f32> = (0..len).map(|_| (next() * 20.0).floor()).collect();
            assert_eq!(argmax(&row), reference(&row), "len {len}");
            row[len - 1] = 100.0;
            assert_eq!(argmax(&row), len - 1, "len {len}, largest last");
            row[0] = f32::NAN;
            assert_eq!(argmax(&row), reference(&row), "len {len}, NaN first");
        }
        assert_eq!(argmax(&[]), 0);
        assert_eq!(argmax(&[f32::NAN, f32::NAN]), 0);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -1.0, f32::NEG_INFINITY]), 1);
        // The same largest value in two blocks: the first block's.
        let mut row = vec![0.0f32; 3 * 2048];
        (row[5000], row[100]) = (7.0, 7.0);
        assert_eq!(argmax(&row), 100);
    }

    #[test]
    fn greedy_picks_argmax_and_lowest_id_on_ties() {
        let c = choose_greedy(&[0.5, 2.0, 2.0, -1.0], 0);
        assert_eq!(c.token, 1);
        assert!(c.top.is_empty());
    }

    #[test]
    fn top_logprobs_are_normalised_and_ordered() {
        let logits = [1.0f32, 3.0, 2.0, 0.0];
        let c = choose_greedy(&logits, 3);
        let ids: Vec<_> = c.top.iter().map(|s| s.token).collect();
        assert_eq!(ids, vec![1, 2, 0]);
        let z: f32 = logits.iter().map(|v| v.exp()).sum();
        assert!((c.top[0].logprob - (3.0f32.exp() / z).ln()).abs() < 1e-5);
        assert!(c.top[0].logprob > c.top[1].logprob);
    }
}
