//! `candle-reference`: our candle backend against candle's own model for the same
//! architecture (candle-transformers' `quantized_gemma3` for Gemma 3, `quantized_llama` for
//! the llama family), on the same GGUF, the same threads, in the same process and run.
//!
//! Each round measures every contender once, in turn (the order rotates from round to
//! round, so the machine's drift spreads over all of them): prefill of the prompt in one
//! pass, then greedy decode, for each batch size (B sequences of the same prompt, decoded
//! together; candle's models batch only sequences at the same position). Figures are the
//! median over the rounds; the ratio ours ÷ reference is taken per round and its median
//! reported, so a slow minute hits both sides of a ratio alike.
//!
//! The reference's text is not compared here: the released `quantized_gemma3` applies SiLU
//! where Gemma 3 uses GELU (its greedy text leaves llama.cpp's at the first token). Our
//! text is checked against llama.cpp's in the backend's own tests.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file;
use candle_core::{Device, IndexOp, Tensor};
use clap::Parser;
use lx_backend_candle::{set_thread_env, CandleBackend, DeviceChoice, Options, WeightFormat};
use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs, TokenId};
use serde::Serialize;

#[derive(Parser, Debug)]
#[command(about = "Our candle backend against candle-transformers' model for the same architecture")]
struct Args {
    /// A catalog name (default, smollm2) or a GGUF path.
    #[arg(long, default_value = "default")]
    model: String,
    /// Compute threads for both (0: candle's default, the physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Prompt tokens, prefilled in one pass.
    #[arg(long, default_value_t = 256)]
    prompt: usize,
    /// Tokens generated per sequence (the first comes from the prefill).
    #[arg(long, default_value_t = 128)]
    gen: usize,
    /// Batch sizes (sequences decoded together).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    batch: Vec<usize>,
    /// Our backend's weight formats to measure.
    #[arg(long, value_delimiter = ',', default_value = "f16,dual,q8_0,quantized")]
    weights: Vec<WeightFormat>,
    /// Rounds; each measures every contender once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Write the results here as JSON (atomically).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One implementation under test, holding one model.
trait Contender {
    /// Forgets every sequence, prefills `batch` copies of `ids` and returns each one's
    /// greedy next token.
    fn prefill(&mut self, ids: &[TokenId], batch: usize) -> Result<Vec<TokenId>>;
    /// Appends each sequence's token at `pos` and returns the next ones.
    fn decode(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<TokenId>>;
}

struct Ours(CandleBackend);

impl Contender for Ours {
    fn prefill(&mut self, ids: &[TokenId], batch: usize) -> Result<Vec<TokenId>> {
        for slot in 0..batch {
            self.0.clear(slot as u32);
        }
        self.step((0..batch).map(|slot| (slot, 0, ids.to_vec())))
    }

    fn decode(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<TokenId>> {
        self.step(tokens.iter().enumerate().map(|(slot, &t)| (slot, pos, vec![t])))
    }
}

impl Ours {
    fn step(&mut self, chunks: impl Iterator<Item = (usize, usize, Vec<TokenId>)>) -> Result<Vec<TokenId>> {
        let chunks = chunks.map(|(slot, pos, tokens)| Chunk { slot: slot as u32, pos: pos as u32, tokens, outputs: Outputs::Last }).collect();
        let out = self.0.step(&Batch { chunks, top_logprobs: 0 })?;
        Ok(out.iter().map(|o| o.choices[0].token).collect())
    }
}

/// candle-transformers' model. Its KV cache is private and only grows, so each prefill
/// starts from a clone of the freshly loaded model (clones share the weights).
enum Reference {
    Gemma3 { loaded: candle_transformers::models::quantized_gemma3::ModelWeights, live: candle_transformers::models::quantized_gemma3::ModelWeights },
    Llama { loaded: candle_transformers::models::quantized_llama::ModelWeights, live: candle_transformers::models::quantized_llama::ModelWeights },
}

impl Reference {
    fn load(path: &std::path::Path, arch: &str) -> Result<Reference> {
        let mut file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| e.with_path(path))?;
        let device = Device::Cpu;
        Ok(match arch {
            "gemma3" => {
                let m = candle_transformers::models::quantized_gemma3::ModelWeights::from_gguf(content, &mut file, &device)?;
                Reference::Gemma3 { live: m.clone(), loaded: m }
            }
            "llama" => {
                let m = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(content, &mut file, &device)?;
                Reference::Llama { live: m.clone(), loaded: m }
            }
            other => bail!("no candle-transformers reference for architecture `{other}` here (gemma3, llama)"),
        })
    }

