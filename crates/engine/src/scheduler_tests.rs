//! Scheduler tests over a fake backend whose "model" is a hash of each slot's cache,
//! so any mix-up of slots, positions or chunk order changes the tokens.

use super::*;
use crate::handoff::Route;
use crate::backend::{BackendError, BackendInfo, Capabilities, ChunkOutput};

pub(crate) struct HashModel {
    info: BackendInfo,
    caches: Vec<Vec<TokenId>>,
    pub passes: Vec<Vec<(Slot, u32, usize)>>,
    pub fail_next: bool,
    pub copies: Vec<(Slot, Slot, u32)>,
    /// Each slot's truncations: (slot, length kept).
    pub truncations: Vec<(Slot, u32)>,
    /// The next token: a hash of the whole cache, or (`cycle`) the last token plus one
    /// modulo `cycle`, a text prompt lookup can predict, but at every `hash_every`th position.
    pub cycle: Option<u32>,
    pub hash_every: usize,
    /// What a pass reports it took: a one-position pass, and each further position with
    /// logits (None: it reports nothing, and the scheduler times it).
    pub pass_ns: Option<(u64, u64)>,
    last_ns: Option<u64>,
    /// The reported times of all its passes, added up.
    pub spent_ns: u64,
}

impl HashModel {
    pub(crate) fn new(slots: usize, ctx: usize) -> Self {
        let info = BackendInfo {
            name: "hash".into(),
            version: "test".into(),
            device: "none".into(),
            cpu_fallback: None,
            threads: 1,
            capabilities: Capabilities { mixed_position_batches: true, max_batch_tokens: 4096, slots, ctx_per_slot: ctx, prefix_copy: true },
            ..Default::default()
        };
        Self { info, caches: vec![Vec::new(); slots], passes: Vec::new(), fail_next: false, copies: Vec::new(), truncations: Vec::new(), cycle: None, hash_every: 16, pass_ns: None, last_ns: None, spent_ns: 0 }
    }

    fn next(&self, cache: &[TokenId]) -> TokenId {
        match self.cycle {
            // Steps of a cycle, then a hash's choice: drafts hold for a while, then fail.
            Some(n) if cache.len() % self.hash_every != 0 => (cache.last().copied().unwrap_or(0) + 1) % n,
            _ => cache.iter().fold(17u32, |h, &t| h.wrapping_mul(31).wrapping_add(t)) % 1000,
        }
    }
}

impl Backend for HashModel {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        if std::mem::take(&mut self.fail_next) {
            return Err(BackendError::Step("injected".into()));
        }
        self.passes.push(batch.chunks.iter().map(|c| (c.slot, c.pos, c.tokens.len())).collect());
        let positions = batch.chunks.iter().map(|c| if c.outputs == Outputs::All { c.tokens.len() } else { 1 }).sum::<usize>() as u64;
        self.last_ns = self.pass_ns.map(|(one, more)| one + more * positions.saturating_sub(1));
        self.spent_ns += self.last_ns.unwrap_or(0);
        let mut out = Vec::new();
        for c in &batch.chunks {
            let s = c.slot as usize;
            assert_eq!(self.caches[s].len(), c.pos as usize, "chunk for slot {} at wrong position", c.slot);
            let mut choices = Vec::new();
            for (i, &t) in c.tokens.iter().enumerate() {
                self.caches[s].push(t);
                let wanted = match c.outputs {
                    Outputs::None => false,
                    Outputs::Last => i + 1 == c.tokens.len(),
                    Outputs::All => true,
                };
                if wanted {
                    // A scored token's "log-probability" says which position scored it.
                    let at = -(self.caches[s].len() as f32);
                    let scored = c.score_row(if c.outputs == Outputs::All { i } else { 0 }).iter().map(|&token| Scored { token, logprob: at }).collect();
                    choices.push(Choice { token: self.next(&self.caches[s]), top: Vec::new(), scored });
                }
            }
            if !choices.is_empty() {
                out.push(ChunkOutput { slot: c.slot, choices });
            }
        }
        Ok(out)
    }
    fn last_compute(&self) -> Option<std::time::Duration> {
        self.last_ns.map(std::time::Duration::from_nanos)
    }
    fn clear(&mut self, slot: Slot) {
        self.caches[slot as usize].clear();
    }
    fn truncate(&mut self, slot: Slot, len: u32) -> Result<(), BackendError> {
        self.truncations.push((slot, len));
        self.caches[slot as usize].truncate(len as usize);
        Ok(())
    }
    fn save_state(&mut self, slot: Slot) -> Result<Vec<u8>, BackendError> {
        Ok(self.caches[slot as usize].iter().flat_map(|t| t.to_le_bytes()).collect())
    }
    fn load_state(&mut self, slot: Slot, state: &[u8], positions: u32) -> Result<(), BackendError> {
        let tokens: Vec<TokenId> = state.chunks_exact(4).map(|w| TokenId::from_le_bytes(w.try_into().unwrap())).collect();
        if tokens.len() != positions as usize {
            return Err(BackendError::Step(format!("{} positions in the state", tokens.len())));
        }
        self.caches[slot as usize] = tokens;
        Ok(())
    }
    fn copy_prefix(&mut self, from: Slot, to: Slot, len: u32) -> Result<(), BackendError> {
        if !self.info.capabilities.prefix_copy {
            return Err(BackendError::NotSupported("prefix copy"));
        }
        // llama.cpp copies whole sequences only: the scheduler must copy from a slot that
        // holds exactly the prefix.
        assert_eq!(self.caches[from as usize].len(), len as usize, "copy from a slot holding more than the prefix");
        self.copies.push((from, to, len));
        self.caches[to as usize] = self.caches[from as usize].clone();
        Ok(())
    }
}

