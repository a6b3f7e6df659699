//! The tables of measured figures in docs/ are the result files in
//! docs/results/ (run files and the studies' files), printed by `lx show`: each such table
//! follows a line `<!-- lx show ARGS -->`, and this test prints ARGS again and requires the
//! same lines, so a table cannot drift from what was measured.

use integration_tests::lx;
use std::path::Path;

/// Every page that holds measured tables, and the run files each one's tables must show: a
/// marker lost in an edit fails here instead of leaving a table unchecked.
const PAGES: &[(&str, &[&str])] = &[
    // No measured tables in the README (docs/MEASUREMENTS.md holds them); still read, so that a
    // marker added there is checked.
    ("README.md", &[]),
    ("docs/CLI.md", &["docs/results/repetitions-llama-pp64-256-c1-4.json"]),
    (
        "docs/APP.md",
        &[
            "docs/results/app-bench-amd-avx512-auto.json",
            "docs/results/app-bench-amd-avx512-auto-2026-12-05.json",
            "docs/results/app-bench-amd-avx512-2-threads.json",
            "docs/results/ci-times-amd-avx512-cold-73a660f.json",
            "docs/results/ci-times-amd-avx512-cold-ee01280.json",
            "docs/results/ci-times-amd-avx512-cold-fdd2463.json",
            "docs/results/ci-times-amd-avx512-cold-0cab3cd.json",
            "docs/results/ci-times-intel-avx512-warm-1278d97.json",
            "docs/results/ci-times-intel-avx512-warm-f5d21f4.json",
            "docs/results/ci-times-amd-avx512-cold-c808990.json",
            "docs/results/ci-times-amd-avx512-cold-4c9b56f.json",
            "docs/results/ci-times-amd-avx512-cold-19f5358.json",
            "docs/results/ci-times-amd-avx512-cold-c8b4901.json",
            "docs/results/ci-times-amd-avx512-cold-42d9533.json",
            "docs/results/ci-times-amd-avx512-cold-04ae6fe.json",
            "docs/results/ci-times-amd-avx512-cold-4ba0e73.json",
            "docs/results/ci-times-amd-avx512-cold-d4f0fe6.json",
            "docs/results/demo-prompt-length-epyc.json",
            "docs/results/lesson-prompt-length-app.json",
            "docs/results/lesson-batching-app.json",
        ],
    ),
    (
        "docs/MEASUREMENTS.md",
        &[
            "docs/results/memory-fit-gemma3-270m-amd-avx512.json",
            "docs/results/memory-fit-smollm2-135m-amd-avx512.json",
            "docs/results/memory-fit-qwen2.5-coder-1.5b-amd-avx512.json",
            "docs/results/memory-fit-synth-llama3.2-1b-amd-avx512.json",
            "docs/results/memory-fit-synth-llama3.2-3b-amd-avx512.json",
            "docs/results/memory-fit-synth-llama3.1-8b-amd-avx512.json",
            "docs/results/candle-reference-gemma3-270m-intel-avx512.json",
            "docs/results/candle-reference-smollm2-135m-intel-avx512.json",
            "docs/results/candle-reference-gemma3-270m-amd-avx512.json",
            "docs/results/candle-reference-smollm2-135m-amd-avx512.json",
            "docs/results/candle-reference-gemma3-270m-amd-avx512-1thread.json",
            "docs/results/candle-reference-qwen2.5-coder-1.5b-amd-avx512.json",
            "docs/results/depth-reference-qwen2.5-coder-1.5b-amd-avx512-1thread.json",
            "docs/results/mlx-reference-gemma3-270m-intel-avx512.json",
            "docs/results/mlx-reference-smollm2-135m-intel-avx512.json",
            "docs/results/mlx-reference-gemma3-270m-amd-avx512.json",
            "docs/results/mlx-reference-smollm2-135m-amd-avx512.json",
            "docs/results/mlx-reference-qwen2.5-coder-1.5b-amd-avx512.json",
            "docs/results/candle-reference-qwen2.5-coder-1.5b-amd-avx512-2threads.json",
            "docs/results/mlx-reference-gemma3-270m-amd-avx512-head-start.json",
            "docs/results/mlx-reference-smollm2-135m-amd-avx512-head-start.json",
            "docs/results/tune-intel-avx512-gemma3-270m.json",
            "docs/results/tune-amd-avx512-gemma3-270m-replayed-idle-trials.json",
            "docs/results/tune-amd-avx512-gemma3-270m.json",
            "docs/results/tune-lavapipe-amd-avx512-gemma3-270m.json",
            "docs/results/server-llama-server-vs-llama.json",
            "docs/results/aiperf-compare.json",
            "docs/results/aiperf-compare-llama-cpp-python.json",
            "docs/results/scale-64-streams-20ms.json",
            "docs/results/scale-256-streams-20ms.json",
            "docs/results/scale-512-streams-20ms.json",
            "docs/results/scale-512-streams-50ms.json",
            "docs/results/mlx-cpu-pp64-256-c1-4.json",
            "docs/results/smollm2-llama-candle-pp64-256-c1-4.json",
            "docs/results/depth-llama-candle-pp64-tg64.json",
            "docs/results/depth-llama-candle-mlx-pp64-tg64.json",
            "docs/results/depth-reference-gemma3-270m-amd-avx512.json",
            "docs/results/batching-pp128-c8-serial.json",
            "docs/results/batching-pp128-c8-static.json",
            "docs/results/batching-pp128-c8-continuous.json",
            "docs/results/batching-bench-avx2-2core.json",
            "docs/results/batching-bench-avx2-2core-unified.json",
            "docs/results/batching-bench-amd-avx512-before.json",
            "docs/results/batching-bench-amd-avx512.json",
            "docs/results/overhead-llama.json",
            "docs/results/overhead-candle-5-rounds.json",
            "docs/results/overhead-candle-7-rounds.json",
            "docs/results/side-by-side-llama-candle-pp64-1024-c1-4.json",
            "docs/results/llama-cpp-python-5-rounds.json",
            "docs/results/llama-cpp-python-9-rounds.json",
            "docs/results/demo-prompt-length.json",
            "docs/results/demo-batching.json",
            "docs/results/demo-static-vs-continuous.json",
            "docs/results/demo-chunked-prefill.json",
            "docs/results/demo-prefix-cache.json",
            "docs/results/demo-speculative.json",
            "docs/results/spec-compare-amd-avx512.json",
            "docs/results/kv-cache-amd-avx512.json",
            "docs/results/fidelity-gemma3-270m-amd-avx512.json",
            "docs/results/fidelity-gemma3-270m-mlx-amd-avx512.json",
            "docs/results/fidelity-smollm2-135m-mlx-1-chunk-amd-avx512.json",
            "docs/results/fidelity-smollm2-135m-amd-avx512.json",
            "docs/results/fidelity-qwen2.5-coder-1.5b-amd-avx512.json",
            "docs/results/fidelity-qwen2.5-coder-1.5b-mlx-1-chunk-amd-avx512.json",
            "docs/results/fidelity-check-gemma3-270m-amd-avx512.json",
            "docs/results/fidelity-check-smollm2-135m-amd-avx512.json",
            "docs/results/fidelity-check-qwen2.5-coder-1.5b-amd-avx512.json",
            "docs/results/fidelity-check-gemma3-270m-against-q4_0-head-amd-avx512.json",
            "docs/results/sweep-fidelity-gemma3-270m-amd-avx512.json",
            "docs/results/demo-fidelity.json",
            "docs/results/demo-kv-cache.json",
            "docs/results/capacity-lx-serve-vs-llama-server.json",
            "docs/results/advise-rag-llama.json",
            "docs/results/advise-chat-llama-policies.json",
            "docs/results/advise-chat-llama.json",
            "docs/results/advise-chat-llama-3m-untuned.json",
            "docs/results/advise-chat-qwen2.5-coder-1.5b-llama.json",
            "docs/results/demo-prompt-length-qwen2.5-coder-1.5b.json",
            "docs/results/demo-disaggregation.json",
            "docs/results/demo-disaggregation-servers.json",
            "docs/results/disaggregated-transfer-pipe.json",
            "docs/results/disaggregated-transfer-file.json",
        ],
    ),
    ("docs/METHODS.md", &["docs/results/ceilings-llama-candle-pp64-512-c1-16.json", "docs/results/sensors-llama-candle-pp64-c1-4.json"]),
];

