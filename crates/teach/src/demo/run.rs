//! Running a demo: its plan on one backend (and its workload on servers where it takes them),
//! sized to this machine from its first point, then judged.

use lx_client::traffic::{PointSpec, Traffic};
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::printers::Printer;
use lx_results::results::{PointResult, RunFile};
use lx_run::sweep::{Session, SweepContext, SweepError, SweepObserver, SweepPlan, SweepPoint};

use super::sizing::{chat_tokens_for, point_label, sized, sizing_note, with_chat_tokens, Sizing, CHATS_OUTLAST_MS, CHAT_MOST_TOKENS, LONG_PROMPTS};
use super::{judge_with, plan, Demo, Plan, Report, Servers};

/// Prints nothing: a demo prints its own table.
struct Silent;
impl Printer for Silent {
    fn point(&mut self, _point: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
}

/// Run demo `demo` on `backend` and judge it; then send its workload to each of `servers`
/// (OpenAI-compatible targets, by name), whose rows follow the backend's in the table. The
/// points land in `run` (and `ctx.out`).
pub fn run_demo(demo: Demo, backend: &str, servers: &[String], threads: usize, ctx: &SweepContext<'_>, run: &mut RunFile, observer: &mut dyn SweepObserver) -> Result<Report, SweepError> {
    let mut plan = plan(demo, backend, threads);
    // A demo that stores a KV cache in another type (kv-cache, fidelity) is llama.cpp's:
    // refused before anything loads, not as a failed point after the others ran.
    if let Some(why) = plan.points.iter().find_map(|p| p.traffic.kv.for_backend(backend).err()) {
        return Err(SweepError::Refused(format!("demo {} measures a quantized KV cache, which runs on llama.cpp only ({why}); run it with --backend llama", demo.name())));
    }
    if !servers.is_empty() {
        if demo.servers() != Servers::Beside {
            return Err(SweepError::Refused(format!(
                "demo {} shows how our scheduler runs requests, so it measures a backend, not a server; --target works with: {}",
                demo.name(),
                Servers::Beside.demos().join(", ")
            )));
        }
        with_servers(&mut plan, servers);
    }
    run_plan(demo, plan, ctx, run, observer)
}

/// Run demo `demo` on the server named `server` alone (one whose [`Demo::servers`] is
/// [`Servers::Alone`]).
pub fn run_demo_on_server(demo: Demo, server: &str, ctx: &SweepContext<'_>, run: &mut RunFile, observer: &mut dyn SweepObserver) -> Result<Report, SweepError> {
    if demo.servers() != Servers::Alone {
        return Err(SweepError::Refused(format!(
            "{}: a server schedules requests its own way, so this runs on a backend of this app (works on a server: {})",
            demo.name(),
            Servers::Alone.demos().join(", ")
        )));
    }
    let mut plan = plan(demo, server, 0);
    plan.sweep.servers = vec![server.to_string()];
    run_plan(demo, plan, ctx, run, observer)
}

fn run_plan(demo: Demo, plan: Plan, ctx: &SweepContext<'_>, run: &mut RunFile, observer: &mut dyn SweepObserver) -> Result<Report, SweepError> {
    let first = run.points.len();
    let mut points = plan.points;
    // One worker for every point, loaded for the largest a sizing may choose: the sized
    // points then need no second load, and a server never gets the same prompt twice.
    let mut largest = points.clone();
    match plan.sizing {
        Sizing::LongPrompt => largest[1].spec.prompt_tokens = LONG_PROMPTS[LONG_PROMPTS.len() - 1],
        Sizing::ChatsOutlast { long_prompt } => largest = with_chat_tokens(largest, long_prompt, CHAT_MOST_TOKENS),
        _ => {}
    }
    if let (Some(chunks), None) = (plan.sweep.fidelity_chunks, &run.fidelity) {
        run.fidelity = Some(lx_run::sweep::measure_fidelity(&plan.sweep, chunks, &points, ctx, observer)?);
    }
    let mut session = Session::new(plan.sweep.load_spec_for(ctx.model_path.clone(), &largest));
    let mut sizing = None;
    if let Sizing::ChatsOutlast { long_prompt } = plan.sizing {
        let Some(decode_tps) = calibrate(&mut session, &plan.sweep, &points[0].backend, ctx, run, observer)? else {
            return Err(SweepError::Trial("the request measured first, to size the demo to this machine, failed (see the worker's error above)".into()));
        };
        let tokens = chat_tokens_for(decode_tps, &points, long_prompt);
        sizing = Some(format!(
            "sized to this machine: one request alone decoded at {decode_tps:.0} tok/s, so each chat writes {tokens} tokens, enough to still be decoding {:.1} s after the last long prompt arrives",
            CHATS_OUTLAST_MS / 1e3
        ));
        points = with_chat_tokens(points, long_prompt, tokens);
    } else if plan.sizing != Sizing::Fixed {
        let rest = points.split_off(1);
        session.run(&plan.sweep, points, ctx, run, &mut Silent, observer)?;
        let Some(measured) = run.points.last().filter(|p| p.errors == 0 && p.requests > 0 && run.points.len() > first) else {
            // The first point failed: judge reports the errors and runs nothing more.
            return Ok(judged(demo, &plan.labels, plan.sizing, &run.points[first..], &run.backends));
        };
        points = sized(plan.sizing, measured, rest);
    }
    session.run(&plan.sweep, points, ctx, run, &mut Silent, observer)?;
    let mut report = judged(demo, &plan.labels, plan.sizing, &run.points[first..], &run.backends);
    report.sizing = report.sizing.or(sizing);
    Ok(report)
}

/// Forwards only a worker's loading to the demo's observer: the calibration request is not
/// one of the demo's points.
struct LoadingOnly<'a>(&'a mut dyn SweepObserver);
impl lx_client::traffic::Observer for LoadingOnly<'_> {}
impl SweepObserver for LoadingOnly<'_> {
    fn loading(&mut self, backend: &str) {
        self.0.loading(backend);
    }
    fn loaded(&mut self, backend: &str, info: &BackendInfo, load_ms: f64) {
        self.0.loaded(backend, info, load_ms);
    }
}