fn request(id: u64, prompt_len: usize, max_tokens: u32) -> WorkRequest {
    let prompt = (0..prompt_len).map(|i| (i as u32 * 7 + id as u32 * 13) % 500).collect();
    WorkRequest { id, prompt, max_tokens, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: None }
}

/// What a scheduler run gives back: each request's tokens, the events, and per pass the
/// (slot, position, tokens) of each chunk the backend saw.
type Outcome = (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>, Vec<Vec<(Slot, u32, usize)>>);

/// Run requests to completion.
fn run(policy: Policy, slots: usize, reqs: Vec<WorkRequest>) -> Outcome {
    let mut config = SchedulerConfig::new(policy, slots, 4096);
    config.chunk_tokens = 8;
    config.static_form_up_ms = 0;
    let mut s = Scheduler::new(Box::new(HashModel::new(slots, 256)), config, Instant::now());
    let mut events = Vec::new();
    for r in reqs {
        s.submit(r, &mut |e| events.push(e));
    }
    let mut guard = 0;
    while s.has_work() {
        s.step(&mut |e| events.push(e));
        guard += 1;
        assert!(guard < 10_000, "scheduler did not finish");
    }
    let passes = s.backend().passes.clone();
    (tokens_of(&events), events, passes)
}

/// Each request's tokens, checked to arrive in order, each once.
fn tokens_of(events: &[SchedEvent]) -> std::collections::BTreeMap<u64, Vec<TokenId>> {
    let mut tokens = std::collections::BTreeMap::new();
    for e in events {
        if let SchedEvent::Token { id, token, index, .. } = e {
            let v: &mut Vec<TokenId> = tokens.entry(*id).or_default();
            assert_eq!(v.len(), *index as usize, "request {id}'s tokens in order, each once");
            v.push(*token);
        }
    }
    tokens
}

fn mixed_requests() -> Vec<WorkRequest> {
    vec![request(1, 5, 6), request(2, 30, 4), request(3, 1, 9), request(4, 17, 5), request(5, 9, 3)]
}

#[test]
fn every_policy_gives_the_tokens_serial_gives() {
    let (serial, _, _) = run(Policy::Serial, 4, mixed_requests());
    assert_eq!(serial.len(), 5);
    for (id, toks) in &serial {
        let r = mixed_requests().into_iter().find(|r| r.id == *id).unwrap();
        assert_eq!(toks.len(), r.max_tokens as usize);
    }
    for policy in [Policy::Static, Policy::Continuous, Policy::Chunked] {
        let (got, _, _) = run(policy, 4, mixed_requests());
        assert_eq!(got, serial, "{policy} changed the tokens");
    }
}

#[test]
fn serial_runs_one_sequence_per_pass() {
    let (_, _, passes) = run(Policy::Serial, 4, mixed_requests());
    assert!(passes.iter().all(|p| p.len() == 1));
}

#[test]
fn continuous_decodes_running_sequences_together() {
    let (_, _, passes) = run(Policy::Continuous, 4, mixed_requests());
    assert!(passes.iter().any(|p| p.len() == 4), "never had 4 sequences in one pass: {passes:?}");
    // The fifth request joins as soon as a slot frees, while others still decode.
    assert!(passes.len() < 5 + 6 + 4 + 9 + 5 + 3);
}

/// A new request takes the lowest free slot, so running slots stay packed at the bottom
/// (llama.cpp decodes a run of consecutive sequence ids in one micro-batch).
#[test]
fn admission_takes_the_lowest_free_slot() {
    // 1..4 fill slots 0..3; 1 ends first and 5 takes slot 0, which reorders the running list
    // so that 2 (slot 1) is retired before 4 (slot 3) when both end in the same pass. A
    // last-freed-first stack would then hand 6 slot 3; the lowest is 1.
    let reqs = vec![request(1, 4, 1), request(2, 4, 5), request(3, 4, 20), request(4, 4, 5), request(5, 4, 20), request(6, 4, 3), request(7, 4, 3)];
    let (_, events, _) = run(Policy::Continuous, 4, reqs);
    let slot_of = |want: u64| {
        events.iter().find_map(|e| match e {
            SchedEvent::Admitted { id, slot, .. } if *id == want => Some(*slot),
            _ => None,
        })
    };
    let slots: Vec<_> = (1..=7).map(|id| slot_of(id).expect("admitted")).collect();
    assert_eq!(slots, [0, 1, 2, 3, 0, 1, 3], "slots by request id");
}

#[test]
fn chunked_prefill_never_exceeds_the_chunk_budget() {
    let (_, _, passes) = run(Policy::Chunked, 4, mixed_requests());
    for p in &passes {
        let prefill: usize = p.iter().filter(|(_, _, n)| *n > 1).map(|(_, _, n)| n).sum();
        assert!(prefill <= 8, "pass carried {prefill} prompt tokens: {p:?}");
    }
}

#[test]
fn static_batch_admits_nobody_until_it_finishes() {
    let (_, events, _) = run(Policy::Static, 2, vec![request(1, 4, 2), request(2, 4, 8), request(3, 4, 2)]);
    let pos = |pred: &dyn Fn(&SchedEvent) -> bool| events.iter().position(pred).unwrap();
    let admit3 = pos(&|e| matches!(e, SchedEvent::Admitted { id: 3, .. }));
    let done2 = pos(&|e| matches!(e, SchedEvent::Finished { id: 2, .. }));
    let done1 = pos(&|e| matches!(e, SchedEvent::Finished { id: 1, .. }));
    assert!(done1 < done2 && done2 < admit3, "request 3 joined a running static batch");
}

