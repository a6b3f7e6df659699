//! `lx bench` end to end on the default model: the quick suite writes a scored file that
//! names nothing private and `lx gallery` sets it beside the shipped ones; a sustained run
//! cuts its load into trials and says how far the rate fell.

use integration_tests::{lx, model_path};
use lx_results::bench::private::{leaks, Private};
use lx_results::bench::{BenchFile, Machine, Suite, SuiteName};

#[test]
fn a_quick_bench_writes_a_scored_file_that_names_nothing_private_and_joins_the_gallery() {
    let _lock = integration_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench.json");
    // The model by path, as a user's own file would be: the bench hashes it to name it.
    let run = lx(&["bench", "--quick", "--model", model_path().to_str().unwrap(), "--backend", "llama", "--repetitions", "2", "--out", out.to_str().unwrap()]).ok();
    let file = BenchFile::read(&out).unwrap();
    let quick = Suite::of(SuiteName::Quick);
    assert_eq!((file.suite.shapes.clone(), file.suite.repetitions), (quick.shapes, 2));
    assert_eq!(file.machine.fingerprint, Machine::here(), "the file's machine is this one");
    assert_eq!(file.model.sha256.as_deref(), Some(lx_models::Catalog::embedded().default_entry().unwrap().sha256.as_str()));
    let b = &file.backends[0];
    assert_eq!(b.name, "llama");
    assert_eq!(b.complete_repetitions(), vec![0, 1], "{b:#?}");
    for s in &b.shapes {
        assert!(s.prefill_tps.iter().chain(&s.decode_tps).all(|v| v.is_some_and(|v| v > 0.0)), "{s:?}");
        assert!(s.decode_of_ceiling.is_some_and(|c| c > 0.0 && c < 1.5), "decode against the ceiling: {s:?}");
    }
    let score = b.score.as_ref().unwrap_or_else(|| panic!("no score: {:?}", b.notes));
    assert!(score.value > 0.0 && score.low.unwrap() <= score.value && score.value <= score.high.unwrap(), "{score:?}");
    assert!(run.stdout().contains(&format!("score {}", score.describe())), "{}", run.dump());

    // Nothing private: no path, home directory, user or host name anywhere in the text.
    let text: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let found = leaks(&text, &Private::of_this_machine());
    assert!(found.is_empty(), "{found:?}");
    assert!(!text.to_string().contains(model_path().parent().unwrap().to_str().unwrap()));

    // The gallery: this file marked as this machine's beside the shipped ones.
    let page = dir.path().join("gallery.html");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results/bench");
    lx(&["gallery", out.to_str().unwrap(), shipped.to_str().unwrap(), "-o", page.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("(this machine)") && html.contains(&score.describe()), "the page holds this machine's score");
    let rows = html.matches("<tr data-cpu=").count();
    let shipped_rows: usize = lx_results::bench::gallery::shipped().iter().map(|e| e.file.backends.len()).sum();
    assert_eq!(rows, shipped_rows + 1, "every shipped backend and this one");
    lx(&["gallery", dir.path().join("none").to_str().unwrap()]).fails_with("no bench file among");
}

#[test]
fn a_sustained_run_is_cut_into_trials_and_says_how_far_the_rate_fell() {
    let _lock = integration_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sustained.json");
    let run = lx(&["bench", "--sustained", "10s", "--trial", "3", "--backend", "llama", "--out", out.to_str().unwrap()]).ok();
    let file = BenchFile::read(&out).unwrap();
    let s = file.sustained.as_ref().expect("a sustained section");
    assert!(file.backends.is_empty(), "a sustained run measures the load, not the suite");
    assert_eq!((s.backend.as_str(), s.trial_s, s.shape.name.as_str()), ("llama", 3.0, "chat"));
    assert!(s.trials.len() >= 3, "{} trials of 3 s in 10 s: {:?}", s.trials.len(), s.trials);
    for w in s.trials.windows(2) {
        assert!(w[1].start_s >= w[0].end_s - 1e-9 && w[1].end_s > w[0].end_s, "trials follow each other: {:?}", s.trials);
    }
    assert!(s.trials.iter().all(|t| t.decode_tps > 0.0 && t.throughput_tps > 0.0));
    assert!(s.first_minute_tps.is_some() && s.last_minute_tps.is_none(), "a run under a minute has only its first");
    assert!(run.stdout().contains(&s.verdict), "{}", run.dump());
    // What the sensors read or why not, every source accounted for.
    assert!(!(s.sensors.is_empty() && s.sensors_missing.is_empty()), "{s:?}");
    lx(&["bench", "--sustained", "10s", "--trial", "1"]).fails_with("--trial: at least 2 seconds");
}
