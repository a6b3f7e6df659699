//! The HTTP side of `lx serve`: routes, request checks, and the OpenAI-shaped answers,
//! streamed as Server-Sent Events or whole.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use lx_engine::backend::TokenId;
use lx_format::tokenizer::PieceDecoder;
use lx_engine::scheduler::{FinishReason, WorkRequest};
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::chat::Message;
use super::engine::{Engine, Event};
use super::Served;
use crate::chunk::Api;

pub type Answer = Response<BoxBody<Bytes, Infallible>>;

/// Everything a handler needs.
pub struct State {
    pub engine: Arc<Engine>,
    pub served: Served,
}

pub async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Answer, Infallible> {
    let path = req.uri().path().to_string();
    let authorised = match &state.served.api_key {
        None => true,
        Some(key) => req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) == Some(format!("Bearer {key}").as_str()),
    };
    Ok(match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => json_answer(StatusCode::OK, &json!({"status": "ok"})),
        (&Method::GET, "/metrics") => text_answer(StatusCode::OK, "text/plain; version=0.0.4", state.engine.metrics.render()),
        _ if !authorised => error(StatusCode::UNAUTHORIZED, "missing or wrong API key (Authorization: Bearer ...)"),
        (&Method::GET, "/v1/models") => json_answer(
            StatusCode::OK,
            &json!({"object": "list", "data": [{"id": state.served.name, "object": "model", "created": 0, "owned_by": "latency-explorer"}]}),
        ),
        (&Method::POST, "/tokenize") => tokenize(&state, req).await,
        (&Method::POST, "/detokenize") => detokenize(&state, req).await,
        (&Method::POST, "/v1/completions") => complete(&state, req, Api::Completions).await,
        (&Method::POST, "/v1/chat/completions") => complete(&state, req, Api::Chat).await,
        (_, "/health" | "/metrics" | "/v1/models" | "/v1/completions" | "/v1/chat/completions" | "/tokenize" | "/detokenize") => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        _ => error(StatusCode::NOT_FOUND, &format!("no such endpoint: {path}")),
    })
}

