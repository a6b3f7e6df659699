//! What a loaded model holds in memory, by what holds it: the weights as the backend keeps
//! them, the KV cache it allocates for every slot, and the rest (the buffers of the largest
//! step it computes, and the worker process itself). Each backend predicts its own from the
//! model file and the load ([`LoadSpec`](crate::backend::LoadSpec)); `lx fit` plans with the
//! predictions and checks them against the peaks workers then reach.

use serde::{Deserialize, Serialize};

/// Bytes, by what holds them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Footprint {
    /// The weights as the backend holds them (a dequantized copy counts, a mapped file
    /// counts once).
    pub weights: u64,
    /// The KV cache of every slot at its full context.
    pub kv_cache: u64,
    /// The largest step's buffers: activations, attention scores, logits, RoPE tables.
    pub scratch: u64,
    /// The worker process before it loads anything: code, libraries, thread pools.
    pub runtime: u64,
}

impl Footprint {
    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.scratch + self.runtime
    }
}

/// Bytes as MiB, for messages and tables.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Bytes a worker keeps per vocabulary entry: the token's text, score and type as read from
/// the file, and the maps between text and id. An estimate (strings of a few bytes, hash
/// map entries), small beside the weights of any model it is used with.
pub const BYTES_PER_VOCABULARY_ENTRY: u64 = 96;
