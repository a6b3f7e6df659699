//! Lessons: the engine's teaching demos (`lx_teach::lesson`, the same as `lx demo`) run by
//! the app on a thread of its own. Each point is announced before it runs (so the UI can move
//! its controls to it), its output streams as text, its figures arrive as it settles, and
//! the demo's own judgement ends the lesson. The run file is written after every point and
//! makes the lesson's handout.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::BackendInfo;
use lx_client::records::RequestRecord;
use lx_engine::scheduler::Policy;
use lx_client::traffic::{Observer, PointSpec, RunControl};
use lx_teach::demo::{self, Report};
use lx_teach::lesson::Lesson;
use lx_run::sweep::SweepObserver;
use lx_format::tokenizer::{PieceDecoder, TokenId, Tokenizer};
use lx_results::results::{PointResult, RunFile};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use crate::error::{CmdError, CmdResult};
use crate::events::PointFigures;
use crate::state::{run_file_name, AppState, Locked, Sweep, Throttle};

/// What a running lesson reports. Sent on the channel `lesson_start` takes.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LessonEvent {
    /// Measuring began; the run file goes to `path`.
    Started {
        #[ts(type = "string")]
        path: PathBuf,
        points: usize,
    },
    /// The backend is loading the model (a server is being asked for it).
    Loading { backend: String },
    /// It loaded: where it runs.
    Loaded { backend: String, device: String, threads: usize, load_ms: f64 },
    /// Before the points, each setting is scoring the fidelity text (a lesson that measures
    /// how far its settings move the model): `what` it scores now.
    Fidelity { what: String },
    /// Point `index` (in the lesson's order) is about to run with these settings.
    PointStarted { index: usize, label: String, prompt_tokens: u32, concurrency: usize, max_tokens: u32, policy: Policy, requests: usize },
    /// Output of the request the preview follows: `text` continues it, or starts a new one
    /// when `fresh`.
    Text { fresh: bool, text: String },
    /// Requests measured so far in this point.
    Progress { done: usize, total: usize },
    /// Point `index` settled: each of the lesson's figures there (`null` where a figure is
    /// not drawn over this point), and the point's figures, with the ceilings of this
    /// machine's last measured limits where there are some.
    PointDone { index: usize, label: String, values: Vec<Option<f64>>, point: PointFigures },
    /// The demo's own judgement of what was measured; `stopped`: the user cancelled it and
    /// the report covers the points measured before.
    Finished {
        report: Report,
        #[ts(type = "string")]
        path: PathBuf,
        stopped: bool,
    },
    /// It could not run (nothing to judge).
    Failed { message: String },
}

/// Every demo as a lesson, in `lx demo --list`'s order.
#[tauri::command]
pub async fn lessons() -> CmdResult<Vec<Lesson>> {
    Ok(demo::lessons())
}

/// Follows the run for the UI: points, streamed text, figures.
struct Progress {
    channel: Channel<LessonEvent>,
    lesson: Lesson,
    plan: demo::Plan,
    tokenizer: Arc<Tokenizer>,
    /// Points started so far (a sized demo runs its points in two batches, each counted
    /// from zero by the engine).
    index: usize,
    requests: usize,
    done: usize,
    backends: Vec<BackendInfo>,
    /// The request the preview follows, its decoder, and text not yet sent.
    following: Option<(u64, PieceDecoder)>,
    pending: String,
    fresh: bool,
    throttle: Throttle,
    /// This machine's limits as last measured (the probe is not run for a lesson) and the
    /// model's cost per token: each point's ceilings, where the backend's device was measured.
    basis: Option<(lx_machine::probe::Probe, lx_machine::roofline::ModelCost)>,
    device: String,
}

impl Progress {
    fn send(&self, e: LessonEvent) {
        let _ = self.channel.send(e);
    }

    fn flush_text(&mut self) {
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            let fresh = std::mem::take(&mut self.fresh);
            self.send(LessonEvent::Text { fresh, text });
        }
    }
}

impl Observer for Progress {
    fn token(&mut self, id: u64, _index: u32, token: TokenId, _at_ms: f64) {
        // Follow one request at a time: a new one once the followed one has ended.
        if self.following.is_none() {
            self.flush_text();
            self.following = Some((id, PieceDecoder::default()));
            self.fresh = true;
        }
        if let Some((followed, decoder)) = &mut self.following {
            if *followed == id {
                self.pending.push_str(&decoder.push(self.tokenizer.token_bytes(token)));
            }
        }
        if self.throttle.ready(Instant::now()) {
            self.flush_text();
        }
    }

