//! `lx advise` end to end against a scripted server whose capacity is known by construction,
//! and its refusals of bad presets.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use integration_tests::{lx_bin, model_path, Run};
use lx_test_support::scripted_server::{serve, tokens, tokens_under_load, Script, Scripted};
use serde_json::Value;

/// A preset judged by decode rate only, in a file of the user's own.
const PRESET: &str = r#"
name = "scripted"
summary = "sixteen tokens, judged by the decode rate"
bound = "ttft"

[prompt]
tokens = 32

[output]
tokens = 16

[arrivals]
start_rate = 1.0
slots = 4

[objectives]
decode_tps = 45
attainment = 0.95
"#;

/// A server that slows every stream by the number in flight: each token waits 4 ms per
/// stream in progress at that moment, so `c` clients decode at 250 / c tok/s. Against
/// 45 tok/s, 5 clients (50 tok/s) hold and 6 (41.7 tok/s) do not: the capacity is 5 clients.
/// (Counted once per request, at its arrival, the load was read low whenever clients
/// arrived together: a cold CI run measured 6 clients at 49.8 tok/s and found capacity 6.)
#[test]
fn advise_finds_a_servers_known_capacity_by_concurrency_and_confirms_it() {
    let s = serve(|_, _| Script::Stream(tokens_under_load(16, 5, 4, 32)));
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("scripted.toml");
    std::fs::write(&preset, PRESET).unwrap();
    let out = dir.path().join("advice.json");
    let model = model_path();
    let args = [
        "advise", "--preset", preset.to_str().unwrap(), "--model", model.to_str().unwrap(), "--target", &format!("scripted={}", s.url),
        "--by", "concurrency", "--most-clients", "12", "--budget", "3m", "--out", out.to_str().unwrap(),
    ];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(run["preset"]["name"], "scripted");
    assert_eq!(run["preset"]["source"], preset.to_str().unwrap());
    let search = &run["decisions"]["searches"][0];
    assert_eq!((search["capacity"].as_f64(), search["fails_at"].as_f64()), (Some(5.0), Some(6.0)), "{}", r.dump());
    // From 4 clients: 4 holds, 8 fails, 6 fails, 5 holds: four trials, each a point of the run.
    let trials = search["trials"].as_array().unwrap();
    assert!(trials.len() <= 6, "{} trials\n{}", trials.len(), r.dump());
    for t in trials {
        let point = &run["points"][t["point"].as_u64().unwrap() as usize];
        assert_eq!(point["concurrency"].as_f64(), t["value"].as_f64());
    }
    let advice = &run["decisions"]["advice"];
    assert_eq!((advice["backend"].as_str(), advice["concurrency"].as_u64()), (Some("scripted"), Some(5)), "{advice}");
    assert_eq!(advice["confirmed"], true, "{}", r.dump());
    let stdout = r.stdout();
    assert!(stdout.contains("Recommendation: scripted (as the server schedules), 5 clients"), "{stdout}");
    assert!(stdout.contains("Would change the answer: decode binds: at 6 clients"), "{stdout}");
    assert!(stdout.contains("Confirmation (20 requests"), "{stdout}");

    // The run file shows its preset and decisions again.
    let show = std::process::Command::new(lx_bin()).args(["show", out.to_str().unwrap()]).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("preset scripted (") && shown.contains("decode ≥ 45 tok/s for 95% of requests"), "{shown}");
    assert!(shown.contains("capacity search by clients for decode ≥ 45 tok/s") && shown.contains("scripted: capacity 5 clients (6 clients does not hold"), "{shown}");
    assert!(shown.contains("advice: scripted"), "{shown}");
}

/// A server whose every request takes the same time however many run at once: `c` clients
/// complete c ÷ 0.17 s requests a second, so 100 requests finish within 5 s from 4 clients
/// (4.3 s) and not from 3 (5.7 s).
#[test]
fn advise_works_back_from_a_deadline_to_the_fewest_clients() {
    let s = serve(|_, _| Script::Stream(tokens(16, 10, 10, 32)));
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("job.toml");
    let job = PRESET.replace("bound = \"ttft\"", "bound = \"throughput\"").replace("decode_tps = 45\n", "") + "\n[job]\nrequests = 100\ndeadline = \"5s\"\n";
    std::fs::write(&preset, job).unwrap();
    let out = dir.path().join("plan.json");
    let model = model_path();
    let args = [
        "advise", "--preset", preset.to_str().unwrap(), "--model", model.to_str().unwrap(), "--target", &format!("paced={}", s.url), "--budget", "2m",
        "--out", out.to_str().unwrap(),
    ];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output }.ok();
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let plan = &run["decisions"]["deadlines"][0];
    assert_eq!(plan["concurrency"].as_u64(), Some(4), "{}", r.dump());
    // 1, 2 and 4 clients, then 3 between the last that missed and the first that met.
    let clients: Vec<u64> = plan["trials"].as_array().unwrap().iter().map(|t| t["value"].as_f64().unwrap() as u64).collect();
    assert_eq!(clients, [1, 2, 4, 3], "{}", r.dump());
    let finish = plan["finish_s"].as_f64().unwrap();
    assert!(finish <= 5.0 && finish > 3.5, "{finish}");
    assert_eq!(run["decisions"]["advice"]["confirmed"], true, "{}", r.dump());
    assert!(r.stdout().contains("Recommendation: paced (as the server schedules), 4 clients"), "{}", r.dump());
    assert!(r.stdout().contains("Optimised: the fewest concurrent clients that finish 100 requests within 5.0 s"), "{}", r.dump());
}

