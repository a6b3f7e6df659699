//! `lx` end to end on the real default model.

use integration_tests::{heavy, lx, lx_with, model_path};
use serde_json::Value;

fn ids(stdout: &str) -> Vec<u64> {
    let line = stdout.lines().find(|l| l.starts_with("ids: ")).expect("an ids line");
    serde_json::from_str(line.trim_start_matches("ids: ")).expect("ids are a JSON array")
}

/// llama.cpp's own logits, computed in this process, for `prompt` followed by `ours`
/// (teacher forcing): at each generated position, (llama.cpp's argmax, its log-probability
/// minus that of our token there). Tokenized by llama.cpp itself, with BOS.
fn llama_cpp_forced(model: &std::path::Path, prompt: &str, ours: &[u64]) -> Vec<(i32, f32)> {
    use llama_cpp_2::context::params::LlamaContextParams;
    use llama_cpp_2::llama_batch::LlamaBatch;
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::token::LlamaToken;
    let rt = lx_backend_llamacpp::runtime();
    let model = LlamaModel::load_from_file(rt, model, &LlamaModelParams::default()).expect("llama.cpp loads the model");
    let prompt = model.vocab().tokenize(prompt.as_bytes(), true, false);
    let seq: Vec<LlamaToken> = prompt.iter().copied().chain(ours[..ours.len() - 1].iter().map(|&t| LlamaToken(t as i32))).collect();
    let n = seq.len() as u32;
    let params = LlamaContextParams::default().with_n_ctx(std::num::NonZeroU32::new(n + 8)).with_n_batch(n).with_n_threads(2).with_n_threads_batch(2);
    let mut ctx = model.new_context(rt, params).expect("llama.cpp context");
    let mut batch = LlamaBatch::new(seq.len(), 1);
    for (i, &t) in seq.iter().enumerate() {
        batch.add(t, i as i32, &[0], i + 1 >= prompt.len()).unwrap();
    }
    ctx.decode(&mut batch).expect("llama.cpp decode");
    (0..ours.len())
        .map(|i| {
            let logits = ctx.get_logits_ith((prompt.len() - 1 + i) as i32);
            let best = lx_engine::backend::choose_greedy(logits, 0).token as usize;
            (best as i32, logits[best] - logits[ours[i] as usize])
        })
        .collect()
}

/// `lx generate` is deterministic and gives llama.cpp's greedy tokens: each of our 32 tokens,
/// fed back through llama.cpp (computed here, on this CPU), is llama.cpp's argmax or within
/// the near-tie rule of it. Kernels round differently on every CPU and batch shape, so two
/// correct runs may part at a near-tie; teacher forcing checks every position regardless.
#[test]
fn greedy_generation_is_deterministic_and_matches_llama_cpp() {
    let _lock = heavy();
    let model = model_path();
    let prompt = "Once upon a time, in a small village,";
    let args = ["generate", "--model", model.to_str().unwrap(), "--prompt", prompt, "--max-tokens", "32", "--ignore-eos", "--ids", "--threads", "2"];
    let a = lx(&args).ok();
    let b = lx(&args).ok();
    let ours = ids(&a.stdout());
    assert_eq!(ours.len(), 32, "{}", a.dump());
    assert_eq!(ours, ids(&b.stdout()), "two greedy runs differ");
    assert!(a.stdout().starts_with(prompt), "{}", a.dump());
    assert!(a.stderr().contains("TTFT"), "{}", a.dump());
    let forced = llama_cpp_forced(&model, prompt, &ours);
    let parted: Vec<(usize, i32, f32)> = forced.iter().enumerate().filter(|(_, f)| f.1 > 0.0).map(|(i, f)| (i, f.0, f.1)).collect();
    eprintln!("{} of 32 tokens are llama.cpp's argmax; near-ties (position, llama.cpp's token, gap): {parted:?}", 32 - parted.len());
    let not_ties: Vec<_> = parted.iter().filter(|p| p.2 >= lx_test_support::parity::NEAR_TIE_NATS).collect();
    assert!(not_ties.is_empty(), "tokens llama.cpp would not choose, beyond a near-tie: {not_ties:?}\n{}", a.dump());
}

