//! Bad input to the serving options (open loop, batch limits, prefix, SLOs, demos): one
//! clear message and a non-zero exit, before any model is loaded.

use integration_tests::{lx, model_path};

fn sweep<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["sweep", "--model", model, "--prompt-tokens", "64", "--concurrency", "1", "--max-tokens", "4", "--requests", "1", "--threads", "2"];
    v.extend_from_slice(extra);
    v
}

#[test]
fn limits_below_one_are_refused() {
    let model = model_path();
    let m = model.to_str().unwrap();
    lx(&sweep(m, &["--chunk-tokens", "0", "--policy", "chunked"])).fails_with("--chunk-tokens must be at least 1");
    lx(&sweep(m, &["--max-batch", "0"])).fails_with("--max-batch (sequences per pass) must be at least 1");
    lx(&sweep(m, &["--max-batch-tokens", "0"])).fails_with("--max-batch-tokens must be at least 1");
    lx(&sweep(m, &["--rate", "1", "--max-concurrency", "0"])).fails_with("--max-concurrency must be at least 1");
}

#[test]
fn rates_must_be_positive_numbers() {
    let model = model_path();
    let m = model.to_str().unwrap();
    lx(&sweep(m, &["--rate", "0"])).fails_with("--rate must be a positive number of requests per second, not 0");
    lx(&sweep(m, &["--rate=1,-2"])).fails_with("--rate must be a positive number of requests per second, not -2");
    lx(&sweep(m, &["--rate", "fast"])).fails_with("'fast'");
    lx(&sweep(m, &["--duration", "0"])).fails_with("--duration must be a positive number of seconds");
}

#[test]
fn slos_must_be_positive_numbers() {
    let model = model_path();
    let m = model.to_str().unwrap();
    lx(&sweep(m, &["--slo-ttft-ms", "soon"])).fails_with("invalid value 'soon' for '--slo-ttft-ms");
    lx(&sweep(m, &["--slo-decode-tps", "fast"])).fails_with("invalid value 'fast' for '--slo-decode-tps");
    lx(&sweep(m, &["--slo-ttft-ms", "0"])).fails_with("--slo-ttft-ms must be a positive number");
}

#[test]
fn prefixes_must_fit_the_prompt_and_the_context() {
    let model = model_path();
    let m = model.to_str().unwrap();
    let long = ["sweep", "--model", m, "--prompt-tokens", "40010", "--max-tokens", "4", "--prefix-tokens", "40000"];
    lx(&long).fails_with("--prefix-tokens 40000 is longer than the model's context of 32768 tokens");
    lx(&sweep(m, &["--prefix-tokens", "64"])).fails_with("--prefix-tokens 64 must be shorter than every prompt (the shortest is 64 tokens)");
    lx(&sweep(m, &["--prefix-tokens", "32", "--prompt-tokens", "16..128"])).fails_with("the shortest is 16 tokens");
    lx(&sweep(m, &["--prefix-cache", "on"])).fails_with("--prefix-cache on needs a shared prefix: give --prefix-tokens");
    lx(&sweep(m, &["--prefix-tokens", "8", "--prefix-cache", "maybe"])).fails_with("'maybe': expected on or off");
}

#[test]
fn ranges_must_run_upwards() {
    let model = model_path();
    let m = model.to_str().unwrap();
    // Read by the one parser the app's sweep form uses too, which names the flag and the value.
    lx(&sweep(m, &["--prompt-tokens", "512..64"])).fails_with("'512..64' for '--prompt-tokens <PROMPT_TOKENS>': 512..64: a range's low end comes first");
    lx(&sweep(m, &["--max-tokens", "0..8"])).fails_with("'0..8' for '--max-tokens <MAX_TOKENS>': 0..8: a length is at least 1 token");
    lx(&sweep(m, &["--max-tokens", "4..x"])).fails_with("'4..x' is not a whole number or a range A..B");
}

#[test]
fn unknown_demos_are_named() {
    lx(&["demo", "warp-speed"]).fails_with("unknown demo 'warp-speed' (expected one of: prompt-length, batching, static-vs-continuous, chunked-prefill, prefix-cache, speculative, kv-cache, disaggregation, fidelity)");
    let list = lx(&["demo", "--list"]).ok().stdout();
    for name in ["prompt-length", "batching", "static-vs-continuous", "chunked-prefill", "prefix-cache", "speculative", "kv-cache", "disaggregation", "fidelity"] {
        assert!(list.contains(name), "{list}");
    }
}
