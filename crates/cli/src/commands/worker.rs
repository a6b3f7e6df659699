//! `lx worker`: the backend side of the worker protocol. Started by the coordinator, not by people.

use clap::Args;

#[derive(Args)]
pub struct WorkerArgs {
    /// Backend to host.
    #[arg(long)]
    backend: String,
}

pub fn run(args: WorkerArgs) -> anyhow::Result<i32> {
    lx_backends::serve_worker(&args.backend)?;
    Ok(0)
}