fn point<'a>(run: &'a Value, policy: &str, prompt: u64, conc: u64) -> &'a Value {
    run["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy && p["prompt_tokens"] == prompt && p["concurrency"] == conc)
        .unwrap_or_else(|| panic!("no point {policy} pp{prompt} c{conc}"))
}

#[test]
fn sweep_figures_are_sane() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    // The ceilings below are bounds only when the probe measured an idle machine: one cached
    // while other work ran (a build, another suite) reads the memory slower than a point then
    // decodes. Measured again here, under the lock that keeps the other heavy tests off.
    lx(&["hw", "--limits", "--refresh"]).ok();
    let r = lx(&[
        "sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "64,512", "--concurrency", "4", "--policy", "serial,continuous",
        "--max-tokens", "16", "--requests", "4", "--warmup", "1", "--threads", "2", "--gpu-layers", "0", "--format", "md",
        "--out", out.to_str().unwrap(),
    ])
    .ok();
    // Markdown rows were printed as points finished.
    assert_eq!(r.stdout().lines().filter(|l| l.starts_with("| llama |")).count(), 4, "{}", r.dump());
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(run["schema"], "latency-explorer/run");
    assert_eq!(run["schema_version"], lx_results::results::SCHEMA_VERSION);
    assert_eq!(run["model"]["architecture"], "gemma3");
    assert_eq!(run["backends"][0]["name"], "llama");
    // The device is llama.cpp's own account of where it put each layer: every block plus
    // the output layer, all on the CPU (--gpu-layers 0, so on any build), said under the table.
    let layers = run["model"]["block_count"].as_u64().unwrap() + 1;
    let device = format!("CPU (2 threads): all {layers} layers");
    assert_eq!(run["backends"][0]["device"], device.as_str(), "{}", r.dump());
    assert!(r.stdout().contains(&format!("llama ran on {device}")), "{}", r.dump());
    for p in run["points"].as_array().unwrap() {
        assert_eq!(p["errors"], 0, "{p}");
        assert_eq!(p["requests"], 4);
        assert!(p["decode_tps"]["p50"].as_f64().unwrap() > 0.0);
        for key in ["ttft_ms", "itl_ms", "e2e_ms", "decode_tps", "prefill_tps"] {
            for s in ["p50", "p90", "p95", "p99", "mean", "min", "max"] {
                assert!(p[key][s].is_number(), "{key}.{s} missing");
            }
        }
        for s in p["samples"].as_array().unwrap() {
            let tokens = s["token_ms"].as_array().unwrap().len();
            assert_eq!(tokens, 16);
            let itls = s["token_ms"].as_array().unwrap().windows(2).count();
            assert_eq!(itls, tokens - 1);
        }
    }
    for policy in ["serial", "continuous"] {
        let short = point(&run, policy, 64, 4);
        let long = point(&run, policy, 512, 4);
        let ttft = |p: &Value| p["ttft_ms"]["p50"].as_f64().unwrap();
        assert!(ttft(long) > ttft(short), "{policy}: TTFT did not grow with the prompt\n{}", r.stdout());
        let prefill_ms = |p: &Value| p["samples"][0]["prefill"].as_array().unwrap().iter().map(|c| c["end_ms"].as_f64().unwrap() - c["start_ms"].as_f64().unwrap()).sum::<f64>();
        assert!(prefill_ms(long) > prefill_ms(short), "{policy}: prefill time did not grow with the prompt\n{}", r.stdout());
    }
    // Ceilings: the probe's figures in the run, and every point under its own ceiling
    // (decode slower than the fastest the memory allows, TTFT above the least possible),
    // shown as a share in the table with the limits under it.
    assert!(run["limits"]["devices"][0]["memory_bytes_per_s"].as_f64().unwrap() > 1e9, "{}", run["limits"]);
    assert!(run["model_cost"]["weight_bytes_per_step"].as_u64().unwrap() > 100_000_000, "{}", run["model_cost"]);
    for p in run["points"].as_array().unwrap() {
        let c = &p["ceiling"];
        assert!(c["decode_tps"].as_f64().unwrap() > p["decode_tps"]["p50"].as_f64().unwrap(), "{c} vs {}", p["decode_tps"]);
        assert!(c["least_ttft_ms"].as_f64().unwrap() < p["ttft_ms"]["p50"].as_f64().unwrap(), "{c} vs {}", p["ttft_ms"]);
        assert!(c["throughput_tps"].as_f64().unwrap() > p["throughput_tps"].as_f64().unwrap(), "{c}");
    }
    let header = r.stdout().lines().find(|l| l.starts_with("| backend |")).unwrap().to_string();
    let share = header.split(" | ").position(|c| c == "decode % of ceiling").expect("decode % of ceiling column");
    for row in r.stdout().lines().filter(|l| l.starts_with("| llama |")) {
        let cell = row.split(" | ").nth(share).unwrap();
        assert!(cell.ends_with("% memory") || cell.ends_with("% compute"), "{cell:?} in {row}");
    }
    assert!(r.stdout().contains("ceilings from CPU"), "{}", r.dump());
    sensed(&run, &r.stdout());
    let tput = |policy| point(&run, policy, 64, 4)["throughput_tps"].as_f64().unwrap();
    assert!(tput("continuous") > tput("serial"), "continuous ({}) should beat serial ({}) at concurrency 4", tput("continuous"), tput("serial"));
    eprintln!("throughput at c4 pp64: continuous {:.1} tok/s, serial {:.1} tok/s", tput("continuous"), tput("serial"));
    compare_runs(&out, &run);
}

