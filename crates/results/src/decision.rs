//! What a run decided, beside what it measured: the workload preset it ran with (its
//! objectives), the capacity searches, the deadline plans and the advice built on them.
//! Each decision keeps the trials it rests on, and each trial names the run's point that
//! measured it, so a reader can check every answer against the samples.

use serde::{Deserialize, Serialize};

/// What decides whether a workload is served well.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
#[ts(rename = "WorkloadBound")]
pub enum Bound {
    /// Interactive: a person waits for the first token and reads as it streams.
    Ttft,
    /// Batch: only the time to finish the whole job matters (a deadline).
    Throughput,
    /// Mixed: requests that meet their objectives per unit of time (goodput).
    Mixed,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Ttft => "ttft",
            Bound::Throughput => "throughput",
            Bound::Mixed => "mixed",
        }
    }
}

/// The objectives a request must meet, and the share of requests that must meet them (a
/// p95 TTFT objective is attainment 0.95 of a TTFT objective).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Objectives {
    /// Most acceptable TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// Least acceptable per-request decode rate, tok/s.
    pub decode_tps: Option<f64>,
    /// Share of requests that must meet every objective (0.95: at the 95th percentile).
    pub attainment: f64,
}

impl Objectives {
    /// `TTFT ≤ 1000 ms and decode ≥ 4.5 tok/s for 95% of requests`.
    pub fn describe(&self) -> String {
        let mut each = Vec::new();
        if let Some(t) = self.ttft_ms {
            each.push(format!("TTFT ≤ {t} ms"));
        }
        if let Some(d) = self.decode_tps {
            each.push(format!("decode ≥ {d} tok/s"));
        }
        if each.is_empty() {
            each.push("complete".into());
        }
        format!("{} for {}% of requests", each.join(" and "), fmt_share(self.attainment))
    }
}

fn fmt_share(x: f64) -> String {
    let pct = x * 100.0;
    if (pct - pct.round()).abs() < 1e-9 { format!("{pct:.0}") } else { format!("{pct:.1}") }
}

/// The preset a run was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct PresetRecord {
    pub name: String,
    pub summary: String,
    pub bound: Bound,
    pub objectives: Objectives,
    /// `built in`, or the file it was read from.
    pub source: String,
}

/// What a capacity search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Open-loop Poisson arrivals, requests/s.
    Rate,
    /// Closed-loop clients.
    Concurrency,
}

impl Axis {
    pub fn unit(self) -> &'static str {
        match self {
            Axis::Rate => "req/s",
            Axis::Concurrency => "clients",
        }
    }

    /// `0.42 req/s`, `6 clients`.
    pub fn show(self, value: f64) -> String {
        match self {
            Axis::Rate => format!("{} req/s", round_sig(value)),
            Axis::Concurrency => clients(value as usize),
        }
    }
}

/// `1 client`, `4 clients`.
pub fn clients(n: usize) -> String {
    if n == 1 { "1 client".into() } else { format!("{n} clients") }
}

/// Three significant figures, without trailing zeros.
fn round_sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// Whether a trial's objectives held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The measured attainment reaches the target, and its interval's low end is within the
    /// indifference margin of it.
    Holds,
    /// The objectives were missed by more requests than the target allows.
    Fails,
    /// Neither, on this many requests: the interval straddles the target.
    Unsure,
}

/// One-sided confidence of the intervals on attainment (z = 1.2816: the low end is
/// exceeded with 90% probability).
pub const CONFIDENCE: f64 = 0.90;
const Z: f64 = 1.281_551_565_5;
/// A trial holds when the interval's low end is at least the target less this margin
/// (and its estimate at least the target): 20 requests all on time hold a 95% target.
pub const INDIFFERENCE: f64 = 0.05;

/// The Wilson score interval of `met` successes in `n` trials at [`CONFIDENCE`]: (low, high).
pub fn attainment_interval(met: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p) = (n as f64, met as f64 / n as f64);
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The verdict on `met` of `n` requests against a target share.
pub fn verdict(met: usize, n: usize, target: f64) -> Verdict {
    let (low, high) = attainment_interval(met, n);
    let estimate = if n == 0 { 0.0 } else { met as f64 / n as f64 };
    if n > 0 && estimate >= target && low >= target - INDIFFERENCE {
        Verdict::Holds
    } else if high < target || (n > 0 && misses_allowed(n, target) < n - met) {
        Verdict::Fails
    } else {
        Verdict::Unsure
    }
}

