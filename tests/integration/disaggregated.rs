//! Disaggregated prefill and decode through real worker processes on the default model: a
//! state moved between processes decodes the tokens one worker gives (up to a near-tie), by
//! either path and on every backend; a worker that dies fails the requests it held and no
//! others, and the next request starts it again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lx_engine::backend::{LoadSpec, TokenId};
use lx_worker::child::WorkerCommand;
use lx_worker::disaggregated::Disaggregated;
use lx_engine::split::Split;
use lx_engine::handoff::TransferVia;
use lx_client::protocol::Reply;
use lx_engine::scheduler::{Policy, SchedEvent, SchedulerConfig, WorkRequest};
use lx_worker::spawn::spawn_workers;
use lx_client::target::Target;
use lx_format::gguf::GgufFile;
use lx_format::tokenizer::Tokenizer;
use lx_test_support::drive::Streams;
use lx_test_support::parity::{compare, ALTERNATIVES, NEAR_TIE_NATS};

const NEW_TOKENS: u32 = 24;

fn worker(backend: &str) -> WorkerCommand {
    WorkerCommand { program: integration_tests::lx_bin(), args: vec!["worker".into(), "--backend".into(), backend.into()], env: Vec::new() }
}

fn spec(ctx: usize) -> LoadSpec {
    LoadSpec { model_path: integration_tests::model_path(), threads: 2, slots: 4, ctx_per_slot: ctx, max_batch_tokens: 2048, gpu_layers: None, ..Default::default() }
}

fn config(policy: Policy, via: TransferVia) -> SchedulerConfig {
    SchedulerConfig { split: Split { via, ..Split::default() }, ..SchedulerConfig::new(policy, 4, 2048) }
}

/// How the states move, and whether the prefill worker computes prompts in chunks (of 4
/// tokens, so these short prompts really are split).
pub(crate) type Path = (TransferVia, bool);

fn request(id: u64, prompt: Vec<TokenId>, max_tokens: u32) -> WorkRequest {
    WorkRequest { id, prompt, max_tokens, stop_tokens: vec![], top_logprobs: ALTERNATIVES, prefix_tokens: 0, handoff: Default::default(), score: None }
}

/// Every event about each request until `done` of them have ended (or `limit` passes).
fn collect(t: &mut dyn Target, done: usize, limit: Duration, mut each: impl FnMut(&mut dyn Target, &SchedEvent)) -> BTreeMap<u64, Vec<SchedEvent>> {
    let mut events: BTreeMap<u64, Vec<SchedEvent>> = BTreeMap::new();
    let mut ended = 0;
    let until = Instant::now() + limit;
    while ended < done {
        assert!(Instant::now() < until, "only {ended} of {done} requests ended in {limit:?}: {events:?}");
        let Some((_, Reply::Event(e))) = t.recv(Duration::from_millis(100)).expect("the target answers") else { continue };
        each(t, &e);
        let id = match &e {
            SchedEvent::Step { .. } => continue,
            SchedEvent::Finished { id, .. } | SchedEvent::Failed { id, .. } => {
                ended += 1;
                *id
            }
            SchedEvent::Admitted { id, .. } | SchedEvent::Prefill { id, .. } | SchedEvent::PrefixReused { id, .. } | SchedEvent::Token { id, .. } => *id,
            SchedEvent::Verified { id, .. } | SchedEvent::Warning { id, .. } | SchedEvent::HandedOff { id, .. } | SchedEvent::StateLoaded { id, .. } | SchedEvent::Scored { id, .. } => *id,
        };
        events.entry(id).or_default().push(e);
    }
    events
}

fn streams(events: &BTreeMap<u64, Vec<SchedEvent>>) -> Streams {
    events
        .iter()
        .map(|(id, evs)| {
            let mut tokens = Vec::new();
            let mut tops = Vec::new();
            for e in evs {
                if let SchedEvent::Token { token, top, .. } = e {
                    tokens.push(*token);
                    tops.push(top.clone());
                }
            }
            (*id, (tokens, tops))
        })
        .collect()
}

fn prompts() -> Vec<Vec<TokenId>> {
    let tok = Tokenizer::from_gguf(&GgufFile::open(integration_tests::model_path()).unwrap()).unwrap();
    ["Once upon a time, in a small village,", "The three laws of thermodynamics state that", "Die Hauptstadt von Frankreich ist", "A recipe for bread: first,"].iter().map(|t| tok.encode(t)).collect()
}

fn run(backend: &str, policy: Policy, (via, chunks): Path) -> BTreeMap<u64, Vec<SchedEvent>> {
    let mut config = config(policy, via);
    config.split.prefill_chunks = chunks;
    config.chunk_tokens = 4;
    let mut t = spawn_workers(&worker(backend), &spec(256), &config, Duration::from_secs(300), 2).expect("start the workers");
    let prompts = prompts();
    for (i, p) in prompts.iter().enumerate() {
        t.submit(request(i as u64, p.clone(), NEW_TOKENS)).unwrap();
    }
    collect(t.as_mut(), prompts.len(), Duration::from_secs(300), |_, _| {})
}

