//! The coordinator side of a worker: spawn it, talk to it, stamp what comes back.
//!
//! Every reply is stamped with the coordinator's monotonic clock the moment its line
//! is read, on a thread that does nothing else: that stamp is what TTFT and ITL are
//! measured from (client-side timing). If the worker dies or stops answering, the
//! caller learns why, and a new worker can be spawned for the next run.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::{BackendInfo, LoadSpec};
use crate::protocol::{Command, Reply, PROTOCOL_VERSION};
use crate::scheduler::{SchedulerConfig, WorkRequest};

/// How to start a worker process: usually our own binary with a `worker` subcommand.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A reply with the coordinator time it was read at.
#[derive(Debug)]
pub enum Received {
    Reply(Instant, Reply),
    /// The worker's stdout closed: it exited or crashed.
    Gone,
}

/// Why talking to a worker failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
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

const STDERR_LINES: usize = 40;

/// A live worker process with one loaded model.
pub struct Worker {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    replies: Receiver<Received>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    info: BackendInfo,
    load_ms: f64,
    /// Worker clock + offset = coordinator clock (ns since `epoch`).
    offset_ns: i128,
    epoch: Instant,
    gone: bool,
}

impl Worker {
    /// Start a worker, load `spec` into it and synchronise clocks. `load_timeout` bounds
    /// the whole start (a model load can take a while on a cold disk).
    pub fn spawn(cmd: &WorkerCommand, spec: &LoadSpec, scheduler: &SchedulerConfig, load_timeout: Duration) -> Result<Worker, WorkerError> {
        let mut child = Process::new(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| WorkerError::Spawn { program: cmd.program.display().to_string(), source })?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let stdin = BufWriter::new(child.stdin.take().expect("piped"));

        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let at = Instant::now();
                let Ok(line) = line else { break };
                match serde_json::from_str::<Reply>(&line) {
                    Ok(reply) => {
                        if tx.send(Received::Reply(at, reply)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Received::Reply(at, Reply::Error { error: format!("unreadable line from worker ({e}): {line}") }));
                    }
                }
            }
            let _ = tx.send(Received::Gone);
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        let echo = std::env::var_os("LX_WORKER_STDERR").is_some();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("[worker] {line}");
                }
                let mut t = tail.lock().expect("poisoned");
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });

        let mut w = Worker {
            child,
            stdin,
            replies,
            stderr_tail,
            info: BackendInfo::default(),
            load_ms: 0.0,
            offset_ns: 0,
            epoch: Instant::now(),
            gone: false,
        };
        let deadline = Instant::now() + load_timeout;
        match w.expect_reply(deadline)? {
            Reply::Hello { protocol, .. } if protocol == PROTOCOL_VERSION => {}
            Reply::Hello { protocol, .. } => return Err(WorkerError::Protocol(protocol)),
            other => return Err(WorkerError::Unexpected(format!("{other:?}"))),
        }
        w.send(&Command::Load { spec: spec.clone(), scheduler: scheduler.clone() })?;
        match w.expect_reply(deadline)? {
            Reply::Loaded { info, load_ms } => {
                w.info = info;
                w.load_ms = load_ms;
            }
            Reply::LoadFailed { error } => {
                w.shutdown();
                return Err(WorkerError::Load(error));
            }
            other => return Err(WorkerError::Unexpected(format!("{other:?}"))),
        }
        w.sync_clock(deadline)?;
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
        self.child.id()
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

    fn expect_reply(&mut self, deadline: Instant) -> Result<Reply, WorkerError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.replies.recv_timeout(left) {
            Ok(Received::Reply(_, Reply::Error { error })) => Err(WorkerError::Unexpected(error)),
            Ok(Received::Reply(_, reply)) => Ok(reply),
            Ok(Received::Gone) | Err(RecvTimeoutError::Disconnected) => {
                self.gone = true;
                Err(WorkerError::Died(self.exit_reason()))
            }
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                // How long this wait lasted (not what is left of the deadline: nothing).
                Err(WorkerError::Hung(left.max(Duration::from_millis(1))))
            }
        }
    }

    /// Estimate the worker-clock offset from the ping with the shortest round trip.
    fn sync_clock(&mut self, deadline: Instant) -> Result<(), WorkerError> {
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
                other => return Err(WorkerError::Unexpected(format!("{other:?}"))),
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

    pub fn send(&mut self, cmd: &Command) -> Result<(), WorkerError> {
        let write = |w: &mut BufWriter<ChildStdin>| -> std::io::Result<()> {
            serde_json::to_writer(&mut *w, cmd)?;
            w.write_all(b"\n")?;
            w.flush()
        };
        write(&mut self.stdin).map_err(|_| {
            self.gone = true;
            WorkerError::Died(self.exit_reason())
        })
    }

    pub fn submit(&mut self, request: WorkRequest) -> Result<(), WorkerError> {
        self.send(&Command::Submit { request })
    }

    pub fn configure(&mut self, scheduler: SchedulerConfig) -> Result<(), WorkerError> {
        self.send(&Command::Configure { scheduler })
    }

    /// Next reply, waiting at most `timeout`. `Ok(None)` on timeout.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, WorkerError> {
        if self.gone {
            return Err(WorkerError::Died(self.exit_reason()));
        }
        match self.replies.recv_timeout(timeout) {
            Ok(Received::Reply(at, reply)) => Ok(Some((at, reply))),
            Ok(Received::Gone) | Err(RecvTimeoutError::Disconnected) => {
                self.gone = true;
                Err(WorkerError::Died(self.exit_reason()))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
        }
    }

    /// Whether the process has ended.
    pub fn is_gone(&mut self) -> bool {
        self.gone || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Kill the process (used when it hangs).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.gone = true;
    }

    /// Ask the worker to exit; kill it if it does not within a second.
    pub fn shutdown(&mut self) {
        let _ = self.send(&Command::Shutdown);
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.gone = true;
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    /// A sentence on how the worker ended, with the end of what it wrote to stderr.
    pub fn exit_reason(&mut self) -> String {
        // The pipe closes a moment before the exit status is ready.
        let mut status = None;
        for _ in 0..100 {
            if let Ok(Some(s)) = self.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let how = match status {
            None => "stopped answering".to_string(),
            Some(s) => describe_exit(s),
        };
        // Give the stderr thread a moment to drain what the process wrote last.
        std::thread::sleep(Duration::from_millis(20));
        let tail = self.stderr_tail.lock().expect("poisoned");
        explain_exit(how, &tail.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.gone {
            self.shutdown();
        }
    }
}

/// `how` a worker ended, with the last lines it wrote to stderr that say something: a
/// backtrace's frames are left out, and an allocation that failed is named first, since
/// "signal 6" alone does not tell a user that the worker ran out of memory.
fn explain_exit(how: String, stderr: &[&str]) -> String {
    let frame = |l: &&str| {
        let t = l.trim_start();
        t.starts_with("at ") || t.split_once(": ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    let said: Vec<&str> = stderr.iter().filter(|l| !frame(l) && !l.trim().is_empty() && !l.contains("skipping backtrace") && !l.starts_with("stack backtrace")).copied().collect();
    let last: Vec<&str> = said[said.len().saturating_sub(5)..].to_vec();
    // Rust's, C++'s and ggml's words for it.
    let out_of_memory = ["memory allocation of", "bad_alloc", "failed to allocate", "insufficient memory", "out of memory"];
    let oom = said.iter().rev().find(|l| out_of_memory.iter().any(|m| l.contains(m)));
    let how = match oom {
        Some(line) => format!("ran out of memory ({}); {how}", line.trim()),
        None => how,
    };
    if last.is_empty() {
        how
    } else {
        format!("{how}; last stderr: {}", last.join(" | "))
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                6 => " (SIGABRT: the backend aborted: a failed assert, or memory it could not get)",
                9 => " (SIGKILL: killed, e.g. by the OOM killer or by hand)",
                11 => " (SIGSEGV: the backend crashed)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("exited on signal {sig}{name}");
        }
    }
    match status.code() {
        Some(0) => "exited".to_string(),
        Some(c) => format!("exited with status {c}"),
        None => "exited".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::explain_exit;

    #[test]
    fn an_allocation_that_failed_is_named_and_backtrace_frames_are_left_out() {
        // What a candle worker under a 300 MB data limit wrote before it aborted.
        let stderr = [
            "  18: main",
            "             at /work/main/crates/cli/src/main.rs:64:30",
            "  19: call_once<fn(), ()>",
            "             at /rustc/library/core/src/ops/function.rs:250:5",
            "memory allocation of 7168 bytes failed",
            "skipping backtrace printing to avoid potential recursion",
        ];
        assert_eq!(
            explain_exit("exited on signal 6".into(), &stderr),
            "ran out of memory (memory allocation of 7168 bytes failed); exited on signal 6; last stderr: memory allocation of 7168 bytes failed"
        );
        let ggml = ["llama_model_load: error loading model", "ggml_aligned_malloc: insufficient memory (attempted to allocate 300.00 MB)"];
        assert!(explain_exit("exited on signal 6".into(), &ggml).starts_with("ran out of memory (ggml_aligned_malloc: insufficient memory"));
        assert_eq!(explain_exit("exited on signal 9".into(), &[]), "exited on signal 9");
        assert_eq!(explain_exit("exited with status 1".into(), &["error: bad id 7"]), "exited with status 1; last stderr: error: bad id 7");
    }
}