#[test]
fn request_that_cannot_fit_fails_clearly() {
    let (_, events, _) = run(Policy::Continuous, 2, vec![request(1, 250, 10), request(2, 3, 2)]);
    let err = events.iter().find_map(|e| match e {
        SchedEvent::Failed { id: 1, error } => Some(error.clone()),
        _ => None,
    });
    assert!(err.unwrap().contains("exceeds the context of 256"));
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 2, .. })));
}

#[test]
fn stop_tokens_end_a_request_early() {
    let (free, _, _) = run(Policy::Serial, 1, vec![request(1, 5, 6)]);
    let third = free[&1][2];
    let mut r = request(1, 5, 6);
    r.stop_tokens = vec![third];
    let (stopped, events, _) = run(Policy::Serial, 1, vec![r]);
    assert_eq!(stopped[&1], free[&1][..3]);
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { reason: FinishReason::Stop, .. })));
}

#[test]
fn cancel_frees_the_slot() {
    let mut s = Scheduler::new(Box::new(HashModel::new(1, 64)), SchedulerConfig::new(Policy::Serial, 1, 64), Instant::now());
    let mut events = Vec::new();
    s.submit(request(1, 4, 50), &mut |e| events.push(e));
    s.submit(request(2, 4, 2), &mut |e| events.push(e));
    s.step(&mut |e| events.push(e));
    s.cancel(1, &mut |e| events.push(e));
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 1, reason: FinishReason::Cancelled, .. })));
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 2, reason: FinishReason::Length, .. })));
}

/// A static batch whose every member was cancelled is over: the next requests form a new one
/// (it stayed open once, and the worker admitted nothing again until it was killed as hung).
#[test]
fn cancelling_a_whole_static_batch_lets_the_next_one_form() {
    let mut config = SchedulerConfig::new(Policy::Static, 2, 64);
    config.static_form_up_ms = 0;
    let mut s = Scheduler::new(Box::new(HashModel::new(2, 64)), config, Instant::now());
    let mut events = Vec::new();
    s.submit(request(1, 4, 50), &mut |e| events.push(e));
    s.submit(request(2, 4, 50), &mut |e| events.push(e));
    s.step(&mut |e| events.push(e));
    s.cancel(1, &mut |e| events.push(e));
    s.cancel(2, &mut |e| events.push(e));
    s.submit(request(3, 4, 2), &mut |e| events.push(e));
    let mut guard = 0;
    while s.has_work() {
        s.step(&mut |e| events.push(e));
        guard += 1;
        assert!(guard < 100, "the next request was never admitted");
    }
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 3, reason: FinishReason::Length, .. })));
}

#[test]
fn failed_pass_fails_its_members_and_the_scheduler_goes_on() {
    let mut model = HashModel::new(2, 64);
    model.fail_next = true;
    let mut s = Scheduler::new(Box::new(model), SchedulerConfig::new(Policy::Continuous, 2, 64), Instant::now());
    let mut events = Vec::new();
    s.submit(request(1, 4, 3), &mut |e| events.push(e));
    s.step(&mut |e| events.push(e));
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Failed { id: 1, .. })));
    s.submit(request(2, 4, 3), &mut |e| events.push(e));
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 2, .. })));
}

#[test]
fn policy_names_round_trip_and_bad_limits_are_refused() {
    for p in Policy::ALL {
        assert_eq!(p.name().parse::<Policy>().unwrap(), p);
    }
    assert!("fifo".parse::<Policy>().unwrap_err().contains("serial, static, continuous, chunked"));
    let mut c = SchedulerConfig::new(Policy::Chunked, 4, 512);
    c.chunk_tokens = 0;
    assert_eq!(c.validate().unwrap_err().field, "chunk_tokens");
    c.chunk_tokens = 1;
    c.max_batch_seqs = 0;
    assert_eq!(c.validate().unwrap_err().to_string(), "the batch size limit must be at least 1");
}

/// Requests whose first `prefix` tokens are the same for all.
fn prefixed(id: u64, prefix: usize, suffix: usize, max_tokens: u32) -> WorkRequest {
    let mut prompt: Vec<TokenId> = (0..prefix as u32).map(|i| (i * 11 + 3) % 500).collect();
    prompt.extend((0..suffix as u32).map(|i| (i * 7 + id as u32 * 13) % 500));
    WorkRequest { id, prompt, max_tokens, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: prefix as u32, handoff: Default::default(), score: None }
}

