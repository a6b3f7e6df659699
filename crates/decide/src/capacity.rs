//! Capacity search and the deadline planner: measurements chosen one after another from the
//! figures of the last, on one worker (or server) that stays loaded.
//!
//! A capacity search finds the highest arrival rate (or number of clients) at which a
//! workload's objectives still hold: it brackets by doubling (or halving) from a start, then
//! bisects until the lowest failing setting is within a tolerance of the highest holding
//! one. Each step is a short trial whose verdict rests on a confidence interval of the share
//! of requests that met the objectives ([`lx_results::decision::verdict`]), not on one
//! sample; a trial ends as soon as more requests have missed than the target allows, so a
//! step past saturation costs seconds, not a queue's worth of waiting.
//!
//! The deadline planner measures throughput against concurrency and answers with the
//! smallest concurrency whose throughput finishes the job in time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use lx_client::records::RequestRecord;
use lx_engine::scheduler::Policy;
use lx_client::traffic::{Arrivals, Observer, PointSpec, RunControl};
use lx_results::decision::{attainment_interval, clients, duration, fewest_to_hold, misses_allowed, smallest_meeting, verdict, Axis, DeadlineRecord, Objectives, SearchRecord, Trial, Verdict};
use lx_results::printers::Printer;
use lx_results::results::{PointResult, RunFile, Slo};

use lx_run::sweep::{Session, SweepContext, SweepError, SweepObserver, SweepPlan, SweepPoint};

/// Requests a trial sends at least: with all 20 on time, the 90% interval's low end is 0.924,
/// enough to hold a 95% target within the indifference margin.
pub const TRIAL_REQUESTS: usize = 20;

/// Longest pause after a trial cut short on a server, for the streams it abandoned to end.
const SETTLE_MAX_S: f64 = 30.0;

/// Requests of the probe before a rate search: one at a time, each alone on the worker.
pub const PROBE_REQUESTS: usize = 3;

/// An open-loop trial of `requests` at `rate` req/s is expected to take this long: the
/// arrivals, a tenth more for their spread, and a few seconds for the last to drain.
pub fn rate_trial_s(requests: usize, rate: f64) -> f64 {
    requests as f64 / rate * 1.1 + 5.0
}

/// How a trial fits what is left of the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fit {
    Whole,
    /// With this many requests.
    Fewer(usize),
    /// Not at all: its fewest requests need this many seconds.
    Needs(f64),
}

/// How an open-loop trial of `requests` at `rate` fits into `left_s` seconds: whole; cut
/// to fewer requests, never fewer than can show `attainment` holds (the interval on the
/// share that met the objectives widens, and the trial's row shows how many it sent); or
/// not at all.
pub fn fit_rate_trial(left_s: f64, rate: f64, requests: usize, attainment: f64) -> Fit {
    if left_s >= rate_trial_s(requests, rate) {
        return Fit::Whole;
    }
    let fewest = fewest_to_hold(attainment).min(requests);
    let within = (((left_s - 5.0) / 1.1) * rate).max(0.0).floor() as usize;
    if within >= fewest { Fit::Fewer(within) } else { Fit::Needs(rate_trial_s(fewest, rate)) }
}

/// What one trial runs: `requests` requests at `value` (an open-loop rate on `slots`, or
/// closed-loop clients), expected to take `expect_s`.
#[derive(Debug, Clone, Copy)]
pub struct TrialSpec {
    pub axis: Axis,
    pub value: f64,
    pub slots: usize,
    pub requests: usize,
    /// How long a closed-loop trial is expected to take (one that would outlast the budget is
    /// not started); an open-loop trial's follows from its requests and rate
    /// ([`fit_rate_trial`]), and this is not read.
    pub expect_s: f64,
    /// Which workload: every trial of a search draws the same (0): the same lengths, and at
    /// every rate the same Poisson schedule compressed or stretched, so that trials differ
    /// only in the rate and candidates see the same requests. A confirmation draws afresh
    /// (1, 2, ...).
    pub draw: u64,
    /// Ends the trial as soon as more requests have missed than the target allows (a probe
    /// runs to the end: it measures time, not the objectives).
    pub judged: bool,
    /// May run past `Bench::until`, up to `Bench::stretch`.
    pub stretch: bool,
}

