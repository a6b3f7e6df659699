//! Fidelity: how far each backend and setting moves the model's next-token distributions from
//! a reference's, measured on a fixed text beside the setting's speed (`lx fidelity`).
//!
//! A reference worker (llama.cpp, f16 KV cache, on the model's file or a higher-precision one)
//! scores the text teacher-forced: the text is cut into chunks as `llama-perplexity` cuts it
//! ([`text::chunks`]), each chunk is prefilled in a fresh cache, and every position of its
//! second half reports the reference's best alternatives and its log-probability of the
//! text's next token. Each candidate then scores the same chunks through the same scheduler,
//! reporting its own log-probabilities of exactly those tokens, so the divergence is read
//! position by position ([`divergence`]). A candidate that drafts (speculative decoding)
//! changes how tokens are generated, not how a text is scored: it is compared with the same
//! backend decoding without drafts, on what both generate from the same prompt. Every
//! candidate also decodes a few tokens alone for its speed and memory.
//!
//! Every candidate runs in its own worker: one that fails or crashes is recorded with why,
//! and the others go on; the run file is rewritten after each.

pub mod divergence;
pub mod text;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lx_engine::backend::{Choice, KvTypes, LoadSpec, Scored, TokenId};
use lx_client::client::{Clients, Heard};
use lx_client::records::RequestRecord;
use lx_engine::scheduler::{Policy, PromptScore, SchedulerConfig, WorkRequest};
use lx_engine::speculative::Speculation;
use lx_client::target::{Spawner, Target};
use lx_client::traffic::RunControl;
use lx_results::studies::fidelity::{Against, Candidate, FidelityRun, FileId, ReferenceRecord, TextRecord};

use divergence::{Position, RefRow};

/// How a run measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Tokens per chunk (`llama-perplexity`'s `-c`).
    pub context: usize,
    /// Score at most this many chunks; all the text holds when `None`.
    pub chunks: Option<usize>,
    /// The reference's alternatives kept per position: as many as reach probability
    /// `coverage`, at most `top`.
    pub top: usize,
    pub coverage: f64,
    /// Tokens each candidate generates for its speed (and a drafting one for its comparison).
    pub generated: usize,
    /// Compute threads of every worker (0: the backend's own or the tuned choice).
    pub threads: usize,
}

impl Default for Plan {
    fn default() -> Self {
        Plan { context: 512, chunks: None, top: DEFAULT_TOP, coverage: DEFAULT_COVERAGE, generated: 64, threads: 0 }
    }
}

/// The reference keeps, per position, its best alternatives up to this much probability,
/// and the rest of the vocabulary counts as one outcome. A fixed number would not do: on the
/// default model its best 256 leave 7.0% of the probability on average, and what a
/// candidate does within that rest goes unseen (llama.cpp's q8_0 cache then reads 12% low).
pub const DEFAULT_COVERAGE: f64 = 0.999;

/// At most this many alternatives per position (the run file says how much probability they
/// leave uncovered on average).
pub const DEFAULT_TOP: usize = 16384;

/// Alternatives each token of a generated comparison keeps.
const GENERATED_TOP: usize = 32;

/// The prompt a generated comparison starts from: the text's opening twice, so that the
/// model goes on copying it and prompt lookup has something to draft.
const OPENING: usize = 96;

/// One backend with one setting, as a worker starts it.
#[derive(Clone)]
pub struct Entry {
    pub backend: String,
    /// What sets it apart, in words.
    pub setting: String,
    /// Starts its worker.
    pub spawn: Spawner,
    /// The backend's own settings it loads with (`LoadSpec::settings`: candle's `weights`).
    pub settings: std::collections::BTreeMap<String, String>,
    /// The file it runs: the model, or another (a draft model measured as a model).
    pub model: PathBuf,
    pub kv: KvTypes,
    pub speculation: Speculation,
    pub draft_model: Option<PathBuf>,
    pub compared: Compared,
    /// For an entry compared with decoding without drafts: the entry before it that decodes
    /// so on the same backend and settings.
    pub plain: Option<usize>,
}

/// What an entry is compared with, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// The reference, scoring the text teacher-forced.
    Reference,
    /// Its plain entry, on what both generate from the opening: speculative decoding.
    Drafting,
    /// Its plain entry, on what that generated, scored back in one pass: how far computing a
    /// token among others (as a verify pass does) moves it from computing it alone, the
    /// rounding a drafting entry is read against.
    OnePass,
}