/// The sensors of a real sweep: every point carries what they read over its window (or why
/// nothing could be read), each unreadable source is said under the table, and no figure
/// that cannot be read shows as a number.
fn sensed(run: &Value, table: &str) {
    let sensors = lx_machine::sensors::Sensors::open();
    for p in run["points"].as_array().unwrap() {
        let s = &p["sensors"];
        assert_eq!(s["sources"].as_array().map_or(0, |a| a.len()) + s["not_available"].as_array().map_or(0, |a| a.len()), 4, "{s}");
        assert!(s["sampler_cpu_share"].as_f64().unwrap() < 0.01, "{s}");
        // The window is bounded by readings just outside it.
        let trace = s["trace"].as_array().unwrap();
        assert!(trace.first().unwrap()["t_ms"].as_f64().unwrap() <= 0.0 && trace.last().unwrap()["t_ms"].as_f64().unwrap() >= p["window_s"].as_f64().unwrap() * 1e3, "{s}");
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert!(s["cpu_mhz"]["mean"].as_f64().unwrap() > 0.0, "{s}");
        }
        // Power only where energy can be read; otherwise none, never zero.
        assert_eq!(s["power_w"].is_number(), sensors.not_available().iter().all(|m| !m.starts_with("CPU package power")) || sensors.sources().iter().any(|m| m.starts_with("NVIDIA")), "{s}");
    }
    for missing in sensors.not_available() {
        assert!(table.contains(&format!("not available here: {}", missing.split(" (").next().unwrap())), "{missing} not said under the table:\n{table}");
    }
    let header: Vec<&str> = table.lines().find(|l| l.starts_with("| backend |")).unwrap().split(" | ").collect();
    let power = header.iter().position(|c| *c == "power W").expect("power W column");
    for row in table.lines().filter(|l| l.starts_with("| llama |")) {
        let cell = row.split(" | ").nth(power).unwrap();
        assert!(cell == "-" || cell.parse::<f64>().is_ok_and(|w| w > 0.0), "{cell:?} in {row}");
    }
}

