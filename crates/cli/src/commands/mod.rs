pub mod advise;
pub mod bench;
pub mod compare;
pub mod demo;
pub mod fidelity;
pub mod fit;
pub mod gallery;
pub mod generate;
pub mod kv_args;
pub mod split_args;
pub mod hw;
pub mod live;
pub mod models;
pub mod report;
pub mod serve;
pub mod show;
pub mod spec_args;
pub mod sweep;
pub mod tune;

/// Gives `run` (a live session's: a sweep's job does this itself) what its points' ceilings are computed from: this machine's limits (probed
/// once per machine and build, said on stderr) and the model's cost per token. Without them
/// the run goes on, measured all the same, and says why on stderr.
pub fn add_ceilings(run: &mut lx_results::results::RunFile, model: &std::path::Path) {
    match lx_local::limits::ceilings_basis(model, &mut || eprintln!("{}", crate::progress::PROBING)) {
        Ok((limits, cost)) => (run.limits, run.model_cost) = (Some(limits), Some(cost)),
        Err(e) => eprintln!("{}", crate::progress::no_ceilings(&e)),
    }
}

/// How the engine runs a backend: `lx serve` and `lx live` take these alike.
#[derive(clap::Args)]
pub struct EngineArgs {
    /// Scheduling policy: serial, static, continuous, chunked, disaggregated (a prefill
    /// worker and a decode worker; `lx serve` takes the options after --prefill-threads).
    #[arg(long, default_value = "continuous")]
    pub policy: lx_engine::scheduler::Policy,
    /// Prompt tokens per pass for the chunked policy.
    #[arg(long, default_value_t = lx_engine::defaults::CHUNK_TOKENS)]
    pub chunk_tokens: usize,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Layers to offload to the GPU (default: all, where the backend has a GPU).
    #[arg(long)]
    pub gpu_layers: Option<u32>,
}

/// OpenAI-compatible servers to measure: `lx sweep` and `lx live` take these alike.
#[derive(clap::Args)]
pub struct TargetArgs {
    /// OpenAI-compatible servers to measure too, `URL` or `NAME=URL` (comma-separated or
    /// repeated), e.g. `http://127.0.0.1:8080/v1`. Prompts are built with --model's
    /// tokenizer; an API key comes from LX_API_KEY.
    #[arg(long, value_parser = list::<String>)]
    pub target: Vec<Vec<String>>,
    /// The model to ask the servers for (default: the first each lists).
    #[arg(long)]
    pub target_model: Option<String>,
    /// Which endpoint to stream from: completions (the prompt as is) or chat (the prompt as
    /// one user message, in the server's chat template).
    #[arg(long, default_value = "completions")]
    pub api: lx_openai::Api,
    /// Seconds a server may send nothing before its request fails.
    #[arg(long, default_value_t = 60.0)]
    pub target_timeout: f64,
    /// Retries of a request a server answers with HTTP 429 or 503 (after its Retry-After).
    #[arg(long, default_value_t = 3)]
    pub target_retries: u32,
}

impl TargetArgs {
    /// The servers `--target` names, with the options that apply to all of them.
    pub fn servers(&self, stop_at_eos: bool) -> anyhow::Result<Vec<lx_openai::Server>> {
        let api_key = std::env::var("LX_API_KEY").ok().filter(|k| !k.is_empty());
        if !(self.target_timeout > 0.0 && self.target_timeout.is_finite()) {
            anyhow::bail!("--target-timeout must be a positive number of seconds");
        }
        self.target
            .iter()
            .flatten()
            .map(|spec| {
                let mut s = lx_openai::Server::parse(spec).map_err(|e| anyhow::anyhow!("--target {e}"))?;
                s.model = self.target_model.clone();
                s.api = self.api;
                s.api_key = api_key.clone();
                s.ignore_eos = !stop_at_eos;
                s.idle_timeout = std::time::Duration::from_secs_f64(self.target_timeout);
                s.max_retries = self.target_retries;
                Ok(s)
            })
            .collect()
    }
}

/// The model a command runs (`--model`): every command that loads one takes it alike.
#[derive(clap::Args)]
pub struct ModelArg {
    /// Model: a catalog name (default), a .gguf path, hf:OWNER/REPO/FILE.gguf, or synth:NAME
    /// (a shape-only twin of a model the disk need not hold: its speed and memory, no
    /// meaningful text).
    #[arg(long, default_value = "default")]
    pub model: String,
}

impl ModelArg {
    /// The model, fetched first (with a progress bar) where it is a catalog model not yet here.
    pub fn open(&self) -> anyhow::Result<lx_local::model::OpenModel> {
        lx_local::model::OpenModel::open(&self.model, &mut crate::progress::fetch_reporter())
    }
}

/// What a run measures: backends of this build and OpenAI-compatible servers. `lx sweep`,
/// `lx live` and `lx advise` take these alike.
#[derive(clap::Args)]
pub struct Measured {
    /// Backends, comma-separated (llama, candle, mlx). Default: llama, or none when --target
    /// names servers.
    #[arg(long)]
    pub backend: Option<String>,
    #[command(flatten)]
    pub targets: TargetArgs,
}

impl Measured {
    /// The servers `--target` names, and every name measured: `--backend`'s, then the
    /// servers'.
    pub fn resolve(&self, stop_at_eos: bool) -> anyhow::Result<(Vec<lx_openai::Server>, Vec<String>)> {
        let servers = self.targets.servers(stop_at_eos)?;
        let names = backends_and_servers(self.backend.as_deref(), &servers)?;
        Ok((servers, names))
    }
}

/// What `--backend` names (default: llama, or none when servers are named) followed by the
/// servers, each name once.
pub fn backends_and_servers(backend: Option<&str>, servers: &[lx_openai::Server]) -> anyhow::Result<Vec<String>> {
    let default_backend = if servers.is_empty() { lx_engine::kind::BackendKind::DEFAULT.name() } else { "" };
    let mut names = backend
        .unwrap_or(default_backend)
        .split(',')
        .filter(|b| !b.trim().is_empty())
        .map(|b| lx_local::canonical(b.trim()).map(String::from))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for s in servers {
        if names.contains(&s.name) {
            anyhow::bail!("--target: '{}' is already the name of a backend or another server; name it with NAME=URL", s.name);
        }
        names.push(s.name.clone());
    }
    Ok(names)
}

/// Parse a comma list: `64,256,1024`.
pub fn list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<T>().map_err(|e| format!("'{p}': {e}")))
        .collect()
}

/// First Ctrl-C: ask `control`'s run to stop after its bookkeeping, so what was measured is
/// written. Second: leave at once (exit 130).
pub fn stop_on_ctrl_c(control: &lx_client::traffic::RunControl) {
    let stop = control.stop.clone();
    let _ = ctrlc::set_handler(move || {
        if stop.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: finishing in-flight bookkeeping (Ctrl-C again to quit at once)");
    });
}