/// A whole run, ready to start.
#[derive(Clone)]
pub struct Job {
    pub model: FileId,
    /// The model's context length: chunks and prompts must fit it.
    pub model_context: usize,
    pub reference: Entry,
    pub reference_id: FileId,
    pub text: text::Text,
    /// The text under the model's tokenizer, as `llama-perplexity` tokenizes it (with the
    /// model's BOS where it adds one), and that BOS.
    pub tokens: Vec<TokenId>,
    pub bos: Option<TokenId>,
    pub plan: Plan,
    pub entries: Vec<Entry>,
    pub control: RunControl,
    /// Rewritten (atomically) after the reference and after every candidate.
    pub out: Option<PathBuf>,
    pub command: Vec<String>,
    pub hardware: serde_json::Value,
}

/// Sees a run as it goes.
pub trait Watch {
    /// What is being measured now.
    fn status(&mut self, what: &str);
    /// A candidate was measured (or failed).
    fn measured(&mut self, candidate: &Candidate);
}

/// What a run measures before any candidate.
struct Reference {
    rows: Vec<RefRow>,
    /// The text's next token at each scored position.
    next: Vec<TokenId>,
}

/// Runs `job`: the reference, then every entry. Fails only where nothing can be measured
/// (a text too short, a context the model does not have, a reference that does not run);
/// a candidate that fails is recorded with why.
pub fn run(job: &Job, watch: &mut dyn Watch) -> Result<FidelityRun, String> {
    let plan = &job.plan;
    if plan.context > job.model_context {
        return Err(format!("a context of {} tokens is longer than the model's {}: use a shorter --context", plan.context, job.model_context));
    }
    let chunks = text::chunks(&job.tokens, plan.context, job.bos, plan.chunks)?;
    let opening = opening(&job.tokens);
    let from = text::first_scored(plan.context);
    let mut file = FidelityRun {
        kind: lx_results::studies::fidelity::KIND.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_ms: lx_engine::date::now_unix_ms(),
        command: job.command.clone(),
        hardware: job.hardware.clone(),
        model: job.model.clone(),
        reference: ReferenceRecord { backend: job.reference.backend.clone(), version: String::new(), device: String::new(), model: job.reference_id.clone(), perplexity: f64::NAN, uncovered: f64::NAN },
        text: TextRecord { name: job.text.name.clone(), source: job.text.source.clone(), sha256: job.text.sha256(), tokens: job.tokens.len(), chunks: chunks.len(), positions: chunks.len() * (plan.context - 1 - from) },
        context: plan.context,
        top: plan.top,
        generated: plan.generated,
        candidates: Vec::new(),
        stopped: false,
    };

    watch.status(&format!("reference: {} on {}, scoring {} chunks of {} tokens", job.reference.setting, job.reference_id.name, chunks.len(), plan.context));
    let mut target = spawn(&job.reference, plan, opening.len()).map_err(|e| format!("the reference ({}) did not start: {e}", job.reference.setting))?;
    let next: Vec<TokenId> = chunks.iter().flat_map(|c| c[from + 1..].to_vec()).collect();
    let scored = score(target.as_mut(), &chunks, from, (plan.top, Some(plan.coverage)), &|i| vec![next[i]], &job.control).map_err(|e| format!("the reference did not score the text: {e}"))?;
    let rows: Vec<RefRow> = scored.iter().map(RefRow::from_choice).collect::<Option<_>>().ok_or("the reference returned a position without its scored token")?;
    let n = rows.len() as f64;
    file.reference.perplexity = (rows.iter().map(|r| -f64::from(r.target)).sum::<f64>() / n).exp();
    file.reference.uncovered = rows.iter().map(RefRow::uncovered).sum::<f64>() / n;
    file.reference.version = target.info().version.clone();
    file.reference.device = target.info().device.clone();
    drop(target);
    let reference = Reference { rows, next };
    save(job, &file)?;

    let mut plain_runs: HashMap<usize, Generated> = HashMap::new();
    for (i, entry) in job.entries.iter().enumerate() {
        if job.control.stop.load(Ordering::Relaxed) {
            file.stopped = true;
            break;
        }
        watch.status(&format!("{} {}", entry.backend, entry.setting));
        let wanted_later = job.entries[i + 1..].iter().any(|e| e.plain == Some(i));
        let base = entry.plain.and_then(|p| plain_runs.get(&p));
        let (candidate, generated) = measure(entry, base, wanted_later, &reference, &chunks, &opening, plan, &job.control);
        if let Some(g) = generated {
            plain_runs.insert(i, g);
        }
        watch.measured(&candidate);
        file.candidates.push(candidate);
        save(job, &file)?;
    }
    file.stopped |= job.control.stop.load(Ordering::Relaxed);
    save(job, &file)?;
    Ok(file)
}

