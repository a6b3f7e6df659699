//! `lx show FILE...`: the table of saved results again. A run file (`lx sweep --out`, the
//! app's saved runs) prints as `lx sweep` printed it, or only some of its columns, or only
//! its repetitions' summary; a demo's run file (`lx demo NAME --out`) prints its checks,
//! judged again from its points; a study's result file (the comparisons with other tools
//! and of the harness itself, `lx_results::studies`) prints its table. The tables of
//! measured figures in docs/ are made this way from the files in
//! docs/results/, and a test checks that they still are.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use lx_results::printers::{markdown_columns, markdown_with_columns, printer, repetitions_table, Format};
use lx_results::results::{RunFile, RunFileError};
use lx_results::studies::{self, Study};

#[derive(Args)]
pub struct ShowArgs {
    /// Result files, all run files or all of one study's kind; their rows are shown in order.
    #[arg(required = true, value_name = "FILES")]
    runs: Vec<PathBuf>,
    /// Run files: only these columns, in this order: keys such as backend,test,ttft_p50_ms,
    /// decode_tok_s_p50 (a column's name in lower case, other characters as `_`).
    #[arg(long)]
    columns: Option<String>,
    /// Run files: only the summary of repeated points (`lx sweep --repetitions`).
    #[arg(long, conflicts_with = "columns")]
    repetitions: bool,
    /// Which table: for run files `points` (a sweep's table), `demo` (a demo's checks, the
    /// default for a demo's runs), `report` (a demo's measured points), `speculation` (what
    /// speculative decoding did), `transfer` (what disaggregated serving moved) or
    /// `decisions` (`lx advise`'s evidence: every trial, the answers and the advice); for a study file one of its kind's (batching-bench:
    /// `decode`, `serving`; without it, all of them).
    #[arg(long)]
    table: Option<String>,
}

/// A result file, read.
enum ResultFile {
    Run(Box<RunFile>),
    Study(Study),
}

fn read(path: &Path) -> anyhow::Result<ResultFile> {
    match RunFile::read(path) {
        Ok(run) => Ok(ResultFile::Run(Box::new(run))),
        Err(RunFileError::NotARunFile { json, .. }) => Ok(ResultFile::Study(Study::from_json(json, path)?)),
        Err(e) => Err(e.into()),
    }
}

pub fn run(args: ShowArgs) -> anyhow::Result<i32> {
    let files = args.runs.iter().map(|p| read(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let (mut runs, mut found) = (Vec::new(), Vec::new());
    for f in files {
        match f {
            ResultFile::Run(r) => runs.push(*r),
            ResultFile::Study(s) => found.push(s),
        }
    }
    if !found.is_empty() {
        if !runs.is_empty() {
            bail!("these are run files and a {} file: show each on its own", found[0].kind());
        }
        if args.columns.is_some() || args.repetitions {
            bail!("--columns and --repetitions are for run files; a {} file has tables (--table {})", found[0].kind(), found[0].tables().join(", "));
        }
        let lines = match &args.table {
            Some(t) => studies::table(&found, Some(t))?,
            None => studies::all_tables(&found)?,
        };
        for line in lines {
            println!("{line}");
        }
        return Ok(0);
    }
    let demos = runs.iter().filter(|r| lx_teach::demo::judge_run(r).is_some()).count();
    let as_demo = match args.table.as_deref() {
        Some("demo") => true,
        Some("report") => {
            for run in &runs {
                let report = lx_teach::demo::judge_run(run).ok_or_else(|| anyhow::anyhow!("--table report: not every file is a demo's run (`lx demo NAME --out FILE`)"))??;
                for line in report.table() {
                    println!("{line}");
                }
            }
            return Ok(0);
        }
        Some("transfer") => {
            let table = lx_results::transfer::transfer_table(runs.iter().map(|r| (&r.backends[..], &r.points[..])));
            if table.is_empty() {
                bail!("no point of these runs moved a sequence's state (lx sweep --policy disaggregated)");
            }
            for line in table {
                println!("{line}");
            }
            return Ok(0);
        }
        Some("points") => false,
        Some("speculation") => {
            let points: Vec<_> = runs.into_iter().flat_map(|r| r.points).collect();
            let table = lx_results::speculation::speculation_table(&points);
            if table.is_empty() {
                bail!("no point of these runs decoded speculatively (lx sweep --spec lookup)");
            }
            for line in table {
                println!("{line}");
            }
            return Ok(0);
        }
        Some("decisions") => {
            for run in &runs {
                let table = run.decisions.evidence_table();
                if table.is_empty() {
                    bail!("this run decided nothing (its capacity searches, deadline plans and advice come from `lx advise`)");
                }
                for line in table {
                    println!("{line}");
                }
                println!();
                for line in run.decisions.searches.iter().map(|s| s.answer()).chain(run.decisions.deadlines.iter().map(|d| d.answer())) {
                    println!("{line}");
                }
                if let Some(advice) = &run.decisions.advice {
                    for line in lx_decide::advise::lines(advice) {
                        println!("{line}");
                    }
                }
            }
            return Ok(0);
        }
        Some(other) => bail!("run files have no table '{other}' (their tables: points, demo, report, speculation, transfer, decisions)"),
        None => demos == runs.len() && args.columns.is_none() && !args.repetitions,
    };
    if as_demo {
        if demos < runs.len() {
            bail!("--table demo: not every file is a demo's run (`lx demo NAME --out FILE`)");
        }
        let reports = runs.iter().filter_map(lx_teach::demo::judge_run).collect::<Result<Vec<_>, _>>()?;
        for line in lx_teach::demo::checks_table(&reports) {
            println!("{line}");
        }
        return Ok(0);
    }
    let mut runs = runs.into_iter();
    let mut all = runs.next().expect("clap requires a file");
    for r in runs {
        all.points.extend(r.points);
        all.backends.extend(r.backends);
    }
    if args.repetitions {
        let table = repetitions_table(&all.points);
        if table.is_empty() {
            bail!("no point of these runs was repeated (lx sweep --repetitions)");
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