impl TrialSpec {
    /// A trial of a search or a plan, judged, within the budget.
    pub fn new(axis: Axis, value: f64, slots: usize, requests: usize, expect_s: f64) -> TrialSpec {
        TrialSpec { axis, value, slots, requests, expect_s, draw: 0, judged: true, stretch: false }
    }
}

/// Where a search may go and when it stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    pub axis: Axis,
    pub start: f64,
    /// Lowest setting tried: below it, the answer is "none holds".
    pub floor: f64,
    /// Highest setting tried: at it, the answer is "at least this".
    pub ceiling: f64,
    /// Stop once the lowest failing setting is within this fraction above the highest holding
    /// one (rates); clients stop at neighbours.
    pub tolerance: f64,
    pub max_trials: usize,
}

/// What to measure next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Measure(f64),
    Done(String),
}

impl Search {
    /// A rate search from `start` req/s: down to 1/64 of it, up to 1000 req/s, 15% tolerance.
    pub fn rate(start: f64) -> Search {
        Search { axis: Axis::Rate, start, floor: start / 64.0, ceiling: 1000.0, tolerance: 0.15, max_trials: 16 }
    }

    /// A concurrency search from `start` clients, up to `most`.
    pub fn concurrency(start: usize, most: usize) -> Search {
        Search { axis: Axis::Concurrency, start: start.clamp(1, most.max(1)) as f64, floor: 1.0, ceiling: most.max(1) as f64, tolerance: 0.0, max_trials: 16 }
    }

    /// The highest setting that held below the lowest that did not (a saturated trial never
    /// holds), and that lowest one.
    pub fn bracket(trials: &[Trial]) -> (Option<f64>, Option<f64>) {
        let fails = trials.iter().filter(|t| t.verdict != Verdict::Holds || t.saturated).map(|t| t.value).min_by(f64::total_cmp);
        let holds = trials.iter().filter(|t| t.verdict == Verdict::Holds && !t.saturated && fails.is_none_or(|f| t.value < f)).map(|t| t.value).max_by(f64::total_cmp);
        (holds, fails)
    }

    /// The next setting to measure, or why the search is over.
    pub fn next(&self, trials: &[Trial]) -> Next {
        if trials.is_empty() {
            return Next::Measure(self.start);
        }
        if trials.len() >= self.max_trials {
            return Next::Done(format!("{} trials, the most a search makes", self.max_trials));
        }
        let rate = self.axis == Axis::Rate;
        let v = match Search::bracket(trials) {
            (None, None) => return Next::Done("no trial measured anything".into()),
            (None, Some(f)) => {
                if f <= self.floor {
                    return Next::Done(format!("the objectives do not hold at the lowest setting, {}", self.axis.show(self.floor)));
                }
                if rate { (f / 2.0).max(self.floor) } else { (f / 2.0).floor().max(self.floor) }
            }
            (Some(h), None) => {
                if h >= self.ceiling {
                    return Next::Done(format!("the objectives hold at the highest setting, {}", self.axis.show(self.ceiling)));
                }
                (h * 2.0).min(self.ceiling)
            }
            (Some(h), Some(f)) => {
                if rate && f <= h * (1.0 + self.tolerance) {
                    return Next::Done(format!("bracketed within {:.0}%", self.tolerance * 100.0));
                }
                if !rate && f - h <= 1.0 {
                    return Next::Done("bracketed between neighbouring client counts".into());
                }
                if rate { (h * f).sqrt() } else { ((h + f) / 2.0).floor() }
            }
        };
        let v = if rate { round_3(v) } else { v };
        if trials.iter().any(|t| t.value == v) {
            return Next::Done(format!("{} was measured already (the figures are not monotonic there)", self.axis.show(v)));
        }
        Next::Measure(v)
    }
}

