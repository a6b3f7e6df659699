//! `lx live`: live mode in a terminal, the memory samples a soak is judged by, and Ctrl-C.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{heavy, lx, lx_bin, model_path};
use serde_json::Value as Json;

#[test]
fn live_runs_its_requests_and_keeps_the_memory_it_sampled() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.json");
    let model = model_path();
    let run = lx(&[
        "live", "--model", model.to_str().unwrap(), "--prompt-tokens", "16", "--max-tokens", "4", "--concurrency", "2",
        "--threads", "2", "--requests", "40", "--every", "0.5", "--out", out.to_str().unwrap(),
    ])
    .ok();
    let (stdout, stderr) = (run.stdout(), run.stderr());
    assert!(stdout.contains("pp16+tg4 @ c2"), "the table of what settled\n{stdout}");
    assert!(stderr.contains("resident memory after warm-up") && stderr.contains("worker llama:"), "{stderr}");
    let completed: u64 = stderr
        .lines()
        .find_map(|l| l.split_once(" requests completed").and_then(|(n, _)| n.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no closing count\n{stderr}"));
    assert!((40..=42).contains(&completed), "stops at --requests (2 more may be in flight): {completed}\n{stderr}");

    let file: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["settings"]["mode"], "live");
    let points = file["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "one setting: {file}");
    let settled = points[0]["requests"].as_u64().unwrap();
    assert!(settled >= 30 && settled <= completed, "settled {settled} of {completed}");
    // Its ceilings, as a sweep's: the machine's limits in the file, the setting's ceiling on
    // the point (above what was measured), and the table's share of it.
    assert!(file["limits"]["devices"][0]["memory_bytes_per_s"].as_f64().unwrap() > 1e9, "{}", file["limits"]);
    let (decode, most) = (points[0]["decode_tps"]["p50"].as_f64().unwrap(), points[0]["ceiling"]["decode_tps"].as_f64().unwrap());
    assert!(decode > 0.0 && decode < most, "decode p50 {decode} tok/s under a ceiling of {most}");
    assert!(stdout.contains("% memory") || stdout.contains("% compute"), "the table's % of ceiling\n{stdout}");
    let samples = file["memory"].as_array().unwrap();
    assert!(!samples.is_empty(), "{file}");
    for s in samples {
        let (lx_rss, worker) = (s["rss_bytes"]["lx"].as_u64().unwrap(), s["rss_bytes"]["worker llama"].as_u64());
        assert!(lx_rss > 1 << 20, "{s}");
        // The worker holds the model's weights (253 MB); lx only prompts and figures.
        if let Some(worker) = worker {
            assert!(worker > 100 << 20 && worker > lx_rss, "{s}");
        }
    }
    assert!(samples.iter().any(|s| s["rss_bytes"]["worker llama"].is_u64()), "the worker was sampled: {samples:?}");
    let times: Vec<f64> = samples.iter().map(|s| s["at_s"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn live_stops_on_ctrl_c_and_keeps_what_it_measured() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.json");
    let model = model_path();
    let mut child = Command::new(lx_bin())
        .args(["live", "--model", model.to_str().unwrap(), "--prompt-tokens", "16", "--max-tokens", "8", "--threads", "2"])
        .args(["--every", "0.5", "--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok);
    let mut seen = String::new();
    // Run until a status line shows settled figures, then interrupt.
    for line in lines.by_ref() {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("TTFT p50") && !line.contains("TTFT p50 -") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no figures yet\n{seen}");
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    let stderr = format!("{seen}{}", rest.join("\n"));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped by the user"), "{stderr}");
    let file: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["stopped"], true);
    assert!(file["points"][0]["requests"].as_u64().unwrap() >= 1, "{file}");
}