/// The fewest requests that can show a target holds (every one of them met): fewer, and
/// the interval's low end stays below the indifference margin whatever they measure.
pub fn fewest_to_hold(target: f64) -> usize {
    (1..=1000).find(|&n| verdict(n, n, target) == Verdict::Holds).unwrap_or(1000)
}

/// Most requests of `n` that may miss with the estimate still at the target.
pub fn misses_allowed(n: usize, target: f64) -> usize {
    ((1.0 - target) * n as f64 + 1e-9).floor() as usize
}

/// One measurement of a search or a plan: a setting, what it measured, and the run's point
/// that holds its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Trial {
    /// The arrival rate or the number of clients.
    pub value: f64,
    /// Index of its point in the run file.
    pub point: usize,
    /// Requests that arrived in the window (completed or not).
    pub requests: usize,
    /// Of those, how many met every objective.
    pub met: usize,
    /// Misses by objective, among completed requests (a request can miss both).
    pub missed_ttft: usize,
    pub missed_decode: usize,
    /// Requests that did not complete: failed, or cancelled when the trial ended early.
    #[serde(default)]
    pub unfinished: usize,
    /// [`attainment_interval`] of `met` of `requests`.
    pub attainment_low: f64,
    pub attainment_high: f64,
    pub verdict: Verdict,
    /// Requests that met the objectives per minute (goodput).
    pub goodput_rpm: f64,
    /// Completed requests per second of the window (first arrival to last completion).
    pub throughput_rps: f64,
    /// Output tokens per second over the window.
    pub throughput_tps: f64,
    pub ttft_p95_ms: f64,
    /// Queue wait grew through the window and completions fell behind arrivals: past
    /// saturation, where a longer window only makes it worse.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
    /// The trial stopped as soon as more requests had missed than the target allows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_early: bool,
}

impl Trial {
    pub fn attainment(&self) -> f64 {
        if self.requests == 0 { 0.0 } else { self.met as f64 / self.requests as f64 }
    }
}

/// A capacity search: the trials in the order they ran, and the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SearchRecord {
    pub backend: String,
    /// The scheduling policy it ran with (`server`: a server's own scheduling); absent in
    /// files from before policies were compared.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy: String,
    pub axis: Axis,
    pub objectives: Objectives,
    pub trials: Vec<Trial>,
    /// The highest setting that held, below the lowest that did not; `None`: none held.
    pub capacity: Option<f64>,
    /// The lowest setting that did not hold (above `capacity`); `None`: none failed.
    pub fails_at: Option<f64>,
    /// The bracket the search aimed for: fails_at ÷ capacity at most 1 + this.
    pub tolerance: f64,
    /// Why it stopped: the bracket is narrow enough, a bound was reached, the budget ran out,
    /// the user stopped it.
    pub ended: String,
    /// One request at a time, before a rate search: its service time set where the search
    /// started (absent in concurrency searches and older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Trial>,
    /// Seconds the search took, its probe included (0 in older files).
    #[serde(default)]
    pub spent_s: f64,
    /// When the budget ended the search before a trial it wanted: seconds that trial needs
    /// at the fewest requests that can show the objectives hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_s: Option<f64>,
}

impl SearchRecord {
    /// `llama (continuous)`, or a server's name.
    pub fn candidate(&self) -> String {
        candidate(&self.backend, &self.policy)
    }

    /// One request's service time alone, when a probe measured it.
    pub fn service_s(&self) -> Option<f64> {
        self.probe.as_ref().filter(|p| p.throughput_rps > 0.0).map(|p| 1.0 / p.throughput_rps)
    }

    /// The trial that measured the capacity.
    pub fn at_capacity(&self) -> Option<&Trial> {
        let c = self.capacity?;
        self.trials.iter().rev().find(|t| t.value == c && t.verdict == Verdict::Holds)
    }