/// Three significant figures: rates a person can read and type again.
fn round_3(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

/// Runs trials on one session: each trial a point of the run file (printed and saved like a
/// sweep's), judged against the objectives, within a time budget.
pub struct Bench<'a, 'c> {
    /// The workload (lengths, prefix, prompts, threads, batch limits) every trial shares.
    pub plan: &'a SweepPlan,
    pub ctx: &'a SweepContext<'c>,
    pub session: &'a mut Session,
    pub run: &'a mut RunFile,
    pub printer: &'a mut dyn Printer,
    pub observer: &'a mut dyn SweepObserver,
    pub objectives: Objectives,
    /// No trial starts that would not end by then.
    pub until: Option<Instant>,
    /// A search that has found no setting that holds may go on until then: with nothing
    /// found, the time kept for confirming an answer has nothing to confirm.
    pub stretch: Option<Instant>,
    /// Backends that have been warmed up (their first trial sends a few unmeasured requests).
    warmed: Vec<String>,
}

/// Why a trial did not run.
#[derive(Debug)]
pub enum Skipped {
    /// The budget would end before the trial did: it needs `needs_s` (at a rate, with the
    /// fewest requests that can show the objectives hold), `left_s` were left.
    Budget { needs_s: f64, left_s: f64 },
    /// The user stopped the run.
    Stopped,
}

impl Skipped {
    /// Why the trial at `value` did not run, as a sentence's end.
    pub fn why(&self, axis: Axis, value: f64) -> String {
        match self {
            Skipped::Budget { needs_s, left_s } => {
                format!("the budget ran out before a trial at {}: it needs about {}, {} were left", axis.show(value), duration(*needs_s), duration(*left_s))
            }
            Skipped::Stopped => "stopped by the user".into(),
        }
    }
}

impl<'a, 'c> Bench<'a, 'c> {
    pub fn new(
        plan: &'a SweepPlan,
        ctx: &'a SweepContext<'c>,
        session: &'a mut Session,
        run: &'a mut RunFile,
        printer: &'a mut dyn Printer,
        observer: &'a mut dyn SweepObserver,
        objectives: Objectives,
    ) -> Self {
        Bench { plan, ctx, session, run, printer, observer, objectives, until: None, stretch: None, warmed: Vec::new() }
    }

    pub fn stopped(&self) -> bool {
        self.ctx.control.stop.load(Ordering::Relaxed)
    }

    /// Seconds left of the budget (`None`: no budget); with `stretch`, up to `self.stretch`
    /// where it is set.
    pub fn left_s(&self, stretch: bool) -> Option<f64> {
        let until = if stretch { self.stretch.or(self.until) } else { self.until };
        until.map(|u| u.saturating_duration_since(Instant::now()).as_secs_f64())
    }

    /// One trial on `backend` as `spec` says. One that would outlast the budget is not
    /// started, except that at a rate, where the budget cannot hold its requests whole, it
    /// sends as many as fit ([`fit_rate_trial`]) and its point says so.
    pub fn trial(&mut self, backend: &str, policy: Policy, spec: TrialSpec) -> Result<Result<Trial, Skipped>, SweepError> {
        let TrialSpec { axis, value, slots, mut requests, expect_s, draw, judged, stretch } = spec;
        if self.stopped() {
            return Ok(Err(Skipped::Stopped));
        }
        if let Some(left_s) = self.left_s(stretch) {
            match axis {
                Axis::Rate => match fit_rate_trial(left_s, value, requests, self.objectives.attainment) {
                    Fit::Whole => {}
                    Fit::Fewer(n) => requests = n,
                    Fit::Needs(needs_s) => return Ok(Err(Skipped::Budget { needs_s, left_s })),
                },
                Axis::Concurrency if left_s < expect_s => return Ok(Err(Skipped::Budget { needs_s: expect_s, left_s })),
                Axis::Concurrency => {}
            }
        }
        let first = !self.warmed.iter().any(|b| b == backend);
        let (concurrency, arrivals) = match axis {
            Axis::Rate => (slots, Arrivals::Poisson { rate: value }),
            Axis::Concurrency => (value as usize, Arrivals::Closed),
        };
        let mut point = self.plan.points().into_iter().find(|p| p.backend == backend).unwrap_or_else(|| self.plan_point(backend));
        point.policy = policy;
        point.spec = PointSpec { concurrency, requests, warmup: if first { lx_engine::defaults::trial_warmup(concurrency) } else { 0 }, ..point.spec };
        point.traffic.arrivals = arrivals;
        point.traffic.duration_s = None;
        point.traffic.seed = self.plan.seed.wrapping_add(draw);
        point.repetition = None;
        let index = self.run.points.len();
        let trial_stop = Arc::new(AtomicBool::new(false));
        let ctx = SweepContext {
            model_path: self.ctx.model_path.clone(),
            model_stamp: self.ctx.model_stamp.clone(),
            prompts: self.ctx.prompts,
            stop_tokens: self.ctx.stop_tokens.clone(),
            spawn: self.ctx.spawn.clone(),
            out: self.ctx.out.clone(),
            control: RunControl { stop: trial_stop.clone(), hang_timeout: self.ctx.control.hang_timeout },
            fidelity: self.ctx.fidelity.clone(),
        };
        let mut watch = Watch {
            inner: &mut *self.observer,
            slo: self.objectives.slo(),
            allowed: if judged { misses_allowed(requests, self.objectives.attainment) } else { usize::MAX },
            misses: 0,
            stop: trial_stop,
            user: self.ctx.control.stop.clone(),
            ended_early: false,
        };
        self.session.run(self.plan, vec![point], &ctx, self.run, &mut *self.printer, &mut watch)?;
        let (ended_early, misses, allowed) = (watch.ended_early, watch.misses, watch.allowed);
        drop(watch);
        let user = self.stopped();
        self.run.stopped = user;
        let Some(result) = self.run.points.get_mut(index) else { return Ok(Err(Skipped::Stopped)) };
        if result.errors > 0 && result.requests == 0 && !ended_early {
            // A worker that could not load or died: nothing about the objectives was measured.
            return Err(SweepError::Trial(format!("{backend}: {}", result.error_messages.join("; "))));
        }
        if ended_early && result.scheduled_by_server {
            // A server may go on computing a stream its client left until it notices; the
            // next trial would share the machine with it. Its longest request bounds that.
            let longest_ms = result.e2e_ms.max.min(SETTLE_MAX_S * 1e3);
            std::thread::sleep(std::time::Duration::from_secs_f64(longest_ms.max(0.0) / 1e3));
        }
        if ended_early && !user {
            result.warnings.push(format!(
                "ended early by the search: {} requests missed the objectives, more than the {} of {requests} the target allows",
                misses, allowed
            ));
        }
        if requests < spec.requests {
            result.warnings.push(format!("fitted into the budget: {requests} requests instead of {}, so a wider interval on the share that met the objectives", spec.requests));
        }
        if first {
            self.warmed.push(backend.to_string());
        }
        if user {
            return Ok(Err(Skipped::Stopped));
        }
        let result: &PointResult = result;
        let mut trial = judge(value, index, result, &self.objectives);
        if ended_early {
            // Cut short, its window says nothing of where the queue was heading.
            trial.ended_early = true;
            trial.saturated = false;
            trial.verdict = Verdict::Fails;
        }
        Ok(Ok(trial))
    }

    /// A point of the plan's workload on `backend` (a backend the plan does not list).
    fn plan_point(&self, backend: &str) -> SweepPoint {
        let plan = SweepPlan { backends: vec![backend.to_string()], ..self.plan.clone() };
        plan.points().remove(0)
    }

    /// One request at a time on `backend`, [`PROBE_REQUESTS`] of the workload's requests: how
    /// long one takes alone on this machine (its service time), where a rate search starts.
    pub fn probe(&mut self, backend: &str, policy: Policy) -> Result<Result<Trial, Skipped>, SweepError> {
        let spec = TrialSpec { judged: false, ..TrialSpec::new(Axis::Concurrency, 1.0, 1, PROBE_REQUESTS, 0.0) };
        self.trial(backend, policy, spec)
    }

    /// Finds `backend`'s capacity along `search`'s axis. A rate search starts from the
    /// machine's own speed: one request's service time alone (a probe), and `search.start`
    /// only where the probe measured nothing.
    pub fn search(&mut self, backend: &str, policy: Policy, mut search: Search, slots: usize) -> Result<SearchRecord, SweepError> {
        let began = Instant::now();
        let mut trials: Vec<Trial> = Vec::new();
        let mut probe = None;
        let mut needs_s = None;
        if search.axis == Axis::Rate {
            match self.probe(backend, policy)? {
                Ok(t) if t.throughput_rps > 0.0 && t.unfinished == 0 => {
                    search = Search::rate(round_3(t.throughput_rps).min(search.ceiling));
                    probe = Some(t);
                }
                // Requests that failed: the preset's start it is.
                Ok(_) => {}
                Err(skipped) => return Ok(self.record(backend, policy, &search, trials, None, began, skipped.why(Axis::Concurrency, 1.0), None)),
            }
        }
        let ended = loop {
            let value = match search.next(&trials) {
                Next::Measure(v) => v,
                Next::Done(why) => break why,
            };
            let (requests, expect) = match search.axis {
                Axis::Rate => (TRIAL_REQUESTS, 0.0),
                Axis::Concurrency => {
                    let requests = TRIAL_REQUESTS.max(3 * value as usize);
                    // About half the requests at the last trial's throughput.
                    let service = trials.iter().rev().find(|t| t.throughput_rps > 0.0).map(|t| 1.0 / t.throughput_rps);
                    (requests, service.map_or(0.0, |s| s * requests as f64 * 0.5))
                }
            };
            let spec = TrialSpec { stretch: Search::bracket(&trials).0.is_none(), ..TrialSpec::new(search.axis, value, slots, requests, expect) };
            match self.trial(backend, policy, spec)? {
                Ok(t) => trials.push(t),
                Err(skipped) => {
                    if let Skipped::Budget { needs_s: s, .. } = skipped {
                        needs_s = Some(s);
                    }
                    break skipped.why(search.axis, value);
                }
            }
        };
        Ok(self.record(backend, policy, &search, trials, probe, began, ended, needs_s))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(&self, backend: &str, policy: Policy, search: &Search, trials: Vec<Trial>, probe: Option<Trial>, began: Instant, ended: String, needs_s: Option<f64>) -> SearchRecord {
        let (capacity, fails_at) = Search::bracket(&trials);
        SearchRecord {
            backend: backend.to_string(),
            policy: policy.to_string(),
            axis: search.axis,
            objectives: self.objectives,
            trials,
            capacity,
            fails_at,
            tolerance: search.tolerance,
            ended,
            probe,
            spent_s: began.elapsed().as_secs_f64(),
            needs_s,
        }
    }

    /// The smallest concurrency (closed loop, doubling from 1 up to `most`, then bisected)
    /// whose measured throughput finishes `requests` within `deadline_s`.
    pub fn plan_deadline(&mut self, backend: &str, policy: Policy, requests: usize, deadline_s: f64, most: usize) -> Result<DeadlineRecord, SweepError> {
        let mut trials: Vec<Trial> = Vec::new();
        let measured = |trials: &[Trial]| trials.iter().map(|t| (t.value as usize, t.throughput_rps)).collect::<Vec<_>>();
        let mut c = 1usize;
        let ended = loop {
            let n = (3 * c).max(12);
            let expect = trials.last().map_or(0.0, |t| n as f64 / t.throughput_rps.max(1e-9) * 0.5);
            match self.trial(backend, policy, TrialSpec::new(Axis::Concurrency, c as f64, c, n, expect))? {
                Ok(t) => trials.push(t),
                Err(skipped) => break skipped.why(Axis::Concurrency, c as f64),
            }
            let m = measured(&trials);
            if let Some((meets, _)) = smallest_meeting(&m, requests, deadline_s) {
                // Between the largest that does not meet it and this one, halve the gap.
                let below = m.iter().filter(|&&(k, _)| k < meets).map(|&(k, _)| k).max().unwrap_or(0);
                if meets - below <= 1 {
                    break format!("the fewest that meet it: {}", clients(meets));
                }
                c = (below + meets) / 2;
                continue;
            }
            let gain = match m.as_slice() {
                [.., (_, before), (_, now)] => now / before,
                _ => f64::INFINITY,
            };
            if gain < 1.05 {
                break format!("throughput stopped growing ({:.0}% from {} to {c})", (gain - 1.0) * 100.0, m[m.len() - 2].0);
            }
            if c >= most {
                break format!("{}, the most this run loads", clients(most));
            }
            c = (c * 2).min(most);
        };
        let m = measured(&trials);
        let best = m.iter().map(|&(_, rps)| lx_results::decision::finish_s(requests, rps)).min_by(f64::total_cmp);
        let meets = smallest_meeting(&m, requests, deadline_s);
        Ok(DeadlineRecord {
            backend: backend.to_string(),
            policy: policy.to_string(),
            requests,
            deadline_s,
            trials,
            concurrency: meets.map(|(c, _)| c),
            finish_s: meets.map(|(_, f)| f),
            best_finish_s: best,
            ended,
        })
    }
}

/// A trial's figures from its point (index `index` in the run), judged against
/// `objectives`: every request that arrived counts, failed or cancelled ones as misses.
pub fn judge(value: f64, index: usize, point: &PointResult, objectives: &Objectives) -> Trial {
    let slo = objectives.slo();
    let n = point.samples.len();
    let met = point.samples.iter().filter(|r| slo.met(r)).count();
    let missed_ttft = point.samples.iter().filter(|r| r.ok() && slo.ttft_ms.is_some_and(|max| r.ttft_ms().is_none_or(|t| t > max))).count();
    let missed_decode = point.samples.iter().filter(|r| r.ok() && slo.decode_tps.is_some_and(|min| r.decode_tps().is_some_and(|d| d < min))).count();
    let (low, high) = attainment_interval(met, n);
    let window_s = point.window_s;
    Trial {
        value,
        point: index,
        requests: n,
        met,
        missed_ttft,
        missed_decode,
        unfinished: point.samples.iter().filter(|r| !r.ok()).count(),
        attainment_low: low,
        attainment_high: high,
        verdict: verdict(met, n, objectives.attainment),
        goodput_rpm: if window_s > 0.0 { met as f64 / window_s * 60.0 } else { 0.0 },
        throughput_rps: if window_s > 0.0 { point.requests as f64 / window_s } else { 0.0 },
        throughput_tps: point.throughput_tps,
        ttft_p95_ms: point.ttft_ms.p95,
        saturated: saturated(point),
        ended_early: false,
    }
}

/// Past saturation: completions fell behind arrivals by more than a tenth, and the queue
/// wait of the last third of requests is more than twice the first third's (and at least
/// 100 ms longer). Open-loop points only.
pub fn saturated(point: &PointResult) -> bool {
    let Some(rate) = point.rate() else { return false };
    let mut waits: Vec<(f64, f64)> = point.samples.iter().filter_map(|r| Some((r.submit_ms, r.ttft_ms()?))).collect();
    if waits.len() < 6 || point.window_s <= 0.0 {
        return false;
    }
    waits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let third = waits.len() / 3;
    let mean = |w: &[(f64, f64)]| w.iter().map(|x| x.1).sum::<f64>() / w.len() as f64;
    let (first, last) = (mean(&waits[..third]), mean(&waits[waits.len() - third..]));
    let completions = point.requests as f64 / point.window_s;
    completions < 0.9 * rate && last > 2.0 * first && last - first > 100.0
}

/// Forwards everything to the caller's observer, counts requests that missed the objectives,
/// and stops the trial once they are more than the target allows (or the user stops).
struct Watch<'o> {
    inner: &'o mut dyn SweepObserver,
    slo: Slo,
    allowed: usize,
    misses: usize,
    stop: Arc<AtomicBool>,
    user: Arc<AtomicBool>,
    ended_early: bool,
}

impl Watch<'_> {
    fn follow_user(&self) {
        if self.user.load(Ordering::Relaxed) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

impl Observer for Watch<'_> {
    fn token(&mut self, id: u64, index: u32, token: lx_engine::backend::TokenId, at_ms: f64) {
        self.follow_user();
        self.inner.token(id, index, token, at_ms);
    }

    fn done(&mut self, record: &RequestRecord) {
        self.follow_user();
        // Requests cancelled by the stop itself are not misses of their own.
        if !self.stop.load(Ordering::Relaxed) && !self.slo.met(record) {
            self.misses += 1;
            if self.misses > self.allowed {
                self.ended_early = true;
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        self.inner.done(record);
    }
}

impl SweepObserver for Watch<'_> {
    fn loading(&mut self, backend: &str) {
        self.inner.loading(backend);
    }
    fn loaded(&mut self, backend: &str, info: &lx_engine::backend::BackendInfo, load_ms: f64) {
        self.inner.loaded(backend, info, load_ms);
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &PointSpec) {
        self.inner.point_started(index, total, backend, policy, spec);
    }
    fn point_done(&mut self, point: &PointResult) {
        self.inner.point_done(point);
    }
    fn run_file_unsaved(&mut self, why: &str) {
        self.inner.run_file_unsaved(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An open-loop point whose i-th request arrives at `i × gap` ms and waits `wait(i)` ms
    /// for its first token, in a window of `window_ms`.
    fn open_point(rate: f64, n: usize, gap: f64, wait: impl Fn(usize) -> f64, window_ms: f64) -> PointResult {
        use lx_client::records::RequestRecord;
        let records = (0..n)
            .map(|i| {
                let mut r = RequestRecord::new(i as u64, 16, 2, i as f64 * gap);
                r.token_ms = vec![wait(i), wait(i) + 100.0];
                r.tokens = vec![1, 2];
                r.token_steps = vec![1, 2];
                r.finish = Some(lx_engine::scheduler::FinishReason::Length);
                r
            })
            .collect();
        let spec = lx_client::traffic::PointSpec { prompt_tokens: 16, max_tokens: 2, concurrency: 4, requests: n, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let run = lx_client::traffic::PointRun { records, window_ms, ..Default::default() };
        let traffic = lx_client::traffic::Traffic { arrivals: lx_client::traffic::Arrivals::Poisson { rate }, ..Default::default() };
        lx_results::results::PointResult::from_run("b", lx_engine::scheduler::Policy::Continuous, &spec, run).with_traffic(&traffic)
    }

    #[test]
    fn saturation_is_a_growing_wait_and_completions_behind_arrivals() {
        // 30 requests offered at 10/s (every 100 ms) but completed over 6 s (5/s), each
        // waiting 50 ms longer than the one before: saturated.
        assert!(saturated(&open_point(10.0, 30, 100.0, |i| 100.0 + 50.0 * i as f64, 6000.0)));
        // The same waits with completions keeping up: a burst, not saturation.
        assert!(!saturated(&open_point(10.0, 30, 100.0, |i| 100.0 + 50.0 * i as f64, 3000.0)));
        // Behind arrivals, but the wait does not grow: a slow server, not a queue.
        assert!(!saturated(&open_point(10.0, 30, 100.0, |_| 400.0, 6000.0)));
        let p = open_point(10.0, 30, 100.0, |i| if i < 27 { 100.0 } else { 5000.0 }, 3000.0);
        let t = judge(10.0, 3, &p, &Objectives { ttft_ms: Some(1000.0), decode_tps: None, attainment: 0.95 });
        assert_eq!((t.requests, t.met, t.missed_ttft, t.missed_decode, t.unfinished, t.point), (30, 27, 3, 0, 0, 3));
        assert_eq!(t.verdict, Verdict::Fails, "3 misses of 30 is more than 5% allows");
        assert!((t.throughput_rps - 10.0).abs() < 1e-9 && (t.goodput_rpm - 27.0 / 3.0 * 60.0).abs() < 1e-9);
    }

    /// A trial of a system whose objectives hold below `capacity` and fail above it.
    fn judged(value: f64, capacity: f64) -> Trial {
        let met = if value <= capacity { 20 } else { 10 };
        Trial {
            value,
            point: 0,
            requests: 20,
            met,
            missed_ttft: 20 - met,
            missed_decode: 0,
            unfinished: 0,
            attainment_low: 0.0,
            attainment_high: 1.0,
            verdict: lx_results::decision::verdict(met, 20, 0.95),
            goodput_rpm: 0.0,
            throughput_rps: value.min(capacity),
            throughput_tps: 0.0,
            ttft_p95_ms: 0.0,
            saturated: false,
            ended_early: false,
        }
    }

    fn run(search: Search, capacity: f64) -> (Option<f64>, Option<f64>, usize, String) {
        let mut trials = Vec::new();
        loop {
            match search.next(&trials) {
                Next::Measure(v) => trials.push(judged(v, capacity)),
                Next::Done(why) => {
                    let (h, f) = Search::bracket(&trials);
                    return (h, f, trials.len(), why);
                }
            }
        }
    }

    /// Whatever the capacity and the start, the search brackets it within its tolerance in a
    /// bounded number of trials: doubling or halving to cross it, then bisecting.
    #[test]
    fn a_rate_search_brackets_any_capacity_within_its_tolerance() {
        for start in [0.05, 0.5, 1.0, 7.0] {
            for capacity in [0.031, 0.2, 0.5, 0.77, 1.3, 4.2, 19.0, 150.0] {
                let search = Search::rate(start);
                if capacity < search.floor {
                    continue;
                }
                let (h, f, n, why) = run(search, capacity);
                let (h, f) = (h.expect("held somewhere"), f.expect("failed somewhere"));
                assert!(h <= capacity && f > capacity, "start {start}, capacity {capacity}: {h}..{f}");
                assert!(f <= h * 1.15 + 1e-9, "within the tolerance: {h}..{f} ({why})");
                let crossings = ((capacity / start).log2().abs().ceil() as usize) + 1;
                assert!(n <= crossings + 6, "start {start}, capacity {capacity}: {n} trials");
            }
        }
        // Below the floor: says so, and stops.
        let (h, f, n, why) = run(Search::rate(1.0), 0.001);
        assert_eq!((h, f.is_some()), (None, true));
        assert!(why.contains("do not hold at the lowest") && n <= 8, "{why} after {n}");
        // Above the ceiling: says so.
        let (h, _, _, why) = run(Search { ceiling: 8.0, ..Search::rate(1.0) }, 100.0);
        assert_eq!(h, Some(8.0));
        assert!(why.contains("hold at the highest"), "{why}");
    }

    #[test]
    fn a_concurrency_search_ends_on_neighbouring_client_counts() {
        for capacity in [1.0, 3.0, 5.0, 6.0, 13.0, 31.0] {
            let (h, f, n, _) = run(Search::concurrency(1, 64), capacity);
            assert_eq!((h, f), (Some(capacity), Some(capacity + 1.0)), "capacity {capacity}");
            assert!(n <= 16);
        }
        let (h, f, _, why) = run(Search::concurrency(4, 8), 100.0);
        assert_eq!((h, f), (Some(8.0), None), "{why}");
    }

    /// A trial that the budget cannot hold whole sends fewer requests, never fewer than can
    /// show the target holds; below that it says how long it needs.
    #[test]
    fn a_rate_trial_fits_what_is_left_of_the_budget() {
        let needs = |fit: Fit| match fit {
            Fit::Needs(s) => s,
            other => panic!("{other:?}"),
        };
        // 20 requests at 0.25 req/s: 80 s of arrivals, 93 s in all.
        assert!((rate_trial_s(20, 0.25) - 93.0).abs() < 1e-9);
        assert_eq!(fit_rate_trial(100.0, 0.25, 20, 0.95), Fit::Whole);
        // 83 s left (as after the first trial in a 3-minute advice): 17 requests arrive
        // within 78 ÷ 1.1 s.
        assert_eq!(fit_rate_trial(83.0, 0.25, 20, 0.95), Fit::Fewer(17));
        // 15 is the fewest that can hold 95%: 60 s left, and they need 15 ÷ 0.25 × 1.1 + 5 s.
        assert!((needs(fit_rate_trial(60.0, 0.25, 20, 0.95)) - 71.0).abs() < 1e-9);
        assert!((needs(fit_rate_trial(0.0, 0.25, 20, 0.95)) - 71.0).abs() < 1e-9);
        // A lax target holds on fewer.
        assert_eq!(fit_rate_trial(60.0, 0.25, 20, 0.5), Fit::Fewer(12));
    }

    /// A saturated trial never holds, and a failure that is certain ends a search step at once.
    #[test]
    fn a_saturated_or_failed_trial_bounds_the_bracket() {
        let mut t = judged(2.0, 4.0);
        t.saturated = true;
        assert_eq!(Search::bracket(&[judged(1.0, 4.0), t]), (Some(1.0), Some(2.0)));
        // An unsure trial does not hold either: the capacity reported is one that did.
        let mut unsure = judged(3.0, 4.0);
        unsure.verdict = Verdict::Unsure;
        assert_eq!(Search::bracket(&[judged(1.0, 4.0), judged(2.0, 4.0), unsure]), (Some(2.0), Some(3.0)));
        assert_eq!(round_3(0.123456), 0.123);
        assert_eq!(round_3(1234.5), 1230.0);
    }
}
