//! `lx generate`: one prompt through one backend, or one OpenAI-compatible server, streamed,
//! with its timing.

use std::io::Write;
use clap::Args;
use lx_engine::backend::TokenId;
use lx_client::traffic::{run_closed_loop, Observer, PointSpec, RunControl};
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_format::tokenizer::PieceDecoder;

#[derive(Args)]
pub struct GenerateArgs {
    /// Backend: llama (default), candle, mlx.
    #[arg(long, conflicts_with = "target")]
    backend: Option<String>,
    /// Or one server to ask instead (`--target URL`); see `lx sweep --help`.
    #[command(flatten)]
    targets: crate::commands::TargetArgs,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// The prompt text (BOS first where the model asks for it).
    #[arg(long)]
    prompt: String,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64)]
    max_tokens: u32,
    /// Keep going past end-of-sequence tokens, always making --max-tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Print the generated token ids after the text (line `ids: [...]`).
    #[arg(long)]
    ids: bool,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    #[command(flatten)]
    spec: crate::commands::spec_args::SpecArgs,
    #[command(flatten)]
    kv: crate::commands::kv_args::KvArgs,
}

/// Prints each token's text as it arrives, as the continuation of the printed prompt.
struct Stream<'a> {
    tokenizer: &'a lx_format::tokenizer::Tokenizer,
    decoder: PieceDecoder,
}

impl Observer for Stream<'_> {
    fn token(&mut self, _id: u64, _index: u32, token: TokenId, _at_ms: f64) {
        let text = self.decoder.push(self.tokenizer.token_bytes(token));
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

pub fn run(args: GenerateArgs) -> anyhow::Result<i32> {
    let servers = args.targets.servers(!args.ignore_eos)?;
    let names = crate::commands::backends_and_servers(args.backend.as_deref(), &servers)?;
    let [backend] = names.as_slice() else {
        anyhow::bail!("lx generate asks one backend or one server; {} were named ({})", names.len(), names.join(", "));
    };
    if args.max_tokens == 0 {
        anyhow::bail!("--max-tokens must be at least 1");
    }
    // Refused before anything is loaded or written (a default draft model is made on first use).
    if args.spec.drafters().len() > 1 {
        anyhow::bail!("lx generate takes one --spec (none, lookup or draft); `lx sweep` compares them");
    }
    if args.spec.settings().is_on() && !servers.is_empty() {
        anyhow::bail!("--spec is our engine's speculative decoding; a server decodes as it was started");
    }
    let kv = args.kv.types_for(&names)?;
    let model = args.model.open()?;
    let prompt = model.tokenizer.encode(&args.prompt);
    let need = prompt.len() + args.max_tokens as usize;
    if need > model.context_length {
        anyhow::bail!(
            "prompt ({} tokens) + max tokens ({}) = {need} exceeds the model's context of {} tokens",
            prompt.len(),
            args.max_tokens,
            model.context_length
        );
    }
    let load = lx_engine::backend::LoadSpec {
        model_path: model.path.clone(),
        threads: args.threads,
        slots: 1,
        ctx_per_slot: need,
        max_batch_tokens: prompt.len().max(512),
        gpu_layers: None,
        draft_model: args.spec.draft_model(&model.path)?,
        kv,
        settings: Default::default(),
    };
    let mut scheduler = SchedulerConfig::new(Policy::Serial, 1, load.max_batch_tokens);
    scheduler.spec = args.spec.settings();
    scheduler.validate()?;
    let spawn = lx_local::spawner_with_servers(servers, std::sync::Arc::new(model.tokenizer.clone()), lx_local::profile::Use::Measure, 0);
    let mut worker = spawn(backend, &load, &scheduler)?;
    eprintln!("{}: {} on {}", backend, worker.info().version, worker.info().device);
    if let Some(draft) = &worker.info().draft {
        eprintln!("draft model: {draft}");
    }
    if let Some(why) = &worker.info().cpu_fallback {
        eprintln!("warning: {why}");
    }

    let spec = PointSpec { prompt_tokens: prompt.len() as u32, max_tokens: args.max_tokens, concurrency: 1, requests: 1, warmup: 0, stop_at_eos: !args.ignore_eos, top_logprobs: 0 };
    print!("{}", args.prompt);
    let mut stream = Stream { tokenizer: &model.tokenizer, decoder: PieceDecoder::default() };
    let run = run_closed_loop(worker.as_mut(), &spec, &|_| prompt.clone(), model.tokenizer.eos_tokens(), &RunControl::default(), &mut stream);
    println!();
    let record = run.records.first().ok_or_else(|| anyhow::anyhow!("the worker returned no result"))?;
    if let Some(e) = &record.error {
        anyhow::bail!("generation failed: {e}");
    }
    if args.ids {
        println!("ids: {:?}", record.tokens);
    }
    // A server reports no prefill passes: its prefill rate is not known, rather than zero.
    let prefill = record.prefill_tps().map(|tps| format!(" · prefill {tps:.0} tok/s")).unwrap_or_default();
    let drafts = match (&record.spec, scheduler.spec.is_on()) {
        (Some(s), _) => format!(
            " · {}: {} of {} drafted tokens accepted ({:.0}%) in {} verify passes, {:.2} ms drafting",
            scheduler.spec.label(),
            s.accepted,
            s.drafted,
            100.0 * s.acceptance().unwrap_or(0.0),
            s.passes,
            s.draft_ms
        ),
        (None, true) => format!(" · {}: nothing drafted", scheduler.spec.label()),
        (None, false) => String::new(),
    };
    eprintln!(
        "prompt {} tokens · TTFT {:.1} ms · {} tokens · decode {:.1} tok/s{prefill}{drafts}",
        prompt.len(),
        record.ttft_ms().unwrap_or(0.0),
        record.tokens.len(),
        record.decode_tps().unwrap_or(0.0),
    );
    Ok(0)
}
