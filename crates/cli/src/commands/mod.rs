pub mod compare;
pub mod demo;
pub mod generate;
pub mod hw;
pub mod live;
pub mod models;
pub mod serve;
pub mod show;
pub mod sweep;
pub mod worker;

/// How the engine runs a backend: `lx serve` and `lx live` take these alike.
#[derive(clap::Args)]
pub struct EngineArgs {
    /// Scheduling policy: serial, static, continuous, chunked.
    #[arg(long, default_value = "continuous")]
    pub policy: lx_engine::scheduler::Policy,
    /// Prompt tokens per pass for the chunked policy.
    #[arg(long, default_value_t = lx_engine::scheduler::DEFAULT_CHUNK_TOKENS)]
    pub chunk_tokens: usize,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Layers to offload to the GPU (default: all, where the backend has a GPU).
    #[arg(long)]
    pub gpu_layers: Option<u32>,
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
pub fn stop_on_ctrl_c(control: &lx_engine::load::RunControl) {
    let stop = control.stop.clone();
    let _ = ctrlc::set_handler(move || {
        if stop.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: finishing in-flight bookkeeping (Ctrl-C again to quit at once)");
    });
}
