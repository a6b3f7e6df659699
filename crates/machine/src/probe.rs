//! Measuring a machine's limits ([`crate::roofline::Limits`]): memory read bandwidth with
//! every thread streaming its own share of a buffer far larger than the caches, as decode
//! streams the weights. The compute rate comes from a backend library's matrix product
//! (the binary passes it in). Results are kept per machine and build, since a probe takes
//! seconds and the figures only change with the hardware or the code.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::roofline::Limits;

/// Bytes the bandwidth probe streams: far beyond any CPU's last-level cache.
pub const BANDWIDTH_BUFFER_BYTES: usize = 512 << 20;

/// Memory read bandwidth (bytes/s) of `threads` threads each summing its own slice of a
/// `bytes`-byte buffer, best of passes over at least `min_time`. The buffer is written
/// first with varied values (at least three passes are timed), so every page is real memory (not the shared zero page) and
/// each thread's slice sits where that thread first touched it.
pub fn read_bandwidth(threads: usize, bytes: usize, min_time: Duration) -> f64 {
    let threads = threads.max(1);
    let words = (bytes / 8).max(threads * 64);
    let per_thread = words / threads;
    let barrier = std::sync::Barrier::new(threads);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let best = std::sync::Mutex::new(f64::INFINITY);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, stop, best) = (&barrier, &stop, &best);
            s.spawn(move || {
                let slice: Vec<u64> = (0..per_thread as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t as u64).collect();
                let mut passes = 0;
                loop {
                    barrier.wait();
                    let t0 = Instant::now();
                    std::hint::black_box(sum(std::hint::black_box(&slice)));
                    // A pass ends when its slowest thread does, as a decode step does.
                    let end = barrier.wait();
                    let pass = t0.elapsed().as_secs_f64();
                    {
                        let mut b = best.lock().unwrap();
                        *b = b.min(pass);
                    }
                    passes += 1;
                    if end.is_leader() {
                        stop.store(passes >= 3 && started.elapsed() >= min_time, std::sync::atomic::Ordering::SeqCst);
                    }
                    // Every thread reads the same decision, or one would wait alone.
                    barrier.wait();
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                }
            });
        }
    });
    (per_thread * 8 * threads) as f64 / best.into_inner().unwrap()
}

/// The sum of every word. A plain fold: the compiler unrolls and vectorizes it into
/// independent accumulators; a hand-unrolled version measured 7× slower with
/// `target-cpu=native` on an AVX-512 CPU (worse code, not more work).
fn sum(words: &[u64]) -> u64 {
    words.iter().fold(0u64, |a, w| a.wrapping_add(*w))
}

/// A machine's measured limits with what identifies the machine and build they belong to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// CPU, logical cores, memory, OS, tool version and build features: a cached probe is
    /// reused only when all match.
    pub key: String,
    /// Unix time (ms) it was measured.
    pub measured_unix_ms: u64,
    /// Seconds the probe took.
    pub seconds: f64,
    pub devices: Vec<Limits>,
    /// The share of the machine's CPU time that other programs used while it ran (Linux;
    /// `None` elsewhere). Limits measured beside other work read low: above [`BUSY_SHARE`]
    /// every table and page that shows them says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_share: Option<f64>,
    /// Devices of the build that could not be measured, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
}

/// Other programs' share of the CPU above which a probe's limits are said to read low.
/// Measured on 2 cores: a build beside the probe gave 31 GB/s and an app starting its
/// window 49 GB/s, where the idle machine reads 67.5 GB/s.
pub const BUSY_SHARE: f64 = 0.1;

/// CPU time so far, in clock ticks: the whole machine's busy time and total time (from
/// `/proc/stat`), and this process's own (from `/proc/self/stat`). `None` off Linux.
fn cpu_ticks() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let all: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total: u64 = all.iter().take(8).sum();
    let idle = all.get(3)? + all.get(4).copied().unwrap_or(0);
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces): utime and stime are the
    // 12th and 13th of them.
    let fields: Vec<&str> = own.get(own.rfind(')')? + 2..)?.split(' ').collect();
    let own = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((total - idle, total, own))
}

