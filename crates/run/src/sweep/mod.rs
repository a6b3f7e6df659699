//! A sweep: the grid of backends × policies × prompt lengths × concurrencies ×
//! output lengths (and, for serving, arrival rates and prefix caching), measured point by
//! point, written as it goes.
//!
//! One [`SweepPlan`] says everything about a sweep, whoever builds it (`lx sweep`, the app, a
//! demo); it is validated once, against the model, and turned into [`SweepPoint`]s in the
//! order they run. Ordered so each backend's model loads once (a policy change is a message
//! to the worker, not a reload). The run file is rewritten atomically after every point, so
//! a crash, a kill or Ctrl-C never loses a completed measurement. If a worker dies, its
//! point records why and the next point starts a fresh worker.

pub mod fidelity;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use lx_engine::backend::{KvTypes, LoadSpec, TokenId};
use lx_client::traffic::{run_point, Arrivals, Draw, Observer, Traffic, PointRun, PointSpec, RunControl};
use lx_results::printers::Printer;
use lx_results::results::{PointResult, RunFile, Slo};
use lx_engine::split::Split;
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_engine::speculative::{Drafter, Speculation};
use lx_format::workload::{PromptBuilder, PromptText};
use lx_engine::invalid::Invalid;
use lx_client::target::{Spawner, Target};

/// A prompt or output length in tokens: fixed (`64`), or drawn for each request uniformly
/// from a range (`64..512`, with the sweep's seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Length {
    /// The low end of a range; `None`: the length is fixed at `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// The fixed length, or the high end of a range.
    pub to: u32,
}

impl Length {
    pub fn fixed(n: u32) -> Length {
        Length { from: None, to: n }
    }

    /// A length as a request can have it: at least 1 token (the BOS token counts), and a
    /// range's low end at most its high end. The one place that rule is written.
    pub fn new(from: Option<u32>, to: u32) -> Result<Length, String> {
        let l = Length { from, to };
        if to == 0 || from == Some(0) {
            return Err(format!("{l}: a length is at least 1 token"));
        }
        if from.is_some_and(|f| f > to) {
            return Err(format!("{l}: a range's low end comes first"));
        }
        Ok(l)
    }

    /// The shortest length a request can get.
    pub fn shortest(&self) -> u32 {
        self.from.unwrap_or(self.to)
    }
}

impl std::str::FromStr for Length {
    type Err = String;
    fn from_str(s: &str) -> Result<Length, String> {
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("'{s}' is not a whole number or a range A..B"));
        match s.split_once("..") {
            Some((a, b)) => Length::new(Some(num(a)?), num(b.strip_prefix('=').unwrap_or(b))?),
            None => Length::new(None, num(s)?),
        }
    }
}

/// Lengths as `lx sweep` and the app's sweep form take them: whole numbers or ranges `A..B`,
/// separated by commas or spaces, each kept once in the order given.
pub fn parse_lengths(text: &str) -> Result<Vec<Length>, String> {
    let mut out: Vec<Length> = Vec::new();
    for piece in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()) {
        let l: Length = piece.parse()?;
        if !out.contains(&l) {
            out.push(l);
        }
    }
    if out.is_empty() {
        return Err("give at least one value".into());
    }
    Ok(out)
}

impl std::fmt::Display for Length {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.from {
            Some(from) => write!(f, "{from}..{}", self.to),
            None => write!(f, "{}", self.to),
        }
    }
}

/// Everything about a sweep. Every list is a dimension of the grid. What is left out when
/// one is read (the app's request, an older run file) takes `lx sweep`'s default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct SweepPlan {
    pub backends: Vec<String>,
    /// Those of `backends` that are servers (OpenAI-compatible targets), which schedule
    /// requests themselves: measured once per point, not once per policy or cache setting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    pub policies: Vec<Policy>,
    pub prompt_tokens: Vec<Length>,
    pub concurrency: Vec<usize>,
    pub max_tokens: Vec<Length>,
    /// Tokens already in the context before each measured prompt (`--depth`, as
    /// llama-bench's `-d`): filled once, cached, and copied into every request, so TTFT is the
    /// prompt's at that depth and decode attends over it. 0: an empty context.
    pub depths: Vec<u32>,
    /// Open-loop Poisson arrival rates (requests/s); empty: closed loop.
    pub rates: Vec<f64>,
    /// Prefix caching off and/or on.
    pub prefix_cache: Vec<bool>,
    /// Speculative decoding's drafters: `none` (plain decoding), `lookup` and/or `draft`.
    pub spec: Vec<Drafter>,
    /// The drafters' settings (n-gram lengths, draft length; its own drafter is ignored).
    pub spec_settings: Speculation,
    /// The `draft` drafter's model; `None` until the sweep is started, which finds (or
    /// makes) one from the model unless it is named.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(type = "string | null")]
    pub draft_model: Option<PathBuf>,
    /// The KV cache's types (llama.cpp only), for the whole sweep.
    #[serde(skip_serializing_if = "KvTypes::is_default")]
    pub kv: KvTypes,
    /// What the prompts ask for: prose to continue, or a passage to copy.
    pub prompts: PromptText,
    /// Measured requests per point.
    pub requests: usize,
    /// Unmeasured requests before each point; `None`: one per client of the busiest point
    /// ([`lx_engine::defaults::sweep_warmup`]).
    pub warmup: Option<usize>,
    /// Each point measured this many times: the whole grid once per repetition, backend by
    /// backend, so that the machine's drift spreads over every point alike.
    pub repetitions: usize,
    /// Compute threads; 0 means physical cores.
    pub threads: usize,
    pub stop_at_eos: bool,
    /// `chunked` policy: prompt tokens per pass.
    pub chunk_tokens: usize,
    pub gpu_layers: Option<u32>,
    /// Open loop: most requests in flight from the client side (`None`: no cap).
    pub max_in_flight: Option<usize>,
    /// Seed of arrivals and drawn lengths.
    pub seed: u64,
    /// Send requests for at most this long per point (requests still cap it).
    pub duration_s: Option<f64>,
    /// Every prompt starts with the same this many tokens (0: no shared prefix).
    pub prefix_tokens: u32,
    /// Most sequences per pass (the static batch size B); default: the point's concurrency.
    pub max_batch_seqs: Option<usize>,
    /// Most tokens per pass; default: room for every slot's longest prompt, within 512..16384.
    pub max_batch_tokens: Option<usize>,
    pub slo: Slo,
    /// `disaggregated`: the two workers' threads and devices, and the states' path.
    #[serde(skip_serializing_if = "Split::is_default")]
    pub split: Split,
    /// Before the points, score this many chunks of the fidelity text with every backend
    /// and setting they run, against the reference (`--fidelity`); `None`: not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fidelity_chunks: Option<usize>,
}