/// `lx compare` on a real run: against itself every ratio is 1 and nothing exceeds the
/// spread; against a copy whose continuous points answered later (every token shifted, so
/// TTFT moves and decode does not) and that lacks the serial points, TTFT is beyond the
/// spread, decode is not, and the serial points are listed as unmatched.
fn compare_runs(path: &std::path::Path, run: &Value) {
    let p = path.to_str().unwrap();
    let same = lx(&["compare", p, p]).ok().stdout();
    let rows: Vec<&str> = same.lines().filter(|l| l.starts_with("| pp")).collect();
    assert_eq!(rows.len(), 4, "{same}");
    assert!(rows.iter().all(|r| r.contains("(1.00×)") && !r.contains('*')), "{same}");

    // Each point's answers shifted by twice its slowest first token: its TTFT range then
    // lies wholly above the old one, whatever the spread.
    let shift = |point: &Value| 2.0 * point["ttft_ms"]["max"].as_f64().unwrap();
    let mut later = run.clone();
    let points = later["points"].as_array_mut().unwrap();
    points.retain(|p| p["policy"] == "continuous");
    for point in points.iter_mut() {
        let by = shift(point);
        for sample in point["samples"].as_array_mut().unwrap() {
            for t in sample["token_ms"].as_array_mut().unwrap() {
                *t = serde_json::json!(t.as_f64().unwrap() + by);
            }
        }
    }
    let dir = path.parent().unwrap();
    let later_path = dir.join("later.json");
    std::fs::write(&later_path, serde_json::to_vec(&later).unwrap()).unwrap();
    let c: Value = serde_json::from_str(&lx(&["compare", p, later_path.to_str().unwrap(), "--format", "json"]).ok().stdout()).unwrap();
    let diffs = c["points"].as_array().unwrap();
    assert_eq!(diffs.len(), 2, "{c}");
    for d in diffs {
        assert_eq!(d["policy"], "continuous");
        let (ttft, decode) = (&d["figures"][0], &d["figures"][2]);
        let base = point(run, "continuous", d["test"].as_str().unwrap()[2..].split('+').next().unwrap().parse::<u64>().unwrap(), 4);
        assert!((ttft["other"].as_f64().unwrap() - ttft["base"].as_f64().unwrap() - shift(base)).abs() < 1e-6, "{d}");
        assert_eq!(ttft["beyond_spread"], true, "{d}");
        assert_eq!((decode["ratio"].as_f64().unwrap() * 1e6).round(), 1e6, "{d}");
        assert_eq!(decode["beyond_spread"], false, "{d}");
    }
    let unmatched = c["unmatched"].as_array().unwrap();
    assert_eq!(unmatched.len(), 2, "{c}");
    assert!(unmatched.iter().all(|u| u.as_str().unwrap().contains("serial")), "{c}");

    let csv = lx(&["compare", p, later_path.to_str().unwrap(), "--format", "csv"]).ok().stdout();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    // Not a run file: a clear error, not a table.
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"{\"hello\": 1}").unwrap();
    lx(&["compare", p, garbage.to_str().unwrap()]).fails_with("not a Latency Explorer run file");
}