fn run_cached(policy: Policy, slots: usize, cache: bool, reqs: Vec<WorkRequest>) -> (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>, HashModel) {
    let mut config = SchedulerConfig::new(policy, slots, 4096);
    config.chunk_tokens = 8;
    config.static_form_up_ms = 0;
    config.prefix_cache = cache;
    // One more slot than requests may use, for the cache.
    let mut s = Scheduler::new(Box::new(HashModel::new(slots + 1, 256)), config, Instant::now());
    let mut events = Vec::new();
    for r in reqs {
        s.submit(r, &mut |e| events.push(e));
        // One pass between submissions, so later requests find the prefix already cached.
        s.step(&mut |e| events.push(e));
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    let mut tokens = std::collections::BTreeMap::new();
    for e in &events {
        match e {
            SchedEvent::Token { id, token, .. } => tokens.entry(*id).or_insert_with(Vec::new).push(*token),
            SchedEvent::Failed { id, error } => panic!("request {id} failed: {error}"),
            _ => {}
        }
    }
    let Scheduler { backend, .. } = s;
    (tokens, events, *backend)
}

#[test]
fn prefix_cache_changes_no_token_and_computes_the_prefix_once() {
    let reqs = || (1..=5).map(|id| prefixed(id, 20, 3 + id as usize, 4)).collect::<Vec<_>>();
    for policy in Policy::ALL {
        let (plain, _, _) = run_cached(policy, 2, false, reqs());
        let (cached, events, model) = run_cached(policy, 2, true, reqs());
        assert_eq!(cached, plain, "{policy}: prefix caching changed the tokens");
        let reused: Vec<u64> = events.iter().filter_map(|e| if let SchedEvent::PrefixReused { id, tokens: 20, .. } = e { Some(*id) } else { None }).collect();
        assert!(reused.len() >= 3, "{policy}: only {reused:?} reused the prefix");
        // Prefix tokens computed: once into the cache (the requests that did not reuse it
        // and were not filling it computed their own).
        let prefill_tokens: u32 = events.iter().filter_map(|e| if let SchedEvent::Prefill { tokens, .. } = e { Some(*tokens) } else { None }).sum();
        let suffixes: u32 = (1..=5).map(|id| 3 + id as u32).sum();
        assert!(prefill_tokens <= suffixes + 20 * (5 - reused.len() as u32), "{policy}: {prefill_tokens} prompt tokens computed");
        // The cache lives in the extra slot (2) and is never handed to a request.
        assert!(model.copies.iter().all(|&(from, to, len)| from == 2 && to < 2 && len == 20), "{:?}", model.copies);
        assert!(events.iter().all(|e| !matches!(e, SchedEvent::Admitted { slot: 2, .. })));
    }
}

#[test]
fn a_different_prefix_replaces_the_cached_one() {
    let mut other = prefixed(3, 20, 4, 3);
    other.prompt[5] += 1; // same length, different prefix
    let reqs = vec![prefixed(1, 20, 4, 3), prefixed(2, 20, 5, 3), other, prefixed(4, 20, 6, 3)];
    let (plain, _, _) = run_cached(Policy::Serial, 1, false, reqs.clone());
    let (cached, events, _) = run_cached(Policy::Serial, 1, true, reqs);
    assert_eq!(cached, plain);
    let reused: Vec<u64> = events.iter().filter_map(|e| if let SchedEvent::PrefixReused { id, .. } = e { Some(*id) } else { None }).collect();
    // 2 reuses 1's prefix; 3 computes its own (and caches it); 4 finds 3's, not 1's.
    assert_eq!(reused, vec![2]);
}

#[test]
fn cancelling_the_request_filling_the_cache_leaves_it_empty_and_usable() {
    let mut config = SchedulerConfig::new(Policy::Chunked, 2, 4096);
    config.chunk_tokens = 8;
    config.prefix_cache = true;
    let mut s = Scheduler::new(Box::new(HashModel::new(3, 256)), config, Instant::now());
    let mut events = Vec::new();
    s.submit(prefixed(1, 20, 4, 3), &mut |e| events.push(e));
    s.step(&mut |e| events.push(e)); // 8 of the 20 prefix tokens
    s.cancel(1, &mut |e| events.push(e));
    s.submit(prefixed(2, 20, 4, 3), &mut |e| events.push(e));
    s.submit(prefixed(3, 20, 5, 3), &mut |e| events.push(e));
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 3, reason: FinishReason::Length, .. })));
    assert!(!events.iter().any(|e| matches!(e, SchedEvent::Failed { .. })), "{events:?}");
}

