//! `lx show RUN.json...`: a saved run's table again, as `lx sweep` printed it, or only some
//! of its columns, or only its repetitions' summary. The README's tables are made this way
//! from the run files in docs/results/, and a test checks that they still are.

use std::path::PathBuf;

use clap::Args;
use lx_results::printers::{markdown_columns, markdown_with_columns, printer, repetitions_table, Format};
use lx_results::results::RunFile;

#[derive(Args)]
pub struct ShowArgs {
    /// Run files (`lx sweep --out`, the app's saved runs); their points are shown in order.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Only these columns, in this order: keys such as backend,test,ttft_p50_ms,
    /// decode_tok_s_p50 (a column's name in lower case, other characters as `_`).
    #[arg(long)]
    columns: Option<String>,
    /// Only the summary of repeated points (`lx sweep --repetitions`).
    #[arg(long, conflicts_with = "columns")]
    repetitions: bool,
}

pub fn run(args: ShowArgs) -> anyhow::Result<i32> {
    let mut runs = args.runs.iter().map(|p| RunFile::read(p)).collect::<anyhow::Result<Vec<_>>>()?.into_iter();
    let mut all = runs.next().expect("clap requires a run");
    for r in runs {
        all.points.extend(r.points);
        all.backends.extend(r.backends);
    }
    if args.repetitions {
        let table = repetitions_table(&all.points);
        if table.is_empty() {
            anyhow::bail!("no point of these runs was repeated (lx sweep --repetitions)");
        }
        // The table without the blank lines and caption that separate it from the rows.
        for line in table.iter().filter(|l| l.starts_with('|')) {
            println!("{line}");
        }
        return Ok(0);
    }
    let mut out = match &args.columns {
        Some(list) => markdown_with_columns(Box::new(std::io::stdout()), markdown_columns(list).map_err(anyhow::Error::msg)?),
        None => printer(Format::Markdown, Box::new(std::io::stdout())),
    };
    out.header(&all)?;
    for p in &all.points {
        out.point(p)?;
    }
    out.footer(&all)?;
    Ok(0)
}
