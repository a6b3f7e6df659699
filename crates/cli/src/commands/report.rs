//! `lx report RUN.json [-o PAGE.html]`: one saved run as a page to send to a colleague
//! (lx_results::report): charts, the machine, the model, the ceilings and every point, in one
//! file that any browser opens without a network.

use std::path::PathBuf;

use clap::Args;
use lx_core::atomic_file;
use lx_results::results::RunFile;

#[derive(Args)]
pub struct ReportArgs {
    /// The run file (`lx sweep --out`, `lx live --out`, the app's saved runs).
    run: PathBuf,
    /// Where the page goes. Default: the run file's name with `.html`.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let run = RunFile::read(&args.run)?;
    let out = args.out.unwrap_or_else(|| args.run.with_extension("html"));
    let source = args.run.file_name().map_or_else(|| args.run.display().to_string(), |f| f.to_string_lossy().into_owned());
    let page = lx_results::report::html(&run, &source);
    atomic_file::write(&out, page.as_bytes())?;
    eprintln!("wrote {} ({} points, {:.0} KB)", out.display(), run.points.len(), page.len() as f64 / 1e3);
    Ok(0)
}
