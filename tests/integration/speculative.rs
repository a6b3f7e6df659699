//! Speculative decoding must not change what a sequence computes: with prompt lookup and with
//! a draft model, every backend gives each prompt plain greedy decoding's tokens, up to the
//! first near-tie, with drafts accepted and rejected (and rolled back, in the target's cache
//! and the draft model's) along the way, in batches where some sequences verify drafts and
//! others decode plainly.

use std::time::Instant;

use lx_engine::backend::{LoadSpec, TokenId};
use lx_engine::scheduler::{Policy, SchedEvent, SchedulerConfig, WorkRequest};
use lx_engine::speculative::{Drafter, Speculation};
use lx_format::gguf::GgufFile;
use lx_format::tokenizer::Tokenizer;
use lx_format::workload::PromptBuilder;
use lx_test_support::drive::{drive, streams, Streams};
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};

const NEW_TOKENS: u32 = 48;

fn run(backend: &str, spec: Speculation, prompts: &[Vec<TokenId>]) -> (Streams, Vec<SchedEvent>) {
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let model_path = integration_tests::model_path();
    // The draft the default model gets when none is named: the model with its output head at 4 bits.
    let draft_model = (spec.drafter == Drafter::Draft).then(|| lx_local::draft::resolve(&model_path, None).unwrap());
    let load = LoadSpec { model_path, threads: 0, slots: 4, ctx_per_slot: longest + NEW_TOKENS as usize, max_batch_tokens: 1024, gpu_layers: None, draft_model, ..Default::default() };
    let mut config = SchedulerConfig::new(Policy::Continuous, 4, 1024);
    config.spec = spec;
    let mut s = lx_worker::process::load_with_draft(&lx_local::loader(lx_local::BackendKind::parse(backend).unwrap()), &load, config, Instant::now()).unwrap_or_else(|e| panic!("{backend} loads the default model: {e}"));
    assert_eq!(s.draft_name().is_some(), spec.drafter == Drafter::Draft);
    let requests = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| WorkRequest { id: i as u64, prompt: p.clone(), max_tokens: NEW_TOKENS, stop_tokens: vec![], top_logprobs: ALTERNATIVES, prefix_tokens: 0, handoff: Default::default(), score: None })
        .collect();
    let events = drive(&mut s, requests, 0);
    (streams(&events), events)
}

/// Fixed lengths of 8: enough to roll back often, without a draft model's 12 passes per verify.
pub(crate) fn fixed(drafter: Drafter) -> Speculation {
    Speculation { drafter, adaptive: false, draft_max: 8, ..Speculation::default() }
}

fn adaptive(drafter: Drafter) -> Speculation {
    Speculation { drafter, ..Speculation::default() }
}

/// Two passages to copy (drafts hold) and two texts to continue (prompt lookup's drafts
/// mostly fail, a draft model's hold more often), four at a time, with each of `specs`
/// against plain decoding. Fixed draft lengths draft, and so roll back, the most.
fn check_speculation_matches_plain(backend: &str, specs: &[Speculation]) {
    check_speculation_matches_plain_at(backend, specs, &[160, 120]);
}

/// [`check_speculation_matches_plain`] with passages of `copied` tokens, each beside a text
/// to continue (one passage: two sequences, still a verify beside a plain decode).
pub(crate) fn check_speculation_matches_plain_at(backend: &str, specs: &[Speculation], copied: &[usize]) {
    let _lock = integration_tests::heavy_for(backend);
    let gguf = GgufFile::open(integration_tests::model_path()).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let builder = PromptBuilder::new(&tok);
    let texts = [tok.encode("Once upon a time, in a small village,"), tok.encode("fn main() {\n    let numbers = vec![1, 2, 3];")];
    let prompts: Vec<Vec<TokenId>> = copied.iter().zip(&texts).enumerate().flat_map(|(i, (&n, text))| [builder.copy(n, 5 * i as u64), text.clone()]).collect();
    let (plain, _) = run(backend, Speculation::default(), &prompts);
    for &spec in specs {
        let (got, events) = run(backend, spec, &prompts);
        let mut agreed = 0;
        for (id, (want, top)) in &plain {
            let (tokens, _) = &got[id];
            assert_eq!(tokens.len(), NEW_TOKENS as usize);
            match compare(want, top, tokens, NEAR_TIE_NATS) {
                Ok(a) => {
                    eprintln!("{backend}, {}, prompt {id}: {} tokens identical{}", spec.label(), a.agreed, a.parted_at_tie.map_or(String::new(), |(at, gap)| format!(", parted at a near-tie at {at} (gap {gap:.3})")));
                    agreed += a.agreed;
                }
                Err(e) => panic!("{backend}, {}, prompt {id}: speculation changed the tokens: {e}\nplain       {want:?}\nspeculative {tokens:?}", spec.label()),
            }
        }
        let total = prompts.len() * NEW_TOKENS as usize;
        assert!(agreed >= total / 2, "{backend}: only {agreed} of {total} tokens compared");
        let (mut drafted, mut accepted, mut rejected_passes) = (0, 0, 0);
        for e in &events {
            if let SchedEvent::Verified { drafted: d, accepted: a, .. } = *e {
                drafted += d;
                accepted += a;
                rejected_passes += u32::from(a < d);
            }
        }
        eprintln!("{backend}, {}: {accepted} of {drafted} drafted tokens accepted, {rejected_passes} passes rolled back", spec.label());
        // A planned draft length drafts only what pays on this machine (on a CPU a draft
        // model made from the target itself never does), so only fixed lengths are held to
        // drafting, rolling back and sharing passes; planned ones to the tokens alone.
        if spec.adaptive {
            continue;
        }
        assert!(accepted >= 20, "{backend}, {}: the copied passages should have been drafted ({accepted} of {drafted} accepted)", spec.label());
        assert!(rejected_passes > 0, "{backend}, {}: no draft was rejected, so nothing was rolled back", spec.label());
        // A pass that verified drafts beside other sequences.
        let shared = events.iter().any(|e| matches!(e, SchedEvent::Step { draft_tokens, seqs, .. } if *draft_tokens > 0 && *seqs >= 2));
        assert!(shared, "{backend}, {}: drafts were never verified in a pass shared with other sequences", spec.label());
    }
}

/// One passage runs past the default model's sliding window: its local layers keep 512
/// positions and a micro-batch (1024 cells a sequence) in llama.cpp, reusing the oldest
/// cells as a sequence grows, so drafts are rolled back in the target's and the draft
/// model's caches after cells were reused.
#[test]
fn speculation_gives_plain_greedy_tokens_on_llama_cpp() {
    check_speculation_matches_plain_at("llama", &[fixed(Drafter::Lookup), adaptive(Drafter::Lookup), fixed(Drafter::Draft), adaptive(Drafter::Draft)], &[1400, 120]);
}

/// The planned draft length is the scheduler's, the same for every backend and drafter:
/// tested with both drafters on llama.cpp, with prompt lookup here.
#[test]
fn speculation_gives_plain_greedy_tokens_on_candle() {
    check_speculation_matches_plain("candle", &[fixed(Drafter::Lookup), adaptive(Drafter::Lookup), fixed(Drafter::Draft)]);
}
