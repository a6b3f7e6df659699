//! `lx demo NAME`: one teaching point, measured live, printed as a short table and one
//! sentence; exit 1 when the point did not hold in this run. The demos themselves (what
//! runs, how it is judged) live in the engine, so the app shows the same ones.

use std::path::PathBuf;

use clap::Args;
use lx_teach::demo::{find, run_demo, run_demo_on_server, Report, Servers, DEMOS};
use lx_client::traffic::RunControl;
use lx_results::results::RunFile;
use lx_format::workload::PromptBuilder;

#[derive(Args)]
pub struct DemoArgs {
    /// The demo to run (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the demos and what each shows.
    #[arg(long)]
    list: bool,
    /// Backend to measure (llama, candle, mlx).
    #[arg(long, default_value = lx_engine::kind::BackendKind::DEFAULT.name())]
    backend: String,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Compute threads (default: physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Also write the measured points (JSON run file, with timelines) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// `prompt-length`: measure this server instead of a backend. `disaggregation`: send the
    /// same workload to these servers too (a disaggregated deployment beside an aggregated
    /// one), each a row after the backend's.
    #[command(flatten)]
    targets: crate::commands::TargetArgs,
}

pub fn run(args: DemoArgs) -> anyhow::Result<i32> {
    if args.list {
        for d in DEMOS {
            println!("{:<22} {}", d.name(), d.shows());
        }
        return Ok(0);
    }
    let demo = find(args.name.as_deref().unwrap_or_default())?;
    let servers = args.targets.servers(false)?;
    // A demo whose point does not depend on our scheduler measures the server alone.
    let alone = !servers.is_empty() && demo.servers() == Servers::Alone;
    if alone && servers.len() > 1 {
        anyhow::bail!("demo {} measures one server at a time (got {} --target)", demo.name(), servers.len());
    }
    if !servers.is_empty() && !alone && demo.servers() != Servers::Beside {
        anyhow::bail!(
            "demo {} shows how our scheduler runs requests, so it measures a backend, not a server; --target works with: {} (the server alone), {} (servers beside the backend)",
            demo.name(),
            Servers::Alone.demos().join(", "),
            Servers::Beside.demos().join(", ")
        );
    }
    let backend = if alone { servers[0].name.clone() } else { lx_local::canonical(args.backend.trim())?.to_string() };
    let model = std::sync::Arc::new(args.model.open()?);
    let prompts = PromptBuilder::new(&model.tokenizer);
    let control = RunControl::default();
    crate::commands::stop_on_ctrl_c(&control);
    let hardware = lx_local::hardware_report();
    let settings = serde_json::json!({ "demo": demo.name(), "backend": backend, "threads": args.threads });
    let mut run = RunFile::new(std::env::args().collect(), hardware, model.record(), settings);
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    let spawn = lx_local::spawner_with_servers(servers, std::sync::Arc::new(model.tokenizer.clone()), lx_local::profile::Use::Measure, 0);
    let mut ctx = model.sweep_context(&prompts, spawn, args.out.clone(), control);
    ctx.fidelity = Some(lx_local::fidelity::sweep_basis(model.clone(), run.command.clone()));
    eprintln!("demo {}: {} ({backend}, measured live)", demo.name(), demo.shows());
    let mut progress = crate::progress::SweepProgress::new(0);
    let report = if alone { run_demo_on_server(demo, &backend, &ctx, &mut run, &mut progress) } else { run_demo(demo, &backend, &names, args.threads, &ctx, &mut run, &mut progress) };
    progress.finish();
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if run.stopped {
        eprintln!("stopped by the user: the demo is incomplete");
        return Ok(130);
    }
    if !report.held {
        eprintln!("the teaching point did not hold in this run (see the checks above); on a busy machine, run it again");
        return Ok(1);
    }
    Ok(0)
}

fn print_report(r: &Report) {
    if let Some(sizing) = &r.sizing {
        println!("{sizing}\n");
    }
    for line in r.table() {
        println!("{line}");
    }
    println!();
    for c in &r.checks {
        println!("{} {}: {} (needs {} {})", if c.holds { "ok  " } else { "FAIL" }, c.what, lx_results::studies::numbers::check_value(c.value), c.op, c.threshold);
    }
    println!();
    println!("{}", r.sentence);
}
