//! An OpenAI-compatible server as a [`Target`]: each request is one streaming HTTP request,
//! each received chunk is stamped the moment it arrives, and how the request ended (or
//! failed) comes back as the same events our worker sends.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::{BackendInfo, Capabilities, TokenId};
use lx_client::target::TargetError;
use lx_client::protocol::Reply;
use lx_engine::scheduler::{FinishReason, SchedEvent, SchedulerConfig, WorkRequest};
use lx_client::target::Target;
use lx_format::tokenizer::Tokenizer;
use serde_json::{json, Value};
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;

use crate::chunk::{Api, Chunk, Usage};
use crate::sse::SseParser;

/// A server to measure, as the user named it.
#[derive(Debug, Clone)]
pub struct Server {
    /// What results call it.
    pub name: String,
    /// The API's base address, up to and including `/v1`.
    pub base_url: String,
    /// The model to ask for; `None`: the first one the server lists.
    pub model: Option<String>,
    pub api: Api,
    /// Sent as a bearer token. Never written to results or logs.
    pub api_key: Option<String>,
    /// Ask for exactly `max_tokens` (llama-server, vLLM and SGLang honour `ignore_eos`;
    /// servers that do not may stop early, and such outputs are recorded as short).
    pub ignore_eos: bool,
    /// A request that receives nothing for this long fails (the server stalled).
    pub idle_timeout: Duration,
    /// Retries of a request the server answers with HTTP 429 or 503.
    pub max_retries: u32,
}

impl Server {
    /// `URL` or `NAME=URL`; the name defaults to the URL's host and port.
    pub fn parse(spec: &str) -> Result<Server, String> {
        let (name, url) = match spec.split_once('=') {
            Some((n, u)) if !n.contains("://") => (Some(n.trim().to_string()), u.trim()),
            _ => (None, spec.trim()),
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| format!("'{url}': a server address starts with http:// or https://"))?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(format!("'{url}': no host"));
        }
        let name = name.filter(|n| !n.is_empty()).unwrap_or_else(|| host.to_string());
        Ok(Server {
            name,
            base_url: url.trim_end_matches('/').to_string(),
            model: None,
            api: Api::Completions,
            api_key: None,
            ignore_eos: true,
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
        })
    }
}

/// What the target needs of the model's tokenizer: the text of a prompt built as ids, and
/// the tokens in a piece of streamed text (a chunk may carry several).
pub trait TextCodec: Send + Sync {
    fn prompt_text(&self, ids: &[TokenId]) -> String;
    fn tokens(&self, text: &str) -> Vec<TokenId>;
}

impl TextCodec for Tokenizer {
    fn prompt_text(&self, ids: &[TokenId]) -> String {
        // The server adds its own BOS.
        let ids = match (ids.first(), self.bos()) {
            (Some(first), Some(bos)) if *first == bos => &ids[1..],
            _ => ids,
        };
        self.decode(ids)
    }
    fn tokens(&self, text: &str) -> Vec<TokenId> {
        self.encode_with(text, false, false)
    }
}

/// What every request task shares.
struct Shared {
    server: Server,
    model: String,
    client: reqwest::Client,
    codec: Arc<dyn TextCodec>,
    epoch: Instant,
    replies: Sender<(Instant, Reply)>,
}

/// A connected server.
pub struct ServerTarget {
    shared: Arc<Shared>,
    runtime: Option<Runtime>,
    replies: Receiver<(Instant, Reply)>,
    running: HashMap<u64, AbortHandle>,
    info: BackendInfo,
    load_ms: f64,
}