#[test]
fn hw_reports_the_machine_and_backend_devices() {
    let r = lx(&["hw", "--json"]).ok();
    let hw: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert!(hw["physical_cores"].as_u64().unwrap() >= 1);
    let devices = hw["backend_devices"].as_array().unwrap();
    let llama = devices.iter().find(|d| d[0] == "llama").unwrap();
    assert!(llama[1].as_array().unwrap().iter().any(|d| d.as_str().unwrap().starts_with("CPU")), "{hw}");
    let features: Vec<&str> = hw["build_features"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    // MLX: its devices where the build has it (on Linux, MLX's CPU build only), else why not.
    let mlx = devices.iter().find(|d| d[0] == "mlx").unwrap()[1][0].as_str().unwrap();
    if features.contains(&"mlx") {
        assert!(mlx.contains("(MLX ") && (!cfg!(target_os = "linux") || mlx.starts_with("CPU: ")), "{mlx}");
    } else {
        assert!(mlx.contains("not compiled into this build") || mlx.contains("needs macOS on Apple Silicon"), "{mlx}");
    }
    // The text report names the build's features and describes the machine, not the
    // project's CI.
    let text = lx(&["hw"]).ok().stdout();
    let build = if features.is_empty() { "CPU only (no GPU features)".to_string() } else { features.join(", ") };
    assert!(text.contains(&format!("build     {build}")), "{text}");
    assert!(!text.contains("built in CI") && !text.contains("tested in CI"), "{text}");
}

/// `lx hw --sensors`: every source read or said to be unavailable, readings over the time
/// asked for, GPU values also in NVML's units, power only where it can be read.
#[test]
fn hw_sensors_reads_what_this_machine_exposes_and_says_what_it_does_not() {
    let r = lx(&["hw", "--sensors", "--seconds", "0.6", "--json"]).ok();
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let (sources, missing) = (v["sources"].as_array().unwrap(), v["not_available"].as_array().unwrap());
    assert_eq!(sources.len() + missing.len(), 4, "{v}");
    let readings = v["readings"].as_array().unwrap();
    // One at once, one every 250 ms, one at the end.
    assert!((3..=5).contains(&readings.len()), "{v}");
    assert_eq!(v["nvml_raw"].as_array().unwrap().len(), readings.len());
    assert!(v["read_ms"].as_f64().unwrap() < 5.0, "{v}");
    let has_power = sources.iter().any(|s| s.as_str().unwrap().starts_with("CPU package energy") || s.as_str().unwrap().starts_with("NVIDIA"));
    assert_eq!(v["power_w"].is_number(), has_power, "{v}");
    let text = lx(&["hw", "--sensors", "--seconds", "0.3"]).ok().stdout();
    assert_eq!(text.contains("power       not available here"), !has_power, "{text}");
    for m in missing {
        assert!(text.contains(&format!("not here    {}", m.as_str().unwrap())), "{text}");
    }
    let bad = lx(&["hw", "--sensors", "--seconds", "0"]);
    assert!(bad.stderr().contains("--seconds must be above 0"), "{}", bad.dump());
}

/// `lx hw --limits`: measured on first use in a fresh cache, then read back without
/// measuring; `--refresh` measures again. The figures are this machine's and plausible.
#[test]
fn limits_are_measured_once_and_cached() {
    let _lock = heavy();
    let home = tempfile::tempdir().unwrap();
    let env = [("HOME", home.path()), ("LX_MODEL_DIR", home.path())];
    let first = lx_with(&["hw", "--limits", "--json"], &env).ok();
    assert!(first.stderr().contains("measuring this machine's limits"), "{}", first.dump());
    let probe: Value = serde_json::from_str(&first.stdout()).unwrap();
    let cpu = &probe["devices"][0];
    assert!(cpu["device"].as_str().unwrap().starts_with("CPU ("), "{probe}");
    // Any machine that runs the suite reads memory faster than 1 GB/s and multiplies faster
    // than 1 GFLOP/s; nothing reads faster than 10 TB/s.
    assert!((1e9..1e13).contains(&cpu["memory_bytes_per_s"].as_f64().unwrap()), "{probe}");
    assert!(cpu["compute_flops_per_s"].as_f64().unwrap() > 1e9, "{probe}");
    assert!(cpu["compute_method"].as_str().unwrap().contains("ggml Q4_K"), "{probe}");
    assert!(home.path().join(".cache/latency-explorer/limits.json").is_file());
    let again = lx_with(&["hw", "--limits", "--json"], &env).ok();
    assert!(!again.stderr().contains("measuring"), "{}", again.dump());
    assert_eq!(serde_json::from_str::<Value>(&again.stdout()).unwrap()["measured_unix_ms"], probe["measured_unix_ms"]);
    let fresh = lx_with(&["hw", "--limits", "--refresh"], &env).ok();
    assert!(fresh.stderr().contains("measuring") && fresh.stdout().contains("memory read"), "{}", fresh.dump());
}

/// The `lx` under test has this test binary's backend features (both come from one build
/// in scripts/test; a stale `lx` would make the checks below lie).
pub(crate) fn assert_lx_has_our_features() {
    let hw: Value = serde_json::from_str(&lx(&["hw", "--json"]).ok().stdout()).unwrap();
    let theirs: Vec<String> = serde_json::from_value(hw["build_features"].clone()).unwrap();
    assert_eq!(theirs, lx_local::build_features(), "{} was built with other features than this test: rebuild it with the same ones", integration_tests::lx_bin().display());
}

#[test]
fn hw_check_runs_every_backend_of_the_build_on_a_tiny_model() {
    assert_lx_has_our_features();
    let r = lx(&["hw", "--check", "--json"]).ok();
    let rows: Value = serde_json::from_str(&r.stdout()).unwrap();
    let rows = rows.as_array().unwrap();
    let mut backends = vec!["llama", "candle"];
    if lx_local::unavailable("mlx").is_none() {
        backends.push("mlx");
    }
    for &backend in &backends {
        let row = rows.iter().find(|row| row["backend"] == backend && row["requested"] == "default").unwrap_or_else(|| panic!("no {backend} row\n{}", r.dump()));
        assert_eq!(row["ok"], true, "{row}");
        assert_eq!(row["tokens"], u64::from(lx_local::check::CHECK_TOKENS), "{row}");
        assert!(!row["device"].as_str().unwrap().is_empty(), "{row}");
    }
    // llama.cpp's own account of the placement: the tiny model's 2 blocks and its output layer.
    let llama = rows.iter().find(|row| row["backend"] == "llama").unwrap();
    assert!(llama["device"].as_str().unwrap().contains("3 layers"), "{llama}");
    // The text form is a table with one row per check.
    let text = lx(&["hw", "--check"]).ok().stdout();
    assert_eq!(text.lines().filter(|l| backends.iter().any(|b| l.starts_with(&format!("| {b} |")))).count(), rows.len(), "{text}");
}

/// `--repetitions 3` measures the point three times (numbered rows, `repetition` in the run
/// file), summarises them under the table, and `lx compare` treats the three as one point,
/// with a throughput interval from the repetitions.
#[test]
fn repeated_points_are_summarised_and_compared_as_one() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reps.json");
    let args = ["sweep", "--backend", "llama", "--prompt-tokens", "16", "--concurrency", "1", "--max-tokens", "8", "--requests", "3", "--warmup", "1", "--repetitions", "3", "--threads", "2", "--out", out.to_str().unwrap()];
    let r = lx(&args).ok();
    let md = r.stdout();
    for k in 1..=3 {
        assert!(md.contains(&format!("| pp16+tg8 @ c1 #{k} |")), "{md}");
    }
    let summary = md.lines().find(|l| l.starts_with("| llama | continuous | pp16+tg8 @ c1 | 3 |")).unwrap_or_else(|| panic!("no summary row\n{}", r.dump()));
    assert_eq!(summary.matches('±').count(), 4, "{summary}");
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let reps: Vec<u64> = run["points"].as_array().unwrap().iter().map(|p| p["repetition"].as_u64().unwrap()).collect();
    assert_eq!(reps, [1, 2, 3]);
    let p = out.to_str().unwrap();
    let c: Value = serde_json::from_str(&lx(&["compare", p, p, "--format", "json"]).ok().stdout()).unwrap();
    let diffs = c["points"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{c}");
    assert_eq!(diffs[0]["figures"][3]["beyond_spread"], false, "{c}");
    assert_eq!(diffs[0]["figures"][0]["ratio"], 1.0, "{c}");
    lx(&["sweep", "--repetitions", "0", "--backend", "llama"]).fails_with("--repetitions must be at least 1");
}

/// `--depth 0,512`: at depth 512 every measured request finds 512 tokens in its context
/// (copied from the cache the warm-up filled) and prefills only its own 16, and the table
/// names the point as llama-bench would (`pp16+tg8 @ c1 d512`).
#[test]
fn depth_fills_the_context_before_the_measured_prompt() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("depth.json");
    let args = ["sweep", "--backend", "llama", "--prompt-tokens", "16", "--max-tokens", "8", "--concurrency", "1", "--requests", "3", "--warmup", "1", "--depth", "0,512", "--threads", "2", "--out", out.to_str().unwrap()];
    let r = lx(&args).ok();
    assert!(r.stdout().contains("| pp16+tg8 @ c1 |") && r.stdout().contains("| pp16+tg8 @ c1 d512 |"), "{}", r.dump());
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, depth) in points.iter().zip([0u64, 512]) {
        assert_eq!((p["requests"].as_u64(), p["errors"].as_u64(), p["load"]["depth"].as_u64().unwrap_or(0)), (Some(3), Some(0), depth), "{p}");
        for s in p["samples"].as_array().unwrap() {
            let prefilled: u64 = s["prefill"].as_array().unwrap().iter().map(|slice| slice["tokens"].as_u64().unwrap()).sum();
            assert_eq!((s["cached_tokens"].as_u64().unwrap_or(0), prefilled, s["tokens"].as_array().unwrap().len()), (depth, 16, 8), "{s}");
        }
    }
}

