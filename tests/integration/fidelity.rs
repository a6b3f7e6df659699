//! Fidelity: a prompt scored teacher-forced through every backend of the build, on a tiny
//! generated model (each position's log-probabilities are that position's, however the
//! backend tiles its rows and the scheduler cuts the prefill); `lx fidelity` end to end on the
//! default model; and the bad input it must refuse clearly.

use integration_tests::{heavy, lx, model_path};
use lx_engine::backend::{Choice, LoadSpec, TokenId};
use lx_run::fidelity::divergence;
use lx_engine::scheduler::{Policy, PromptScore, SchedEvent, Scheduler, SchedulerConfig, WorkRequest};
use serde_json::Value;

const VOCAB: usize = 512;
const PROMPT: usize = 100;
const FROM: usize = 40;

/// Each scored row of one request, in position order.
fn scored_rows(backend: &str, model: &std::path::Path, max_batch_tokens: usize) -> Vec<Choice> {
    let spec = LoadSpec { model_path: model.to_path_buf(), threads: 2, slots: 1, ctx_per_slot: 128, max_batch_tokens: 128, gpu_layers: Some(0), ..Default::default() };
    let b = lx_local::loader(lx_local::BackendKind::parse(backend).unwrap())(&spec).unwrap_or_else(|e| panic!("{backend} loads the tiny model: {e}"));
    let mut s = Scheduler::new(b, SchedulerConfig::new(Policy::Chunked, 1, max_batch_tokens), std::time::Instant::now());
    let prompt: Vec<TokenId> = (0..PROMPT as u32).map(|i| (i * 37 + 11) % (VOCAB as u32 - 3) + 3).collect();
    // Every token of the vocabulary at every position: the whole distribution comes back.
    let ids = vec![(0..VOCAB as u32).collect::<Vec<_>>(); PROMPT - 1 - FROM];
    let request = WorkRequest { id: 1, prompt, max_tokens: 1, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: Some(PromptScore { from: FROM as u32, top: 5, mass: None, ids }) };
    let mut rows = Vec::new();
    for e in lx_test_support::drive::drive(&mut s, vec![request], 0) {
        match e {
            SchedEvent::Scored { pos, rows: r, .. } => {
                assert_eq!(pos as usize, FROM + rows.len(), "{backend}: rows in order");
                rows.extend(r);
            }
            SchedEvent::Failed { error, .. } => panic!("{backend}: {error}"),
            _ => {}
        }
    }
    rows
}

#[test]
fn every_backend_scores_each_position_it_was_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    lx_local::check::write_tiny_model(&model).unwrap();
    for backend in &lx_local::built() {
        // One pass (candle projects its rows 32 at a time), then a prefill cut into passes of
        // 24 tokens: the same rows either way.
        let whole = scored_rows(backend, &model, 128);
        assert_eq!(whole.len(), PROMPT - 1 - FROM, "{backend}");
        for (k, row) in whole.iter().enumerate() {
            assert_eq!(row.scored.len(), VOCAB, "{backend}, row {k}");
            let total: f64 = row.scored.iter().map(|s| f64::from(s.logprob).exp()).sum();
            assert!((total - 1.0).abs() < 1e-3, "{backend}, row {k}: probabilities add to {total}");
            for alt in &row.top {
                let lp = row.scored[alt.token as usize].logprob;
                assert!((lp - alt.logprob).abs() < 1e-5, "{backend}, row {k}: token {} scored {lp}, its alternative {}", alt.token, alt.logprob);
            }
            assert_eq!(row.top[0].token, row.token, "{backend}, row {k}");
        }
        let cut = scored_rows(backend, &model, 24);
        assert_eq!(cut.len(), whole.len(), "{backend}");
        // Passes of other sizes round differently (llama.cpp picks its matrix kernels by
        // batch size), far below what another position's distribution differs by.
        let kl = |a: &Choice, b: &Choice| divergence::coarse_kl(a.scored.iter().zip(&b.scored).map(|(x, y)| (f64::from(x.logprob), f64::from(y.logprob))));
        let neighbours: f64 = whole.windows(2).map(|w| kl(&w[0], &w[1])).fold(f64::INFINITY, f64::min);
        for (k, (a, b)) in whole.iter().zip(&cut).enumerate() {
            let moved = kl(a, b);
            assert!(moved < neighbours / 100.0, "{backend}, row {k}: a prefill cut into passes moved the distribution by KL {moved}, neighbouring positions differ by {neighbours} or more");
        }
    }
}