/// The share of the machine's CPU time between `before` and `after` that was neither idle
/// nor this process's.
fn others_share(before: (u64, u64, u64), after: (u64, u64, u64)) -> Option<f64> {
    let (busy, total, own) = (after.0.checked_sub(before.0)?, after.1.checked_sub(before.1)?, after.2.checked_sub(before.2)?);
    (total > 0).then(|| busy.saturating_sub(own) as f64 / total as f64)
}

impl Probe {
    /// What to say of limits measured beside other work; `None` for a quiet probe.
    pub fn busy_note(&self) -> Option<String> {
        let share = self.others_cpu_share.filter(|&s| s > BUSY_SHARE)?;
        Some(format!(
            "other programs used {:.0}% of the CPU while these limits were measured, so they read low and the shares of them read high; `lx hw --limits --refresh` on an idle machine measures them again",
            share * 100.0
        ))
    }

    /// The limits of the device a backend reported running on (`BackendInfo::device`):
    /// a CPU device's are the CPU's; a GPU's are that GPU's when the whole model ran on it
    /// (llama.cpp's `Vulkan0 llvmpipe (...): all 19 layers`). candle and MLX name the same
    /// GPUs their own way (`CUDA:0`, `Metal:0`, `Metal: Apple M3 (MLX)`) and get the limits
    /// ggml measured on them, as all three share the CPU's: they are the hardware's. A model
    /// split between devices, or a GPU the probe did not measure, has none.
    pub fn for_device(&self, device: &str) -> Option<&Limits> {
        // llama.cpp lists a split's devices one after another (`CPU (8 threads): 9 of 19
        // layers; CUDA0 ...: 10 of 19 layers`), whichever comes first.
        if device.contains(" layers; ") {
            return None;
        }
        let on_cpu = |d: &str| d.starts_with("CPU") || d.is_empty();
        if on_cpu(device) {
            return self.devices.iter().find(|l| on_cpu(&l.device));
        }
        let ggml_name = ggml_device_name(device);
        self.devices.iter().filter(|l| !on_cpu(&l.device)).find(|l| {
            device.starts_with(&format!("{}: all ", l.device)) || ggml_name.as_deref().is_some_and(|n| l.device.split(' ').next() == Some(n))
        })
    }
}

/// ggml's name (`CUDA0`, `MTL0`) for a GPU as candle or MLX report it.
fn ggml_device_name(device: &str) -> Option<String> {
    if let Some(index) = device.strip_prefix("CUDA:") {
        return index.parse::<u32>().ok().map(|i| format!("CUDA{i}"));
    }
    let rest = device.strip_prefix("Metal:")?;
    // candle's `Metal:0`, or MLX's `Metal: <chip> (MLX)` on the default GPU.
    match rest.trim().parse::<u32>() {
        Ok(i) => Some(format!("MTL{i}")),
        Err(_) => rest.ends_with("(MLX)").then(|| "MTL0".to_string()),
    }
}

/// The key a cached probe must match: this machine and this build.
pub fn machine_key(hw: &crate::hardware::HardwareReport) -> String {
    format!(
        "{} | {} logical cores | {} bytes | {} {} | lx {} | {}",
        hw.cpu,
        hw.logical_cores,
        hw.memory_bytes,
        hw.os,
        hw.arch,
        env!("CARGO_PKG_VERSION"),
        if hw.build_features.is_empty() { "cpu".to_string() } else { hw.build_features.join(",") }
    )
}

/// Where the probe is cached: `limits.json` in the cache root (`~/.cache/latency-explorer`).
pub fn cache_path(cache_root: &Path) -> PathBuf {
    cache_root.join("limits.json")
}

