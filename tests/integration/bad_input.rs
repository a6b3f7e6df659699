//! Bad input gets one clear message and a non-zero exit, never a panic trace; a worker
//! killed mid-sweep costs only its point.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{heavy, lx, lx_bin, model_path};
use lx_format::gguf::{Array, GgufWriter, Value};
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

/// A three-point sweep of `model`; once the first point is in the run file, `fault` gets
/// `lx`'s process id. Returns (exit status, stdout, stderr, the run file).
fn sweep_with_fault(model: &Path, extra: &[&str], fault: impl FnOnce(u32)) -> (Option<i32>, String, String, Json) {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let child = Command::new(lx_bin())
        .args(["sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "32,48,64", "--concurrency", "1", "--max-tokens", "16"])
        .args(["--requests", "6", "--warmup", "0", "--threads", "2", "--format", "md", "--out", out.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(120), "the first point never finished");
        let points = std::fs::read(&out).ok().and_then(|b| serde_json::from_slice::<Json>(&b).ok()).map(|r| r["points"].as_array().map_or(0, |p| p.len()));
        if points == Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    fault(child.id());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let run: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    (output.status.code(), stdout, stderr, run)
}

/// [`sweep_with_fault`] on the default model, sending `signal` to the worker measuring the
/// second point.
fn sweep_with_worker_signalled(signal: &str, extra: &[&str]) -> (Option<i32>, String, String, Json) {
    sweep_with_fault(&model_path(), extra, |lx| {
        let workers = Command::new("pgrep").args(["-P", &lx.to_string()]).output().unwrap();
        let pid = String::from_utf8_lossy(&workers.stdout).trim().to_string();
        assert!(!pid.is_empty(), "no worker process found");
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    })
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

/// A copy of the default model in `dir` (a hard link where the file system allows), so a
/// test may delete or replace it.
fn model_copy(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    if std::fs::hard_link(model_path(), &path).is_err() {
        std::fs::copy(model_path(), &path).unwrap();
    }
    path
}

/// The first point is whole; from the first one started after the model file changed, every
/// point is refused saying `what` happened to it, and none measures the new file.
fn measuring_stopped_when_the_model_changed(code: Option<i32>, stdout: &str, stderr: &str, run: &Json, what: &str) {
    assert_eq!(code, Some(2), "a sweep with refused points exits 2\n{stdout}\n{stderr}");
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{run}");
    assert_eq!((points[0]["errors"].as_u64(), points[0]["requests"].as_u64()), (Some(0), Some(6)));
    let refused: Vec<&Json> = points.iter().filter(|p| p["errors"].as_u64() != Some(0)).collect();
    assert!(!refused.is_empty() && refused.len() <= 2, "{run}");
    assert!(points.last().unwrap()["errors"].as_u64().unwrap() >= 1, "the last point must not measure a changed file: {run}");
    for p in refused {
        assert_eq!(p["requests"].as_u64(), Some(0), "{p}");
        let said = p["error_messages"].to_string();
        assert!(said.contains("changed during the run") && said.contains(what), "{said}");
    }
    assert!(stderr.contains(what), "{stderr}");
}

#[test]
fn model_file_deleted_mid_sweep_is_not_measured_again() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_copy(dir.path(), "model.gguf");
    let (code, stdout, stderr, run) = sweep_with_fault(&model, &[], |_| std::fs::remove_file(&model).unwrap());
    measuring_stopped_when_the_model_changed(code, &stdout, &stderr, &run, "it was deleted or moved");
}

#[test]
fn model_file_replaced_mid_sweep_is_not_measured_under_the_old_name() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_copy(dir.path(), "model.gguf");
    let other = dir.path().join("incoming.gguf");
    std::fs::copy(model_path(), &other).unwrap();
    let (code, stdout, stderr, run) = sweep_with_fault(&model, &[], |_| std::fs::rename(&other, &model).unwrap());
    measuring_stopped_when_the_model_changed(code, &stdout, &stderr, &run, "another file was put in its place");
}

/// A full disk while the run file is rewritten: the previous file stays whole, the measuring
/// goes on (every row is printed), and the sweep ends with an error that says what the file
/// holds. The small disk is a 2 MiB tmpfs mounted in a private mount namespace.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_keeps_the_last_run_file_whole_and_the_measuring_going() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (small, kept) = (dir.path().join("small"), dir.path().join("kept"));
    std::fs::create_dir_all(&small).unwrap();
    std::fs::create_dir_all(&kept).unwrap();
    // Mount the small disk, start the sweep on it, fill the disk once the first point is
    // written, and keep what is there when the sweep ends (the mount ends with the namespace).
    let script = r#"set -u
mount -t tmpfs -o size=2m tmpfs "$SMALL" || exit 97
"$LX" sweep --model "$MODEL" --prompt-tokens 32,48,64 --concurrency 1 --max-tokens 16 --requests 6 \
  --warmup 0 --threads 2 --out "$SMALL/run.json" >"$KEPT/stdout" 2>"$KEPT/stderr" &
lx=$!
while [ ! -s "$SMALL/run.json" ]; do sleep 0.02; done
head -c 8M /dev/zero >"$SMALL/filler" 2>/dev/null
wait "$lx"; code=$?
cp "$SMALL/run.json" "$KEPT/run.json"
ls "$SMALL" >"$KEPT/files"
exit "$code"
"#;
    // A user namespace lets anyone mount there; where those are closed (some hardened
    // kernels), passwordless sudo does. Neither: the test fails and says so.
    let ways: [&[&str]; 2] = [&["unshare", "--user", "--map-root-user", "--mount"], &["sudo", "-n", "unshare", "--mount"]];
    let mut tried = Vec::new();
    let code = ways
        .iter()
        .find_map(|way| {
            let status = Command::new(way[0])
                .args(&way[1..])
                .args(["sh", "-c", script])
                .env("SMALL", &small)
                .env("KEPT", &kept)
                .env("LX", lx_bin())
                .env("MODEL", model_path())
                .status();
            match status {
                Ok(s) if kept.join("run.json").exists() => Some(s.code()),
                other => {
                    tried.push(format!("{}: {other:?}", way.join(" ")));
                    None
                }
            }
        })
        .unwrap_or_else(|| panic!("this test needs a private mount (a user namespace, or passwordless sudo): {tried:?}"));
    let read = |name: &str| std::fs::read_to_string(kept.join(name)).unwrap();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    assert_eq!(code, Some(1), "the sweep fails at its end when its file could not be written\n{stdout}\n{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains("measuring goes on"), "{stderr}");
    assert!(stderr.contains("it holds the first 1 of the 3 points, and the table above has them all"), "{stderr}");
    for test in ["pp32+tg16", "pp48+tg16", "pp64+tg16"] {
        assert!(stdout.contains(test), "every point is measured and printed: {test}\n{stdout}");
    }
    let run: Json = serde_json::from_str(&read("run.json")).expect("the run file on the full disk is whole");
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{run}");
    assert_eq!((points[0]["errors"].as_u64(), points[0]["requests"].as_u64()), (Some(0), Some(6)));
    assert_eq!(read("files").split_whitespace().collect::<Vec<_>>(), ["filler", "run.json"], "no temporary file left behind");
}

/// A worker that runs out of memory: under a 300 MB limit on private memory (`prlimit
/// --data`, which leaves the mapped model file out), llama.cpp's worker fits, and candle's,
/// which holds its weights in memory, cannot load. candle's points fail saying it ran out of
/// memory; llama.cpp's are measured in the same sweep; exit 2.
#[cfg(target_os = "linux")]
#[test]
fn a_worker_out_of_memory_fails_its_points_and_no_other() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let output = Command::new("prlimit")
        .arg("--data=300000000")
        .arg(lx_bin())
        .args(["sweep", "--backend", "llama,candle", "--model", model.to_str().unwrap(), "--prompt-tokens", "16", "--concurrency", "1,2"])
        .args(["--max-tokens", "4", "--requests", "2", "--warmup", "0", "--threads", "2", "--out", out.to_str().unwrap()])
        .output()
        .expect("prlimit (util-linux) runs lx");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let run: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "{run}");
    for p in points {
        match p["backend"].as_str().unwrap() {
            "llama" => assert_eq!((p["errors"].as_u64(), p["requests"].as_u64()), (Some(0), Some(2)), "{p}"),
            _ => {
                let said = p["error_messages"].to_string();
                assert!(said.contains("ran out of memory (memory allocation of"), "{said}");
                assert!(!said.contains(" at /"), "backtrace frames are left out: {said}");
            }
        }
    }
}
