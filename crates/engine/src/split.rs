//! How the `disaggregated` policy's two workers are set up: each one's threads and device,
//! and the path the states take between them. Part of the scheduler's configuration, so it
//! travels with a run's settings.

use serde::{Deserialize, Serialize};

use crate::handoff::TransferVia;

/// Where one of the two workers computes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    /// As the run's load settings say (`--gpu-layers`).
    #[default]
    Same,
    /// Every layer on the CPU.
    Cpu,
    /// Every layer on the GPU, where the build has one.
    Gpu,
}

impl Device {
    pub const ALL: [Device; 3] = [Device::Same, Device::Cpu, Device::Gpu];

    pub fn name(self) -> &'static str {
        match self {
            Device::Same => "same",
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        }
    }

    /// The layers to offload for this choice, given the run's own setting.
    pub fn gpu_layers(self, run: Option<u32>) -> Option<u32> {
        match self {
            Device::Same => run,
            Device::Cpu => Some(0),
            Device::Gpu => None,
        }
    }
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Device::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| format!("unknown device '{s}' (expected same, cpu or gpu)"))
    }
}

/// How the two workers of `disaggregated` are set up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct Split {
    /// The prefill worker's compute threads; 0: half the run's threads (at least one).
    #[serde(default)]
    pub prefill_threads: usize,
    /// The decode worker's compute threads; 0: the rest of the run's threads (at least one).
    #[serde(default)]
    pub decode_threads: usize,
    #[serde(default)]
    pub prefill_device: Device,
    #[serde(default)]
    pub decode_device: Device,
    #[serde(default)]
    pub via: TransferVia,
    /// The prefill worker computes prompts in chunks of the run's chunk size (as `chunked`
    /// does), so a short prompt shares passes with a long one instead of waiting for it.
    #[serde(default)]
    pub prefill_chunks: bool,
}

impl Split {
    pub fn is_default(&self) -> bool {
        *self == Split::default()
    }

    /// Threads of (prefill, decode) for a run of `threads` (0: this machine's physical
    /// `cores`): as asked, or the run's threads shared out, the prefill's half rounded down.
    pub fn threads(&self, threads: usize, cores: usize) -> (usize, usize) {
        let total = if threads == 0 { cores } else { threads }.max(2);
        let prefill = if self.prefill_threads > 0 { self.prefill_threads } else { (total / 2).max(1) };
        let decode = if self.decode_threads > 0 { self.decode_threads } else { total.saturating_sub(prefill).max(1) };
        (prefill, decode)
    }

    /// How results name it: `prefill 1 thread, decode 1 thread, via pipe`.
    pub fn label(&self, threads: (usize, usize)) -> String {
        let part = |name: &str, n: usize, d: Device| {
            let device = if d == Device::Same { String::new() } else { format!(" on the {}", d.name().to_uppercase()) };
            format!("{name} {n} thread{}{device}", if n == 1 { "" } else { "s" })
        };
        let chunks = if self.prefill_chunks { " in chunks" } else { "" };
        format!("{}{chunks}, {}, via {}", part("prefill", threads.0, self.prefill_device), part("decode", threads.1, self.decode_device), self.via.name())
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threads_are_shared_out_unless_given() {
        let split = Split::default();
        assert_eq!(split.threads(0, 2), (1, 1));
        assert_eq!(split.threads(0, 8), (4, 4));
        assert_eq!(split.threads(5, 8), (2, 3));
        // One thread cannot be split: each worker gets one.
        assert_eq!(split.threads(1, 8), (1, 1));
        let asked = Split { prefill_threads: 3, decode_threads: 1, ..Split::default() };
        assert_eq!(asked.threads(0, 2), (3, 1));
        assert_eq!(Split { prefill_threads: 3, ..Split::default() }.threads(8, 8), (3, 5));
        assert_eq!(asked.label((3, 1)), "prefill 3 threads, decode 1 thread, via file");
        let devices = Split { prefill_device: Device::Gpu, decode_device: Device::Cpu, via: TransferVia::Pipe, ..Split::default() };
        assert_eq!(devices.label((1, 1)), "prefill 1 thread on the GPU, decode 1 thread on the CPU, via pipe");
        assert_eq!(Split { prefill_chunks: true, ..Split::default() }.label((2, 2)), "prefill 2 threads in chunks, decode 2 threads, via file");
        assert_eq!(Device::Cpu.gpu_layers(None), Some(0));
        assert_eq!(Device::Same.gpu_layers(Some(7)), Some(7));
        assert_eq!("gpu".parse::<Device>(), Ok(Device::Gpu));
        assert!("npu".parse::<Device>().unwrap_err().contains("expected same, cpu or gpu"));
    }
}
