use super::score::Reference;
use super::*;

/// A file of `suite` whose backend `llama` ran each shape at `prefill` and `decode` tok/s
/// times the repetition's factor.
fn file(cpu: &str, factors: &[f64], sha: &str) -> BenchFile {
    let suite = Suite::of(SuiteName::Quick);
    let hw = lx_machine::hardware::HardwareReport {
        cpu: cpu.into(),
        physical_cores: 2,
        logical_cores: 2,
        memory_bytes: 24 << 30,
        os: "Linux".into(),
        arch: "x86_64".into(),
        cpu_features: vec!["avx2".into()],
        gpus: vec![],
        backend_devices: vec![],
        build_features: vec![],
    };
    let shapes = suite
        .shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let base = 100.0 * (i + 1) as f64;
            let each = |scale: f64| factors.iter().map(|f| Some(base * scale * f)).collect::<Vec<_>>();
            ShapeFigures { shape: s.name.clone(), prefill_tps: each(5.0), decode_tps: each(0.5), ttft_ms: each(1.0), throughput_tps: each(0.5), decode_of_ceiling: None, prefill_of_ceiling: None, peak_rss_mib: Some(400.0) }
        })
        .collect();
    BenchFile {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        started_unix_ms: 1_796_640_744_360,
        suite,
        machine: Machine::new(&hw, lx_machine::power::Power::default()),
        build: Build { lx_version: "0.1.0".into(), features: vec![], compiled_for: vec!["avx2".into()] },
        model: BenchModel { name: "gemma".into(), architecture: "gemma3".into(), parameters: 268_098_176, quantization: "Q4_K_M".into(), file_bytes: 253_000_000, sha256: Some(sha.into()), synthetic: None },
        backends: vec![BackendBench {
            name: "llama".into(),
            version: "llama.cpp".into(),
            device: "CPU (2 threads)".into(),
            cpu_fallback: None,
            threads: 2,
            settings: Default::default(),
            tuned: false,
            settings_from: "the backend's defaults".into(),
            shapes,
            score: None,
            notes: vec![],
        }],
        sustained: None,
    }
}

const SHA: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

#[test]
fn the_reference_machine_scores_100_and_twice_as_fast_scores_200_with_intervals() {
    let reference_file = file("Reference CPU", &[0.98, 1.0, 1.02], SHA);
    let reference = Reference::from_bench(&reference_file, "llama", "ref.json").unwrap();
    let mut same = reference_file.clone();
    same.score(Some(&reference));
    let s = same.backends[0].score.clone().unwrap();
    assert!((s.value - 100.0).abs() < 0.1, "{s:?}");
    assert!(s.low.unwrap() < 100.0 && s.high.unwrap() > 100.0 && s.each.len() == 3, "{s:?}");
    let mut fast = file("Fast CPU", &[1.96, 2.0, 2.04], SHA);
    fast.score(Some(&reference));
    let f = fast.backends[0].score.clone().unwrap();
    assert!((f.value - 200.0).abs() < 0.2, "{f:?}");
    assert!(f.low.unwrap() > s.high.unwrap(), "the two intervals are apart");
    assert_eq!(f.describe(), format!("{:.0} [{:.0}, {:.0}]", f.value, f.low.unwrap(), f.high.unwrap()));
}

#[test]
fn one_slow_shape_moves_the_score_by_its_share_of_the_geometric_mean() {
    let reference = Reference::from_bench(&file("Reference CPU", &[1.0, 1.0], SHA), "llama", "ref.json").unwrap();
    let mut f = file("Other CPU", &[1.0, 1.0], SHA);
    // Half the reference's decode on one shape of three: 6 rates, one of them halved.
    for r in f.backends[0].shapes[1].decode_tps.iter_mut() {
        *r = r.map(|v| v / 2.0);
    }
    f.score(Some(&reference));
    let s = f.backends[0].score.clone().unwrap();
    assert!((s.value - 100.0 * 0.5f64.powf(1.0 / 6.0)).abs() < 1e-6, "{s:?}");
    assert_eq!((s.low, s.high), (Some(s.value), Some(s.value)), "identical repetitions: no spread");
}

