//! `lx worker`: the backend side of the worker protocol, or the probe of this machine's
//! limits. Started by the coordinator, not by people.

use clap::Args;

#[derive(Args)]
pub struct WorkerArgs {
    /// Backend to host.
    #[arg(long, required_unless_present = "probe")]
    backend: Option<String>,
    /// Measure this machine's limits and print them as JSON instead.
    #[arg(long, conflicts_with = "backend")]
    probe: bool,
}

pub fn run(args: WorkerArgs) -> anyhow::Result<i32> {
    match args.backend {
        Some(backend) => lx_backends::serve_worker(&backend)?,
        None => println!("{}", serde_json::to_string(&lx_backends::limits::measure_here()?)?),
    }
    Ok(0)
}
