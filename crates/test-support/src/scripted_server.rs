//! A scripted OpenAI-compatible server on a loopback port, for tests: each POST is answered
//! as a handler says (a status, or a stream of timed steps), so every way a server can
//! misbehave is one script away. It records what it was sent, and which streams the client
//! abandoned.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What the scripted server does with one POST.
pub enum Script {
    /// Answer with this status, headers and body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// Stream these steps.
    Stream(Vec<Step>),
}

pub enum Step {
    Wait(u64),
    /// Waits this many milliseconds for every stream in progress when the wait begins, this
    /// one included: a server that slows each token by its load at that moment.
    WaitPerStream(u64),
    /// Raw bytes, as they go on the wire.
    Send(String),
}

pub fn event(v: Value) -> Step {
    Step::Send(format!("data: {v}\n\n"))
}

pub fn text(t: &str, finish: Option<&str>) -> Step {
    event(json!({"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": t, "finish_reason": finish}]}))
}

pub fn usage(prompt: u64, completion: u64) -> Step {
    event(json!({"id": "c", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}))
}

pub fn done() -> Step {
    Step::Send("data: [DONE]\n\n".into())
}

/// `n` one-token chunks, the first after `first_ms`, then one every `gap_ms`, then usage.
pub fn tokens(n: u32, first_ms: u64, gap_ms: u64, prompt: u64) -> Vec<Step> {
    chunks(n, first_ms, || Step::Wait(gap_ms), prompt)
}

/// [`tokens`] from a server whose every stream slows with its load: after the first, each
/// token waits `ms_per_stream` for every stream in progress then, so `c` clients in a closed
/// loop decode at 1000 ÷ (`ms_per_stream` × c) tok/s.
pub fn tokens_under_load(n: u32, first_ms: u64, ms_per_stream: u64, prompt: u64) -> Vec<Step> {
    chunks(n, first_ms, || Step::WaitPerStream(ms_per_stream), prompt)
}

fn chunks(n: u32, first_ms: u64, gap: impl Fn() -> Step, prompt: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    for i in 0..n {
        steps.push(if i == 0 { Step::Wait(first_ms) } else { gap() });
        steps.push(text(" tok", (i + 1 == n).then_some("length")));
    }
    steps.extend([usage(prompt, n.into()), done()]);
    steps
}

/// One POST as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub body: Value,
    pub authorization: Option<String>,
    /// Streams in progress when it arrived (a stream stops counting as its last step is
    /// sent, so a closed-loop client's next request never sees its own previous one).
    pub in_flight: usize,
}

type Handler = dyn Fn(usize, &Request) -> Script + Send + Sync;

/// A server on a loopback port that answers `GET /v1/models` with one model and every POST
/// as `handler(request number, body)` says.
pub struct Scripted {
    /// The API's base address, `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Every POST, in the order received.
    pub requests: Arc<Mutex<Vec<Request>>>,
    /// Streams whose client went away before the script ended.
    pub abandoned: Arc<AtomicUsize>,
    /// When each `Step::Send` of a stream went out: (request number, instant), the truth a
    /// client's own stamps are checked against.
    pub sent: Arc<Mutex<Vec<(usize, Instant)>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Panics if no loopback port can be bound: it is for tests.
pub fn serve(handler: impl Fn(usize, &Request) -> Script + Send + Sync + 'static) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests: Arc<Mutex<Vec<Request>>> = Default::default();
    let abandoned = Arc::new(AtomicUsize::new(0));
    let sent: Arc<Mutex<Vec<(usize, Instant)>>> = Default::default();
    let stop = Arc::new(AtomicBool::new(false));
    let handler: Arc<Handler> = Arc::new(handler);
    let streaming = Arc::new(AtomicUsize::new(0));
    let (b, a, t, s) = (requests.clone(), abandoned.clone(), sent.clone(), stop.clone());
    std::thread::spawn(move || {
        while !s.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let (b, a, t, h, f) = (b.clone(), a.clone(), t.clone(), handler.clone(), streaming.clone());
                    std::thread::spawn(move || connection(conn, &b, &a, &t, h.as_ref(), &f));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    Scripted { url, requests, abandoned, sent, stop }
}

fn connection(conn: TcpStream, requests: &Mutex<Vec<Request>>, abandoned: &AtomicUsize, sent_at: &Mutex<Vec<(usize, Instant)>>, handler: &Handler, streaming: &AtomicUsize) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_nodelay(true);
    let Ok(read_half) = conn.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut out = conn;
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_string());
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    if request_line.starts_with("GET /v1/models") {
        let list = json!({"object": "list", "data": [{"id": "tiny", "object": "model"}]}).to_string();
        let _ = write!(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{list}", list.len());
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
    let in_flight = streaming.load(Ordering::SeqCst);
    let request = Request { path, body: serde_json::from_slice(&body).unwrap_or(Value::Null), authorization, in_flight };
    let n = {
        let mut r = requests.lock().unwrap_or_else(|e| e.into_inner());
        r.push(request.clone());
        r.len() - 1
    };
    match handler(n, &request) {
        Script::Status(code, headers, text) => {
            let mut head = format!("HTTP/1.1 {code} Scripted\r\nContent-Length: {}\r\nConnection: close\r\n", text.len());
            for (k, v) in headers {
                head += &format!("{k}: {v}\r\n");
            }
            let _ = write!(out, "{head}\r\n{text}");
        }
        Script::Stream(steps) => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
            if out.write_all(head.as_bytes()).is_err() {
                return;
            }
            /// Counts a stream from its first step until its last is sent (or its client left).
            struct Streaming<'a>(&'a AtomicUsize, bool);
            impl Streaming<'_> {
                fn end(&mut self) {
                    if std::mem::replace(&mut self.1, false) {
                        self.0.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }
            impl Drop for Streaming<'_> {
                fn drop(&mut self) {
                    self.end();
                }
            }
            streaming.fetch_add(1, Ordering::SeqCst);
            let mut counted = Streaming(streaming, true);
            let last = steps.len().saturating_sub(1);
            for (i, step) in steps.into_iter().enumerate() {
                if i == last {
                    counted.end();
                }
                let sent = match step {
                    Step::Wait(ms) => {
                        std::thread::sleep(Duration::from_millis(ms));
                        Ok(())
                    }
                    Step::WaitPerStream(ms) => {
                        std::thread::sleep(Duration::from_millis(ms * streaming.load(Ordering::SeqCst) as u64));
                        Ok(())
                    }
                    Step::Send(bytes) => {
                        let r = out.write_all(bytes.as_bytes()).and_then(|_| out.flush());
                        let at = Instant::now();
                        sent_at.lock().unwrap_or_else(|e| e.into_inner()).push((n, at));
                        r
                    }
                };
                if sent.is_err() {
                    abandoned.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
    }
}
