//! Batched decode and concurrent serving, measured against llama.cpp's own tools on the same
//! machine and model file, alternating in one run (scripts/batching-bench builds the tools and
//! runs this).
//!
//! ```text
//! cargo run --release -p lx-cli --example batching -- --tools DIR \
//!     [--threads 2] [--rounds 3] [--prompt 128] [--gen 128] [--batches 1,2,4,8,16] \
//!     [--clients 4,8] [--requests-per-client 4] [--kv per-sequence|unified] [--out FILE.json]
//! ```
//!
//! `--kv` sets the KV layout on every side alike: our worker (`LX_LLAMA_KV`), the bare loop,
//! batched-bench and llama-server (`-no-kvu` or `-kvu`). Default: one stream per sequence.
//!
//! Part 1, aggregate decode at B sequences: `llama-batched-bench` (B prompts of `--prompt`
//! tokens, then `--gen` passes of B tokens) against our engine running the same work through a
//! worker process (`continuous`, B clients, B requests). Ours is read from the worker's pass
//! records (passes of B decode tokens and no prompt tokens: B ÷ median pass time) and from the
//! client's clock (per-request decode tok/s p50 × B). The profile splits one such pass, as the
//! worker timed it: `llama_decode` itself, the adapter's own work around it (building the
//! batch, the greedy choice over B rows: the pass less `llama_decode`), and what lies between
//! passes as the client sees them (IPC, scheduling: ITL p50 less the pass). Beside it, a bare
//! `llama_decode` loop in this process with the worker's context shape, tokens in slot order
//! and reversed (the order llama.cpp's micro-batching is sensitive to).
//!
//! Part 2, closed-loop serving at c clients: `llama-server -np c` driven by
//! `server_load.py` (streaming, EOS ignored, no prompt cache) against our engine with c slots
//! and c clients: TTFT p50, per-request decode tok/s p50, throughput. Both sides get the same
//! prompt ids, warm-up (c requests) and request count.
//!
//! Prints the tables: each figure's median over rounds, and ours ÷ llama.cpp as the median of
//! the rounds' own ratios (both sides of a round run minutes apart); writes every round's
//! figures to `--out`.

use std::io::{BufRead, Write};
use std::net::TcpStream;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lx_backend_llamacpp::KvLayout;
use lx_engine::backend::{choose_greedy, LoadSpec, TokenId};
use lx_worker::child::WorkerCommand;
use lx_worker::coordinator::Worker;
use lx_client::traffic::{run_closed_loop, PointSpec, Quiet, RunControl};
use lx_results::results::PointResult;
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_client::stats::Distribution;
use lx_format::workload::PromptBuilder;
use serde_json::{json, Value};
use lx_client::stats::median;

struct Args {
    tools: PathBuf,
    threads: usize,
    rounds: usize,
    prompt: usize,
    gen: usize,
    batches: Vec<usize>,
    clients: Vec<usize>,
    requests_per_client: usize,
    out: Option<PathBuf>,
    python: String,
    kv: KvLayout,
}

impl Args {
    /// llama.cpp's tools' flag for the KV layout.
    fn kv_flag(&self) -> &'static str {
        match self.kv {
            KvLayout::PerSequence => "-no-kvu",
            KvLayout::Unified => "-kvu",
        }
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let num = |name: &str, default: usize| -> anyhow::Result<usize> {
        value(name).map_or(Ok(default), |v| v.parse().with_context(|| format!("{name} {v}")))
    };
    let list = |name: &str, default: &str| -> anyhow::Result<Vec<usize>> {
        value(name).unwrap_or_else(|| default.into()).split(',').map(|v| v.parse().with_context(|| format!("{name} {v}"))).collect()
    };
    Ok(Args {
        tools: value("--tools").map(PathBuf::from).ok_or_else(|| anyhow!("--tools DIR: where llama-batched-bench and llama-server are (scripts/llama-cpp-tools)"))?,
        threads: num("--threads", lx_machine::hardware::physical_cores())?,
        rounds: num("--rounds", 3)?,
        prompt: num("--prompt", 128)?,
        gen: num("--gen", 128)?,
        batches: list("--batches", "1,2,4,8,16")?,
        clients: list("--clients", "4,8")?,
        requests_per_client: num("--requests-per-client", 4)?,
        out: value("--out").map(PathBuf::from),
        python: value("--python").unwrap_or_else(|| "python3".into()),
        kv: value("--kv").map_or(Ok(KvLayout::PerSequence), |v| v.parse().map_err(|e: String| anyhow!("--kv: {e}")))?,
    })
}

