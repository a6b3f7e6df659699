//! The one scheduler: which sequences go into each forward pass.
//!
//! It runs inside the worker, next to the backend, and is the same for every backend,
//! so a comparison between backends compares backends, not schedulers. Each call to
//! [`Scheduler::step`] admits waiting requests as the policy allows, builds one
//! [`Batch`], runs it, and reports what happened as [`SchedEvent`]s stamped on the
//! worker's clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError, Batch, Choice, Chunk, Outputs, Scored, Slot, TokenId};
use crate::handoff::{self, Blob, Route};
use crate::invalid::Invalid;
use crate::speculative::{self, Acceptance, Candidate, Drafter, PassCosts, Probe, SharedText, Speculation};

/// How requests share the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// One request at a time, first come first served.
    Serial,
    /// A batch forms from up to B waiting requests, runs until all of it has finished; nothing joins it.
    Static,
    /// Every running sequence decodes in one pass per step; new requests join at the next step
    /// with their whole prompt.
    Continuous,
    /// Continuous batching with prompts split into chunks, so a long prompt cannot stall
    /// everyone else's decode.
    Chunked,
    /// Prefill and decode in two workers: one computes each prompt and its first token, the
    /// sequence's state moves to the other, which decodes everything it holds in one pass per
    /// step ([`lx_worker::disaggregated`]). Inside each worker it schedules as `continuous`.
    Disaggregated,
}

impl Policy {
    pub const ALL: [Policy; 5] = [Policy::Serial, Policy::Static, Policy::Continuous, Policy::Chunked, Policy::Disaggregated];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Serial => "serial",
            Policy::Static => "static",
            Policy::Continuous => "continuous",
            Policy::Chunked => "chunked",
            Policy::Disaggregated => "disaggregated",
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown policy '{s}' (expected one of: serial, static, continuous, chunked, disaggregated)"))
    }
}

/// Scheduler settings. Limits are checked by [`SchedulerConfig::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedulerConfig {
    pub policy: Policy,
    /// Most sequences in one pass (also the static batch size B).
    pub max_batch_seqs: usize,
    /// Most tokens in one pass.
    pub max_batch_tokens: usize,
    /// `chunked`: most prompt tokens in one pass.
    pub chunk_tokens: usize,
    /// `static`: how long the oldest waiting request may wait for its batch to fill.
    pub static_form_up_ms: u64,
    /// Keep a shared prompt prefix's KV in a slot of its own and copy it into each request
    /// that starts with it, instead of computing it again. Costs one slot.
    #[serde(default)]
    pub prefix_cache: bool,
    /// Speculative decoding: draft tokens for each decoding sequence and verify them in the
    /// pass that would have decoded one.
    #[serde(default)]
    pub spec: Speculation,
    /// `disaggregated`: how the two workers are set up and how states travel between them.
    #[serde(default, skip_serializing_if = "crate::split::Split::is_default")]
    pub split: crate::split::Split,
}


/// The tokens-per-pass limit for `slots` sequences of up to `tokens_per_slot` tokens each:
/// room for all of them in one pass, but at least 512 (so a prompt chunk and the decode
/// tokens beside it fit) and at most 16384 (the backend's scratch buffers grow with it).
pub fn batch_tokens_for(tokens_per_slot: usize, slots: usize) -> usize {
    (tokens_per_slot * slots).clamp(512, 16384)
}

impl SchedulerConfig {
    pub fn new(policy: Policy, max_batch_seqs: usize, max_batch_tokens: usize) -> Self {
        Self {
            policy,
            max_batch_seqs,
            max_batch_tokens,
            chunk_tokens: crate::defaults::CHUNK_TOKENS,
            static_form_up_ms: 50,
            prefix_cache: false,
            spec: Speculation::default(),
            split: Default::default(),
        }
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        if self.max_batch_seqs == 0 {
            return Err(Invalid::new("max_batch_seqs", "the batch size limit must be at least 1"));
        }
        if self.max_batch_tokens == 0 {
            return Err(Invalid::new("max_batch_tokens", "the tokens-per-step limit must be at least 1"));
        }
        if self.chunk_tokens == 0 {
            return Err(Invalid::new("chunk_tokens", "the prefill chunk size must be at least 1 token"));
        }
        self.spec.validate()
    }
}

/// One request as the worker sees it: token ids in, a number of tokens out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkRequest {
    pub id: u64,
    pub prompt: Vec<TokenId>,
    /// Output tokens to generate (the first comes from the prefill).
    pub max_tokens: u32,
    /// Stop early at any of these tokens; empty means ignore EOS and always make `max_tokens`.
    #[serde(default)]
    pub stop_tokens: Vec<TokenId>,
    /// Report this many alternatives per generated token (for parity checks); 0 for none.
    #[serde(default)]
    pub top_logprobs: usize,
    /// The first `prefix_tokens` of the prompt are a prefix other requests share (a system
    /// prompt): with prefix caching on, its KV is computed once and copied. 0 for none.
    #[serde(default)]
    pub prefix_tokens: u32,
    /// Its part in disaggregated serving, if any.
    #[serde(default, skip_serializing_if = "Handoff::is_none")]
    pub handoff: Handoff,
    /// Score the prompt itself, teacher-forced (fidelity): what the model gives each of
    /// its tokens, reported in [`SchedEvent::Scored`] as the prefill computes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<PromptScore>,
}

/// What to report of a prompt scored teacher-forced: for each position `p` in
/// `from..prompt.len() - 1` (each one predicting the prompt's token `p + 1`), the best `top`
/// alternatives (or fewer: as many as reach probability `mass`) and the log-probabilities of
/// `ids[p - from]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptScore {
    pub from: u32,
    #[serde(default)]
    pub top: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mass: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<Vec<TokenId>>,
}

impl PromptScore {
    /// `row`'s alternatives cut after the first that brings them to [`PromptScore::mass`]:
    /// a peaked distribution needs a handful, a flat one thousands.
    fn keep(&self, row: &mut Choice) {
        let Some(mass) = self.mass else { return };
        let mut sum = 0.0;
        let n = row.top.iter().position(|s| {
            sum += f64::from(s.logprob).exp();
            sum >= mass
        });
        if let Some(n) = n {
            row.top.truncate(n + 1);
        }
    }

