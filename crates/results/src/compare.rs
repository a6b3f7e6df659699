//! Runs compared point by point (`lx compare`): points matched by what was measured
//! (backend, policy, test name), each figure of every other run as a ratio to the first run's,
//! and whether the difference is larger than the runs' own spread. The spread is each
//! median's 95% interval from the point's own requests (order statistics: no assumption about
//! the shape of the distribution); a difference counts when the two intervals do not overlap.
//! A point measured several times (`--repetitions`) pools its repetitions' requests, and its
//! interval widens to cover the repetitions' own 95% interval ([`crate::repeats`]), so drift
//! between measurements counts as spread too. Throughput is one number per measurement: it has
//! an interval only where both runs repeated the point.

use serde::Serialize;

use lx_client::records::RequestRecord;
use crate::repeats::{figures, Spread};
use crate::results::{PointResult, RunFile};

/// A sample median with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Median {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    pub samples: usize,
}

impl Median {
    /// The median of the finite values in `v` and its 95% interval: the order statistics of
    /// ranks n/2 − 0.98·√n and 1 + n/2 + 0.98·√n (the binomial's normal approximation),
    /// clamped to the sample. `None` without samples.
    pub fn of(v: impl IntoIterator<Item = f64>) -> Option<Median> {
        let mut v: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let value = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let half = 0.98 * (n as f64).sqrt();
        let low_rank = ((n as f64 / 2.0 - half).floor() as usize).max(1);
        let high_rank = ((1.0 + n as f64 / 2.0 + half).ceil() as usize).min(n);
        Some(Median { value, low: v[low_rank - 1], high: v[high_rank - 1], samples: n })
    }

    fn overlaps(&self, other: &Median) -> bool {
        self.low <= other.high && other.low <= self.high
    }
}

/// One figure of one point, in the base run and in another.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FigureDiff {
    pub base: f64,
    pub other: f64,
    /// other ÷ base.
    pub ratio: f64,
    /// Whether the difference exceeds the runs' own spread; `None` where a figure has no
    /// interval (throughput).
    pub beyond_spread: Option<bool>,
}

impl FigureDiff {
    fn of_medians(base: Option<Median>, other: Option<Median>) -> Option<FigureDiff> {
        let (b, o) = (base?, other?);
        Some(FigureDiff { base: b.value, other: o.value, ratio: o.value / b.value, beyond_spread: Some(!b.overlaps(&o)) })
    }
}

/// The figures compared, in order, with their names.
pub const FIGURES: [&str; 4] = ["TTFT p50 ms", "prefill tok/s p50", "decode tok/s p50", "throughput tok/s"];

/// One point of the base run against the matching point of another run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointDiff {
    pub test: String,
    pub backend: String,
    pub policy: String,
    /// Which run (its place in the list; 0 is the base).
    pub run: usize,
    /// In the order of [`FIGURES`]; `None` where either side has no value.
    pub figures: [Option<FigureDiff>; 4],
}

/// A run as the comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLabel {
    pub name: String,
    pub machine: String,
    pub backends: Vec<String>,
    /// The workload preset the run was made from, and its objectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
}

/// Every other run against the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub runs: Vec<RunLabel>,
    pub points: Vec<PointDiff>,
    /// Points of a run with no match in the base run, or of the base with none in a run:
    /// "run 1: pp64+tg32 @ c4 (llama, continuous): not in the base run".
    pub unmatched: Vec<String>,
}

/// One point of one run, its repetitions (if any) taken together.
struct Pooled {
    /// TTFT, prefill and decode medians of every repetition's requests.
    medians: [Option<Median>; 3],
    /// Mean throughput of the repetitions, and their spread when there are several.
    throughput: Option<f64>,
    throughput_spread: Option<Spread>,
}

fn pooled(reps: &[&PointResult]) -> Pooled {
    let ok = || reps.iter().flat_map(|p| p.samples.iter()).filter(|r| r.ok());
    let of = |f: fn(&RequestRecord) -> Option<f64>| Median::of(ok().filter_map(f));
    let mut medians = [of(RequestRecord::ttft_ms), of(RequestRecord::prefill_tps), of(RequestRecord::decode_tps)];
    let per_rep: Vec<[Option<f64>; 4]> = reps.iter().map(|p| figures(p)).collect();
    for (i, m) in medians.iter_mut().enumerate() {
        if let (Some(m), Some(s)) = (m.as_mut(), Spread::of(per_rep.iter().filter_map(|f| f[i]))) {
            m.low = m.low.min(s.low);
            m.high = m.high.max(s.high);
        }
    }
    let throughputs: Vec<f64> = per_rep.iter().filter_map(|f| f[3]).filter(|&t| t > 0.0).collect();
    let throughput = (!throughputs.is_empty()).then(|| throughputs.iter().sum::<f64>() / throughputs.len() as f64);
    Pooled { medians, throughput, throughput_spread: Spread::of(throughputs) }
}

/// The points of `run` with `key`: one, or one per repetition.
fn group<'a>(run: &'a RunFile, k: &(String, String, String)) -> Vec<&'a PointResult> {
    run.points.iter().filter(|p| p.key() == *k).collect()
}