impl Default for SweepPlan {
    /// `lx sweep`'s defaults, on the llama.cpp backend.
    fn default() -> Self {
        SweepPlan {
            backends: vec![lx_engine::kind::BackendKind::DEFAULT.name().into()],
            servers: Vec::new(),
            policies: vec![Policy::Continuous],
            prompt_tokens: [64, 256, 1024].map(Length::fixed).to_vec(),
            concurrency: vec![1, 4],
            max_tokens: vec![Length::fixed(64)],
            depths: vec![0],
            rates: Vec::new(),
            prefix_cache: vec![false],
            spec: vec![Drafter::None],
            spec_settings: Speculation::default(),
            draft_model: None,
            kv: KvTypes::default(),
            prompts: PromptText::Prose,
            requests: 8,
            warmup: None,
            repetitions: 1,
            threads: 0,
            stop_at_eos: false,
            chunk_tokens: lx_engine::defaults::CHUNK_TOKENS,
            gpu_layers: None,
            max_in_flight: None,
            seed: 0,
            duration_s: None,
            prefix_tokens: 0,
            max_batch_seqs: None,
            max_batch_tokens: None,
            slo: Slo::default(),
            split: Split::default(),
            fidelity_chunks: None,
        }
    }
}

/// One point of a sweep, with its traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    pub backend: String,
    pub policy: Policy,
    pub spec: PointSpec,
    pub traffic: Traffic,
    /// Which measurement of the point (1-based) when the sweep repeats points.
    pub repetition: Option<u32>,
}