/// The second real model (SmolLM2 135M Q4_1: llama architecture, byte-level BPE, no BOS) runs
/// end to end on every backend of this build: each request prefills exactly the prompt length
/// asked for (built with our tokenizer) and yields the output length asked for.
#[test]
fn every_backend_of_the_build_sweeps_smollm2() {
    let _lock = heavy();
    assert_lx_has_our_features();
    let model = lx_models::catalog_model_path("smollm2").unwrap();
    assert!(model.is_file(), "SmolLM2 is missing at {}: run `lx models fetch smollm2` (scripts/test does)", model.display());
    let mut backends = vec!["llama", "candle"];
    if lx_local::unavailable("mlx").is_none() {
        backends.push("mlx");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smollm2.json");
    let list = backends.join(",");
    let args = ["sweep", "--model", "smollm2", "--backend", &list, "--prompt-tokens", "24", "--concurrency", "2", "--max-tokens", "8", "--requests", "2", "--warmup", "1", "--threads", "2", "--out", out.to_str().unwrap()];
    let r = lx(&args).ok();
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), backends.len(), "{}", r.dump());
    for (p, b) in points.iter().zip(&backends) {
        assert_eq!((p["backend"].as_str(), p["requests"].as_u64(), p["errors"].as_u64()), (Some(*b), Some(2), Some(0)), "{p}");
        for s in p["samples"].as_array().unwrap() {
            let prefilled: u64 = s["prefill"].as_array().unwrap().iter().map(|slice| slice["tokens"].as_u64().unwrap()).sum();
            assert_eq!((prefilled, s["tokens"].as_array().unwrap().len()), (24, 8), "{b}: {s}");
        }
        assert!(p["decode_tps"]["p50"].as_f64().unwrap() > 0.0, "{p}");
    }
    eprintln!("{}", r.stdout());
}

