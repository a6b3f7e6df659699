//! A sweep: the grid of backends × policies × prompt lengths × concurrencies ×
//! output lengths, measured point by point, written as it goes.
//!
//! Ordered so each backend's model loads once (a policy change is a message to the
//! worker, not a reload). The run file is rewritten atomically after every point, so
//! a crash, a kill or Ctrl-C never loses a completed measurement. If a worker dies,
//! its point records why and the next point starts a fresh worker.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::backend::{LoadSpec, TokenId};
use crate::load::{run_point, Arrivals, Draw, Observer, PointLoad, PointRun, PointSpec, RunControl};
use crate::printers::Printer;
use crate::results::{PointResult, RunFile, Slo};
use crate::scheduler::{Policy, SchedulerConfig};
use crate::target::{Spawner, Target};

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
    /// Those of `backends` that are servers (OpenAI-compatible targets), which schedule
    /// requests themselves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
}

/// Serving options beyond [`SweepSpec`]'s grid: open-loop rates, mixed lengths, a shared
/// prefix and its cache, batch limits, SLOs. Kept apart from [`SweepSpec`] so that code
/// building a plain grid keeps working; the default is a plain closed-loop grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepExtras {
    /// Open-loop Poisson arrival rates (requests/s), a dimension of the grid; empty: closed loop.
    pub rates: Vec<f64>,
    /// Open loop: most requests in flight from the client side (`None`: no cap).
    pub max_in_flight: Option<usize>,
    /// Lower ends of prompt-length ranges, one per [`SweepSpec::prompt_tokens`] entry (which
    /// is then the upper end); `None` or missing: that length is fixed.
    pub prompt_tokens_from: Vec<Option<u32>>,
    /// Same for [`SweepSpec::max_tokens`].
    pub max_tokens_from: Vec<Option<u32>>,
    /// Seed of arrivals and drawn lengths.
    pub seed: u64,
    /// Send requests for at most this long per point (requests still cap it).
    pub duration_s: Option<f64>,
    /// Every prompt starts with the same this many tokens (0: no shared prefix).
    pub prefix_tokens: u32,
    /// Prefix caching off and/or on, a dimension of the grid.
    pub prefix_cache: Vec<bool>,
    /// Most sequences per pass (the static batch size B); default: the point's concurrency.
    pub max_batch_seqs: Option<usize>,
    /// Most tokens per pass; default: room for every slot's longest prompt, within 512..16384.
    pub max_batch_tokens: Option<usize>,
    pub slo: Slo,
    /// Each point measured this many times: the whole grid once per repetition, backend by
    /// backend, so that the machine's drift spreads over every point alike.
    pub repetitions: usize,
}

impl Default for SweepExtras {
    fn default() -> Self {
        SweepExtras {
            rates: Vec::new(),
            max_in_flight: None,
            prompt_tokens_from: Vec::new(),
            max_tokens_from: Vec::new(),
            seed: 0,
            duration_s: None,
            prefix_tokens: 0,
            prefix_cache: vec![false],
            max_batch_seqs: None,
            max_batch_tokens: None,
            slo: Slo::default(),
            repetitions: 1,
        }
    }
}

impl SweepExtras {
    /// Check the options that do not depend on the model.
    pub fn validate(&self, spec: &SweepSpec, model_context: usize) -> Result<(), String> {
        for &r in &self.rates {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("--rate must be a positive number of requests per second, not {r}"));
            }
        }
        if self.repetitions == 0 {
            return Err("--repetitions must be at least 1".into());
        }
        if self.max_in_flight == Some(0) {
            return Err("--max-concurrency must be at least 1".into());
        }
        if self.max_batch_seqs == Some(0) {
            return Err("--max-batch (sequences per pass) must be at least 1".into());
        }
        if self.max_batch_tokens == Some(0) {
            return Err("--max-batch-tokens must be at least 1".into());
        }
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d > 0.0) {
                return Err(format!("--duration must be a positive number of seconds, not {d}"));
            }
        }
        if self.prefix_cache.is_empty() {
            return Err("--prefix-cache: give on, off or both".into());
        }
        let slo = |name: &str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => Err(format!("{name} must be a positive number, not {x}")),
            _ => Ok(()),
        };
        slo("--slo-ttft-ms", self.slo.ttft_ms)?;
        slo("--slo-decode-tps", self.slo.decode_tps)?;
        let ranges = |name: &str, to: &[u32], from: &[Option<u32>]| -> Result<(), String> {
            for (i, f) in from.iter().enumerate() {
                if let (Some(f), Some(&t)) = (f, to.get(i)) {
                    if *f == 0 || *f > t {
                        return Err(format!("{name} range {f}..{t}: the low end must be at least 1 and at most the high end"));
                    }
                }
            }
            Ok(())
        };
        ranges("--prompt-tokens", &spec.prompt_tokens, &self.prompt_tokens_from)?;
        ranges("--max-tokens", &spec.max_tokens, &self.max_tokens_from)?;
        let p = self.prefix_tokens as usize;
        if p > 0 {
            if p >= model_context {
                return Err(format!("--prefix-tokens {p} is longer than the model's context of {model_context} tokens"));
            }
            let shortest = spec
                .prompt_tokens
                .iter()
                .enumerate()
                .map(|(i, &t)| self.prompt_tokens_from.get(i).copied().flatten().unwrap_or(t))
                .min()
                .unwrap_or(0) as usize;
            if p >= shortest {
                return Err(format!(
                    "--prefix-tokens {p} must be shorter than every prompt (the shortest is {shortest} tokens): --prompt-tokens counts the prefix too"
                ));
            }
        } else if self.prefix_cache.contains(&true) {
            return Err("--prefix-cache on needs a shared prefix: give --prefix-tokens".into());
        }
        Ok(())
    }
}

