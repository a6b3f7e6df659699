//! What Latency Explorer's tests share, in one place instead of copies or files borrowed
//! across crates with `#[path]`. Only ever a dev-dependency (`scripts/crate-arrows` fails on
//! anything else): nothing here ships.
//!
//! - [`fuzz`]: seeded damage to valid inputs, for every reader's robustness test.
//! - [`parity`]: comparing token streams up to a near-tie.
//! - [`drive`]: the scheduler driven to the end over any backend, and its token streams.
//! - [`steps`]: a backend stepped by hand (one chunk, a greedy generation).
//! - [`models`]: where the real models are.
//! - [`scripted_server`]: an OpenAI-compatible server that answers as a test scripts.
//! - [`alone`]: a test run in a process of its own, so that tests of a one-core backend run
//!   two at once.
//! - `tiny_gguf` (feature `tiny-gguf`): tiny generated GGUF models with quantized tensors.
//! - `llama_ref` (feature `llama-ref`): llama.cpp in the test process, the reference.

pub mod alone;
pub mod drive;
pub mod fuzz;
pub mod models;
pub mod parity;
pub mod scripted_server;
pub mod steps;

#[cfg(feature = "tiny-gguf")]
pub mod tiny_gguf;

#[cfg(feature = "llama-ref")]
pub mod llama_ref;