#[test]
fn without_prefix_copy_the_cache_stays_off_and_every_request_computes_its_prompt() {
    let mut model = HashModel::new(3, 256);
    model.info.capabilities.prefix_copy = false;
    let mut config = SchedulerConfig::new(Policy::Continuous, 2, 4096);
    config.prefix_cache = true;
    let mut s = Scheduler::new(Box::new(model), config, Instant::now());
    let mut events = Vec::new();
    for id in 1..=3 {
        s.submit(prefixed(id, 20, 4, 2), &mut |e| events.push(e));
        s.step(&mut |e| events.push(e));
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(!events.iter().any(|e| matches!(e, SchedEvent::PrefixReused { .. } | SchedEvent::Failed { .. })));
    assert_eq!(events.iter().filter(|e| matches!(e, SchedEvent::Finished { .. })).count(), 3);
}

#[test]
fn static_batches_wait_for_their_longest_member_and_respect_the_token_limit() {
    // Token limit 16 per pass: a 30-token prompt still runs (split), never dropped.
    let mut config = SchedulerConfig::new(Policy::Static, 2, 16);
    config.static_form_up_ms = 0;
    let mut s = Scheduler::new(Box::new(HashModel::new(2, 256)), config, Instant::now());
    let mut events = Vec::new();
    for r in [request(1, 30, 2), request(2, 4, 6), request(3, 4, 2)] {
        s.submit(r, &mut |e| events.push(e));
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(s.backend().passes.iter().all(|p| p.iter().map(|c| c.2).sum::<usize>() <= 16));
    assert_eq!(events.iter().filter(|e| matches!(e, SchedEvent::Finished { reason: FinishReason::Length, .. })).count(), 3);
}

// -- speculative decoding ------------------------------------------------------------------

fn lookup(draft_max: u32, adaptive: bool) -> Speculation {
    Speculation { drafter: crate::speculative::Drafter::Lookup, ngram_max: 3, ngram_min: 1, draft_max, adaptive, shared_cache: false }
}

/// Run requests to completion over a model whose text is cyclic (`cycle`) or a hash, with
/// the speculation given; every request's tokens, the events and the model.
fn run_spec(policy: Policy, slots: usize, spec: Speculation, cycle: Option<u32>, reqs: Vec<WorkRequest>) -> (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>, HashModel) {
    let (tokens, events, model, _) = run_drafted(policy, slots, spec, cycle, None, reqs);
    (tokens, events, model)
}

/// Pass costs where a further position costs 1% of a pass, as on a GPU: drafting pays
/// wherever drafts hold now and then.
const GPU_LIKE: (u64, u64) = (1_000_000, 10_000);
/// Pass costs where a further position costs 40% of a pass, as on a small CPU.
const CPU_LIKE: (u64, u64) = (1_000_000, 400_000);

/// [`run_spec`] with a draft model beside the target; the draft model comes back too.
fn run_drafted(policy: Policy, slots: usize, spec: Speculation, cycle: Option<u32>, draft: Option<HashModel>, reqs: Vec<WorkRequest>) -> (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>, HashModel, Option<HashModel>) {
    run_costed(policy, slots, spec, cycle, draft, GPU_LIKE, reqs)
}

/// [`run_drafted`] on a target whose passes cost `pass_ns` (see [`HashModel::pass_ns`]).
fn run_costed(
    policy: Policy,
    slots: usize,
    spec: Speculation,
    cycle: Option<u32>,
    draft: Option<HashModel>,
    pass_ns: (u64, u64),
    reqs: Vec<WorkRequest>,
) -> (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>, HashModel, Option<HashModel>) {
    let mut config = SchedulerConfig::new(policy, slots, 4096);
    config.chunk_tokens = 8;
    config.static_form_up_ms = 0;
    config.spec = spec;
    let model = HashModel { cycle, pass_ns: Some(pass_ns), ..HashModel::new(slots, 256) };
    let mut s = Scheduler::new(Box::new(model), config.clone(), Instant::now());
    if let Some(draft) = draft {
        s.set_draft(Box::new(draft), "test draft".into()).unwrap();
    }
    s.check(&config).unwrap();
    let mut events = Vec::new();
    for r in reqs {
        s.submit(r, &mut |e| events.push(e));
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    let mut tokens = std::collections::BTreeMap::new();
    for e in &events {
        match e {
            SchedEvent::Token { id, token, index, .. } => {
                let v: &mut Vec<TokenId> = tokens.entry(*id).or_default();
                assert_eq!(v.len(), *index as usize);
                v.push(*token);
            }
            SchedEvent::Failed { id, error } => panic!("request {id} failed: {error}"),
            _ => {}
        }
    }
    let Scheduler { backend, draft, .. } = s;
    (tokens, events, *backend, draft.map(|d| *d))
}

fn verified(events: &[SchedEvent]) -> (u32, u32) {
    events.iter().fold((0, 0), |(d, a), e| match e {
        SchedEvent::Verified { drafted, accepted, .. } => (d + drafted, a + accepted),
        _ => (d, a),
    })
}

/// Whatever the drafts, the tokens are plain greedy decoding's, and a rejected draft leaves
/// the cache as plain decoding would (the model asserts every chunk starts at its slot's
/// cached end, and its next token depends on the whole cache).
#[test]
fn speculation_changes_no_token_and_rolls_back_rejected_drafts() {
    let reqs = || vec![request(1, 5, 40), request(2, 30, 25), request(3, 1, 33), request(4, 17, 50), request(5, 9, 3)];
    for cycle in [Some(10), None] {
        for policy in Policy::ALL {
            let (plain, plain_events, _) = run_spec(policy, 4, Speculation::default(), cycle, reqs());
            assert_eq!(verified(&plain_events), (0, 0));
            for spec in [lookup(8, true), lookup(8, false), lookup(1, true), lookup(1, false)] {
                let (spec_tokens, events, model) = run_spec(policy, 4, spec, cycle, reqs());
                assert_eq!(spec_tokens, plain, "{policy}, {}, cycle {cycle:?}: speculation changed the tokens", spec.label());
                let (drafted, accepted) = verified(&events);
                if cycle.is_some() {
                    // The cyclic text is predictable for 15 tokens in 16: drafts hold, then one fails.
                    assert!(accepted > 0 && accepted < drafted, "{policy}, {}: {accepted} of {drafted} accepted", spec.label());
                    assert!(!model.truncations.is_empty(), "{policy}: a rejected draft was not rolled back");
                }
                // Tokens marked as drafted are exactly the accepted ones.
                let marked = events.iter().filter(|e| matches!(e, SchedEvent::Token { drafted: true, .. })).count();
                assert_eq!(marked as u32, accepted);
            }
        }
    }
}

#[test]
fn a_verify_pass_mixes_speculating_and_plain_sequences_and_yields_several_tokens() {
    // Request 1's prompt is cyclic (drafts found at once); request 2's prompt is one token,
    // with nothing to look up until its own output repeats.
    let cyclic = WorkRequest { prompt: (0..20).map(|i| i % 10).collect(), ..request(1, 0, 30) };
    let (_, events, model) = run_spec(Policy::Continuous, 2, lookup(4, false), Some(10), vec![cyclic, request(2, 1, 30)]);
    let mixed = model.passes.iter().any(|p| p.len() == 2 && p.iter().any(|c| c.2 > 1) && p.iter().any(|c| c.2 == 1));
    assert!(mixed, "no pass held one sequence's draft beside another's plain decode: {:?}", model.passes);
    // A verify pass produces several of a request's tokens at once, and says so.
    let step_of_many = events.iter().find_map(|e| match e {
        SchedEvent::Verified { id: 1, step, accepted, .. } if *accepted >= 2 => Some(*step),
        _ => None,
    });
    let step = step_of_many.expect("no verify pass accepted two drafted tokens");
    let tokens_in_step = events.iter().filter(|e| matches!(e, SchedEvent::Token { id: 1, step: s, .. } if *s == step)).count();
    assert!(tokens_in_step >= 3, "accepted drafts and the target's own token: {tokens_in_step}");
    let draft_tokens = events.iter().find_map(|e| match e {
        SchedEvent::Step { step: s, draft_tokens, .. } if *s == step => Some(*draft_tokens),
        _ => None,
    });
    assert!(draft_tokens.unwrap_or(0) >= 2);
}

#[test]
fn speculation_stops_at_max_tokens_and_at_a_stop_token() {
    let cyclic = |id, max| WorkRequest { prompt: (0..20).map(|i| i % 10).collect(), ..request(id, 0, max) };
    // Never more tokens than asked for, though a pass could yield more.
    let (tokens, _, _) = run_spec(Policy::Continuous, 2, lookup(8, false), Some(10), vec![cyclic(1, 7), cyclic(2, 2)]);
    assert_eq!((tokens[&1].len(), tokens[&2].len()), (7, 2));
    // A stop token inside an accepted draft ends the request there.
    let (plain, _, _) = run_spec(Policy::Continuous, 1, Speculation::default(), Some(10), vec![cyclic(1, 20)]);
    let stop = plain[&1][5];
    let with_stop = || vec![WorkRequest { stop_tokens: vec![stop], ..cyclic(1, 20) }];
    let (plain, _, _) = run_spec(Policy::Continuous, 1, Speculation::default(), Some(10), with_stop());
    let (spec, events, _) = run_spec(Policy::Continuous, 1, lookup(8, false), Some(10), with_stop());
    assert_eq!(spec, plain);
    assert_eq!(spec[&1].last(), Some(&stop));
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { reason: FinishReason::Stop, .. })));
}

