//! What serves requests: the one interface the client loop drives, in sweeps and in live
//! mode alike.
//!
//! A target takes whole requests, streams their tokens back and says how each ended. Our
//! worker process is one (it runs our scheduler, and also reports admits, prefill slices
//! and passes on its own clock, which [`Target::to_local`] maps onto ours); an
//! OpenAI-compatible server is another (it schedules requests itself and reports only
//! tokens). Every stamp a figure is computed from (submit, each token's receipt) is taken
//! on the client side, so nothing above this trait needs to know which kind it drives.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::{BackendInfo, LoadSpec};
use crate::protocol::{Reply, PROTOCOL_VERSION};
use lx_engine::scheduler::{SchedulerConfig, WorkRequest};

/// Why talking to a target failed: our worker process (it could not start, speaks another
/// protocol, died or hung) or a server (the same words for its connection).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("could not start worker {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("worker speaks protocol {0}, this build speaks {PROTOCOL_VERSION}: rebuild both from the same tree")]
    Protocol(u32),
    #[error("{0}")]
    Load(String),
    #[error("worker {0}")]
    Died(String),
    #[error("worker stopped answering for {0:?}; it was killed")]
    Hung(Duration),
    #[error("unexpected reply from worker: {0}")]
    Unexpected(String),
}

pub trait Target: Send {
    /// What runs behind it: backend, version, device.
    fn info(&self) -> &BackendInfo;
    /// How long it took to become ready (model load, or connecting to a server), ms.
    fn load_ms(&self) -> f64;
    /// Operating-system process id, for a target that is a local process.
    fn pid(&self) -> Option<u32> {
        None
    }
    /// True when the target schedules requests itself (a server): our scheduler settings
    /// (policy, slots, batch limits) do not apply to it, and results say so.
    fn schedules_itself(&self) -> bool {
        false
    }
    /// Apply scheduler settings to requests admitted from now on.
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), TargetError>;
    fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError>;
    /// Ask for a request to end early; it still ends with a `Finished` or `Failed` event.
    fn cancel(&mut self, id: u64);
    /// The next reply within `timeout`, with the instant it was received.
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError>;
    /// A stamp on the target's clock (nanoseconds), as an instant on ours.
    fn to_local(&self, target_ns: u64) -> Instant;
    /// Give up on a target that stopped answering.
    fn kill(&mut self);
    /// Whether it has ended (a worker that exited); a target that is gone is replaced.
    fn is_gone(&mut self) -> bool {
        false
    }
    /// Ask it to finish without waiting: several targets then wind down at once, and
    /// dropping each waits for it.
    fn close(&mut self) {}
    /// Start a new peak-memory window, where the target is a local process.
    fn reset_peak_rss(&self) {}
    /// Peak resident memory since the last reset, MiB, where the target is a local process.
    fn peak_rss_mib(&self) -> Option<f64> {
        None
    }
}

/// Starts a target for a name (a backend, or a server's address), loaded as asked. Sweeps
/// and live mode both start targets through one of these; live mode calls it on a helper
/// thread, so a long load never holds up its commands.
pub type Spawner = Arc<dyn Fn(&str, &LoadSpec, &SchedulerConfig) -> Result<Box<dyn Target>, TargetError> + Send + Sync>;
