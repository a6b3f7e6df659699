//! The README's tables of measured figures are the run files in docs/results/, printed by
//! `lx show`: each such table follows a line `<!-- lx show ARGS -->`, and this test prints
//! ARGS again and requires the same lines, so a table cannot drift from what was measured.

use integration_tests::lx;
use std::path::Path;

#[test]
fn readme_tables_are_their_run_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some(args) = line.strip_prefix("<!-- lx show ").and_then(|rest| rest.strip_suffix(" -->")) else {
            continue;
        };
        let args: Vec<String> = args
            .split_whitespace()
            .map(|a| if a.starts_with("docs/") { root.join(a).display().to_string() } else { a.to_string() })
            .collect();
        let mut argv = vec!["show"];
        argv.extend(args.iter().map(String::as_str));
        let r = lx(&argv).ok();
        let table: Vec<&str> = lines[i + 1..].iter().take_while(|l| l.starts_with('|')).copied().collect();
        assert!(!table.is_empty(), "README line {}: no table under the marker", i + 1);
        let printed = r.stdout();
        let printed: Vec<&str> = printed.lines().take_while(|l| l.starts_with('|')).collect();
        assert_eq!(table, printed, "README line {}: the table is not what `lx show` prints from its run files", i + 1);
        checked += 1;
    }
    // The server comparison, MLX on the CPU, SmolLM2 on three backends, repetitions.
    assert!(checked >= 4, "only {checked} marked tables in the README");
}

/// Asking `lx show` for what a run does not have is a clear error.
#[test]
fn show_refuses_what_it_cannot_print() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository");
    let run = root.join("docs/results/smollm2-mlx-cpu-pp64-c1-4.json");
    let run = run.to_str().unwrap();
    lx(&["show", run, "--columns", "backend,nope"]).fails_with("no column 'nope'");
    lx(&["show", run, "--repetitions"]).fails_with("no point of these runs was repeated");
    lx(&["show", "/nonexistent/run.json"]).fails_with("cannot read /nonexistent/run.json");
    let full = lx(&["show", run]).ok().stdout();
    assert!(full.contains("| backend | policy | test | TTFT p50 ms |") && full.contains("mlx ran on CPU"), "{full}");
}
