//! `lx worker`: the backend side of the worker protocol, or the probe of this machine's
//! limits. Started by the coordinator, not by people.

use clap::Args;

#[derive(Args)]
pub struct WorkerArgs {
    /// Backend to host.
    #[arg(long, required_unless_present = "probe")]
    backend: Option<String>,
    /// Measure this machine's limits instead, printed as JSON lines as each device is done.
    #[arg(long, conflicts_with = "backend")]
    probe: bool,
}

pub fn run(args: WorkerArgs) -> anyhow::Result<i32> {
    match args.backend {
        Some(backend) => lx_backends::serve_worker(&backend)?,
        None => lx_backends::limits::serve_probe()?,
    }
    Ok(0)
}
