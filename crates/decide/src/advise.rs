//! `lx advise`: from a workload preset to a recommendation. It runs the measurements the
//! decision needs within a time budget (a capacity search per candidate for TTFT-bound and
//! mixed presets, a deadline plan for throughput-bound ones), picks the candidate that does
//! best on the metric the preset is judged by, says why and what would change the answer,
//! and confirms it with a fresh run at the recommended setting.

use std::time::{Duration, Instant};

use lx_engine::scheduler::Policy;
use lx_results::decision::{clients, duration, Advice, Axis, Bound, DeadlineRecord, SearchRecord, Trial, Verdict};

use crate::capacity::{Bench, Search, Skipped, TrialSpec, TRIAL_REQUESTS};
use crate::preset::{Job, Preset};
use lx_run::sweep::SweepError;

/// What to advise on.
#[derive(Debug, Clone)]
pub struct Request {
    pub preset: Preset,
    /// Backends and servers to choose from; each backend with each of `policies`.
    pub candidates: Vec<String>,
    /// Those of the candidates that are servers (they schedule requests themselves).
    pub servers: Vec<String>,
    /// What a TTFT-bound or mixed preset's search varies.
    pub axis: Axis,
    /// Overrides the preset's job (throughput-bound presets).
    pub job: Option<Job>,
    /// Our scheduler's policies to compare on each backend (a server schedules itself).
    pub policies: Vec<Policy>,
    /// Most clients a concurrency search or a deadline plan tries.
    pub most_clients: usize,
    pub budget: Duration,
}

/// Share of the budget kept for the confirmation run.
const CONFIRMATION_SHARE: f64 = 0.25;

/// Runs the measurements and returns the advice; every search and plan is also kept in
/// `bench.run.decisions`.
pub fn advise(request: &Request, bench: &mut Bench<'_, '_>) -> Result<Advice, SweepError> {
    let started = Instant::now();
    let budget_s = request.budget.as_secs_f64();
    let searching_until = started + request.budget.mul_f64(1.0 - CONFIRMATION_SHARE);
    let preset = &request.preset;
    // Candidates that could not be measured at all (a backend that cannot load the model).
    let mut unmeasured: Vec<String> = Vec::new();
    let mut advice = match preset.bound {
        Bound::Throughput => {
            let job = request.job.or(preset.job).expect("a throughput-bound preset has a job (checked when read)");
            let plans = each_candidate(request, bench, searching_until, None, &mut unmeasured, |bench, c| {
                let plan = bench.plan_deadline(&c.backend, c.policy, job.requests, job.deadline_s, request.most_clients)?;
                Ok(DeadlineRecord { policy: c.label(), ..plan })
            })?;
            bench.run.decisions.deadlines.extend(plans.iter().cloned());
            bench.until = Some(started + request.budget);
            bench.stretch = None;
            deadline_advice(request, &plans, job, bench)?
        }
        Bound::Ttft | Bound::Mixed => {
            let search = match request.axis {
                Axis::Rate => Search::rate(preset.start_rate),
                Axis::Concurrency => Search::concurrency(preset.slots.min(request.most_clients), request.most_clients),
            };
            let searches = each_candidate(request, bench, searching_until, Some(started + request.budget), &mut unmeasured, |bench, c| {
                let record = bench.search(&c.backend, c.policy, search, preset.slots)?;
                Ok(SearchRecord { policy: c.label(), ..record })
            })?;
            bench.run.decisions.searches.extend(searches.iter().cloned());
            bench.until = Some(started + request.budget);
            bench.stretch = None;
            capacity_advice(request, &searches, bench)?
        }
    };
    advice.because.extend(unmeasured.into_iter().map(|why| format!("not measured: {why}")));
    advice.spent_s = started.elapsed().as_secs_f64();
    advice.budget_s = budget_s;
    bench.run.decisions.advice = Some(advice.clone());
    Ok(advice)
}

/// A backend with one of our policies, or a server (which schedules requests itself).
struct Candidate {
    backend: String,
    policy: Policy,
    server: bool,
}

impl Candidate {
    /// The policy as results record it: ours, or `server`.
    fn label(&self) -> String {
        if self.server { "server".into() } else { self.policy.to_string() }
    }

    /// Each backend with each policy, each server once.
    fn all(request: &Request) -> Vec<Candidate> {
        let first = request.policies.first().copied().unwrap_or(Policy::Continuous);
        let mut out = Vec::new();
        for backend in &request.candidates {
            if request.servers.contains(backend) {
                out.push(Candidate { backend: backend.clone(), policy: first, server: true });
            } else {
                out.extend(request.policies.iter().map(|&policy| Candidate { backend: backend.clone(), policy, server: false }));
            }
        }
        out
    }
}