#[test]
fn a_repetition_with_a_missing_rate_is_left_out_and_without_any_there_is_no_score_and_why() {
    let reference = Reference::from_bench(&file("Reference CPU", &[1.0, 1.0, 1.0], SHA), "llama", "ref.json").unwrap();
    let mut f = file("Other CPU", &[1.0, 1.1, 1.2], SHA);
    f.backends[0].shapes[2].prefill_tps[1] = None;
    assert_eq!(f.backends[0].complete_repetitions(), vec![0, 2]);
    f.score(Some(&reference));
    assert_eq!(f.backends[0].score.as_ref().unwrap().each.len(), 2);
    for s in &mut f.backends[0].shapes {
        s.decode_tps = vec![None; 3];
    }
    f.score(Some(&reference));
    assert!(f.backends[0].score.is_none());
    assert_eq!(f.backends[0].notes, vec!["no score: no repetition measured every shape".to_string()], "the reason, once, after scoring twice");

    let mut other_model = file("Other CPU", &[1.0, 1.0], "0123456789abcdef");
    other_model.score(Some(&reference));
    assert!(other_model.backends[0].score.is_none());
    assert!(other_model.backends[0].notes[0].contains("measured gemma (sha256 a5fd3b62230a…), not this model"), "{:?}", other_model.backends[0].notes);
    let mut unreferenced = file("Other CPU", &[1.0, 1.0], SHA);
    unreferenced.score(None);
    assert!(unreferenced.backends[0].notes[0].contains("no score: the reference machine has not measured this model in the quick suite (it has: "));
}

/// The shipped references, each with the reference machine's bench file whose llama means it is.
const REFERENCE_SOURCES: [(&str, &str); 3] = [
    ("reference-quick.json", "quick-amd-epyc-avx512-2c.json"),
    ("reference-full.json", "full-amd-epyc-avx512-2c.json"),
    ("reference-quick-qwen2.5-1.5b.json", "quick-qwen2.5-1.5b-amd-epyc-avx512-2c.json"),
];

/// `LX_BLESS=1` writes the references again from their bench files (after a new reference
/// measurement); without it, the shipped ones must be what those files give.
#[test]
fn the_shipped_references_are_the_means_of_their_bench_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/bench");
    if std::env::var("LX_BLESS").is_ok_and(|v| v == "1") {
        for (name, source) in REFERENCE_SOURCES {
            let file = BenchFile::read(&dir.join(source)).unwrap();
            let reference = Reference::from_bench(&file, "llama", source).unwrap();
            std::fs::write(dir.join(name), serde_json::to_string_pretty(&reference).unwrap() + "\n").unwrap();
        }
        return;
    }
    let shipped = Reference::shipped();
    assert_eq!(shipped.len(), REFERENCE_SOURCES.len(), "every shipped reference has its bench file");
    for (name, source_name) in REFERENCE_SOURCES {
        let reference: Reference = serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        assert!(shipped.contains(&reference), "{name} is built in");
        assert_eq!(reference.source, source_name);
        let source = BenchFile::read(&dir.join(source_name)).unwrap();
        let again = Reference::from_bench(&source, &reference.backend, &reference.source).unwrap();
        // JSON's decimal text holds a float to its last bit or so.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
        let same = again.figures.len() == reference.figures.len()
            && again.figures.iter().zip(&reference.figures).all(|(a, b)| a.shape == b.shape && close(a.prefill_tps, b.prefill_tps) && close(a.decode_tps, b.decode_tps));
        assert!(same && Reference { figures: vec![], ..again.clone() } == Reference { figures: vec![], ..reference.clone() }, "docs/results/bench/{name} is not what {} gives: {again:?}", reference.source);
        assert_eq!(source.suite, Suite::for_model(reference.suite, source.model.file_bytes), "{name}: the reference ran the suite this build runs");
        assert_eq!(Reference::for_file(&source).as_ref(), Some(&reference), "{source_name} is scored against {name}");
    }
    for suite in [SuiteName::Quick, SuiteName::Full] {
        assert!(shipped.iter().any(|r| r.suite == suite), "the {suite} suite has a reference machine");
    }
}

