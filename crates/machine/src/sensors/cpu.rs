//! The CPU's sources on Linux: the current clock of each core (cpufreq, else the "cpu MHz"
//! lines of `/proc/cpuinfo`) and package energy (powercap's RAPL zones).

use std::path::{Path, PathBuf};

/// The CPU's mean current clock.
pub struct CpuClock {
    /// cpufreq's `scaling_cur_freq` of every core (kHz), or empty to read `cpuinfo`.
    cores: Vec<PathBuf>,
    cpuinfo: PathBuf,
}

impl CpuClock {
    pub fn open(sys: &Path, proc: &Path) -> Result<Self, String> {
        let mut cores: Vec<PathBuf> = std::fs::read_dir(sys.join("devices/system/cpu"))
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_str().is_some_and(|n| n.strip_prefix("cpu").is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))))
                    .map(|e| e.path().join("cpufreq/scaling_cur_freq"))
                    .filter(|p| std::fs::read_to_string(p).is_ok())
                    .collect()
            })
            .unwrap_or_default();
        cores.sort();
        let mut clock = Self { cores, cpuinfo: proc.join("cpuinfo") };
        match clock.read() {
            Some(_) => Ok(clock),
            None if cfg!(target_os = "macos") => Err("macOS does not report the current CPU clock without root".into()),
            None => Err(format!("neither cpufreq ({}) nor {} gives a clock", sys.join("devices/system/cpu/cpu*/cpufreq").display(), clock.cpuinfo.display())),
        }
    }

    pub fn describe(&self) -> String {
        if self.cores.is_empty() {
            format!("{} (the kernel's figure; a virtual machine may report a fixed one)", self.cpuinfo.display())
        } else {
            format!("cpufreq, {} cores", self.cores.len())
        }
    }

    /// Mean over the cores, MHz.
    pub fn read(&mut self) -> Option<f64> {
        let mhz: Vec<f64> = if self.cores.is_empty() {
            let text = std::fs::read_to_string(&self.cpuinfo).ok()?;
            text.lines()
                .filter(|l| l.starts_with("cpu MHz"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
                .collect()
        } else {
            self.cores.iter().filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<f64>().ok()).map(|khz| khz / 1e3).collect()
        };
        (!mhz.is_empty()).then(|| mhz.iter().sum::<f64>() / mhz.len() as f64)
    }
}

/// The CPU packages' energy counters (powercap `intel-rapl:N` zones named `package-*`, which
/// AMD's RAPL driver also uses).
pub struct Powercap {
    zones: Vec<Zone>,
}

struct Zone {
    name: String,
    energy: PathBuf,
    /// The counter wraps to zero past this, µJ.
    range_uj: u64,
    last_uj: Option<u64>,
    total_uj: u64,
}