/// Measures each candidate in turn, each within an equal share of the time left until
/// `until`; the last may search on until `stretch` while nothing it tried holds (the time
/// kept for confirming has nothing to confirm then). A candidate that cannot be measured at
/// all (a backend that cannot load the model) is noted in `unmeasured` and the rest go on;
/// the user's stop ends the round.
fn each_candidate<T>(
    request: &Request,
    bench: &mut Bench<'_, '_>,
    until: Instant,
    stretch: Option<Instant>,
    unmeasured: &mut Vec<String>,
    mut measure: impl FnMut(&mut Bench<'_, '_>, &Candidate) -> Result<T, SweepError>,
) -> Result<Vec<T>, SweepError> {
    let mut measured = Vec::new();
    let candidates = Candidate::all(request);
    let n = candidates.len();
    for (i, c) in candidates.iter().enumerate() {
        let now = Instant::now();
        bench.until = Some(now + until.saturating_duration_since(now) / (n - i) as u32);
        bench.stretch = stretch.filter(|_| i + 1 == n);
        match measure(bench, c) {
            Err(SweepError::Trial(why)) => unmeasured.push(why),
            other => measured.push(other?),
        }
        if bench.stopped() {
            break;
        }
    }
    Ok(measured)
}

/// The policy a record ran with, for the confirmation (a server's is not used).
fn policy_of(recorded: &str, request: &Request) -> Policy {
    recorded.parse().unwrap_or_else(|_| request.policies.first().copied().unwrap_or(Policy::Continuous))
}

/// The metric a search's answer is ranked by: the capacity, or for a mixed preset the
/// goodput measured at it.
fn score(preset: &Preset, s: &SearchRecord) -> Option<f64> {
    let c = s.capacity?;
    match preset.bound {
        Bound::Mixed => s.at_capacity().map(|t| t.goodput_rpm),
        _ => Some(c),
    }
}