impl ServerTarget {
    /// Reach the server and settle the model: the one asked for, or the first it lists.
    pub fn connect(server: Server, codec: Arc<dyn TextCodec>) -> Result<ServerTarget, TargetError> {
        let t0 = Instant::now();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("lx-http")
            .enable_all()
            .build()
            .map_err(|e| TargetError::Load(format!("cannot start the HTTP client: {e}")))?;
        // Proxies are bypassed: a proxy's own latency would be measured as the server's.
        let client = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            // Below the usual server keep-alive (llama-server's is 5 s), so that a kept
            // connection is rarely one the server is closing.
            .pool_idle_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("latency-explorer/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TargetError::Load(format!("cannot start the HTTP client: {e}")))?;
        let (listed, server_header) = runtime.block_on(list_models(&client, &server))?;
        let model = match (&server.model, listed.as_slice()) {
            (Some(m), []) => m.clone(),
            (Some(m), list) if list.contains(m) => m.clone(),
            (Some(m), list) => {
                return Err(TargetError::Load(format!("{} does not serve model '{m}'; it lists: {}", server.base_url, list.join(", "))))
            }
            (None, [first, ..]) => first.clone(),
            (None, []) => {
                return Err(TargetError::Load(format!("{} lists no models: name one with --target-model", server.base_url)))
            }
        };
        let version = match server_header {
            Some(h) => format!("OpenAI-compatible server ({h}), model {model}"),
            None => format!("OpenAI-compatible server, model {model}"),
        };
        let info = BackendInfo {
            name: server.name.clone(),
            version,
            device: format!("{} (the server's own hardware)", server.base_url),
            cpu_fallback: None,
            threads: 0,
            // The server's batching and limits are its own; none of ours apply.
            capabilities: Capabilities::default(),
            ..Default::default()
        };
        let (tx, replies) = mpsc::channel();
        let shared = Arc::new(Shared { server, model, client, codec, epoch: Instant::now(), replies: tx });
        Ok(ServerTarget { shared, runtime: Some(runtime), replies, running: HashMap::new(), info, load_ms: t0.elapsed().as_secs_f64() * 1e3 })
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("present until drop")
    }
}

/// The server's model list (empty where it has none) and its `Server` header.
async fn list_models(client: &reqwest::Client, server: &Server) -> Result<(Vec<String>, Option<String>), TargetError> {
    let url = format!("{}/models", server.base_url);
    let mut req = client.get(&url).timeout(Duration::from_secs(30));
    if let Some(key) = &server.api_key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| TargetError::Load(format!("cannot reach {}: {}", server.base_url, error_chain(&e))))?;
    let status = resp.status();
    let header = resp.headers().get(reqwest::header::SERVER).and_then(|v| v.to_str().ok()).map(String::from);
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(TargetError::Load(format!("{} refused us (HTTP {status}): set LX_API_KEY to its API key", server.base_url)));
    }
    if !status.is_success() {
        // Some servers have no model list; the model must then be named.
        return Ok((Vec::new(), header));
    }
    let body: Value = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    let ids = body.get("data").and_then(Value::as_array).map(|d| d.iter().filter_map(|m| m.get("id")?.as_str().map(String::from)).collect()).unwrap_or_default();
    Ok((ids, header))
}

/// A reqwest error with its causes: "error sending request" alone says nothing.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out += &format!(": {s}");
        source = s.source();
    }
    out
}

