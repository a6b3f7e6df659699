//! A point's sensor readings as figures: power and energy over its measured window, joules
//! per output token, clocks, and whether the machine throttled while the load was steady.

use serde::{Deserialize, Serialize};

use super::{Reading, Trace};

/// A clock that falls by more than this share between the first and the last quarter of a
/// steady load is throttling (boost clocks wander by a few per cent; throttling takes tens).
pub const CLOCK_FALL: f64 = 0.1;

/// Mean, least and most of a figure over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Span {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Span> {
        let v: Vec<f64> = values.into_iter().collect();
        (!v.is_empty()).then(|| Span {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// One GPU over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
}

/// What the sensors said over a point's measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorSummary {
    /// Readings inside the window (the ones just outside bound it).
    pub readings: usize,
    /// The sampler's own reading time as a share of one core, over the point.
    pub sampler_cpu_share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_package_w: Option<f64>,
    /// The CPU's temperature over the window, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_temp_c: Option<Span>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuSummary>,
    /// Mean power of everything in `power_of`, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// What `power_w` and `energy_j` include (CPU packages, GPU 0...): nothing else is counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_of: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Energy ÷ output tokens, J.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_token: Option<f64>,
    /// Throughput ÷ power: output tokens per joule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s_per_w: Option<f64>,
    /// Throttling seen in the window, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttling: Vec<String>,
    /// What was read, one line per source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// What cannot be read on this machine, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_available: Vec<String>,
    /// The readings from just before the window to just after it, `t_ms` from its start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<Reading>,
}

/// A cumulative figure at `t`, interpolated between the readings around it (held at the ends).
fn at(readings: &[&Reading], t: f64, f: impl Fn(&Reading) -> Option<f64>) -> Option<f64> {
    let known: Vec<(f64, f64)> = readings.iter().filter_map(|r| Some((r.t_ms, f(r)?))).collect();
    let after = known.iter().position(|&(rt, _)| rt >= t);
    match after {
        Some(0) => known.first().map(|k| k.1),
        Some(i) => {
            let ((t0, v0), (t1, v1)) = (known[i - 1], known[i]);
            Some(if t1 > t0 { v0 + (v1 - v0) * (t - t0) / (t1 - t0) } else { v1 })
        }
        None => known.last().map(|k| k.1),
    }
}

/// The first and last quarter's mean of a clock, when it fell by more than [`CLOCK_FALL`]:
/// `points` are (ms, MHz) over a steady load; at least 8 readings over 2 s are needed.
pub fn clock_fell(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len();
    if n < 8 || points[n - 1].0 - points[0].0 < 2000.0 {
        return None;
    }
    let q = n / 4;
    let mean = |s: &[(f64, f64)]| s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64;
    let (first, last) = (mean(&points[..q]), mean(&points[n - q..]));
    (last < first * (1.0 - CLOCK_FALL)).then_some((first, last))
}