/// One point of a sweep, with its load.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    pub backend: String,
    pub policy: Policy,
    pub spec: PointSpec,
    pub load: PointLoad,
    /// Which measurement of the point (1-based) when the sweep repeats points.
    pub repetition: Option<u32>,
}

impl SweepSpec {
    /// Points with their loads, in the order they run: backend outermost (one load each),
    /// then repetition, policy, prefix caching, arrival rate, concurrency, prompt and output
    /// length. A server (see [`SweepSpec::servers`]) schedules requests itself: it is measured
    /// once per point, not once per policy or prefix-cache setting.
    pub fn points_with(&self, extras: &SweepExtras) -> Vec<SweepPoint> {
        let arrivals: Vec<Arrivals> = if extras.rates.is_empty() {
            vec![Arrivals::Closed]
        } else {
            extras.rates.iter().map(|&rate| Arrivals::Poisson { rate }).collect()
        };
        let mut out = Vec::new();
        for b in &self.backends {
            let server = self.servers.contains(b);
            let policies = if server { &self.policies[..self.policies.len().min(1)] } else { &self.policies[..] };
            let caching = if server { &[false][..] } else { &extras.prefix_cache[..] };
            let repetitions = extras.repetitions.max(1) as u32;
            for repetition in (1..=repetitions).map(|r| (repetitions > 1).then_some(r)) {
                for &policy in policies {
                    for &prefix_cache in caching {
                        for arrivals in &arrivals {
                            for &concurrency in &self.concurrency {
                                // Lengths by index: a range and a fixed length may share an upper end.
                                for (pi, &prompt_tokens) in self.prompt_tokens.iter().enumerate() {
                                    for (mi, &max_tokens) in self.max_tokens.iter().enumerate() {
                                        let spec = PointSpec {
                                            prompt_tokens,
                                            max_tokens,
                                            concurrency,
                                            requests: self.requests,
                                            warmup: self.warmup,
                                            stop_at_eos: self.stop_at_eos,
                                            top_logprobs: 0,
                                        };
                                        let load = PointLoad {
                                            arrivals: arrivals.clone(),
                                            max_in_flight: extras.max_in_flight,
                                            prompt_tokens_from: extras.prompt_tokens_from.get(pi).copied().flatten(),
                                            max_tokens_from: extras.max_tokens_from.get(mi).copied().flatten(),
                                            seed: extras.seed,
                                            duration_s: extras.duration_s,
                                            prefix_tokens: extras.prefix_tokens,
                                            prefix_cache,
                                        };
                                        out.push(SweepPoint { backend: b.clone(), policy, spec, load, repetition });
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
    pub fn load_spec_for(&self, model_path: PathBuf, points: &[SweepPoint], extras: &SweepExtras) -> LoadSpec {
        let mut slots = points.iter().map(|p| p.spec.concurrency).max().unwrap_or(1);
        slots = slots.max(extras.max_batch_seqs.unwrap_or(0));
        let longest = |p: &SweepPoint| match &p.load.arrivals {
            Arrivals::Script { requests } => requests.iter().map(|r| (r.prompt_tokens, r.max_tokens)).fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1))),
            _ => (p.spec.prompt_tokens, p.spec.max_tokens),
        };
        let ctx_per_slot = points.iter().map(longest).map(|(a, b)| (a + b) as usize).max().unwrap_or(1);
        let longest_prompt = points.iter().map(|p| longest(p).0 as usize).max().unwrap_or(1);
        let max_batch_tokens = extras.max_batch_tokens.unwrap_or(crate::scheduler::batch_tokens_for(longest_prompt, slots));
        if points.iter().any(|p| p.load.prefix_cache) {
            slots += 1;
        }
        LoadSpec { model_path, threads: self.threads, slots, ctx_per_slot, max_batch_tokens, gpu_layers: self.gpu_layers }
    }

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

    fn scheduler(&self, policy: Policy, concurrency: usize, max_batch_tokens: usize) -> SchedulerConfig {
        let mut s = SchedulerConfig::new(policy, concurrency, max_batch_tokens);
        s.chunk_tokens = self.chunk_tokens;
        s
    }
}

/// Everything a sweep needs from its caller.
pub struct SweepContext<'a> {
    pub model_path: PathBuf,
    /// Prompt ids for (prompt tokens, request index).
    pub prompt: &'a dyn Fn(u32, usize) -> Vec<TokenId>,
    pub stop_tokens: Vec<TokenId>,
    /// Starts the target for each backend name (a worker process, or a server's client).
    pub spawn: Spawner,
    /// Where to keep the run file up to date (atomically, after every point).
    pub out: Option<PathBuf>,
    pub control: RunControl,
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
    run_sweep_with(spec, &SweepExtras::default(), ctx, run, printer, observer)
}

/// [`run_sweep`] with serving options.
pub fn run_sweep_with(
    spec: &SweepSpec,
    extras: &SweepExtras,
    ctx: &SweepContext<'_>,
    run: &mut RunFile,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<usize> {
    run_points(spec, extras, spec.points_with(extras), ctx, run, printer, observer)
}

/// Run a list of points (a sweep's grid, or a demo's hand-made list) on workers loaded
/// once per backend. `spec` gives threads, chunk size and the like; `extras` batch limits
/// and SLOs. Returns the number of points that had errors.
pub fn run_points(
    spec: &SweepSpec,
    extras: &SweepExtras,
    points: Vec<SweepPoint>,
    ctx: &SweepContext<'_>,
    run: &mut RunFile,
    printer: &mut dyn Printer,
    observer: &mut dyn SweepObserver,
) -> anyhow::Result<usize> {
    printer.header(run)?;
    let total = points.len();
    let mut worker: Option<(String, Box<dyn Target>)> = None;
    let mut failed_points = 0;
    // A backend that cannot load the model will not load it for the next point either.
    let mut load_failures: std::collections::HashMap<String, String> = Default::default();
    let load_spec = spec.load_spec_for(ctx.model_path.clone(), &points, extras);
    let prompts_sent = std::cell::Cell::new(0usize);
    let mut prompts_for: Option<String> = None;
    for (index, point) in points.into_iter().enumerate() {
        let SweepPoint { backend, policy, spec: point, load, repetition } = point;
        if ctx.control.stop.load(std::sync::atomic::Ordering::Relaxed) {
            run.stopped = true;
            break;
        }
        observer.point_started(index, total, &backend, policy, &point);
        let mut config = spec.scheduler(policy, extras.max_batch_seqs.unwrap_or(point.concurrency), load_spec.max_batch_tokens);
        config.prefix_cache = load.prefix_cache;
        let fail = |why: String| {
            let mut result = failed_point(&backend, policy, &point, why).with_load(&load);
            result.judge(extras.slo);
            result.repetition = repetition;
            result
        };
        // Reuse the worker for the same backend; otherwise (new backend, or it died) start one.
        let reuse = match worker.as_mut() {
            Some((b, w)) => *b == backend && !w.is_gone(),
            None => false,
        };
        if let Some(why) = load_failures.get(&backend) {
            failed_points += 1;
            finish_point(run, fail(why.clone()), printer, observer, ctx)?;
            continue;
        }
        if !reuse {
            worker = None; // shut the previous one down before loading the next
            observer.loading(&backend);
            match (ctx.spawn)(&backend, &load_spec, &config) {
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
                    failed_points += 1;
                    finish_point(run, fail(why), printer, observer, ctx)?;
                    continue;
                }
            }
        }
        let (_, w) = worker.as_mut().expect("set above");
        if load.prefix_cache && !w.schedules_itself() && !w.info().capabilities.prefix_copy {
            failed_points += 1;
            let why = format!("{backend}: this backend cannot copy a cached prefix between sequences (capability prefix_copy is false); run it with --prefix-cache off");
            finish_point(run, fail(why), printer, observer, ctx)?;
            continue;
        }
        if let Err(e) = w.configure(&config) {
            failed_points += 1;
            worker = None;
            finish_point(run, fail(e.to_string()), printer, observer, ctx)?;
            continue;
        }
        let shared = load.prefix_tokens > 0;
        // Every request of a backend's points (warm-ups included) gets a prompt of its own: a
        // server that caches prompts (llama-server, vLLM, SGLang) would otherwise answer a
        // repeated one from its cache and report a TTFT no new prompt gets. Each backend gets
        // the same sequence (the seed moves it), so backends are compared on the same prompts.
        if prompts_for.as_deref() != Some(backend.as_str()) {
            prompts_for = Some(backend.clone());
            prompts_sent.set((extras.seed as usize).wrapping_mul(1 << 20));
        }
        let prompt = |d: &Draw, _: usize| {
            let variant = prompts_sent.get();
            prompts_sent.set(variant + 1);
            crate::workload::prefixed_prompt(ctx.prompt, if shared { d.prefix_tokens } else { 0 }, d.prompt_tokens, variant)
        };
        w.reset_peak_rss();
        let measured = run_point(w.as_mut(), &point, &load, &prompt, &ctx.stop_tokens, &ctx.control, observer);
        let peak_rss = w.peak_rss_mib();
        let by_server = w.schedules_itself();
        if measured.worker_error.is_some() {
            worker = None;
        }
        let stopped = measured.stopped;
        let mut result = PointResult::from_run(&backend, policy, &point, measured).with_load(&load);
        result.scheduled_by_server = by_server;
        result.judge(extras.slo);
        result.worker_peak_rss_mib = peak_rss;
        result.repetition = repetition;
        if result.errors > 0 || (result.requests == 0 && !stopped) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prompt_tokens: Vec<u32>) -> SweepSpec {
        SweepSpec {
            backends: vec!["llama".into()],
            policies: vec![Policy::Continuous, Policy::Static],
            prompt_tokens,
            concurrency: vec![1],
            max_tokens: vec![16],
            requests: 2,
            warmup: 0,
            threads: 0,
            stop_at_eos: false,
            chunk_tokens: crate::scheduler::DEFAULT_CHUNK_TOKENS,
            gpu_layers: None,
            servers: Vec::new(),
        }
    }

    #[test]
    fn a_range_and_a_fixed_length_with_the_same_upper_end_stay_apart() {
        // `--prompt-tokens 64..512,512`: the second point is the fixed 512, not the range again.
        let extras = SweepExtras { prompt_tokens_from: vec![Some(64), None], ..Default::default() };
        let points = spec(vec![512, 512]).points_with(&extras);
        let continuous: Vec<_> = points.iter().filter(|p| p.policy == Policy::Continuous).collect();
        assert_eq!(continuous.len(), 2);
        assert_eq!((continuous[0].spec.prompt_tokens, continuous[0].load.prompt_tokens_from), (512, Some(64)));
        assert_eq!((continuous[1].spec.prompt_tokens, continuous[1].load.prompt_tokens_from), (512, None));
    }

    #[test]
    fn a_server_is_measured_once_per_point_not_once_per_policy() {
        let mut s = spec(vec![64]);
        s.backends.push("local-server".into());
        s.servers = vec!["local-server".into()];
        let extras = SweepExtras { prefix_cache: vec![false, true], ..Default::default() };
        let points = s.points_with(&extras);
        let of = |b: &str| points.iter().filter(|p| p.backend == b).count();
        assert_eq!((of("llama"), of("local-server")), (4, 1));
    }

    #[test]
    fn repetitions_run_the_whole_grid_again_backend_by_backend() {
        let mut s = spec(vec![64, 128]);
        s.backends.push("candle".into());
        let once = s.points_with(&SweepExtras::default());
        assert!(once.iter().all(|p| p.repetition.is_none()));
        let extras = SweepExtras { repetitions: 3, ..Default::default() };
        let points = s.points_with(&extras);
        assert_eq!(points.len(), 3 * once.len());
        // Per backend: all of its grid (4 points) for repetition 1, then 2, then 3.
        let order: Vec<(&str, Option<u32>)> = points.iter().map(|p| (p.backend.as_str(), p.repetition)).collect();
        let expect: Vec<(&str, Option<u32>)> =
            ["llama", "candle"].iter().flat_map(|&b| (1..=3).flat_map(move |r| std::iter::repeat_n((b, Some(r)), 4))).collect();
        assert_eq!(order, expect);
        // Each repetition is the same grid.
        let grid = |r: u32| points.iter().filter(|p| p.repetition == Some(r)).map(|p| (p.backend.clone(), p.policy, p.spec.clone())).collect::<Vec<_>>();
        assert_eq!(grid(1), grid(3));
        assert!(SweepExtras { repetitions: 0, ..Default::default() }.validate(&s, 1024).unwrap_err().contains("--repetitions"));
    }
}
