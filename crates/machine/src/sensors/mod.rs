//! Energy, clocks and heat: what the machine says about itself while a point runs.
//!
//! [`Sensors`] opens every source this machine exposes (CPU clock from cpufreq or
//! `/proc/cpuinfo`, CPU package energy from powercap/RAPL, NVIDIA GPUs through NVML loaded at
//! run time) and says of each one it cannot read why not: a figure that cannot be read is
//! "not available here", never zero. A [`Sampler`] reads them on a thread of its own while
//! a point runs and times its own reads, so its cost is known; [`SensorSummary`] turns the
//! readings of a point's measured window into power, joules per output token, clocks and
//! throttling.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

mod cpu;
mod nvml;
mod sampler;
mod summary;
#[cfg(test)]
mod tests;

pub use cpu::{CpuClock, CpuTemp, Powercap};
pub use nvml::{GpuRaw, GpuSource, Nvml, Replay};
pub use sampler::{Sampler, Trace, SAMPLE_EVERY};
pub use summary::{clock_fell, GpuSummary, SensorSummary, Span, CLOCK_FALL};

/// One reading of every source, `t_ms` after the sensors were opened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub t_ms: f64,
    /// Mean current clock over the CPU's cores, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<f64>,
    /// Energy of every CPU package since the sensors were opened, J (counter wraps undone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_energy_j: Option<f64>,
    /// The CPU's hottest package sensor, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_temp_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuReading>,
}

/// One NVIDIA GPU's reading, in plain units.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    pub index: u32,
    /// Board power as NVML reports it (its own average over about a second), W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Energy since the sensors were opened, J (Volta and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Streaming-multiprocessor clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    /// Share of the last sample period with a kernel running, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    /// Why the clocks are held down right now (power cap, thermal slowdown...); idle and
    /// application-clock settings are not reasons a measurement cares about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_back_by: Vec<String>,
}

/// Every source of this machine, opened once (per sweep or live session).
pub struct Sensors {
    origin: Instant,
    clock: Option<CpuClock>,
    powercap: Option<Powercap>,
    temp: Option<CpuTemp>,
    gpus: Option<Box<dyn GpuSource>>,
    /// GPU energy counters when opened, mJ, so readings count from zero.
    gpu_energy_base: Vec<Option<u64>>,
    /// The last GPU reading as NVML gave it (what a recording keeps).
    gpu_raw: Vec<GpuRaw>,
    sources: Vec<String>,
    missing: Vec<String>,
}

impl Sensors {
    /// This machine's sources.
    pub fn open() -> Self {
        let gpus = match Nvml::open() {
            Ok(n) => Ok(Box::new(n) as Box<dyn GpuSource>),
            Err(why) => Err(why),
        };
        Self::open_at(Path::new("/sys"), Path::new("/proc"), gpus)
    }

    /// The sources under `sys` and `proc` (a real root or a test's fake tree), and `gpus`
    /// (NVML, a replay of recorded values, or why there is none).
    pub fn open_at(sys: &Path, proc: &Path, gpus: Result<Box<dyn GpuSource>, String>) -> Self {
        let mut sources = Vec::new();
        let mut missing = Vec::new();
        // Each source is read, or said not to be, and why.
        fn opened<T>(what: &str, source: Result<T, String>, describe: impl Fn(&T) -> String, sources: &mut Vec<String>, missing: &mut Vec<String>) -> Option<T> {
            match source {
                Ok(s) => {
                    sources.push(describe(&s));
                    Some(s)
                }
                Err(why) => {
                    missing.push(format!("{what}: {why}"));
                    None
                }
            }
        }
        let clock = opened("CPU clock", CpuClock::open(sys, proc), |c| format!("CPU clock: {}", c.describe()), &mut sources, &mut missing);
        let powercap = opened("CPU package power", Powercap::open(sys), |p| format!("CPU package energy: {}", p.describe()), &mut sources, &mut missing);
        let temp = opened("CPU temperature", CpuTemp::open(sys), |t| format!("CPU temperature: {}", t.describe()), &mut sources, &mut missing);
        let gpus = opened("GPU power and clocks", gpus, |g| g.describe(), &mut sources, &mut missing);
        let mut sensors = Self { origin: Instant::now(), clock, powercap, temp, gpus, gpu_energy_base: Vec::new(), gpu_raw: Vec::new(), sources, missing };
        if let Some(g) = sensors.gpus.as_mut() {
            sensors.gpu_energy_base = g.read().iter().map(|r| r.energy_mj).collect();
        }
        sensors
    }

    /// What is read, one line per source.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// What cannot be read here, and why.
    pub fn not_available(&self) -> &[String] {
        &self.missing
    }

    /// `at` as a reading's `t_ms`.
    pub fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.origin).as_secs_f64() * 1e3
    }

    /// When `t_ms` is 0.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Read every source now.
    pub fn read(&mut self) -> Reading {
        let t_ms = self.ms(Instant::now());
        let cpu_mhz = self.clock.as_mut().and_then(|c| c.read());
        let cpu_energy_j = self.powercap.as_mut().and_then(|p| p.read_j());
        let cpu_temp_c = self.temp.as_mut().and_then(|t| t.read());
        self.gpu_raw = self.gpus.as_mut().map(|g| g.read()).unwrap_or_default();
        let base = &self.gpu_energy_base;
        let gpus = self.gpu_raw.iter().enumerate().map(|(i, raw)| raw.reading(base.get(i).copied().flatten())).collect();
        Reading { t_ms, cpu_mhz, cpu_energy_j, cpu_temp_c, gpus }
    }

    /// The GPUs' last reading in NVML's own units.
    pub fn last_gpu_raw(&self) -> &[GpuRaw] {
        &self.gpu_raw
    }
}

/// Power between two readings, W: the CPU packages' and every GPU's that can be read, and
/// which those are. `None` when nothing that gives power can be read.
pub fn power_between(a: &Reading, b: &Reading) -> Option<(f64, Vec<String>)> {
    let seconds = (b.t_ms - a.t_ms) / 1e3;
    if seconds <= 0.0 {
        return None;
    }
    let mut watts = 0.0;
    let mut of = Vec::new();
    if let (Some(x), Some(y)) = (a.cpu_energy_j, b.cpu_energy_j) {
        watts += (y - x) / seconds;
        of.push("CPU packages".to_string());
    }
    for g in &b.gpus {
        let before = a.gpus.iter().find(|x| x.index == g.index);
        let w = match (before.and_then(|x| x.energy_j), g.energy_j) {
            (Some(x), Some(y)) => Some((y - x) / seconds),
            // Without an energy counter: the mean of the two power readings.
            _ => g.power_w.map(|p| before.and_then(|x| x.power_w).map_or(p, |q| (p + q) / 2.0)),
        };
        if let Some(w) = w {
            watts += w;
            of.push(format!("GPU {}", g.index));
        }
    }
    (!of.is_empty()).then_some((watts, of))
}
