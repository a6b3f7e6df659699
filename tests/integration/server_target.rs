//! `lx sweep --target`, `lx live --target`, `lx generate --target`: an OpenAI-compatible
//! server measured beside a backend, through the same client loop, with prompts built by the
//! real model's tokenizer.

use integration_tests::{heavy, lx_bin, model_path, Run};
use lx_format::tokenizer::Tokenizer;
use lx_test_support::scripted_server::{serve, tokens, Script};
use serde_json::Value;

#[test]
fn sweep_measures_a_server_beside_a_backend() {
    let _lock = heavy();
    let model = model_path();
    let tokenizer = Tokenizer::from_path(&model).unwrap();
    // The server counts prompt tokens as llama-server does (BOS included), so a prompt whose
    // text does not round-trip to exactly the tokens we built would show up as a warning.
    let counter = tokenizer.clone();
    let s = serve(move |_, r| {
        let prompt = counter.encode(r.body["prompt"].as_str().unwrap_or_default()).len() as u64;
        Script::Stream(tokens(8, 30, 10, prompt))
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let args = [
        "sweep", "--model", model.to_str().unwrap(), "--backend", "llama", "--target", &format!("scripted={}", s.url),
        "--policy", "continuous,serial", "--prompt-tokens", "48", "--concurrency", "2", "--max-tokens", "8",
        "--requests", "4", "--warmup", "1", "--threads", "2", "--gpu-layers", "0", "--out", out.to_str().unwrap(),
    ];
    let output = std::process::Command::new(lx_bin()).args(args).env("LX_API_KEY", "sk-test-secret").output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    // Two policies for the backend; the server schedules itself, so it is measured once.
    let stdout = r.stdout();
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| scripted |")).collect();
    assert_eq!(rows.len(), 1, "{}", r.dump());
    assert!(rows[0].starts_with("| scripted | server | pp48+tg8 @ c2 |"), "{}", r.dump());
    assert_eq!(r.stdout().lines().filter(|l| l.starts_with("| llama |")).count(), 2, "{}", r.dump());

    let file = std::fs::read_to_string(&out).unwrap();
    assert!(!file.contains("sk-test-secret"), "the API key must never reach a run file");
    let run: Value = serde_json::from_str(&file).unwrap();
    let server = run["points"].as_array().unwrap().iter().find(|p| p["backend"] == "scripted").unwrap();
    assert_eq!(server["scheduled_by_server"], true);
    // This machine's sensors say nothing of a server's machine; every backend point has them.
    assert!(server.get("sensors").is_none(), "{}", server["sensors"]);
    assert!(run["points"].as_array().unwrap().iter().filter(|p| p["backend"] == "llama").all(|p| p["sensors"]["sampler_cpu_share"].is_number()), "{}", r.dump());
    assert_eq!((server["requests"].as_u64(), server["errors"].as_u64()), (Some(4), Some(0)), "{server}");
    assert!(server.get("warnings").is_none(), "prompts were not exactly 48 tokens as the server counts them: {}", server["warnings"]);
    for sample in server["samples"].as_array().unwrap() {
        assert_eq!(sample["token_ms"].as_array().unwrap().len(), 8);
        assert!(sample["token_ms"][0].as_f64().unwrap() >= 30.0, "{sample}");
    }
    let info = run["backends"].as_array().unwrap().iter().find(|b| b["name"] == "scripted").unwrap();
    assert!(info["version"].as_str().unwrap().contains("model tiny"), "{info}");

    let sent = s.requests.lock().unwrap();
    // Warm-up plus measured requests, each with the key and the lengths asked for, and each
    // with a prompt of its own (a server's prompt cache must not answer any of them).
    assert_eq!(sent.len(), 5);
    let mut prompts: Vec<&str> = sent.iter().map(|r| r.body["prompt"].as_str().unwrap()).collect();
    prompts.sort();
    prompts.dedup();
    assert_eq!(prompts.len(), 5, "repeated prompts");
    for req in sent.iter() {
        assert_eq!(req.path, "/v1/completions");
        assert_eq!(req.authorization.as_deref(), Some("Bearer sk-test-secret"));
        assert_eq!(req.body["max_tokens"], 8);
        assert_eq!(req.body["ignore_eos"], true);
    }
}

#[test]
fn a_server_that_cannot_be_reached_fails_its_points_and_the_rest_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let model = model_path();
    let target = format!("gone=http://127.0.0.1:{port}/v1");
    let args = ["sweep", "--model", model.to_str().unwrap(), "--target", &target, "--prompt-tokens", "16,32", "--concurrency", "1", "--max-tokens", "4", "--requests", "2"];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output };
    assert_eq!(r.code(), Some(2), "{}", r.dump());
    assert!(r.stderr().contains("cannot reach http://127.0.0.1:"), "{}", r.dump());
    // Both points are reported (as failed), not dropped.
    assert_eq!(r.stdout().lines().filter(|l| l.starts_with("| gone |")).count(), 2, "{}", r.dump());
}

