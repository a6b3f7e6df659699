//! `lx serve`: one backend behind the OpenAI-compatible API, scheduled by our engine.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;
use lx_engine::backend::LoadSpec;
use lx_engine::scheduler::SchedulerConfig;
use lx_openai::server::{ChatTemplate, Served};

#[derive(Args)]
pub struct ServeArgs {
    /// The backend that runs the model (llama, candle, mlx).
    #[arg(long, default_value = lx_engine::kind::BackendKind::DEFAULT.name())]
    backend: String,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Sequences served at once (the worker's slots); more requests wait in its queue.
    #[arg(long, default_value_t = 4)]
    slots: usize,
    /// Prompt plus output tokens each request may use (default: the model's context ÷ slots, at most 4096).
    #[arg(long)]
    ctx: Option<usize>,
    #[command(flatten)]
    engine: crate::commands::EngineArgs,
    #[command(flatten)]
    split: crate::commands::split_args::SplitArgs,
    /// Address to listen on; 127.0.0.1 keeps it to this machine (0.0.0.0 exposes it).
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Largest request body accepted, bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
}

pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    let backend = lx_local::canonical(&args.backend)?.to_string();
    if args.slots == 0 {
        anyhow::bail!("--slots must be at least 1");
    }
    let model = args.model.open()?;
    let ctx_per_slot = args.ctx.unwrap_or((model.context_length / args.slots).min(4096));
    if ctx_per_slot < 2 || ctx_per_slot * args.slots > model.context_length.max(ctx_per_slot) {
        anyhow::bail!("--ctx {ctx_per_slot} × --slots {} does not fit the model's context of {} tokens", args.slots, model.context_length);
    }
    let gguf = lx_format::gguf::GgufFile::open(&model.path)?;
    let chat = match gguf.get_str("tokenizer.chat_template") {
        Ok(jinja) => ChatTemplate::recognise(jinja),
        Err(_) => {
            let chat = ChatTemplate::from_vocabulary(|t| model.tokenizer.token_id(t).is_some());
            if let Some(family) = chat {
                eprintln!("note: the model file has no chat template; chat uses the {family:?} turn markers its vocabulary has");
            }
            chat
        }
    };
    let load = LoadSpec {
        model_path: model.path.clone(),
        threads: args.engine.threads,
        slots: args.slots,
        ctx_per_slot,
        max_batch_tokens: lx_engine::scheduler::batch_tokens_for(ctx_per_slot, args.slots),
        gpu_layers: args.engine.gpu_layers,
        ..Default::default()
    };
    let mut config = SchedulerConfig::new(args.engine.policy, args.slots, load.max_batch_tokens);
    config.chunk_tokens = args.engine.chunk_tokens;
    config.split = args.split.split();
    let spawner = lx_local::spawner(lx_local::profile::Use::Measure, 0);
    let start: lx_openai::server::Start = {
        let (backend, load, config) = (backend.clone(), load.clone(), config.clone());
        Box::new(move || spawner(&backend, &load, &config))
    };
    let target = start()?;
    let info = target.info();
    eprintln!("{backend}: {} on {} (loaded in {:.0} ms)", info.version, info.device, target.load_ms());
    if let Some(why) = &info.cpu_fallback {
        eprintln!("warning: {why}");
    }
    let name = model.path.file_stem().map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned());
    let served = Served {
        name,
        tokenizer: Arc::new(model.tokenizer),
        chat,
        ctx_per_slot,
        api_key: std::env::var("LX_API_KEY").ok().filter(|k| !k.is_empty()),
        max_body_bytes: args.max_body,
    };
    if served.chat.is_none() {
        eprintln!("note: this model's chat template is not one lx serve renders: /v1/chat/completions will refuse requests");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    let (policy, slots) = (args.engine.policy, args.slots);
    let key = if served.api_key.is_some() { ", API key required" } else { "" };
    let model_name = served.name.clone();
    lx_openai::server::run(served, target, start, SocketAddr::new(args.host, args.port), stop, |addr| {
        eprintln!("serving {model_name} on http://{addr}/v1 ({policy}, {slots} slots × {ctx_per_slot} tokens{key}); Ctrl-C stops");
    })
    .map_err(anyhow::Error::msg)?;
    Ok(0)
}