    /// `llama: capacity 0.42 req/s (0.48 does not hold: within 14%)`.
    pub fn answer(&self) -> String {
        let a = self.axis;
        match (self.capacity, self.fails_at) {
            (Some(c), Some(f)) => format!("{}: capacity {} ({} does not hold: within {:.0}%)", self.candidate(), a.show(c), a.show(f), (f / c - 1.0) * 100.0),
            (Some(c), None) => format!("{}: capacity at least {} (the highest tried)", self.candidate(), a.show(c)),
            (None, Some(f)) => format!("{}: no capacity: the objectives do not hold even at {}", self.candidate(), a.show(f)),
            (None, None) => format!("{}: nothing measured", self.candidate()),
        }
    }

    /// The curve, a row per trial in the order of the setting.
    pub fn table(&self) -> Vec<String> {
        let mut rows = vec![
            format!("| {} | requests | met | attainment (90% interval) | goodput req/min | TTFT p95 ms | missed TTFT / decode | verdict |", self.axis.unit()),
            "| ---: | ---: | ---: | --- | ---: | ---: | --- | --- |".into(),
        ];
        let mut trials: Vec<&Trial> = self.trials.iter().collect();
        trials.sort_by(|a, b| a.value.total_cmp(&b.value));
        for t in trials {
            let mut verdict = format!("{:?}", t.verdict).to_lowercase();
            if t.saturated {
                verdict += ", saturated";
            }
            if t.ended_early {
                verdict += ", ended early";
            }
            rows.push(format!(
                "| {} | {} | {} | {:.0}% ({:.0}-{:.0}%) | {:.1} | {:.0} | {} / {} / {} | {verdict} |",
                round_sig(t.value),
                t.requests,
                t.met,
                t.attainment() * 100.0,
                t.attainment_low * 100.0,
                t.attainment_high * 100.0,
                t.goodput_rpm,
                t.ttft_p95_ms,
                t.missed_ttft,
                t.missed_decode,
                t.unfinished
            ));
        }
        rows
    }
}

/// A deadline plan: N requests must finish within T.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct DeadlineRecord {
    pub backend: String,
    /// The scheduling policy it ran with (`server`: a server's own scheduling); absent in
    /// files from before policies were compared.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy: String,
    pub requests: usize,
    pub deadline_s: f64,
    /// Closed-loop trials, one per concurrency; `value` is the concurrency.
    pub trials: Vec<Trial>,
    /// The smallest concurrency whose measured throughput finishes in time.
    pub concurrency: Option<usize>,
    /// Its predicted finish, s.
    pub finish_s: Option<f64>,
    /// The fastest finish measured (when none meets the deadline, how far it falls short).
    pub best_finish_s: Option<f64>,
    pub ended: String,
}

/// A candidate by name: the backend, and our policy when one was set (`llama (static)`).
pub fn candidate(backend: &str, policy: &str) -> String {
    if policy.is_empty() || policy == "server" { backend.to_string() } else { format!("{backend} ({policy})") }
}

/// How long `requests` take at `throughput_rps`: the whole job at the measured steady rate.
pub fn finish_s(requests: usize, throughput_rps: f64) -> f64 {
    if throughput_rps > 0.0 { requests as f64 / throughput_rps } else { f64::INFINITY }
}

/// The planner's arithmetic: the smallest concurrency whose finish time is within the
/// deadline, from (concurrency, requests/s) measurements; `None` when none is.
pub fn smallest_meeting(measured: &[(usize, f64)], requests: usize, deadline_s: f64) -> Option<(usize, f64)> {
    measured.iter().map(|&(c, rps)| (c, finish_s(requests, rps))).filter(|&(_, f)| f <= deadline_s).min_by_key(|&(c, _)| c)
}

impl DeadlineRecord {
    /// `llama (continuous)`, or a server's name.
    pub fn candidate(&self) -> String {
        candidate(&self.backend, &self.policy)
    }

