//! Each backend held against its own project's reference implementation, on the same
//! machine, in the same run: the harness the reference benchmarks share.
//!
//! Each round measures every contender once, in turn (the order rotates from round to
//! round, so the machine's drift spreads over all of them): prefill of the prompt, then
//! greedy decode, for each batch size (B sequences of the same prompt, decoded together).
//! Figures are the median over the rounds; the ratio ours ÷ reference is taken per round and
//! its median reported, so a slow minute hits both sides of a ratio alike.
//!
//! Bins: `candle-reference` (our candle backend against candle-transformers' models) and
//! `mlx-reference` (our MLX backend against mlx-lm, on the same MLX build).

use std::time::Instant;

use anyhow::Result;
use lx_engine::backend::{Backend, Batch, Chunk, Outputs, TokenId};
use serde::Serialize;

/// One prefill and greedy decode of `batch` sequences, as one implementation ran it.
pub struct Run {
    /// Seconds until every sequence had its first token.
    pub prefill_s: f64,
    /// Seconds for the other `gen − 1` tokens of every sequence.
    pub decode_s: f64,
    /// Sequence 0's first greedy tokens.
    pub tokens: Vec<TokenId>,
}

/// One implementation under test, holding one model.
pub trait Contender {
    /// Prefills `batch` copies of `ids` from an empty cache and generates `gen` tokens for each.
    fn run(&mut self, ids: &[TokenId], batch: usize, gen: usize) -> Result<Run>;
}