/// Pages whose every table is measured figures: each must stand under a marker, so a table
/// typed by hand fails here.
const ALL_MEASURED: &[&str] = &["docs/MEASUREMENTS.md", "docs/METHODS.md", "docs/CLI.md", "docs/APP.md"];

#[test]
fn measured_tables_are_their_run_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository");
    for (page, expected) in PAGES {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut shown: Vec<&str> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let Some(args) = line.strip_prefix("<!-- lx show ").and_then(|rest| rest.strip_suffix(" -->")) else {
                continue;
            };
            shown.extend(args.split_whitespace().filter(|a| a.starts_with("docs/")));
            let args: Vec<String> = args
                .split_whitespace()
                .map(|a| if a.starts_with("docs/") { root.join(a).display().to_string() } else { a.to_string() })
                .collect();
            let mut argv = vec!["show"];
            argv.extend(args.iter().map(String::as_str));
            let r = lx(&argv).ok();
            let table: Vec<&str> = lines[i + 1..].iter().take_while(|l| l.starts_with('|')).copied().collect();
            assert!(!table.is_empty(), "{page} line {}: no table under the marker", i + 1);
            let printed = r.stdout();
            let printed: Vec<&str> = printed.lines().take_while(|l| l.starts_with('|')).collect();
            assert_eq!(table, printed, "{page} line {}: the table is not what `lx show` prints from its run files", i + 1);
        }
        for run in *expected {
            assert!(shown.contains(run), "{page}: no `lx show` table of {run}");
        }
    }
    for page in ALL_MEASURED {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let starts_table = line.starts_with('|') && (i == 0 || !lines[i - 1].starts_with('|'));
            let marked = i > 0 && lines[i - 1].starts_with("<!-- lx show ");
            assert!(
                !starts_table || marked,
                "{page} line {}: a table of measured figures typed by hand; print it from its result file with `lx show` under a marker line",
                i + 1
            );
        }
    }
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
    lx(&["show", run, "--table", "decode"]).fails_with("run files have no table 'decode' (their tables: points, demo, report, speculation, transfer, decisions)");
    lx(&["show", run, "--table", "demo"]).fails_with("not every file is a demo's run");
    lx(&["show", run, "--table", "decisions"]).fails_with("this run decided nothing");
    lx(&["show", run, "--table", "transfer"]).fails_with("no point of these runs moved a sequence's state");
    lx(&["show", run, "--table", "report"]).fails_with("--table report: not every file is a demo's run");

    // A study's file prints its kind's tables (all of them without --table), not mixed with
    // another kind or with runs, and only with the options a study has.
    let study = root.join("docs/results/batching-bench-avx2-2core.json");
    let study = study.to_str().unwrap();
    let both = lx(&["show", study]).ok().stdout();
    assert!(both.contains("| B | batched-bench S_TG |") && both.contains("\n\n| c | figure | llama-server |"), "{both}");
    lx(&["show", study, "--table", "nope"]).fails_with("a batching-bench file has no table 'nope' (its tables: decode, serving)");
    lx(&["show", study, "--columns", "backend"]).fails_with("--columns and --repetitions are for run files");
    lx(&["show", study, run]).fails_with("these are run files and a batching-bench file");
    let aiperf = root.join("docs/results/aiperf-compare.json");
    lx(&["show", study, aiperf.to_str().unwrap()]).fails_with("different kinds (batching-bench and aiperf-compare)");
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("other.json");
    std::fs::write(&foreign, r#"{"kind": "weather", "figures": 3}"#).unwrap();
    lx(&["show", foreign.to_str().unwrap()]).fails_with("is neither a Latency Explorer run file nor a result file `lx show` knows (its kind is 'weather'");
}

