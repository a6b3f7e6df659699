//! Harness overhead: a backend measured through engine, worker process and scheduler,
//! against a bare loop over the same library in this process doing the same work (same
//! model, threads, prompt ids and greedy sampling), alternating in one run.
//!
//! ```text
//! cargo build --release -p lx-cli && cargo run --release -p lx-cli --example overhead -- \
//!     [--backend llama|candle] [--threads 2] [--rounds 5] [--prompt N] [--gen N] \
//!     [--reference bare|llama-cpp-python] [--python PATH] [--candle-weights FORMAT] [--out FILE.json]
//! ```
//! The bare loops: llama-cpp-2 in a context shaped like the worker's; for candle, our model
//! code driven directly (`BareLoop`, from the candle backend's examples). Defaults: llama.cpp prompt
//! 512 and 128 output tokens, candle prompt 256 and 64.
//!
//! `--reference llama-cpp-python` compares our llama.cpp backend with an independent native
//! build of llama.cpp instead: llama-cpp-python compiled from source (scripts/llama-cpp-python
//! builds it; `--python` defaults to its interpreter), driven by the same bare greedy loop in
//! `llama_cpp_python_loop.py`, in its own process so both sides load their own llama.cpp.
//!
//! Prints medians and the ratios engine ÷ reference (target: ≥ 0.97 for prefill and decode
//! tok/s; TTFT overhead under 2 ms at 64 prompt tokens), as `lx show` prints the file that
//! `--out` writes (every request of both sides: `lx_results::studies::overhead`). Run it on an idle machine: the
//! backends' threads spin-wait, and any other busy process moves these figures more than
//! the harness does.

use std::io::{BufRead, BufReader, Write};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use lx_backend_candle::bare_loop::BareLoop;
use lx_engine::backend::{choose_greedy, LoadSpec, TokenId};
use lx_worker::coordinator::Worker;
use lx_client::traffic::{run_closed_loop, PointSpec, Quiet, RunControl};
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_format::workload::PromptBuilder;
use lx_results::studies::overhead;

/// Short-prompt pairs per round, for the TTFT difference.
const SHORT_PAIRS: usize = 6;

struct Sample {
    ttft_ms: f64,
    prefill_tps: f64,
    decode_tps: f64,
}

/// Appends tokens at a position of the one sequence and returns the greedy next token.
trait Bare {
    fn reset(&mut self);
    fn append(&mut self, tokens: &[TokenId], pos: usize) -> TokenId;
}

/// llama-cpp-2 with nothing of ours in between but the greedy choice.
struct LlamaBare<'m> {
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
}

impl Bare for LlamaBare<'_> {
    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
    }
    fn append(&mut self, tokens: &[TokenId], pos: usize) -> TokenId {
        self.batch.clear();
        let last = tokens.len() - 1;
        for (i, &t) in tokens.iter().enumerate() {
            self.batch.add(LlamaToken(t as i32), (pos + i) as i32, &[0], i == last).unwrap();
        }
        self.ctx.decode(&mut self.batch).unwrap();
        choose_greedy(self.ctx.get_logits_ith(last as i32), 0).token
    }
}

impl Bare for BareLoop {
    fn reset(&mut self) {
        BareLoop::reset(self);
    }
    fn append(&mut self, tokens: &[TokenId], pos: usize) -> TokenId {
        BareLoop::append(self, tokens, pos).unwrap()
    }
}

/// Prefill `prompt` in one pass, then decode `gen` tokens greedily, one pass each, timed the
/// way the engine defines its figures.
fn bare(b: &mut dyn Bare, prompt: &[TokenId], gen: usize) -> Sample {
    b.reset();
    let t0 = Instant::now();
    let mut token = b.append(prompt, 0);
    let first = t0.elapsed();
    for i in 0..gen - 1 {
        token = b.append(&[token], prompt.len() + i);
    }
    let end = t0.elapsed();
    Sample {
        ttft_ms: first.as_secs_f64() * 1e3,
        prefill_tps: prompt.len() as f64 / first.as_secs_f64(),
        decode_tps: (gen - 1) as f64 / (end - first).as_secs_f64(),
    }
}

/// The llama-cpp-python loop in a child process: one JSON line per request each way.
struct PythonLoop {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its llama-cpp-python version and llama.cpp's CPU feature line, for the report.
    about: String,
}