/// The body of a POST as JSON, or the answer that refuses it.
async fn json_body(state: &State, req: Request<Incoming>) -> Result<Value, Answer> {
    let limit = state.served.max_body_bytes;
    let body = match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(error(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body over {limit} bytes"))),
    };
    serde_json::from_slice::<Value>(&body).map_err(|e| error(StatusCode::BAD_REQUEST, &format!("the body is not JSON: {e}")))
}

/// `{"content": text, "add_special": bool}` → `{"tokens": [...]}`, as llama-server answers,
/// so that clients can build prompts of exact lengths.
async fn tokenize(state: &State, req: Request<Incoming>) -> Answer {
    let v = match json_body(state, req).await {
        Ok(v) => v,
        Err(answer) => return answer,
    };
    let Some(text) = v.get("content").and_then(Value::as_str) else { return error(StatusCode::BAD_REQUEST, "content: required, a string") };
    let add_special = v.get("add_special").and_then(Value::as_bool).unwrap_or(false);
    json_answer(StatusCode::OK, &json!({"tokens": state.served.tokenizer.encode_with(text, add_special, false)}))
}

/// `{"tokens": [...]}` → `{"content": text}`.
async fn detokenize(state: &State, req: Request<Incoming>) -> Answer {
    let v = match json_body(state, req).await {
        Ok(v) => v,
        Err(answer) => return answer,
    };
    let vocab = state.served.tokenizer.vocab_size() as u64;
    let ids: Option<Vec<TokenId>> = v.get("tokens").and_then(Value::as_array).and_then(|a| a.iter().map(|t| t.as_u64().filter(|&t| t < vocab).map(|t| t as TokenId)).collect());
    match ids {
        Some(ids) => json_answer(StatusCode::OK, &json!({"content": state.served.tokenizer.decode(&ids)})),
        None => error(StatusCode::BAD_REQUEST, "tokens: required, an array of ids in the vocabulary"),
    }
}

/// A request, checked and tokenised.
struct Ask {
    prompt: Vec<TokenId>,
    max_tokens: u32,
    stream: bool,
    include_usage: bool,
    ignore_eos: bool,
}

async fn complete(state: &State, req: Request<Incoming>, api: Api) -> Answer {
    let v = match json_body(state, req).await {
        Ok(v) => v,
        Err(answer) => return answer,
    };
    let ask = match read_ask(&state.served, &v, api) {
        Ok(a) => a,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let (tx, rx) = unbounded_channel();
    let stop_tokens = if ask.ignore_eos { Vec::new() } else { state.served.tokenizer.eos_tokens().to_vec() };
    let prompt_tokens = ask.prompt.len();
    let request = WorkRequest { id: 0, prompt: ask.prompt, max_tokens: ask.max_tokens, stop_tokens, top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: None };
    let id = state.engine.submit(request, tx);
    let reply = Reply { api, id, model: state.served.name.clone(), created: now(), prompt_tokens };
    if ask.stream {
        stream(state, reply, rx, ask.include_usage)
    } else {
        whole(state, reply, rx).await
    }
}

fn read_ask(served: &Served, v: &Value, api: Api) -> Result<Ask, String> {
    if v.get("n").and_then(Value::as_u64).is_some_and(|n| n != 1) {
        return Err("only n = 1 is supported".into());
    }
    let prompt = match api {
        Api::Completions => match v.get("prompt") {
            Some(Value::String(s)) => served.tokenizer.encode(s),
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => served.tokenizer.encode(a[0].as_str().unwrap_or_default()),
            Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => {
                let vocab = served.tokenizer.vocab_size() as u64;
                let ids: Vec<u64> = a.iter().filter_map(Value::as_u64).collect();
                if let Some(bad) = ids.iter().find(|&&t| t >= vocab) {
                    return Err(format!("token id {bad} is outside the vocabulary ({vocab} tokens)"));
                }
                ids.into_iter().map(|t| t as TokenId).collect()
            }
            Some(Value::Array(_)) => return Err("prompt: one string, or one array of token ids (batched prompts are not supported)".into()),
            _ => return Err("prompt: required, a string".into()),
        },
        Api::Chat => {
            let template = served.chat.ok_or("this model's chat template is not one lx serve renders (Gemma, ChatML, Llama 3): use /v1/completions")?;
            let messages = read_messages(v.get("messages"))?;
            served.tokenizer.encode_with(&template.render(&messages), true, true)
        }
    };
    if prompt.is_empty() {
        return Err("the prompt is empty".into());
    }
    let room = served.ctx_per_slot.saturating_sub(prompt.len());
    let asked = v.get("max_completion_tokens").or_else(|| v.get("max_tokens")).filter(|m| !m.is_null());
    let max_tokens = match asked {
        None if api == Api::Completions => 16.min(room),
        None => room,
        Some(m) => m.as_u64().filter(|&m| m >= 1).ok_or("max_tokens must be a positive integer")? as usize,
    };
    if prompt.len() + max_tokens > served.ctx_per_slot || room == 0 {
        return Err(format!(
            "the prompt ({} tokens) and max_tokens ({max_tokens}) do not fit the context of a slot ({} tokens)",
            prompt.len(),
            served.ctx_per_slot
        ));
    }
    Ok(Ask {
        prompt,
        max_tokens: max_tokens as u32,
        stream: v.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: v.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false),
        ignore_eos: v.get("ignore_eos").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn read_messages(v: Option<&Value>) -> Result<Vec<Message>, String> {
    let list = v.and_then(Value::as_array).filter(|l| !l.is_empty()).ok_or("messages: required, a non-empty array")?;
    list.iter()
        .map(|m| {
            let role = m.get("role").and_then(Value::as_str).ok_or("each message needs a role")?;
            let content = match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""),
                _ => return Err("each message needs a content: text, or an array of text parts".to_string()),
            };
            Ok(Message { role: role.to_string(), content })
        })
        .collect()
}

/// What every answer to one request repeats.
struct Reply {
    api: Api,
    id: u64,
    model: String,
    created: u64,
    prompt_tokens: usize,
}

impl Reply {
    fn chunk(&self, text: Option<&str>, finish: Option<&str>, first: bool) -> Value {
        let choice = match self.api {
            Api::Completions => json!({"index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish}),
            Api::Chat => {
                let mut delta = json!({});
                if first {
                    delta["role"] = json!("assistant");
                }
                if let Some(t) = text {
                    delta["content"] = json!(t);
                }
                json!({"index": 0, "delta": delta, "finish_reason": finish})
            }
        };
        json!({"id": self.name(), "object": self.object(true), "created": self.created, "model": self.model, "choices": [choice]})
    }

    fn usage(&self, completion_tokens: usize) -> Value {
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": self.prompt_tokens + completion_tokens})
    }

    fn name(&self) -> String {
        match self.api {
            Api::Completions => format!("cmpl-lx{}", self.id),
            Api::Chat => format!("chatcmpl-lx{}", self.id),
        }
    }

    fn object(&self, streamed: bool) -> &'static str {
        match (self.api, streamed) {
            (Api::Completions, _) => "text_completion",
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Chat, false) => "chat.completion",
        }
    }
}

fn finish_reason(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Length => "length",
        FinishReason::Stop | FinishReason::Cancelled => "stop",
    }
}

/// Text pieces of a request's tokens; end-of-generation tokens are neither text nor counted.
struct Pieces<'a> {
    served: &'a Served,
    decoder: PieceDecoder,
    count: usize,
}