    /// The positions `from..to` of a `prompt_len`-token prompt that are scored.
    fn rows(&self, prompt_len: usize) -> std::ops::Range<usize> {
        (self.from as usize).min(prompt_len.saturating_sub(1))..prompt_len.saturating_sub(1)
    }
}

/// A request's part in disaggregated serving.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Handoff {
    /// Prefilled and decoded here.
    #[default]
    None,
    /// Prefill here; after the first token, save the sequence's state and send it by
    /// `route` ([`SchedEvent::HandedOff`]) instead of decoding.
    Out { route: Route },
    /// Prefilled elsewhere: load `state` (the prompt's positions), then decode on from
    /// `token`, the first token, which the prefill made.
    In {
        token: TokenId,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        top: Vec<Scored>,
        state: Blob,
    },
}

impl Handoff {
    pub fn is_none(&self) -> bool {
        matches!(self, Handoff::None)
    }
}

/// Why a request ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    Length,
    Stop,
    Cancelled,
}

/// What the scheduler did, on the worker's clock (nanoseconds since the worker started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum SchedEvent {
    /// The request got a slot and will be in the next pass.
    Admitted { id: u64, slot: Slot, t: u64 },
    /// A pass ran `tokens` prompt tokens of this request (all of them unless chunked).
    Prefill { id: u64, step: u64, tokens: u32, t_start: u64, t_end: u64 },
    /// The first `tokens` of the prompt were copied from the prefix cache, not computed.
    PrefixReused { id: u64, tokens: u32, t: u64 },
    /// A generated token. `index` 0 is the token the prefill produced. `drafted`: it was
    /// proposed by the drafter and accepted by the target's verify pass.
    Token {
        id: u64,
        step: u64,
        index: u32,
        token: TokenId,
        t: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        top: Vec<Scored>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        drafted: bool,
    },
    /// A verify pass of this request's draft: `drafted` tokens proposed (in `draft_ns` of
    /// drafting before the pass), the first `accepted` of them agreed with the target.
    Verified { id: u64, step: u64, drafted: u32, accepted: u32, draft_ns: u64 },
    /// Disaggregated prefill: after its first token (`token`, from pass `step`) the
    /// request's state was saved (`bytes`, framed, from `t_start` to `t_end`) and sent on in
    /// `state`, which the coordinator takes out on its way to the decode worker. Its slot here
    /// is free; the request goes on elsewhere.
    HandedOff {
        id: u64,
        step: u64,
        token: TokenId,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        top: Vec<Scored>,
        bytes: u64,
        t_start: u64,
        t_end: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Blob>,
    },
    /// Disaggregated decode: the request's transferred state (`bytes`, framed) was read and
    /// loaded into `slot` from `t_start` to `t_end`; its first token follows.
    StateLoaded { id: u64, slot: Slot, bytes: u64, t_start: u64, t_end: u64 },
    /// Prompt positions `pos..pos + rows.len()` of a request that asked for its prompt
    /// scored ([`WorkRequest::score`]), as one prefill pass computed them.
    Scored { id: u64, pos: u32, rows: Vec<Choice> },
    /// The request is done; its slot is free.
    Finished { id: u64, reason: FinishReason, t: u64 },
    /// The request failed; its slot is free.
    Failed { id: u64, error: String },
    /// Something the request's figures should be read with (a server's token counts that
    /// disagree with ours, a retry after HTTP 429). Our scheduler never sends one.
    Warning { id: u64, message: String },
    /// One forward pass: how many sequences and tokens it carried, and the nanoseconds of it
    /// spent inside the backend's library where the backend times that.
    Step {
        step: u64,
        seqs: u32,
        prefill_tokens: u32,
        decode_tokens: u32,
        /// Drafted tokens verified in this pass, beside the `decode_tokens` (one per decoding
        /// sequence): a pass with any is a verify pass.
        #[serde(default, skip_serializing_if = "is_zero")]
        draft_tokens: u32,
        t_start: u64,
        t_end: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compute: Option<u64>,
    },
}

impl SchedEvent {
    /// Every stamp of it moved by `f` (onto another clock).
    pub fn map_times(&mut self, f: &dyn Fn(u64) -> u64) {
        match self {
            SchedEvent::Admitted { t, .. } | SchedEvent::PrefixReused { t, .. } | SchedEvent::Token { t, .. } | SchedEvent::Finished { t, .. } => *t = f(*t),
            SchedEvent::Prefill { t_start, t_end, .. }
            | SchedEvent::Step { t_start, t_end, .. }
            | SchedEvent::HandedOff { t_start, t_end, .. }
            | SchedEvent::StateLoaded { t_start, t_end, .. } => {
                *t_start = f(*t_start);
                *t_end = f(*t_end);
            }
            SchedEvent::Verified { .. } | SchedEvent::Failed { .. } | SchedEvent::Warning { .. } | SchedEvent::Scored { .. } => {}
        }
    }

    /// The pass it names renumbered by `f`.
    pub fn map_step(&mut self, f: &dyn Fn(u64) -> u64) {
        match self {
            SchedEvent::Prefill { step, .. } | SchedEvent::Token { step, .. } | SchedEvent::Verified { step, .. } | SchedEvent::Step { step, .. } | SchedEvent::HandedOff { step, .. } => {
                *step = f(*step)
            }
            _ => {}
        }
    }
}

#[derive(Debug)]
struct Running {
    req: WorkRequest,
    slot: Slot,
    /// Prompt tokens already in the KV cache.
    prefilled: usize,
    /// Tokens generated so far; the last one is not yet in the cache.
    generated: Vec<TokenId>,
    /// Its prefix is being computed into the prefix-cache slot (then copied into its own).
    fills_prefix: bool,
    /// How its drafts have fared (speculative decoding).
    acceptance: Acceptance,
    /// When it drafts with a draft model the plan leaves out: the next try.
    probe: Probe,
    /// Tokens of its text (prompt, then generated) in the draft model's cache.
    draft_cached: usize,
}