    fn done(&mut self, record: &RequestRecord) {
        if self.following.as_ref().is_some_and(|(id, _)| *id == record.id) {
            self.flush_text();
            self.following = None;
        }
        self.done += 1;
        self.send(LessonEvent::Progress { done: self.done.min(self.requests), total: self.requests });
    }
}

impl SweepObserver for Progress {
    fn loading(&mut self, backend: &str) {
        self.send(LessonEvent::Loading { backend: backend.into() });
    }
    fn fidelity(&mut self, what: &str) {
        self.send(LessonEvent::Fidelity { what: what.into() });
    }
    fn loaded(&mut self, backend: &str, info: &BackendInfo, load_ms: f64) {
        self.backends.push(info.clone());
        self.device = info.device.clone();
        self.send(LessonEvent::Loaded { backend: backend.into(), device: info.device.clone(), threads: info.threads, load_ms });
    }
    fn point_started(&mut self, _index: usize, _total: usize, _backend: &str, policy: Policy, spec: &PointSpec) {
        self.requests = spec.requests;
        self.done = 0;
        let label = demo::point_label(&self.plan.labels, self.plan.sizing, self.index, spec.prompt_tokens);
        self.send(LessonEvent::PointStarted {
            index: self.index,
            label,
            prompt_tokens: spec.prompt_tokens,
            concurrency: spec.concurrency,
            max_tokens: spec.max_tokens,
            policy,
            requests: spec.requests,
        });
    }
    fn point_done(&mut self, point: &PointResult) {
        self.flush_text();
        let index = self.index;
        self.index += 1;
        let label = demo::point_label(&self.plan.labels, self.plan.sizing, index, point.prompt_tokens);
        let values = self.lesson.values(index, point, &self.backends);
        let mut figures = PointFigures::from(point);
        if let Some((probe, cost)) = &self.basis {
            figures.ceiling = probe.for_device(&self.device).map(|l| cost.ceiling(l, point.traffic.depth, point.prompt_tokens, point.max_tokens, point.concurrency));
        }
        self.send(LessonEvent::PointDone { index, label, values, point: figures });
    }
}

