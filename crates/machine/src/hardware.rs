//! What machine a measurement was taken on (for `lx hw`, result files and the app).

use serde::{Deserialize, Serialize};

/// CPU, memory and OS facts, plus each backend's own device list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct HardwareReport {
    pub cpu: String,
    pub physical_cores: usize,
    pub logical_cores: usize,
    pub memory_bytes: u64,
    pub os: String,
    pub arch: String,
    /// CPU features the measured builds may use (x86: avx2, avx512f, fma...; Arm: neon...).
    pub cpu_features: Vec<String>,
    /// GPUs the operating system shows, whatever the backends make of them (so a GPU that a
    /// CPU-only build ignores is still visible). Empty when none was found.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Devices each backend can see, e.g. ("llama", ["CPU: AMD EPYC ..."]). Filled by the binary,
    /// which knows the backends.
    pub backend_devices: Vec<(String, Vec<String>)>,
    /// Backend features this build was compiled with (`cuda`, `metal`, `mlx`, `vulkan`; MLX
    /// is CPU-only on Linux); empty for a CPU-only build without MLX. Filled by the binary, like `backend_devices`.
    #[serde(default)]
    pub build_features: Vec<String>,
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
    let gpus = gpus(&cpu);
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
        gpus,
        backend_devices: Vec::new(),
        build_features: Vec::new(),
    }
}

/// GPUs, found without any GPU library: NVIDIA's driver files or `nvidia-smi`, the Linux DRM
/// devices of other vendors (PCI ids only), and Apple Silicon's integrated GPU.
fn gpus(cpu_brand: &str) -> Vec<String> {
    let mut found = Vec::new();
    if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        found.push(format!("{} integrated GPU (unified memory)", cpu_brand.trim()));
    }
    #[cfg(target_os = "linux")]
    {
        let mut nvidia = read_glob("/proc/driver/nvidia/gpus", "information").iter().filter_map(|info| nvidia_model(info)).collect::<Vec<_>>();
        found.append(&mut nvidia);
        for (vendor, device) in drm_pci_ids() {
            // NVIDIA cards are named above from the driver's own files.
            if vendor != 0x10de {
                found.push(format!("{} GPU (PCI {vendor:04x}:{device:04x})", pci_vendor(vendor)));
            }
        }
    }
    if !found.iter().any(|g| g.contains("NVIDIA")) {
        found.extend(nvidia_smi());
    }
    found
}

/// The "Model:" line of `/proc/driver/nvidia/gpus/*/information`.
fn nvidia_model(information: &str) -> Option<String> {
    let model = information.lines().find_map(|l| l.strip_prefix("Model:"))?.trim();
    (!model.is_empty()).then(|| if model.contains("NVIDIA") { model.to_string() } else { format!("NVIDIA {model}") })
}

/// GPUs as `nvidia-smi` lists them (Windows, or Linux without the proc files), when it is installed.
fn nvidia_smi() -> Vec<String> {
    let out = std::process::Command::new("nvidia-smi").args(["--query-gpu=name,memory.total", "--format=csv,noheader"]).output();
    match out {
        Ok(o) if o.status.success() => parse_nvidia_smi(&String::from_utf8_lossy(&o.stdout)),
        _ => Vec::new(),
    }
}

fn parse_nvidia_smi(csv: &str) -> Vec<String> {
    csv.lines()
        .filter_map(|l| {
            let (name, memory) = l.split_once(',').map_or((l, ""), |(n, m)| (n, m));
            let name = name.trim();
            (!name.is_empty()).then(|| if memory.trim().is_empty() { name.to_string() } else { format!("{name} ({})", memory.trim()) })
        })
        .collect()
}

fn pci_vendor(id: u32) -> &'static str {
    match id {
        0x1002 => "AMD",
        0x8086 => "Intel",
        0x10de => "NVIDIA",
        0x13b5 => "Arm",
        0x5143 => "Qualcomm",
        _ => "other",
    }
}

/// `file` in every sub-directory of `dir`, read as text.
#[cfg(target_os = "linux")]
fn read_glob(dir: &str, file: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().filter_map(|e| std::fs::read_to_string(e.path().join(file)).ok()).collect()
}

/// (vendor, device) PCI ids of the display devices under /sys/class/drm (cards, not connectors).
#[cfg(target_os = "linux")]
fn drm_pci_ids() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/sys/class/drm") else { return Vec::new() };
    let hex = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok());
    let mut ids: Vec<(u32, u32)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().strip_prefix("card").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())))
        .filter_map(|e| Some((hex(e.path().join("device/vendor"))?, hex(e.path().join("device/device"))?)))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Physical cores: the default thread count for every backend (hyper-threads share
/// the same vector units and slow the matmuls down).
pub fn physical_cores() -> usize {
    sysinfo::System::physical_core_count()
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1)
}

