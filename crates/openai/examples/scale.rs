//! Can one `lx` process hold hundreds of streams without becoming the bottleneck? A scripted
//! server on loopback answers `--streams` concurrent requests, each with `--tokens` one-token
//! chunks `--gap-ms` apart, and records the moment it sent each chunk. Our client (the same
//! `ServerTarget` and closed loop that `lx sweep --target` runs) stamps each chunk as it
//! arrives. The server's own gaps are the truth: sleeping threads on a busy machine do not
//! keep exact time, so it is what was sent, not what was asked, that our gaps must match.
//!
//! ```text
//! cargo run --release -p lx-openai --example scale -- [--streams 512] [--tokens 64] [--gap-ms 20] [--out FILE.json]
//! ```
//! Prints the gap distributions side by side (p50, p90, p99, max) with ours − truth, the
//! chunks per second the client took in, and the CPU time of the client's threads. Each stream needs two file descriptors in this
//! process (client and server side): raise `ulimit -n` above twice `--streams` if needed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::TokenId;
use lx_client::traffic::{run_closed_loop, PointSpec, Quiet, RunControl};
use lx_results::results::PointResult;
use lx_engine::scheduler::Policy;
use lx_client::stats::Distribution;
use lx_test_support::scripted_server::{serve, tokens, Script};
use lx_openai::{Server, ServerTarget, TextCodec};
use serde_json::json;

/// One word per token.
struct Words;
impl TextCodec for Words {
    fn prompt_text(&self, ids: &[TokenId]) -> String {
        vec!["word"; ids.len()].join(" ")
    }
    fn tokens(&self, text: &str) -> Vec<TokenId> {
        text.split_whitespace().map(|_| 7).collect()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut streams, mut n_tokens, mut gap_ms, mut out) = (512usize, 64u32, 20u64, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--streams" => streams = val()?.parse()?,
            "--tokens" => n_tokens = val()?.parse()?,
            "--gap-ms" => gap_ms = val()?.parse()?,
            "--out" => out = Some(std::path::PathBuf::from(val()?)),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if n_tokens < 2 {
        return Err("--tokens must be at least 2: gaps are between tokens".into());
    }
    let first_ms = 50;
    let s = serve(move |_, _| Script::Stream(tokens(n_tokens, first_ms, gap_ms, 8)));
    let mut server = Server::parse(&s.url)?;
    server.idle_timeout = Duration::from_secs(30);
    let mut target = ServerTarget::connect(server, Arc::new(Words))?;
    let spec = PointSpec { prompt_tokens: 8, max_tokens: n_tokens, concurrency: streams, requests: streams, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
    let started = Instant::now();
    let run = run_closed_loop(&mut target, &spec, &|_| vec![1; 8], &[], &RunControl::default(), &mut Quiet);
    let wall = started.elapsed().as_secs_f64();
    let client_cpu_s = http_threads_cpu_s();
    let ours = PointResult::from_run("scripted", Policy::Continuous, &spec, run);
    if ours.errors > 0 {
        return Err(format!("{} of {streams} streams failed: {:?}", ours.errors, ours.error_messages.iter().take(3).collect::<Vec<_>>()).into());
    }

    // The truth: per request, the sends of its token chunks (the script's first `n_tokens`
    // sends; usage and [DONE] follow), and the gaps between them.
    let mut by_request: BTreeMap<usize, Vec<Instant>> = BTreeMap::new();
    for (n, at) in s.sent.lock().unwrap().iter() {
        by_request.entry(*n).or_default().push(*at);
    }
    let truth = Distribution::of(by_request.values_mut().flat_map(|sends| {
        sends.sort();
        sends.truncate(n_tokens as usize);
        sends.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3).collect::<Vec<_>>()
    }));
    let mine = ours.itl_ms;
    println!("{streams} concurrent streams × {n_tokens} one-token chunks, {gap_ms} ms apart (asked), on loopback; {:.0} chunks/s taken in\n", (streams as f64 * n_tokens as f64) / wall);
    println!("| inter-token gap, ms | server sent (truth) | we stamped | ours − truth |");
    println!("| --- | ---: | ---: | ---: |");
    let rows = [("p50", truth.p50, mine.p50), ("p90", truth.p90, mine.p90), ("p99", truth.p99, mine.p99), ("max", truth.max, mine.max)];
    for (name, t, m) in rows {
        println!("| {name} | {t:.3} | {m:.3} | {:+.3} |", m - t);
    }
    println!("\n({} gaps on each side)", truth.count);
    let chunks = streams as f64 * n_tokens as f64;
    match client_cpu_s {
        Some(cpu) => println!("our HTTP client's threads: {cpu:.2} s of CPU, {:.1} µs per chunk, {:.0}% of one core over the run", cpu / chunks * 1e6, cpu / wall * 100.0),
        None => println!("our HTTP client's CPU time: not available here (Linux /proc only)"),
    }
    if let Some(path) = out {
        // `kind` names the file for `lx show`, which prints its row of the docs' table.
        let doc = json!({
            "kind": "client-scale",
            "command": std::env::args().collect::<Vec<_>>(),
            "streams": streams, "tokens": n_tokens, "gap_ms_asked": gap_ms,
            "chunks_per_s": (streams as f64 * n_tokens as f64) / wall,
            "truth_itl_ms": truth, "ours_itl_ms": mine, "client_cpu_s": client_cpu_s,
            "hardware": lx_machine::hardware::probe(),
        });
        lx_engine::atomic_file::write(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// CPU seconds (user + system) of this process's `lx-http` threads, the HTTP client's whole
/// runtime: read from Linux's /proc, in clock ticks of 1/100 s.
fn http_threads_cpu_s() -> Option<f64> {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        if !std::fs::read_to_string(dir.join("comm")).ok()?.starts_with("lx-http") {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the parenthesised name: state is the 3rd field, utime the 14th.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        ticks += fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    }
    Some(ticks as f64 / 100.0)
}
