//! `lx compare BASE.json OTHER.json...`: saved runs (from this machine or others) point by
//! point against the first, as a table of ratios with whether each difference exceeds the
//! runs' own spread (`lx_results::compare` says how that is judged).

use std::path::PathBuf;

use clap::Args;
use lx_results::compare::{compare, Comparison, FigureDiff, FIGURES};
use lx_results::results::RunFile;

#[derive(Args)]
pub struct CompareArgs {
    /// Run files (`lx sweep --out`, the app's saved runs): the first is the base.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// Output: md, csv or json.
    #[arg(long, default_value = "md")]
    format: String,
}

pub fn run(args: CompareArgs) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    for path in &args.runs {
        runs.push(RunFile::read(path)?);
    }
    let names: Vec<String> = args.runs.iter().map(|p| p.display().to_string()).collect();
    let c = compare(&runs, &names);
    match args.format.as_str() {
        "md" | "markdown" => print_markdown(&c),
        "csv" => print_csv(&c),
        "json" => println!("{}", serde_json::to_string_pretty(&c)?),
        other => anyhow::bail!("unknown format '{other}' (expected md, csv or json)"),
    }
    // No common point at all is not a comparison.
    Ok(if c.points.is_empty() { 1 } else { 0 })
}

/// `1.23×`, marked when beyond the spread; a dash where there is nothing to compare.
fn cell(f: &Option<FigureDiff>) -> String {
    match f {
        None => "-".into(),
        Some(f) => {
            let mark = match f.beyond_spread {
                Some(true) => " *",
                Some(false) => "",
                None => " ?",
            };
            format!("{:.1} → {:.1} ({:.2}×{mark})", f.base, f.other, f.ratio)
        }
    }
}

fn print_markdown(c: &Comparison) {
    for (i, r) in c.runs.iter().enumerate() {
        let role = if i == 0 { "base".to_string() } else { format!("run {i}") };
        println!("{role}: {} — {}; {}{}", r.name, r.machine, r.backends.join("; "), r.preset.as_ref().map(|p| format!("; {p}")).unwrap_or_default());
    }
    println!();
    println!("| test | backend | policy | run | {} |", FIGURES.join(" | "));
    println!("| --- | --- | --- | ---: |{}", " ---: |".repeat(FIGURES.len()));
    for p in &c.points {
        let cells: Vec<String> = p.figures.iter().map(cell).collect();
        println!("| {} | {} | {} | {} | {} |", p.test, p.backend, p.policy, p.run, cells.join(" | "));
    }
    println!("\nbase → run (run ÷ base). * the medians' 95% intervals (from each point's requests) do not overlap:");
    println!("a difference beyond the runs' own spread. ? one number per point: no interval to judge by.");
    for u in &c.unmatched {
        println!("unmatched: {u}");
    }
}

fn print_csv(c: &Comparison) {
    let mut header = vec!["test".to_string(), "backend".into(), "policy".into(), "run".into(), "run_file".into()];
    for f in FIGURES {
        let f = f.replace(' ', "_").replace('/', "_per_");
        header.extend([format!("{f}_base"), format!("{f}_run"), format!("{f}_ratio"), format!("{f}_beyond_spread")]);
    }
    println!("{}", header.join(","));
    for p in &c.points {
        let mut row = vec![quote(&p.test), p.backend.clone(), p.policy.clone(), p.run.to_string(), quote(&c.runs[p.run].name)];
        for f in &p.figures {
            match f {
                Some(f) => row.extend([f.base.to_string(), f.other.to_string(), f.ratio.to_string(), f.beyond_spread.map_or(String::new(), |b| b.to_string())]),
                None => row.extend([String::new(), String::new(), String::new(), String::new()]),
            }
        }
        println!("{}", row.join(","));
    }
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}
