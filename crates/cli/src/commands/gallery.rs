//! `lx gallery DIR...`: bench files (`lx bench`) from any number of machines on one offline
//! page, this machine marked (lx_results::bench::gallery).

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct GalleryArgs {
    /// Bench files, or directories whose bench files to take (other files there are passed
    /// over), e.g. docs/results/bench.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Where the page goes.
    #[arg(short, long, default_value = "gallery.html")]
    out: PathBuf,
}

pub fn run(args: GalleryArgs) -> anyhow::Result<i32> {
    let (entries, problems) = lx_results::bench::gallery::load(&args.paths);
    for p in &problems {
        eprintln!("warning: {p}");
    }
    anyhow::ensure!(!entries.is_empty(), "no bench file among {} (lx bench writes them)", args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    let page = lx_results::bench::gallery::html(&entries, Some(&lx_results::bench::Machine::here()));
    lx_engine::atomic_file::write(&args.out, page.as_bytes())?;
    eprintln!("wrote {} ({} bench files, {:.0} KB)", args.out.display(), entries.len(), page.len() as f64 / 1e3);
    Ok(if problems.is_empty() { 0 } else { 2 })
}
