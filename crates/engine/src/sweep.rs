//! A sweep: the grid of backends × policies × prompt lengths × concurrencies ×
//! output lengths, measured point by point, written as it goes.
//!
//! Ordered so each backend's model loads once (a policy change is a message to the
//! worker, not a reload). The run file is rewritten atomically after every point, so
//! a crash, a kill or Ctrl-C never loses a completed measurement. If a worker dies,
//! its point records why and the next point starts a fresh worker.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::{LoadSpec, TokenId};
use crate::coordinator::{Worker, WorkerCommand};
use crate::load::{run_closed_loop, Observer, PointRun, PointSpec, RunControl};
use crate::printers::Printer;
use crate::results::{PointResult, RunFile};
use crate::scheduler::{Policy, SchedulerConfig};

/// What to measure. Every list is a dimension of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    pub backends: Vec<String>,
    pub policies: Vec<Policy>,
    pub prompt_tokens: Vec<u32>,
    pub concurrency: Vec<usize>,
    pub max_tokens: Vec<u32>,
    /// Measured requests per point.
    pub requests: usize,
    /// Unmeasured requests before each point.
    pub warmup: usize,
    /// Compute threads; 0 means physical cores.
    pub threads: usize,
    pub stop_at_eos: bool,
    /// `chunked` policy: prompt tokens per pass.
    pub chunk_tokens: usize,
    pub gpu_layers: Option<u32>,
}

impl SweepSpec {
    /// Check the grid against the model's context before anything is loaded.
    pub fn validate(&self, model_context: usize) -> Result<(), String> {
        let nonempty = |name: &str, len: usize| if len == 0 { Err(format!("{name}: give at least one value")) } else { Ok(()) };
        nonempty("--backend", self.backends.len())?;
        nonempty("--policy", self.policies.len())?;
        nonempty("--prompt-tokens", self.prompt_tokens.len())?;
        nonempty("--concurrency", self.concurrency.len())?;
        nonempty("--max-tokens", self.max_tokens.len())?;
        if self.concurrency.contains(&0) {
            return Err("--concurrency must be at least 1".into());
        }
        if self.prompt_tokens.contains(&0) {
            return Err("--prompt-tokens must be at least 1 (the BOS token counts)".into());
        }
        if self.max_tokens.contains(&0) {
            return Err("--max-tokens must be at least 1".into());
        }
        if self.requests == 0 {
            return Err("--requests must be at least 1".into());
        }
        if self.chunk_tokens == 0 {
            return Err("--chunk-tokens must be at least 1".into());
        }
        let longest = self.ctx_per_slot();
        if longest > model_context {
            return Err(format!(
                "prompt tokens + max tokens = {longest} exceeds the model's context of {model_context} tokens"
            ));
        }
        Ok(())
    }

    /// Context each sequence needs: the longest prompt plus the longest output.
    pub fn ctx_per_slot(&self) -> usize {
        let p = self.prompt_tokens.iter().max().copied().unwrap_or(0) as usize;
        let m = self.max_tokens.iter().max().copied().unwrap_or(0) as usize;
        p + m
    }

    /// The load spec for one backend: room for the largest concurrency and lengths.
    pub fn load_spec(&self, model_path: PathBuf) -> LoadSpec {
        let slots = self.concurrency.iter().max().copied().unwrap_or(1);
        let longest_prompt = self.prompt_tokens.iter().max().copied().unwrap_or(1) as usize;
        LoadSpec {
            model_path,
            threads: self.threads,
            slots,
            ctx_per_slot: self.ctx_per_slot(),
            // Room for every sequence's whole prompt in one pass, as continuous batching may need.
            max_batch_tokens: (longest_prompt * slots).clamp(512, 16384),
            gpu_layers: self.gpu_layers,
        }
    }

    fn scheduler(&self, policy: Policy, concurrency: usize, max_batch_tokens: usize) -> SchedulerConfig {
        let mut s = SchedulerConfig::new(policy, concurrency, max_batch_tokens);
        s.chunk_tokens = self.chunk_tokens;
        s
    }

    /// Points in the order they run: backend outermost (one load each), then policy,
    /// concurrency, prompt length and output length.
    pub fn points(&self) -> Vec<(String, Policy, PointSpec)> {
        let mut out = Vec::new();
        for b in &self.backends {
            for &policy in &self.policies {
                for &concurrency in &self.concurrency {
                    for &prompt_tokens in &self.prompt_tokens {
                        for &max_tokens in &self.max_tokens {
                            let spec = PointSpec {
                                prompt_tokens,
                                max_tokens,
                                concurrency,
                                requests: self.requests,
                                warmup: self.warmup,
                                stop_at_eos: self.stop_at_eos,
                                top_logprobs: 0,
                            };
                            out.push((b.clone(), policy, spec));
                        }
                    }
                }
            }
        }
        out
    }
}