/// An implementation driven step by step from here; [`Stepwise`] times it.
pub trait Steps {
    /// Forgets every sequence, prefills `batch` copies of `ids` and returns each one's
    /// greedy next token.
    fn prefill(&mut self, ids: &[TokenId], batch: usize) -> Result<Vec<TokenId>>;
    /// Appends each sequence's token at `pos` and returns the next ones.
    fn decode(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<TokenId>>;
}

/// A [`Steps`] implementation as a contender: prefill in one pass, then one step a token.
pub struct Stepwise<S>(pub S);

impl<S: Steps> Contender for Stepwise<S> {
    fn run(&mut self, ids: &[TokenId], batch: usize, gen: usize) -> Result<Run> {
        let t = Instant::now();
        let mut next = self.0.prefill(ids, batch)?;
        let prefill_s = t.elapsed().as_secs_f64();
        let mut tokens = vec![next[0]];
        let t = Instant::now();
        for i in 0..gen.saturating_sub(1) {
            next = self.0.decode(&next, ids.len() + i)?;
            tokens.push(next[0]);
        }
        Ok(Run { prefill_s, decode_s: t.elapsed().as_secs_f64(), tokens })
    }
}

/// One of our backends, through the engine's step interface, as the scheduler drives it.
pub struct Ours<B>(pub B);

impl<B: Backend> Steps for Ours<B> {
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

impl<B: Backend> Ours<B> {
    fn step(&mut self, chunks: impl Iterator<Item = (usize, usize, Vec<TokenId>)>) -> Result<Vec<TokenId>> {
        let chunks = chunks.map(|(slot, pos, tokens)| Chunk { slot: slot as u32, pos: pos as u32, tokens, outputs: Outputs::Last, score: Vec::new() }).collect();
        let out = self.0.step(&Batch { chunks, top_logprobs: 0 })?;
        Ok(out.iter().map(|o| o.choices[0].token).collect())
    }
}

/// The prompt every contender gets: `len` tokens of natural prose from the engine's corpus,
/// exactly as sweeps build them (BOS first where the model adds one). Timing does not depend
/// on which tokens; the greedy comparison does: on prose the model is confident, so two
/// implementations of the same weights agree for longer than on arbitrary tokens, where
/// near-ties come at once.
pub fn prompt_ids(gguf: &lx_format::gguf::GgufFile, len: usize) -> Result<Vec<TokenId>> {
    let tokenizer = lx_format::tokenizer::Tokenizer::from_gguf(gguf)?;
    Ok(lx_format::workload::PromptBuilder::new(&tokenizer).prompt(len, 0))
}

#[derive(Debug, Serialize)]
pub struct Figures {
    pub implementation: String,
    pub batch: usize,
    /// Prompt tokens per second of the whole batch's prefill, one figure per round.
    pub prefill_tok_s: Vec<f64>,
    /// Generated tokens per second of the whole batch ((gen − 1) × B ÷ decode time), per round.
    pub decode_tok_s: Vec<f64>,
    pub prefill_median: f64,
    pub decode_median: f64,
    /// Sequence 0's first greedy tokens (from the first round).
    pub first_tokens: Vec<TokenId>,
    /// Why this implementation could not run this batch size, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Ratio {
    pub ours: String,
    pub reference: String,
    pub batch: usize,
    /// Median over rounds of ours ÷ reference, each round's pair measured minutes apart at most.
    pub prefill: f64,
    pub decode: f64,
    /// How many of sequence 0's first greedy tokens the two share, from the start.
    pub same_first_tokens: usize,
}

pub use lx_client::stats::median;

/// The rounds: every contender at every batch size, once a round, in rotating order. A
/// contender that fails at a batch size is recorded with the reason and not tried again there.
pub fn measure_rounds(contenders: &mut [(String, Box<dyn Contender>)], ids: &[TokenId], batches: &[usize], gen: usize, rounds: usize) -> Vec<Figures> {
    let mut figures: Vec<Figures> = Vec::new();
    for (name, _) in contenders.iter() {
        for &batch in batches {
            figures.push(Figures { implementation: name.clone(), batch, prefill_tok_s: vec![], decode_tok_s: vec![], prefill_median: f64::NAN, decode_median: f64::NAN, first_tokens: vec![], error: None });
        }
    }
    let n = contenders.len();
    for round in 0..rounds {
        for k in 0..n {
            let (name, c) = &mut contenders[(k + round) % n];
            for &batch in batches {
                let f = figures.iter_mut().find(|f| f.implementation == *name && f.batch == batch).expect("made above");
                if f.error.is_some() {
                    continue;
                }
                match c.run(ids, batch, gen) {
                    Ok(run) => {
                        let (pp, tg) = ((ids.len() * batch) as f64 / run.prefill_s, (gen.saturating_sub(1) * batch) as f64 / run.decode_s);
                        eprintln!("round {round}: {name:<40} B={batch}: prefill {pp:7.1} tok/s, decode {tg:6.1} tok/s");
                        f.prefill_tok_s.push(pp);
                        f.decode_tok_s.push(tg);
                        if f.first_tokens.is_empty() {
                            f.first_tokens = run.tokens.into_iter().take(16).collect();
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
    figures
}

/// Ours ÷ each reference, per batch size, for every contender whose name starts with "ours".
pub fn ratios(figures: &[Figures], references: &[&str]) -> Vec<Ratio> {
    let per_round = |a: &[f64], b: &[f64]| median(&a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>());
    let mut out = Vec::new();
    for f in figures.iter().filter(|f| f.implementation.starts_with("ours") && f.error.is_none()) {
        for reference in references {
            let Some(r) = figures.iter().find(|r| r.implementation == *reference && r.batch == f.batch && r.error.is_none()) else { continue };
            out.push(Ratio {
                ours: f.implementation.clone(),
                reference: reference.to_string(),
                batch: f.batch,
                prefill: per_round(&f.prefill_tok_s, &r.prefill_tok_s),
                decode: per_round(&f.decode_tok_s, &r.decode_tok_s),
                same_first_tokens: f.first_tokens.iter().zip(&r.first_tokens).take_while(|(a, b)| a == b).count(),
            });
        }
    }
    out
}

/// The figures as a Markdown table, with each of ours against each reference.
pub fn print_table(figures: &[Figures], ratios: &[Ratio]) {
    println!("| implementation | B | prefill tok/s | decode tok/s | against | prefill ÷ reference | decode ÷ reference |");
    println!("| --- | ---: | ---: | ---: | --- | ---: | ---: |");
    for f in figures {
        if let Some(e) = &f.error {
            println!("| {} | {} | cannot run: {e} | | | | |", f.implementation, f.batch);
            continue;
        }
        let mine: Vec<&Ratio> = ratios.iter().filter(|r| r.ours == f.implementation && r.batch == f.batch).collect();
        let row = |against: &str, pp: String, tg: String| println!("| {} | {} | {:.1} | {:.1} | {against} | {pp} | {tg} |", f.implementation, f.batch, f.prefill_median, f.decode_median);
        if mine.is_empty() {
            row("", "—".into(), "—".into());
        }
        for r in mine {
            row(&r.reference, format!("{:.2}×", r.prefill), format!("{:.2}×", r.decode));
        }
    }
}

/// Now, as the result files write dates.
pub fn now() -> String {
    lx_engine::date::UtcDate::from_unix(lx_engine::date::now_unix_ms() / 1000).minutes()
}

/// What every bench needs before it loads anything: the model file, its header, its
/// architecture, the prompt, and the run's shape (checked).
pub struct Setup {
    pub model: std::path::PathBuf,
    pub gguf: lx_format::gguf::GgufFile,
    pub architecture: String,
    pub ids: Vec<TokenId>,
    pub batches: Vec<usize>,
    pub gen: usize,
    pub rounds: usize,
}

impl Setup {
    /// `model`: a catalog name or a GGUF path.
    pub fn new(model: &str, prompt: usize, gen: usize, batches: &[usize], rounds: usize) -> Result<Setup> {
        use anyhow::{bail, Context};
        let path = if std::path::Path::new(model).is_file() { std::path::PathBuf::from(model) } else { lx_models::catalog_model_path(model)? };
        if !path.exists() {
            bail!("model {} not found: fetch it with `lx models fetch {model}`", path.display());
        }
        if batches.is_empty() || batches.contains(&0) || gen == 0 || prompt == 0 || rounds == 0 {
            bail!("--batch, --gen, --prompt and --rounds must be at least 1");
        }
        let gguf = lx_format::gguf::GgufFile::open(&path).with_context(|| format!("reading {}", path.display()))?;
        let architecture = gguf.get_str("general.architecture")?.to_string();
        let ids = prompt_ids(&gguf, prompt)?;
        Ok(Setup { model: path, gguf, architecture, ids, batches: batches.to_vec(), gen, rounds })
    }

    /// The load spec for our backends: room for the largest batch, on the CPU.
    pub fn load_spec(&self, threads: usize) -> lx_engine::backend::LoadSpec {
        let max_batch = self.batches.iter().copied().max().unwrap_or(1);
        lx_engine::backend::LoadSpec {
            model_path: self.model.clone(),
            threads,
            slots: max_batch,
            ctx_per_slot: self.ids.len() + self.gen,
            max_batch_tokens: self.ids.len() * max_batch,
            gpu_layers: Some(0),
            ..Default::default()
        }
    }

    /// The rounds, their ratios against `references`, printed as a table.
    pub fn measure(&self, contenders: &mut [(String, Box<dyn Contender>)], references: &[&str]) -> (Vec<Figures>, Vec<Ratio>) {
        let figures = measure_rounds(contenders, &self.ids, &self.batches, self.gen, self.rounds);
        let ratios = ratios(&figures, references);
        print_table(&figures, &ratios);
        (figures, ratios)
    }

    /// The result file: what every bench records, then `about` (what this bench adds).
    pub fn report<A: Serialize>(&self, what: &'static str, about: A, figures: Vec<Figures>, ratios: Vec<Ratio>) -> Report<A> {
        Report {
            kind: "reference-bench",
            schema: 1,
            what,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date: now(),
            cpu: lx_machine::hardware::probe().cpu,
            model: self.model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            model_bytes: self.gguf.file_size(),
            architecture: self.architecture.clone(),
            about,
            prompt: "natural prose from the engine's corpus, as sweeps build prompts (PromptBuilder, variant 0)",
            prompt_tokens: self.ids.len(),
            gen_tokens: self.gen,
            rounds: self.rounds,
            figures,
            ratios,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Report<A> {
    /// What `lx show` reads the file as (`lx_results::studies::reference`).
    pub kind: &'static str,
    pub schema: u32,
    pub what: &'static str,
    pub command: String,
    pub date: String,
    pub cpu: String,
    pub model: String,
    pub model_bytes: u64,
    pub architecture: String,
    #[serde(flatten)]
    pub about: A,
    /// Which tokens the prompt holds.
    pub prompt: &'static str,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub rounds: usize,
    pub figures: Vec<Figures>,
    pub ratios: Vec<Ratio>,
}

impl<A: Serialize> Report<A> {
    /// Writes the report to `out` atomically, when asked to.
    pub fn write(&self, out: Option<&std::path::Path>) -> Result<()> {
        if let Some(out) = out {
            lx_engine::atomic_file::write(out, serde_json::to_string_pretty(self)?.as_bytes())?;
            eprintln!("wrote {}", out.display());
        }
        Ok(())
    }
}
