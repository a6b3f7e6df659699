//! Memory: what each backend says it holds (weights, KV cache) is what `lx fit` predicts for
//! its load, and the peak each point measured is within 10% of the whole prediction (MLX's in
//! mlx.rs); `lx fit` plans contexts within a memory, longer for a smaller cache.

use integration_tests::{lx, model_path};

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// llama.cpp and candle at two concurrencies (one load each: the cache is sized for the
/// larger), after a depth that makes the KV cache count. MLX's sweep is checked so in mlx.rs,
/// where it holds half the lock (its CPU build computes on one core and takes minutes to fill
/// a cache, so without a depth).
#[test]
fn each_backend_holds_what_fit_predicts_and_peaks_within_ten_percent() {
    let _lock = integration_tests::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    #[rustfmt::skip]
    lx(&["sweep", "--model", model_path().to_str().unwrap(), "--backend", "llama,candle", "--prompt-tokens", "64", "--concurrency", "1,3", "--max-tokens", "4",
        "--depth", "1024", "--requests", "3", "--warmup", "1", "--no-ceilings", "--untuned", "--out", out.to_str().unwrap()]).ok();
    holds_what_fit_predicts(&out);
}

/// `lx fit --check` on a sweep's run file: what each backend says it holds (weights, KV cache)
/// is what `lx fit` predicts for its load, and each point's measured peak is within 10% of the
/// whole prediction.
pub(crate) fn holds_what_fit_predicts(run_file: &std::path::Path) {
    let dir = tempfile::tempdir().unwrap();
    let model = model_path();
    let model = model.to_str().unwrap();
    let checked = dir.path().join("check.json");
    let out = lx(&["fit", "--model", model, "--out", checked.to_str().unwrap(), "--check", run_file.to_str().unwrap()]).ok();
    let checked = json(&checked);
    assert_eq!(checked["kind"], "memory-fit");
    let rows = checked["points"].as_array().unwrap();
    let run = json(run_file);
    for info in run["backends"].as_array().unwrap() {
        let name = info["name"].as_str().unwrap();
        let row = rows.iter().find(|r| r["backend"] == name).unwrap_or_else(|| panic!("{name}: {}", out.stdout()));
        let predicted = &row["predicted"];
        let said = |k: &str| info[k].as_u64().unwrap_or_else(|| panic!("{name} says nothing of {k}: {info}"));
        let near = |a: u64, b: u64, within: f64| (a as f64 - b as f64).abs() <= within;
        // llama.cpp prints its buffers in MiB to two decimals: each may be off by 5 KiB.
        // What candle repacks at its first product is not among what it says it holds.
        let (rounding, weights) = match name {
            "llama" => (4.0 * 5243.0, said("weights_bytes")),
            "candle" => (0.0, said("weights_bytes") + lx_backend_candle::memory::repacked_bytes(&lx_format::gguf::GgufFile::open(model).unwrap(), lx_backend_candle::WeightFormat::Dual, info["capabilities"]["slots"].as_u64().unwrap() as usize)),
            _ => (0.0, said("weights_bytes")),
        };
        assert!(near(said("kv_cache_bytes"), predicted["kv_cache"].as_u64().unwrap(), rounding), "{name} KV cache: said {info}, predicted {predicted}");
        assert!(near(weights, predicted["weights"].as_u64().unwrap(), rounding), "{name} weights: said {info}, predicted {predicted}");
    }
    assert_eq!(rows.len(), run["points"].as_array().unwrap().len(), "a row for every point: {}", out.stdout());
    for r in rows {
        let predicted: u64 = ["weights", "kv_cache", "scratch", "runtime"].iter().map(|k| r["predicted"][k].as_u64().unwrap()).sum();
        let ratio = predicted as f64 / (1u64 << 20) as f64 / r["measured_peak_mib"].as_f64().unwrap();
        assert!((0.9..=1.1).contains(&ratio), "predicted / measured {ratio:.3} for {} {}: {}", r["backend"], r["test"], out.stdout());
    }
}

#[test]
fn fit_plans_within_the_memory_and_a_smaller_cache_fits_more() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans.json");
    let out = lx(&["fit", "--backends", "llama,candle", "--memory", "1.5GiB", "--out", plans.to_str().unwrap()]).ok();
    let memory = 1.5 * (1u64 << 30) as f64;
    let plans = json(&plans);
    let plans = plans.as_array().unwrap();
    assert_eq!(plans.len(), 4, "llama's three KV cache types and candle's one: {}", out.stdout());
    for p in plans {
        let mut last = u64::MAX;
        for entry in p["longest"].as_array().unwrap() {
            let (seqs, found) = (entry[0].as_u64().unwrap(), &entry[1]);
            let ctx = found[0].as_u64().unwrap_or(0);
            assert!(ctx <= last, "more sequences fit no longer a context: {p}");
            last = ctx;
            if ctx == 0 || ctx == 32768 {
                continue;
            }
            let f = &found[1];
            let total: u64 = ["weights", "kv_cache", "scratch", "runtime"].iter().map(|k| f[k].as_u64().unwrap()).sum();
            assert!(total as f64 <= memory, "{seqs} × {ctx} is planned at {total} bytes, over the memory: {p}");
        }
    }
    // q4_0 takes less than q8_0, which takes less than f16: each fits more sequences.
    let most = |i: usize| plans[i]["most_at_full"][0].as_u64().unwrap_or(0);
    assert!(most(0) < most(1) && most(1) < most(2), "{}", out.stdout());
    assert!(out.stdout().contains("| llama | q8_0 |") && out.stdout().contains("| candle | f32 |"), "{}", out.stdout());
    lx(&["fit", "--memory", "lots"]).fails_with("--memory \"lots\": a size such as 16GiB or 8000MiB");
}