impl Target for ServerTarget {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn load_ms(&self) -> f64 {
        self.load_ms
    }
    fn schedules_itself(&self) -> bool {
        true
    }
    fn configure(&mut self, _config: &SchedulerConfig) -> Result<(), TargetError> {
        Ok(())
    }
    fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError> {
        let id = request.id;
        let shared = Arc::clone(&self.shared);
        let task = self.runtime().spawn(async move {
            let outcome = stream(&shared, &request).await;
            let at = Instant::now();
            let t = shared.ns(at);
            let event = match outcome {
                Ok(reason) => SchedEvent::Finished { id, reason, t },
                Err(error) => SchedEvent::Failed { id, error },
            };
            let _ = shared.replies.send((at, Reply::Event(event)));
        });
        self.running.insert(id, task.abort_handle());
        Ok(())
    }
    fn cancel(&mut self, id: u64) {
        // Dropping the response closes the connection, which frees the server's slot.
        if let Some(task) = self.running.remove(&id) {
            task.abort();
            let at = Instant::now();
            let _ = self.shared.replies.send((at, Reply::Event(SchedEvent::Finished { id, reason: FinishReason::Cancelled, t: self.shared.ns(at) })));
        }
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
        match self.replies.recv_timeout(timeout) {
            Ok((at, reply)) => {
                if let Reply::Event(SchedEvent::Finished { id, .. } | SchedEvent::Failed { id, .. }) = &reply {
                    self.running.remove(id);
                }
                Ok(Some((at, reply)))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(TargetError::Died("HTTP client stopped".into())),
        }
    }
    fn to_local(&self, target_ns: u64) -> Instant {
        self.shared.epoch + Duration::from_nanos(target_ns)
    }
    fn kill(&mut self) {
        for (_, task) in self.running.drain() {
            task.abort();
        }
    }
}

impl Drop for ServerTarget {
    fn drop(&mut self) {
        self.kill();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Shared {
    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    fn send(&self, at: Instant, event: SchedEvent) {
        let _ = self.replies.send((at, Reply::Event(event)));
    }

    fn warn(&self, id: u64, message: String) {
        self.send(Instant::now(), SchedEvent::Warning { id, message });
    }

    fn body(&self, r: &WorkRequest) -> String {
        let text = self.codec.prompt_text(&r.prompt);
        let mut body = json!({
            "model": self.model,
            "max_tokens": r.max_tokens,
            "temperature": 0.0,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        match self.server.api {
            Api::Completions => body["prompt"] = json!(text),
            Api::Chat => body["messages"] = json!([{ "role": "user", "content": text }]),
        }
        if self.server.ignore_eos && r.stop_tokens.is_empty() {
            body["ignore_eos"] = json!(true);
        }
        body.to_string()
    }
}

/// Send one request and stream its answer: tokens go out as they arrive; the result is how
/// it finished, or why it failed.
async fn stream(c: &Shared, r: &WorkRequest) -> Result<FinishReason, String> {
    let url = format!("{}/{}", c.server.base_url, c.server.api.path());
    let body = c.body(r);
    let idle = c.server.idle_timeout;
    let (mut retries, mut resent) = (0, false);
    let mut resp = loop {
        let mut req = c.client.post(&url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.clone());
        if let Some(key) = &c.server.api_key {
            req = req.bearer_auth(key);
        }
        let resp = match tokio::time::timeout(idle, req.send()).await {
            Err(_) => return Err(format!("no answer from {url} within {} s", idle.as_secs_f64())),
            Ok(Err(e)) => {
                let why = error_chain(&e);
                // A kept-alive connection the server closed as we reused it: the request never
                // reached it, so send it once more on a fresh connection (and say so).
                if !resent && why.contains("connection closed before message completed") {
                    resent = true;
                    c.warn(r.id, "resent once: the server had closed the kept-alive connection".into());
                    continue;
                }
                return Err(format!("cannot reach {url}: {why}"));
            }
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        let busy = status == reqwest::StatusCode::TOO_MANY_REQUESTS || status == reqwest::StatusCode::SERVICE_UNAVAILABLE;
        if busy && retries < c.server.max_retries {
            let wait = retry_after(resp.headers()).unwrap_or(Duration::from_secs(1)).min(Duration::from_secs(60));
            retries += 1;
            c.warn(r.id, format!("HTTP {}: retried after {:.1} s (its TTFT includes the wait)", status.as_u16(), wait.as_secs_f64()));
            tokio::time::sleep(wait).await;
            continue;
        }
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let text: String = text.chars().take(300).collect();
            return Err(format!("HTTP {}: {}", status.as_u16(), text.trim()));
        }
        break resp;
    };
    let mut sse = SseParser::default();
    let (mut index, mut finish, mut usage, mut done) = (0u32, None::<String>, None::<Usage>, false);
    while !done {
        let (bytes, at) = match tokio::time::timeout(idle, resp.chunk()).await {
            Err(_) => return Err(format!("the server sent nothing for {} s, after {index} tokens", idle.as_secs_f64())),
            Ok(Err(e)) => return Err(format!("the stream broke after {index} tokens: {}", error_chain(&e))),
            Ok(Ok(None)) => (None, Instant::now()),
            Ok(Ok(Some(b))) => (Some(b), Instant::now()),
        };
        let events = match &bytes {
            Some(b) => sse.push(b),
            None => sse.finish().into_iter().collect(),
        };
        for data in events {
            if data.trim() == "[DONE]" {
                done = true;
                break;
            }
            let chunk = Chunk::parse(&data, c.server.api)?;
            if let Some(e) = chunk.error {
                return Err(format!("the server reported an error after {index} tokens: {e}"));
            }
            if !chunk.text.is_empty() {
                // Every token of a chunk arrived when the chunk did.
                let mut ids = c.codec.tokens(&chunk.text);
                if ids.is_empty() {
                    ids.push(0);
                }
                for token in ids {
                    c.send(at, SchedEvent::Token { id: r.id, step: 0, index, token, t: c.ns(at), top: Vec::new(), drafted: false });
                    index += 1;
                }
            }
            finish = chunk.finish_reason.or(finish);
            usage = chunk.usage.or(usage);
        }
        if bytes.is_none() {
            if done || finish.is_some() {
                break;
            }
            return Err(format!("the server closed the stream after {index} tokens without finishing it"));
        }
    }
    match usage {
        Some(u) => {
            if u.completion_tokens != u64::from(index) {
                c.warn(r.id, format!("the server counted {} output tokens; our tokenizer found {index} in its chunks", u.completion_tokens));
            }
            if c.server.api == Api::Completions && u.prompt_tokens != r.prompt.len() as u64 {
                c.warn(r.id, format!("the server counted {} prompt tokens where we sent {}", u.prompt_tokens, r.prompt.len()));
            }
        }
        None => c.warn(r.id, "the server reported no usage: output tokens were counted with our tokenizer".into()),
    }
    let reason = match finish.as_deref() {
        Some("length") => FinishReason::Length,
        _ if index >= r.max_tokens => FinishReason::Length,
        _ => FinishReason::Stop,
    };
    // Asked for exactly max_tokens and got fewer: kept as measured (never padded), and said,
    // since a server that stops streams early (llama-cpp-python's server interrupts one
    // request when the next arrives) would otherwise pass for a fast one.
    if reason == FinishReason::Stop && c.server.ignore_eos && r.stop_tokens.is_empty() {
        let why = finish.as_deref().map_or("no finish_reason".to_string(), |f| format!("finish_reason {f}"));
        c.warn(r.id, format!("the server ended the output after {index} of {} tokens ({why}) although asked to ignore the end of sequence", r.max_tokens));
    }
    Ok(reason)
}

/// `Retry-After` in seconds (the HTTP-date form is rare from these servers and is ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_parse_with_or_without_a_name() {
        let s = Server::parse("http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!((s.name.as_str(), s.base_url.as_str()), ("127.0.0.1:8080", "http://127.0.0.1:8080/v1"));
        let s = Server::parse("vllm=https://gpu-box:8000/v1").unwrap();
        assert_eq!((s.name.as_str(), s.base_url.as_str()), ("vllm", "https://gpu-box:8000/v1"));
        assert!(Server::parse("localhost:8080").unwrap_err().contains("http://"));
        assert!(Server::parse("http:///v1").is_err());
    }
}