impl Pieces<'_> {
    fn push(&mut self, token: TokenId) -> Option<String> {
        if self.served.tokenizer.is_eog(token) {
            return None;
        }
        self.count += 1;
        Some(self.decoder.push(self.served.tokenizer.token_bytes(token)))
    }
}

fn stream(state: &State, reply: Reply, mut rx: UnboundedReceiver<Event>, include_usage: bool) -> Answer {
    let (tx, body) = unbounded_channel::<Bytes>();
    let served = state.served.clone();
    let id = reply.id;
    tokio::spawn(async move {
        let send = |v: &Value| tx.send(Bytes::from(format!("data: {v}\n\n"))).is_ok();
        let mut pieces = Pieces { served: &served, decoder: PieceDecoder::default(), count: 0 };
        let mut first = true;
        while let Some(event) = rx.recv().await {
            match event {
                Event::Token(token) => {
                    if let Some(piece) = pieces.push(token) {
                        if !send(&reply.chunk(Some(&piece), None, first)) {
                            return;
                        }
                        first = false;
                    }
                }
                Event::Finished(reason) => {
                    send(&reply.chunk(None, Some(finish_reason(reason)), first));
                    if include_usage {
                        let mut u = reply.chunk(None, None, false);
                        u["choices"] = json!([]);
                        u["usage"] = reply.usage(pieces.count);
                        send(&u);
                    }
                    break;
                }
                Event::Failed(message) => {
                    send(&json!({"error": {"message": message, "type": "server_error", "code": 500}}));
                    break;
                }
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n"));
    });
    // The body's end (the client read it all, or went away) ends the request.
    let engine = Arc::clone(&state.engine);
    let body = EventBody { rx: body, on_drop: Some(Box::new(move || engine.cancel(id))) };
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "text/event-stream")
        .header(hyper::header::CACHE_CONTROL, "no-cache")
        .body(BoxBody::new(body))
        .expect("a valid response")
}

async fn whole(state: &State, reply: Reply, mut rx: UnboundedReceiver<Event>) -> Answer {
    // A client that goes away while waiting drops this future: cancel then too.
    let engine = Arc::clone(&state.engine);
    let id = reply.id;
    let _cancel = OnDrop(Some(Box::new(move || engine.cancel(id))));
    let mut pieces = Pieces { served: &state.served, decoder: PieceDecoder::default(), count: 0 };
    let mut text = String::new();
    while let Some(event) = rx.recv().await {
        match event {
            Event::Token(token) => text += &pieces.push(token).unwrap_or_default(),
            Event::Finished(reason) => {
                let choice = match reply.api {
                    Api::Completions => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason(reason)}),
                    Api::Chat => json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason(reason)}),
                };
                let v = json!({"id": reply.name(), "object": reply.object(false), "created": reply.created, "model": reply.model, "choices": [choice], "usage": reply.usage(pieces.count)});
                return json_answer(StatusCode::OK, &v);
            }
            Event::Failed(message) => return error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        }
    }
    error(StatusCode::INTERNAL_SERVER_ERROR, "the engine stopped")
}

struct OnDrop(Option<Box<dyn FnOnce() + Send + Sync>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// A streamed body fed by a channel; dropping it runs `on_drop`.
struct EventBody {
    rx: UnboundedReceiver<Bytes>,
    on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut().rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

impl Drop for EventBody {
    fn drop(&mut self) {
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn text_answer(status: StatusCode, content_type: &str, text: String) -> Answer {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("a valid response")
}

fn json_answer(status: StatusCode, v: &Value) -> Answer {
    text_answer(status, "application/json", v.to_string())
}

/// An error in the OpenAI shape.
fn error(status: StatusCode, message: &str) -> Answer {
    let kind = if status.is_client_error() { "invalid_request_error" } else { "server_error" };
    json_answer(status, &json!({"error": {"message": message, "type": kind, "code": status.as_u16()}}))
}