/// The prompt of a generated comparison: the text's opening, then the opening again without
/// its first token.
fn opening(tokens: &[TokenId]) -> Vec<TokenId> {
    let head = &tokens[..OPENING.min(tokens.len())];
    head.iter().chain(head.iter().skip(1)).copied().collect()
}

fn save(job: &Job, file: &FidelityRun) -> Result<(), String> {
    let Some(path) = &job.out else { return Ok(()) };
    let json = serde_json::to_vec_pretty(file).map_err(|e| e.to_string())?;
    lx_engine::atomic_file::write(path, &json).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn spawn(entry: &Entry, plan: &Plan, opening: usize) -> Result<Box<dyn Target>, String> {
    let spec = LoadSpec {
        model_path: entry.model.clone(),
        threads: plan.threads,
        slots: 1,
        ctx_per_slot: (plan.context + 1).max(opening + plan.generated + 1),
        max_batch_tokens: plan.context.min(512),
        gpu_layers: None,
        draft_model: entry.draft_model.clone(),
        kv: entry.kv,
        settings: entry.settings.clone(),
    };
    let mut config = SchedulerConfig::new(Policy::Continuous, 1, spec.max_batch_tokens);
    config.spec = entry.speculation;
    (entry.spawn)(&entry.backend, &spec, &config).map_err(|e| e.to_string())
}

/// What one worker generated from the opening: each token and its alternatives.
struct Generated {
    tokens: Vec<TokenId>,
    top: Vec<Vec<Scored>>,
}

/// Measures one entry in a worker of its own; the run that decoded without drafts comes back
/// too where a later entry is compared with it (`keep`).
#[allow(clippy::too_many_arguments)]
fn measure(entry: &Entry, base: Option<&Generated>, keep: bool, reference: &Reference, chunks: &[Vec<TokenId>], opening: &[TokenId], plan: &Plan, control: &RunControl) -> (Candidate, Option<Generated>) {
    let mut candidate = Candidate {
        backend: entry.backend.clone(),
        setting: entry.setting.clone(),
        settings: Default::default(),
        device: String::new(),
        against: if entry.compared == Compared::Reference { Against::Reference } else { Against::Plain },
        fidelity: None,
        decode_tok_s: None,
        peak_rss_mib: None,
        accepted_drafts: None,
        error: None,
    };
    let mut target = match spawn(entry, plan, opening.len()) {
        Ok(t) => t,
        Err(e) => {
            candidate.error = Some(e);
            return (candidate, None);
        }
    };
    candidate.settings = target.info().settings.clone();
    candidate.device = target.info().device.clone();
    let outcome = (|| -> Result<Option<Generated>, String> {
        if entry.compared != Compared::OnePass {
            // Its speed and memory first, in a fresh worker: one sequence decoding, nothing
            // else asked of the pass (scoring a chunk would leave its logits' memory behind).
            target.reset_peak_rss();
            let timed = one_request(target.as_mut(), request(opening.to_vec(), plan.generated as u32, 0), control)?;
            candidate.decode_tok_s = timed.decode_tps();
            candidate.peak_rss_mib = target.peak_rss_mib();
            candidate.accepted_drafts = timed.spec.map(|s| s.accepted);
        }
        let plain = || base.ok_or_else(|| "its run without drafts was not measured".to_string());
        match entry.compared {
            Compared::Reference => {
                let from = text::first_scored(plan.context);
                let scored = score(target.as_mut(), chunks, from, (0, None), &|i| reference.rows[i].asks(reference.next[i]), control)?;
                let positions: Vec<Position> = reference.rows.iter().zip(&scored).map(|(r, c)| divergence::position(r, c)).collect::<Result<_, _>>()?;
                candidate.fidelity = divergence::summarize(&positions);
                if !keep {
                    return Ok(None);
                }
                let asked = one_request(target.as_mut(), request(opening.to_vec(), plan.generated as u32, GENERATED_TOP), control)?;
                Ok(Some(Generated { tokens: asked.tokens, top: asked.top_logprobs }))
            }
            Compared::Drafting => {
                let plain = plain()?;
                let asked = one_request(target.as_mut(), request(opening.to_vec(), plan.generated as u32, GENERATED_TOP), control)?;
                candidate.fidelity = divergence::summarize(&divergence::generated((&plain.tokens, &plain.top), (&asked.tokens, &asked.top_logprobs)));
                Ok(None)
            }
            Compared::OnePass => {
                // What decoding without drafts generated, scored back in one pass: each of
                // its tokens computed among many, as a verify pass computes drafted tokens.
                let plain = plain()?;
                let text: Vec<TokenId> = opening.iter().chain(&plain.tokens).copied().collect();
                let from = opening.len() - 1;
                let rows = score(target.as_mut(), &[text], from, (GENERATED_TOP, None), &|_| Vec::new(), control)?;
                let tokens: Vec<TokenId> = rows.iter().map(|c| c.token).collect();
                let top: Vec<Vec<Scored>> = rows.into_iter().map(|c| c.top).collect();
                candidate.fidelity = divergence::summarize(&divergence::generated((&plain.tokens, &plain.top), (&tokens, &top)));
                Ok(None)
            }
        }
    })();
    target.close();
    match outcome {
        Ok(generated) => (candidate, generated),
        Err(e) => {
            candidate.error = Some(e);
            candidate.fidelity = None;
            (candidate, None)
        }
    }
}

fn request(prompt: Vec<TokenId>, max_tokens: u32, top: usize) -> WorkRequest {
    WorkRequest { id: 0, prompt, max_tokens, stop_tokens: Vec::new(), top_logprobs: top, prefix_tokens: 0, handoff: Default::default(), score: None }
}

/// Every chunk scored from position `from` on, one request each: the rows of all chunks in
/// order, each asked to score `asks(row)` (rows numbered across chunks) with its best
/// alternatives (at most `top`, up to probability `mass`).
fn score(target: &mut dyn Target, chunks: &[Vec<TokenId>], from: usize, (top, mass): (usize, Option<f64>), asks: &dyn Fn(usize) -> Vec<TokenId>, control: &RunControl) -> Result<Vec<Choice>, String> {
    let mut rows = Vec::new();
    for chunk in chunks {
        let per_chunk = chunk.len() - 1 - from;
        let ids = (0..per_chunk).map(|k| asks(rows.len() + k)).collect();
        let mut r = request(chunk.clone(), 1, 0);
        r.score = Some(PromptScore { from: from as u32, top, mass, ids });
        let record = one_request(target, r, control)?;
        if record.scored.len() != per_chunk {
            return Err(format!("{} positions of a chunk came back scored where {per_chunk} were asked", record.scored.len()));
        }
        rows.extend(record.scored);
    }
    Ok(rows)
}

/// Sends one request and waits for its end: its record, or why it failed (a stop, a worker
/// that died or hung, the request's own error).
fn one_request(target: &mut dyn Target, mut request: WorkRequest, control: &RunControl) -> Result<RequestRecord, String> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    request.id = NEXT.fetch_add(1, Ordering::Relaxed);
    let id = request.id;
    let record = RequestRecord::new(id, request.prompt.len() as u32, request.max_tokens, 0.0);
    let mut clients: Clients<()> = Clients::default();
    clients.submit(target, request, Instant::now(), record, ()).map_err(|e| e.to_string())?;
    let mut cancelled = false;
    loop {
        if !cancelled && control.stop.load(Ordering::Relaxed) {
            target.cancel(id);
            cancelled = true;
        }
        match clients.receive(target, Duration::from_millis(200), control.hang_timeout) {
            Ok(Some((_, Heard::Ended(flight)))) if cancelled => return Err(format!("stopped (request {})", flight.record.id)),
            Ok(Some((_, Heard::Ended(flight)))) => return flight.record.error.clone().map_or(Ok(flight.record), Err),
            Ok(Some((_, Heard::Refused(why)))) => return Err(format!("the worker refused the request: {why}")),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}