fn capacity_advice(request: &Request, searches: &[SearchRecord], bench: &mut Bench<'_, '_>) -> Result<Advice, SweepError> {
    let preset = &request.preset;
    let objectives = preset.objectives.describe();
    let axis = request.axis;
    let optimised = match (preset.bound, axis) {
        (Bound::Mixed, _) => format!("goodput: requests a minute that meet {objectives}, at the highest arrival rate where that share holds"),
        (_, Axis::Rate) => format!("capacity: the highest Poisson arrival rate at which {objectives}, on {} slots", preset.slots),
        (_, Axis::Concurrency) => format!("capacity: the most concurrent clients at which {objectives}"),
    };
    let mut ranked: Vec<(&SearchRecord, f64)> = searches.iter().filter_map(|s| Some((s, score(preset, s)?))).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut advice = empty_advice(optimised);
    let Some(&(best, best_score)) = ranked.first() else {
        advice.because.extend(searches.iter().map(|s| format!("{} ({})", s.answer(), s.ended)));
        advice.because.extend(searches.iter().filter_map(started_from));
        advice.would_change = match budget_that_answers(searches, request.budget.as_secs_f64()) {
            // Cut short, by the user or the budget, not by the machine: say what finishes it.
            _ if bench.stopped() => vec!["letting the search run to its end: it was stopped before any setting held".into()],
            Some(budget) => vec![format!("a budget of {} or more (--budget {}m) leaves time for the trial the search needed next", duration(budget), (budget / 60.0).ceil())],
            None => vec![format!("looser objectives than {objectives}, shorter prompts or outputs, or a faster machine")],
        };
        return Ok(advice);
    };
    let capacity = best.capacity.expect("ranked searches have one");
    advice.backend = Some(best.backend.clone());
    advice.policy = best.policy.clone();
    match axis {
        Axis::Rate => (advice.rate, advice.concurrency) = (Some(capacity), Some(preset.slots)),
        Axis::Concurrency => advice.concurrency = Some(capacity as usize),
    }
    if let Some(t) = best.at_capacity() {
        advice.because.push(format!(
            "{}: {} of {} requests met {objectives} at {} (90% interval of the share {:.0}-{:.0}%), goodput {:.1} req/min",
            best.candidate(),
            t.met,
            t.requests,
            axis.show(capacity),
            t.attainment_low * 100.0,
            t.attainment_high * 100.0,
            t.goodput_rpm
        ));
    }
    advice.because.push(best.answer());
    for (s, sc) in ranked.iter().skip(1) {
        advice.because.push(format!("{} ({:.0}% of {})", s.answer(), sc / best_score * 100.0, best.candidate()));
    }
    for s in searches.iter().filter(|s| s.capacity.is_none()) {
        advice.because.push(s.answer());
    }
    advice.because.extend(searches.iter().filter_map(started_from));
    if let Some(failing) = best.fails_at.and_then(|f| best.trials.iter().find(|t| t.value == f)) {
        advice.would_change.push(binding(preset, axis, failing));
    }
    if let Some(&(runner_up, sc)) = ranked.get(1) {
        let ratio = sc / best_score;
        advice.would_change.push(if ratio >= 1.0 / (1.0 + best.tolerance.max(0.15)) {
            format!("{} comes within the search's tolerance ({:.0}% of {}): a longer --budget measures both more closely before choosing", runner_up.candidate(), ratio * 100.0, best.candidate())
        } else {
            format!("{} would be the choice without {} ({:.0}% of its {})", runner_up.candidate(), best.candidate(), ratio * 100.0, if preset.bound == Bound::Mixed { "goodput" } else { "capacity" })
        });
    }
    if best.fails_at.is_none() {
        advice.would_change.push(format!("the search did not find where the objectives stop holding ({}): the capacity is at least this", best.ended));
    }
    // Confirm on fresh arrivals at the recommendation. A capacity found on 20 requests can
    // miss on the next 20 (it sits at the edge by construction): then back off by the
    // search's step and confirm there, and say so.
    let mut value = capacity;
    for attempt in 0..2 {
        let spec = TrialSpec { draw: 1 + attempt, ..TrialSpec::new(axis, value, preset.slots, TRIAL_REQUESTS, 0.0) };
        confirm(&mut advice, bench, &best.backend, policy_of(&best.policy, request), spec, request.budget.as_secs_f64(), |t| t.verdict == Verdict::Holds)?;
        if advice.confirmed != Some(false) || attempt == 1 {
            break;
        }
        let lower = match axis {
            Axis::Rate => (value / (1.0 + best.tolerance.max(0.15)) * 1000.0).round() / 1000.0,
            Axis::Concurrency => value - 1.0,
        };
        if lower <= 0.0 {
            break;
        }
        advice.would_change.push(format!("{} did not hold on fresh arrivals ({} of {} met the objectives): the recommendation backs off to {}", axis.show(value), advice.confirmation.as_ref().map_or(0, |t| t.met), advice.confirmation.as_ref().map_or(TRIAL_REQUESTS, |t| t.requests), axis.show(lower)));
        value = lower;
        match axis {
            Axis::Rate => advice.rate = Some(value),
            Axis::Concurrency => advice.concurrency = Some(value as usize),
        }
    }
    Ok(advice)
}

/// Where a rate search started, from its probe: `llama (continuous): one request alone
/// took 3.10 s here, so the search started at 0.323 req/s`.
fn started_from(s: &SearchRecord) -> Option<String> {
    let service = s.service_s()?;
    let took = if service < 1.0 { format!("{:.0} ms", service * 1e3) } else { duration(service) };
    Some(format!("{}: one request alone took {took} here, so the search started at {}", s.candidate(), s.axis.show(1.0 / service)))
}

/// The budget that would let every search that ran out of time make the trial it needed
/// next: each candidate's search gets an equal share of the part of the budget kept for
/// searching, so the slowest to finish sets it. `None`: no search ran out of time.
fn budget_that_answers(searches: &[SearchRecord], budget_s: f64) -> Option<f64> {
    let slowest = searches.iter().filter_map(|s| Some(s.spent_s + s.needs_s?)).max_by(f64::total_cmp)?;
    let wanted = slowest * searches.len() as f64 / (1.0 - CONFIRMATION_SHARE);
    Some((wanted / 60.0).ceil().max(budget_s / 60.0 + 1.0) * 60.0)
}

/// Which objective stopped holding first, and what would move it.
fn binding(preset: &Preset, axis: Axis, t: &Trial) -> String {
    let at = axis.show(t.value);
    if t.saturated && t.missed_ttft == 0 && t.missed_decode == 0 {
        return format!("at {at} the queue grew without bound (saturated): more slots or a faster backend would raise the capacity");
    }
    if t.missed_ttft >= t.missed_decode {
        format!(
            "TTFT binds: at {at}, {} of {} requests missed TTFT ≤ {} ms ({} missed the decode rate); a looser TTFT objective, shorter prompts or prefix caching would raise the capacity",
            t.missed_ttft,
            t.requests,
            preset.objectives.ttft_ms.unwrap_or(f64::NAN),
            t.missed_decode
        )
    } else {
        format!(
            "decode binds: at {at}, {} of {} requests decoded slower than {} tok/s ({} missed TTFT); fewer slots (smaller batches decode faster per request) or a lower decode objective would raise the capacity",
            t.missed_decode,
            t.requests,
            preset.objectives.decode_tps.unwrap_or(f64::NAN),
            t.missed_ttft
        )
    }
}