pub(crate) fn decodes_as_one_worker(backend: &str, paths: &[Path]) {
    let _lock = integration_tests::heavy_for(backend);
    let whole = streams(&run(backend, Policy::Continuous, (TransferVia::Pipe, false)));
    for &(via, chunks) in paths {
        let events = run(backend, Policy::Disaggregated, (via, chunks));
        for (id, evs) in &events {
            let handed = evs.iter().find_map(|e| if let SchedEvent::HandedOff { bytes, .. } = e { Some(*bytes) } else { None });
            let loaded = evs.iter().find_map(|e| if let SchedEvent::StateLoaded { bytes, .. } = e { Some(*bytes) } else { None });
            assert!(handed.is_some_and(|b| b > 1000) && handed == loaded, "{backend} via {}: request {id} moved {handed:?} and loaded {loaded:?}", via.name());
        }
        let split = streams(&events);
        let mut agreed = 0;
        for (id, (want, top)) in &whole {
            let (got, _) = &split[id];
            assert_eq!(got.len(), NEW_TOKENS as usize, "{backend} via {}: prompt {id}", via.name());
            match compare(want, top, got, NEAR_TIE_NATS) {
                Ok(a) => agreed += a.agreed,
                Err(e) => panic!("{backend} via {}: prompt {id}: the moved state changed the tokens: {e}\none worker {want:?}\ntwo workers {got:?}", via.name()),
            }
        }
        assert!(agreed >= 8 * whole.len(), "{backend}: only {agreed} tokens compared: too few to catch a mix-up");
    }
}

#[test]
fn a_moved_state_decodes_the_tokens_of_one_worker_on_llama_cpp_by_pipe_and_by_file_and_after_a_chunked_prefill() {
    decodes_as_one_worker("llama", &[(TransferVia::Pipe, false), (TransferVia::File, false), (TransferVia::File, true)]);
}

#[test]
fn a_moved_state_decodes_the_tokens_of_one_worker_on_candle() {
    decodes_as_one_worker("candle", &[(TransferVia::Pipe, false)]);
}

fn kill(pid: Option<u32>) {
    let pid = pid.expect("the worker runs");
    let ok = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill -9 {pid}");
}

fn ended_with(events: &[SchedEvent]) -> Result<(), String> {
    match events.last() {
        Some(SchedEvent::Finished { .. }) => Ok(()),
        Some(SchedEvent::Failed { error, .. }) => Err(error.clone()),
        other => panic!("not ended: {other:?}"),
    }
}

#[test]
fn a_decode_worker_that_dies_fails_the_sequences_it_held_and_the_next_transfer_starts_a_new_one() {
    let _lock = integration_tests::heavy();
    let mut t = Disaggregated::spawn(&worker("llama"), &spec(512), &config(Policy::Disaggregated, TransferVia::Pipe), Duration::from_secs(300), 2).unwrap();
    let prompts = prompts();
    for (i, p) in prompts.iter().take(3).enumerate() {
        t.submit(request(i as u64, p.clone(), 300)).unwrap();
    }
    // Once all three decode there, the decode worker is killed.
    let pids = t.pids();
    let mut decoding = std::collections::HashSet::new();
    let mut killed = false;
    let events = collect(&mut t, 3, Duration::from_secs(120), |_, e| {
        if let SchedEvent::Token { id, index: 2, .. } = e {
            decoding.insert(*id);
        }
        if decoding.len() == 3 && !killed {
            killed = true;
            kill(pids[1]);
        }
    });
    for (id, evs) in &events {
        let why = ended_with(evs).expect_err("its sequence was lost");
        assert!(why.starts_with("the decode worker exited on signal 9"), "request {id}: {why}");
    }
    // The next request is prefilled, moved to a new decode worker, and decoded.
    t.submit(request(9, prompts[3].clone(), 8)).unwrap();
    let next = collect(&mut t, 1, Duration::from_secs(120), |_, _| {});
    assert_eq!(ended_with(&next[&9]), Ok(()));
    assert_eq!(streams(&next)[&9].0.len(), 8);
}

#[test]
fn a_prefill_worker_that_dies_fails_only_the_prompts_it_held() {
    let _lock = integration_tests::heavy();
    let mut t = Disaggregated::spawn(&worker("llama"), &spec(3072), &config(Policy::Disaggregated, TransferVia::File), Duration::from_secs(300), 2).unwrap();
    let prompts = prompts();
    // One request decodes on the decode worker while a long prompt is computed beside it.
    t.submit(request(1, prompts[0].clone(), 200)).unwrap();
    let long: Vec<TokenId> = prompts.iter().flatten().copied().cycle().take(2500).collect();
    let pids = t.pids();
    let mut submitted = false;
    let mut killed = false;
    let events = collect(&mut t, 2, Duration::from_secs(120), |t, e| match e {
        SchedEvent::Token { id: 1, index: 2, .. } if !submitted => {
            submitted = true;
            t.submit(request(2, long.clone(), 8)).unwrap();
        }
        SchedEvent::Admitted { id: 2, .. } if !killed => {
            killed = true;
            kill(pids[0]);
        }
        _ => {}
    });
    let why = ended_with(&events[&2]).expect_err("its prompt was lost");
    assert!(why.starts_with("the prefill worker exited on signal 9"), "{why}");
    assert_eq!(ended_with(&events[&1]), Ok(()), "the sequence on the decode worker goes on");
    assert_eq!(streams(&events)[&1].0.len(), 200);
    // The next prompt starts a new prefill worker.
    t.submit(request(3, prompts[2].clone(), 4)).unwrap();
    let next = collect(&mut t, 1, Duration::from_secs(120), |_, _| {});
    assert_eq!(ended_with(&next[&3]), Ok(()));
}
