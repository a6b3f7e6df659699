//! Serving techniques on the real model: open-loop sweeps with mixed lengths, request
//! timelines and goodput in the run file, Ctrl-C mid-sweep, and the teaching demos, whose
//! checks are ratios within one run. Kept short: the heavy tests here take a few minutes
//! on two cores in all.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{heavy, lx, lx_bin, model_path, Run};
use serde_json::Value as Json;

#[test]
fn open_loop_sweep_with_mixed_lengths_writes_timelines_and_goodput() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let run = lx(&[
        "sweep", "--model", model.to_str().unwrap(), "--threads", "2", "--policy", "continuous,static", "--rate", "4",
        "--concurrency", "2", "--prompt-tokens", "16..48", "--max-tokens", "2..6", "--requests", "5", "--warmup", "1",
        "--seed", "3", "--slo-ttft-ms", "60000", "--format", "csv", "--out", out.to_str().unwrap(),
    ])
    .ok();
    let csv = run.stdout();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for col in ["arrivals", "rate", "slo_met", "goodput_rpm"] {
        assert!(head.contains(&col), "no {col} column\n{}", run.dump());
    }
    let file: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["schema_version"], 2);
    let points = file["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let mut prompt_lens = std::collections::BTreeSet::new();
    let mut per_policy = Vec::new();
    for p in points {
        assert_eq!(p["errors"], 0, "{p}");
        assert_eq!(p["requests"], 5);
        assert_eq!(p["load"]["arrivals"]["mode"], "poisson");
        assert_eq!(p["load"]["arrivals"]["rate"], 4.0);
        assert!(p["goodput_rpm"].as_f64().unwrap() > 0.0);
        assert_eq!(p["slo"]["decode_tps"], 4.5);
        let mut lens = Vec::new();
        for s in p["samples"].as_array().unwrap() {
            let prompt = s["prompt_tokens"].as_u64().unwrap();
            let tokens = s["tokens"].as_array().unwrap().len() as u64;
            assert!((16..=48).contains(&prompt) && (2..=6).contains(&tokens), "{s}");
            assert_eq!(tokens, s["max_tokens"].as_u64().unwrap());
            prompt_lens.insert(prompt);
            lens.push((prompt, tokens));
            let t = &s["timeline"];
            assert!(t["queue_ms"].as_f64().is_some(), "{t}");
            assert_eq!(t["decode"].as_array().unwrap().len() as u64, tokens, "one timeline entry per token: {t}");
            let prefilled: u64 = t["prefill"].as_array().unwrap().iter().map(|x| x["tokens"].as_u64().unwrap()).sum();
            assert_eq!(prefilled, prompt);
            assert!(t["decode"].as_array().unwrap().iter().all(|d| d["batch_seqs"].as_u64().unwrap() >= 1), "{t}");
        }
        per_policy.push(lens);
    }
    assert!(prompt_lens.len() >= 3, "lengths were not drawn from the range: {prompt_lens:?}");
    assert_eq!(per_policy[0], per_policy[1], "the same seed must give both policies the same workload");
}

/// A child's stderr as it arrives, read on a thread of its own (a full pipe would block it).
struct Stderr {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Stderr {
    /// What has arrived so far.
    fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }
    /// Everything, once the child has ended.
    fn all(self) -> String {
        self.reader.join().unwrap();
        self.text.lock().unwrap().clone()
    }
}

/// Starts `command` with its stdout discarded and its stderr read as it arrives.
fn with_stderr(command: &mut Command) -> (std::process::Child, Stderr) {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (pipe, text) = (child.stderr.take().unwrap(), std::sync::Arc::clone(&text));
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut all = text.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        })
    };
    (child, Stderr { text, reader })
}