impl SensorSummary {
    /// The readings of `trace` over the window from `from_ms` to `to_ms` (sensor time), for
    /// `output_tokens` tokens; `steady` when the load did not change in it (a closed loop),
    /// so a falling clock is the machine's doing.
    pub fn of(trace: &Trace, from_ms: f64, to_ms: f64, output_tokens: usize, steady: bool) -> SensorSummary {
        let all: Vec<&Reading> = trace.readings.iter().collect();
        let inside: Vec<&Reading> = all.iter().copied().filter(|r| r.t_ms >= from_ms && r.t_ms <= to_ms).collect();
        // A window shorter than the sampling interval: the readings around it stand for it.
        let before = all.iter().copied().filter(|r| r.t_ms < from_ms).last();
        let after = all.iter().copied().find(|r| r.t_ms > to_ms);
        let bounded: Vec<&Reading> = before.into_iter().chain(inside.iter().copied()).chain(after).collect();
        let over = if inside.is_empty() { &bounded } else { &inside };
        let seconds = (to_ms - from_ms) / 1e3;
        let cpu_energy = at(&bounded, to_ms, |r| r.cpu_energy_j).zip(at(&bounded, from_ms, |r| r.cpu_energy_j)).map(|(b, a)| b - a);
        let mut gpu_index: Vec<u32> = bounded.iter().flat_map(|r| r.gpus.iter().map(|g| g.index)).collect();
        gpu_index.sort();
        gpu_index.dedup();
        let gpus: Vec<GpuSummary> = gpu_index
            .iter()
            .map(|&index| {
                let of = |r: &Reading| r.gpus.iter().find(|g| g.index == index).cloned();
                let energy_j = at(&bounded, to_ms, |r| of(r)?.energy_j).zip(at(&bounded, from_ms, |r| of(r)?.energy_j)).map(|(b, a)| b - a);
                let power = Span::of(over.iter().filter_map(|r| of(r)?.power_w));
                // Without an energy counter, energy is the mean power over the window.
                let energy_j = energy_j.or_else(|| power.map(|p| p.mean * seconds));
                GpuSummary {
                    index,
                    power_w: energy_j.filter(|_| seconds > 0.0).map(|e| e / seconds),
                    energy_j,
                    clock_mhz: Span::of(over.iter().filter_map(|r| of(r)?.clock_mhz)),
                    temp_c: Span::of(over.iter().filter_map(|r| of(r)?.temp_c)),
                    util_pct: Span::of(over.iter().filter_map(|r| of(r)?.util_pct)).map(|s| s.mean),
                }
            })
            .collect();
        let mut power_of = Vec::new();
        let mut energy = None;
        if let Some(e) = cpu_energy {
            power_of.push("CPU packages".to_string());
            energy = Some(e);
        }
        for g in &gpus {
            if let Some(e) = g.energy_j {
                power_of.push(format!("GPU {}", g.index));
                energy = Some(energy.unwrap_or(0.0) + e);
            }
        }
        let power_w = energy.filter(|_| seconds > 0.0).map(|e| e / seconds);
        let joules_per_token = energy.filter(|_| output_tokens > 0).map(|e| e / output_tokens as f64);
        let tokens_per_s_per_w = energy.filter(|&e| e > 0.0).map(|e| output_tokens as f64 / e);

        let mut throttling = Vec::new();
        let clock_of = |name: &str, points: Vec<(f64, f64)>, throttling: &mut Vec<String>| {
            if let Some((from, to)) = clock_fell(&points).filter(|_| steady) {
                throttling.push(format!("{name} clock fell from {from:.0} to {to:.0} MHz ({:+.0}%) while the load was steady", 100.0 * (to / from - 1.0)));
            }
        };
        clock_of("CPU", inside.iter().filter_map(|r| Some((r.t_ms, r.cpu_mhz?))).collect(), &mut throttling);
        for &index in &gpu_index {
            let of = |r: &Reading| r.gpus.iter().find(|g| g.index == index).cloned();
            clock_of(&format!("GPU {index}"), inside.iter().filter_map(|r| Some((r.t_ms, of(r)?.clock_mhz?))).collect(), &mut throttling);
            let mut reasons: Vec<(String, usize)> = Vec::new();
            for why in over.iter().filter_map(|r| of(r)).flat_map(|g| g.held_back_by) {
                match reasons.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, n)) => *n += 1,
                    None => reasons.push((why, 1)),
                }
            }
            for (why, n) in reasons {
                throttling.push(format!("GPU {index} clocks held back by {why} in {n} of {} readings", over.len()));
            }
        }
        let trace_out = bounded.iter().map(|r| Reading { t_ms: r.t_ms - from_ms, ..(*r).clone() }).collect();
        SensorSummary {
            readings: inside.len(),
            sampler_cpu_share: trace.cost_share(),
            cpu_mhz: Span::of(over.iter().filter_map(|r| r.cpu_mhz)),
            cpu_package_w: cpu_energy.filter(|_| seconds > 0.0).map(|e| e / seconds),
            cpu_temp_c: Span::of(over.iter().filter_map(|r| r.cpu_temp_c)),
            gpus,
            power_w,
            power_of,
            energy_j: energy,
            joules_per_token,
            tokens_per_s_per_w,
            throttling,
            sources: trace.sensors.sources().to_vec(),
            not_available: trace.sensors.not_available().to_vec(),
            trace: trace_out,
        }
    }

    /// The clock the table shows: the first GPU's when there is one, else the CPU's.
    pub fn clock_mhz(&self) -> Option<f64> {
        self.gpus.iter().find_map(|g| g.clock_mhz).or(self.cpu_mhz).map(|s| s.mean)
    }
}