/// Every probe kept at `path`, one per machine and build (builds with other features share
/// a machine's cache); none when the file is missing or damaged.
fn kept(path: &Path) -> Vec<Probe> {
    std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// The cached probe at `path` if one was taken on this machine and build.
pub fn cached(path: &Path, key: &str) -> Option<Probe> {
    kept(path).into_iter().find(|p| p.key == key)
}

/// Measure this machine's CPU with `threads` threads; `compute` gives the matrix-product
/// rate (FLOP/s) and what measured it.
pub fn measure<E>(key: String, threads: usize, compute: &dyn Fn() -> Result<(f64, String), E>) -> Result<Probe, E> {
    let started = Instant::now();
    let ticks = cpu_ticks();
    let memory = read_bandwidth(threads, BANDWIDTH_BUFFER_BYTES, Duration::from_millis(1500));
    let (flops, method) = compute()?;
    Ok(Probe {
        key,
        measured_unix_ms: lx_engine::date::now_unix_ms(),
        seconds: started.elapsed().as_secs_f64(),
        devices: vec![Limits { device: format!("CPU ({threads} threads)"), memory_bytes_per_s: memory, compute_flops_per_s: flops, compute_method: method }],
        others_cpu_share: ticks.zip(cpu_ticks()).and_then(|(a, b)| others_share(a, b)),
        unmeasured: Vec::new(),
    })
}

/// Keep `probe` at `path` for the next run on this machine and build, in place of the one
/// it measures again (atomically).
pub fn save(path: &Path, probe: &Probe) -> std::io::Result<()> {
    let mut all = kept(path);
    all.retain(|p| p.key != probe.key);
    all.push(probe.clone());
    lx_engine::atomic_file::write(path, &serde_json::to_vec_pretty(&all)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_programs_share_of_the_cpu() {
        // Of 1000 ticks, 700 busy, 600 of them ours: others used a tenth.
        assert_eq!(others_share((100, 1000, 50), (800, 2000, 650)), Some(0.1));
        assert_eq!(others_share((0, 0, 0), (0, 0, 0)), None);
        // Counters never run backwards; if they seem to (a different boot), no answer.
        assert_eq!(others_share((5, 10, 0), (4, 20, 0)), None);
        #[cfg(target_os = "linux")]
        {
            let (busy, total, _) = cpu_ticks().expect("/proc/stat reads on Linux");
            assert!(busy <= total && total > 0);
            // Spinning for a while shows up as this process's own time, not others'.
            let before = cpu_ticks().unwrap();
            let t = Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(300) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            assert!(cpu_ticks().unwrap().2 > before.2, "300 ms of spinning took no CPU time");
        }
    }

    #[test]
    fn sum_adds_every_word() {
        let words: Vec<u64> = (1..=1001).collect();
        assert_eq!(sum(&words), 1001 * 1002 / 2);
    }

    /// The probe against the plainest loop there is: each thread folds its own slice over
    /// and over, unsynchronised, and the bandwidth is the sum of each thread's best pass.
    /// Same buffer size and time, interleaved so load on the machine hits both alike.
    ///
    /// On one thread both measure the same thing (the best pass), so they must agree within
    /// 25%: that checks the bytes counted and the loop. On every thread they do not: a probe
    /// pass lasts as long as its slowest thread (as a decode step does), while the plain
    /// loop adds up bests its threads may have reached at different moments, which is an
    /// upper bound. Beside other tests on a 2-core CI machine that bound measured 1.43× the
    /// probe (13.6 against 19.5 GB/s), so there the probe must not exceed it (by more than
    /// noise) and must reach half of it: a probe that counted one thread's bytes, or read
    /// from cache, would fall outside.
    #[test]
    fn bandwidth_agrees_with_a_plain_loop() {
        let bytes = 256 << 20;
        let plain = |threads: usize, time: Duration| -> f64 {
            std::thread::scope(|s| {
                let workers: Vec<_> = (0..threads)
                    .map(|t| {
                        s.spawn(move || {
                            let slice: Vec<u64> = (0..(bytes / 8 / threads) as u64).map(|i| i ^ t as u64 ^ 0x5555).collect();
                            let (started, mut best) = (Instant::now(), 0f64);
                            while started.elapsed() < time {
                                let t0 = Instant::now();
                                std::hint::black_box(std::hint::black_box(&slice).iter().fold(0u64, |a, w| a.wrapping_add(*w)));
                                best = best.max((slice.len() * 8) as f64 / t0.elapsed().as_secs_f64());
                            }
                            best
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            })
        };
        let ratio = |threads: usize| {
            let (mut ours, mut theirs) = (0f64, 0f64);
            for _ in 0..3 {
                ours = ours.max(read_bandwidth(threads, bytes, Duration::from_millis(400)));
                theirs = theirs.max(plain(threads, Duration::from_millis(400)));
            }
            eprintln!("{threads} thread(s): probe {:.2} GB/s, plain loop {:.2} GB/s, ratio {:.3}", ours / 1e9, theirs / 1e9, ours / theirs);
            ours / theirs
        };
        let one = ratio(1);
        assert!((0.75..=1.25).contains(&one), "one thread: probe ÷ plain loop = {one:.3}");
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads > 1 {
            let all = ratio(threads);
            assert!((0.5..=1.25).contains(&all), "{threads} threads: probe ÷ plain loop = {all:.3}");
        }
    }

    #[test]
    fn a_cached_probe_is_reused_only_on_the_same_machine_and_build() {
        let dir = tempfile::tempdir().unwrap();
        let path = cache_path(dir.path());
        let limits = Limits { device: "CPU (1 threads)".into(), memory_bytes_per_s: 1.0e10 / 3.0, compute_flops_per_s: 1e9, compute_method: "given".into() };
        let probe = Probe { key: "machine A".into(), measured_unix_ms: 1, seconds: 2.5, devices: vec![limits], others_cpu_share: None, unmeasured: Vec::new() };
        save(&path, &probe).unwrap();
        // JSON keeps each figure to its shortest round-trip form; compare what identifies it.
        let again = cached(&path, "machine A").expect("cached");
        assert_eq!((again.key.as_str(), again.devices.len()), ("machine A", 1));
        assert!((again.devices[0].memory_bytes_per_s / probe.devices[0].memory_bytes_per_s - 1.0).abs() < 1e-12);
        assert_eq!(cached(&path, "machine B"), None);
        // Another build's probe is kept beside it; measuring again replaces the first.
        save(&path, &Probe { key: "machine A, vulkan".into(), ..probe.clone() }).unwrap();
        save(&path, &Probe { measured_unix_ms: 2, ..probe.clone() }).unwrap();
        assert_eq!(cached(&path, "machine A").map(|p| p.measured_unix_ms), Some(2));
        assert_eq!(cached(&path, "machine A, vulkan").map(|p| p.measured_unix_ms), Some(1));
        std::fs::write(&path, b"{ damaged").unwrap();
        assert_eq!(cached(&path, "machine A"), None);
        assert_eq!(probe.for_device("CPU (AVX2, 2 threads)").map(|l| l.compute_flops_per_s), Some(1e9));
        assert_eq!(probe.for_device("CUDA0: NVIDIA H200"), None);
        // A GPU's limits serve a model wholly on it, not one split with the CPU.
        let gpu = Limits { device: "Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits)".into(), compute_flops_per_s: 5e10, ..probe.devices[0].clone() };
        let both = Probe { devices: vec![probe.devices[0].clone(), gpu], ..probe.clone() };
        assert_eq!(both.for_device("Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits): all 19 layers").map(|l| l.compute_flops_per_s), Some(5e10));
        assert_eq!(both.for_device("Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits): 10 of 19 layers; CPU (AVX2, 2 threads): 9 of 19 layers"), None);
        assert_eq!(both.for_device("CPU (AVX2, 2 threads): all 19 layers").map(|l| l.compute_flops_per_s), Some(1e9));
        assert_eq!(both.for_device("CPU (AVX2, 2 threads): 9 of 19 layers; Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits): 10 of 19 layers"), None);
        // candle's CPU, with its note on the thread count.
        assert!(both.for_device("CPU (AVX2, 2 threads; 4 requested but candle was already initialised)").is_some());
        assert_eq!(both.for_device("CUDA:0"), None);
        // candle's and MLX's names for the GPUs ggml measured.
        let cuda = Limits { device: "CUDA0 NVIDIA H200".into(), memory_bytes_per_s: 4e12, ..probe.devices[0].clone() };
        let metal = Limits { device: "MTL0 Apple M3 Max".into(), memory_bytes_per_s: 3e11, ..probe.devices[0].clone() };
        let gpus = Probe { devices: vec![probe.devices[0].clone(), cuda, metal], ..probe.clone() };
        let read = |d: &str| gpus.for_device(d).map(|l| l.memory_bytes_per_s);
        assert_eq!(read("CUDA:0"), Some(4e12));
        assert_eq!(read("CUDA0 NVIDIA H200: all 19 layers"), Some(4e12));
        assert_eq!(read("CUDA:1"), None);
        assert_eq!(read("Metal:0"), Some(3e11));
        assert_eq!(read("Metal: Apple M3 Max (MLX)"), Some(3e11));
        assert_eq!(read("CPU: Apple M3 Max (MLX)"), Some(probe.devices[0].memory_bytes_per_s));
        assert_eq!(read("Metal: something else"), None);
    }
}