/// `lx report` on lesson runs writes their handout: several machines' runs of one demo on
/// shared charts; runs of two demos, or a sweep among them, are refused by name.
#[test]
fn report_makes_a_lessons_handout_from_one_demos_runs_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository");
    let file = |name: &str| root.join("docs/results").join(name).display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("handout.html").display().to_string();
    let r = lx(&["report", &file("demo-prompt-length.json"), &file("lesson-prompt-length-app.json"), "-o", &out]).ok();
    assert!(r.stderr().contains("the handout of lesson prompt-length, 2 run(s)"), "{}", r.stderr());
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("<h1 class=\"question\">Does a longer prompt slow down every token, or only the first?</h1>"));
    assert_eq!(page.matches("<svg").count(), 2, "a chart per figure");
    assert_eq!(page.matches("<polyline").count(), 4, "a line per run on each");
    lx(&["report", &file("demo-prompt-length.json"), &file("demo-batching.json"), "-o", &out]).fails_with("demo-batching.json is a run of batching, not of prompt-length");
    lx(&["report", &file("demo-prompt-length.json"), &file("smollm2-mlx-cpu-pp64-c1-4.json"), "-o", &out]).fails_with("smollm2-mlx-cpu-pp64-c1-4.json is not a lesson's run");
}

/// `lx report` writes one page per run, beside it by default, atomically; a missing or
/// foreign file is a clear error and leaves no page behind.
#[test]
fn report_writes_a_page_beside_the_run_or_refuses_with_a_message() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("smollm2.json");
    std::fs::copy(root.join("docs/results/smollm2-mlx-cpu-pp64-c1-4.json"), &run).unwrap();
    let r = lx(&["report", run.to_str().unwrap()]).ok();
    let page = std::fs::read_to_string(dir.path().join("smollm2.html")).expect("the page beside the run");
    assert!(r.stderr().contains("smollm2.html (2 points"), "{}", r.stderr());
    assert!(page.contains("<svg") && page.contains("mlx ran on CPU") && page.contains("Made by <code>lx report</code> from smollm2.json"));
    let out = dir.path().join("sub/page.html");
    lx(&["report", run.to_str().unwrap(), "-o", out.to_str().unwrap()]).ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page, "the same run makes the same page");
    lx(&["report", "/nonexistent/run.json"]).fails_with("cannot read /nonexistent/run.json");
    let foreign = dir.path().join("other.json");
    std::fs::write(&foreign, r#"{"schema": "something else"}"#).unwrap();
    lx(&["report", foreign.to_str().unwrap()]).fails_with("is not a Latency Explorer run file");
    assert!(!dir.path().join("other.html").exists());
}
