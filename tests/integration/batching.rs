//! Batching must not change what a sequence computes: continuous batching at concurrency 4
//! gives each prompt the greedy tokens that serial gives, up to the first near-tie. The
//! check is shared by every backend (`check_continuous_matches_serial`).

use std::time::Instant;

use lx_backend_llamacpp::{KvLayout, LlamaCppBackend};
use lx_engine::backend::{Backend, LoadSpec, TokenId};
use lx_format::gguf::GgufFile;
use lx_test_support::drive::{drive, streams, Streams};
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};
use lx_engine::scheduler::{Policy, SchedEvent, Scheduler, SchedulerConfig, WorkRequest};
use lx_format::tokenizer::Tokenizer;

const NEW_TOKENS: u32 = 32;

/// Loads a backend for the default model.
pub type Load = fn(&LoadSpec) -> Box<dyn Backend>;

fn run(load: Load, policy: Policy, prompts: &[Vec<TokenId>]) -> Streams {
    let spec = LoadSpec { model_path: integration_tests::model_path(), threads: 0, slots: 4, ctx_per_slot: 256, max_batch_tokens: 512, gpu_layers: None, ..Default::default() };
    let backend = load(&spec);
    let mut s = Scheduler::new(backend, SchedulerConfig::new(policy, 4, 512), Instant::now());
    let requests = prompts.iter().enumerate().map(|(i, p)| WorkRequest { id: i as u64, prompt: p.clone(), max_tokens: NEW_TOKENS, stop_tokens: vec![], top_logprobs: ALTERNATIVES, prefix_tokens: 0, handoff: Default::default(), score: None }).collect();
    let events = drive(&mut s, requests, 0);
    let out = streams(&events);
    for e in &events {
        // Every backend splits its passes into the library's compute and its own work.
        if let SchedEvent::Step { step, t_start, t_end, compute, .. } = *e {
            let compute = compute.unwrap_or_else(|| panic!("pass {step}: the backend did not time its compute"));
            assert!(compute > 0 && compute <= t_end - t_start, "pass {step}: compute {compute} ns of a {} ns pass", t_end - t_start);
        }
    }
    out
}

#[test]
fn continuous_batching_gives_serial_tokens_up_to_a_near_tie() {
    check_continuous_matches_serial(|spec| Box::new(LlamaCppBackend::load_with(spec, KvLayout::PerSequence).expect("load the default model")));
}

#[test]
fn so_does_llama_cpp_with_one_unified_kv_cache() {
    check_continuous_matches_serial(|spec| {
        let backend = LlamaCppBackend::load_with(spec, KvLayout::Unified).expect("load the default model");
        assert!(backend.info().version.ends_with("KV cache unified"), "{}", backend.info().version);
        Box::new(backend)
    });
}

/// Four prompts of different lengths (so the sequences sit at different positions), 32
/// greedy tokens each, serial against continuous at concurrency 4.
pub fn check_continuous_matches_serial(load: Load) {
    let _lock = integration_tests::heavy();
    let gguf = GgufFile::open(integration_tests::model_path()).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let texts = [
        "Once upon a time, in a small village,",
        "The three laws of thermodynamics state that",
        "fn main() {\n    let numbers = vec![1, 2, 3];",
        "Die Hauptstadt von Frankreich ist",
    ];
    let prompts: Vec<Vec<TokenId>> = texts.iter().map(|t| tok.encode(t)).collect();
    let serial = run(load, Policy::Serial, &prompts);
    let continuous = run(load, Policy::Continuous, &prompts);
    let mut agreed = 0;
    for (id, (want, top)) in &serial {
        let (got, got_top) = &continuous[id];
        assert_eq!((want.len(), got.len()), (NEW_TOKENS as usize, NEW_TOKENS as usize));
        // How far batching moved the log-probabilities while the tokens were still the same.
        let drift = (0..want.len()).take_while(|&i| want[i] == got[i]).map(|i| (top[i][0].logprob - got_top[i][0].logprob).abs()).fold(0.0f32, f32::max);
        match compare(want, top, got, NEAR_TIE_NATS) {
            Ok(a) => {
                eprintln!("prompt {id}: {} tokens identical, max top-1 drift {drift:.3} nats, {}", a.agreed, a.parted_at_tie.map_or("no divergence".into(), |(at, gap)| format!("parted at a near-tie at {at} (gap {gap:.3})")));
                agreed += a.agreed;
            }
            Err(e) => panic!("prompt {id}: continuous batching changed the tokens: {e}\nserial  {want:?}\nbatched {got:?}"),
        }
    }
    assert!(agreed >= 40, "only {agreed} of {} tokens compared: too few to catch a mix-up", 4 * NEW_TOKENS);
    // The same check between different prompts must fail: it can tell sequences apart.
    for (i, (want, top)) in &serial {
        for (j, (got, _)) in &continuous {
            if i != j {
                assert!(compare(want, top, got, NEAR_TIE_NATS).is_err(), "prompt {i} vs {j}: a mix-up would pass");
            }
        }
    }
}
