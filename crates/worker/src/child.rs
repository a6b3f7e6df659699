//! A child process that answers in lines on stdout: a worker, or the probe of this
//! machine's limits. One place starts it, reads and stamps its lines on a thread of their
//! own, keeps the end of what it wrote to stderr, stops it when it hangs, and says in a
//! sentence how it ended.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command as Process, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How to start the process: usually our own binary with a worker role's arguments.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What waiting for the next line gave.
#[derive(Debug)]
pub enum Next {
    /// A line, with the coordinator time it was read at.
    Line(Instant, String),
    /// Stdout closed: the process exited or crashed ([`LineChild::exit_reason`] says how).
    Closed,
    /// Nothing within the time asked.
    Quiet,
}

/// How many of the last stderr lines are kept for [`LineChild::exit_reason`], backtrace
/// frames not counted.
const STDERR_LINES: usize = 40;

pub struct LineChild {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    lines: Receiver<(Instant, String)>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    closed: bool,
}

impl LineChild {
    /// Start `cmd`, with a pipe to its stdin when it takes commands (`takes_input`). Its
    /// stderr is kept (its end explains a crash), and echoed when `LX_WORKER_STDERR` is set.
    pub fn spawn(cmd: &WorkerCommand, takes_input: bool) -> std::io::Result<LineChild> {
        let mut child = Process::new(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(if takes_input { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        // Room for a burst of submissions (prompts of thousands of tokens each) to go out in
        // one write: the worker starts together what arrives together.
        let stdin = child.stdin.take().map(|s| BufWriter::with_capacity(1 << 20, s));

        let (tx, lines) = mpsc::channel();
        // The stamp is taken the moment a line is read, on a thread that does nothing else:
        // TTFT and ITL are measured from it.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let at = Instant::now();
                let Ok(line) = line else { break };
                if tx.send((at, line)).is_err() {
                    return;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        let echo = std::env::var_os("LX_WORKER_STDERR").is_some();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("[worker] {line}");
                }
                // A frame never explains a crash to a user, and a backtrace longer than the
                // tail would push out the line that does ("memory allocation of ... failed").
                if backtrace_frame(&line) {
                    continue;
                }
                let mut t = tail.lock().unwrap_or_else(PoisonError::into_inner);
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        Ok(LineChild { child, stdin, lines, stderr_tail, closed: false })
    }

    /// The next line, waiting at most `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Next {
        if self.closed {
            return Next::Closed;
        }
        match self.lines.recv_timeout(timeout) {
            Ok((at, line)) => Next::Line(at, line),
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                Next::Closed
            }
            Err(RecvTimeoutError::Timeout) => Next::Quiet,
        }
    }

    /// Write one line to the process's stdin, and send it with any queued before it.
    pub fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        self.queue_line(line)?;
        self.flush()
    }

    /// Write one line to the process's stdin without sending it yet: [`flush`](Self::flush)
    /// (or the next [`write_line`](Self::write_line)) sends every queued line in one write.
    pub fn queue_line(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| std::io::Error::other("the process takes no input"))?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")
    }

    /// Send the queued lines.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.stdin.as_mut().map_or(Ok(()), Write::flush)
    }

    /// Operating-system process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has ended (or closed its stdout).
    pub fn is_gone(&mut self) -> bool {
        self.closed || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Stop the process now (it hangs, or its answer made no sense).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.closed = true;
    }

    /// Wait up to `grace` for the process to exit by itself; kill it after that.
    pub fn stop_within(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.closed = true;
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    /// How the process ended, waiting a second for it (the pipe closes a moment before
    /// the exit status is ready); `None` while it still runs.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        for _ in 0..100 {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// A sentence on how the process ended, with the end of what it wrote to stderr.
    pub fn exit_reason(&mut self) -> String {
        let how = match self.exit_status() {
            None => "stopped answering".to_string(),
            Some(s) => describe_exit(s),
        };
        // Give the stderr thread a moment to drain what the process wrote last.
        std::thread::sleep(Duration::from_millis(20));
        let tail = self.stderr_tail.lock().unwrap_or_else(PoisonError::into_inner);
        explain_exit(how, &tail.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

impl Drop for LineChild {
    /// A process is never left behind: its owner decides how politely it ends before this.
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            self.kill();
        }
    }
}

/// `how` a process ended, with the last lines it wrote to stderr that say something: a
/// backtrace's frames are left out, and an allocation that failed is named first, since
/// "signal 6" alone does not tell a user that the worker ran out of memory.
fn explain_exit(how: String, stderr: &[&str]) -> String {
    let said: Vec<&str> = stderr.iter().filter(|l| !backtrace_frame(l) && !l.trim().is_empty() && !l.contains("skipping backtrace") && !l.starts_with("stack backtrace")).copied().collect();
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

/// A line of a Rust backtrace's frames: `  12: name`, or its `at file:line` below it.
fn backtrace_frame(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("at ") || t.split_once(": ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

fn describe_exit(status: ExitStatus) -> String {
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
    use super::*;

    fn sh(script: &str) -> WorkerCommand {
        WorkerCommand { program: "sh".into(), args: vec!["-c".into(), script.into()], env: Vec::new() }
    }

    #[test]
    fn lines_in_order_then_how_it_ended_with_its_stderr() {
        let mut c = LineChild::spawn(&sh("echo one; echo two; echo 'error: bad id 7' >&2; exit 4"), false).unwrap();
        let mut got = Vec::new();
        while let Next::Line(_, line) = c.next(Duration::from_secs(30)) {
            got.push(line);
        }
        assert_eq!(got, ["one", "two"]);
        assert!(c.is_gone());
        assert_eq!(c.exit_reason(), "exited with status 4; last stderr: error: bad id 7");
    }

    /// What a candle worker wrote when it ran out of memory and its backtrace could be
    /// printed: the allocation's line, then more frames than the tail keeps.
    #[test]
    fn a_backtrace_longer_than_the_tail_leaves_the_failed_allocation_in_it() {
        let frames = "i=0; while [ $i -lt 60 ]; do echo \"  $i: candle_core::quantized::f\" >&2; echo '             at ./src/model.rs:470:19' >&2; i=$((i+1)); done";
        let script = format!("echo 'memory allocation of 178257920 bytes failed' >&2; echo 'stack backtrace:' >&2; {frames}; echo 'note: Some details are omitted' >&2; kill -6 $$");
        let mut c = LineChild::spawn(&sh(&script), false).unwrap();
        assert!(matches!(c.next(Duration::from_secs(30)), Next::Closed));
        let why = c.exit_reason();
        assert!(why.starts_with("ran out of memory (memory allocation of 178257920 bytes failed); exited on signal 6"), "{why}");
        assert!(!why.contains("candle_core"), "{why}");
    }

    #[test]
    fn a_process_that_reads_its_input_answers_it_and_a_quiet_one_is_killed() {
        let mut c = LineChild::spawn(&sh("read x; echo \"got $x\"; sleep 60"), true).unwrap();
        c.write_line("hello").unwrap();
        assert!(matches!(c.next(Duration::from_secs(30)), Next::Line(_, l) if l == "got hello"));
        assert!(matches!(c.next(Duration::from_millis(200)), Next::Quiet));
        let started = Instant::now();
        c.stop_within(Duration::from_millis(100));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(c.is_gone());
        assert!(c.exit_reason().starts_with("exited on signal 9"));
        let mut silent = LineChild::spawn(&sh("true"), false).unwrap();
        assert!(silent.write_line("x").unwrap_err().to_string().contains("takes no input"));
    }

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