impl Running {
    fn prefilling(&self) -> bool {
        self.prefilled < self.req.prompt.len()
    }

    /// Its text so far: the prompt, then what it generated.
    fn text(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.req.prompt.iter().chain(&self.generated).copied()
    }

    fn text_len(&self) -> usize {
        self.req.prompt.len() + self.generated.len()
    }
}

/// The prefix cache: one slot that holds exactly a shared prefix and nothing else. Keeping
/// it apart (rather than borrowing a running request's slot) means a copy is always a whole
/// sequence, which backends with per-sequence KV streams (llama.cpp) can copy, and sliding-
/// window caches never hold positions of someone's suffix.
#[derive(Debug, Default)]
struct PrefixCache {
    slot: Option<Slot>,
    /// The prefix the slot holds, once complete.
    ready: Option<Vec<TokenId>>,
    /// The request computing it now; others with a prefix compute their own meanwhile.
    filling: Option<u64>,
}

/// One pass as planned: the batch, and who is in it.
#[derive(Default)]
struct Pass {
    batch: Batch,
    /// Per chunk, in batch order.
    members: Vec<Member>,
    prefill_tokens: u32,
    decode_tokens: u32,
    draft_tokens: u32,
}

/// A chunk's request and, when it decodes speculatively, its draft.
struct Member {
    /// Index into `running`.
    index: usize,
    draft: Draft,
}

/// What running the draft model gave: each sequence's drafted tokens, and what it cost.
struct DraftRun {
    drafted: Vec<Vec<TokenId>>,
    token_pass_ns: Option<u64>,
    catch_up_ns_per_token: Option<f64>,
}

/// The fewest tokens a draft model's catch-up pass must read to be timed per token (fewer,
/// and the pass's own fixed cost would count as reading).
const CATCH_UP_TIMED: usize = 16;

