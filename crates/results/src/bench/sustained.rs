//! A sustained run: one shape measured over and over for minutes (`lx bench --sustained`),
//! each trial a point with its decode rate and what the sensors said, so that a laptop that
//! slows as it heats shows when and by how much.

use serde::{Deserialize, Serialize};

use super::Shape;
use crate::results::PointResult;

/// A rate this far under its first minute's, and staying there, has fallen (a trial's own
/// noise on a quiet machine is a few per cent).
pub const FALL: f64 = 0.05;

/// One trial: one measured window of the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(rename = "SustainedTrial")]
pub struct Trial {
    /// When its measured window began and ended, seconds from the first trial's start.
    pub start_s: f64,
    pub end_s: f64,
    /// Median decode tok/s of one request.
    pub decode_tps: f64,
    /// All clients' output ÷ the window.
    pub throughput_tps: f64,
    /// Mean CPU clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<f64>,
    /// Mean power of what the sensors count (see `Sustained::sensors`), W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// The hottest mean temperature of the CPU and the GPUs that can be read, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    /// Throttling the sensors saw in the window, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttling: Vec<String>,
}

impl Trial {
    /// The trial a point measured, its window ending `end_s` after the first trial began.
    pub fn of(p: &PointResult, end_s: f64) -> Trial {
        let s = p.sensors.as_ref();
        Trial {
            start_s: (end_s - p.window_s).max(0.0),
            end_s,
            decode_tps: p.decode_tps.p50,
            throughput_tps: p.throughput_tps,
            cpu_mhz: s.and_then(|s| s.cpu_mhz.map(|c| c.mean)),
            power_w: s.and_then(|s| s.power_w),
            temp_c: s.and_then(|s| s.cpu_temp_c.iter().chain(s.gpus.iter().filter_map(|g| g.temp_c.as_ref())).map(|t| t.mean).reduce(f64::max)),
            throttling: s.map(|s| s.throttling.clone()).unwrap_or_default(),
        }
    }
}

/// Trials cut from one point's requests by when each ended: every `trial_s` seconds of its
/// window, the median decode rate of the requests that ended in it and their output over the
/// window (live mode's requests, which run on with no windows of their own). A window in
/// which no request ended is left out.
pub fn trials_of_samples(samples: &[lx_client::records::RequestRecord], trial_s: f64) -> Vec<Trial> {
    let mut ended: Vec<(f64, f64, usize)> = samples
        .iter()
        .filter(|r| r.ok())
        .filter_map(|r| Some(((r.submit_ms + r.token_ms.last()?) / 1e3, r.decode_tps()?, r.token_ms.len())))
        .collect();
    ended.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut trials = Vec::new();
    let mut i = 0;
    while i < ended.len() {
        let k = (ended[i].0 / trial_s).floor();
        let (start, end) = (k * trial_s, (k + 1.0) * trial_s);
        let j = ended[i..].iter().position(|e| e.0 >= end).map_or(ended.len(), |n| i + n);
        let mut rates: Vec<f64> = ended[i..j].iter().map(|e| e.1).collect();
        rates.sort_by(f64::total_cmp);
        let median = if rates.len() % 2 == 1 { rates[rates.len() / 2] } else { (rates[rates.len() / 2 - 1] + rates[rates.len() / 2]) / 2.0 };
        let tokens: usize = ended[i..j].iter().map(|e| e.2).sum();
        trials.push(Trial { start_s: start, end_s: end, decode_tps: median, throughput_tps: tokens as f64 / trial_s, cpu_mhz: None, power_w: None, temp_c: None, throttling: vec![] });
        i = j;
    }
    trials
}

/// The sustained run and what it showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Sustained {
    pub backend: String,
    pub shape: Shape,
    /// How long the load was asked to stay on, s.
    pub asked_s: f64,
    /// Each trial's measured window, s, and the idle pause after it (`--cooldown`), s.
    pub trial_s: f64,
    pub cooldown_s: f64,
    pub trials: Vec<Trial>,
    /// Mean decode rate of the trials that began in the first minute and in the last one.
    pub first_minute_tps: Option<f64>,
    pub last_minute_tps: Option<f64>,
    /// How far the last minute's rate is under the first's (0.12: 12% slower; negative: faster).
    pub fall: Option<f64>,
    /// When the rate went more than [`FALL`] under the first minute's and stayed there, s.
    pub fell_at_s: Option<f64>,
    /// The rate under which a trial counts as fallen: the first minute's less [`FALL`].
    pub fallen_below_tps: Option<f64>,
    /// What it showed, in one sentence ([`Sustained::verdict`]).
    pub verdict: String,
    /// What the sensors read and what they could not, one line each.
    pub sensors: Vec<String>,
    pub sensors_missing: Vec<String>,
}

