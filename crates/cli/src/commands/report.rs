//! `lx report RUN.json... [-o PAGE.html]`: a saved run as a page to send to a colleague
//! (lx_results::report): charts, the machine, the model, the ceilings and every point, in one
//! file that any browser opens without a network. A lesson's runs (`lx demo NAME --out`, the
//! app's Lessons), one per machine, make its handout instead: the question, each machine's
//! answer, and their figures on shared charts.

use std::path::PathBuf;

use clap::Args;
use lx_engine::atomic_file;
use lx_results::results::RunFile;

#[derive(Args)]
pub struct ReportArgs {
    /// The run file (`lx sweep --out`, `lx live --out`, the app's saved runs), or several runs
    /// of one lesson (one per machine) for its handout.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Where the page goes. Default: the (first) run file's name with `.html`.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    for path in &args.runs {
        let source = path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
        runs.push((RunFile::read(path)?, source));
    }
    let out = args.out.unwrap_or_else(|| args.runs[0].with_extension("html"));
    let lessons = runs.iter().filter(|(r, _)| r.settings.get("demo").is_some()).count();
    let (page, what) = if lessons > 0 || runs.len() > 1 {
        let handout = lx_teach::handout::handout(&runs).map_err(anyhow::Error::msg)?;
        (handout.html(), format!("the handout of lesson {}, {} run(s)", handout.name, handout.runs.len()))
    } else {
        let (run, source) = &runs[0];
        (lx_results::report::html(run, source), format!("{} points", run.points.len()))
    };
    atomic_file::write(&out, page.as_bytes())?;
    eprintln!("wrote {} ({what}, {:.0} KB)", out.display(), page.len() as f64 / 1e3);
    Ok(0)
}