#[test]
fn lx_fidelity_measures_every_setting_against_the_reference() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fidelity.json");
    let model = model_path();
    let r = lx(&[
        "fidelity", "--model", model.to_str().unwrap(), "--backends", "llama,candle", "--context", "128", "--chunks", "2", "--generate", "24", "--threads", "2",
        "--out", out.to_str().unwrap(),
    ])
    .ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(run["kind"], "fidelity");
    assert_eq!(run["text"]["sha256"], lx_run::fidelity::text::Text::shipped().sha256());
    assert_eq!(run["text"]["positions"], 2 * 63, "two chunks, each scored over its second half");
    let reference_ppl = run["reference"]["perplexity"].as_f64().unwrap();
    assert!(reference_ppl > 1.0 && reference_ppl.is_finite(), "{}", r.dump());
    let candidates = run["candidates"].as_array().unwrap();
    let find = |setting: &str| candidates.iter().find(|c| c["setting"] == setting).unwrap_or_else(|| panic!("no candidate '{setting}': {}", r.dump()));
    let fid = |c: &Value, f: &str| c["fidelity"][f].as_f64().unwrap_or_else(|| panic!("{c}"));
    // The reference's own settings in a worker of their own: the same numbers exactly.
    let itself = find("KV f16");
    assert_eq!((fid(itself, "mean_kl"), fid(itself, "top1_agreement")), (0.0, 1.0), "{itself}");
    assert_eq!(fid(itself, "perplexity"), reference_ppl);
    // A quantized cache moves the distribution, and a coarser one moves it further.
    let (q8, q4) = (fid(find("KV q8_0"), "mean_kl"), fid(find("KV q4_0"), "mean_kl"));
    assert!(q8 > 0.0 && q4 > q8, "q8_0 {q8}, q4_0 {q4}");
    for c in candidates {
        assert!(c["error"].is_null(), "{c}");
        assert!(c["decode_tok_s"].as_f64().is_some_and(|v| v > 0.0) || c["setting"].as_str().unwrap().ends_with("one pass"), "{c}");
        if c["against"] == "plain" {
            assert!(c["fidelity"]["perplexity"].is_null());
        }
        // Drafting changes no token, and moves the distributions by rounding alone: far
        // less than the smallest change of setting this run measured.
        if c["setting"].as_str().unwrap().contains("drafts:") {
            assert_eq!(fid(c, "top1_agreement"), 1.0, "{c}");
            assert!(fid(c, "mean_kl") < q8 / 10.0, "{c}");
            assert!(c["accepted_drafts"].as_u64().unwrap() > 0, "drafts were verified: {c}");
        }
    }
    for setting in ["weights dual", "weights q8_0", "weights f16", "weights quantized", "weights f32"] {
        let c = find(setting);
        assert_eq!(c["backend"], "candle");
        assert!(fid(c, "top1_agreement") > 0.5, "{c}");
    }
    // The table, and `lx show` printing it again from the file.
    assert!(r.stdout().contains("| llama | KV q8_0 | reference |"), "{}", r.dump());
    let shown = lx(&["show", out.to_str().unwrap()]).ok();
    assert!(shown.stdout().contains("| candle | weights f16 | reference |"), "{}", shown.dump());
}