#[test]
fn bad_speculation_settings_are_refused() {
    let mut c = SchedulerConfig::new(Policy::Continuous, 2, 64);
    c.spec = Speculation { ngram_min: 0, ..lookup(4, true) };
    assert_eq!(c.validate().unwrap_err().field, "spec_ngram_min");
}

fn drafting(draft_max: u32, adaptive: bool) -> Speculation {
    Speculation { drafter: Drafter::Draft, draft_max, adaptive, ..Speculation::default() }
}

/// A draft model's drafts change no token either, and its own cache follows the text: the
/// draft model asserts, as the target does, that every chunk starts at its slot's cached end,
/// so a draft cache left holding rejected tokens (or missing accepted ones) fails the run.
#[test]
fn a_draft_model_changes_no_token_and_its_cache_follows_the_text() {
    let reqs = || vec![request(1, 5, 40), request(2, 30, 25), request(3, 1, 33), request(4, 17, 50), request(5, 9, 3)];
    let draft_model = |hash_every| HashModel { cycle: Some(10), hash_every, ..HashModel::new(4, 256) };
    for policy in Policy::ALL {
        let (plain, _, _) = run_spec(policy, 4, Speculation::default(), Some(10), reqs());
        for spec in [drafting(8, true), drafting(8, false), drafting(1, false)] {
            // Agrees with the target but at every 7th position (and the target's 16th).
            let (tokens, events, _, draft) = run_drafted(policy, 4, spec, Some(10), Some(draft_model(7)), reqs());
            assert_eq!(tokens, plain, "{policy}, {}: drafting changed the tokens", spec.label());
            let (drafted, accepted) = verified(&events);
            assert!(accepted > 0 && accepted < drafted, "{policy}, {}: {accepted} of {drafted} accepted", spec.label());
            let draft = draft.unwrap();
            // One drafted token is never fed to the draft model, so only longer drafts roll back.
            assert_eq!(!draft.truncations.is_empty(), spec.draft_max > 1, "{policy}, {}: draft cache rollbacks", spec.label());
            let marked = events.iter().filter(|e| matches!(e, SchedEvent::Token { drafted: true, .. })).count();
            assert_eq!(marked as u32, accepted);
        }
        // A draft model that is the target drafts only what the target writes.
        let (tokens, events, _, _) = run_drafted(policy, 4, drafting(4, false), Some(10), Some(draft_model(16)), reqs());
        assert_eq!(tokens, plain);
        let (drafted, accepted) = verified(&events);
        assert_eq!(accepted, drafted, "{policy}: an exact draft was rejected");
    }
}

#[test]
fn the_draft_model_drafts_all_sequences_in_one_pass_per_token() {
    let (_, _, _, draft) = run_drafted(Policy::Continuous, 2, drafting(4, false), Some(10), Some(HashModel { cycle: Some(10), ..HashModel::new(2, 256) }), vec![request(1, 12, 30), request(2, 12, 30)]);
    let passes = draft.unwrap().passes;
    // The first pass feeds both prompts (catching up); later ones one token per sequence.
    assert_eq!(passes[0].iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>(), vec![(0, 0, 13), (1, 0, 13)]);
    assert!(passes.iter().skip(1).all(|p| p.len() == 2 || p.iter().all(|c| c.2 == 1)), "{passes:?}");
    assert!(passes.iter().filter(|p| p.len() == 2 && p.iter().all(|c| c.2 == 1)).count() >= 3, "{passes:?}");
}

#[test]
fn drafting_with_a_model_needs_one_that_fits() {
    let config = SchedulerConfig { spec: drafting(4, true), ..SchedulerConfig::new(Policy::Continuous, 2, 64) };
    let mut s = Scheduler::new(Box::new(HashModel::new(2, 256)), config.clone(), Instant::now());
    assert_eq!(s.check(&config).unwrap_err().field, "spec");
    let e = s.set_draft(Box::new(HashModel::new(1, 256)), "small".into()).unwrap_err();
    assert!(e.contains("1 slots of 256 tokens; the target needs 2 of 256"), "{e}");
    s.set_draft(Box::new(HashModel::new(2, 256)), "fits".into()).unwrap();
    assert!(s.check(&config).is_ok());
}