/// Everything a sweep needs from its caller.
pub struct SweepContext<'a> {
    pub model_path: PathBuf,
    /// Prompt ids for (prompt tokens, request index).
    pub prompt: &'a dyn Fn(u32, usize) -> Vec<TokenId>,
    pub stop_tokens: Vec<TokenId>,
    /// How to start a worker for a backend name.
    pub worker_command: &'a dyn Fn(&str) -> WorkerCommand,
    /// Where to keep the run file up to date (atomically, after every point).
    pub out: Option<PathBuf>,
    pub control: RunControl,
    pub load_timeout: Duration,
}

/// Sees a sweep progress.
pub trait SweepObserver: Observer {
    fn loading(&mut self, _backend: &str) {}
    fn loaded(&mut self, _backend: &str, _info: &crate::backend::BackendInfo, _load_ms: f64) {}
    fn point_started(&mut self, _index: usize, _total: usize, _backend: &str, _policy: Policy, _spec: &PointSpec) {}
    fn point_done(&mut self, _point: &PointResult) {}
}

/// Run the sweep, filling `run` and printing rows as points finish. Returns the number
/// of points that had errors (0 means a clean run).
pub fn run_sweep(
    spec: &SweepSpec,
    ctx: &SweepContext<'_>,
    run: &mut RunFile,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<usize> {
    printer.header(run)?;
    let points = spec.points();
    let total = points.len();
    let mut worker: Option<(String, Worker)> = None;
    let mut failed_points = 0;
    // A backend that cannot load the model will not load it for the next point either.
    let mut load_failures: std::collections::HashMap<String, String> = Default::default();
    let load = spec.load_spec(ctx.model_path.clone());
    for (index, (backend, policy, point)) in points.into_iter().enumerate() {
        if ctx.control.stop.load(std::sync::atomic::Ordering::Relaxed) {
            run.stopped = true;
            break;
        }
        observer.point_started(index, total, &backend, policy, &point);
        let config = spec.scheduler(policy, point.concurrency, load.max_batch_tokens);
        // Reuse the worker for the same backend; otherwise (new backend, or it died) start one.
        let reuse = match worker.as_mut() {
            Some((b, w)) => *b == backend && !w.is_gone(),
            None => false,
        };
        if let Some(why) = load_failures.get(&backend) {
            let result = failed_point(&backend, policy, &point, why.clone());
            failed_points += 1;
            finish_point(run, result, printer, observer, ctx)?;
            continue;
        }
        if !reuse {
            worker = None; // shut the previous one down before loading the next
            observer.loading(&backend);
            match Worker::spawn(&(ctx.worker_command)(&backend), &load, &config, ctx.load_timeout) {
                Ok(w) => {
                    observer.loaded(&backend, w.info(), w.load_ms());
                    if !run.backends.iter().any(|b| b.name == w.info().name) {
                        run.backends.push(w.info().clone());
                    }
                    worker = Some((backend.clone(), w));
                }
                Err(e) => {
                    let why = format!("{backend}: {e}");
                    if matches!(e, crate::coordinator::WorkerError::Load(_)) {
                        load_failures.insert(backend.clone(), why.clone());
                    }
                    let result = failed_point(&backend, policy, &point, why);
                    failed_points += 1;
                    finish_point(run, result, printer, observer, ctx)?;
                    continue;
                }
            }
        }
        let (_, w) = worker.as_mut().expect("set above");
        if let Err(e) = w.configure(config) {
            let result = failed_point(&backend, policy, &point, e.to_string());
            failed_points += 1;
            worker = None;
            finish_point(run, result, printer, observer, ctx)?;
            continue;
        }
        let prompt_len = point.prompt_tokens;
        let prompt = |i: usize| (ctx.prompt)(prompt_len, i);
        let measured = run_closed_loop(w, &point, &prompt, &ctx.stop_tokens, &ctx.control, observer);
        if measured.worker_error.is_some() {
            worker = None;
        }
        let stopped = measured.stopped;
        let result = PointResult::from_run(&backend, policy, &point, measured);
        if result.errors > 0 || result.requests == 0 {
            failed_points += 1;
        }
        finish_point(run, result, printer, observer, ctx)?;
        if stopped {
            run.stopped = true;
            break;
        }
    }
    drop(worker);
    if let Some(path) = &ctx.out {
        run.write_atomic(path)?;
    }
    printer.footer(run)?;
    Ok(failed_points)
}

fn failed_point(backend: &str, policy: Policy, spec: &PointSpec, why: String) -> PointResult {
    let mut result = PointResult::from_run(backend, policy, spec, PointRun::default());
    result.errors = spec.requests;
    result.error_messages = vec![why];
    result
}

fn finish_point(
    run: &mut RunFile,
    result: PointResult,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
    ctx: &SweepContext<'_>,
) -> anyhow::Result<()> {
    printer.point(&result)?;
    observer.point_done(&result);
    run.points.push(result);
    if let Some(path) = &ctx.out {
        run.write_atomic(path)?;
    }
    Ok(())
}
