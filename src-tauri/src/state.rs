//! What the app holds between commands: the open model, the live session, the sweep.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lx_local::model::OpenModel;
use lx_engine::backend::BackendInfo;
use lx_run::live::{LiveSession, LiveSettings};
use lx_results::results::PointResult;
use lx_format::workload::PromptBuilder;

/// The app's locks, taken whatever happened before: a command that panicked while holding
/// one leaves it poisoned, and the state it guards (plain values each replaced whole) is
/// still whole, so every later command goes on instead of panicking in turn.
pub trait Locked<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A model ready to measure, shared by live mode and sweeps.
pub struct Model {
    /// What the user asked for (catalog name or path).
    pub spec: String,
    /// Short display name.
    pub name: String,
    /// Header facts and tokenizer.
    pub open: std::sync::Arc<OpenModel>,
    /// Exact-length prompts for this model's tokenizer.
    pub prompts: PromptBuilder,
}

/// The live session and what it has told us about its backends.
pub struct Live {
    pub session: LiveSession,
    pub settings: LiveSettings,
    pub model: Arc<Model>,
    /// Backends as loaded (from `BackendStatus` events), for the run file.
    pub backends: Arc<Mutex<Vec<BackendInfo>>>,
    /// What the readout's ceilings are computed from: this machine's limits and the model's
    /// cost per token (`None` when the probe failed: live mode goes on without).
    pub ceilings: Option<Ceilings>,
}

/// A sweep running on its own thread.
pub struct Sweep {
    pub stop: Arc<AtomicBool>,
    pub thread: JoinHandle<()>,
}

/// What a live session measured, kept after it stops.
#[derive(Clone)]
pub struct LiveResults {
    /// One point per backend and setting.
    pub points: Vec<PointResult>,
    pub model: Arc<Model>,
    /// The settings last in force.
    pub settings: LiveSettings,
    /// The backends that ran.
    pub backends: Vec<BackendInfo>,
    /// What the points' ceilings are computed from (see [`Live::ceilings`]).
    pub ceilings: Option<Ceilings>,
}

/// This machine's limits and the model's cost per token.
pub type Ceilings = (lx_machine::probe::Probe, lx_machine::roofline::ModelCost);

/// The gallery of machines: the bench files the user added, and the page made of them with
/// the shipped ones (served by `commands::gallery::serve`).
#[derive(Debug, Default)]
pub struct Gallery {
    pub added: Vec<PathBuf>,
    pub page: String,
}

/// Managed state (one per app).
pub struct AppState {
    pub model: Mutex<Option<Arc<Model>>>,
    pub live: Mutex<Option<Live>>,
    /// Results of the last live session, kept after it stops (for export and saving).
    pub last_live: Mutex<Option<LiveResults>>,
    pub sweep: Mutex<Option<Sweep>>,
    /// Run file of the last sweep.
    pub last_run: Mutex<Option<PathBuf>>,
    /// Where sweeps and saved live sessions are written.
    pub runs_dir: PathBuf,
    /// OpenAI-compatible servers the user added: backends for live mode and sweeps.
    pub servers: Mutex<Vec<lx_openai::Server>>,
    /// The gallery of machines: the bench files added, and its page.
    pub gallery: Mutex<Gallery>,
}

impl AppState {
    pub fn new(runs_dir: PathBuf) -> Self {
        Self {
            model: Mutex::new(None),
            live: Mutex::new(None),
            last_live: Mutex::new(None),
            sweep: Mutex::new(None),
            last_run: Mutex::new(None),
            runs_dir,
            servers: Mutex::new(Vec::new()),
            gallery: Mutex::new(Default::default()),
        }
    }

    /// What starts each backend by name: this binary's workers (with this machine's tuned
    /// settings for `usage`), and the servers added.
    pub fn spawner(&self, model: &Model, usage: lx_local::profile::Use) -> lx_client::target::Spawner {
        let servers = self.servers.locked().clone();
        // Auto threads: the profile's where this machine is tuned, else a core left for the window.
        lx_local::spawner_with_servers(servers, Arc::new(model.open.tokenizer.clone()), usage, crate::threads::beside_a_window())
    }

    pub fn sweep_running(&self) -> bool {
        self.sweep.locked().as_ref().is_some_and(|s| !s.thread.is_finished())
    }
}

/// Lets an event through at most once per `every` (byte counters, progress).
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Option<Instant>,
}

impl Throttle {
    pub fn new(every: Duration) -> Self {
        Self { every, last: None }
    }

    /// True when enough time has passed since the last `true`.
    pub fn ready(&mut self, now: Instant) -> bool {
        if self.last.is_some_and(|l| now.saturating_duration_since(l) < self.every) {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// `run-2025-01-31T12-00-05Z.json`: sortable, unique per second, safe on every file system.
pub fn run_file_name(prefix: &str, unix_s: u64) -> String {
    let d = lx_engine::date::UtcDate::from_unix(unix_s);
    format!("{prefix}-{:04}-{:02}-{:02}T{:02}-{:02}-{:02}Z.json", d.year, d.month, d.day, d.hour, d.minute, d.second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_lets_one_through_per_interval() {
        let mut t = Throttle::new(Duration::from_millis(50));
        let t0 = Instant::now();
        assert!(t.ready(t0));
        assert!(!t.ready(t0 + Duration::from_millis(49)));
        assert!(t.ready(t0 + Duration::from_millis(50)));
    }

    #[test]
    fn run_file_names_are_dates() {
        assert_eq!(run_file_name("run", 0), "run-1970-01-01T00-00-00Z.json");
        assert_eq!(run_file_name("run", 951_782_400 + 3661), "run-2000-02-29T01-01-01Z.json");
        assert_eq!(run_file_name("live", 1_735_689_599), "live-2024-12-31T23-59-59Z.json");
    }
}