impl PythonLoop {
    fn start(python: &str, model: &std::path::Path, threads: usize, load: &LoadSpec) -> anyhow::Result<PythonLoop> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/llama_cpp_python_loop.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(model)
            .args(["--threads", &threads.to_string(), "--ctx", &load.ctx_per_slot.to_string(), "--batch", &load.max_batch_tokens.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {python} (build it with scripts/llama-cpp-python, or pass --python): {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let ready: serde_json::Value = serde_json::from_str(&line).map_err(|_| anyhow::anyhow!("llama-cpp-python loop did not start (see its stderr above)"))?;
        let about = format!("llama-cpp-python {} ({})", ready["version"].as_str().unwrap_or("?"), ready["system"].as_str().unwrap_or("?"));
        Ok(PythonLoop { child, stdin, stdout, about })
    }

    fn run(&mut self, prompt: &[TokenId], gen: usize) -> Sample {
        let request = serde_json::json!({ "prompt": prompt, "gen": gen });
        writeln!(self.stdin, "{request}").and_then(|_| self.stdin.flush()).expect("llama-cpp-python loop exited");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("llama-cpp-python loop exited");
        let v: serde_json::Value = serde_json::from_str(&line).expect("llama-cpp-python loop answered garbage");
        let f = |k: &str| v[k].as_f64().expect("figure");
        Sample { ttft_ms: f("ttft_ms"), prefill_tps: f("prefill_tps"), decode_tps: f("decode_tps") }
    }
}

impl Drop for PythonLoop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the engine is measured against.
enum Reference<'m> {
    Bare(Box<dyn Bare + 'm>),
    Python(PythonLoop),
}

impl Reference<'_> {
    fn run(&mut self, prompt: &[TokenId], gen: usize) -> Sample {
        match self {
            Reference::Bare(b) => bare(b.as_mut(), prompt, gen),
            Reference::Python(p) => p.run(prompt, gen),
        }
    }
}

fn engine(worker: &mut Worker, prompt: &[TokenId], gen: u32) -> Sample {
    let spec = PointSpec { prompt_tokens: prompt.len() as u32, max_tokens: gen, concurrency: 1, requests: 1, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
    let run = run_closed_loop(worker, &spec, &|_| prompt.to_vec(), &[], &RunControl::default(), &mut Quiet);
    let r = &run.records[0];
    assert!(r.ok(), "engine request failed: {:?}", r.error);
    Sample { ttft_ms: r.ttft_ms().unwrap(), prefill_tps: r.prefill_tps().unwrap(), decode_tps: r.decode_tps().unwrap() }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let flag = |name: &str, default: usize| value(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let backend = lx_local::canonical(&value("--backend").unwrap_or_else(|| "llama".into()))?;
    let threads = flag("--threads", lx_machine::hardware::physical_cores());
    let rounds = flag("--rounds", 5);
    let python_reference = match value("--reference").as_deref() {
        None | Some("bare") => false,
        Some("llama-cpp-python") if backend == "llama" => true,
        Some(other) => anyhow::bail!("--reference {other}: use bare, or llama-cpp-python with --backend llama"),
    };
    let (long, gen) = match backend {
        "llama" => (flag("--prompt", 512), flag("--gen", 128)),
        "candle" => (flag("--prompt", 256), flag("--gen", 64)),
        other => anyhow::bail!("no bare loop for {other} in this benchmark"),
    };
    let short = 64usize;

    let model_spec = lx_local::model::OpenModel::open("default", &mut |_| {})?;
    let prompts = PromptBuilder::new(&model_spec.tokenizer);
    let long_prompt = prompts.prompt(long, 0);
    let short_prompt = prompts.prompt(short, 0);

    // The worker is our own `lx` binary, built next to this example.
    let exe = std::env::current_exe()?;
    let lx = exe.parent().and_then(|d| d.parent()).map(|d| d.join("lx")).filter(|p| p.is_file()).ok_or_else(|| anyhow::anyhow!("build lx first: cargo build --release -p lx-cli"))?;
    let mut cmd = lx_local::worker_command(backend);
    cmd.program = lx;
    // candle: the bare loop and the worker run the same layer weights (`--candle-weights`,
    // else the CPU default); a comparison across formats would measure the format.
    let candle_weights = match value("--candle-weights") {
        Some(w) => w.parse().map_err(anyhow::Error::msg)?,
        None => lx_backend_candle::CPU_DEFAULT_WEIGHTS,
    };
    let settings = if backend == "candle" { [("weights".to_string(), candle_weights.to_string())].into() } else { Default::default() };
    let load = LoadSpec { model_path: model_spec.path.clone(), threads, slots: 1, ctx_per_slot: long + gen, max_batch_tokens: long.max(512), gpu_layers: None, settings, ..Default::default() };
    let mut worker = Worker::spawn(&cmd, &load, &SchedulerConfig::new(Policy::Serial, 1, load.max_batch_tokens), Duration::from_secs(300))?;

    // The bare loop, in this process, with the worker's context size and threads.
    let rt;
    let model;
    let mut reference = if python_reference {
        let default = lx_models::cache_dir().join("tools/llama-cpp-python/bin/python").display().to_string();
        Reference::Python(PythonLoop::start(&value("--python").unwrap_or(default), &model_spec.path, threads, &load)?)
    } else if backend == "llama" {
        rt = LlamaBackend::init()?;
        llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
        model = LlamaModel::load_from_file(&rt, &model_spec.path, &LlamaModelParams::default())?;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(load.ctx_per_slot as u32))
            .with_n_batch(load.max_batch_tokens as u32)
            .with_n_ubatch(512)
            .with_n_seq_max(1)
            .with_kv_unified(false)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32);
        Reference::Bare(Box::new(LlamaBare { ctx: model.new_context(&rt, params)?, batch: LlamaBatch::new(load.max_batch_tokens, 1) }))
    } else {
        lx_backend_candle::set_thread_env(threads);
        Reference::Bare(Box::new(BareLoop::load(&model_spec.path, load.ctx_per_slot, candle_weights)?))
    };
    let (reference_name, reference_about) = match &reference {
        Reference::Bare(_) if backend == "candle" => (format!("bare loop, {candle_weights} layers"), None),
        Reference::Bare(_) => ("bare loop".to_string(), None),
        Reference::Python(p) => {
            println!("reference: {}", p.about);
            ("llama-cpp-python".to_string(), Some(p.about.clone()))
        }
    };
    let worker_info = worker.info().clone();

    // Warm both paths once.
    reference.run(&short_prompt, 8);
    engine(&mut worker, &short_prompt, 8);

    let (mut b, mut e, mut b64, mut e64) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so drift on a shared machine hits both alike.
        let mut pair = |first_bare: bool, worker: &mut Worker, p: &[TokenId], g: usize| {
            if first_bare {
                let x = reference.run(p, g);
                (x, engine(worker, p, g as u32))
            } else {
                let y = engine(worker, p, g as u32);
                (reference.run(p, g), y)
            }
        };
        let (x, y) = pair(round % 2 == 0, &mut worker, &long_prompt, gen);
        b.push(x);
        e.push(y);
        // A 2 ms difference hides in a TTFT's noise: many short pairs, and the median of
        // their paired differences.
        for k in 0..SHORT_PAIRS {
            let (x, y) = pair((round + k) % 2 == 1, &mut worker, &short_prompt, 2);
            b64.push(x);
            e64.push(y);
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    let samples = |v: &[Sample]| v.iter().map(|s| overhead::Sample { ttft_ms: s.ttft_ms, prefill_tok_s: s.prefill_tps, decode_tok_s: s.decode_tps }).collect::<Vec<_>>();
    let result = overhead::HarnessOverhead {
        kind: overhead::KIND.into(),
        command: args.clone(),
        // The machine alone: listing the backends' devices would initialise llama.cpp a
        // second time in this process, which the bare loop has done.
        hardware: serde_json::to_value(lx_machine::hardware::probe())?,
        backend: backend.to_string(),
        engine: format!("{} on {}", worker_info.version, worker_info.device),
        reference: reference_name,
        reference_about,
        threads,
        rounds,
        prompt_tokens: long,
        gen_tokens: gen,
        long: overhead::Sides { reference: samples(&b), engine: samples(&e) },
        short_prompt_tokens: short,
        short: overhead::Sides { reference: samples(&b64), engine: samples(&e64) },
    };
    println!("{}: threads {threads}, prompt {long}, output {gen}, concurrency 1, {rounds} rounds (medians)\n", result.engine);
    let study = lx_results::studies::Study::Overhead(result.clone());
    println!("{}", lx_results::studies::table(std::slice::from_ref(&study), None)?.join("\n"));
    if let Some(out) = value("--out") {
        lx_engine::atomic_file::write(std::path::Path::new(&out), serde_json::to_string_pretty(&result)?.as_bytes())?;
        eprintln!("wrote {out}");
    }
    Ok(())
}
