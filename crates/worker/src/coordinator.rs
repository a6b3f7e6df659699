//! The coordinator side of a worker: spawn it, talk to it, stamp what comes back.
//!
//! Every reply is stamped with the coordinator's monotonic clock the moment its line
//! is read ([`LineChild`]): that stamp is what TTFT and ITL are measured from
//! (client-side timing). If the worker dies or stops answering, the caller learns why,
//! and a new worker can be spawned for the next run.

use std::time::{Duration, Instant};

use lx_engine::backend::{BackendInfo, LoadSpec};
use crate::child::{LineChild, Next, WorkerCommand};
use lx_client::protocol::{Command, Reply, PROTOCOL_VERSION};
use lx_client::target::{Target, TargetError};
use lx_engine::scheduler::{SchedulerConfig, WorkRequest};

/// A live worker process with one loaded model.
pub struct Worker {
    child: LineChild,
    info: BackendInfo,
    load_ms: f64,
    /// Worker clock + offset = coordinator clock (ns since `epoch`).
    offset_ns: i128,
    epoch: Instant,
}

impl Worker {
    /// Start a worker, load `spec` into it and synchronise clocks. `load_timeout` bounds each
    /// wait of the start; the load itself is given up only after `load_timeout` with neither
    /// an answer nor the worker's use of the CPU ([`Worker::expect_load`]): a load can take a
    /// while on a cold disk, and converting a large model's weights keeps a core busy for
    /// minutes without a word.
    pub fn spawn(cmd: &WorkerCommand, spec: &LoadSpec, scheduler: &SchedulerConfig, load_timeout: Duration) -> Result<Worker, TargetError> {
        let child = LineChild::spawn(cmd, true).map_err(|source| TargetError::Spawn { program: cmd.program.display().to_string(), source })?;
        let mut w = Worker { child, info: BackendInfo::default(), load_ms: 0.0, offset_ns: 0, epoch: Instant::now() };
        match w.expect_reply(Instant::now() + load_timeout)? {
            Reply::Hello { protocol, .. } if protocol == PROTOCOL_VERSION => {}
            Reply::Hello { protocol, .. } => return Err(TargetError::Protocol(protocol)),
            other => return Err(TargetError::Unexpected(format!("{other:?}"))),
        }
        w.send(&Command::Load { spec: spec.clone(), scheduler: scheduler.clone() })?;
        match w.expect_load(load_timeout)? {
            Reply::Loaded { info, load_ms } => {
                w.info = info;
                w.load_ms = load_ms;
            }
            Reply::LoadFailed { error } => {
                w.shutdown();
                return Err(TargetError::Load(error));
            }
            other => return Err(TargetError::Unexpected(format!("{other:?}"))),
        }
        w.sync_clock(Instant::now() + load_timeout)?;
        Ok(w)
    }