#[test]
fn live_mode_measures_a_server_through_the_same_client_loop() {
    // No model load: the server answers 8 tokens, the first after 40 ms, then every 20 ms.
    let model = model_path();
    let s = serve(|_, _| Script::Stream(tokens(8, 40, 20, 16)));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.json");
    let args = [
        "live", "--model", model.to_str().unwrap(), "--target", &format!("scripted={}", s.url), "--prompt-tokens", "16",
        "--max-tokens", "8", "--concurrency", "3", "--requests", "24", "--every", "0.5", "--out", out.to_str().unwrap(),
    ];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{}", r.dump());
    let p = &points[0];
    assert_eq!((p["backend"].as_str(), p["scheduled_by_server"].as_bool()), (Some("scripted"), Some(true)), "{p}");
    assert!(p["requests"].as_u64().unwrap() >= 18 && p["errors"] == 0, "{p}");
    // The server's schedule is the truth: each stamp is taken on our side at arrival, so it
    // can only come later than the server sent it, and on loopback not by much.
    let (ttft, gap) = (p["ttft_ms"]["p50"].as_f64().unwrap(), 1000.0 / p["decode_tps"]["p50"].as_f64().unwrap());
    assert!((40.0..90.0).contains(&ttft), "TTFT p50 {ttft} ms for a server that answers after 40 ms\n{p}");
    assert!((19.0..30.0).contains(&gap), "decode gap {gap} ms for a server that sends every 20 ms\n{p}");
    for sample in p["samples"].as_array().unwrap() {
        assert_eq!(sample["token_ms"].as_array().unwrap().len(), 8, "{sample}");
    }
    let sent = s.requests.lock().unwrap();
    assert!(sent.len() >= 24, "{} requests reached the server", sent.len());
    assert!(sent.iter().all(|q| q.body["max_tokens"] == 8 && q.body["ignore_eos"] == true));
    // The server's name, not a backend's, leads the table.
    assert!(r.stdout().lines().any(|l| l.starts_with("| scripted | server |")), "{}", r.dump());
}