#[test]
fn files_are_written_scrubbed_and_read_back_and_others_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = file("Some CPU", &[1.0, 1.0], SHA);
    let private = private::Private::of_this_machine();
    let home = private.home.clone().unwrap_or_else(|| "/home/someone".into());
    f.backends[0].notes.push(format!("cannot open {home}/models/m.gguf"));
    let path = dir.path().join("b.json");
    f.write_atomic(&path).unwrap();
    let back = BenchFile::read(&path).unwrap();
    assert_eq!(back.backends[0].notes, vec!["cannot open ~/models/m.gguf".to_string()]);
    let text: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(private::leaks(&text, &private).is_empty());

    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let mut newer = text.clone();
    newer["schema_version"] = 9.into();
    let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/ceilings-llama-candle-pp64-512-c1-16.json");
    for (p, why) in [
        (write("n.json", &newer.to_string()), "bench schema version 9"),
        (write("c.json", "{\"schema\""), "is not JSON"),
        (run, "is not a Latency Explorer bench file"),
        (dir.path().join("none.json"), "cannot read"),
    ] {
        let e = BenchFile::read(&p).unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn the_gallery_sets_machines_side_by_side_marks_this_one_and_fetches_nothing() {
    let reference = Reference::from_bench(&file("Reference CPU", &[0.98, 1.0, 1.02], SHA), "llama", "ref.json").unwrap();
    let mut a = file("Reference CPU", &[0.98, 1.0, 1.02], SHA);
    let mut b = file("Fast <CPU>", &[1.9, 2.0, 2.1], SHA);
    a.score(Some(&reference));
    b.score(Some(&reference));
    let mut other = file("Reference CPU", &[1.0, 1.0], "ffff");
    other.suite = Suite::of(SuiteName::Full);
    other.score(Some(&reference));
    let fingerprint = a.machine.fingerprint.clone();
    assert_ne!(fingerprint, b.machine.fingerprint);
    let entries: Vec<gallery::Entry> = [a, b, other].into_iter().enumerate().map(|(i, file)| gallery::Entry { file, source: format!("{i}.json") }).collect();
    let page = gallery::html(&entries, Some(&fingerprint));
    assert_eq!(page.matches("data-testid=\"gallery-group\"").count(), 2, "another suite and model is another section");
    assert!(page.contains("Fast &lt;CPU&gt;, 2 cores · llama") && !page.contains("Fast <CPU>"), "names are escaped");
    assert!(page.contains("(this machine)") && page.contains("class=\"mine\""));
    assert!(page.contains("<option>Fast &lt;CPU&gt;</option>") && page.contains("<option>no GPU</option>"));
    assert!(!page.contains("src=") && !page.contains("href=\"http"), "nothing is fetched");
    assert!(page.contains("no score: the reference machine has not measured this model in the full suite"), "a file of another suite says why it has no score");
    // A sustained run alone is drawn over time and adds no section of its own.
    let mut sustained = file("Laptop CPU", &[1.0], SHA);
    sustained.backends.clear();
    let trials = (0..6).map(|i| sustained::Trial { start_s: i as f64 * 20.0, end_s: (i + 1) as f64 * 20.0, decode_tps: 20.0 - i as f64, throughput_tps: 20.0, cpu_mhz: None, power_w: None, temp_c: None, throttling: vec![] }).collect();
    let shape = sustained.suite.shapes[0].clone();
    sustained.sustained = Some(sustained::Sustained::of("llama", shape, 120.0, 20.0, 0.0, trials, vec![], vec!["CPU temperature: none here".into()]));
    let mut with_sustained = entries;
    with_sustained.push(gallery::Entry { file: sustained, source: "s.json".into() });
    let page = gallery::html(&with_sustained, None);
    assert_eq!(page.matches("data-testid=\"gallery-group\"").count(), 2);
    assert!(page.contains("Decode rate over a sustained load") && page.contains("Laptop CPU, 2 cores · llama: 6 trials over 120 s"), "the sustained run's chart and verdict");
    let unknown = gallery::html(&with_sustained, Some("000000000000"));
    assert!(unknown.contains("No file here is from this machine"));
}

#[test]
fn every_bench_file_in_the_repository_is_shipped_and_reads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/bench");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".json") && !n.starts_with("reference-")).collect();
    on_disk.sort();
    let mut shipped = gallery::shipped_names();
    shipped.sort();
    assert_eq!(on_disk, shipped, "docs/results/bench and the gallery's built-in files are one list");
    let entries = gallery::shipped();
    let private = private::Private::of_this_machine();
    for e in &entries {
        let text: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(e.source.trim_end_matches(" (shipped)"))).unwrap()).unwrap();
        assert!(private::leaks(&text, &private).is_empty(), "{}: {:?}", e.source, private::leaks(&text, &private));
    }
    let (read, problems) = gallery::load(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read.len(), entries.len(), "the references are not bench files and are passed over");
    assert_eq!(gallery::with_shipped(read).len(), entries.len(), "a shipped file named again is listed once");
}

/// The README quotes the reference machine's candle score: it is the shipped file's.
#[test]
fn the_readme_quotes_the_reference_files_own_score() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let entry = gallery::shipped().into_iter().find(|e| e.source.starts_with("quick-amd-epyc-avx512-2c.json")).unwrap();
    let candle = entry.file.backends.iter().find(|b| b.name == "candle").and_then(|b| b.score.clone()).unwrap();
    let said = format!("candle scores\n{}", candle.describe());
    assert!(readme.replace("\n", " ").contains(&said.replace("\n", " ")), "the README should say \"{said}\"");
}