/// A thread count as the settings give it: 0 means every physical core.
pub fn threads_or_cores(threads: usize) -> usize {
    if threads == 0 { physical_cores() } else { threads }
}

/// Memory the system could give a new process now (free plus reclaimable caches), bytes.
pub fn available_memory_bytes() -> u64 {
    use sysinfo::{MemoryRefreshKind, RefreshKind, System};
    System::new_with_specifics(RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram())).available_memory()
}

/// Resident memory (RSS) of process `pid` in bytes; `None` once it has exited.
pub fn resident_bytes(pid: u32) -> Option<u64> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let pid = Pid::from_u32(pid);
    let mut sys = System::new();
    sys.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, ProcessRefreshKind::nothing().with_memory());
    sys.process(pid).map(|p| p.memory())
}

/// The CPU features of [`cpu_features`]' list that this build was compiled to use
/// (`-C target-cpu`; llama.cpp's ggml follows the same flags, which its build script is given).
/// A build for a lesser CPU runs the same machine slower, so a comparison of machines says
/// which build measured.
pub fn compiled_for() -> Vec<String> {
    #[allow(unused_mut)]
    let mut out: Vec<String> = Vec::new();
    macro_rules! compiled {
        ($($f:tt),*) => { $( if cfg!(target_feature = $f) { out.push($f.to_string()); } )* };
    }
    #[cfg(target_arch = "x86_64")]
    compiled!("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni", "avxvnni");
    #[cfg(target_arch = "aarch64")]
    compiled!("neon", "dotprod", "i8mm", "fp16", "sve");
    out
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
        assert!(hw.physical_cores >= 1, "at least one core: {}", hw.physical_cores);
        assert!(hw.logical_cores >= hw.physical_cores, "every core runs at least one hardware thread: {} logical, {} physical", hw.logical_cores, hw.physical_cores);
        assert!(hw.memory_bytes > 0);
        assert_eq!(hw.arch, std::env::consts::ARCH);
        // A build runs only where the CPU has what it was compiled for.
        for f in super::compiled_for() {
            assert!(hw.cpu_features.contains(&f), "compiled for {f}, which this CPU lacks ({:?})", hw.cpu_features);
        }
    }

    #[test]
    fn resident_memory_follows_what_a_process_touches() {
        let me = std::process::id();
        let before = super::resident_bytes(me).expect("this process is running");
        let block = vec![1u8; 64 << 20];
        let after = super::resident_bytes(me).unwrap();
        assert!(after >= before + (48 << 20), "64 MiB touched: RSS {before} -> {after}");
        drop(std::hint::black_box(block));
        let mut child = std::process::Command::new(std::env::current_exe().unwrap()).arg("--list").stdout(std::process::Stdio::null()).spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(super::resident_bytes(pid), None, "an exited (reaped) process has no memory");
    }

    #[test]
    fn gpu_names_from_nvidia_files_and_tools() {
        let info = "Model: \t\t NVIDIA GeForce RTX 4090\nIRQ:   \t 139\nGPU UUID: \t GPU-1234\n";
        assert_eq!(super::nvidia_model(info).as_deref(), Some("NVIDIA GeForce RTX 4090"));
        assert_eq!(super::nvidia_model("Model: \t Tesla T4\n").as_deref(), Some("NVIDIA Tesla T4"));
        assert_eq!(super::nvidia_model("IRQ: 5\n"), None);
        let smi = "NVIDIA H200, 143771 MiB\nNVIDIA GeForce RTX 3060, 12288 MiB\n\n";
        assert_eq!(super::parse_nvidia_smi(smi), vec!["NVIDIA H200 (143771 MiB)", "NVIDIA GeForce RTX 3060 (12288 MiB)"]);
        assert_eq!(super::pci_vendor(0x1002), "AMD");
    }

    #[test]
    fn old_reports_without_gpus_still_read() {
        let old = r#"{"cpu":"x","physical_cores":2,"logical_cores":2,"memory_bytes":1,"os":"Linux","arch":"x86_64","cpu_features":[],"backend_devices":[]}"#;
        let hw: super::HardwareReport = serde_json::from_str(old).unwrap();
        assert!(hw.gpus.is_empty());
    }
}
