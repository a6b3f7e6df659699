//! `lx serve` on the real default model: the OpenAI-compatible API over our engine, measured
//! by our own client (`lx sweep --target`), checked for clear errors, cancellation and metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{heavy, lx_bin, model_path, Run};
use serde_json::{json, Value};

/// A running `lx serve`, killed on drop.
struct Serve {
    child: Child,
    addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let model = model_path();
    let mut cmd = Command::new(lx_bin());
    cmd.args(["serve", "--model", model.to_str().unwrap(), "--port", "0", "--threads", "2", "--gpu-layers", "0", "--slots", "2", "--ctx", "512"]);
    cmd.args(extra).envs(env.iter().copied()).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let addr = loop {
        let line = lines.next().unwrap_or_else(|| panic!("lx serve ended before serving: {seen:?}")).unwrap();
        if let Some(rest) = line.split("on http://").nth(1).filter(|_| line.starts_with("serving")) {
            break rest.split('/').next().unwrap().to_string();
        }
        seen.push(line);
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Serve { child, addr }
}

/// One HTTP/1.1 exchange: (status, body).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    s.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn metric(addr: &str, name: &str) -> f64 {
    let (_, text) = http(addr, "GET", "/metrics", &[], None);
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn lx_serve_is_measured_by_our_client_with_exact_token_counts() {
    let _lock = heavy();
    let s = serve(&[], &[]);
    assert_eq!(http(&s.addr, "GET", "/health", &[], None).0, 200);
    let (status, models) = http(&s.addr, "GET", "/v1/models", &[], None);
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&models).unwrap()["data"][0]["id"], "gemma-3-270m-q4_k_m");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let target = format!("lx-serve=http://{}/v1", s.addr);
    let model = model_path();
    let args = [
        "sweep", "--model", model.to_str().unwrap(), "--target", target.as_str(), "--prompt-tokens", "32,96", "--concurrency", "2",
        "--max-tokens", "12", "--requests", "4", "--warmup", "1", "--out", out.to_str().unwrap(),
    ];
    let output = Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for p in run["points"].as_array().unwrap() {
        assert_eq!((p["requests"].as_u64(), p["errors"].as_u64()), (Some(4), Some(0)), "{}", r.dump());
        // Our prompts are exactly as long as the server counts them, and every streamed token
        // is one the server counted.
        assert!(p.get("warnings").is_none(), "{}\n{}", p["warnings"], r.dump());
        for sample in p["samples"].as_array().unwrap() {
            assert_eq!(sample["tokens"].as_array().unwrap().len(), 12);
        }
    }
    // Warm-ups included: 2 points × 5 requests, each finished and timed by the server too.
    assert_eq!(metric(&s.addr, "lx_requests_total{outcome=\"finished\"}"), 10.0);
    assert_eq!(metric(&s.addr, "lx_time_to_first_token_seconds_count"), 10.0);
    assert_eq!(metric(&s.addr, "lx_inter_token_latency_seconds_count"), 10.0 * 11.0);
    assert_eq!((metric(&s.addr, "lx_queue_depth"), metric(&s.addr, "lx_running_sequences")), (0.0, 0.0));
}

#[test]
fn lx_serve_answers_whole_and_chat_and_refuses_bad_requests_clearly() {
    let _lock = heavy();
    let s = serve(&[], &[("LX_API_KEY", "sk-local")]);
    let key = [("Authorization", "Bearer sk-local")];
    let (status, body) = http(&s.addr, "POST", "/v1/completions", &[], Some(&json!({"prompt": "Hi", "max_tokens": 4})));
    assert_eq!(status, 401, "{body}");
    let (status, body) = http(&s.addr, "POST", "/v1/completions", &key, Some(&json!({"prompt": "Once upon a time", "max_tokens": 6, "ignore_eos": true})));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 6);
    assert_eq!(v["usage"]["prompt_tokens"], 5, "BOS and four words: {v}");
    assert!(!v["choices"][0]["text"].as_str().unwrap().is_empty());
    let (status, body) = http(&s.addr, "POST", "/v1/chat/completions", &key, Some(&json!({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8})));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(v["choices"][0]["message"]["content"].is_string(), "{v}");
    for (body, needle) in [
        (json!({"prompt": "x ".repeat(600), "max_tokens": 4}), "do not fit the context of a slot (512 tokens)"),
        (json!({"max_tokens": 4}), "prompt: required"),
        (json!({"prompt": [1, 2, 999999]}), "outside the vocabulary"),
        (json!({"prompt": "Hi", "n": 3}), "only n = 1"),
        (json!({"prompt": "Hi", "max_tokens": 0}), "positive integer"),
    ] {
        let (status, text) = http(&s.addr, "POST", "/v1/completions", &key, Some(&body));
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(needle), "{text} lacks {needle}");
    }
    let (status, text) = http(&s.addr, "POST", "/v1/nothing", &key, None);
    assert_eq!(status, 404, "{text}");
    // Still serving after all that.
    assert_eq!(http(&s.addr, "GET", "/health", &[], None).0, 200);
}

#[test]
fn a_client_that_goes_away_frees_its_slot() {
    let _lock = heavy();
    let s = serve(&[], &[]);
    let mut conn = TcpStream::connect(&s.addr).unwrap();
    let body = json!({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": true, "stream": true}).to_string();
    let req = format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    conn.write_all(req.as_bytes()).unwrap();
    // Read until the first tokens have streamed, then hang up.
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while seen.matches("data: ").count() < 3 {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early: {seen}");
        seen += &String::from_utf8_lossy(&buf[..n]);
    }
    assert!(seen.contains("text/event-stream"), "{seen}");
    drop(conn);
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&s.addr, "lx_requests_total{outcome=\"cancelled\"}") < 1.0 {
        assert!(Instant::now() < deadline, "the request was not cancelled");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(metric(&s.addr, "lx_running_sequences"), 0.0);
}

/// Linux: the worker is found as lx serve's child process through /proc.
#[cfg(target_os = "linux")]
#[test]
fn a_worker_that_dies_is_replaced_for_the_next_request() {
    let _lock = heavy();
    let s = serve(&[], &[]);
    let ask = json!({"prompt": "Once upon a time", "max_tokens": 4, "ignore_eos": true});
    assert_eq!(http(&s.addr, "POST", "/v1/completions", &[], Some(&ask)).0, 200);
    let pid = s.child.id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let worker: u32 = children.split_whitespace().next().expect("lx serve has a worker process").parse().unwrap();
    assert!(Command::new("kill").args(["-9", &worker.to_string()]).status().unwrap().success());
    // Dead for good: a zombie whose threads have all exited (only then can lx serve reap it;
    // the leader shows as a zombie while its other threads are still going).
    let reapable = || {
        let zombie = std::fs::read_to_string(format!("/proc/{worker}/stat")).map_or(true, |s| s.contains(") Z "));
        let threads = std::fs::read_dir(format!("/proc/{worker}/task")).map_or(0, |d| d.count());
        zombie && threads <= 1
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !reapable() {
        assert!(Instant::now() < deadline, "the worker did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = http(&s.addr, "POST", "/v1/completions", &[], Some(&ask));
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["usage"]["completion_tokens"], 4, "{body}");
}