/// Compare `runs[1..]` with `runs[0]`; `names` label them (file names).
pub fn compare(runs: &[RunFile], names: &[String]) -> Comparison {
    let labels = runs
        .iter()
        .zip(names)
        .map(|(r, name)| RunLabel {
            name: name.clone(),
            machine: format!("{} ({} cores, {})", r.hardware.cpu, r.hardware.physical_cores, r.hardware.os),
            backends: r.backends.iter().map(|b| format!("{} {} on {}", b.name, b.version, b.device)).collect(),
            preset: r.preset.as_ref().map(|p| format!("preset {}: {}", p.name, p.objectives.describe())),
        })
        .collect();
    let mut points = Vec::new();
    let mut unmatched = Vec::new();
    let Some((base, others)) = runs.split_first() else {
        return Comparison { runs: labels, points, unmatched };
    };
    let describe = |p: &PointResult| format!("{} ({}, {})", p.test_name(), p.backend, p.policy_label());
    for (i, other) in others.iter().enumerate() {
        let run = i + 1;
        // Each point once, however many repetitions it has.
        let firsts = base.points.iter().enumerate().filter(|(i, b)| !base.points[..*i].iter().any(|e| e.key() == b.key()));
        for (_, b) in firsts {
            let o = group(other, &b.key());
            if o.is_empty() {
                unmatched.push(format!("run {run}: {}: not in this run", describe(b)));
                continue;
            }
            let (pb, po) = (pooled(&group(base, &b.key())), pooled(&o));
            let (mb, mo) = (pb.medians, po.medians);
            let throughput = match (pb.throughput, po.throughput) {
                (Some(tb), Some(to)) => Some(FigureDiff {
                    base: tb,
                    other: to,
                    ratio: to / tb,
                    beyond_spread: match (pb.throughput_spread, po.throughput_spread) {
                        (Some(sb), Some(so)) => Some(sb.high < so.low || so.high < sb.low),
                        _ => None,
                    },
                }),
                _ => None,
            };
            let (test, backend, policy) = b.key();
            points.push(PointDiff {
                test,
                backend,
                policy,
                run,
                figures: [FigureDiff::of_medians(mb[0], mo[0]), FigureDiff::of_medians(mb[1], mo[1]), FigureDiff::of_medians(mb[2], mo[2]), throughput],
            });
        }
        let missing = other.points.iter().filter(|o| !base.points.iter().any(|b| b.key() == o.key()));
        let mut seen: Vec<(String, String, String)> = Vec::new();
        for o in missing {
            if !seen.contains(&o.key()) {
                seen.push(o.key());
                unmatched.push(format!("run {run}: {}: not in the base run", describe(o)));
            }
        }
    }
    Comparison { runs: labels, points, unmatched }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_interval_is_the_order_statistics_around_the_middle() {
        // 1..=100: the median 50.5; ranks floor(50 - 9.8) = 40 and ceil(51 + 9.8) = 61.
        let m = Median::of((1..=100).map(f64::from)).unwrap();
        assert_eq!((m.value, m.low, m.high, m.samples), (50.5, 40.0, 61.0, 100));
        // Few samples: the interval is the whole sample.
        let m = Median::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((m.value, m.low, m.high), (2.0, 1.0, 3.0));
        assert_eq!(Median::of([f64::NAN]), None);
        assert_eq!(Median::of([]), None);
    }

    #[test]
    fn differences_count_only_beyond_both_intervals() {
        let a = Median::of((0..50).map(|i| 100.0 + i as f64 * 0.1)).unwrap();
        let near = Median::of((0..50).map(|i| 101.0 + i as f64 * 0.1)).unwrap();
        let far = Median::of((0..50).map(|i| 120.0 + i as f64 * 0.1)).unwrap();
        let d = FigureDiff::of_medians(Some(a), Some(near)).unwrap();
        assert_eq!(d.beyond_spread, Some(false));
        assert!((d.ratio - near.value / a.value).abs() < 1e-12);
        assert_eq!(FigureDiff::of_medians(Some(a), Some(far)).unwrap().beyond_spread, Some(true));
        assert_eq!(FigureDiff::of_medians(Some(a), None), None);
    }

    /// A measurement of 20 requests with TTFT `ttft` ms (± 1%) and throughput `tps`.
    fn measured(ttft: f64, tps: f64, repetition: u32) -> PointResult {
        let spec = lx_client::traffic::PointSpec { prompt_tokens: 16, max_tokens: 2, concurrency: 1, requests: 20, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let records = (0..20)
            .map(|i| {
                let mut r = RequestRecord::new(i, 16, 2, 0.0);
                let t = ttft * (0.99 + 0.001 * i as f64);
                r.token_ms = vec![t, t + 10.0];
                r.tokens = vec![1, 1];
                r.token_steps = vec![1, 2];
                r.finish = Some(lx_engine::scheduler::FinishReason::Length);
                r
            })
            .collect();
        let run = lx_client::traffic::PointRun { records, steps: Vec::new(), window_ms: 1000.0, worker_error: None, stopped: false, opened: None };
        let mut p = PointResult::from_run("llama", lx_engine::scheduler::Policy::Continuous, &spec, run);
        p.throughput_tps = tps;
        p.repetition = Some(repetition);
        p
    }

    #[test]
    fn repetitions_pool_their_requests_and_widen_the_interval_to_their_own_spread() {
        let (a, b) = (measured(100.0, 10.0, 1), measured(120.0, 12.0, 2));
        // One measurement alone: an interval within its own ±1%.
        let alone = pooled(&[&a]);
        let m = alone.medians[0].unwrap();
        assert!(m.low >= 99.0 && m.high <= 101.0, "{m:?}");
        assert_eq!((alone.throughput, alone.throughput_spread), (Some(10.0), None));
        // Two that disagree by 20%: every request counts, and the interval covers the
        // repetitions' own (110 ± 127: two repetitions say little).
        let both = pooled(&[&a, &b]);
        let m = both.medians[0].unwrap();
        assert_eq!(m.samples, 40);
        assert!(m.low < -17.0 && m.high > 237.0, "{m:?}");
        assert_eq!(both.throughput, Some(11.0));
        assert!(both.throughput_spread.is_some_and(|s| s.n == 2 && (s.mean - 11.0).abs() < 1e-12));
    }
}
