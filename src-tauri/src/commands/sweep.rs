//! Sweeps: the engine's `run_sweep` (the same grid, points and run files as `lx sweep`),
//! on a thread of its own, with progress streamed to the UI.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::BackendInfo;
use lx_client::records::RequestRecord;
use lx_client::traffic::{Observer, PointSpec};
use lx_results::printers::Printer;
use lx_results::results::{PointResult, RunFile};
use lx_engine::scheduler::Policy;
use lx_local::sweep::SweepJob;
use lx_run::live::SettingKey;
use lx_run::sweep::{SweepObserver, SweepPlan};
use serde::Deserialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::events::{PointFigures, SweepEvent};
use crate::state::{run_file_name, AppState, Locked, Sweep, Throttle};

/// How the app runs a sweep, beside its plan (the plan is what the run file records; these
/// are not part of the measurement).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct SweepOptions {
    /// Seconds of silence before a worker is given up, as `--hang-timeout` (default
    /// [`lx_engine::defaults::HANG_TIMEOUT_S`]).
    pub hang_timeout_s: Option<f64>,
    /// Leave out the ceilings and their probe, as `--no-ceilings`.
    pub no_ceilings: bool,
}

/// The UI's plan as the engine runs it: backend names as people type them made canonical,
/// and those that are servers the user added marked as such (`servers` are measured once per
/// point, not once per policy). Whatever the UI said of `servers` is replaced.
pub fn with_backends(mut plan: SweepPlan, servers: &[String]) -> CmdResult<SweepPlan> {
    plan.backends = plan
        .backends
        .iter()
        .map(|b| if servers.contains(b) { Ok(b.clone()) } else { lx_local::canonical(b).map(String::from) })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(|e| CmdError::Sweep(e.to_string()))?;
    plan.servers = servers.iter().filter(|s| plan.backends.contains(s)).cloned().collect();
    Ok(plan)
}

/// Prints nothing: the app shows points as they come through the observer.
struct NoTable;
impl Printer for NoTable {
    fn point(&mut self, _point: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
}

/// Turns the engine's sweep callbacks into [`SweepEvent`]s.
struct Progress {
    channel: Channel<SweepEvent>,
    done: usize,
    total: usize,
    points_done: usize,
    per_point: usize,
    throttle: Throttle,
    /// The run's probe, when it has ceilings: each loaded backend's device is looked up in it.
    limits: Option<lx_machine::probe::Probe>,
    /// The sweep's prefill chunk, which its points' keys carry.
    chunk_tokens: usize,
}

impl Progress {
    fn send(&self, e: SweepEvent) {
        let _ = self.channel.send(e);
    }
}

impl Observer for Progress {
    fn done(&mut self, _record: &RequestRecord) {
        self.done += 1;
        if self.throttle.ready(Instant::now()) || self.done == self.total {
            self.send(SweepEvent::Progress { done: self.done, total: self.total });
        }
    }
}

impl SweepObserver for Progress {
    fn loading(&mut self, backend: &str) {
        self.send(SweepEvent::Loading { backend: backend.into() });
    }
    fn loaded(&mut self, backend: &str, info: &BackendInfo, load_ms: f64) {
        self.send(SweepEvent::Loaded { backend: backend.into(), info: info.clone(), load_ms });
        if let Some(probe) = &self.limits {
            self.send(SweepEvent::DeviceCeilings { backend: backend.into(), device: info.device.clone(), limits: probe.for_device(&info.device).cloned() });
        }
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &PointSpec) {
        self.send(SweepEvent::PointStarted { index, total, backend: backend.into(), policy, spec: spec.clone() });
    }
    fn probing(&mut self) {
        self.send(SweepEvent::Probing);
    }
    fn fidelity(&mut self, what: &str) {
        self.send(SweepEvent::Fidelity { what: what.into() });
    }
    fn ceilings(&mut self, basis: Result<(&lx_machine::probe::Probe, &lx_machine::roofline::ModelCost), &anyhow::Error>) {
        match basis {
            Ok((limits, cost)) => {
                self.send(SweepEvent::Ceilings { weight_bytes_per_step: cost.weight_bytes_per_step, busy: limits.busy_note() });
                self.limits = Some(limits.clone());
            }
            Err(e) => self.send(SweepEvent::NoCeilings { message: format!("{e:#}") }),
        }
    }
    fn point_done(&mut self, point: &PointResult) {
        // A point that failed before measuring reported no requests: count it as done, so
        // the bar still reaches the end.
        self.points_done += 1;
        self.done = self.done.max(self.points_done * self.per_point).min(self.total);
        self.send(SweepEvent::Progress { done: self.done, total: self.total });
        let key = SettingKey::of_point(point, self.chunk_tokens);
        self.send(SweepEvent::PointDone { point: PointFigures::from(point), key_id: key.id(), key });
    }
}

/// Start a sweep on the open model; returns the run file's path (rewritten after every
/// point). Live mode must be stopped first: the two would compete for the machine.
///
/// Events on `on_event`: `started`, `loading`, `loaded`, `pointStarted`, `progress`
/// (at most 20 a second), `pointDone`, then `finished` or `failed`. See [`SweepEvent`].
#[tauri::command]
pub async fn sweep_start(state: State<'_, AppState>, plan: SweepPlan, options: SweepOptions, on_event: Channel<SweepEvent>) -> CmdResult<String> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before a sweep".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep is already running".into()));
    }
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let servers: Vec<String> = state.servers.locked().iter().map(|s| s.name.clone()).collect();
    let plan = with_backends(plan, &servers)?;