#[test]
fn generate_streams_one_prompt_from_a_server_with_its_timing() {
    let model = model_path();
    let s = serve(|_, _| Script::Stream(tokens(5, 30, 10, 4)));
    let args = ["generate", "--model", model.to_str().unwrap(), "--target", &s.url, "--prompt", "Once upon a time", "--max-tokens", "5"];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    // The text as it streamed, after the prompt; the server's five chunks counted as tokens.
    assert_eq!(r.stdout().lines().next(), Some("Once upon a time tok tok tok tok tok"), "{}", r.dump());
    let timing = r.stderr().lines().find(|l| l.starts_with("prompt ")).unwrap_or_default().to_string();
    let ttft: f64 = timing.split("TTFT ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok()).unwrap_or(-1.0);
    assert!((30.0..80.0).contains(&ttft), "TTFT {ttft} ms for a server that answers after 30 ms\n{}", r.dump());
    assert!(timing.contains("· 5 tokens ·") && !timing.contains("prefill"), "a server has no prefill passes to time: {timing}");
    let sent = s.requests.lock().unwrap();
    // Without --ignore-eos the server may stop at its end-of-sequence token, as the model would.
    assert_eq!((sent.len(), sent[0].body["max_tokens"].as_u64(), sent[0].body.get("ignore_eos")), (1, Some(5), None));
    drop(sent);
    // One backend or one server: both at once is refused, with the reason.
    let both = ["generate", "--model", model.to_str().unwrap(), "--backend", "llama", "--target", &s.url, "--prompt", "x"];
    let output = std::process::Command::new(lx_bin()).args(both).output().unwrap();
    let r = Run { args: both.iter().map(|a| a.to_string()).collect(), output };
    assert_eq!(r.code(), Some(2), "{}", r.dump());
    assert!(r.stderr().contains("cannot be used with"), "{}", r.dump());
}

/// A TLS server that streams OpenAI completions, in Python's standard library (an
/// implementation of TLS that is not ours), with a certificate for 127.0.0.1 made by
/// `openssl`. Prints its port, then serves until killed.
const HTTPS_SERVER: &str = r#"
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send_json(self, v):
        b = json.dumps(v).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.send_json({"object": "list", "data": [{"id": "tls-model", "object": "model"}]})
    def do_POST(self):
        ask = json.loads(self.rfile.read(int(self.headers["content-length"])))
        n = ask["max_tokens"]
        self.send_response(200); self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close"); self.end_headers()
        for i in range(n):
            c = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": " tok", "finish_reason": "length" if i + 1 == n else None}]}
            self.wfile.write(("data: " + json.dumps(c) + "\n\n").encode()); self.wfile.flush()
        self.wfile.write(("data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 16, "completion_tokens": n}}) + "\n\ndata: [DONE]\n\n").encode())
        self.close_connection = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

#[test]
fn an_https_server_is_measured_and_an_untrusted_certificate_is_a_clear_error_per_request() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    // A certificate authority of the test's own, and the server's certificate signed by it.
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (ca, cert, key) = (path("ca.pem"), path("cert.pem"), path("key.pem"));
    std::fs::write(path("leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n").unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    for args in [
        [&["req", "-x509"][..], &ec, &["-days", "2", "-subj", "/CN=lx test CA", "-keyout", &path("ca.key"), "-out", &ca]].concat(),
        [&["req"][..], &ec, &["-subj", "/CN=127.0.0.1", "-keyout", &key, "-out", &path("leaf.csr")]].concat(),
        vec!["x509", "-req", "-in", &path("leaf.csr"), "-CA", &ca, "-CAkey", &path("ca.key"), "-CAcreateserial", "-days", "2", "-extfile", &path("leaf.ext"), "-out", &cert],
    ] {
        let made = std::process::Command::new("openssl").args(&args).output().expect("openssl makes the test certificates");
        assert!(made.status.success(), "openssl {}: {}", args.join(" "), String::from_utf8_lossy(&made.stderr));
    }
    let mut server = std::process::Command::new("python3")
        .args(["-c", HTTPS_SERVER, &cert, &key])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the TLS server");
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = format!("tls=https://127.0.0.1:{}/v1", port.trim());
    let model = model_path();
    let sweep = |trust: Option<&std::path::Path>, out: &std::path::Path| {
        let args = ["sweep", "--model", model.to_str().unwrap(), "--target", &url, "--prompt-tokens", "16", "--max-tokens", "4", "--requests", "2", "--warmup", "0", "--concurrency", "1", "--out", out.to_str().unwrap()];
        let mut cmd = std::process::Command::new(lx_bin());
        cmd.args(args);
        // The platform's trust store, as rustls reads it on Linux: SSL_CERT_FILE first.
        match trust {
            Some(file) => cmd.env("SSL_CERT_FILE", file),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        Run { args: args.iter().map(|a| a.to_string()).collect(), output: cmd.output().unwrap() }
    };
    // Trusted: measured like any server, over TLS.
    let out = dir.path().join("tls.json");
    let r = sweep(Some(std::path::Path::new(&ca)), &out).ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let point = &run["points"][0];
    assert_eq!((point["requests"].as_u64(), point["errors"].as_u64()), (Some(2), Some(0)), "{}", r.dump());
    assert!(point["samples"].as_array().unwrap().iter().all(|s| s["token_ms"].as_array().unwrap().len() == 4), "{point}");
    // A certificate nobody vouches for: the server cannot even be asked for its models, and
    // the sweep says why (no silent fallback to plain HTTP, no panic).
    let untrusted = sweep(None, &dir.path().join("untrusted.json"));
    let _ = server.kill();
    let _ = server.wait();
    assert_ne!(untrusted.code(), Some(0), "{}", untrusted.dump());
    assert!(untrusted.stderr().to_lowercase().contains("certificate"), "the error names the certificate\n{}", untrusted.dump());
    assert!(!untrusted.stderr().contains("panicked"), "{}", untrusted.dump());
}
