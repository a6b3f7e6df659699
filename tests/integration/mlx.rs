//! MLX's checks on the default model, where the build has it (the README's commands build it
//! on Linux x86_64, on MLX's CPU backend, and on Apple Silicon); where the build lacks it,
//! asking for it is an error that says why. They are the other modules' checks, run on MLX
//! here, together: on Linux MLX computes on one core, so each holds half of the model lock
//! ([`integration_tests::heavy_for`]) and two run at once, and libtest starts tests in name
//! order, so that only works for tests that sit side by side.

use integration_tests::{heavy_for, lx};
use lx_engine::handoff::TransferVia;
use lx_engine::speculative::Drafter;
use lx_test_support::alone::in_own_process;
use serde_json::Value;

/// What a build without MLX says when asked for it.
fn says_why_not(why: &str) {
    assert!(why.contains("not compiled into this build") || why.contains("needs macOS on Apple Silicon"), "{why}");
}

/// A sweep runs the default model through a worker and the engine at two concurrencies, and
/// holds the memory `lx fit` predicts (memory.rs: one sweep proves both, since MLX's CPU build
/// makes every sweep a long one).
#[test]
fn sweeps_the_default_model_or_says_why_it_cannot() {
    let _share = heavy_for("mlx");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlx.json");
    #[rustfmt::skip]
    let args = ["sweep", "--backend", "mlx", "--prompt-tokens", "64", "--concurrency", "1,3", "--max-tokens", "4", "--requests", "3", "--warmup", "1", "--threads", "2",
        "--no-ceilings", "--untuned", "--out", out.to_str().unwrap()];
    crate::cli::assert_lx_has_our_features();
    let r = lx(&args);
    let Some(why) = lx_local::unavailable("mlx") else {
        let r = r.ok();
        let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let points = run["points"].as_array().unwrap();
        assert_eq!(points.len(), 2, "{}", r.dump());
        for p in points {
            assert_eq!((p["backend"].as_str(), p["requests"].as_u64(), p["errors"].as_u64()), (Some("mlx"), Some(3), Some(0)), "{p}");
            assert!(p["ttft_ms"]["p50"].as_f64().unwrap() > 0.0 && p["decode_tps"]["p50"].as_f64().unwrap() > 0.0, "{p}");
        }
        eprintln!("{}", r.stdout());
        crate::memory::holds_what_fit_predicts(&out);
        return;
    };
    r.fails_with(&why);
}

/// Speculative decoding gives plain greedy decoding's tokens (speculative.rs). The CPU build
/// is the slowest here (a minute and more a run): fixed prompt-lookup drafts only, which roll
/// MLX's cache back as often as any, on one passage beside one text to continue (the four
/// sequences of the other backends took 135 s here); a draft model adds up to 8 passes of its
/// own per verify and is the same MLX load of a second file, its drafting the scheduler's,
/// tested on llama.cpp. MLX runs in this test's process, and MLX is not driven from two
/// threads of one process: so in a process of its own.
#[test]
fn speculation_gives_plain_greedy_tokens() {
    let _share = heavy_for("mlx");
    in_own_process("mlx::speculation_gives_plain_greedy_tokens", || match lx_local::unavailable("mlx") {
        None => crate::speculative::check_speculation_matches_plain_at("mlx", &[crate::speculative::fixed(Drafter::Lookup)], &[160]),
        Some(why) => says_why_not(&why),
    });
}

/// A state moved between worker processes decodes the tokens of one worker (disaggregated.rs).
#[test]
fn a_moved_state_decodes_the_tokens_of_one_worker() {
    match lx_local::unavailable("mlx") {
        None => crate::disaggregated::decodes_as_one_worker("mlx", &[(TransferVia::File, false)]),
        Some(why) => says_why_not(&why),
    }
}