impl Powercap {
    pub fn open(sys: &Path) -> Result<Self, String> {
        let root = sys.join("class/powercap");
        let dir = std::fs::read_dir(&root).map_err(|_| {
            if cfg!(target_os = "macos") {
                "macOS gives CPU power to root (powermetrics) or through a private interface: not read".to_string()
            } else {
                format!("no powercap/RAPL here ({} is absent: no intel_rapl driver, or a virtual machine)", root.display())
            }
        })?;
        let mut names: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("intel-rapl:") && n.matches(':').count() == 1))
            .collect();
        names.sort();
        let mut zones = Vec::new();
        let mut unreadable = None;
        for zone in names {
            let name = std::fs::read_to_string(zone.join("name")).unwrap_or_default().trim().to_string();
            if !name.starts_with("package") {
                continue;
            }
            let energy = zone.join("energy_uj");
            if let Err(e) = std::fs::read_to_string(&energy) {
                unreadable = Some(if e.kind() == std::io::ErrorKind::PermissionDenied {
                    format!("{} is readable by root only (`sudo chmod a+r {}` allows it until the next boot)", energy.display(), root.join("intel-rapl:*/energy_uj").display())
                } else {
                    format!("{}: {e}", energy.display())
                });
                continue;
            }
            let range_uj = std::fs::read_to_string(zone.join("max_energy_range_uj")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(u64::MAX);
            zones.push(Zone { name, energy, range_uj, last_uj: None, total_uj: 0 });
        }
        if zones.is_empty() {
            return Err(unreadable.unwrap_or_else(|| format!("{} has no package zone", root.display())));
        }
        let mut cap = Self { zones };
        cap.read_j();
        Ok(cap)
    }

    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.zones.iter().map(|z| z.name.as_str()).collect();
        format!("powercap RAPL ({})", names.join(", "))
    }

    /// Energy of every package since opened, J. `None` when a counter cannot be read.
    pub fn read_j(&mut self) -> Option<f64> {
        let mut total = 0u64;
        for z in &mut self.zones {
            let now: u64 = std::fs::read_to_string(&z.energy).ok()?.trim().parse().ok()?;
            if let Some(last) = z.last_uj {
                // A counter below its last value has wrapped past its range once (it wraps
                // after minutes at full power; readings come every fraction of a second).
                z.total_uj += if now >= last { now - last } else { z.range_uj.saturating_sub(last) + now };
            }
            z.last_uj = Some(now);
            total += z.total_uj;
        }
        Some(total as f64 / 1e6)
    }
}

/// The CPU's temperature: the hottest of its package sensors (hwmon's `k10temp`, `coretemp`,
/// `zenpower` or `cpu_thermal`, else a thermal zone of the CPU's type), °C. A laptop's
/// sustained speed follows it.
pub struct CpuTemp {
    /// Each sensor's input (millidegrees Celsius) and what it is.
    inputs: Vec<(PathBuf, String)>,
}

/// hwmon drivers that measure the CPU package (AMD, Intel, AMD's alternative, Arm SoCs).
const HWMON_CPU: [&str; 4] = ["k10temp", "coretemp", "zenpower", "cpu_thermal"];
/// Thermal zone types that are the CPU's.
const ZONE_CPU: [&str; 3] = ["x86_pkg_temp", "cpu-thermal", "cpu_thermal"];

impl CpuTemp {
    pub fn open(sys: &Path) -> Result<Self, String> {
        let entries = |dir: PathBuf| -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
            v.sort();
            v
        };
        let text = |p: PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
        let mut inputs = Vec::new();
        for dir in entries(sys.join("class/hwmon")) {
            let Some(name) = text(dir.join("name")).filter(|n| HWMON_CPU.contains(&n.as_str())) else { continue };
            // temp1 is the package (k10temp's Tctl, coretemp's "Package id 0").
            inputs.push((dir.join("temp1_input"), format!("hwmon {name}")));
        }
        if inputs.is_empty() {
            for dir in entries(sys.join("class/thermal")) {
                let Some(kind) = text(dir.join("type")).filter(|t| ZONE_CPU.contains(&t.as_str())) else { continue };
                inputs.push((dir.join("temp"), format!("thermal zone {kind}")));
            }
        }
        let mut temp = Self { inputs };
        match temp.read() {
            Some(_) => Ok(temp),
            None if cfg!(target_os = "macos") => Err("macOS gives CPU temperature to root (powermetrics) or through a private interface: not read".into()),
            None => Err(format!("no CPU temperature sensor here (no {} in {}, no CPU thermal zone: a virtual machine, or the driver is not loaded)", HWMON_CPU.join("/"), sys.join("class/hwmon").display())),
        }
    }

    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.inputs.iter().map(|(_, n)| n.as_str()).collect();
        names.join(", ")
    }

    /// The hottest sensor, °C; `None` when none can be read.
    pub fn read(&mut self) -> Option<f64> {
        self.inputs.iter().filter_map(|(p, _)| std::fs::read_to_string(p).ok()?.trim().parse::<f64>().ok()).map(|milli| milli / 1e3).reduce(f64::max)
    }
}