fn deadline_advice(request: &Request, plans: &[DeadlineRecord], job: Job, bench: &mut Bench<'_, '_>) -> Result<Advice, SweepError> {
    let when = duration(job.deadline_s);
    let optimised = format!("the fewest concurrent clients that finish {} requests within {when}, working back from the deadline", job.requests);
    let mut advice = empty_advice(optimised);
    let meeting: Option<&DeadlineRecord> = plans.iter().filter(|p| p.concurrency.is_some()).min_by(|a, b| {
        (a.concurrency, a.finish_s.unwrap_or(f64::INFINITY)).partial_cmp(&(b.concurrency, b.finish_s.unwrap_or(f64::INFINITY))).unwrap_or(std::cmp::Ordering::Equal)
    });
    advice.because = plans.iter().map(DeadlineRecord::answer).collect();
    let Some(best) = meeting else {
        let fastest = plans.iter().filter_map(|p| Some((p, p.best_finish_s?))).min_by(|a, b| a.1.total_cmp(&b.1));
        advice.would_change.push(match fastest {
            Some((p, f)) => format!(
                "a deadline of {} or more ({} at its fastest), fewer requests (about {} fit in {when}), or a faster machine",
                duration(f),
                p.candidate(),
                (job.requests as f64 * job.deadline_s / f).floor()
            ),
            None => "nothing was measured".into(),
        });
        return Ok(advice);
    };
    let c = best.concurrency.expect("filtered");
    let finish = best.finish_s.expect("set with the concurrency");
    advice.backend = Some(best.backend.clone());
    advice.policy = best.policy.clone();
    advice.concurrency = Some(c);
    match best.best_finish_s.filter(|&fastest| fastest < finish) {
        Some(fastest) => advice.would_change.push(format!(
            "a deadline under {} needs more than {}, and one under {} ({}'s fastest finish measured) more than any concurrency measured here",
            duration(finish),
            clients(c),
            duration(fastest),
            best.candidate()
        )),
        None => advice.would_change.push(format!(
            "a deadline under {} needs more than {} (more were not measured: the plan stops at the fewest that meet the deadline)",
            duration(finish),
            clients(c)
        )),
    }
    advice.would_change.push(format!("about {} requests fit in {when} at {}", (job.requests as f64 * job.deadline_s / finish).floor(), clients(c)));
    let requests = (3 * c).max(12);
    let rps = best.trials.iter().find(|t| t.value as usize == c).map_or(0.0, |t| t.throughput_rps);
    let expect = if rps > 0.0 { requests as f64 / rps } else { 0.0 };
    let spec = TrialSpec { draw: 1, ..TrialSpec::new(Axis::Concurrency, c as f64, c, requests, expect) };
    confirm(&mut advice, bench, &best.backend, policy_of(&best.policy, request), spec, request.budget.as_secs_f64(), |t| {
        lx_results::decision::finish_s(job.requests, t.throughput_rps) <= job.deadline_s && t.requests == t.met
    })?;
    Ok(advice)
}

fn empty_advice(optimised: String) -> Advice {
    Advice {
        backend: None,
        policy: String::new(),
        concurrency: None,
        rate: None,
        optimised,
        because: Vec::new(),
        would_change: Vec::new(),
        confirmation: None,
        confirmed: None,
        spent_s: 0.0,
        budget_s: 0.0,
    }
}

/// Runs the confirmation `spec` describes; a budget too short for it says how long it
/// needs and which budget would give it that (`budget_s` less what is left was spent).
fn confirm(advice: &mut Advice, bench: &mut Bench<'_, '_>, backend: &str, policy: Policy, spec: TrialSpec, budget_s: f64, holds: impl Fn(&Trial) -> bool) -> Result<(), SweepError> {
    match bench.trial(backend, policy, spec)? {
        Ok(t) => {
            advice.confirmed = Some(holds(&t));
            advice.confirmation = Some(t);
        }
        Err(Skipped::Budget { needs_s, left_s }) => advice.would_change.push(format!(
            "not confirmed: a confirmation at {} needs about {}, {} were left (--budget {}m would hold it)",
            spec.axis.show(spec.value),
            duration(needs_s),
            duration(left_s),
            ((budget_s - left_s + needs_s) / 60.0).ceil()
        )),
        Err(Skipped::Stopped) => advice.would_change.push("not confirmed: stopped by the user".into()),
    }
    Ok(())
}