    /// What the worker loaded.
    pub fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// How long the model took to load in the worker.
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Operating-system process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Start a new peak-memory window (Linux: `5` to `clear_refs` resets `VmHWM` to the
    /// current RSS), so each point reports its own peak rather than the worker's lifetime's.
    pub fn reset_peak_rss(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }

    /// The worker process's peak resident memory since it started or since the last
    /// [`Worker::reset_peak_rss`], in MiB: the kernel's high-water mark (`VmHWM`), so a short
    /// peak between two looks is not missed. Linux only for now (`None` elsewhere, and once
    /// the worker has exited).
    pub fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib / 1024.0)
    }

    /// CPU seconds the worker process has used (user and system, its own threads; Linux only,
    /// `None` elsewhere and once it has exited).
    fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // After the command name's closing parenthesis: utime and stime are the 12th and 13th
        // fields, in the kernel's fixed 100 ticks a second.
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
        let (user, system): (f64, f64) = (fields.next()?.parse().ok()?, fields.next()?.parse().ok()?);
        Some((user + system) / 100.0)
    }

    /// The answer to `Load`. The worker says nothing while it loads, so what tells a slow load
    /// from a stuck one is whether it computes: it is given up (killed, [`TargetError::Hung`])
    /// once `quiet_for` has passed with no answer and under a tenth of a core used. Where its
    /// CPU time cannot be read, `quiet_for` bounds the whole load.
    fn expect_load(&mut self, quiet_for: Duration) -> Result<Reply, TargetError> {
        let look = (quiet_for / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        let (mut cpu, mut busy_at, mut looked_at) = (self.cpu_seconds(), Instant::now(), Instant::now());
        loop {
            let left = (busy_at + quiet_for).saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.kill();
                return Err(TargetError::Hung(quiet_for));
            }
            match self.recv(left.min(look))? {
                Some((_, Reply::Error { error })) => return Err(TargetError::Unexpected(error)),
                Some((_, reply)) => return Ok(reply),
                None => {
                    let now = self.cpu_seconds();
                    if let (Some(before), Some(after)) = (cpu, now) {
                        if after - before >= 0.1 * looked_at.elapsed().as_secs_f64() {
                            busy_at = Instant::now();
                        }
                    }
                    (cpu, looked_at) = (now, Instant::now());
                }
            }
        }
    }

    fn expect_reply(&mut self, deadline: Instant) -> Result<Reply, TargetError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.recv(left)? {
            Some((_, Reply::Error { error })) => Err(TargetError::Unexpected(error)),
            Some((_, reply)) => Ok(reply),
            None => {
                self.kill();
                // How long this wait lasted (not what is left of the deadline: nothing).
                Err(TargetError::Hung(left.max(Duration::from_millis(1))))
            }
        }
    }

    /// Estimate the worker-clock offset from the ping with the shortest round trip.
    fn sync_clock(&mut self, deadline: Instant) -> Result<(), TargetError> {
        let mut best: Option<(Duration, i128)> = None;
        for nonce in 0..7u64 {
            let sent = Instant::now();
            self.send(&Command::Ping { nonce })?;
            match self.expect_reply(deadline)? {
                Reply::Pong { nonce: n, t } if n == nonce => {
                    let recv = Instant::now();
                    let rtt = recv - sent;
                    let mid = (sent - self.epoch).as_nanos() as i128 + rtt.as_nanos() as i128 / 2;
                    if best.is_none_or(|(r, _)| rtt < r) {
                        best = Some((rtt, mid - t as i128));
                    }
                }
                other => return Err(TargetError::Unexpected(format!("{other:?}"))),
            }
        }
        self.offset_ns = best.map(|(_, o)| o).unwrap_or(0);
        Ok(())
    }

    /// Map a worker timestamp onto the coordinator's clock.
    pub fn to_local(&self, worker_ns: u64) -> Instant {
        let ns = worker_ns as i128 + self.offset_ns;
        if ns >= 0 {
            self.epoch + Duration::from_nanos(ns as u64)
        } else {
            self.epoch.checked_sub(Duration::from_nanos((-ns) as u64)).unwrap_or(self.epoch)
        }
    }

    pub fn send(&mut self, cmd: &Command) -> Result<(), TargetError> {
        let line = serde_json::to_string(cmd).map_err(|e| TargetError::Unexpected(format!("a command that cannot be written: {e}")))?;
        self.child.write_line(&line).map_err(|_| TargetError::Died(self.child.exit_reason()))
    }

    /// Queue a request: it goes to the worker, with every request queued beside it, when the
    /// coordinator next waits for a reply ([`recv`](Self::recv)) or sends another command.
    /// Requests submitted together (a burst of clients, arrivals due at once) so reach the
    /// worker in one read, and its scheduler admits them to one pass.
    pub fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError> {
        let line = serde_json::to_string(&Command::Submit { request }).map_err(|e| TargetError::Unexpected(format!("a command that cannot be written: {e}")))?;
        self.child.queue_line(&line).map_err(|_| TargetError::Died(self.child.exit_reason()))
    }

    pub fn configure(&mut self, scheduler: SchedulerConfig) -> Result<(), TargetError> {
        self.send(&Command::Configure { scheduler })
    }

    /// Next reply, waiting at most `timeout`. `Ok(None)` on timeout. A line that is not a
    /// reply comes back as [`Reply::Error`], with the line.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
        self.child.flush().map_err(|_| TargetError::Died(self.child.exit_reason()))?;
        match self.child.next(timeout) {
            Next::Line(at, line) => Ok(Some((
                at,
                serde_json::from_str::<Reply>(&line).unwrap_or_else(|e| Reply::Error { error: format!("unreadable line from worker ({e}): {line}") }),
            ))),
            Next::Closed => Err(TargetError::Died(self.child.exit_reason())),
            Next::Quiet => Ok(None),
        }
    }

    /// Whether the process has ended.
    pub fn is_gone(&mut self) -> bool {
        self.child.is_gone()
    }

    /// Kill the process (used when it hangs).
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Ask the worker to exit; kill it if it does not within a second.
    pub fn shutdown(&mut self) {
        let _ = self.send(&Command::Shutdown);
        self.child.stop_within(Duration::from_secs(1));
    }

    /// A sentence on how the worker ended, with the end of what it wrote to stderr.
    pub fn exit_reason(&mut self) -> String {
        self.child.exit_reason()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.child.is_gone() {
            self.shutdown();
        }
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
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), TargetError> {
        Worker::configure(self, config.clone())
    }
    fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError> {
        Worker::submit(self, request)
    }
    fn cancel(&mut self, id: u64) {
        // A worker that is gone cannot cancel; its exit ends the request anyway.
        let _ = self.send(&Command::Cancel { id });
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lx_engine::scheduler::Policy;

    /// A stand-in worker: says hello, takes the load, runs `loading` (shell), answers that it
    /// loaded and then the clock pings.
    fn worker(loading: &str) -> WorkerCommand {
        let hello = serde_json::to_string(&Reply::Hello { protocol: PROTOCOL_VERSION, version: "test".into(), pid: 0 }).unwrap();
        let loaded = serde_json::to_string(&Reply::Loaded { info: BackendInfo::default(), load_ms: 1.0 }).unwrap();
        let pongs = "for n in 0 1 2 3 4 5 6; do read ping; echo '{\"reply\":\"pong\",\"nonce\":'$n',\"t\":0}'; done; read bye";
        let script = format!("echo '{hello}'; read load; {loading}; echo '{loaded}'; {pongs}");
        WorkerCommand { program: "sh".into(), args: vec!["-c".into(), script], env: Vec::new() }
    }

    fn spawn(loading: &str, quiet_for: Duration) -> (Result<Worker, TargetError>, Duration) {
        let started = Instant::now();
        let w = Worker::spawn(&worker(loading), &LoadSpec::default(), &SchedulerConfig::new(Policy::Chunked, 4, 512), quiet_for);
        (w, started.elapsed())
    }

    /// A load that computes for four times the timeout is waited for; one that sits idle is
    /// given up once the timeout has passed (CPU time is read where Linux shows it).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_load_is_given_up_when_it_neither_answers_nor_computes() {
        let quiet_for = Duration::from_secs(1);
        let busy = "end=$(($(date +%s%N) + 4000000000)); while [ $(date +%s%N) -lt $end ]; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; done";
        let (w, took) = spawn(busy, quiet_for);
        assert!(w.is_ok(), "a busy load was given up after {took:?}: {:?}", w.err());
        assert!(took >= Duration::from_secs(4), "{took:?}");
        w.unwrap().shutdown();

        let (w, took) = spawn("sleep 30", quiet_for);
        assert!(matches!(w, Err(TargetError::Hung(t)) if t == quiet_for), "{:?}", w.err());
        assert!(took < Duration::from_secs(10), "the idle load was given up only after {took:?}");
    }
}