    pub fn answer(&self) -> String {
        let when = |s: f64| crate::decision::duration(s);
        match (self.concurrency, self.finish_s, self.best_finish_s) {
            (Some(c), Some(f), _) => format!(
                "{}: {} requests finish in {} at {}, within the deadline of {} (margin {:.0}%)",
                self.candidate(),
                self.requests,
                when(f),
                clients(c),
                when(self.deadline_s),
                (self.deadline_s / f - 1.0) * 100.0
            ),
            (_, _, Some(best)) => format!(
                "{}: no concurrency meets the deadline of {} on this machine: the fastest measured finishes {} requests in {} ({:.0}% over)",
                self.candidate(),
                when(self.deadline_s),
                self.requests,
                when(best),
                (best / self.deadline_s - 1.0) * 100.0
            ),
            _ => format!("{}: nothing measured", self.candidate()),
        }
    }

    pub fn table(&self) -> Vec<String> {
        let mut rows = vec!["| clients | requests | throughput req/s | tok/s | finish of the job | meets |".to_string(), "| ---: | ---: | ---: | ---: | ---: | --- |".into()];
        for t in &self.trials {
            let f = finish_s(self.requests, t.throughput_rps);
            rows.push(format!(
                "| {:.0} | {} | {:.3} | {:.1} | {} | {} |",
                t.value,
                t.requests,
                t.throughput_rps,
                t.throughput_tps,
                duration(f),
                if f <= self.deadline_s { "yes" } else { "no" }
            ));
        }
        rows
    }
}

/// `1 h 05 min`, `4 min 10 s`, `12.5 s`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() {
        return "never".into();
    }
    let whole = s.round() as u64;
    if whole >= 3600 {
        format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60)
    } else if whole >= 60 {
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        format!("{s:.1} s")
    }
}

/// What `lx advise` recommends, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Advice {
    /// The backend or server to use; `None` when no candidate met the objectives.
    pub backend: Option<String>,
    pub policy: String,
    /// Clients (closed loop) or scheduler slots (open loop) to run at.
    pub concurrency: Option<usize>,
    /// The highest arrival rate it holds the objectives at (TTFT-bound and mixed presets).
    pub rate: Option<f64>,
    /// What it optimised, in a sentence.
    pub optimised: String,
    /// Why this candidate, from the evidence.
    pub because: Vec<String>,
    /// What would change the answer.
    pub would_change: Vec<String>,
    /// The confirmation run at the recommendation: its trial, and whether it held.
    pub confirmation: Option<Trial>,
    pub confirmed: Option<bool>,
    /// Seconds spent, and the budget it had.
    pub spent_s: f64,
    pub budget_s: f64,
}

/// Everything a run decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Decisions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<SearchRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadlines: Vec<DeadlineRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
}

impl Decisions {
    /// The evidence as one table: every search's trials (a row per backend and setting), or
    /// when there are none, every deadline plan's; each backend's rows in the order of the
    /// setting. Empty when nothing was decided.
    pub fn evidence_table(&self) -> Vec<String> {
        let mut rows = Vec::new();
        if let Some(first) = self.searches.first() {
            rows.push(format!("| backend | {} | requests | met | attainment (90% interval) | goodput req/min | TTFT p95 ms | missed TTFT / decode / unfinished | verdict |", first.axis.unit()));
            rows.push("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | --- |".into());
            for s in &self.searches {
                rows.extend(s.table().into_iter().skip(2).map(|r| format!("| {} {r}", s.candidate())));
            }
        } else if !self.deadlines.is_empty() {
            rows.push("| backend | clients | requests | throughput req/s | tok/s | finish of the job | meets |".into());
            rows.push("| --- | ---: | ---: | ---: | ---: | ---: | --- |".into());
            for d in &self.deadlines {
                rows.extend(d.table().into_iter().skip(2).map(|r| format!("| {} {r}", d.candidate())));
            }
        }
        rows
    }

    pub fn is_empty(&self) -> bool {
        self.searches.is_empty() && self.deadlines.is_empty() && self.advice.is_none()
    }