#[test]
fn ctrl_c_mid_sweep_writes_what_was_measured_and_says_so() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let (mut child, stderr) = with_stderr(
        Command::new(lx_bin())
            .args(["sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "32", "--concurrency", "1", "--max-tokens", "8"])
            .args(["--rate", "1,2,3", "--requests", "30", "--warmup", "0", "--threads", "2", "--out", out.to_str().unwrap()]),
    );
    // Once the worker has loaded, the first point sends a request a second: let a few
    // complete, then interrupt.
    let loaded = Instant::now();
    while !stderr.text().contains("loaded in") {
        assert!(loaded.elapsed() < Duration::from_secs(120), "the worker never loaded\n{}", stderr.text());
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30), "stopping took {:?}", started.elapsed());
    let stderr = stderr.all();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped by the user"), "{stderr}");
    let file: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["stopped"], true);
    let points = file["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "only the interrupted point: {file}");
    assert_eq!(points[0]["stopped"], true);
    let samples = points[0]["samples"].as_array().unwrap();
    assert!(points[0]["requests"].as_u64().unwrap() >= 1, "completed requests are kept");
    // Every request sent got its bookkeeping finished: completed, or cancelled.
    assert!(samples.iter().all(|s| !s["finish"].is_null()), "{samples:?}");
}