/// A load that cannot fit is refused before any worker starts, with the numbers: 4096
/// sequences of 32,016 tokens need 438 GiB of KV cache for the default model (1 KiB of f16
/// keys and values per cell and layer; its 3 global layers keep 32,256 cells a sequence,
/// llama.cpp's padding, its 15 sliding-window layers 1,024), more than any machine that runs
/// the suite has.
#[test]
fn a_load_that_cannot_fit_in_memory_is_refused_with_the_numbers() {
    let model = model_path();
    let r = lx(&["sweep", "--model", model.to_str().unwrap(), "--prompt-tokens", "32000", "--max-tokens", "16", "--concurrency", "4096", "--requests", "4096", "--gpu-layers", "0", "--no-ceilings"]);
    assert_eq!(r.code(), Some(2), "{}", r.dump());
    let e = r.stderr();
    assert!(e.contains("does not fit in memory: it needs at least 438.2 GiB (0.2 GiB of weights and 438.0 GiB of KV cache for 4096 sequences of 32016 tokens; about 442."), "{}", r.dump());
    assert!(!e.contains("panicked"), "{}", r.dump());
}

#[test]
fn models_list_shows_the_default() {
    let r = lx(&["models", "list"]).ok();
    assert!(r.stdout().contains("gemma-3-270m-q4_k_m.gguf"), "{}", r.dump());
    assert!(r.stdout().contains("(default)"), "{}", r.dump());
}
