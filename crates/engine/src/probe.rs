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
}

impl Probe {
    /// The limits of the device a backend reported running on (`BackendInfo::device`):
    /// a CPU device's are the CPU's; a GPU's are absent until a GPU probe exists.
    pub fn for_device(&self, device: &str) -> Option<&Limits> {
        let cpu = device.starts_with("CPU") || device.is_empty();
        self.devices.iter().find(|l| cpu && l.device.starts_with("CPU"))
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
pub fn measure(key: String, threads: usize, compute: &dyn Fn() -> anyhow::Result<(f64, String)>) -> anyhow::Result<Probe> {
    let started = Instant::now();
    let memory = read_bandwidth(threads, BANDWIDTH_BUFFER_BYTES, Duration::from_millis(1500));
    let (flops, method) = compute()?;
    Ok(Probe {
        key,
        measured_unix_ms: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        seconds: started.elapsed().as_secs_f64(),
        devices: vec![Limits { device: format!("CPU ({threads} threads)"), memory_bytes_per_s: memory, compute_flops_per_s: flops, compute_method: method }],
    })
}

/// Keep `probe` at `path` for the next run on this machine and build, in place of the one
/// it measures again (atomically).
pub fn save(path: &Path, probe: &Probe) -> anyhow::Result<()> {
    let mut all = kept(path);
    all.retain(|p| p.key != probe.key);
    all.push(probe.clone());
    crate::results::write_atomic(path, &serde_json::to_vec_pretty(&all)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_adds_every_word() {
        let words: Vec<u64> = (1..=1001).collect();
        assert_eq!(sum(&words), 1001 * 1002 / 2);
    }

    /// The probe against the plainest loop there is: each thread folds its own slice over
    /// and over, unsynchronised, and the bandwidth is the sum of each thread's best pass.
    /// Same buffer size, thread count and time, interleaved so load on the machine hits
    /// both alike: the probe must agree within 25%.
    #[test]
    fn bandwidth_agrees_with_a_plain_loop() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let bytes = 256 << 20;
        let plain = |time: Duration| -> f64 {
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
        let (mut ours, mut theirs) = (0f64, 0f64);
        for _ in 0..3 {
            ours = ours.max(read_bandwidth(threads, bytes, Duration::from_millis(400)));
            theirs = theirs.max(plain(Duration::from_millis(400)));
        }
        let ratio = ours / theirs;
        eprintln!("probe {:.2} GB/s, plain loop {:.2} GB/s, ratio {ratio:.3}", ours / 1e9, theirs / 1e9);
        assert!((0.75..=1.25).contains(&ratio), "probe ÷ plain loop = {ratio:.3}");
    }

    #[test]
    fn a_cached_probe_is_reused_only_on_the_same_machine_and_build() {
        let dir = tempfile::tempdir().unwrap();
        let path = cache_path(dir.path());
        let limits = Limits { device: "CPU (1 threads)".into(), memory_bytes_per_s: 1.0e10 / 3.0, compute_flops_per_s: 1e9, compute_method: "given".into() };
        let probe = Probe { key: "machine A".into(), measured_unix_ms: 1, seconds: 2.5, devices: vec![limits] };
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
    }
}