/// The same figures of one side of a comparison, in every round.
#[derive(Default, Clone, serde::Serialize)]
struct Rounds(std::collections::BTreeMap<&'static str, Vec<f64>>);

impl Rounds {
    fn push(&mut self, key: &'static str, v: f64) {
        self.0.entry(key).or_default().push(v);
    }
}

/// llama.cpp's batched-bench: aggregate decode tok/s (S_TG) at `b` sequences.
fn batched_bench(a: &Args, model: &Path, b: usize) -> anyhow::Result<f64> {
    let out = Command::new(a.tools.join("llama-batched-bench"))
        .args(["-m", &model.display().to_string(), "-c", &(b * (a.prompt + a.gen)).to_string(), "-b", "2048", "-ub", "512"])
        .args(["-npp", &a.prompt.to_string(), "-ntg", &a.gen.to_string(), "-npl", &b.to_string()])
        .args(["-t", &a.threads.to_string(), "-tb", &a.threads.to_string(), a.kv_flag(), "--output-format", "jsonl"])
        .stderr(Stdio::null())
        .output()
        .context("run llama-batched-bench")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{')).ok_or_else(|| anyhow!("llama-batched-bench printed no result (status {})", out.status))?;
    let v: Value = serde_json::from_str(line)?;
    v["speed_tg"].as_f64().ok_or_else(|| anyhow!("no speed_tg in {line}"))
}

/// llama.cpp in this process, in a context shaped like the worker's for `b` slots: prefill `b`
/// prompts, then `gen - 1` passes of `b` decode tokens, added to the batch in slot order or,
/// with `reversed`, highest slot first. Median ms per `llama_decode`. (With one KV stream per
/// sequence, llama.cpp splits a batch into micro-batches of consecutive sequence ids in
/// arrival order: reversed, every sequence is a micro-batch of its own.)
fn bare_pass(rt: &LlamaBackend, model: &LlamaModel, a: &Args, prompts: &[Vec<TokenId>], reversed: bool) -> anyhow::Result<f64> {
    let b = prompts.len();
    let n_batch = lx_engine::scheduler::batch_tokens_for(a.prompt, b);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new((b * (a.prompt + a.gen)) as u32))
        .with_n_batch(n_batch as u32)
        .with_n_ubatch(n_batch.min(512) as u32)
        .with_n_seq_max(b as u32)
        .with_kv_unified(a.kv == KvLayout::Unified)
        .with_n_threads(a.threads as i32)
        .with_n_threads_batch(a.threads as i32);
    let mut ctx = model.new_context(rt, params)?;
    let mut batch = LlamaBatch::new(n_batch, 1);
    for (s, p) in prompts.iter().enumerate() {
        for (i, &t) in p.iter().enumerate() {
            batch.add(LlamaToken(t as i32), i as i32, &[s as i32], i + 1 == p.len())?;
        }
    }
    ctx.decode(&mut batch)?;
    let mut next: Vec<TokenId> = (0..b).map(|s| choose_greedy(ctx.get_logits_ith(((s + 1) * a.prompt - 1) as i32), 0).token).collect();
    let mut decode_ms = Vec::new();
    for k in 0..a.gen - 1 {
        batch.clear();
        let order: Vec<usize> = if reversed { (0..b).rev().collect() } else { (0..b).collect() };
        for &s in &order {
            batch.add(LlamaToken(next[s] as i32), (a.prompt + k) as i32, &[s as i32], true)?;
        }
        let t0 = Instant::now();
        ctx.decode(&mut batch)?;
        decode_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        for (row, &s) in order.iter().enumerate() {
            next[s] = choose_greedy(ctx.get_logits_ith(row as i32), 0).token;
        }
    }
    Ok(median(&decode_ms))
}

/// Our engine through a worker process: `clients` closed-loop clients over `clients` slots,
/// `continuous`.
fn ours(a: &Args, cmd: &WorkerCommand, model: &Path, prompts: &[Vec<TokenId>], clients: usize, warmup: usize) -> anyhow::Result<PointResult> {
    let settings = [("kv".to_string(), a.kv.name().to_string())].into();
    let load = LoadSpec { model_path: model.to_path_buf(), threads: a.threads, slots: clients, ctx_per_slot: a.prompt + a.gen, max_batch_tokens: lx_engine::scheduler::batch_tokens_for(a.prompt, clients), gpu_layers: None, settings, ..Default::default() };
    let sched = SchedulerConfig::new(Policy::Continuous, clients, load.max_batch_tokens);
    let mut worker = Worker::spawn(cmd, &load, &sched, Duration::from_secs(300))?;
    let spec = PointSpec { prompt_tokens: a.prompt as u32, max_tokens: a.gen as u32, concurrency: clients, requests: prompts.len() - warmup, warmup, stop_at_eos: false, top_logprobs: 0 };
    let run = run_closed_loop(&mut worker, &spec, &|i| prompts[i % prompts.len()].clone(), &[], &RunControl::default(), &mut Quiet);
    if let Some(e) = &run.worker_error {
        bail!("our worker failed: {e}");
    }
    let point = PointResult::from_run("llama", Policy::Continuous, &spec, run);
    if point.errors > 0 {
        bail!("our requests failed: {:?}", point.error_messages);
    }
    Ok(point)
}

/// Medians over the passes that decoded exactly `b` tokens and no prompt tokens: wall time,
/// the part of it inside `llama_decode`, and the rest (the adapter's own work).
fn decode_pass_ms(point: &PointResult, b: usize) -> [f64; 3] {
    let passes: Vec<_> = point.steps.iter().filter(|s| s.decode_tokens as usize == b && s.prefill_tokens == 0).collect();
    if passes.is_empty() {
        return [f64::NAN; 3];
    }
    let of = |f: &dyn Fn(f64, f64) -> f64| median(&passes.iter().map(|s| f(s.end_ms - s.start_ms, s.compute_ms.unwrap_or(f64::NAN))).collect::<Vec<_>>());
    [of(&|wall, _| wall), of(&|_, compute| compute), of(&|wall, compute| wall - compute)]
}

/// llama.cpp's server with `clients` slots, loaded by `server_load.py` with the same prompts.
fn server(a: &Args, model: &Path, prompts: &[Vec<TokenId>], clients: usize, warmup: usize, port: u16) -> anyhow::Result<(Distribution, Distribution, f64)> {
    let log = std::fs::File::create(std::env::temp_dir().join(format!("lx-llama-server-{port}.log")))?;
    let mut child = Command::new(a.tools.join("llama-server"))
        .args(["-m", &model.display().to_string(), "-np", &clients.to_string(), "-c", &(clients * (a.prompt + a.gen)).to_string()])
        .args(["-t", &a.threads.to_string(), "-tb", &a.threads.to_string(), a.kv_flag(), "--no-cache-prompt", "--cache-ram", "0"])
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--no-webui"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("start llama-server")?;
    let result = (|| {
        wait_healthy(port, Duration::from_secs(120))?;
        let job = json!({ "url": format!("http://127.0.0.1:{port}"), "clients": clients, "warmup": warmup, "max_tokens": a.gen, "prompts": prompts });
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/server_load.py");
        let mut py = Command::new(&a.python).arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().context("start server_load.py")?;
        py.stdin.take().expect("piped").write_all(job.to_string().as_bytes())?;
        let out = py.wait_with_output()?;
        let v: Value = serde_json::from_slice(&out.stdout).context("server_load.py output")?;
        if let Some(e) = v["error"].as_str() {
            bail!("llama-server load: {e}");
        }
        let records = v["records"].as_array().ok_or_else(|| anyhow!("no records"))?;
        let ms = |r: &Value| -> Vec<f64> { r["token_ms"].as_array().map(|t| t.iter().filter_map(Value::as_f64).collect()).unwrap_or_default() };
        let ttft = Distribution::of(records.iter().map(|r| ms(r)[0]));
        let decode = Distribution::of(records.iter().map(|r| {
            let t = ms(r);
            (t.len() - 1) as f64 / ((t[t.len() - 1] - t[0]) / 1e3)
        }));
        let tokens: usize = records.iter().map(|r| ms(r).len()).sum();
        Ok((ttft, decode, tokens as f64 / (v["window_ms"].as_f64().unwrap_or(f64::NAN) / 1e3)))
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn wait_healthy(port: u16, limit: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = write!(s, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            let mut status = String::new();
            if std::io::BufReader::new(s).read_line(&mut status).is_ok() && status.contains(" 200 ") {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("llama-server did not become healthy within {limit:?}")
}

fn main() -> anyhow::Result<()> {
    let a = parse_args()?;
    let open = lx_local::model::OpenModel::open("default", &mut |_| {})?;
    let model = open.path.clone();
    let builder = PromptBuilder::new(&open.tokenizer);
    let prompts = |n: usize| -> Vec<Vec<TokenId>> { (0..n).map(|i| builder.prompt(a.prompt, i as u64)).collect() };
    let exe = std::env::current_exe()?;
    let lx = exe.parent().and_then(|d| d.parent()).map(|d| d.join("lx")).filter(|p| p.is_file()).ok_or_else(|| anyhow!("build lx first: cargo build --release -p lx-cli"))?;
    let mut cmd = lx_local::worker_command("llama");
    cmd.program = lx;
    let kv_name = a.kv.name();

    // The runtime the llama.cpp backend crate keeps (one per process; the hardware report
    // below asks it for devices too).
    let rt = lx_backend_llamacpp::runtime();
    let lmodel = LlamaModel::load_from_file(rt, &model, &LlamaModelParams::default())?;

    let mut decode: Vec<(Rounds, Rounds)> = vec![Default::default(); a.batches.len()];
    let mut serving: Vec<(Rounds, Rounds)> = vec![Default::default(); a.clients.len()];
    for round in 0..a.rounds {
        // Alternate which side goes first, so a drifting machine hits both alike.
        let reference_first = round % 2 == 0;
        for (bi, &b) in a.batches.iter().enumerate() {
            let p = prompts(b);
            let (theirs, mine) = &mut decode[bi];
            let run_theirs = |r: &mut Rounds| -> anyhow::Result<()> {
                r.push("s_tg", batched_bench(&a, &model, b)?);
                Ok(())
            };
            if reference_first {
                run_theirs(theirs)?;
            }
            mine.push("bare_decode_ms", bare_pass(rt, &lmodel, &a, &p, false)?);
            mine.push("bare_reversed_ms", bare_pass(rt, &lmodel, &a, &p, true)?);
            let point = ours(&a, &cmd, &model, &p, b, 0)?;
            let [pass, compute, adapter] = decode_pass_ms(&point, b);
            mine.push("pass_tps", b as f64 / (pass / 1e3));
            mine.push("client_tps", point.decode_tps.p50 * b as f64);
            mine.push("pass_ms", pass);
            mine.push("llama_decode_ms", compute);
            mine.push("adapter_ms", adapter);
            mine.push("itl_ms", point.itl_ms.p50);
            if !reference_first {
                run_theirs(theirs)?;
            }
            eprintln!("round {}/{}: B={b} batched-bench {:.1} tok/s, ours {:.1} (passes) / {:.1} (client)", round + 1, a.rounds, theirs.0["s_tg"].last().unwrap(), mine.0["pass_tps"].last().unwrap(), mine.0["client_tps"].last().unwrap());
        }
        for (ci, &c) in a.clients.iter().enumerate() {
            let p = prompts(c * (a.requests_per_client + 1));
            let (theirs, mine) = &mut serving[ci];
            let run_theirs = |r: &mut Rounds| -> anyhow::Result<()> {
                let (ttft, dec, tput) = server(&a, &model, &p, c, c, 18_000 + round as u16 * 10 + ci as u16)?;
                r.push("ttft_ms", ttft.p50);
                r.push("decode_tps", dec.p50);
                r.push("throughput_tps", tput);
                Ok(())
            };
            if reference_first {
                run_theirs(theirs)?;
            }
            let point = ours(&a, &cmd, &model, &p, c, c)?;
            mine.push("ttft_ms", point.ttft_ms.p50);
            mine.push("decode_tps", point.decode_tps.p50);
            mine.push("throughput_tps", point.throughput_tps);
            if !reference_first {
                run_theirs(theirs)?;
            }
            eprintln!("round {}/{}: c={c} llama-server {:.1} tok/s, ours {:.1}", round + 1, a.rounds, theirs.0["throughput_tps"].last().unwrap(), mine.0["throughput_tps"].last().unwrap());
        }
    }

    // The file's figures, every round's, and the tables printed from them as `lx show`
    // prints them (lx_results::studies::batching_bench), so the two never differ.
    let hw = lx_local::hardware_report();
    let doc = json!({
        "kind": lx_results::studies::batching_bench::KIND,
        "command": std::env::args().collect::<Vec<_>>(),
        "hardware": hw,
        "settings": { "threads": a.threads, "prompt": a.prompt, "gen": a.gen, "rounds": a.rounds, "requests_per_client": a.requests_per_client, "kv": kv_name },
        "decode": a.batches.iter().zip(&decode).map(|(b, (t, m))| json!({ "b": b, "batched_bench": t, "ours": m })).collect::<Vec<_>>(),
        "serving": a.clients.iter().zip(&serving).map(|(c, (t, m))| json!({ "clients": c, "llama_server": t, "ours": m })).collect::<Vec<_>>(),
    });
    let study = lx_results::studies::Study::from_json(doc.clone(), Path::new("the batching benchmark"))?;
    let table = |name: &str| lx_results::studies::table(std::slice::from_ref(&study), Some(name));
    println!("Aggregate decode, prompt {} + {} tokens per sequence, {} threads, KV cache {kv_name}, medians of {} rounds\n", a.prompt, a.gen, a.threads, a.rounds);
    println!("{}", table("decode")?.join("\n"));
    println!("\nClosed-loop serving, {} requests per client after one warm-up request per client, each side\n", a.requests_per_client);
    println!("{}", table("serving")?.join("\n"));
    if let Some(out) = &a.out {
        lx_engine::atomic_file::write(out, serde_json::to_string_pretty(&doc)?.as_bytes())?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