/// Ctrl-C at each stage of a sweep that comes before or after the measuring (mid-point is the
/// test above): while `lx` opens the model, while the worker loads it, during the warm-up,
/// and between points.
/// Each ends within seconds with exit 130 (or, before `lx` has anything to keep, by the
/// signal itself), never a panic; the run file, when there is one, is whole and says it was
/// stopped; and the worker does not outlive `lx`.
#[test]
fn ctrl_c_at_every_stage_of_a_sweep() {
    // An ignored signal stays ignored across exec, so lx would lose a Ctrl-C that comes
    // before it sets its handler: say so, rather than fail on a sweep that was never stopped.
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let ignored = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).unwrap_or(0);
        assert!(ignored & (1 << 1) == 0, "these tests run with SIGINT ignored (started in the background of a non-interactive shell?), which every lx they start inherits: start them in the foreground, or through `env --default-signal=INT`");
    }
    let _lock = heavy();
    let model = model_path();
    // (stage, whether it has begun: from stderr, the run file, and whether a worker runs)
    type Begun = fn(&str, Option<&Json>, bool) -> bool;
    let stages: [(&str, Begun); 4] = [
        ("opening the model", |_, _, _| true),
        ("loading the worker", |_, _, worker| worker),
        ("warm-up", |stderr, _, _| stderr.contains("loaded in")),
        ("between points", |_, run, _| run.is_some_and(|r| r["points"].as_array().is_some_and(|p| !p.is_empty()))),
    ];
    for (stage, begun) in stages {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.json");
        let (mut child, stderr) = with_stderr(
            Command::new(lx_bin())
                .args(["sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "16,24", "--concurrency", "1", "--max-tokens", "48"])
                .args(["--requests", "2", "--warmup", "3", "--threads", "2", "--out", out.to_str().unwrap()]),
        );
        let started = Instant::now();
        let mut worker = None;
        loop {
            assert!(started.elapsed() < Duration::from_secs(120), "{stage}: never began\n{}", stderr.text());
            let run = std::fs::read(&out).ok().and_then(|b| serde_json::from_slice::<Json>(&b).ok());
            if worker.is_none() {
                let found = Command::new("pgrep").args(["-P", &child.id().to_string()]).output().unwrap();
                worker = String::from_utf8_lossy(&found.stdout).split_whitespace().next().map(String::from);
            }
            if begun(&stderr.text(), run.as_ref(), worker.is_some()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
        let interrupted = Instant::now();
        let status = child.wait().unwrap();
        let stderr = stderr.all();
        assert!(interrupted.elapsed() < Duration::from_secs(30), "{stage}: stopping took {:?}", interrupted.elapsed());
        assert!(!stderr.contains("panicked"), "{stage}: {stderr}");
        use std::os::unix::process::ExitStatusExt;
        let measured_anything = out.exists();
        match (status.code(), status.signal()) {
            (Some(130), _) => assert!(stderr.contains("stopped by the user"), "{stage}: {stderr}"),
            (None, Some(2)) => assert!(!measured_anything, "{stage}: ended by the signal itself after writing a run file\n{stderr}"),
            other => panic!("{stage}: ended with {other:?}\n{stderr}"),
        }
        if measured_anything {
            let run: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("a whole run file");
            assert_eq!(run["stopped"], true, "{stage}: {run}");
            for p in run["points"].as_array().unwrap() {
                let samples = p["samples"].as_array().unwrap();
                assert!(samples.iter().all(|s| !s["finish"].is_null()), "{stage}: every request sent is booked: {p}");
            }
        }
        if let Some(pid) = worker {
            let gone = Instant::now();
            // A zombie (exited, not yet reaped by whoever adopted it) counts as gone.
            let alive = || {
                let ps = Command::new("ps").args(["-o", "stat=", "-p", &pid]).output().unwrap();
                let state = String::from_utf8_lossy(&ps.stdout).trim().to_string();
                !state.is_empty() && !state.starts_with('Z')
            };
            while alive() {
                assert!(gone.elapsed() < Duration::from_secs(10), "{stage}: worker {pid} outlived lx");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        eprintln!("{stage}: {:?} after {:.1} s", status, started.elapsed().as_secs_f64());
    }
}

/// Run a demo; on failure run it once more (llama.cpp's spinning threads make a busy
/// machine distort one run), and fail only if it fails twice. Both reports are printed,
/// and a retry is recorded in the file `LX_TEST_RETRIES` names, so the test run's closing
/// lines count it (a technique that holds only every other time stays visible).
fn demo(name: &str) -> Run {
    demo_with(name, &[])
}

/// [`demo`] with more arguments.
fn demo_with(name: &str, more: &[&str]) -> Run {
    let model = model_path();
    let mut args = vec!["demo", name, "--model", model.to_str().unwrap(), "--threads", "2"];
    args.extend_from_slice(more);
    let first = lx(&args);
    eprintln!("{}", first.stdout());
    if first.code() == Some(0) {
        return first;
    }
    eprintln!("demo {name} did not hold on the first run; running it again\n{}", first.dump());
    if let Some(path) = std::env::var_os("LX_TEST_RETRIES") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("retry log");
        // Which check failed on the first run: the closing line shows it even though the
        // test passed on the second (its own output is then hidden).
        let failed: Vec<String> = first.stdout().lines().filter(|l| l.starts_with("FAIL")).map(|l| l.trim().to_string()).collect();
        writeln!(f, "demo {name} (first run: {})", if failed.is_empty() { "no check line; see its exit status".to_string() } else { failed.join("; ") }).expect("retry log");
    }
    let second = lx(&args);
    eprintln!("{}", second.stdout());
    second.ok()
}

#[test]
fn demo_prompt_length() {
    let _lock = heavy();
    // The long prompt is sized from the short one's measured prefill; the checks name it.
    let out = demo("prompt-length").stdout();
    let sizing = out.lines().find(|l| l.starts_with("sized to this machine: the 64-token prompt was computed at ")).unwrap_or_else(|| panic!("no sizing line: {out}"));
    let long = sizing.split("so the long prompt is ").nth(1).and_then(|rest| rest.split(' ').next()).unwrap();
    assert!(["1024", "2048", "4096"].contains(&long), "{sizing}");
    assert!(out.contains(&format!("ok   TTFT p50, prompt {long} ÷ prompt 64")), "{out}");
}

/// `prompt-length` measures a server alone: here one that takes 1 ms per four characters of
/// prompt before its first token and streams at a fixed pace after it, as prefill and decode do.
#[test]
fn demo_prompt_length_on_a_server_alone() {
    use lx_test_support::scripted_server::{serve, tokens, Script};
    let server = serve(|_, r| {
        let chars = r.body["prompt"].as_str().map_or(0, str::len) as u64;
        Script::Stream(tokens(r.body["max_tokens"].as_u64().unwrap_or(1) as u32, 20 + chars / 4, 5, 64))
    });
    let out = demo_with("prompt-length", &["--target", &format!("paced={}", server.url)]).stdout();
    assert!(out.contains("ok   TTFT p50, prompt 1024 ÷ prompt 64") && out.contains("ok   decode tok/s p50"), "{out}");
    assert!(server.requests.lock().unwrap().len() >= 5, "every request went to the server");
    // A demo of our scheduler still refuses a server alone; one server at a time.
    let model = model_path();
    let refused = lx(&["demo", "static-vs-continuous", "--model", model.to_str().unwrap(), "--target", &server.url]);
    assert!(refused.stderr().contains("--target works with: prompt-length (the server alone), disaggregation (servers beside the backend)"), "{}", refused.dump());
    let two = lx(&["demo", "prompt-length", "--model", model.to_str().unwrap(), "--target", &server.url, "--target", &format!("b={}", server.url)]);
    assert!(two.stderr().contains("demo prompt-length measures one server at a time (got 2 --target)"), "{}", two.dump());
}

#[test]
fn demo_batching() {
    let _lock = heavy();
    demo("batching");
}

#[test]
fn demo_static_vs_continuous() {
    let _lock = heavy();
    demo("static-vs-continuous");
}

#[test]
fn demo_chunked_prefill() {
    let _lock = heavy();
    demo("chunked-prefill");
}

#[test]
fn demo_prefix_cache() {
    let _lock = heavy();
    demo("prefix-cache");
}

#[test]
fn demo_kv_cache() {
    let _lock = heavy();
    let out = demo("kv-cache").stdout();
    assert!(out.contains("ok   sequences of 512 tokens a 256 MiB cache holds, q8_0 ÷ f16"), "{out}");
}

#[test]
fn demo_speculative() {
    let _lock = heavy();
    let out = demo("speculative").stdout();
    assert!(out.contains("ok   decode tok/s p50 per request, prompt lookup ÷ plain, copying a passage"), "{out}");
}

/// The only run of a demo that scores its settings' fidelity before its points (the
/// lesson "is the faster backend computing the same model?").
#[test]
fn demo_fidelity() {
    let _lock = heavy();
    let out = demo("fidelity").stdout();
    assert!(out.contains("ok   mean KL divergence, prompt lookup against plain decoding (nats)"), "{out}");
    assert!(out.contains("ok   mean KL divergence, q4_0 cache ÷ prompt lookup's"), "{out}");
    let row = out.lines().find(|l| l.starts_with("| f16 cache |")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.ends_with("| 0 | 100.00% |"), "llama.cpp's f16 cache is the reference itself: {row}");
    // On a backend without KV cache types it is refused before anything loads.
    let refused = lx(&["demo", "fidelity", "--backend", "candle", "--model", model_path().to_str().unwrap()]);
    assert!(refused.stderr().contains("demo fidelity measures a quantized KV cache, which runs on llama.cpp only"), "{}", refused.dump());
}

#[test]
fn demo_disaggregation_and_its_workload_sent_to_a_server() {
    use lx_test_support::scripted_server::{serve, tokens, Script};
    let _lock = heavy();
    // A server that streams every request's tokens quickly, whatever it is asked.
    let server = serve(|_, r| Script::Stream(tokens(r.body["max_tokens"].as_u64().unwrap_or(1) as u32, 5, 2, 64)));
    let out = demo_with("disaggregation", &["--target", &format!("scripted={}", server.url)]).stdout();
    assert!(out.contains("ok   the decoders' ITL p99, continuous ÷ disaggregated"), "{out}");
    // The same five requests reached the server (the warm-up's one before them), and its row
    // is measured with the same columns.
    let asked: Vec<u64> = server.requests.lock().unwrap().iter().map(|r| r.body["max_tokens"].as_u64().unwrap()).collect();
    assert_eq!(asked.iter().filter(|&&m| m == 4).count(), 2, "{asked:?}");
    let row = out.lines().find(|l| l.starts_with("| scripted |")).unwrap_or_else(|| panic!("no server row: {out}"));
    assert!(row.ends_with("| 0 |"), "{row}");
    // Any other demo refuses a server, saying which take one.
    let refused = lx(&["demo", "batching", "--model", model_path().to_str().unwrap(), "--target", &server.url]);
    assert_eq!(refused.code(), Some(1), "{}", refused.dump());
    assert!(refused.stderr().contains("(the server alone), disaggregation (servers beside the backend)"), "{}", refused.dump());
}