/// `lx sweep --fidelity`: its only run end to end (the measuring is `lx fidelity`'s, tested
/// above; this proves each row gets its own configuration's figures, in the table, the run
/// file and the report).
#[test]
fn a_sweep_with_fidelity_gives_each_row_the_figures_of_what_it_ran() {
    let _lock = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let model = model_path();
    let r = lx(&[
        "sweep", "--model", model.to_str().unwrap(), "--backend", "llama", "--kv-type", "q8_0", "--spec", "none,lookup", "--prompt-tokens", "64", "--concurrency", "1",
        "--max-tokens", "8", "--requests", "1", "--warmup", "0", "--threads", "2", "--no-ceilings", "--fidelity", "1", "--out", out.to_str().unwrap(),
    ])
    .ok();
    let run: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let fidelity = &run["fidelity"];
    assert_eq!((fidelity["kind"].as_str(), fidelity["text"]["chunks"].as_u64()), (Some("fidelity"), Some(1)), "{}", r.dump());
    let settings: Vec<(&str, &str)> = fidelity["candidates"].as_array().unwrap().iter().map(|c| (c["setting"].as_str().unwrap(), c["against"].as_str().unwrap())).collect();
    assert_eq!(settings, [("KV q8_0", "reference"), ("KV q8_0, drafts: prompt lookup", "plain")]);
    let points = run["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{}", r.dump());
    let kl = |p: &Value| p["fidelity"]["mean_kl"].as_f64().unwrap_or_else(|| panic!("{p}"));
    let (plain, drafting) = (&points[0], &points[1]);
    assert_eq!((plain["fidelity"]["against"].as_str(), drafting["fidelity"]["against"].as_str()), (Some("reference"), Some("plain")));
    assert!(kl(plain) > 0.0, "a q8_0 cache is not the reference's f16 one: {plain}");
    assert_eq!(kl(plain), fidelity["candidates"][0]["fidelity"]["mean_kl"].as_f64().unwrap());
    assert!(kl(drafting) < kl(plain) / 10.0, "drafting moves the model by rounding alone: {drafting}");
    assert!(r.stdout().contains("| mean KL nats | top-1 agreement % |"), "{}", r.dump());
    assert!(r.stdout().contains("fidelity: mean KL divergence (nats) and top-1 agreement against llama with an f16 KV cache"), "{}", r.dump());
    let page = dir.path().join("run.html");
    lx(&["report", out.to_str().unwrap(), "--out", page.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>Fidelity</h2>") && html.contains("<th>setting</th>") && html.contains("KV q8_0, drafts: prompt lookup"), "{html}");
    lx(&["sweep", "--model", model.to_str().unwrap(), "--fidelity", "0"]).fails_with("--fidelity (chunks of the text) must be at least 1");
}

/// `lx tune`'s bound, measuring: the tuner keeps a candle weight format other than the
/// default only within the bound of the default's divergence. The tuner reaches this path
/// only where another format wins on the machine, so it runs here, on every CI run, with two
/// formats the default model scores on either side of it (docs/MEASUREMENTS.md: f32 closer
/// to llama.cpp than `dual`, the quantized kernels further).
#[test]
fn the_tuners_bound_scores_a_chosen_weight_format_and_its_default() {
    use lx_local::tune::fidelity::{bound, judge, Verdict};
    let _lock = heavy();
    lx_local::worker::host_workers_in(integration_tests::lx_bin());
    let model = lx_local::model::OpenModel::open(model_path().to_str().unwrap(), &mut |_| {}).unwrap();
    let settings = |w: &str| lx_local::profile::Settings::from([("weights".to_string(), w.to_string()), ("threads".to_string(), "2".to_string())]);
    let mut measured = std::collections::BTreeMap::new();
    for chosen in ["f32", "quantized"] {
        let (kept, notes) = bound(&model, "candle", &settings(chosen), &settings("dual"), &mut measured);
        let kl_of = |v: &str| *measured.get(&format!("weights {v}")).unwrap_or_else(|| panic!("weights {v} not measured: {notes:?}"));
        let (kl, default_kl) = (kl_of(chosen), kl_of("dual"));
        assert!(kl > 0.0 && default_kl > 0.0, "candle is not llama.cpp's arithmetic: {measured:?}");
        let (note, keeps) = match judge("weights", chosen, "dual", kl, default_kl) {
            Verdict::Keep(n) => (n, true),
            Verdict::Revert(n) => (n, false),
        };
        assert_eq!(notes, [note], "the verdict is the measured figures' ({measured:?})");
        assert_eq!(kept["weights"], if keeps { chosen } else { "dual" }, "{notes:?}");
        assert_eq!(kept["threads"], "2", "settings that do not change the model are kept as chosen");
    }
    assert_eq!(measured.len(), 3, "dual measured once, each choice once: {measured:?}");
}

#[test]
fn lx_fidelity_refuses_what_it_cannot_measure() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_path();
    let m = model.to_str().unwrap();
    let tiny = dir.path().join("tiny.gguf");
    lx_local::check::write_tiny_model(&tiny).unwrap();
    lx(&["fidelity", "--model", m, "--reference-model", tiny.to_str().unwrap()]).fails_with("has a vocabulary of 512 tokens where the model has");
    let short = dir.path().join("short.txt");
    std::fs::write(&short, "Too short to score.").unwrap();
    lx(&["fidelity", "--model", m, "--backends", "llama", "--text", short.to_str().unwrap()]).fails_with("fewer than one chunk of 512");
    lx(&["fidelity", "--model", m, "--backends", "llama", "--context", "1000000"]).fails_with("longer than the model's");
    lx(&["fidelity", "--model", short.to_str().unwrap()]).fails_with("cannot use");
    lx(&["fidelity", "--model", m, "--coverage", "1.5"]).fails_with("--coverage is a probability");
}