    /// The lines `lx show` and the report print under a run's table.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.searches {
            out.push(format!("capacity search by {} for {}: {}", s.axis.unit(), s.objectives.describe(), s.answer()));
        }
        for d in &self.deadlines {
            out.push(format!("deadline plan: {}", d.answer()));
        }
        if let Some(a) = &self.advice {
            out.push(match &a.backend {
                Some(b) => format!("advice: {b}, {}{}{}", if a.policy == "server" { "as the server schedules".to_string() } else { format!("{} policy", a.policy) }, a.concurrency.map(|c| format!(", {c} slots")).unwrap_or_default(), a.rate.map(|r| format!(", up to {} req/s", round_sig(r))).unwrap_or_default()),
                None => "advice: no candidate met the objectives on this machine".into(),
            });
            if let Some(ok) = a.confirmed {
                out.push(format!("advice confirmed by a fresh run: {}", if ok { "yes" } else { "no" }));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_narrows_with_requests_and_the_verdict_follows_it() {
        // 20 of 20 on time: the low end is 20 / (20 + z²) = 0.924, within 0.05 of 0.95.
        let (low, high) = attainment_interval(20, 20);
        assert!((low - 20.0 / (20.0 + Z * Z)).abs() < 1e-9 && high == 1.0);
        assert_eq!(verdict(20, 20, 0.95), Verdict::Holds);
        // 5 of 5: too few to say.
        assert_eq!(verdict(5, 5, 0.95), Verdict::Unsure);
        // 19 of 20 meets the estimate but its low end is 0.85: not yet.
        assert_eq!(verdict(19, 20, 0.95), Verdict::Unsure);
        assert_eq!(verdict(190, 200, 0.95), Verdict::Holds);
        // More misses than the target allows: fails, however few requests.
        assert_eq!(misses_allowed(20, 0.95), 1);
        assert_eq!(verdict(18, 20, 0.95), Verdict::Fails);
        assert_eq!(verdict(0, 0, 0.95), Verdict::Unsure);
        let (a, b) = attainment_interval(50, 100);
        assert!(a < 0.5 && b > 0.5 && (0.5 - a - (b - 0.5)).abs() < 1e-9, "symmetric at one half");
    }

    /// A trial cut down to fit a budget keeps enough requests to hold: at 95%, 15 of 15 on
    /// time holds (low end 0.901) where 14 of 14 cannot (0.895); a stricter target needs more.
    #[test]
    fn the_fewest_requests_that_can_hold_follow_the_target() {
        assert_eq!(fewest_to_hold(0.95), 15);
        assert_eq!(verdict(14, 14, 0.95), Verdict::Unsure);
        assert_eq!(verdict(15, 15, 0.95), Verdict::Holds);
        let strict = fewest_to_hold(0.99);
        assert!(strict > 15 && verdict(strict, strict, 0.99) == Verdict::Holds && verdict(strict - 1, strict - 1, 0.99) != Verdict::Holds, "{strict}");
        assert!(fewest_to_hold(0.5) < 15);
    }

    #[test]
    fn the_planner_takes_the_smallest_concurrency_that_finishes_in_time() {
        // 600 requests: 1 client at 0.5 req/s takes 20 min, 4 at 1.6 req/s 6 min 15 s, 8 at 2 req/s 5 min.
        let measured = [(1, 0.5), (2, 0.9), (4, 1.6), (8, 2.0)];
        assert_eq!(smallest_meeting(&measured, 600, 400.0), Some((4, 375.0)));
        assert_eq!(smallest_meeting(&measured, 600, 300.0), Some((8, 300.0)));
        assert_eq!(smallest_meeting(&measured, 600, 299.0), None);
        assert_eq!(smallest_meeting(&measured, 600, 1200.0), Some((1, 1200.0)));
        assert_eq!(finish_s(10, 0.0), f64::INFINITY);
        assert_eq!(duration(3900.0), "1 h 05 min");
        assert_eq!(duration(250.0), "4 min 10 s");
        assert_eq!(duration(12.46), "12.5 s");
    }

    #[test]
    fn objectives_read_as_a_sentence() {
        let o = Objectives { ttft_ms: Some(1000.0), decode_tps: Some(4.5), attainment: 0.95 };
        assert_eq!(o.describe(), "TTFT ≤ 1000 ms and decode ≥ 4.5 tok/s for 95% of requests");
        assert_eq!(Axis::Rate.show(0.4237), "0.424 req/s");
        assert_eq!(Axis::Rate.show(12.0), "12 req/s");
        assert_eq!(Axis::Concurrency.show(6.0), "6 clients");
        assert_eq!(Axis::Concurrency.show(1.0), "1 client");
    }
}
