//! `candle-reference`: our candle backend against candle's own model for the same
//! architecture (candle-transformers' `quantized_gemma3` for Gemma 3, `quantized_llama` for
//! the llama family, `quantized_qwen2` for Qwen2), on the same GGUF, the same threads, in the same process and run.
//!
//! The rounds, figures and ratios are the shared harness's (`lx_reference_bench`).
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
use lx_engine::backend::TokenId;
use lx_reference_bench::{Contender, Ours, Setup, Steps, Stepwise};
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

/// candle-transformers' model. Its KV cache is private and only grows, so each prefill
/// starts from a clone of the freshly loaded model (clones share the weights).
enum Reference {
    Gemma3 { loaded: candle_transformers::models::quantized_gemma3::ModelWeights, live: candle_transformers::models::quantized_gemma3::ModelWeights },
    Llama { loaded: candle_transformers::models::quantized_llama::ModelWeights, live: candle_transformers::models::quantized_llama::ModelWeights },
    /// Not `Clone`, but its cache can be cleared.
    Qwen2(candle_transformers::models::quantized_qwen2::ModelWeights),
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
            "qwen2" => Reference::Qwen2(candle_transformers::models::quantized_qwen2::ModelWeights::from_gguf(content, &mut file, &device)?),
            other => bail!("no candle-transformers reference for architecture `{other}` here (gemma3, llama, qwen2)"),
        })
    }

    fn forward(&mut self, rows: Vec<Vec<TokenId>>, pos: usize) -> Result<Vec<TokenId>> {
        let x = Tensor::new(rows, &Device::Cpu)?;
        let logits = match self {
            Reference::Gemma3 { live, .. } => live.forward(&x, pos)?,
            Reference::Llama { live, .. } => live.forward(&x, pos)?,
            Reference::Qwen2(live) => live.forward(&x, pos)?,
        };
        let mut next = Vec::new();
        for b in 0..logits.dim(0)? {
            next.push(logits.i(b)?.argmax(0)?.to_scalar::<u32>()?);
        }
        Ok(next)
    }
}

impl Steps for Reference {
    fn prefill(&mut self, ids: &[TokenId], batch: usize) -> Result<Vec<TokenId>> {
        match self {
            Reference::Gemma3 { loaded, live } => *live = loaded.clone(),
            Reference::Llama { loaded, live } => *live = loaded.clone(),
            Reference::Qwen2(live) => live.clear_kv_cache(),
        }
        self.forward(vec![ids.to_vec(); batch], 0)
    }

    fn decode(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<TokenId>> {
        self.forward(tokens.iter().map(|&t| vec![t]).collect(), pos)
    }
}

/// What this bench adds to the shared report.
#[derive(Debug, Serialize)]
struct About {
    reference: String,
    candle_version: &'static str,
    threads: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    // Before anything touches candle: both sides share candle's pools.
    set_thread_env(args.threads);
    let setup = Setup::new(&args.model, args.prompt, args.gen, &args.batch, args.rounds)?;
    let reference_name = match setup.architecture.as_str() {
        "gemma3" => "candle-transformers quantized_gemma3",
        "llama" => "candle-transformers quantized_llama",
        "qwen2" => "candle-transformers quantized_qwen2",
        other => bail!("no candle-transformers reference for architecture `{other}` (gemma3, llama, qwen2)"),
    };
    let spec = setup.load_spec(args.threads);
    let mut contenders: Vec<(String, Box<dyn Contender>)> = Vec::new();
    for &w in &args.weights {
        let b = CandleBackend::load_with(&spec, &Options { device: DeviceChoice::Cpu, layer_weights: Some(w) })?;
        contenders.push((format!("ours {w}"), Box::new(Stepwise(Ours(b)))));
    }
    let t = Instant::now();
    contenders.push((reference_name.to_string(), Box::new(Stepwise(Reference::load(&setup.model, &setup.architecture)?))));
    eprintln!("loaded {} contenders ({reference_name} in {:.1} s); candle threads {}", contenders.len(), t.elapsed().as_secs_f64(), lx_backend_candle::candle_threads());

    let (figures, ratios) = setup.measure(&mut contenders, &[reference_name]);
    let about = About { reference: reference_name.to_string(), candle_version: lx_backend_candle::CANDLE_VERSION, threads: lx_backend_candle::candle_threads() };
    let what = "our candle backend against candle-transformers' model for the same architecture: same GGUF, same threads, same process; medians over rounds";
    setup.report(what, about, figures, ratios).write(args.out.as_deref())
}
