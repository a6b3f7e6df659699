//! `lx`: Latency Explorer on the command line.
//!
//! Subcommands are one file each under `commands/`; this file only parses and dispatches.
//! Errors are printed as one clear message and a non-zero exit, never a panic trace.


mod commands;

mod progress;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "lx", version, about = "Measure how fast a local LLM answers: TTFT, inter-token latency, tokens/s")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List and fetch models.
    #[command(subcommand)]
    Models(commands::models::ModelsCmd),
    /// Show this machine: CPU, cores, memory, OS, and each backend's devices.
    Hw(commands::hw::HwArgs),
    /// Generate from one prompt, streamed to the terminal, with its timing.
    Generate(commands::generate::GenerateArgs),
    /// Measure a grid of prompt lengths × concurrencies × policies × backends.
    // Boxed: clap's argument structs are big, and this one is much the biggest.
    Sweep(Box<commands::sweep::SweepArgs>),
    /// Compare saved runs point by point: ratios to the first run, and whether each
    /// difference exceeds the runs' own spread.
    Compare(commands::compare::CompareArgs),
    /// Live mode in a terminal: clients kept busy until --requests or --duration, a status line
    /// with TTFT, throughput and memory every few seconds, then the table of what settled.
    Live(commands::live::LiveArgs),
    /// Print a saved run's table again: all of it, some columns (--columns), or the summary of
    /// its repeated points (--repetitions).
    Show(commands::show::ShowArgs),
    /// Write a saved run as one self-contained HTML page: charts with their ceilings, the
    /// machine, the model and every point, for any browser, offline.
    Report(commands::report::ReportArgs),
    /// Show one serving trade-off live: prompt-length, batching, static-vs-continuous,
    /// chunked-prefill, prefix-cache (--list). Exits 1 when the point did not hold.
    Demo(commands::demo::DemoArgs),
    /// From a workload preset to a recommendation: capacity searches (TTFT-bound and mixed
    /// presets) or a deadline plan (throughput-bound ones) per candidate within --budget, the
    /// choice with its evidence, and a confirmation run. Exits 2 when it is not confirmed.
    Advise(Box<commands::advise::AdviseArgs>),
    /// Serve one backend as an OpenAI-compatible server (/v1/completions, /v1/chat/completions,
    /// /v1/models, /health, /metrics), scheduled by our engine.
    Serve(commands::serve::ServeArgs),
    /// How faithfully each backend and setting runs the model: KL divergence from a reference
    /// (llama.cpp, f16 KV cache), top-1 agreement and perplexity on a fixed text, beside
    /// each setting's decode speed.
    #[command(visible_alias = "quality")]
    Fidelity(commands::fidelity::FidelityArgs),
    /// Measure each backend's settings on this machine (threads, weight formats, flash
    /// attention, KV layout, micro-batch) and keep the best as the profile every later run
    /// uses; --show prints it with its evidence.
    Tune(commands::tune::TuneArgs),
    /// What fits in memory before anything loads: for each backend and KV cache type, the
    /// longest context at 1, 4 and 16 sequences and the most sequences at the model's full
    /// context; --check sets the predictions beside the peaks saved runs measured.
    Fit(commands::fit::FitArgs),
    /// The standard suite on every backend of the build: each shape's figures against this
    /// machine's ceilings, a score per backend against the reference machine, and one file to
    /// share (no user, host or path in it); --sustained keeps a load on for minutes.
    Bench(Box<commands::bench::BenchArgs>),
    /// Bench files from many machines on one offline HTML page: scores with their intervals,
    /// every shape's rates, filters by CPU and GPU, this machine marked.
    Gallery(commands::gallery::GalleryArgs),
}

fn main() {
    // `lx worker ...`: one backend behind the worker protocol, or the probe; started by the
    // coordinator, not by people, so it is read where the app reads it, not by clap.
    lx_local::serve_if_asked(&std::env::args().collect::<Vec<_>>());
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Models(cmd) => commands::models::run(cmd),
        Cmd::Hw(args) => commands::hw::run(args),
        Cmd::Generate(args) => commands::generate::run(args),
        Cmd::Sweep(args) => commands::sweep::run(*args),
        Cmd::Demo(args) => commands::demo::run(args),
        Cmd::Advise(args) => commands::advise::run(*args),
        Cmd::Compare(args) => commands::compare::run(args),
        Cmd::Show(args) => commands::show::run(args),
        Cmd::Report(args) => commands::report::run(args),
        Cmd::Live(args) => commands::live::run(args),
        Cmd::Serve(args) => commands::serve::run(args),
        Cmd::Tune(args) => commands::tune::run(args),
        Cmd::Fidelity(args) => commands::fidelity::run(args),
        Cmd::Fit(args) => commands::fit::run(args),
        Cmd::Bench(args) => commands::bench::run(*args),
        Cmd::Gallery(args) => commands::gallery::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
