//! One test binary for everything that crosses crates: the CLI end to end, the llama.cpp
//! backend under the engine's scheduler, and bad input. Tests that load the real model
//! take `integration_tests::heavy()` so they never measure each other.

mod bad_input;
mod advise;
mod batching;
mod bench;
mod candle;
mod disaggregated;
mod fidelity;
mod cli;
mod kv_cache;
mod live;
mod memory;
mod mlx;
mod policy_parity;
mod readme;
mod serve;
mod server_target;
mod serving;
mod serving_input;
mod speculative;
mod synth;
mod tokenizer;
mod tokenizer_bpe;
mod tune;
