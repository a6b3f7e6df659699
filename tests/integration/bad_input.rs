//! Bad input gets one clear message and a non-zero exit, never a panic trace; a worker
//! killed mid-sweep costs only its point.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{heavy, lx, lx_bin, model_path};
use lx_engine::gguf::{Array, GgufWriter, Value};
use serde_json::Value as Json;

fn sweep_args<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["sweep", "--model", model, "--prompt-tokens", "16", "--concurrency", "1", "--max-tokens", "4", "--requests", "1", "--threads", "2"];
    v.extend_from_slice(extra);
    v
}

#[test]
fn missing_model_file() {
    lx(&sweep_args("/nonexistent/model.gguf", &[])).fails_with("model file not found: /nonexistent/model.gguf");
    lx(&["generate", "--model", "/nonexistent/model.gguf", "--prompt", "hi"]).fails_with("model file not found");
}

#[test]
fn file_that_is_not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.gguf");
    std::fs::write(&path, "these are not the weights you are looking for\n".repeat(100)).unwrap();
    lx(&sweep_args(path.to_str().unwrap(), &[])).fails_with("not a GGUF file");
}

#[test]
fn truncated_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truncated.gguf");
    let head: Vec<u8> = std::fs::read(model_path()).unwrap().into_iter().take(8 << 20).collect();
    std::fs::write(&path, head).unwrap();
    lx(&sweep_args(path.to_str().unwrap(), &[])).fails_with("truncated");
}

/// A well-formed GGUF of an architecture no backend implements ("nosucharch").
pub fn alien_gguf(path: &std::path::Path) {
    let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "\u{2581}a", "a", "b"].map(String::from).to_vec();
    GgufWriter::new()
        .kv("general.architecture", Value::String("nosucharch".into()))
        .kv("nosucharch.context_length", Value::U32(128))
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0])))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(vec![2, 3, 3, 1, 1, 1])))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
        .tensor_f32("token_embd.weight", &[4, 6], &[0.0; 24])
        .write(path)
        .unwrap();
}

#[test]
fn architecture_llama_cpp_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alien.gguf");
    alien_gguf(&path);
    lx(&sweep_args(path.to_str().unwrap(), &[])).fails_with("nosucharch");
}

#[test]
fn prompt_longer_than_the_context() {
    let model = model_path();
    lx(&sweep_args(model.to_str().unwrap(), &["--prompt-tokens", "32760", "--max-tokens", "64"])).fails_with("exceeds the model's context of 32768");
}

#[test]
fn zero_concurrency_and_other_nonsense() {
    let model = model_path();
    let m = model.to_str().unwrap();
    lx(&sweep_args(m, &["--concurrency", "0"])).fails_with("--concurrency must be at least 1");
    lx(&sweep_args(m, &["--policy", "fastest"])).fails_with("unknown policy 'fastest'");
    lx(&sweep_args(m, &["--backend", "tensorrt"])).fails_with("unknown backend 'tensorrt'");
    lx(&sweep_args(m, &["--prompt-tokens", "abc"])).fails_with("'abc'");
}

/// A three-point sweep whose worker gets `signal` once the first point is in the run file:
/// (exit status, stdout, stderr, the run file).
fn sweep_with_worker_signalled(signal: &str, extra: &[&str]) -> (Option<i32>, String, String, Json) {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let child = Command::new(lx_bin())
        .args(["sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "32,48,64", "--concurrency", "1", "--max-tokens", "16"])
        .args(["--requests", "6", "--warmup", "0", "--threads", "2", "--format", "md", "--out", out.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first point to land in the run file, then signal the worker of the second.
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(120), "the first point never finished");
        let points = std::fs::read(&out).ok().and_then(|b| serde_json::from_slice::<Json>(&b).ok()).map(|r| r["points"].as_array().map_or(0, |p| p.len()));
        if points == Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let workers = Command::new("pgrep").args(["-P", &child.id().to_string()]).output().unwrap();
    let pid = String::from_utf8_lossy(&workers.stdout).trim().to_string();
    assert!(!pid.is_empty(), "no worker process found");
    assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let run: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    (output.status.code(), stdout, stderr, run)
}

/// The first point is whole, the second failed saying `why`, the third ran on a fresh worker.
fn only_the_signalled_point_failed(code: Option<i32>, stdout: &str, stderr: &str, run: &Json, why: &str) {
    assert_eq!(code, Some(2), "a sweep with a failed point exits 2\n{stdout}\n{stderr}");
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{run}");
    assert_eq!((points[0]["errors"].as_u64(), points[0]["requests"].as_u64()), (Some(0), Some(6)));
    assert!(points[1]["errors"].as_u64().unwrap() >= 1);
    let said = points[1]["error_messages"].to_string();
    assert!(said.contains(why), "the failed point should say {why:?}: {said}");
    assert!(stdout.contains(why), "the table should show the error row\n{stdout}");
    assert_eq!((points[2]["errors"].as_u64(), points[2]["requests"].as_u64()), (Some(0), Some(6)), "{}", points[2]);
}

#[test]
fn worker_killed_mid_sweep_keeps_completed_points() {
    let (code, stdout, stderr, run) = sweep_with_worker_signalled("-KILL", &[]);
    only_the_signalled_point_failed(code, &stdout, &stderr, &run, "signal 9");
}

/// A worker that stops answering (SIGSTOP: alive, silent) is given up after the hang
/// timeout, killed, and replaced for the next point.
#[test]
fn worker_stopped_mid_sweep_is_given_up_after_the_hang_timeout() {
    let started = Instant::now();
    let (code, stdout, stderr, run) = sweep_with_worker_signalled("-STOP", &["--hang-timeout", "3"]);
    only_the_signalled_point_failed(code, &stdout, &stderr, &run, "stopped answering");
    assert!(started.elapsed() < Duration::from_secs(120), "the hang was not cut short");
}
