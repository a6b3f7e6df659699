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

use crate::backend::{BackendInfo, LoadSpec};
use crate::coordinator::{Worker, WorkerError};
use crate::protocol::{Command, Reply};
use crate::scheduler::{SchedulerConfig, WorkRequest};

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
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), WorkerError>;
    fn submit(&mut self, request: WorkRequest) -> Result<(), WorkerError>;
    /// Ask for a request to end early; it still ends with a `Finished` or `Failed` event.
    fn cancel(&mut self, id: u64);
    /// The next reply within `timeout`, with the instant it was received.
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, WorkerError>;
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

impl Target for Worker {
    fn info(&self) -> &BackendInfo {
        Worker::info(self)
    }
    fn load_ms(&self) -> f64 {
        Worker::load_ms(self)
    }
    fn pid(&self) -> Option<u32> {
        Some(Worker::pid(self))
    }
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), WorkerError> {
        Worker::configure(self, config.clone())
    }
    fn submit(&mut self, request: WorkRequest) -> Result<(), WorkerError> {
        Worker::submit(self, request)
    }
    fn cancel(&mut self, id: u64) {
        // A worker that is gone cannot cancel; its exit ends the request anyway.
        let _ = self.send(&Command::Cancel { id });
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, WorkerError> {
        Worker::recv(self, timeout)
    }
    fn to_local(&self, target_ns: u64) -> Instant {
        Worker::to_local(self, target_ns)
    }
    fn kill(&mut self) {
        Worker::kill(self)
    }
    fn is_gone(&mut self) -> bool {
        Worker::is_gone(self)
    }
    fn close(&mut self) {
        let _ = self.send(&Command::Shutdown);
    }
    fn reset_peak_rss(&self) {
        Worker::reset_peak_rss(self)
    }
    fn peak_rss_mib(&self) -> Option<f64> {
        Worker::peak_rss_mib(self)
    }
}

/// Starts a target for a name (a backend, or a server's address), loaded as asked. Sweeps
/// and live mode both start targets through one of these; live mode calls it on a helper
/// thread, so a long load never holds up its commands.
pub type Spawner = Arc<dyn Fn(&str, &LoadSpec, &SchedulerConfig) -> Result<Box<dyn Target>, WorkerError> + Send + Sync>;
