//! What machine a measurement was taken on (for `lx hw`, result files and the app).

use serde::{Deserialize, Serialize};

/// CPU, memory and OS facts, plus each backend's own device list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareReport {
    pub cpu: String,
    pub physical_cores: usize,
    pub logical_cores: usize,
    pub memory_bytes: u64,
    pub os: String,
    pub arch: String,
    /// CPU features the measured builds may use (x86: avx2, avx512f, fma...; Arm: neon...).
    pub cpu_features: Vec<String>,
    /// Devices each backend can see, e.g. ("llama", ["CPU: AMD EPYC ..."]). Filled by the binary,
    /// which knows the backends.
    pub backend_devices: Vec<(String, Vec<String>)>,
}

/// Probe this machine.
pub fn probe() -> HardwareReport {
    use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};
    let sys = System::new_with_specifics(
        RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing())
            .with_memory(MemoryRefreshKind::nothing().with_ram()),
    );
    let cpu = sys.cpus().first().map(|c| c.brand().trim().to_string()).unwrap_or_default();
    HardwareReport {
        cpu: if cpu.is_empty() { "unknown CPU".into() } else { cpu },
        physical_cores: physical_cores(),
        logical_cores: sys.cpus().len(),
        memory_bytes: sys.total_memory(),
        os: format!(
            "{} {}",
            System::name().unwrap_or_else(|| std::env::consts::OS.into()),
            System::os_version().unwrap_or_default()
        )
        .trim()
        .to_string(),
        arch: std::env::consts::ARCH.into(),
        cpu_features: cpu_features(),
        backend_devices: Vec::new(),
    }
}

/// Physical cores: the default thread count for every backend (hyper-threads share
/// the same vector units and slow the matmuls down).
pub fn physical_cores() -> usize {
    sysinfo::System::physical_core_count()
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1)
}

fn cpu_features() -> Vec<String> {
    #[allow(unused_mut)]
    let mut out: Vec<String> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => { $( if std::arch::is_x86_feature_detected!($f) { out.push($f.to_string()); } )* };
        }
        detect!("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni", "avxvnni");
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => { $( if std::arch::is_aarch64_feature_detected!($f) { out.push($f.to_string()); } )* };
        }
        detect!("neon", "dotprod", "i8mm", "fp16", "sve");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_reports_this_machine() {
        let hw = super::probe();
        assert!(hw.physical_cores >= 1 && hw.logical_cores >= hw.physical_cores.min(hw.logical_cores));
        assert!(hw.memory_bytes > 0);
        assert_eq!(hw.arch, std::env::consts::ARCH);
    }
}