/// Run lesson `name` on `backend` (a backend of this build, or a server the user added
/// where the lesson allows one); returns the run file's path. Live mode must be stopped
/// first; `lesson_cancel` stops it (what was measured is kept and judged).
///
/// Events on `on_event`: `started`, `loading`, `loaded`, then per point `pointStarted`,
/// `text` and `progress` as it runs, `pointDone`; then `finished` or `failed`.
#[tauri::command]
pub async fn lesson_start(state: State<'_, AppState>, name: String, backend: String, on_event: Channel<LessonEvent>) -> CmdResult<String> {
    if state.live.locked().is_some() {
        return Err(CmdError::Busy("live mode is running: stop it before a lesson".into()));
    }
    if state.sweep_running() {
        return Err(CmdError::Busy("a sweep, tuning, advice or lesson is already running".into()));
    }
    let demo = demo::find(&name).map_err(|e| CmdError::Sweep(e.to_string()))?;
    let lesson = demo.lesson();
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let on_server = state.servers.locked().iter().any(|s| s.name == backend);
    let backend = if on_server {
        if let Some(why) = lesson.server_refusal() {
            return Err(CmdError::Sweep(format!("{} cannot run on the server {backend}: {why}", lesson.name)));
        }
        backend
    } else {
        lx_local::canonical(&backend).map_err(|e| CmdError::Sweep(e.to_string()))?.to_string()
    };

    // The idle choice of threads, as a sweep: a lesson draws little while a point runs (its
    // output four times a second), and on two cores live mode's contended choice (one
    // thread) left batching no arithmetic to spare, so four clients got less than one (docs/APP.md).
    let spawn = state.spawner(&model, lx_local::profile::Use::Measure);
    let settings = serde_json::json!({ "demo": demo.name(), "backend": backend, "threads": 0 });
    let mut run = RunFile::new(vec!["latency-explorer".into(), "lesson".into(), demo.name().into()], lx_local::hardware_report(), model.open.record(), settings);
    let path: PathBuf = state.runs_dir.join(run_file_name(&format!("lesson-{}", demo.name()), run.started_unix_ms / 1000));
    let control = RunControl::default();
    let stop = Arc::clone(&control.stop);
    let plan = demo::plan(demo, &backend, 0);
    let _ = on_event.send(LessonEvent::Started { path: path.clone(), points: plan.points.len() });
    let mut progress = Progress {
        channel: on_event.clone(),
        lesson,
        plan,
        tokenizer: Arc::new(model.open.tokenizer.clone()),
        index: 0,
        requests: 0,
        done: 0,
        backends: Vec::new(),
        following: None,
        pending: String::new(),
        fresh: false,
        // Four repaints a second, as live mode's preview: the page shares the machine it measures.
        throttle: Throttle::new(Duration::from_millis(250)),
        basis: lx_local::limits::cached_limits().zip(lx_format::gguf::GgufFile::open(&model.open.path).ok().and_then(|g| lx_machine::roofline::ModelCost::from_gguf(&g).ok())),
        device: String::new(),
    };
    let out = path.clone();
    let thread = std::thread::Builder::new()
        .name("lx-lesson".into())
        .spawn(move || {
            let mut ctx = model.open.sweep_context(&model.prompts, spawn, Some(out.clone()), control);
            ctx.fidelity = Some(lx_local::fidelity::sweep_basis(model.open.clone(), run.command.clone()));
            let judged = if on_server { demo::run_demo_on_server(demo, &backend, &ctx, &mut run, &mut progress) } else { demo::run_demo(demo, &backend, &[], 0, &ctx, &mut run, &mut progress) };
            match judged {
                Ok(report) => drop(on_event.send(LessonEvent::Finished { report, path: out, stopped: run.stopped })),
                Err(e) => drop(on_event.send(LessonEvent::Failed { message: format!("{e:#}") })),
            }
        })
        .map_err(|e| CmdError::Sweep(format!("cannot start the lesson: {e}")))?;
    *state.sweep.locked() = Some(Sweep { stop, thread });
    *state.last_run.locked() = Some(path.clone());
    Ok(path.display().to_string())
}

/// Stop the lesson: the request in flight is cancelled, the points measured are kept.
#[tauri::command]
pub async fn lesson_cancel(state: State<'_, AppState>) -> CmdResult<()> {
    super::sweep::sweep_cancel(state).await
}

/// The handout of a lesson's runs (the one just measured, and any other machine's runs of
/// the same lesson), written beside the first as a page; returns the page's path.
#[tauri::command]
pub async fn lesson_handout(runs: Vec<String>) -> CmdResult<String> {
    super::blocking(move || handout(&runs)).await?
}

fn handout(paths: &[String]) -> CmdResult<String> {
    let first = paths.first().ok_or_else(|| CmdError::Io("no lesson run to make a handout of".into()))?;
    let mut runs = Vec::new();
    for p in paths {
        let path = std::path::Path::new(p);
        let run = RunFile::read(path).map_err(|e| CmdError::Io(format!("{e:#}")))?;
        runs.push((run, path.file_name().map_or_else(|| p.clone(), |f| f.to_string_lossy().into_owned())));
    }
    let page = lx_teach::handout::handout(&runs).map_err(CmdError::Io)?.html();
    let out = std::path::Path::new(first).with_extension("html");
    lx_engine::atomic_file::write(&out, page.as_bytes()).map_err(|e| CmdError::Io(format!("cannot write the handout {}: {e:#}", out.display())))?;
    Ok(out.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handout_is_written_beside_the_lessons_run_or_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let results = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
        let run = dir.path().join("lesson.json");
        std::fs::copy(results.join("lesson-prompt-length-app.json"), &run).unwrap();
        let other = results.join("demo-prompt-length.json").display().to_string();
        let page = handout(&[run.display().to_string(), other]).unwrap();
        assert_eq!(page, dir.path().join("lesson.html").display().to_string());
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.contains("Does a longer prompt slow down every token") && html.contains("2 runs, a line each"), "{html}");
        let sweep = results.join("batching-pp128-c8-static.json").display().to_string();
        assert!(matches!(handout(&[sweep]), Err(CmdError::Io(m)) if m.contains("is not a lesson's run")));
        assert!(matches!(handout(&[]), Err(CmdError::Io(m)) if m.contains("no lesson run")));
    }
}