impl Sustained {
    /// The summary of `trials` (in time order).
    pub fn of(backend: &str, shape: Shape, asked_s: f64, trial_s: f64, cooldown_s: f64, trials: Vec<Trial>, sensors: Vec<String>, sensors_missing: Vec<String>) -> Sustained {
        let end = trials.last().map_or(0.0, |t| t.end_s);
        let mean_of = |pick: &dyn Fn(&Trial) -> bool| super::mean(trials.iter().filter(|t| pick(t)).map(|t| t.decode_tps));
        let first = mean_of(&|t| t.start_s < 60.0);
        // The last minute, unless the run was a minute or less: then it has only its first.
        let last = if end > 60.0 { mean_of(&|t| t.start_s >= end - 60.0) } else { None };
        let fall = first.zip(last).map(|(f, l)| 1.0 - l / f);
        let fell_at_s = first.and_then(|f| {
            let under = |t: &Trial| t.decode_tps < f * (1.0 - FALL);
            let stays_from = trials.iter().rposition(|t| !under(t)).map_or(0, |i| i + 1);
            trials.get(stays_from).map(|t| t.start_s)
        });
        let mut s = Sustained {
            backend: backend.into(),
            shape,
            asked_s,
            trial_s,
            cooldown_s,
            trials,
            first_minute_tps: first,
            last_minute_tps: last,
            fall,
            fell_at_s,
            fallen_below_tps: first.map(|f| f * (1.0 - FALL)),
            verdict: String::new(),
            sensors,
            sensors_missing,
        };
        s.verdict = s.verdict();
        s
    }

    /// One sentence: how far the rate fell from its first minute, and when.
    pub fn verdict(&self) -> String {
        let n = self.trials.len();
        match (self.first_minute_tps, self.last_minute_tps, self.fall) {
            (Some(f), Some(l), Some(fall)) => {
                let when = match self.fell_at_s {
                    Some(t) => format!("; it went more than {:.0}% under the first minute's at {:.0} s and stayed there", FALL * 100.0, t),
                    None => format!("; it never stayed more than {:.0}% under the first minute's", FALL * 100.0),
                };
                format!("{} trials over {:.0} s: decode {f:.1} tok/s in the first minute, {l:.1} in the last ({:+.1}%){when}", n, self.trials.last().map_or(0.0, |t| t.end_s), -fall * 100.0)
            }
            (Some(f), _, _) => format!("{n} trials, all in the first minute: decode {f:.1} tok/s (a sustained run needs more than a minute to say whether it falls)"),
            _ => "no trial finished".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trials(rates: &[f64], every: f64) -> Vec<Trial> {
        rates
            .iter()
            .enumerate()
            .map(|(i, &r)| Trial { start_s: i as f64 * every, end_s: (i + 1) as f64 * every, decode_tps: r, throughput_tps: r, cpu_mhz: None, power_w: None, temp_c: None, throttling: vec![] })
            .collect()
    }

    fn shape() -> Shape {
        Shape { name: "chat".into(), prompt_tokens: 128, max_tokens: 64, clients: 1, requests: 4, warmup: 1 }
    }

    #[test]
    fn a_laptop_that_heats_falls_from_its_first_minute_and_says_when() {
        // Two minutes at 21, then 17.5: the MacBook Air of mlx-lm PR 1010, in 20 s trials.
        let mut rates = vec![21.0, 21.2, 20.8, 21.0, 20.9, 21.1];
        rates.extend([17.5; 9]);
        let s = Sustained::of("mlx", shape(), 300.0, 20.0, 0.0, trials(&rates, 20.0), vec![], vec![]);
        assert!((s.first_minute_tps.unwrap() - 21.0).abs() < 1e-9);
        assert!((s.last_minute_tps.unwrap() - 17.5).abs() < 1e-9);
        assert!((s.fall.unwrap() - (1.0 - 17.5 / 21.0)).abs() < 1e-9);
        assert_eq!(s.fell_at_s, Some(120.0));
        assert!(s.verdict().contains("at 120 s and stayed there"), "{}", s.verdict());
    }

    #[test]
    fn live_requests_are_cut_into_trials_by_when_they_ended() {
        let request = |submit_s: f64, tokens: usize, every_ms: f64| lx_client::records::RequestRecord {
            submit_ms: submit_s * 1e3,
            token_ms: (0..tokens).map(|i| 100.0 + i as f64 * every_ms).collect(),
            finish: Some(lx_engine::scheduler::FinishReason::Length),
            ..lx_client::records::RequestRecord::new(0, 8, tokens as u32, 0.0)
        };
        // Two requests end in the first 10 s (decode 20 and 10 tok/s), one in the third window.
        let samples = [request(1.0, 11, 50.0), request(5.0, 11, 100.0), request(25.0, 11, 25.0)];
        let t = trials_of_samples(&samples, 10.0);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!((t[0].start_s, t[0].end_s, t[1].start_s), (0.0, 10.0, 20.0));
        assert!((t[0].decode_tps - 15.0).abs() < 1e-9 && (t[1].decode_tps - 40.0).abs() < 1e-9, "{t:?}");
        assert!((t[0].throughput_tps - 2.2).abs() < 1e-9);
    }

    #[test]
    fn a_dip_that_recovers_is_not_a_fall_and_a_short_run_says_it_cannot_tell() {
        let s = Sustained::of("llama", shape(), 180.0, 20.0, 0.0, trials(&[20.0, 20.0, 20.0, 15.0, 20.0, 20.0, 20.0, 20.0, 20.0], 20.0), vec![], vec![]);
        assert_eq!(s.fell_at_s, None);
        assert!(s.fall.unwrap().abs() < 1e-9);
        let short = Sustained::of("llama", shape(), 40.0, 20.0, 0.0, trials(&[20.0, 19.0], 20.0), vec![], vec![]);
        assert_eq!((short.last_minute_tps, short.fall), (None, None));
        assert!(short.verdict().contains("needs more than a minute"));
    }
}
