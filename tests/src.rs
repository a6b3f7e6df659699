//! Shared helpers for the cross-crate tests: where the model and the `lx` binary are,
//! a lock so that tests that load models don't compete for the same cores, and a
//! command runner that shows everything when an assertion fails.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Condvar, Mutex};

/// The default model (Gemma 3 270M Q4_K_M): `LX_MODEL`, else the model cache.
/// Panics with what to do when it is missing: these tests never pass without it.
pub fn model_path() -> PathBuf {
    let path = lx_models::default_model_path();
    assert!(path.is_file(), "the default model is missing at {}: run `lx models fetch` (or set LX_MODEL)", path.display());
    path
}

/// The `lx` binary built next to this test binary (`cargo test --workspace` builds it).
pub fn lx_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps");
    let bin = dir.join(format!("lx{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} not built: run the tests with `cargo test --workspace`", bin.display());
    bin
}

/// Tests that run a model take this lock, so measurements are not skewed by each other.
/// Where `LX_TEST_TIMES` names a file, each test's time with the lock held (its own time, not
/// the wait for the lock) is appended to it as `seconds<TAB>test`: scripts/test prints the
/// slowest at the end of every run, so where the suite's time goes is in every CI log.
pub fn heavy() -> Heavy {
    Heavy::take(WHOLE)
}

/// [`heavy`] for a test that runs `backend`: the whole lock, or, for MLX on Linux, half of
/// it. MLX's Linux build computes on one core (its CPU build's reference BLAS), and its tests
/// check tokens and files, never speed: two of them run at once, a core each (libtest starts
/// tests in name order, so they sit together in the `mlx` module). MLX on a Mac runs on the
/// GPU and takes the whole lock.
pub fn heavy_for(backend: &str) -> Heavy {
    Heavy::take(if backend == "mlx" && cfg!(target_os = "linux") { 1 } else { WHOLE })
}

/// The lock, in shares: a test on MLX's one core takes one, any other test all of them.
const WHOLE: usize = 2;
static FREE: Mutex<usize> = Mutex::new(WHOLE);
static RELEASED: Condvar = Condvar::new();

/// The held [`heavy`] lock (all of it or a share); dropping it releases it and records the
/// time it was held.
pub struct Heavy {
    shares: usize,
    since: std::time::Instant,
}

impl Heavy {
    fn take(shares: usize) -> Heavy {
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        while *free < shares {
            free = RELEASED.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= shares;
        Heavy { shares, since: std::time::Instant::now() }
    }
}

impl Drop for Heavy {
    fn drop(&mut self) {
        *FREE.lock().unwrap_or_else(|e| e.into_inner()) += self.shares;
        RELEASED.notify_all();
        let Some(path) = std::env::var_os("LX_TEST_TIMES") else { return };
        // libtest names each test's thread after the test.
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let half = if self.shares < WHOLE { " (half the lock: two at once)" } else { "" };
        let line = format!("{:.1}\t{test}{half}\n", self.since.elapsed().as_secs_f64());
        // A lost line costs only the report: never fail a test over it.
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }
}

/// The result of running `lx`, printable in full when a test fails.
pub struct Run {
    pub args: Vec<String>,
    pub output: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }
    /// Everything, for assertion messages.
    pub fn dump(&self) -> String {
        format!("lx {}\nstatus: {:?}\n--- stdout\n{}\n--- stderr\n{}", self.args.join(" "), self.output.status, self.stdout(), self.stderr())
    }
    /// Assert a clean success.
    pub fn ok(self) -> Self {
        assert!(self.output.status.success(), "expected success\n{}", self.dump());
        self
    }
    /// Assert a clear failure: non-zero exit, the message in stderr, no panic.
    pub fn fails_with(self, needle: &str) -> Self {
        assert!(!self.output.status.success(), "expected failure\n{}", self.dump());
        assert!(self.stderr().contains(needle), "stderr lacks {needle:?}\n{}", self.dump());
        assert!(!self.stderr().contains("panicked"), "panic trace instead of a message\n{}", self.dump());
        self
    }
}

/// Run `lx ARGS` to completion.
pub fn lx(args: &[&str]) -> Run {
    lx_with(args, &[])
}

/// [`lx`] with environment variables set.
pub fn lx_with(args: &[&str], env: &[(&str, &std::path::Path)]) -> Run {
    let output = Command::new(lx_bin()).args(args).envs(env.iter().map(|(k, v)| (k, v))).output().expect("run lx");
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }
}