    let spawn = state.spawner(&model, lx_local::profile::Use::Measure);
    let mut job = SweepJob::new(Arc::clone(&model.open), plan, vec!["latency-explorer".into(), "sweep".into()], spawn).map_err(|e| CmdError::Sweep(format!("{e:#}")))?;
    if let Some(s) = options.hang_timeout_s {
        if !(s > 0.0 && s.is_finite()) {
            return Err(CmdError::Sweep("the hang timeout must be a positive number of seconds".into()));
        }
        job.control.hang_timeout = std::time::Duration::from_secs_f64(s);
    }
    job.ceilings = !options.no_ceilings;
    let path: PathBuf = state.runs_dir.join(run_file_name("run", job.run.started_unix_ms / 1000));
    job.out = Some(path.clone());
    let stop = Arc::clone(&job.control.stop);
    let total_points = job.total_points();
    let total_requests = total_points * job.plan.requests;
    let _ = on_event.send(SweepEvent::Started { path: path.clone(), total_points, total_requests });

    let mut progress = Progress {
        channel: on_event.clone(),
        done: 0,
        total: total_requests,
        points_done: 0,
        per_point: job.plan.requests,
        throttle: Throttle::new(Duration::from_millis(50)),
        limits: None,
        chunk_tokens: job.plan.chunk_tokens,
    };
    let out = path.clone();
    let thread = std::thread::Builder::new()
        .name("lx-sweep".into())
        .spawn(move || match job.run(&mut NoTable, &mut progress) {
            (run, Ok(failed_points)) => drop(on_event.send(SweepEvent::Finished { path: out, stopped: run.stopped, failed_points })),
            (_, Err(e)) => drop(on_event.send(SweepEvent::Failed { message: format!("{e:#}") })),
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the sweep thread: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    *state.last_run.locked() = Some(path.clone());
    Ok(path.display().to_string())
}

/// Lengths as the sweep form's fields hold them (`64, 256..512`), parsed as `lx sweep`
/// parses its flags: the form keeps no grammar of its own.
#[tauri::command]
pub fn parse_lengths(text: String) -> CmdResult<Vec<lx_run::sweep::Length>> {
    lx_run::sweep::parse_lengths(&text).map_err(CmdError::Sweep)
}

/// Cancel the running sweep: requests in flight are cancelled, the run file keeps every
/// completed point and is marked stopped. Returns once the sweep thread has ended.
#[tauri::command]
pub async fn sweep_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    let sweep = state.sweep.locked().take();
    if let Some(s) = sweep {
        s.stop.store(true, Ordering::SeqCst);
        super::blocking(move || {
            let _ = s.thread.join();
        })
        .await?;
    }
    Ok(())
}

/// The points of the last sweep's run file.
pub(crate) fn last_run_points(state: &AppState) -> CmdResult<Vec<PointResult>> {
    let path = state.last_run.locked().clone().ok_or_else(|| CmdError::Sweep("no sweep has run yet".into()))?;
    let run = RunFile::read(&path).map_err(|e| CmdError::Io(format!("{e:#}")))?;
    Ok(run.points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_run::sweep::Length;
    use lx_results::results::Slo;

    #[test]
    fn a_plan_from_the_ui_takes_lx_sweeps_defaults_for_what_it_leaves_out() {
        let plan: SweepPlan = serde_json::from_value(serde_json::json!({
            "backends": ["llama.cpp"], "policies": ["serial", "continuous"], "prompt_tokens": [{ "to": 64 }, { "to": 256 }],
            "concurrency": [1, 4], "max_tokens": [{ "to": 32 }], "requests": 8
        }))
        .unwrap();
        let plan = with_backends(plan, &[]).unwrap();
        assert_eq!(plan.backends, vec!["llama"]);
        assert_eq!(plan.chunk_tokens, lx_engine::defaults::CHUNK_TOKENS);
        assert_eq!(plan.threads, 0, "auto stays auto: the spawner takes the tuned choice, else leaves the window a core");
        assert_eq!(plan.points().len(), 2 * 2 * 2);
        assert_eq!(plan, SweepPlan { backends: vec!["llama".into()], policies: vec![Policy::Serial, Policy::Continuous], prompt_tokens: vec![Length::fixed(64), Length::fixed(256)], max_tokens: vec![Length::fixed(32)], ..SweepPlan::default() });
        let bad = SweepPlan { backends: vec!["nope".into()], ..plan.clone() };
        assert!(matches!(with_backends(bad, &[]), Err(CmdError::Sweep(m)) if m.contains("unknown backend")));

        // A server the user added is a backend by its name, measured once per point; what the
        // UI says of servers is not taken.
        let with_server = SweepPlan { backends: vec!["llama.cpp".into(), "lab".into()], servers: vec!["other".into()], ..plan };
        let plan = with_backends(with_server.clone(), &["lab".into(), "other".into()]).unwrap();
        assert_eq!((plan.backends.clone(), plan.servers.clone()), (vec!["llama".to_string(), "lab".into()], vec!["lab".to_string()]));
        // The server once per prompt length and concurrency, not once per policy.
        assert_eq!(plan.points().len(), 2 * 2 * 2 + 2 * 2);
        assert!(matches!(with_backends(with_server, &[]), Err(CmdError::Sweep(m)) if m.contains("unknown backend")));
    }

    #[test]
    fn the_ui_can_ask_for_everything_lx_sweep_does() {
        let plan: SweepPlan = serde_json::from_value(serde_json::json!({
            "backends": ["candle"], "policies": ["chunked"], "prompt_tokens": [{ "from": 64, "to": 512 }, { "to": 1024 }], "concurrency": [4],
            "max_tokens": [{ "from": 8, "to": 32 }], "requests": 6, "warmup": 2, "depths": [0, 256], "rates": [1.5, 3.0], "max_in_flight": 8, "seed": 7,
            "duration_s": 30.0, "prefix_tokens": 32, "prefix_cache": [false, true], "max_batch_seqs": 2, "max_batch_tokens": 1024,
            "slo": { "ttft_ms": 500.0, "decode_tps": 10.0 }, "repetitions": 3, "chunk_tokens": 128, "stop_at_eos": true, "gpu_layers": 0
        }))
        .unwrap();
        let p = with_backends(plan, &[]).unwrap();
        assert_eq!(p.prompt_tokens, [Length { from: Some(64), to: 512 }, Length::fixed(1024)]);
        assert_eq!(p.max_tokens, [Length { from: Some(8), to: 32 }]);
        assert_eq!((&p.rates, p.max_in_flight, p.seed, p.duration_s, p.warmup), (&vec![1.5, 3.0], Some(8), 7, Some(30.0), Some(2)));
        assert_eq!((p.prefix_tokens, &p.prefix_cache), (32, &vec![false, true]));
        assert_eq!((p.max_batch_seqs, p.max_batch_tokens, p.repetitions, p.chunk_tokens, p.stop_at_eos), (Some(2), Some(1024), 3, 128, true));
        assert_eq!(p.slo, Slo { ttft_ms: Some(500.0), decode_tps: Some(10.0) });
        assert_eq!((p.depths.clone(), p.gpu_layers), (vec![0, 256], Some(0)));
        // A depth fills and caches its own prefix: not with a shared prefix as well.
        assert!(p.validate(Some(4096)).unwrap_err().why.contains("--depth"));
        let p = SweepPlan { prefix_tokens: 0, prefix_cache: vec![false], ..p };
        assert_eq!(p.validate(Some(4096)), Ok(()));
        let options: SweepOptions = serde_json::from_value(serde_json::json!({ "hang_timeout_s": 30.0, "no_ceilings": true })).unwrap();
        assert_eq!(options, SweepOptions { hang_timeout_s: Some(30.0), no_ceilings: true });
        assert_eq!(serde_json::from_value::<SweepOptions>(serde_json::json!({})).unwrap(), SweepOptions::default());
    }
}