/// A server that answers one request at a time, in arrival order: a stream's first token
/// comes `first_ms` after the streams before it have ended, then 15 more `gap_ms` apart. One
/// request alone takes `first_ms + 15 × gap_ms`; arrivals near its inverse queue up.
fn one_at_a_time(first_ms: u64, gap_ms: u64) -> Scripted {
    let free_at = Mutex::new(Instant::now());
    serve(move |_, _| {
        let now = Instant::now();
        let mut free = free_at.lock().unwrap_or_else(|e| e.into_inner());
        let start = (*free).max(now);
        *free = start + Duration::from_millis(first_ms + 15 * gap_ms);
        Script::Stream(tokens(16, (start - now).as_millis() as u64 + first_ms, gap_ms, 32))
    })
}

/// A chat-like preset by arrival rate whose start is far above what the server holds.
/// `lx advise` by arrival rate against `server`, with a preset whose start (16 req/s) is far
/// above what the server holds and whose objective is TTFT ≤ `ttft_ms`, within `budget`:
/// how it ran, its run file, and how long it took.
fn advise_slow(server: &Scripted, ttft_ms: u32, budget: &str) -> (Run, Value, f64) {
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("slow.toml");
    std::fs::write(&preset, PRESET.replace("start_rate = 1.0", "start_rate = 16.0").replace("decode_tps = 45", &format!("ttft_ms = {ttft_ms}"))).unwrap();
    let out = dir.path().join("advice.json");
    let model = model_path();
    let target = format!("serial={}", server.url);
    let args = ["advise", "--preset", preset.to_str().unwrap(), "--model", model.to_str().unwrap(), "--target", &target, "--budget", budget, "--out", out.to_str().unwrap()];
    let started = Instant::now();
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let took = started.elapsed().as_secs_f64();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output };
    let run = std::fs::read_to_string(&out).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_else(|| panic!("no run file\n{}", r.dump()));
    (r, run, took)
}

/// A machine slower than the preset expects: the search starts where one request alone says
/// this server can go (about 4 req/s for 250 ms a request, not the preset's 16), and the
/// capacity comes within a one-minute budget.
#[test]
fn a_rate_search_starts_from_the_measured_service_time_and_finds_a_slow_servers_capacity() {
    let (r, run, took) = advise_slow(&one_at_a_time(100, 10), 750, "1m");
    assert!(matches!(r.code(), Some(0 | 2)), "{}", r.dump());
    let search = &run["decisions"]["searches"][0];
    let probe = &search["probe"];
    let service = 1.0 / probe["throughput_rps"].as_f64().expect("the probe measured a rate");
    assert!((0.24..0.5).contains(&service), "one request alone takes 250 ms and the client's overhead: {service} s\n{}", r.dump());
    assert_eq!(run["points"][probe["point"].as_u64().unwrap() as usize]["concurrency"].as_f64(), Some(1.0), "the probe runs one at a time");
    let first = search["trials"][0]["value"].as_f64().unwrap();
    assert!((first - 1.0 / service).abs() < 0.01 * first, "the search starts at 1 ÷ {service} s, not at the preset's 16: {first}");
    let capacity = search["capacity"].as_f64().unwrap_or_else(|| panic!("no capacity\n{}", r.dump()));
    // One at a time, 250 ms each: it can never hold 4 req/s (it saturates), and 0.5 req/s
    // (one request every 2 s on average) queues too little to miss 750 ms.
    assert!((0.5..4.0).contains(&capacity), "capacity {capacity}\n{}", r.dump());
    assert!(took < 75.0, "a one-minute budget took {took:.0} s");
    assert!(r.stdout().contains("one request alone took"), "{}", r.dump());
}

/// Where the budget cannot hold even the fewest requests that could show a rate holds, the
/// advice names the budget that would answer, instead of blaming the machine.
#[test]
fn a_budget_too_short_for_the_next_trial_names_the_budget_that_would_answer() {
    let (r, run, _) = advise_slow(&one_at_a_time(1000, 60), 4000, "20s");
    assert_eq!(r.code(), Some(2), "{}", r.dump());
    let search = &run["decisions"]["searches"][0];
    let needs = search["needs_s"].as_f64().unwrap_or_else(|| panic!("{}", r.dump()));
    // 15 requests at about 0.5 req/s: about 38 s.
    assert!((25.0..60.0).contains(&needs), "{needs}\n{}", r.dump());
    let stdout = r.stdout();
    assert!(stdout.contains("Would change the answer: a budget of ") && stdout.contains("(--budget "), "{stdout}");
    assert!(!stdout.contains("faster machine"), "{stdout}");
}

#[test]
fn a_bad_preset_is_refused_with_its_line_before_anything_loads() {
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("bad.toml");
    std::fs::write(&preset, PRESET.replace("attainment = 0.95", "attainment = 95")).unwrap();
    for command in ["advise", "sweep"] {
        let args = [command, "--preset", preset.to_str().unwrap(), "--model", "/no/such/model.gguf"];
        let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
        let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output };
        assert_eq!(r.code(), Some(1), "{}", r.dump());
        assert!(r.stderr().contains("line 18") && r.stderr().contains("a share of requests"), "{}", r.dump());
    }
    let args = ["advise", "--preset", "chatty"];
    let output = std::process::Command::new(lx_bin()).args(args).output().unwrap();
    let r = Run { args: args.iter().map(|a| a.to_string()).collect(), output };
    assert!(r.stderr().contains("no preset named 'chatty' (built in: code-completion, chat,"), "{}", r.dump());
}