/// One request alone on the demo's worker (a 64-token prompt, 32 tokens): this machine's
/// decode rate, tok/s. Kept out of the run's points and its file; the worker it loaded is
/// recorded with the run's backends. `None` when the request failed.
fn calibrate(session: &mut Session, sweep: &SweepPlan, backend: &str, ctx: &SweepContext<'_>, run: &mut RunFile, observer: &mut dyn SweepObserver) -> Result<Option<f64>, SweepError> {
    let alone = SweepPoint {
        backend: backend.to_string(),
        policy: Policy::Continuous,
        spec: PointSpec { prompt_tokens: 64, max_tokens: 32, concurrency: 1, requests: 1, warmup: 1, stop_at_eos: false, top_logprobs: 0 },
        traffic: Traffic::default(),
        repetition: None,
    };
    let quiet = SweepContext { out: None, spawn: ctx.spawn.clone(), control: ctx.control.clone(), model_path: ctx.model_path.clone(), model_stamp: ctx.model_stamp.clone(), prompts: ctx.prompts, stop_tokens: ctx.stop_tokens.clone(), fidelity: None };
    let mut scratch = RunFile { points: Vec::new(), ..run.clone() };
    session.run(sweep, vec![alone], &quiet, &mut scratch, &mut Silent, &mut LoadingOnly(observer))?;
    for b in scratch.backends {
        if !run.backends.contains(&b) {
            run.backends.push(b);
        }
    }
    run.stopped |= scratch.stopped;
    Ok(scratch.points.first().filter(|p| p.errors == 0 && p.decode_tps.count > 0).map(|p| p.decode_tps.p50))
}

/// [`judge_with`], with the labels of sized points renamed after their size and the sizing
/// said in words.
pub(super) fn judged(demo: Demo, labels: &[String], sizing: Sizing, points: &[PointResult], backends: &[BackendInfo]) -> Report {
    let labels: Vec<String> = labels.iter().enumerate().map(|(i, l)| points.get(i).map_or_else(|| l.clone(), |p| point_label(labels, sizing, i, p.prompt_tokens))).collect();
    let mut report = judge_with(demo, &labels, points, backends);
    report.sizing = points.first().zip(points.get(1)).and_then(|(first, second)| sizing_note(sizing, first, second));
    report
}

/// `plan` with the workload of its first point sent to each server as well.
fn with_servers(plan: &mut Plan, servers: &[String]) {
    let workload = plan.points[0].clone();
    for server in servers {
        plan.points.push(SweepPoint { backend: server.clone(), policy: Policy::Continuous, ..workload.clone() });
        plan.labels.push(server.clone());
    }
    plan.sweep.servers = servers.to_vec();
}
