//! NVIDIA GPUs through NVML, the library the driver installs (`libnvidia-ml`), loaded at
//! run time: a build runs the same on machines without it. What NVML returns is kept in its
//! own units ([`GpuRaw`]) so recorded values can be replayed through the same conversion.

use serde::{Deserialize, Serialize};

use super::GpuReading;

/// Where GPU readings come from: NVML, or a replay of recorded ones.
pub trait GpuSource: Send {
    /// What is read, for the sources list.
    fn describe(&self) -> String;
    /// One reading of every GPU.
    fn read(&mut self) -> Vec<GpuRaw>;
}

/// One GPU's reading in NVML's units: what `lx hw --sensors --json` records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuRaw {
    pub index: u32,
    /// `nvmlDeviceGetPowerUsage`, mW.
    pub power_mw: Option<u32>,
    /// `nvmlDeviceGetTotalEnergyConsumption`, mJ since the driver loaded.
    pub energy_mj: Option<u64>,
    /// `nvmlDeviceGetClockInfo(SM)`, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// `nvmlDeviceGetTemperature(GPU)`, °C.
    pub temp_c: Option<u32>,
    /// `nvmlDeviceGetUtilizationRates().gpu`, %.
    pub util_pct: Option<u32>,
    /// `nvmlDeviceGetCurrentClocksThrottleReasons`, the bit mask.
    pub throttle_bits: Option<u64>,
}

/// The throttle reasons that mean the clock is held below what the load asks for, with
/// NVML's bits (`nvmlClocksThrottleReason*`).
const HELD_BACK: [(u64, &str); 6] = [
    (0x4, "power cap"),
    (0x8, "hardware slowdown"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "power brake"),
    (0x100, "display clock setting"),
];

impl GpuRaw {
    /// In plain units; energy counted from `energy_base_mj`.
    pub fn reading(&self, energy_base_mj: Option<u64>) -> GpuReading {
        GpuReading {
            index: self.index,
            power_w: self.power_mw.map(|mw| f64::from(mw) / 1e3),
            energy_j: self.energy_mj.map(|mj| mj.saturating_sub(energy_base_mj.unwrap_or(mj)) as f64 / 1e3),
            clock_mhz: self.sm_clock_mhz.map(f64::from),
            temp_c: self.temp_c.map(f64::from),
            util_pct: self.util_pct.map(f64::from),
            held_back_by: self.throttle_bits.map_or_else(Vec::new, |bits| HELD_BACK.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| n.to_string()).collect()),
        }
    }
}

/// Every GPU NVML sees.
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
    names: Vec<String>,
}

impl Nvml {
    pub fn open() -> Result<Self, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("no NVIDIA driver library here (NVML: {e})"))?;
        let count = nvml.device_count().map_err(|e| format!("NVML lists no GPU: {e}"))?;
        if count == 0 {
            return Err("NVML lists no GPU".into());
        }
        let names = (0..count).map(|i| nvml.device_by_index(i).and_then(|d| d.name()).unwrap_or_else(|e| format!("GPU {i} ({e})"))).collect();
        Ok(Self { nvml, names })
    }
}

impl GpuSource for Nvml {
    fn describe(&self) -> String {
        let gpus: Vec<String> = self.names.iter().enumerate().map(|(i, n)| format!("GPU {i} {n}")).collect();
        format!("NVIDIA (NVML): {}: power, energy, SM clock, temperature, utilisation, throttle reasons", gpus.join(", "))
    }

    fn read(&mut self) -> Vec<GpuRaw> {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        (0..self.names.len() as u32)
            .filter_map(|index| {
                let d = self.nvml.device_by_index(index).ok()?;
                Some(GpuRaw {
                    index,
                    power_mw: d.power_usage().ok(),
                    energy_mj: d.total_energy_consumption().ok(),
                    sm_clock_mhz: d.clock_info(Clock::SM).ok(),
                    temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
                    util_pct: d.utilization_rates().ok().map(|u| u.gpu),
                    throttle_bits: d.current_throttle_reasons().ok().map(|r| r.bits()),
                })
            })
            .collect()
    }
}

/// Recorded readings played back in order (the last one repeats): tests of everything
/// downstream of NVML on machines without an NVIDIA GPU.
pub struct Replay {
    pub label: String,
    pub readings: Vec<Vec<GpuRaw>>,
    pub next: usize,
}

impl GpuSource for Replay {
    fn describe(&self) -> String {
        format!("NVIDIA (replayed: {})", self.label)
    }

    fn read(&mut self) -> Vec<GpuRaw> {
        let i = self.next.min(self.readings.len().saturating_sub(1));
        self.next += 1;
        self.readings.get(i).cloned().unwrap_or_default()
    }
}