#[test]
fn a_failing_draft_model_fails_its_requests_with_the_reason() {
    let config = SchedulerConfig { spec: drafting(4, false), ..SchedulerConfig::new(Policy::Continuous, 2, 64) };
    let mut s = Scheduler::new(Box::new(HashModel::new(2, 256)), config, Instant::now());
    s.set_draft(Box::new(HashModel { fail_next: true, ..HashModel::new(2, 256) }), "failing".into()).unwrap();
    let mut events = Vec::new();
    s.submit(request(1, 5, 10), &mut |e| events.push(e));
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    let error = events.iter().find_map(|e| match e {
        SchedEvent::Failed { id: 1, error } => Some(error.clone()),
        _ => None,
    });
    assert_eq!(error.as_deref(), Some("draft model: forward pass failed: injected"));
    // The slot is free again and the scheduler keeps serving (the draft works now).
    s.submit(request(2, 5, 10), &mut |e| events.push(e));
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    assert!(events.iter().any(|e| matches!(e, SchedEvent::Finished { id: 2, reason: FinishReason::Length, .. })));
}

/// Runs `reqs` through a prefill scheduler that hands every state over, then through a
/// decode scheduler that takes them in, as the two workers of `disaggregated` do; `damage`
/// may change a blob on its way. Each request's tokens, and the events of both.
fn run_split(reqs: Vec<WorkRequest>, damage: &dyn Fn(u64, &mut crate::handoff::Blob)) -> (std::collections::BTreeMap<u64, Vec<TokenId>>, Vec<SchedEvent>) {
    let config = SchedulerConfig::new(Policy::Disaggregated, 4, 4096);
    let mut prefill = Scheduler::new(Box::new(HashModel::new(4, 256)), config.clone(), Instant::now());
    let mut decode = Scheduler::new(Box::new(HashModel::new(3, 256)), config, Instant::now());
    let mut events = Vec::new();
    let originals: std::collections::HashMap<u64, WorkRequest> = reqs.iter().map(|r| (r.id, r.clone())).collect();
    for r in reqs {
        prefill.submit(WorkRequest { handoff: Handoff::Out { route: Route::Pipe }, ..r }, &mut |e| events.push(e));
    }
    let mut guard = 0;
    while prefill.has_work() || decode.has_work() {
        let mut now = Vec::new();
        prefill.step(&mut |e| now.push(e));
        for e in &mut now {
            if let SchedEvent::HandedOff { id, token, state, .. } = e {
                let mut blob = state.take().expect("a state");
                damage(*id, &mut blob);
                let resumed = WorkRequest { handoff: Handoff::In { token: *token, top: Vec::new(), state: blob }, ..originals[id].clone() };
                decode.submit(resumed, &mut |e| events.push(e));
            }
        }
        events.extend(now);
        decode.step(&mut |e| events.push(e));
        guard += 1;
        assert!(guard < 10_000, "the two schedulers did not finish");
    }
    (tokens_of(&events), events)
}

#[test]
fn a_handed_over_state_decodes_the_tokens_one_scheduler_gives() {
    // One request ends with its first token (max 1): it never leaves the prefill side.
    let mut reqs = mixed_requests();
    reqs.push(request(6, 12, 1));
    let (whole, _, _) = run(Policy::Continuous, 4, reqs.clone());
    let (split, events) = run_split(reqs, &|_, _| {});
    assert_eq!(split, whole);
    let handed = events.iter().filter(|e| matches!(e, SchedEvent::HandedOff { .. })).count();
    let loaded: Vec<(u64, u64)> = events.iter().filter_map(|e| if let SchedEvent::StateLoaded { id, bytes, .. } = e { Some((*id, *bytes)) } else { None }).collect();
    assert_eq!((handed, loaded.len()), (5, 5));
    // A state is the framed cache: the prompt's positions, four bytes each here.
    let prompt = |id: u64| mixed_requests().into_iter().find(|r| r.id == id).unwrap().prompt.len() as u64;
    assert!(loaded.iter().all(|&(id, bytes)| bytes == 28 + 4 * prompt(id)), "{loaded:?}");
    assert!(events.iter().all(|e| !matches!(e, SchedEvent::Failed { .. })));
}

#[test]
fn a_damaged_state_fails_its_request_with_why_and_no_other() {
    let (whole, _, _) = run(Policy::Continuous, 4, mixed_requests());
    let (split, events) = run_split(mixed_requests(), &|id, blob| {
        if let (2, crate::handoff::Blob::Pipe { base64 }) = (id, blob) {
            // One character of the text changed: the checksum no longer matches.
            let c = if base64.as_bytes()[40] == b'A' { "B" } else { "A" };
            base64.replace_range(40..41, c);
        }
    });
    let failed: Vec<&SchedEvent> = events.iter().filter(|e| matches!(e, SchedEvent::Failed { .. })).collect();
    assert_eq!(failed.len(), 1);
    let SchedEvent::Failed { id: 2, error } = failed[0] else { panic!("request 2 fails: {failed:?}") };
    assert!(error.starts_with("the transferred state did not load: the saved state is damaged"), "{error}");
    for (id, tokens) in &whole {
        if *id != 2 {
            assert_eq!(split.get(id), Some(tokens), "request {id}");
        }
    }
}