/// What a decoding sequence drafted for a pass.
#[derive(Debug, Clone, Default)]
struct Draft {
    tokens: Vec<TokenId>,
    /// Time spent drafting it, before the pass.
    ns: u64,
    /// The first token prompt lookup proposed when the plan sent none: checked against the
    /// token the pass writes, it tells how drafts would have fared at no cost.
    shadow: Option<TokenId>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Schedules requests over one backend.
pub struct Scheduler<B: Backend + ?Sized> {
    backend: Box<B>,
    /// The draft model of speculative decoding's `draft` drafter, when one was loaded: the
    /// same slots as the target, each holding the same sequence's text.
    draft: Option<Box<B>>,
    /// What the draft model is, as results name it.
    draft_name: Option<String>,
    config: SchedulerConfig,
    epoch: Instant,
    waiting: VecDeque<(WorkRequest, Instant)>,
    running: Vec<Running>,
    free_slots: Vec<Slot>,
    /// `static`: the batch in flight has not finished yet.
    static_batch_open: bool,
    steps: u64,
    prefix: PrefixCache,
    /// What decode passes of each size took here, for planning drafts.
    costs: PassCosts,
    /// A draft model's time per drafted token (a running average), for planning drafts.
    draft_ns_per_token: Option<f64>,
    /// A draft model's time per token of text it catches up on (a running average); until
    /// it is measured, the target's own time per prompt token stands in.
    draft_prefill_ns_per_token: Option<f64>,
    target_prefill_ns_per_token: Option<f64>,
    /// Finished requests' text, for prompt lookup with a shared cache.
    shared: SharedText,
}

impl<B: Backend + ?Sized> Scheduler<B> {
    /// `epoch` is the worker clock's zero: every event time is nanoseconds since it.
    pub fn new(backend: Box<B>, config: SchedulerConfig, epoch: Instant) -> Self {
        let slots = backend.info().capabilities.slots;
        Self {
            backend,
            draft: None,
            draft_name: None,
            config,
            epoch,
            waiting: VecDeque::new(),
            running: Vec::new(),
            free_slots: (0..slots as Slot).rev().collect(),
            static_batch_open: false,
            steps: 0,
            prefix: PrefixCache::default(),
            costs: PassCosts::default(),
            draft_ns_per_token: None,
            draft_prefill_ns_per_token: None,
            target_prefill_ns_per_token: None,
            shared: SharedText::default(),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Give the scheduler a draft model for `Drafter::Draft`; it needs as many slots as the
    /// target and room for each slot's text.
    pub fn set_draft(&mut self, draft: Box<B>, name: String) -> Result<(), String> {
        let (t, d) = (&self.backend.info().capabilities, &draft.info().capabilities);
        if d.slots < t.slots || d.ctx_per_slot < t.ctx_per_slot {
            return Err(format!(
                "the draft model has {} slots of {} tokens; the target needs {} of {}",
                d.slots, d.ctx_per_slot, t.slots, t.ctx_per_slot
            ));
        }
        self.draft = Some(draft);
        self.draft_name = Some(name);
        Ok(())
    }

    /// The draft model's name, when one is loaded.
    pub fn draft_name(&self) -> Option<&str> {
        self.draft_name.as_deref()
    }

    /// Whether `config` can run here: drafting with a draft model needs one loaded.
    pub fn check(&self, config: &SchedulerConfig) -> Result<(), Invalid> {
        config.validate()?;
        if config.spec.drafter == Drafter::Draft && self.draft.is_none() {
            return Err(Invalid::new("spec", "speculative decoding with a draft model needs the draft loaded with the model (--spec-draft-model, or the default draft with --spec draft)"));
        }
        Ok(())
    }

    /// Change the policy or limits; applies to requests admitted from now on.
    pub fn configure(&mut self, config: SchedulerConfig) {
        self.config = config;
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Queue a request, or fail it at once if it can never fit.
    pub fn submit(&mut self, req: WorkRequest, sink: &mut dyn FnMut(SchedEvent)) {
        let ctx = self.backend.info().capabilities.ctx_per_slot;
        let need = req.prompt.len() + req.max_tokens as usize;
        let error = if req.prompt.is_empty() {
            Some("the prompt is empty".to_string())
        } else if req.max_tokens == 0 {
            Some("max_tokens must be at least 1".to_string())
        } else if need > ctx {
            Some(format!(
                "prompt ({} tokens) + output ({} tokens) = {need} exceeds the context of {ctx} tokens per sequence",
                req.prompt.len(),
                req.max_tokens
            ))
        } else {
            None
        };
        match error {
            Some(error) => sink(SchedEvent::Failed { id: req.id, error }),
            None => self.waiting.push_back((req, Instant::now())),
        }
    }

    /// Drop a request wherever it is.
    pub fn cancel(&mut self, id: u64, sink: &mut dyn FnMut(SchedEvent)) {
        if let Some(i) = self.waiting.iter().position(|(r, _)| r.id == id) {
            if let Some((WorkRequest { handoff: Handoff::In { state, .. }, .. }, _)) = self.waiting.remove(i) {
                handoff::discard(&state);
            }
        } else if let Some(i) = self.running.iter().position(|r| r.req.id == id) {
            let r = self.running.swap_remove(i);
            self.retire(r);
            self.close_static_batch();
        } else {
            return;
        }
        sink(SchedEvent::Finished { id, reason: FinishReason::Cancelled, t: self.now() });
    }

    /// Requests waiting or running.
    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// How long the worker may sleep before `step` has something to do: `None` when it must
    /// wait for a command, `Some(0)` when a step is ready now.
    pub fn idle_for(&self) -> Option<Duration> {
        if !self.running.is_empty() {
            return Some(Duration::ZERO);
        }
        let (_, since) = self.waiting.front()?;
        if self.config.policy != Policy::Static || self.waiting.len() >= self.config.max_batch_seqs {
            return Some(Duration::ZERO);
        }
        Some(Duration::from_millis(self.config.static_form_up_ms).saturating_sub(since.elapsed()))
    }

    fn release(&mut self, slot: Slot) {
        self.backend.clear(slot);
        if let Some(draft) = self.draft.as_mut() {
            draft.clear(slot);
        }
        // Kept highest first, so `pop` hands out the lowest free slot: running slots stay
        // packed at the bottom, which backends that batch runs of consecutive sequence ids
        // (llama.cpp with one KV stream per sequence) need to decode them in one pass.
        let at = self.free_slots.partition_point(|&s| s > slot);
        self.free_slots.insert(at, slot);
    }

    /// Free a request's slot; if it was computing the cached prefix, that prefix is lost.
    fn retire(&mut self, r: Running) {
        let spec = self.config.spec;
        if spec.shared_cache && spec.drafter == Drafter::Lookup {
            self.shared.add(r.text().collect(), spec.ngram_min as usize, spec.ngram_max as usize);
        }
        if r.fills_prefix {
            self.prefix.filling = None;
            if let Some(slot) = self.prefix.slot {
                self.backend.clear(slot);
            }
        }
        self.release(r.slot);
    }

    /// Reserve or give back the prefix-cache slot as the configuration asks. It is taken
    /// only from free slots, so a change never disturbs a running request.
    fn sync_prefix_slot(&mut self) {
        let want = self.config.prefix_cache && self.backend.info().capabilities.prefix_copy;
        match self.prefix.slot {
            None if want && !self.free_slots.is_empty() => {
                // The highest free slot (the list's first), so request slots stay 0..n as
                // without caching.
                self.prefix.slot = Some(self.free_slots.remove(0));
                self.prefix.ready = None;
            }
            Some(slot) if !want && self.prefix.filling.is_none() => {
                self.prefix = PrefixCache::default();
                self.release(slot);
            }
            _ => {}
        }
    }

    /// Set up a newly admitted request's prefix: copy it from the cache when the cache holds
    /// exactly these tokens, or have this request compute it into the cache.
    fn start_prefix(&mut self, r: &mut Running, sink: &mut dyn FnMut(SchedEvent)) -> Result<(), String> {
        let p = r.req.prefix_tokens as usize;
        let Some(cache_slot) = self.prefix.slot else { return Ok(()) };
        // At least one prompt token must be computed in the request's own slot, for its logits.
        if p == 0 || p >= r.req.prompt.len() {
            return Ok(());
        }
        if self.prefix.ready.as_deref() == Some(&r.req.prompt[..p]) {
            self.backend.copy_prefix(cache_slot, r.slot, p as u32).map_err(|e| format!("prefix cache: {e}"))?;
            r.prefilled = p;
            sink(SchedEvent::PrefixReused { id: r.req.id, tokens: p as u32, t: self.now() });
        } else if self.prefix.filling.is_none() {
            self.backend.clear(cache_slot);
            self.prefix.ready = None;
            self.prefix.filling = Some(r.req.id);
            r.fills_prefix = true;
        }
        Ok(())
    }

    /// Admit what the policy allows now ([`Scheduler::step`] does it too, before its pass).
    pub fn admit(&mut self, sink: &mut dyn FnMut(SchedEvent)) {
        self.sync_prefix_slot();
        let limit = self.config.max_batch_seqs.min(self.backend.info().capabilities.slots);
        let room = match self.config.policy {
            Policy::Serial => usize::from(self.running.is_empty()),
            Policy::Static => {
                if self.static_batch_open || self.idle_for() != Some(Duration::ZERO) {
                    0
                } else {
                    limit
                }
            }
            Policy::Continuous | Policy::Chunked | Policy::Disaggregated => limit.saturating_sub(self.running.len()),
        };
        let mut admitted = 0;
        while admitted < room {
            let Some(slot) = self.free_slots.pop() else { break };
            let Some((req, _)) = self.waiting.pop_front() else {
                self.free_slots.push(slot);
                break;
            };
            if let Handoff::In { .. } = req.handoff {
                if self.resume(req, slot, sink) {
                    admitted += 1;
                }
                continue;
            }
            sink(SchedEvent::Admitted { id: req.id, slot, t: self.now() });
            let mut r = Running { req, slot, prefilled: 0, generated: Vec::new(), fills_prefix: false, acceptance: Acceptance::default(), probe: Probe::default(), draft_cached: 0 };
            if let Err(error) = self.start_prefix(&mut r, sink) {
                sink(SchedEvent::Failed { id: r.req.id, error });
                self.release(r.slot);
                continue;
            }
            self.running.push(r);
            admitted += 1;
        }
        if self.config.policy == Policy::Static && admitted > 0 {
            self.static_batch_open = true;
        }
    }

    /// Take in a request prefilled by another worker: load its state into `slot` and report
    /// its first token, as a prefill here would have. True when it now runs.
    fn resume(&mut self, mut req: WorkRequest, slot: Slot, sink: &mut dyn FnMut(SchedEvent)) -> bool {
        let Handoff::In { token, top, state } = std::mem::take(&mut req.handoff) else { unreachable!("only resumed requests") };
        let t_start = self.now();
        let positions = req.prompt.len() as u32;
        let loaded = handoff::take(&state).and_then(|framed| {
            let (held, payload) = handoff::unframe(&framed)?;
            if held != positions {
                return Err(format!("it holds {held} positions, the prompt has {positions}"));
            }
            self.backend.load_state(slot, payload, positions).map_err(|e| e.to_string())?;
            Ok(framed.len() as u64)
        });
        let bytes = match loaded {
            Ok(bytes) => bytes,
            Err(why) => {
                sink(SchedEvent::Failed { id: req.id, error: format!("the transferred state did not load: {why}") });
                self.release(slot);
                return false;
            }
        };
        let t = self.now();
        sink(SchedEvent::StateLoaded { id: req.id, slot, bytes, t_start, t_end: t });
        sink(SchedEvent::Token { id: req.id, step: 0, index: 0, token, t, top, drafted: false });
        if req.stop_tokens.contains(&token) || req.max_tokens <= 1 {
            let reason = if req.stop_tokens.contains(&token) { FinishReason::Stop } else { FinishReason::Length };
            sink(SchedEvent::Finished { id: req.id, reason, t });
            self.release(slot);
            return false;
        }
        self.running.push(Running {
            prefilled: req.prompt.len(),
            req,
            slot,
            generated: vec![token],
            fills_prefix: false,
            acceptance: Acceptance::default(),
            probe: Probe::default(),
            draft_cached: 0,
        });
        true
    }

    /// Each running sequence's draft for this pass (empty where it drafts nothing; none at all
    /// when not speculating), by the configured drafter. How much each drafts is planned for
    /// the pass as a whole ([`speculative::plan`]: each sequence's acceptance against what
    /// passes of each size cost here), or with `adaptive` off, as much as it can. Drafts take
    /// what the decodes leave of the pass's token budget, never a decode's own token. On a
    /// draft model's failure, the sequences that were drafting and why.
    fn drafts(&mut self) -> Result<Vec<Draft>, (Vec<usize>, String)> {
        let spec = self.config.spec;
        if !spec.is_on() {
            // Plain decoding: nothing to plan, and nothing allocated per pass.
            return Ok(Vec::new());
        }
        let mut out = vec![Draft::default(); self.running.len()];
        let decoding: Vec<usize> = (0..self.running.len()).filter(|&i| !self.running[i].prefilling()).collect();
        let mut budget = self.config.max_batch_tokens.saturating_sub(decoding.len());
        // What each could draft: never more than it may still write, and with prompt lookup
        // what its own text offers.
        let mut candidates = Vec::with_capacity(decoding.len());
        for &i in &decoding {
            let r = &self.running[i];
            // A pass yields at most the draft plus one token: never more than asked for.
            let room = (r.req.max_tokens as usize - r.generated.len()).saturating_sub(1).min(spec.draft_max as usize);
            if spec.drafter == Drafter::Lookup {
                let started = Instant::now();
                let (lo, hi) = (spec.ngram_min as usize, spec.ngram_max as usize);
                let mut proposal = speculative::lookup(&r.req.prompt, &r.generated, lo, hi, room);
                if proposal.is_empty() && spec.shared_cache {
                    let tail: Vec<TokenId> = r.text().skip(r.text_len().saturating_sub(hi)).collect();
                    proposal = self.shared.lookup(&tail, lo, hi, room);
                }
                let ns = started.elapsed().as_nanos() as u64;
                candidates.push(Candidate { acceptance: r.acceptance.rate(), most: proposal.len(), setup_ns: 0.0 });
                out[i] = Draft { tokens: proposal, ns, shadow: None };
            } else {
                // The draft model reads what its cache has not seen before it drafts.
                let behind = r.text_len().saturating_sub(r.draft_cached + 1);
                let setup_ns = behind as f64 * self.draft_prefill_ns_per_token.or(self.target_prefill_ns_per_token).unwrap_or(0.0);
                candidates.push(Candidate { acceptance: r.acceptance.rate(), most: room, setup_ns });
            }
        }
        let mut lengths = if spec.adaptive {
            speculative::plan(&candidates, decoding.len(), &self.costs, self.draft_ns_per_token.unwrap_or(0.0))
        } else {
            candidates.iter().map(|c| c.most).collect()
        };
        // A probe is worth its cost only where drafting could pay at all, by the pass sizes
        // measured (not the hopeful guesses beyond them): on a machine where the draft model
        // is no cheaper than the target, not even drafts that all hold do.
        let draft_ns = self.draft_ns_per_token.unwrap_or(0.0);
        let measured = self.costs.largest().saturating_sub(decoding.len());
        let could_pay = |c: &Candidate| {
            let sure = Candidate { acceptance: 1.0, most: c.most.min(measured), ..*c };
            speculative::plan(&[sure], decoding.len(), &self.costs, draft_ns)[0] > 0
        };
        // Until a draft model's cost is known, it drafts two tokens deep: enough to time one
        // of its passes, where the plan's hopeful guess could cost a dozen.
        let untimed_draft = spec.adaptive && spec.drafter == Drafter::Draft && self.draft_ns_per_token.is_none();
        for (j, &i) in decoding.iter().enumerate() {
            let mut k = lengths[j].min(budget);
            if untimed_draft {
                k = k.min(2);
            }
            if spec.drafter == Drafter::Draft && spec.adaptive {
                let most = candidates[j].most;
                let r = &mut self.running[i];
                if k > 0 {
                    r.probe.planned();
                } else if most > 0 && budget > 0 && r.probe.due() && could_pay(&candidates[j]) {
                    k = 1;
                }
            }
            budget -= k;
            lengths[j] = k;
            let draft = &mut out[i];
            if k == 0 {
                draft.shadow = draft.tokens.first().copied();
            }
            draft.tokens.truncate(k);
        }
        let wants: Vec<(usize, usize)> = decoding.iter().zip(&lengths).filter(|(_, &k)| k > 0 && spec.drafter == Drafter::Draft).map(|(&i, &k)| (i, k)).collect();
        if !wants.is_empty() {
            let started = Instant::now();
            let DraftRun { drafted, token_pass_ns, catch_up_ns_per_token } = self.run_draft_model(&wants).map_err(|e| (wants.iter().map(|w| w.0).collect(), format!("draft model: {e}")))?;
            let ns = started.elapsed().as_nanos() as u64;
            if let Some(t) = token_pass_ns {
                speculative::running_average(&mut self.draft_ns_per_token, t as f64);
            }
            if let Some(t) = catch_up_ns_per_token {
                speculative::running_average(&mut self.draft_prefill_ns_per_token, t);
            }
            for ((i, _), tokens) in wants.iter().zip(drafted) {
                out[*i] = Draft { tokens, ns, shadow: None };
            }
        }
        Ok(out)
    }

    /// Runs the draft model for `wants` (running index, tokens to draft): first one pass (or
    /// more, within the token budget) that feeds each sequence the text its draft cache has
    /// not seen yet, ending with its newest token, whose output is the first drafted token;
    /// then one pass per further token for every sequence that wants it, all sequences
    /// together. The draft cache then holds each text and its drafted tokens but the last.
    ///
    /// Also what it cost, for planning: one pass of a token per sequence (drafting one more
    /// token deep), and a token of text caught up on, where such passes ran.
    fn run_draft_model(&mut self, wants: &[(usize, usize)]) -> Result<DraftRun, BackendError> {
        let draft = self.draft.as_mut().ok_or_else(|| BackendError::Step("no draft model is loaded".into()))?;
        let max_tokens = draft.info().capabilities.max_batch_tokens.max(1);
        let mut drafted: Vec<Vec<TokenId>> = vec![Vec::new(); wants.len()];
        let run = |draft: &mut Box<B>, batch: &Batch, who: &[usize], drafted: &mut [Vec<TokenId>]| -> Result<(), BackendError> {
            let outputs = draft.step(batch)?;
            if outputs.len() != who.len() || outputs.iter().any(|o| o.choices.is_empty()) {
                return Err(BackendError::Step(format!("{} outputs for {} sequences", outputs.len(), who.len())));
            }
            for (&w, o) in who.iter().zip(outputs) {
                drafted[w].push(o.choices[0].token);
            }
            Ok(())
        };
        let mut pending: Vec<(usize, usize)> = wants.iter().enumerate().map(|(w, &(i, _))| (w, self.running[i].draft_cached.min(self.running[i].text_len() - 1))).collect();
        let mut catch_up_ns_per_token = None;
        while !pending.is_empty() {
            let (mut batch, mut who, mut rest, mut budget) = (Batch::default(), Vec::new(), Vec::new(), max_tokens);
            for &(w, from) in &pending {
                let r = &self.running[wants[w].0];
                let take = (r.text_len() - from).min(budget);
                if take == 0 {
                    rest.push((w, from));
                    continue;
                }
                let done = from + take == r.text_len();
                batch.chunks.push(Chunk { slot: r.slot, pos: from as u32, tokens: r.text().skip(from).take(take).collect(), outputs: if done { Outputs::Last } else { Outputs::None }, score: Vec::new() });
                budget -= take;
                if done {
                    who.push(w);
                } else {
                    rest.push((w, from + take));
                }
            }
            let fed = batch.token_count();
            let started = Instant::now();
            run(draft, &batch, &who, &mut drafted)?;
            // A pass that caught up on enough text tells what the draft model's reading costs.
            if fed >= CATCH_UP_TIMED {
                let ns = draft.last_compute().unwrap_or_else(|| started.elapsed()).as_nanos() as f64 / fed as f64;
                catch_up_ns_per_token = Some(ns);
            }
            pending = rest;
        }
        let longest = wants.iter().map(|w| w.1).max().unwrap_or(0);
        let mut token_pass_ns = None;
        for j in 1..longest {
            let (mut batch, mut who) = (Batch::default(), Vec::new());
            for (w, &(i, k)) in wants.iter().enumerate() {
                if k > j {
                    let r = &self.running[i];
                    batch.chunks.push(Chunk { slot: r.slot, pos: (r.text_len() + j - 1) as u32, tokens: vec![drafted[w][j - 1]], outputs: Outputs::Last, score: Vec::new() });
                    who.push(w);
                }
            }
            let started = Instant::now();
            run(draft, &batch, &who, &mut drafted)?;
            // The backend's own compute time where it reports one, as for the target's passes.
            token_pass_ns = Some(draft.last_compute().unwrap_or_else(|| started.elapsed()).as_nanos() as u64);
        }
        for (w, &(i, _)) in wants.iter().enumerate() {
            let r = &mut self.running[i];
            r.draft_cached = r.text_len() + drafted[w].len() - 1;
        }
        Ok(DraftRun { drafted, token_pass_ns, catch_up_ns_per_token })
    }

    /// Build the next pass: decodes first (they are cheap and someone is waiting on each),
    /// each with its draft when speculating, then prompt tokens up to the step's budget.
    fn plan(&mut self, mut drafts: Vec<Draft>) -> Pass {
        let mut pass = Pass::default();
        let mut budget = self.config.max_batch_tokens;
        for (i, r) in self.running.iter_mut().enumerate() {
            if !r.prefilling() && budget > 0 {
                let pos = (r.text_len() - 1) as u32;
                let draft = drafts.get_mut(i).map(std::mem::take).unwrap_or_default();
                let mut tokens = vec![*r.generated.last().expect("decoding")];
                tokens.extend_from_slice(&draft.tokens);
                budget -= tokens.len();
                pass.decode_tokens += 1;
                pass.draft_tokens += draft.tokens.len() as u32;
                let outputs = if draft.tokens.is_empty() { Outputs::Last } else { Outputs::All };
                pass.batch.chunks.push(Chunk { slot: r.slot, pos, tokens, outputs, score: Vec::new() });
                pass.batch.top_logprobs = pass.batch.top_logprobs.max(r.req.top_logprobs);
                pass.members.push(Member { index: i, draft });
            }
        }
        let mut prefill_budget = match self.config.policy {
            Policy::Chunked => self.config.chunk_tokens.min(budget),
            _ => budget,
        };
        for (i, r) in self.running.iter().enumerate() {
            if r.prefilling() && prefill_budget > 0 {
                // A request computing the shared prefix writes it into the cache slot, and
                // stops there: its own slot gets a copy before its suffix is computed.
                let (end, slot) = match (r.fills_prefix, self.prefix.slot) {
                    (true, Some(cache)) => (r.req.prefix_tokens as usize, cache),
                    _ => (r.req.prompt.len(), r.slot),
                };
                let mut take = (end - r.prefilled).min(prefill_budget);
                // A scored prompt's unscored head goes in passes of its own that return
                // nothing: every row of a pass that returns rows costs a vocabulary's logits.
                if let Some(s) = &r.req.score {
                    let first = s.rows(r.req.prompt.len()).start;
                    if r.prefilled < first && first < r.prefilled + take {
                        take = first - r.prefilled;
                    }
                }
                let done = r.prefilled + take == r.req.prompt.len();
                let span = r.prefilled..r.prefilled + take;
                let mut chunk = Chunk { slot, pos: span.start as u32, tokens: r.req.prompt[span.clone()].to_vec(), outputs: if done { Outputs::Last } else { Outputs::None }, score: Vec::new() };
                if let Some(s) = &r.req.score {
                    let rows = s.rows(r.req.prompt.len());
                    if rows.start < span.end && span.start < rows.end {
                        chunk.outputs = Outputs::All;
                        chunk.score = span.map(|p| if rows.contains(&p) { s.ids.get(p - rows.start).cloned().unwrap_or_default() } else { Vec::new() }).collect();
                        pass.batch.top_logprobs = pass.batch.top_logprobs.max(s.top);
                    }
                }
                pass.batch.chunks.push(chunk);
                pass.batch.top_logprobs = pass.batch.top_logprobs.max(r.req.top_logprobs);
                pass.members.push(Member { index: i, draft: Draft::default() });
                prefill_budget -= take;
                pass.prefill_tokens += take as u32;
            }
        }
        pass
    }

    /// Admit what the policy allows and run one forward pass. Does nothing when idle.
    pub fn step(&mut self, sink: &mut dyn FnMut(SchedEvent)) {
        self.admit(sink);
        let drafts = match self.drafts() {
            Ok(drafts) => drafts,
            Err((failed, error)) => {
                // The draft model's caches of these sequences are in an unknown state.
                self.fail_all(failed, &error, sink);
                return;
            }
        };
        let Pass { batch, members, prefill_tokens, decode_tokens, draft_tokens } = self.plan(drafts);
        if batch.chunks.is_empty() {
            return;
        }
        self.steps += 1;
        let step = self.steps;
        let t_start = self.now();
        let result = self.backend.step(&batch);
        let t_end = self.now();
        let compute = result.as_ref().ok().and(self.backend.last_compute()).map(|d| d.as_nanos() as u64);
        sink(SchedEvent::Step { step, seqs: batch.chunks.len() as u32, prefill_tokens, decode_tokens, draft_tokens, t_start, t_end, compute });
        let pass_ns = compute.unwrap_or(t_end - t_start);
        if result.is_ok() && prefill_tokens == 0 {
            self.costs.observe((decode_tokens + draft_tokens) as usize, pass_ns);
        } else if result.is_ok() && decode_tokens == 0 && prefill_tokens as usize >= CATCH_UP_TIMED {
            speculative::running_average(&mut self.target_prefill_ns_per_token, pass_ns as f64 / f64::from(prefill_tokens));
        }

        let outputs = match result {
            Ok(outputs) => outputs,
            Err(e) => {
                // A failed pass leaves every member's cache in an unknown state: fail them all.
                self.fail_all(members.iter().map(|m| m.index).collect(), &format!("backend step failed: {e}"), sink);
                return;
            }
        };
        let mut outputs = outputs.into_iter();
        let mut finished = Vec::new();
        for (chunk, m) in batch.chunks.iter().zip(&members) {
            let i = m.index;
            let r = &mut self.running[i];
            let prefill = r.prefilling();
            if prefill {
                r.prefilled += chunk.tokens.len();
                sink(SchedEvent::Prefill { id: r.req.id, step, tokens: chunk.tokens.len() as u32, t_start, t_end });
            }
            if chunk.outputs == Outputs::None {
                continue;
            }
            let scoring = prefill && chunk.outputs == Outputs::All;
            let wanted = if scoring { chunk.tokens.len() } else { m.draft.tokens.len() + 1 };
            let mut choices: Vec<Choice> = match outputs.next() {
                Some(o) if o.choices.len() == wanted => o.choices,
                _ => {
                    sink(SchedEvent::Failed { id: r.req.id, error: "backend returned no token for this sequence".into() });
                    finished.push(i);
                    continue;
                }
            };
            if scoring {
                // A scored prompt chunk: its scored rows go out as they are; the row of the
                // prompt's last position, when this chunk holds it, is the first token.
                let last = if r.prefilling() { None } else { choices.pop() };
                let rows = r.req.score.as_ref().map_or(0..0, |s| s.rows(r.req.prompt.len()));
                let pos = chunk.pos as usize;
                let (from, to) = (rows.start.max(pos), rows.end.min(pos + choices.len()));
                if from < to {
                    let mut rows: Vec<Choice> = choices.drain(from - pos..to - pos).collect();
                    if let Some(s) = &r.req.score {
                        rows.iter_mut().for_each(|row| s.keep(row));
                    }
                    sink(SchedEvent::Scored { id: r.req.id, pos: from as u32, rows });
                }
                match last {
                    Some(c) => choices = vec![c],
                    None => continue,
                }
            }
            // The target agrees with the draft up to its first different choice; that choice
            // (or, when every drafted token held, the one after them) is the target's own.
            let drafted = &m.draft.tokens;
            let accepted = drafted.iter().zip(&choices).take_while(|(d, c)| **d == c.token).count();
            if !drafted.is_empty() {
                sink(SchedEvent::Verified { id: r.req.id, step, drafted: drafted.len() as u32, accepted: accepted as u32, draft_ns: m.draft.ns });
                r.acceptance.record(drafted.len() as u32, accepted as u32);
            } else if let Some(shadow) = m.draft.shadow {
                r.acceptance.record(1, u32::from(shadow == choices[0].token));
            }
            let mut done = false;
            for (k, choice) in choices.into_iter().take(accepted + 1).enumerate() {
                let index = r.generated.len() as u32;
                r.generated.push(choice.token);
                let mut top = choice.top;
                top.truncate(r.req.top_logprobs);
                let stop = r.req.stop_tokens.contains(&choice.token);
                let ends = stop || r.generated.len() >= r.req.max_tokens as usize;
                if let (Handoff::Out { route }, false) = (&r.req.handoff, ends) {
                    // The decode worker reports this token once the state has reached it.
                    let t_start = self.epoch.elapsed().as_nanos() as u64;
                    let positions = r.req.prompt.len() as u32;
                    let sent = self.backend.save_state(r.slot).map_err(|e| e.to_string()).and_then(|payload| {
                        let framed = handoff::frame(positions, &payload);
                        handoff::put(route, r.req.id, &framed).map(|blob| (blob, framed.len() as u64)).map_err(|e| e.to_string())
                    });
                    match sent {
                        Ok((blob, bytes)) => {
                            let t_end = self.epoch.elapsed().as_nanos() as u64;
                            sink(SchedEvent::HandedOff { id: r.req.id, step, token: choice.token, top, bytes, t_start, t_end, state: Some(blob) });
                        }
                        Err(why) => sink(SchedEvent::Failed { id: r.req.id, error: format!("saving the sequence's state to hand it over: {why}") }),
                    }
                    finished.push(i);
                    done = true;
                    break;
                }
                sink(SchedEvent::Token { id: r.req.id, step, index, token: choice.token, t: t_end, top, drafted: k < accepted });
                if ends {
                    let reason = if stop { FinishReason::Stop } else { FinishReason::Length };
                    sink(SchedEvent::Finished { id: r.req.id, reason, t: t_end });
                    finished.push(i);
                    done = true;
                    break;
                }
            }
            // Rejected drafts leave the cache: it holds exactly what plain decoding would
            // have put there (everything but the newest token).
            if !done && accepted < drafted.len() {
                let keep = (r.text_len() - 1) as u32;
                if let Err(e) = self.backend.truncate(r.slot, keep) {
                    sink(SchedEvent::Failed { id: r.req.id, error: format!("speculative decoding: {e}") });
                    finished.push(i);
                    continue;
                }
            }
            // And the draft model's: it drafted past the first rejected token (or fed all but
            // the last drafted one), and keeps only the text both models now agree on.
            let model_drafted = self.config.spec.drafter == Drafter::Draft && !drafted.is_empty();
            if let Some(draft) = self.draft.as_mut().filter(|_| model_drafted && !done) {
                let agreed = chunk.pos as usize + 1 + accepted.min(drafted.len() - 1);
                if agreed < r.draft_cached {
                    r.draft_cached = agreed;
                    if let Err(e) = draft.truncate(r.slot, agreed as u32) {
                        sink(SchedEvent::Failed { id: r.req.id, error: format!("speculative decoding: draft model: {e}") });
                        finished.push(i);
                    }
                }
            }
        }
        // A request that has just computed the shared prefix into the cache takes a copy.
        for i in 0..self.running.len() {
            let r = &self.running[i];
            if !r.fills_prefix || r.prefilled < r.req.prefix_tokens as usize || finished.contains(&i) {
                continue;
            }
            let (id, slot, p) = (r.req.id, r.slot, r.req.prefix_tokens);
            let cache = self.prefix.slot.expect("filling implies a cache slot");
            self.running[i].fills_prefix = false;
            self.prefix.filling = None;
            match self.backend.copy_prefix(cache, slot, p) {
                Ok(()) => self.prefix.ready = Some(self.running[i].req.prompt[..p as usize].to_vec()),
                Err(e) => {
                    self.backend.clear(cache);
                    sink(SchedEvent::Failed { id, error: format!("prefix cache: {e}") });
                    finished.push(i);
                }
            }
        }
        finished.sort_unstable_by(|a, b| b.cmp(a));
        for i in finished {
            let r = self.running.swap_remove(i);
            self.retire(r);
        }
        if self.running.is_empty() {
            self.close_static_batch();
        }
    }

    /// Fail and retire the running requests at these indices.
    fn fail_all(&mut self, mut failed: Vec<usize>, error: &str, sink: &mut dyn FnMut(SchedEvent)) {
        failed.sort_unstable_by(|a, b| b.cmp(a));
        for i in failed {
            let r = self.running.swap_remove(i);
            sink(SchedEvent::Failed { id: r.req.id, error: error.to_string() });
            self.retire(r);
        }
        self.close_static_batch();
    }

    fn close_static_batch(&mut self) {
        if self.running.is_empty() {
            self.static_batch_open = false;
        }
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