impl SweepPlan {
    /// Checks the plan, against the model's context when it is known (`None`: everything
    /// that does not depend on the model, so a typo is reported before a model loads).
    pub fn validate(&self, model_context: Option<usize>) -> Result<(), Invalid> {
        let nonempty = |field: &'static str, flag: &str, len: usize| if len == 0 { Err(Invalid::new(field, format!("{flag}: give at least one value"))) } else { Ok(()) };
        nonempty("backends", "--backend", self.backends.len())?;
        nonempty("policies", "--policy", self.policies.len())?;
        nonempty("prompt_tokens", "--prompt-tokens", self.prompt_tokens.len())?;
        nonempty("concurrency", "--concurrency", self.concurrency.len())?;
        nonempty("max_tokens", "--max-tokens", self.max_tokens.len())?;
        nonempty("prefix_cache", "--prefix-cache: give on, off or both;", self.prefix_cache.len())?;
        nonempty("depths", "--depth", self.depths.len())?;
        nonempty("spec", "--spec", self.spec.len())?;
        for b in &self.backends {
            self.kv.for_backend(b).map_err(|why| Invalid::new("kv", why))?;
        }
        if self.spec.iter().any(|d| *d != Drafter::None) {
            Speculation { drafter: Drafter::Lookup, ..self.spec_settings }.validate()?;
        }
        if self.depths.iter().any(|&d| d > 0) && (self.prefix_tokens > 0 || self.prefix_cache.contains(&true)) {
            return Err(Invalid::new("depths", "--depth caches the context it fills itself: give it without --prefix-tokens and --prefix-cache"));
        }
        let at_least_1 = |field: &'static str, flag: &str, v: usize| if v == 0 { Err(Invalid::new(field, format!("{flag} must be at least 1"))) } else { Ok(()) };
        if self.concurrency.contains(&0) {
            return Err(Invalid::new("concurrency", "--concurrency must be at least 1"));
        }
        at_least_1("requests", "--requests", self.requests)?;
        at_least_1("repetitions", "--repetitions", self.repetitions)?;
        at_least_1("chunk_tokens", "--chunk-tokens", self.chunk_tokens)?;
        at_least_1("max_in_flight", "--max-concurrency", self.max_in_flight.unwrap_or(1))?;
        at_least_1("max_batch_seqs", "--max-batch (sequences per pass)", self.max_batch_seqs.unwrap_or(1))?;
        at_least_1("max_batch_tokens", "--max-batch-tokens", self.max_batch_tokens.unwrap_or(1))?;
        at_least_1("fidelity_chunks", "--fidelity (chunks of the text)", self.fidelity_chunks.unwrap_or(1))?;
        for (field, flag, lengths) in [("prompt_tokens", "--prompt-tokens", &self.prompt_tokens), ("max_tokens", "--max-tokens", &self.max_tokens)] {
            for l in lengths {
                Length::new(l.from, l.to).map_err(|why| Invalid::new(field, format!("{flag} {why}")))?;
            }
        }
        for &r in &self.rates {
            if !(r.is_finite() && r > 0.0) {
                return Err(Invalid::new("rates", format!("--rate must be a positive number of requests per second, not {r}")));
            }
        }
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d > 0.0) {
                return Err(Invalid::new("duration_s", format!("--duration must be a positive number of seconds, not {d}")));
            }
        }
        for (flag, v) in [("--slo-ttft-ms", self.slo.ttft_ms), ("--slo-decode-tps", self.slo.decode_tps)] {
            if let Some(x) = v.filter(|x| !(x.is_finite() && *x > 0.0)) {
                return Err(Invalid::new("slo", format!("{flag} must be a positive number, not {x}")));
            }
        }
        let p = self.prefix_tokens as usize;
        if p > 0 {
            if let Some(ctx) = model_context.filter(|&ctx| p >= ctx) {
                return Err(Invalid::new("prefix_tokens", format!("--prefix-tokens {p} is longer than the model's context of {ctx} tokens")));
            }
            let shortest = self.prompt_tokens.iter().map(Length::shortest).min().unwrap_or(0) as usize;
            if p >= shortest {
                return Err(Invalid::new(
                    "prefix_tokens",
                    format!("--prefix-tokens {p} must be shorter than every prompt (the shortest is {shortest} tokens): --prompt-tokens counts the prefix too"),
                ));
            }
        } else if self.prefix_cache.contains(&true) {
            return Err(Invalid::new("prefix_cache", "--prefix-cache on needs a shared prefix: give --prefix-tokens"));
        }
        let longest = self.ctx_per_slot();
        if let Some(ctx) = model_context.filter(|&ctx| longest > ctx) {
            return Err(Invalid::new("prompt_tokens", format!("depth + prompt tokens + max tokens = {longest} exceeds the model's context of {ctx} tokens")));
        }
        Ok(())
    }

    /// Whether any backend runs in a worker on this machine (not a server), so that this
    /// machine's limits bound its figures.
    pub fn has_workers(&self) -> bool {
        self.backends.iter().any(|b| !self.servers.contains(b))
    }

    /// Points with their loads, in the order they run: backend outermost (one load each),
    /// then repetition, policy, prefix caching, drafter, arrival rate, concurrency, depth, prompt and
    /// output length. A server schedules requests itself: it is measured once per point, not once
    /// per policy or prefix-cache setting.
    /// Unmeasured requests before each point.
    pub fn warmup(&self) -> usize {
        self.warmup.unwrap_or_else(|| lx_engine::defaults::sweep_warmup(&self.concurrency))
    }

    pub fn points(&self) -> Vec<SweepPoint> {
        let arrivals: Vec<Arrivals> = if self.rates.is_empty() {
            vec![Arrivals::Closed]
        } else {
            self.rates.iter().map(|&rate| Arrivals::Poisson { rate }).collect()
        };
        let repetitions = self.repetitions.max(1) as u32;
        let mut out = Vec::new();
        for b in &self.backends {
            let server = self.servers.contains(b);
            let policies = if server { &self.policies[..self.policies.len().min(1)] } else { &self.policies[..] };
            let caching = if server { &[false][..] } else { &self.prefix_cache[..] };
            // Drafting and verifying is our scheduler's; a server decodes as it was started.
            let drafters = if server { &[Drafter::None][..] } else { &self.spec[..] };
            for repetition in (1..=repetitions).map(|r| (repetitions > 1).then_some(r)) {
                for &policy in policies {
                    for (&prefix_cache, &drafter) in caching.iter().flat_map(|c| std::iter::repeat(c).zip(drafters)) {
                        for arrivals in &arrivals {
                            for &concurrency in &self.concurrency {
                                for (&depth, prompt) in self.depths.iter().flat_map(|d| std::iter::repeat(d).zip(&self.prompt_tokens)) {
                                    for output in &self.max_tokens {
                                        let spec = PointSpec {
                                            prompt_tokens: depth + prompt.to,
                                            max_tokens: output.to,
                                            concurrency,
                                            requests: self.requests,
                                            warmup: self.warmup(),
                                            stop_at_eos: self.stop_at_eos,
                                            top_logprobs: 0,
                                        };
                                        let traffic = Traffic {
                                            arrivals: arrivals.clone(),
                                            max_in_flight: self.max_in_flight,
                                            prompt_tokens_from: prompt.from.map(|f| depth + f),
                                            max_tokens_from: output.from,
                                            seed: self.seed,
                                            duration_s: self.duration_s,
                                            prefix_tokens: if depth > 0 { depth } else { self.prefix_tokens },
                                            prefix_cache: prefix_cache || depth > 0,
                                            depth,
                                            spec: Speculation { drafter, ..self.spec_settings },
                                            prompts: self.prompts,
                                            kv: self.kv,
                                        };
                                        out.push(SweepPoint { backend: b.clone(), policy, spec, traffic, repetition });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The load spec for a list of points: slots for the largest concurrency (and one for
    /// the prefix cache where a point uses it), context for the longest prompt + output.
    pub fn load_spec_for(&self, model_path: PathBuf, points: &[SweepPoint]) -> LoadSpec {
        let mut slots = points.iter().map(|p| p.spec.concurrency).max().unwrap_or(1);
        slots = slots.max(self.max_batch_seqs.unwrap_or(0));
        let longest = |p: &SweepPoint| match &p.traffic.arrivals {
            Arrivals::Script { requests } => requests.iter().map(|r| (r.prompt_tokens, r.max_tokens)).fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1))),
            _ => (p.spec.prompt_tokens, p.spec.max_tokens),
        };
        let ctx_per_slot = points.iter().map(longest).map(|(a, b)| (a + b) as usize).max().unwrap_or(1);
        let longest_prompt = points.iter().map(|p| longest(p).0 as usize).max().unwrap_or(1);
        let max_batch_tokens = self.max_batch_tokens.unwrap_or(lx_engine::scheduler::batch_tokens_for(longest_prompt, slots));
        if points.iter().any(|p| p.traffic.prefix_cache) {
            slots += 1;
        }
        let drafts = points.iter().any(|p| p.traffic.spec.drafter == Drafter::Draft);
        let draft_model = if drafts { self.draft_model.clone() } else { None };
        // The KV cache's types are each point's own (its traffic's): the runner loads them.
        LoadSpec { model_path, threads: self.threads, slots, ctx_per_slot, max_batch_tokens, gpu_layers: self.gpu_layers, draft_model, kv: KvTypes::default(), settings: Default::default() }
    }

    /// Context each sequence needs: the deepest depth, the longest prompt and the longest
    /// output.
    pub fn ctx_per_slot(&self) -> usize {
        let d = self.depths.iter().max().copied().unwrap_or(0) as usize;
        let p = self.prompt_tokens.iter().map(|l| l.to).max().unwrap_or(0) as usize;
        let m = self.max_tokens.iter().map(|l| l.to).max().unwrap_or(0) as usize;
        d + p + m
    }

    fn scheduler(&self, policy: Policy, concurrency: usize, max_batch_tokens: usize) -> SchedulerConfig {
        let mut s = SchedulerConfig::new(policy, concurrency, max_batch_tokens);
        s.chunk_tokens = self.chunk_tokens;
        s.split = self.split;
        s
    }
}

/// Everything a sweep needs from its caller.
pub struct SweepContext<'a> {
    pub model_path: PathBuf,
    /// The model file as it was when it was opened: a run stops measuring once it differs.
    pub model_stamp: lx_engine::stamp::FileStamp,
    /// Exact-length prompts of the model's tokenizer.
    pub prompts: &'a PromptBuilder,
    pub stop_tokens: Vec<TokenId>,
    /// Starts the target for each backend name (a worker process, or a server's client).
    pub spawn: Spawner,
    /// Where to keep the run file up to date (atomically, after every point).
    pub out: Option<PathBuf>,
    pub control: RunControl,
    /// Makes the fidelity run of a plan that asks for one (`fidelity_chunks`): its text
    /// and reference, scoring that many chunks; the entries are the points'.
    pub fidelity: Option<FidelityBasis>,
}

/// See [`SweepContext::fidelity`].
pub type FidelityBasis = std::sync::Arc<dyn Fn(usize) -> Result<crate::fidelity::Job, String> + Send + Sync>;

/// Sees a sweep progress.
pub trait SweepObserver: Observer {
    fn loading(&mut self, _backend: &str) {}
    fn loaded(&mut self, _backend: &str, _info: &lx_engine::backend::BackendInfo, _load_ms: f64) {}
    fn point_started(&mut self, _index: usize, _total: usize, _backend: &str, _policy: Policy, _spec: &PointSpec) {}
    fn point_done(&mut self, _point: &PointResult) {}
    /// This machine's limits are being measured for the ceilings (a first run on a machine
    /// and build: a few seconds).
    fn probing(&mut self) {}
    /// What the fidelity run before the points measures now (`--fidelity`).
    fn fidelity(&mut self, _what: &str) {}
    /// What the ceilings are computed from, or why this run has none (it is measured all
    /// the same).
    fn ceilings(&mut self, _basis: Result<(&lx_machine::probe::Probe, &lx_machine::roofline::ModelCost), &anyhow::Error>) {}
    /// The run file could not be updated (a full disk): measuring goes on, and the file is
    /// written again after the next point.
    fn run_file_unsaved(&mut self, _why: &str) {}
}

/// Why a sweep ended without all it measured kept. A point that fails does not end a
/// sweep: it is a row with its errors.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the table could not be printed: {0}")]
    Print(#[from] std::io::Error),
    #[error("the run file {} could not be written ({why}); it holds the first {kept} of the {total} points, and the table above has them all", .path.display())]
    Unsaved { path: PathBuf, why: String, kept: usize, total: usize },
    /// A search's trial measured nothing (the worker could not load, or died at once).
    #[error("a trial measured nothing: {0}")]
    Trial(String),
    /// What was asked cannot be measured this way; nothing ran.
    #[error("{0}")]
    Refused(String),
}

/// Run the sweep, filling `run` and printing rows as points finish. Returns the number
/// of points that had errors (0 means a clean run).
pub fn run_sweep(
    plan: &SweepPlan,
    ctx: &SweepContext<'_>,
    run: &mut RunFile,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
) -> Result<usize, SweepError> {
    run_points(plan, plan.points(), ctx, run, printer, observer)
}

/// Run a list of points (a sweep's grid, or a demo's hand-made list) on workers loaded
/// once per backend and KV cache type (consecutive points share one); `plan` gives threads,
/// chunk size, batch limits and SLOs. Returns the number of points that had errors.
pub fn run_points(
    plan: &SweepPlan,
    points: Vec<SweepPoint>,
    ctx: &SweepContext<'_>,
    run: &mut RunFile,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
) -> Result<usize, SweepError> {
    if let (Some(chunks), None) = (plan.fidelity_chunks, &run.fidelity) {
        run.fidelity = Some(measure_fidelity(plan, chunks, &points, ctx, observer)?);
    }
    printer.header(run)?;
    let load = plan.load_spec_for(ctx.model_path.clone(), &points);
    let mut session = Session::new(load);
    let failed = session.run(plan, points, ctx, run, printer, observer)?;
    drop(session);
    printer.footer(run)?;
    Ok(failed)
}

/// The fidelity run of `points`' backends and settings, `chunks` chunks of the text each.
pub fn measure_fidelity(plan: &SweepPlan, chunks: usize, points: &[SweepPoint], ctx: &SweepContext<'_>, observer: &mut dyn SweepObserver) -> Result<lx_results::studies::fidelity::FidelityRun, SweepError> {
    struct Status<'o>(&'o mut dyn SweepObserver);
    impl crate::fidelity::Watch for Status<'_> {
        fn status(&mut self, what: &str) {
            self.0.fidelity(what);
        }
        fn measured(&mut self, _: &lx_results::studies::fidelity::Candidate) {}
    }
    let basis = ctx.fidelity.as_ref().ok_or_else(|| SweepError::Refused("fidelity cannot be measured here (no reference for this target)".into()))?;
    let mut basis = basis(chunks).map_err(SweepError::Refused)?;
    basis.control = ctx.control.clone();
    let entries = crate::sweep::fidelity::entries(points, plan, &ctx.spawn, &ctx.model_path);
    crate::sweep::fidelity::measure(&basis, entries, plan.threads, &mut Status(observer)).map_err(|e| SweepError::Refused(format!("fidelity: {e}")))
}

/// Workers and prompts that last from one batch of points to the next: a search that
/// decides its next point from the last one's figures keeps its worker loaded, and never
/// sends a prompt twice (a server's prompt cache would answer a repeat).
pub struct Session {
    load: LoadSpec,
    /// The loaded target: its backend, cache types, and the split when it is two workers.
    worker: Option<(String, KvTypes, Option<Split>, Box<dyn Target>)>,
    /// A backend that cannot load the model will not load it for the next point either.
    load_failures: std::collections::HashMap<String, String>,
    prompts_sent: std::cell::Cell<usize>,
    prompts_for: Option<String>,
    model_changed: Option<String>,
    sensors: Option<lx_machine::sensors::Sensors>,
}

impl Session {
    /// Workers are loaded with `load` (slots and context for the largest point to come).
    pub fn new(load: LoadSpec) -> Session {
        Session {
            load,
            worker: None,
            load_failures: Default::default(),
            prompts_sent: std::cell::Cell::new(0),
            prompts_for: None,
            model_changed: None,
            sensors: Some(lx_machine::sensors::Sensors::open()),
        }
    }

    /// Run `points`, adding each to `run` (written after every point) and printing its row.
    /// Returns the number of points that had errors.
    pub fn run(
        &mut self,
        plan: &SweepPlan,
        points: Vec<SweepPoint>,
        ctx: &SweepContext<'_>,
        run: &mut RunFile,
        printer: &mut dyn Printer,
        observer: &mut dyn SweepObserver,
    ) -> Result<usize, SweepError> {
        let total = points.len();
        let Session { load: load_spec, worker, load_failures, prompts_sent, prompts_for, model_changed, sensors } = self;
        let load_spec = &*load_spec;
        let prompts_sent = &*prompts_sent;
        let mut failed_points = 0;
        let mut saver = RunFileSaver::new(ctx.out.as_deref());
        for (index, point) in points.into_iter().enumerate() {
            let SweepPoint { backend, policy, spec: point, traffic, repetition } = point;
            if ctx.control.stop.load(std::sync::atomic::Ordering::Relaxed) {
                run.stopped = true;
                break;
            }
            observer.point_started(index, total, &backend, policy, &point);
            let mut config = plan.scheduler(policy, plan.max_batch_seqs.unwrap_or(point.concurrency), load_spec.max_batch_tokens);
            config.prefix_cache = traffic.prefix_cache;
            config.spec = traffic.spec;
            let fail = |why: String| {
                let mut result = failed_point(&backend, policy, &point, why).with_traffic(&traffic);
                result.judge(plan.slo);
                result.repetition = repetition;
                result
            };
            let split = (policy == Policy::Disaggregated).then_some(config.split);
            // Reuse the worker for the same backend, cache types and split; otherwise (a new backend or
            // cache type, or it died) start one.
            let reuse = match worker.as_mut() {
                Some((b, kv, sp, w)) => *b == backend && *kv == traffic.kv && *sp == split && !w.is_gone(),
                None => false,
            };
            let loads = if traffic.kv.is_default() { backend.clone() } else { format!("{backend} (KV cache {})", traffic.kv.label()) };
            if model_changed.is_none() {
                *model_changed = ctx.model_stamp.changed(&ctx.model_path).map(|what| {
                    *worker = None;
                    format!(
                        "the model file {} changed during the run ({what}): this point and the rest are not measured, as they would not be of the model the run names; run again to measure the new file",
                        ctx.model_path.display()
                    )
                });
            }
            if let Some(why) = model_changed.as_ref().or(load_failures.get(&loads)) {
                failed_points += 1;
                finish_point(run, fail(why.clone()), printer, observer, &mut saver)?;
                continue;
            }
            if !reuse {
                *worker = None; // shut the previous one down before loading the next
                observer.loading(&backend);
                match (ctx.spawn)(&backend, &LoadSpec { kv: traffic.kv, ..load_spec.clone() }, &config) {
                    Ok(w) => {
                        observer.loaded(&backend, w.info(), w.load_ms());
                        if !run.backends.iter().any(|b| b.name == w.info().name && b.version == w.info().version && b.settings == w.info().settings) {
                            run.backends.push(w.info().clone());
                        }
                        *worker = Some((backend.clone(), traffic.kv, split, w));
                    }
                    Err(e) => {
                        let why = format!("{loads}: {e}");
                        if matches!(e, lx_client::target::TargetError::Load(_)) {
                            load_failures.insert(loads.clone(), why.clone());
                        }
                        failed_points += 1;
                        finish_point(run, fail(why), printer, observer, &mut saver)?;
                        continue;
                    }
                }
            }
            let (_, _, _, w) = worker.as_mut().expect("set above");
            if traffic.prefix_cache && !w.schedules_itself() && !w.info().capabilities.prefix_copy {
                failed_points += 1;
                let why = format!("{backend}: this backend cannot copy a cached prefix between sequences (capability prefix_copy is false); run it with --prefix-cache off");
                finish_point(run, fail(why), printer, observer, &mut saver)?;
                continue;
            }
            if let Err(e) = w.configure(&config) {
                failed_points += 1;
                *worker = None;
                finish_point(run, fail(e.to_string()), printer, observer, &mut saver)?;
                continue;
            }
            let shared = traffic.prefix_tokens > 0;
            // Every request of a backend's points (warm-ups included) gets a prompt of its own: a
            // server that caches prompts (llama-server, vLLM, SGLang) would otherwise answer a
            // repeated one from its cache and report a TTFT no new prompt gets. Each backend (and
            // each KV cache type of one) gets the same sequence (the seed moves it), so they are
            // compared on the same prompts.
            if prompts_for.as_deref() != Some(loads.as_str()) {
                *prompts_for = Some(loads.clone());
                prompts_sent.set((plan.seed as usize).wrapping_mul(1 << 20));
            }
            let text = traffic.prompts;
            let source = |n: u32, i: usize| ctx.prompts.of(text, n as usize, i as u64);
            let prompt = |d: &Draw, _: usize| {
                let variant = prompts_sent.get();
                prompts_sent.set(variant + 1);
                lx_format::workload::prefixed_prompt(&source, if shared { d.prefix_tokens } else { 0 }, d.prompt_tokens, variant)
            };
            w.reset_peak_rss();
            let by_server = w.schedules_itself();
            // This machine's sensors say nothing of a server's machine.
            let sampler = if by_server { None } else { sensors.take().map(|s| lx_machine::sensors::Sampler::start(s, lx_machine::sensors::SAMPLE_EVERY)) };
            let measured = run_point(w.as_mut(), &point, &traffic, &prompt, &ctx.stop_tokens, &ctx.control, observer);
            let sensed = sampler.and_then(|s| {
                let trace = s.finish();
                // No measured window (the warm-up failed): nothing to sum over.
                let summary = measured.opened.map(|opened| {
                    let from = trace.sensors.ms(opened);
                    let tokens = measured.records.iter().filter(|r| r.ok()).map(|r| r.tokens.len()).sum();
                    lx_machine::sensors::SensorSummary::of(&trace, from, from + measured.window_ms, tokens, !traffic.is_open())
                });
                *sensors = Some(trace.sensors);
                summary
            });
            let peak_rss = w.peak_rss_mib();
            if measured.worker_error.is_some() {
                *worker = None;
            }
            let stopped = measured.stopped;
            let mut result = PointResult::from_run(&backend, policy, &point, measured).with_traffic(&traffic);
            result.scheduled_by_server = by_server;
            result.judge(plan.slo);
            result.worker_peak_rss_mib = peak_rss;
            result.sensors = sensed;
            result.repetition = repetition;
            if result.errors > 0 || (result.requests == 0 && !stopped) {
                failed_points += 1;
            }
            finish_point(run, result, printer, observer, &mut saver)?;
            if stopped {
                run.stopped = true;
                break;
            }
        }
        saver.settle(run, observer);
        if let (Some(why), Some(path)) = (saver.unsaved, ctx.out.as_ref()) {
            let kept = RunFile::read(path).map(|r| r.points.len()).unwrap_or(0);
            return Err(SweepError::Unsaved { path: path.clone(), why, kept, total: run.points.len() });
        }
        Ok(failed_points)
    }
}

fn failed_point(backend: &str, policy: Policy, spec: &PointSpec, why: String) -> PointResult {
    let mut result = PointResult::from_run(backend, policy, spec, PointRun::default());
    // A duration-limited point has no request count: count it as one failure.
    result.errors = if spec.requests == usize::MAX { 1 } else { spec.requests };
    result.error_messages = vec![why];
    result
}

fn finish_point(
    run: &mut RunFile,
    result: PointResult,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
    saver: &mut RunFileSaver<'_>,
) -> std::io::Result<()> {
    let mut result = result;
    result.ceiling = run.ceiling_for(&result);
    result.fidelity = run.fidelity.as_ref().and_then(|f| crate::sweep::fidelity::of_point(f, &result));
    printer.point(&result)?;
    observer.point_done(&result);
    run.points.push(result);
    saver.save(run, observer);
    Ok(())
}

/// Keeps the run file up to date after every point. A write that fails leaves the previous
/// file whole (writes are atomic) and does not stop the measuring: the next point tries
/// again, and the sweep fails at its end only if the last write failed too.
struct RunFileSaver<'p> {
    path: Option<&'p std::path::Path>,
    /// Why the last write failed, while it has not succeeded since.
    unsaved: Option<String>,
    /// What the file on disk holds: its point count, and whether it says the run stopped.
    written: Option<(usize, bool)>,
}

impl<'p> RunFileSaver<'p> {
    fn new(path: Option<&'p std::path::Path>) -> Self {
        Self { path, unsaved: None, written: None }
    }

    /// The run as it ends: written unless the file already holds all of it (the usual case:
    /// the last point's write), and tried again if the last write failed.
    fn settle(&mut self, run: &RunFile, observer: &mut dyn SweepObserver) {
        if self.written != Some((run.points.len(), run.stopped)) {
            self.save(run, observer);
        }
    }

    fn save(&mut self, run: &RunFile, observer: &mut dyn SweepObserver) {
        let Some(path) = self.path else { return };
        match run.write_atomic(path) {
            Ok(()) => {
                self.unsaved = None;
                self.written = Some((run.points.len(), run.stopped));
            }
            Err(e) => {
                let why = format!("{e:#}");
                observer.run_file_unsaved(&why);
                self.unsaved = Some(why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_run_file_is_written_once_per_change_and_again_until_a_failed_write_succeeds() {
        struct Nobody;
        impl Observer for Nobody {}
        impl SweepObserver for Nobody {}
        let fixture = include_bytes!("../../../../docs/results/mlx-cpu-pp64-256-c1-4.json");
        let mut run = RunFile::read_bytes(fixture, std::path::Path::new("fixture.json")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        // Every write replaces the file (a new inode); a write that was not needed leaves it.
        let inode = || std::fs::metadata(&path).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
        let mut saver = RunFileSaver::new(Some(&path));
        saver.save(&run, &mut Nobody);
        let after_last_point = inode();
        saver.settle(&run, &mut Nobody);
        assert_eq!(inode(), after_last_point, "a finished sweep's last point was already on disk");
        run.stopped = true;
        saver.settle(&run, &mut Nobody);
        assert_ne!(inode(), after_last_point, "a stop after the last write is written");
        assert!(RunFile::read(&path).unwrap().stopped);
        // A failed write (a file stands where its folder should be) is tried again at the end,
        // and says why until then.
        let blocked = dir.path().join("gone");
        std::fs::write(&blocked, b"a file where the folder should be").unwrap();
        let gone = blocked.join("run.json");
        let mut saver = RunFileSaver::new(Some(&gone));
        saver.save(&run, &mut Nobody);
        assert!(saver.unsaved.is_some());
        std::fs::remove_file(&blocked).unwrap();
        std::fs::create_dir(&blocked).unwrap();
        saver.settle(&run, &mut Nobody);
        assert!(saver.unsaved.is_none() && gone.exists());
    }

    fn plan(prompt_tokens: &[&str]) -> SweepPlan {
        SweepPlan {
            policies: vec![Policy::Continuous, Policy::Static],
            prompt_tokens: prompt_tokens.iter().map(|l| l.parse().unwrap()).collect(),
            concurrency: vec![1],
            max_tokens: vec![Length::fixed(16)],
            requests: 2,
            warmup: Some(0),
            ..SweepPlan::default()
        }
    }

    #[test]
    fn a_range_and_a_fixed_length_with_the_same_upper_end_stay_apart() {
        // `--prompt-tokens 64..512,512`: the second point is the fixed 512, not the range again.
        let points = plan(&["64..512", "512"]).points();
        let continuous: Vec<_> = points.iter().filter(|p| p.policy == Policy::Continuous).collect();
        assert_eq!(continuous.len(), 2);
        assert_eq!((continuous[0].spec.prompt_tokens, continuous[0].traffic.prompt_tokens_from), (512, Some(64)));
        assert_eq!((continuous[1].spec.prompt_tokens, continuous[1].traffic.prompt_tokens_from), (512, None));
    }

    #[test]
    fn lengths_read_and_print_as_written() {
        for text in ["1", "64", "64..512", "7..7"] {
            let l: Length = text.parse().unwrap();
            assert_eq!(l.to_string(), text);
        }
        assert_eq!("64..=512".parse::<Length>().unwrap(), Length { from: Some(64), to: 512 });
        for (text, why) in [("x", "'x' is not a whole number or a range A..B"), ("1..", "'1..' is not"), ("8..2", "8..2: a range's low end comes first"), ("0", "0: a length is at least 1 token"), ("0..4", "at least 1 token")] {
            let e = text.parse::<Length>().unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        assert_eq!(Length { from: Some(3), to: 9 }.shortest(), 3);
    }

    #[test]
    fn a_list_of_lengths_is_split_on_commas_or_spaces_and_keeps_each_once() {
        assert_eq!(parse_lengths("64..512, 512 64..512,,"), Ok(vec![Length { from: Some(64), to: 512 }, Length::fixed(512)]));
        assert_eq!(parse_lengths(" , "), Err("give at least one value".to_string()));
        assert!(parse_lengths("5, 5..x").unwrap_err().contains("'5..x'"));
        assert!(parse_lengths("8..2").unwrap_err().contains("low end comes first"));
    }

    /// Every grid of lengths, concurrencies, policies, caching, rates and repetitions comes out
    /// of the plan point for point: each combination once per repetition, with its lengths as
    /// written (a range keeps both ends, a fixed length none), in the documented order.
    #[test]
    fn every_grid_round_trips_through_the_plan() {
        let mut rng = lx_test_support::fuzz::Mutator::new(7);
        let length = |rng: &mut lx_test_support::fuzz::Mutator| {
            let to = 1 + rng.below(600) as u32;
            if rng.below(2) == 0 {
                Length::fixed(to)
            } else {
                Length { from: Some(1 + rng.below(to as usize) as u32), to }
            }
        };
        for _ in 0..200 {
            let pick = |rng: &mut lx_test_support::fuzz::Mutator, n: usize| 1 + rng.below(n);
            let prompts: Vec<Length> = (0..pick(&mut rng, 3)).map(|_| length(&mut rng)).collect();
            let outputs: Vec<Length> = (0..pick(&mut rng, 2)).map(|_| length(&mut rng)).collect();
            let concurrency: Vec<usize> = (0..pick(&mut rng, 3)).map(|_| pick(&mut rng, 64)).collect();
            let policies = [Policy::Serial, Policy::Static, Policy::Continuous, Policy::Chunked][..pick(&mut rng, 4)].to_vec();
            let rates: Vec<f64> = (0..rng.below(3)).map(|i| 0.5 + i as f64).collect();
            let prefix_cache = if rng.below(2) == 0 { vec![false] } else { vec![false, true] };
            let plan = SweepPlan {
                backends: vec!["llama".into(), "candle".into()],
                policies: policies.clone(),
                prompt_tokens: prompts.clone(),
                concurrency: concurrency.clone(),
                max_tokens: outputs.clone(),
                rates: rates.clone(),
                prefix_cache: prefix_cache.clone(),
                repetitions: pick(&mut rng, 3),
                ..SweepPlan::default()
            };
            let points = plan.points();
            let arrivals = rates.len().max(1);
            let grid = policies.len() * prefix_cache.len() * arrivals * concurrency.len() * prompts.len() * outputs.len();
            assert_eq!(points.len(), 2 * plan.repetitions * grid);
            let mut i = 0;
            for backend in &plan.backends {
                for r in 1..=plan.repetitions as u32 {
                    for &policy in &policies {
                        for &cached in &prefix_cache {
                            for a in 0..arrivals {
                                for &c in &concurrency {
                                    for p in &prompts {
                                        for o in &outputs {
                                            let point = &points[i];
                                            i += 1;
                                            assert_eq!((&point.backend, point.policy, point.traffic.prefix_cache, point.spec.concurrency), (backend, policy, cached, c));
                                            assert_eq!(point.repetition, (plan.repetitions > 1).then_some(r));
                                            let rate = match point.traffic.arrivals {
                                                Arrivals::Poisson { rate } => Some(rate),
                                                _ => None,
                                            };
                                            assert_eq!(rate, rates.get(a).copied());
                                            let back = |to: u32, from: Option<u32>| Length { from, to };
                                            assert_eq!(back(point.spec.prompt_tokens, point.traffic.prompt_tokens_from), *p);
                                            assert_eq!(back(point.spec.max_tokens, point.traffic.max_tokens_from), *o);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_depth_is_a_cached_prefix_in_front_of_the_prompt() {
        let mut s = plan(&["16..64"]);
        s.policies = vec![Policy::Continuous];
        s.depths = vec![0, 4096];
        let points = s.points();
        assert_eq!(points.len(), 2);
        let (flat, deep) = (&points[0], &points[1]);
        assert_eq!((flat.spec.prompt_tokens, flat.traffic.prompt_tokens_from, flat.traffic.prefix_tokens, flat.traffic.prefix_cache, flat.traffic.depth), (64, Some(16), 0, false, 0));
        assert_eq!((deep.spec.prompt_tokens, deep.traffic.prompt_tokens_from, deep.traffic.prefix_tokens, deep.traffic.prefix_cache, deep.traffic.depth), (4160, Some(4112), 4096, true, 4096));
        // The context holds the depth, the prompt and the output; one more slot for the cache.
        assert_eq!(s.ctx_per_slot(), 4096 + 64 + 16);
        let load = s.load_spec_for("m".into(), &points);
        assert_eq!((load.ctx_per_slot, load.slots), (4096 + 64 + 16, 2));
        assert!(s.validate(Some(4096)).unwrap_err().why.contains("depth + prompt tokens + max tokens = 4176"));
        s.prefix_tokens = 8;
        assert!(s.validate(None).unwrap_err().why.contains("--depth caches the context it fills itself"));
    }

    #[test]
    fn a_server_is_measured_once_per_point_not_once_per_policy() {
        let mut s = plan(&["64"]);
        s.backends.push("local-server".into());
        s.servers = vec!["local-server".into()];
        s.prefix_cache = vec![false, true];
        s.prefix_tokens = 8;
        let points = s.points();
        let of = |b: &str| points.iter().filter(|p| p.backend == b).count();
        assert_eq!((of("llama"), of("local-server")), (4, 1));
    }

    #[test]
    fn repetitions_run_the_whole_grid_again_backend_by_backend() {
        let mut s = plan(&["64", "128"]);
        s.backends.push("candle".into());
        let once = s.points();
        assert!(once.iter().all(|p| p.repetition.is_none()));
        s.repetitions = 3;
        let points = s.points();
        assert_eq!(points.len(), 3 * once.len());
        // Per backend: all of its grid (4 points) for repetition 1, then 2, then 3.
        let order: Vec<(&str, Option<u32>)> = points.iter().map(|p| (p.backend.as_str(), p.repetition)).collect();
        let expect: Vec<(&str, Option<u32>)> =
            ["llama", "candle"].iter().flat_map(|&b| (1..=3).flat_map(move |r| std::iter::repeat_n((b, Some(r)), 4))).collect();
        assert_eq!(order, expect);
        s.repetitions = 0;
        assert!(s.validate(None).unwrap_err().why.contains("--repetitions"));
    }

    #[test]
    fn the_plan_is_checked_once_without_the_model_and_once_against_it() {
        let ok = plan(&["64..512", "1024"]);
        assert_eq!(ok.validate(None), Ok(()));
        assert_eq!(ok.validate(Some(2048)), Ok(()));
        assert!(ok.validate(Some(1024)).unwrap_err().why.contains("exceeds the model's context of 1024"));
        // Each refusal names the field it is about, and says why in the CLI's words.
        let bad = |f: fn(&mut SweepPlan), field: &str, needle: &str| {
            let mut p = plan(&["64"]);
            f(&mut p);
            let e = p.validate(None).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.why.contains(needle), "{e} lacks {needle}");
        };
        bad(|p| p.prompt_tokens = vec![Length { from: Some(600), to: 512 }], "prompt_tokens", "--prompt-tokens 600..512: a range's low end comes first");
        bad(|p| p.prompt_tokens = vec![Length::fixed(0)], "prompt_tokens", "--prompt-tokens 0: a length is at least 1 token");
        bad(|p| p.max_tokens = vec![Length::fixed(0)], "max_tokens", "--max-tokens 0: a length is at least 1 token");
        bad(|p| p.concurrency = vec![], "concurrency", "--concurrency: give at least one value");
        bad(|p| p.rates = vec![0.0], "rates", "--rate must be a positive number");
        bad(|p| p.prefix_tokens = 64, "prefix_tokens", "must be shorter than every prompt");
        bad(|p| p.prefix_cache = vec![true], "prefix_cache", "needs a shared prefix");
        bad(|p| p.duration_s = Some(-1.0), "duration_s", "--duration");
        bad(|p| p.max_batch_tokens = Some(0), "max_batch_tokens", "--max-batch-tokens");
        let mut long_prefix = plan(&["4096"]);
        long_prefix.prefix_tokens = 3000;
        assert!(long_prefix.validate(Some(2048)).unwrap_err().why.contains("--prefix-tokens 3000 is longer than the model's context"));
    }
}