/// The plan drafts what pays on the machine at hand: where a further position costs 40% of
/// a pass and drafts fail, it learns (from the passes' costs and the shadow proposals) to
/// send almost none, where a fixed draft length doubles the time; where positions are
/// nearly free and drafts hold, it keeps the whole gain. Times are what the model reports
/// its passes took, so the test is exact.
#[test]
fn drafting_follows_what_pays_on_the_machine() {
    let reqs = || vec![request(1, 30, 80), request(2, 12, 80)];
    let run = |spec, cycle, pass_ns| {
        let (_, events, _, _) = run_costed(Policy::Continuous, 2, spec, cycle, None, pass_ns, reqs());
        let ns: u64 = events
            .iter()
            .filter_map(|e| match e {
                SchedEvent::Step { compute, .. } => *compute,
                _ => None,
            })
            .sum();
        ns as f64
    };
    for (text, cycle) in [("hash", None), ("cyclic", Some(10))] {
        for (machine, pass_ns) in [("cpu", CPU_LIKE), ("gpu", GPU_LIKE)] {
            let plain = run(Speculation::default(), cycle, pass_ns);
            let adaptive = run(lookup(8, true), cycle, pass_ns) / plain;
            let fixed = run(lookup(8, false), cycle, pass_ns) / plain;
            let case = format!("{text} text, {machine}: time ÷ plain, planned {adaptive:.3}, fixed {fixed:.3}");
            assert!(adaptive <= 1.05, "{case}");
            assert!(adaptive <= fixed * 1.01, "{case}");
            match (text, machine) {
                ("hash", "cpu") => assert!(fixed > 1.5, "{case}"),
                ("cyclic", "gpu") => assert!(adaptive < 0.6, "{case}"),
                _ => {}
            }
        }
    }
}

/// Each request drafts from its own text unless the shared cache is on: a repeated prompt's
/// second run then drafts the first run's answer, nearly all of it accepted, which is why
/// benchmarks leave it off.
#[test]
fn a_repeated_prompt_drafts_for_free_only_with_the_shared_cache() {
    // Hash text: a request's own text predicts nothing; one after the other, one slot.
    let reqs = || vec![request(1, 24, 40), WorkRequest { id: 2, ..request(1, 24, 40) }];
    let per_request = |shared_cache| {
        let (tokens, events, _) = run_spec(Policy::Continuous, 1, Speculation { shared_cache, ..lookup(8, true) }, None, reqs());
        assert_eq!(tokens[&1], tokens[&2], "the same prompt, the same greedy text");
        let accepted = |id| {
            events.iter().fold(0, |sum, e| match e {
                SchedEvent::Verified { id: i, accepted, .. } if *i == id => sum + accepted,
                _ => sum,
            })
        };
        (accepted(1), accepted(2))
    };
    let (own_first, own_second) = per_request(false);
    let (shared_first, shared_second) = per_request(true);
    assert_eq!(own_first, shared_first, "the first request has nothing earlier to match");
    assert!(own_second <= 4, "alone, the second request drafts no better than the first: {own_second} accepted");
    assert!(shared_second >= 30, "with the shared cache, the second request's answer comes from the first's: {shared_second} of 39 accepted");
}

/// A draft model that costs as much as the target never pays where a further position costs
/// 40% of a pass: after one try, measured, it is left alone (no probes either), and the
/// requests take about plain decoding's time, where a fixed length keeps paying for it.
#[test]
fn a_draft_model_as_slow_as_the_target_is_left_alone() {
    let reqs = || vec![request(1, 12, 60), request(2, 20, 60)];
    let draft = || Some(HashModel { cycle: Some(10), pass_ns: Some(CPU_LIKE), ..HashModel::new(2, 256) });
    // Both models' passes, as they report them.
    let time = |spec: Speculation, draft| {
        let (_, events, target, draft) = run_costed(Policy::Continuous, 2, spec, Some(10), draft, CPU_LIKE, reqs());
        (target.spent_ns + draft.map_or(0, |d| d.spent_ns), verified(&events).0)
    };
    let (plain, _) = time(Speculation::default(), None);
    let (planned, drafted) = time(drafting(8, true), draft());
    let (fixed, _) = time(drafting(8, false), draft());
    assert!(drafted <= 16, "{drafted} drafted after the draft model's cost was known");
    assert!((planned as f64) < plain as f64 * 1.1, "planned {planned} ns, plain {plain}");
    assert!(fixed as f64 > plain as f64 * 1.2, "fixed {fixed} ns, plain {plain}");
}

/// A prompt scored teacher-forced comes back position by position, each scored once with the
/// tokens asked for it, across chunked prefill and beside a plain request; the tokens it then
/// generates are those an unscored run gives.
#[test]
fn a_scored_prompt_reports_each_position_once_and_generates_as_before() {
    let plain = || vec![request(1, 30, 3), request(2, 12, 4)];
    let (expected, _, _) = run(Policy::Chunked, 2, plain());
    let mut scored = plain();
    let prompt = scored[0].prompt.clone();
    let from = 10;
    let ids: Vec<Vec<TokenId>> = (from..prompt.len() - 1).map(|p| vec![prompt[p + 1], 7]).collect();
    scored[0].score = Some(PromptScore { from: from as u32, top: 0, mass: None, ids });
    let (got, events, passes) = run(Policy::Chunked, 2, scored);
    assert_eq!(got, expected, "scoring changed the generated tokens");
    // The unscored head goes in passes of its own, which end where the scored rows begin.
    let ends: Vec<usize> = passes.iter().flat_map(|p| p.iter().filter(|c| c.0 == 0).map(|c| c.1 as usize + c.2)).collect();
    assert!(ends.contains(&from), "a pass of request 1 ends at position {from}: {passes:?}");
    let mut rows = Vec::new();
    for e in &events {
        if let SchedEvent::Scored { id, pos, rows: r } = e {
            assert_eq!(*id, 1);
            assert_eq!(*pos as usize, from + rows.len(), "scored rows arrive in order, each once");
            rows.extend(r.iter().cloned());
        }
    }
    assert_eq!(rows.len(), prompt.len() - 1 - from, "every position from {from} up to the prompt's last");
    for (k, row) in rows.iter().enumerate() {
        let p = from + k;
        let asked: Vec<TokenId> = row.scored.iter().map(|s| s.token).collect();
        assert_eq!(asked, vec![prompt[p + 1], 7], "position {p}'s own tokens");
        assert_eq!(row.scored[0].logprob, -((p + 1) as f32), "position {p} scored where its cache ends");
    }
}