    fn forward(&mut self, rows: Vec<Vec<TokenId>>, pos: usize) -> Result<Vec<TokenId>> {
        let x = Tensor::new(rows, &Device::Cpu)?;
        let logits = match self {
            Reference::Gemma3 { live, .. } => live.forward(&x, pos)?,
            Reference::Llama { live, .. } => live.forward(&x, pos)?,
        };
        let mut next = Vec::new();
        for b in 0..logits.dim(0)? {
            next.push(logits.i(b)?.argmax(0)?.to_scalar::<u32>()?);
        }
        Ok(next)
    }
}

impl Contender for Reference {
    fn prefill(&mut self, ids: &[TokenId], batch: usize) -> Result<Vec<TokenId>> {
        match self {
            Reference::Gemma3 { loaded, live } => *live = loaded.clone(),
            Reference::Llama { loaded, live } => *live = loaded.clone(),
        }
        self.forward(vec![ids.to_vec(); batch], 0)
    }

    fn decode(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<TokenId>> {
        self.forward(tokens.iter().map(|&t| vec![t]).collect(), pos)
    }
}

#[derive(Debug, Serialize)]
struct Figures {
    implementation: String,
    batch: usize,
    /// Prompt tokens per second of the whole batch's prefill, one figure per round.
    prefill_tok_s: Vec<f64>,
    /// Generated tokens per second of the whole batch ((gen − 1) × B ÷ decode time), per round.
    decode_tok_s: Vec<f64>,
    prefill_median: f64,
    decode_median: f64,
    /// Sequence 0's first greedy tokens (from the first round).
    first_tokens: Vec<TokenId>,
    /// Why this implementation could not run this batch size, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct Ratio {
    ours: String,
    batch: usize,
    /// Median over rounds of ours ÷ reference, each round's pair measured minutes apart at most.
    prefill: f64,
    decode: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    schema: u32,
    what: &'static str,
    command: String,
    date: String,
    cpu: String,
    model: String,
    model_bytes: u64,
    architecture: String,
    reference: String,
    candle_version: &'static str,
    threads: usize,
    prompt_tokens: usize,
    gen_tokens: usize,
    rounds: usize,
    figures: Vec<Figures>,
    ratios: Vec<Ratio>,
}

fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One prefill and decode of `batch` sequences: (prefill tok/s, decode tok/s, sequence 0's tokens).
fn measure(c: &mut dyn Contender, ids: &[TokenId], batch: usize, gen: usize) -> Result<(f64, f64, Vec<TokenId>)> {
    let t = Instant::now();
    let mut next = c.prefill(ids, batch)?;
    let prefill = (ids.len() * batch) as f64 / t.elapsed().as_secs_f64();
    let mut first = vec![next[0]];
    let t = Instant::now();
    for i in 0..gen.saturating_sub(1) {
        next = c.decode(&next, ids.len() + i)?;
        first.push(next[0]);
    }
    let decode = (gen.saturating_sub(1) * batch) as f64 / t.elapsed().as_secs_f64();
    first.truncate(16);
    Ok((prefill, decode, first))
}

fn main() -> Result<()> {
    let args = Args::parse();
    // Before anything touches candle: both sides share candle's pools.
    set_thread_env(args.threads);
    let model = if std::path::Path::new(&args.model).is_file() { PathBuf::from(&args.model) } else { lx_models::catalog_model_path(&args.model)? };
    if !model.exists() {
        bail!("model {} not found: fetch it with `lx models fetch {}`", model.display(), args.model);
    }
    let gguf = lx_engine::gguf::GgufFile::open(&model).with_context(|| format!("reading {}", model.display()))?;
    let arch = gguf.get_str("general.architecture")?.to_string();
    let reference_name = match arch.as_str() {
        "gemma3" => "candle-transformers quantized_gemma3",
        "llama" => "candle-transformers quantized_llama",
        other => bail!("no candle-transformers reference for architecture `{other}` (gemma3, llama)"),
    };
    let max_batch = args.batch.iter().copied().max().unwrap_or(1);
    if args.batch.contains(&0) || args.gen == 0 || args.prompt == 0 || args.rounds == 0 {
        bail!("--batch, --gen, --prompt and --rounds must be at least 1");
    }
    // A fixed prompt of ordinary tokens (timing does not depend on which), BOS first.
    let bos = gguf.get_u32("tokenizer.ggml.bos_token_id").unwrap_or(1);
    let ids: Vec<TokenId> = std::iter::once(bos).chain((0..args.prompt - 1).map(|i| 1000 + (i as u32 * 7919) % 20000)).collect();

    let spec = LoadSpec {
        model_path: model.clone(),
        threads: args.threads,
        slots: max_batch,
        ctx_per_slot: args.prompt + args.gen,
        max_batch_tokens: args.prompt * max_batch,
        gpu_layers: Some(0),
    };
    let mut contenders: Vec<(String, Box<dyn Contender>)> = Vec::new();
    for &w in &args.weights {
        let b = CandleBackend::load_with(&spec, &Options { device: DeviceChoice::Cpu, layer_weights: Some(w) })?;
        contenders.push((format!("ours {w}"), Box::new(Ours(b))));
    }
    let t = Instant::now();
    contenders.push((reference_name.to_string(), Box::new(Reference::load(&model, &arch)?)));
    eprintln!("loaded {} contenders ({reference_name} in {:.1} s); candle threads {}", contenders.len(), t.elapsed().as_secs_f64(), lx_backend_candle::candle_threads());

    let mut figures: Vec<Figures> = Vec::new();
    for (name, _) in &contenders {
        for &batch in &args.batch {
            figures.push(Figures { implementation: name.clone(), batch, prefill_tok_s: vec![], decode_tok_s: vec![], prefill_median: f64::NAN, decode_median: f64::NAN, first_tokens: vec![], error: None });
        }
    }
    let n = contenders.len();
    for round in 0..args.rounds {
        for k in 0..n {
            let ci = (k + round) % n;
            let (name, c) = &mut contenders[ci];
            for &batch in &args.batch {
                let f = figures.iter_mut().find(|f| f.implementation == *name && f.batch == batch).expect("made above");
                if f.error.is_some() {
                    continue;
                }
                match measure(c.as_mut(), &ids, batch, args.gen) {
                    Ok((pp, tg, first)) => {
                        eprintln!("round {round}: {name:<40} B={batch}: prefill {pp:7.1} tok/s, decode {tg:6.1} tok/s");
                        f.prefill_tok_s.push(pp);
                        f.decode_tok_s.push(tg);
                        if f.first_tokens.is_empty() {
                            f.first_tokens = first;
                        }
                    }
                    Err(e) => {
                        // candle appends a stack trace to its messages when RUST_BACKTRACE is set.
                        let why = e.to_string().lines().next().unwrap_or_default().to_string();
                        eprintln!("round {round}: {name} B={batch}: cannot run: {why}");
                        f.error = Some(why);
                    }
                }
            }
        }
    }
    for f in &mut figures {
        f.prefill_median = median(&f.prefill_tok_s);
        f.decode_median = median(&f.decode_tok_s);
    }
    let mut ratios = Vec::new();
    for f in figures.iter().filter(|f| f.implementation.starts_with("ours")) {
        let Some(r) = figures.iter().find(|r| r.implementation == reference_name && r.batch == f.batch && r.error.is_none()) else { continue };
        let per_round = |a: &[f64], b: &[f64]| median(&a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>());
        ratios.push(Ratio { ours: f.implementation.clone(), batch: f.batch, prefill: per_round(&f.prefill_tok_s, &r.prefill_tok_s), decode: per_round(&f.decode_tok_s, &r.decode_tok_s) });
    }

    println!("| implementation | B | prefill tok/s | decode tok/s | prefill ÷ reference | decode ÷ reference |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for f in &figures {
        let r = ratios.iter().find(|r| r.ours == f.implementation && r.batch == f.batch);
        let ratio = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.2}×"));
        match &f.error {
            Some(e) => println!("| {} | {} | cannot run: {e} | | | |", f.implementation, f.batch),
            None => println!(
                "| {} | {} | {:.1} | {:.1} | {} | {} |",
                f.implementation,
                f.batch,
                f.prefill_median,
                f.decode_median,
                ratio(r.map(|r| r.prefill)),
                ratio(r.map(|r| r.decode))
            ),
        }
    }

    let report = Report {
        schema: 1,
        what: "our candle backend against candle-transformers' model for the same architecture: same GGUF, same threads, same process; medians over rounds",
        command: std::env::args().collect::<Vec<_>>().join(" "),
        date: lx_engine::date::UtcDate::from_unix(lx_engine::date::now_unix_ms() / 1000).minutes(),
        cpu: lx_engine::hardware::probe().cpu,
        model: model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        model_bytes: gguf.file_size(),
        architecture: arch,
        reference: reference_name.to_string(),
        candle_version: lx_backend_candle::CANDLE_VERSION,
        threads: lx_backend_candle::candle_threads(),
        prompt_tokens: args.prompt,
        gen_tokens: args.gen,
        rounds: args.rounds,
        figures,
        ratios,
    };
    if let Some(out) = &args.out {
        lx_engine::results::write_atomic(out, serde_json::to_string_pretty(&report)?.as_bytes())?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
