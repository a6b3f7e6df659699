//! Every scheduling policy, and prefix caching, gives each sequence the greedy tokens that
//! `serial` gives, up to the first near-tie (as `batching.rs` defines it for continuous).

use std::time::Instant;

use lx_backend_llamacpp::LlamaCppBackend;
use lx_engine::backend::{Backend, LoadSpec, TokenId};
use lx_format::gguf::GgufFile;
use lx_test_support::drive::{drive, streams, Streams};
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};
use lx_engine::scheduler::{Policy, SchedEvent, Scheduler, SchedulerConfig, WorkRequest};
use lx_format::tokenizer::Tokenizer;

const NEW_TOKENS: u32 = 24;

/// Run the prompts to completion on a fresh backend. `prefix > 0`: they share their first
/// `prefix` tokens and prefix caching is on (one extra slot holds the cache).
fn run(policy: Policy, prompts: &[Vec<TokenId>], prefix: u32) -> Streams {
    let spec = LoadSpec { model_path: integration_tests::model_path(), threads: 0, slots: 5, ctx_per_slot: 256, max_batch_tokens: 512, gpu_layers: None, ..Default::default() };
    let backend: Box<dyn Backend> = Box::new(LlamaCppBackend::load(&spec).expect("load the default model"));
    let mut config = SchedulerConfig::new(policy, 4, 512);
    // Small chunks, so `chunked` really splits these short prompts across passes.
    config.chunk_tokens = 4;
    config.static_form_up_ms = 0;
    config.prefix_cache = prefix > 0;
    let mut s = Scheduler::new(backend, config, Instant::now());
    let requests = prompts.iter().enumerate().map(|(i, p)| WorkRequest { id: i as u64, prompt: p.clone(), max_tokens: NEW_TOKENS, stop_tokens: vec![], top_logprobs: ALTERNATIVES, prefix_tokens: prefix, handoff: Default::default(), score: None }).collect();
    // Let the first request compute the prefix into the cache before the others come.
    let events = drive(&mut s, requests, if prefix > 0 { 4 } else { 0 });
    let out = streams(&events);
    let reused = events.iter().filter(|e| matches!(e, SchedEvent::PrefixReused { .. })).count();
    if prefix > 0 {
        assert_eq!(reused, prompts.len() - 1, "every request after the first should reuse the cached prefix");
    }
    out
}

fn agrees(serial: &Streams, other: &Streams, what: &str) {
    let mut agreed = 0;
    for (id, (want, top)) in serial {
        let (got, _) = &other[id];
        assert_eq!(got.len(), NEW_TOKENS as usize, "{what}: prompt {id}");
        match compare(want, top, got, NEAR_TIE_NATS) {
            Ok(a) => agreed += a.agreed,
            Err(e) => panic!("prompt {id}: {what} changed the tokens: {e}\nserial {want:?}\n{what} {got:?}"),
        }
    }
    assert!(agreed >= 8 * serial.len(), "{what}: only {agreed} tokens compared: too few to catch a mix-up");
}

#[test]
fn static_and_chunked_give_serial_tokens_up_to_a_near_tie() {
    let _lock = integration_tests::heavy();
    let tok = Tokenizer::from_gguf(&GgufFile::open(integration_tests::model_path()).unwrap()).unwrap();
    let prompts: Vec<Vec<TokenId>> = ["Once upon a time, in a small village,", "The three laws of thermodynamics state that", "Die Hauptstadt von Frankreich ist", "A recipe for bread: first,"]
        .iter()
        .map(|t| tok.encode(t))
        .collect();
    let serial = run(Policy::Serial, &prompts, 0);
    for policy in [Policy::Static, Policy::Chunked] {
        agrees(&serial, &run(policy, &prompts, 0), policy.name());
    }
}

#[test]
fn prefix_caching_gives_the_tokens_of_computing_the_prefix() {
    let _lock = integration_tests::heavy();
    let tok = Tokenizer::from_gguf(&GgufFile::open(integration_tests::model_path()).unwrap()).unwrap();
    let system = tok.encode("You are a careful assistant who answers in plain English. Keep answers short and concrete.");
    let prompts: Vec<Vec<TokenId>> = ["Question: why is the sky blue?", "Question: what is bread made of?", "Question: how do rivers form?"]
        .iter()
        .map(|q| [system.clone(), tok.encode_with(q, false, false)].concat())
        .collect();
    let serial = run(Policy::Serial, &prompts, 0);
    agrees(&serial, &run(Policy::Continuous, &prompts, system.len() as u32), "continuous with prefix caching");
}
