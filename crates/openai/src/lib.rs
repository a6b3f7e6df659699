//! OpenAI-compatible servers as measurement targets.
//!
//! llama-server, Ollama, LM Studio, vLLM and SGLang all stream `/v1/completions` and
//! `/v1/chat/completions` as Server-Sent Events. A [`ServerTarget`] drives one of them with
//! the same client loop as our own workers: it sends each request, stamps every chunk on
//! arrival, counts the tokens a chunk holds with the model's tokenizer, and checks them
//! against the server's own `usage` where it reports one. The server's scheduling is its
//! own, and results say so.
//!
//! [`server`] is the other side of the same API: our engine served as such a server
//! (`lx serve`).

mod chunk;
pub mod server;
mod sse;
mod target;

pub use chunk::{Api, Chunk, Usage};
pub use sse::SseParser;
pub use target::{Server, ServerTarget, TextCodec};
