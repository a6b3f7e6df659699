//! This machine's best settings for each backend, measured (`lx tune`) and kept as a
//! profile per machine, build and model, which every run then starts its workers with.
//!
//! A backend's best thread count, weight format, flash attention, KV layout or micro-batch
//! depends on the CPU or GPU it runs on, so none of them can be chosen once for everyone.
//! The tuner measures a short workload (one client, and four at once) for the backends'
//! defaults, then changes one setting at a time, keeping a change when it scores higher
//! (coordinate search: a handful of trials per backend instead of the whole grid). It then
//! measures the settings it tried again with a competing load it starts itself, since a
//! setting that is best on idle cores can collapse when other programs want them (candle's
//! spinning pool does): the profile keeps both choices, and live mode, which competes with
//! its own window, takes the contended one.
//!
//! The profile itself, and what a worker starts with because of it, is [`crate::profile`]'s.

pub mod fidelity;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::profile::{Knob, Settings, Trial};

/// A setting replaces the one it is compared with only when it scores this much higher:
/// trials of the same settings differ by several percent on a busy machine, and a profile
/// should not follow that noise.
pub const KEEP_MARGIN: f64 = 1.05;

/// The workload each trial measures: prompt tokens, output tokens, the clients of the
/// batched point, measured requests per point and unmeasured ones before.
pub const TRIAL_PROMPT: u32 = 128;
pub const TRIAL_OUTPUT: u32 = 32;
pub const TRIAL_CLIENTS: usize = 4;
pub const TRIAL_REQUESTS: usize = 4;
pub const TRIAL_WARMUP: usize = 1;
/// Seconds after which a trial's point sends no more requests (those in flight finish): a
/// slow backend (MLX's CPU build decodes ~1.5 tok/s) measures fewer requests rather than
/// taking minutes a trial.
pub const TRIAL_POINT_S: f64 = 10.0;

/// The coordinate search over `knobs`: the defaults first, then each knob's other values
/// with every other knob at its best so far; a value is kept when it scores at least
/// [`KEEP_MARGIN`] times higher, and the search's result replaces the start only when it
/// still does with both measured again (each side's better trial).
/// `measure` runs one trial (`None`: the budget is spent, stop). Returns the best settings
/// and every trial.
pub fn search(knobs: &[Knob], measure: &mut dyn FnMut(&Settings) -> Option<Trial>) -> (Option<Settings>, Vec<Trial>) {
    search_from(&Settings::new(), knobs, measure)
}

/// The same search under the competing load, from the idle `choice` rather than the
/// defaults, threads first (a competing load takes cores: fewer threads is what most often
/// wins then), and each other setting then tried at the best thread count so far: a format
/// that only wins on fewer threads is found. Each knob also tries its value in `defaults`
/// (the first idle trial's settings), which its list leaves out when it is the default.
pub fn search_contended(choice: &Settings, knobs: &[Knob], defaults: &Settings, measure: &mut dyn FnMut(&Settings) -> Option<Trial>) -> (Option<Settings>, Vec<Trial>) {
    let (threads, rest): (Vec<&Knob>, Vec<&Knob>) = knobs.iter().partition(|k| k.name == "threads");
    let order: Vec<Knob> = threads
        .into_iter()
        .chain(rest)
        .map(|k| {
            let mut k = k.clone();
            if let Some(d) = defaults.get(k.name).filter(|d| !k.values.contains(d)) {
                k.values.insert(0, d.clone());
            }
            k
        })
        .collect();
    search_from(choice, &order, measure)
}

/// The coordinate search from `start` (empty: the backend's defaults).
fn search_from(start: &Settings, knobs: &[Knob], measure: &mut dyn FnMut(&Settings) -> Option<Trial>) -> (Option<Settings>, Vec<Trial>) {
    let mut trials: Vec<Trial> = Vec::new();
    let Some(first) = measure(start) else { return (None, trials) };
    if first.error.is_some() {
        trials.push(first);
        return (None, trials);
    }
    let mut best = first.clone();
    trials.push(first);
    for knob in knobs {
        for value in &knob.values {
            if best.settings.get(knob.name) == Some(value) {
                continue;
            }
            let mut asked = best.settings.clone();
            asked.insert(knob.name.to_string(), value.clone());
            if trials.iter().any(|t| t.settings == asked) {
                continue;
            }
            let Some(t) = measure(&asked) else { return (Some(best.settings), trials) };
            if t.error.is_none() && t.score > best.score * KEEP_MARGIN {
                best = t.clone();
            }
            trials.push(t);
        }
    }
    let origin = trials[0].clone();
    if best.settings == origin.settings {
        return (Some(best.settings), trials);
    }
    // Each side of the change was measured once, and one slow trial of the start (a busy
    // moment of the machine) is enough to make any change look better: both are measured
    // again, and the change is kept only when the better of its two trials clears the margin
    // over the start's better one (a busy moment only ever slows a trial down). Where the
    // budget ends first, it is judged on the trials there are.
    let origin_again = measure(&origin.settings);
    trials.extend(origin_again.clone());
    let best_again = if origin_again.is_some() { measure(&best.settings) } else { None };
    trials.extend(best_again.clone());
    let better = |first: &Trial, again: &Option<Trial>| again.as_ref().map_or(first.score, |a| a.score.max(first.score));
    if better(&best, &best_again) > better(&origin, &origin_again) * KEEP_MARGIN {
        (Some(best.settings), trials)
    } else {
        (Some(origin.settings), trials)
    }
}

/// Busy threads that compete with a worker for the cores, as a window, a browser or a
/// build would; they stop when dropped.
pub struct CompetingLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CompetingLoad {
    /// Half the cores' worth of busy threads (at least one).
    pub fn threads_for(cores: usize) -> usize {
        (cores / 2).max(1)
    }

    pub fn start(threads: usize) -> CompetingLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|i| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                        }
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        CompetingLoad { stop, threads }
    }
}

impl Drop for CompetingLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A time budget: trials start only while the one about to start is expected to end in it.
pub struct Budget {
    started: Instant,
    total: Duration,
}

impl Budget {
    pub fn new(total: Duration) -> Budget {
        Budget { started: Instant::now(), total }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn total(&self) -> Duration {
        self.total
    }

    /// The instant at which `share` of the budget is spent.
    pub fn at(&self, share: f64) -> Instant {
        self.started + self.total.mul_f64(share.clamp(0.0, 1.0))
    }

    /// Whether a trial expected to take `expected` fits before `share` of the budget is spent.
    pub fn fits(&self, expected: Duration, share: f64) -> bool {
        self.started.elapsed() + expected <= self.total.mul_f64(share.clamp(0.0, 1.0))
    }
}

/// Parses a budget: `300`, `90s`, `5m`, `1m30s`.
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let bad = || format!("budget {s:?}: give seconds (300, 90s) or minutes (5m, 1m30s)");
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs)).ok_or_else(bad);
    }
    let (mut total, mut num) = (0f64, String::new());
    for c in s.chars() {
        match c {
            '0'..='9' | '.' => num.push(c),
            'm' | 's' | 'h' => {
                let v: f64 = num.parse().map_err(|_| bad())?;
                total += v * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                num.clear();
            }
            _ => return Err(bad()),
        }
    }
    if !num.is_empty() || !(total.is_finite() && total > 0.0) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

mod measure;
pub mod text;
pub use measure::{tune, Event, Request};

#[cfg(test)]
mod tests;
