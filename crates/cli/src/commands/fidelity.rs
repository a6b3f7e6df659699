//! `lx fidelity`: how faithfully each backend and setting of this build runs a model, against
//! a reference, on a fixed text; the table, and a result file `lx show` prints again.

use std::path::PathBuf;

use clap::Args;
use lx_run::fidelity::{Plan, Watch, DEFAULT_COVERAGE, DEFAULT_TOP};
use lx_results::studies::fidelity::{self, Candidate, FidelityRun};

#[derive(Args)]
pub struct FidelityArgs {
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Measure against this file of the same model (e.g. a Q8_0 or F16 GGUF), so that the
    /// model file's own quantization shows too. Default: the model's file, with llama.cpp and
    /// an f16 KV cache.
    #[arg(long)]
    reference_model: Option<PathBuf>,
    /// Backends to measure, comma-separated (default: every backend of this build).
    #[arg(long, value_delimiter = ',')]
    backends: Vec<String>,
    /// Score this text file instead of the shipped one.
    #[arg(long)]
    text: Option<PathBuf>,
    /// Tokens per chunk: each chunk is scored from a fresh cache, over its second half
    /// (as `llama-perplexity -c`).
    #[arg(long, default_value_t = Plan::default().context)]
    context: usize,
    /// Score at most this many chunks (default: all the text holds).
    #[arg(long)]
    chunks: Option<usize>,
    /// The reference keeps, per position, its best alternatives up to this much probability;
    /// the rest of the vocabulary counts as one outcome.
    #[arg(long, default_value_t = DEFAULT_COVERAGE)]
    coverage: f64,
    /// At most this many alternatives per position.
    #[arg(long, default_value_t = DEFAULT_TOP)]
    top: usize,
    /// Tokens each candidate generates for its decode speed.
    #[arg(long, default_value_t = Plan::default().generated)]
    generate: usize,
    /// Compute threads (default: the tuned choice, else physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Leave speculative decoding and the draft model out.
    #[arg(long)]
    no_drafts: bool,
    /// The draft model for speculative decoding by a draft model (default: one made from the
    /// model, as `lx models draft`).
    #[arg(long)]
    draft_model: Option<PathBuf>,
    /// Write the result file here (default: fidelity-<model>.json in the current directory).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Says on stderr what is measured, and each candidate's row as it lands.
struct Progress;

impl Watch for Progress {
    fn status(&mut self, what: &str) {
        eprintln!("measuring {what} ...");
    }
    fn measured(&mut self, c: &Candidate) {
        match (&c.fidelity, &c.error) {
            (Some(f), _) => eprintln!("  mean KL {}, top-1 agreement {:.2}%", fidelity::kl(f.mean_kl), 100.0 * f.top1_agreement),
            (None, Some(why)) => eprintln!("  not measured: {why}"),
            (None, None) => {}
        }
    }
}

pub fn run(args: FidelityArgs) -> anyhow::Result<i32> {
    if args.top == 0 {
        anyhow::bail!("--top must be at least 1");
    }
    if !(args.coverage > 0.0 && args.coverage <= 1.0) {
        anyhow::bail!("--coverage is a probability: more than 0, at most 1");
    }
    if args.generate == 0 {
        anyhow::bail!("--generate must be at least 1");
    }
    let backends = args.backends.iter().map(|b| lx_local::canonical(b).map(str::to_string)).collect::<anyhow::Result<Vec<_>>>()?;
    let model = args.model.open()?;
    let asked = lx_local::fidelity::Asked { backends, reference_model: args.reference_model, draft_model: args.draft_model, no_drafts: args.no_drafts, text: args.text };
    let plan = Plan { context: args.context, chunks: args.chunks, top: args.top, coverage: args.coverage, generated: args.generate, threads: args.threads };
    let mut job = lx_local::fidelity::job(&model, &asked, plan, std::env::args().collect())?;
    let stem = model.path.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
    let out = args.out.unwrap_or_else(|| PathBuf::from(format!("fidelity-{stem}.json")));
    job.out = Some(out.clone());
    crate::commands::stop_on_ctrl_c(&job.control);
    let file = lx_run::fidelity::run(&job, &mut Progress).map_err(anyhow::Error::msg)?;
    print(&file);
    eprintln!("wrote {}", out.display());
    Ok(if file.stopped { 130 } else { 0 })
}

fn print(file: &FidelityRun) {
    for table in fidelity::TABLES.iter().rev() {
        for line in fidelity::header(table).iter().chain(&file.rows(table)) {
            println!("{line}");
        }
        println!();
    }
}