/// The advice as a reader sees it: the recommendation, what it optimised, the evidence,
/// what would change it, and whether a fresh run confirmed it.
pub fn lines(advice: &Advice) -> Vec<String> {
    let mut out = Vec::new();
    match &advice.backend {
        Some(b) => {
            let mut line = match advice.policy.as_str() {
                "server" => format!("Recommendation: {b} (as the server schedules)"),
                policy => format!("Recommendation: {b}, {policy} policy"),
            };
            if let Some(c) = advice.concurrency {
                line += &if advice.rate.is_some() { format!(", {c} slots") } else { format!(", {}", clients(c)) };
            }
            if let Some(r) = advice.rate {
                line += &format!(", up to {} req/s", lx_results::decision::Axis::Rate.show(r).trim_end_matches(" req/s"));
            }
            out.push(line);
        }
        None => out.push("Recommendation: none of the candidates meets the objectives or the deadline on this machine".into()),
    }
    out.push(format!("Optimised: {}", advice.optimised));
    out.extend(advice.because.iter().map(|l| format!("Evidence: {l}")));
    out.extend(advice.would_change.iter().map(|l| format!("Would change the answer: {l}")));
    if let (Some(t), Some(ok)) = (&advice.confirmation, advice.confirmed) {
        out.push(format!(
            "Confirmation ({} requests on fresh arrivals, run point {}): {} of {} met the objectives, {:.3} req/s completed over its window: {}",
            t.requests,
            t.point + 1,
            t.met,
            t.requests,
            t.throughput_rps,
            if ok { "holds" } else { "does NOT hold" }
        ));
    }
    out.push(format!("Spent {} of a {} budget", duration(advice.spent_s), duration(advice.budget_s)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_is_a_candidate_with_each_policy_and_each_server_once() {
        let request = Request {
            preset: Preset::load("chat").unwrap(),
            candidates: vec!["llama".into(), "lab".into(), "candle".into()],
            servers: vec!["lab".into()],
            axis: Axis::Rate,
            job: None,
            policies: vec![Policy::Continuous, Policy::Chunked],
            most_clients: 16,
            budget: Duration::from_secs(60),
        };
        let all: Vec<(String, String)> = Candidate::all(&request).iter().map(|c| (c.backend.clone(), c.label())).collect();
        let expect = [("llama", "continuous"), ("llama", "chunked"), ("lab", "server"), ("candle", "continuous"), ("candle", "chunked")];
        assert_eq!(all, expect.map(|(b, p)| (b.to_string(), p.to_string())));
        assert_eq!(policy_of("chunked", &request), Policy::Chunked);
        assert_eq!(policy_of("server", &request), Policy::Continuous, "a server's record runs no policy of ours");
        assert_eq!(lx_results::decision::candidate("llama", "chunked"), "llama (chunked)");
        assert_eq!(lx_results::decision::candidate("lab", "server"), "lab");
    }

    fn searched(spent_s: f64, needs_s: Option<f64>) -> SearchRecord {
        SearchRecord {
            backend: "llama".into(),
            policy: "continuous".into(),
            axis: Axis::Rate,
            objectives: Preset::load("chat").unwrap().objectives,
            trials: Vec::new(),
            capacity: None,
            fails_at: Some(0.5),
            tolerance: 0.15,
            ended: String::new(),
            probe: None,
            spent_s,
            needs_s,
        }
    }

    /// Out of time, the advice names the budget whose searching share holds what the search
    /// spent and the trial it needed next, for each candidate: (52 + 93) ÷ 0.75 is 3.2 min,
    /// so 4 minutes; two candidates, 7 minutes (6.4). Never the budget it already had.
    #[test]
    fn a_search_out_of_time_says_which_budget_would_answer() {
        assert_eq!(budget_that_answers(&[searched(52.0, Some(93.0))], 180.0), Some(240.0));
        assert_eq!(budget_that_answers(&[searched(52.0, Some(93.0)), searched(40.0, None)], 180.0), Some(420.0));
        assert_eq!(budget_that_answers(&[searched(1.0, Some(2.0))], 180.0), Some(240.0));
        assert_eq!(budget_that_answers(&[searched(52.0, None)], 180.0), None, "a search that ended on its own needs no more time");
    }
}
