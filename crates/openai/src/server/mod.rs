//! `lx serve`: our engine behind the OpenAI-compatible API, so that any client (the `openai`
//! package, AIPerf, another `lx`) can measure it as it measures any server.
//!
//! One thread owns the worker ([`engine`]); HTTP/1.1 connections are served on a small
//! runtime ([`http`]). `/v1/completions` and `/v1/chat/completions` stream as Server-Sent
//! Events or answer whole; `/v1/models`, `/health` and `/metrics` (Prometheus text) report.
//! A client that goes away cancels its request, which frees its slot. Decoding is greedy.

mod chat;
mod engine;
mod http;
mod metrics;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lx_client::target::Target;
use lx_format::tokenizer::Tokenizer;

pub use chat::{ChatTemplate, Message};
pub use engine::Start;

/// The model as the server presents it.
#[derive(Clone)]
pub struct Served {
    /// The model id `/v1/models` lists.
    pub name: String,
    pub tokenizer: Arc<Tokenizer>,
    /// How chat messages become a prompt; `None`: the chat endpoint says why it is refused.
    pub chat: Option<ChatTemplate>,
    /// Prompt plus output tokens one request may use.
    pub ctx_per_slot: usize,
    /// Required as a bearer token on `/v1/...` when set.
    pub api_key: Option<String>,
    /// Larger request bodies are refused (HTTP 413).
    pub max_body_bytes: usize,
}

/// Serve `served` on `addr` with `target` (and `start` for a fresh target after a crash)
/// until `stop` is raised. `ready` hears the bound address once requests are accepted.
pub fn run(served: Served, target: Box<dyn Target>, start: Start, addr: SocketAddr, stop: Arc<AtomicBool>, ready: impl FnOnce(SocketAddr)) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lx-serve-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let engine = engine::Engine::spawn(target, start);
    let state = Arc::new(http::State { engine, served });
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        ready(listener.local_addr().map_err(|e| e.to_string())?);
        while !stop.load(Ordering::Relaxed) {
            // Wake now and then to see whether we were asked to stop.
            let Ok(accepted) = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await else { continue };
            let Ok((stream, _)) = accepted else { continue };
            let _ = stream.set_nodelay(true);
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| http::handle(Arc::clone(&state), req));
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
            });
        }
        Ok(())
    })
}
