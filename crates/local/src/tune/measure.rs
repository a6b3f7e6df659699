//! Running the tuner's trials: each one a short sweep of one backend with the trial's
//! settings, in a worker of its own, through the same engine every run uses.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_results::printers::{printer, Format};
use lx_results::results::RunFile;
use lx_run::sweep::{run_points, Length, SweepObserver, SweepPlan};
use lx_client::traffic::{Observer, RunControl};
use lx_format::workload::PromptBuilder;

use super::{search, search_contended, Budget, CompetingLoad};
use crate::profile::{knobs, model_key, nothing_to_tune, Applied, BackendProfile, Profile, Settings, Trial, PROFILE_SCHEMA};
use super::{TRIAL_CLIENTS, TRIAL_OUTPUT, TRIAL_POINT_S, TRIAL_PROMPT, TRIAL_REQUESTS, TRIAL_WARMUP};
use crate::model::OpenModel;

/// The part of each backend's share of the budget for its idle search; the rest is for
/// measuring again under the competing load.
const IDLE_SHARE: f64 = 0.5;

/// How a trial that the end of its backend's share stopped is described.
const CUT: &str = "stopped at the end of its share of the budget";

/// What to tune.
pub struct Request<'a> {
    pub model: &'a OpenModel,
    /// Backends, each available in this build.
    pub backends: Vec<String>,
    pub budget: Duration,
    /// Stop (Ctrl-C, the app's Cancel) and the hang timeout.
    pub control: RunControl,
}

/// What the tuner is doing, for a progress display.
#[derive(Debug)]
pub enum Event<'a> {
    /// A trial starts: backend, the settings asked for (empty: the backend's defaults), and
    /// whether the competing load runs.
    Trial { backend: &'a str, asked: &'a Settings, contended: bool, elapsed: Duration, budget: Duration },
    /// A trial ended.
    Measured { backend: &'a str, trial: &'a Trial },
    /// Something was left out, and why.
    Note { backend: &'a str, note: &'a str },
}

/// Tunes every backend of the request within its budget and returns the profile (not yet
/// saved). A stop returns an error: a profile from half a search would be kept as if whole.
pub fn tune(request: &Request<'_>, on: &mut dyn FnMut(Event<'_>)) -> anyhow::Result<Profile> {
    let hardware = crate::hardware_report();
    let machine = lx_machine::probe::machine_key(&hardware);
    let cores = hardware.physical_cores.max(1);
    let prompts = PromptBuilder::new(&request.model.tokenizer);
    let mut trials_of = Trials { request, prompts: &prompts, hardware: &hardware, budget: Budget::new(request.budget), expected: HashMap::new() };
    let stopped = || request.control.stop.load(Ordering::Relaxed);
    let mut profiles: BTreeMap<String, BackendProfile> = BTreeMap::new();

    // Each backend gets an equal share of the budget, half of it for the idle search and the
    // rest under the competing load; time a backend leaves over goes to the next. A trial
    // starts only when it is expected to end in its phase (the defaults, which a profile
    // needs, whenever the backend's share has begun) and is stopped at the share's end: one
    // slow backend (MLX's CPU build) cannot take the others' time or overrun the budget.
    let (tunable, fixed): (Vec<&String>, Vec<&String>) = request.backends.iter().partition(|b| nothing_to_tune(b).is_none());
    for backend in fixed {
        let mut notes = Vec::new();
        note(on, &mut notes, backend, nothing_to_tune(backend).unwrap_or_default().to_string());
        profiles.insert(backend.clone(), BackendProfile { idle: Settings::new(), contended: None, trials: Vec::new(), notes, fidelity: BTreeMap::new() });
    }
    let n = tunable.len().max(1) as f64;
    let competing = CompetingLoad::threads_for(cores);
    for (i, backend) in tunable.into_iter().enumerate() {
        let (idle_until, share_end) = ((i as f64 + IDLE_SHARE) / n, (i + 1) as f64 / n);
        let mut notes = Vec::new();
        let mut cut = false;
        let (best, mut trials) = search(&knobs(backend, cores), &mut |asked: &Settings| {
            let until = if asked.is_empty() { None } else { Some(idle_until) };
            let t = trials_of.run(on, backend, asked, false, until, share_end);
            cut |= t.is_none() && !stopped();
            t
        });
        anyhow::ensure!(!stopped(), "tuning was stopped: nothing saved (the previous profile, if any, is kept)");
        let Some(idle) = best else {
            let share = request.budget.as_secs_f64() / n;
            note(on, &mut notes, backend, match trials.first().and_then(|t| t.error.as_deref()) {
                Some(e) if e.starts_with(CUT) => format!("{backend} stays untuned: its share of the budget ({share:.0} s) was too short for one trial ({e}); a larger --budget gives it more"),
                Some(e) => format!("{backend} stays untuned: it failed with its default settings ({e})"),
                None => format!("{backend} stays untuned: the budget left no time for it"),
            });
            profiles.insert(backend.clone(), BackendProfile { idle: Settings::new(), contended: None, trials, notes, fidelity: BTreeMap::new() });
            continue;
        };
        if cut {
            note(on, &mut notes, backend, format!("the budget ended the search after {} trials: settings not tried, or a change not measured again, keep the best so far", trials.len()));
        }
        let load = CompetingLoad::start(competing);
        let defaults = trials.first().map(|t| t.settings.clone()).unwrap_or_default();
        let (contended, under_load) =
            search_contended(&idle, &knobs(backend, cores), &defaults, &mut |asked: &Settings| trials_of.run(on, backend, asked, true, Some(share_end), share_end));
        drop(load);
        anyhow::ensure!(!stopped(), "tuning was stopped: nothing saved (the previous profile, if any, is kept)");
        if contended.is_none() {
            note(on, &mut notes, backend, "the budget left no time to measure under a competing load: live mode uses the idle choice".into());
        }
        trials.extend(under_load);
        // Speed may not be bought with the model: a choice that changes what the backend
        // computes is held to the default's fidelity.
        let mut fidelity = BTreeMap::new();
        let mut bounded = |chosen: &Settings| {
            let (kept, said) = super::fidelity::bound(request.model, backend, chosen, &defaults, &mut fidelity);
            for n in said {
                note(on, &mut notes, backend, n);
            }
            kept
        };
        let idle = bounded(&idle);
        let contended = contended.map(|c| bounded(&c));
        profiles.insert(backend.clone(), BackendProfile { idle, contended, trials, notes, fidelity });
    }
    anyhow::ensure!(!stopped(), "tuning was stopped: nothing saved (the previous profile, if any, is kept)");
    let budget = &trials_of.budget;
    Ok(Profile {
        schema: PROFILE_SCHEMA,
        machine,
        model: model_key(&request.model.path),
        measured_unix_ms: lx_engine::date::now_unix_ms(),
        seconds: budget.elapsed().as_secs_f64(),
        budget_s: budget.total().as_secs_f64(),
        workload: format!(
            "prompt {TRIAL_PROMPT} + {TRIAL_OUTPUT} output tokens, continuous batching: 1 client and {TRIAL_CLIENTS} clients, {TRIAL_REQUESTS} measured requests each (none sent after {TRIAL_POINT_S} s) after {TRIAL_WARMUP} unmeasured"
        ),
        competing_load: format!("{competing} busy thread(s) in the tuning process, for {cores} physical cores"),
        backends: profiles,
    })
}

fn note(on: &mut dyn FnMut(Event<'_>), notes: &mut Vec<String>, backend: &str, text: String) {
    on(Event::Note { backend, note: &text });
    notes.push(text);
}

struct NoProgress;
impl Observer for NoProgress {}
impl SweepObserver for NoProgress {}

/// What a trial's length is expected from: the backend and where the model runs (a GPU
/// build's `gpu_layers` or `device`). The same model can take minutes a trial on one device
/// and seconds on the other (lavapipe against the CPU): a GPU trial's length must not keep
/// the CPU's from starting.
pub(super) fn duration_key(backend: &str, settings: &Settings) -> String {
    match settings.get("gpu_layers").or_else(|| settings.get("device")) {
        Some(device) => format!("{backend} on {device}"),
        None => backend.to_string(),
    }
}

/// Runs trials against the budget: what each needs that does not change between trials.
struct Trials<'a> {
    request: &'a Request<'a>,
    prompts: &'a PromptBuilder,
    hardware: &'a lx_machine::hardware::HardwareReport,
    budget: Budget,
    /// The last trial's length for each backend and device ([`duration_key`]): how long the
    /// next one there is expected to take (a first one is guessed).
    expected: HashMap<String, Duration>,
}

impl Trials<'_> {
    /// One trial of `backend` with `asked`, reported through `on`, when it is expected to
    /// end before `until` of the budget (`None`: whenever `share_end` is still ahead); it is
    /// stopped at `share_end`. `None` when it does not fit or the user stopped.
    fn run(&mut self, on: &mut dyn FnMut(Event<'_>), backend: &str, asked: &Settings, contended: bool, until: Option<f64>, share_end: f64) -> Option<Trial> {
        let guess = self.expected.get(&duration_key(backend, asked)).copied().unwrap_or(Duration::from_secs(20));
        let fits = match until {
            Some(until) => self.budget.fits(guess, until),
            None => self.budget.fits(Duration::ZERO, share_end),
        };
        if self.request.control.stop.load(Ordering::Relaxed) || !fits {
            return None;
        }
        on(Event::Trial { backend, asked, contended, elapsed: self.budget.elapsed(), budget: self.budget.total() });
        let t = self.stopped_at(backend, asked, contended, self.budget.at(share_end));
        self.expected.insert(duration_key(backend, &t.settings), Duration::from_secs_f64(t.seconds));
        on(Event::Measured { backend, trial: &t });
        Some(t)
    }

    /// [`Trials::measure`] with its own stop, raised by the user's or at `deadline`.
    fn stopped_at(&self, backend: &str, asked: &Settings, contended: bool, deadline: Instant) -> Trial {
        let control = RunControl { hang_timeout: self.request.control.hang_timeout, stop: Arc::new(AtomicBool::new(false)) };
        let finished = Arc::new(AtomicBool::new(false));
        let watch = {
            let (user, stop, done) = (Arc::clone(&self.request.control.stop), Arc::clone(&control.stop), Arc::clone(&finished));
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if user.load(Ordering::Relaxed) || Instant::now() >= deadline {
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        let measured = self.measure(backend, asked, contended, control);
        finished.store(true, Ordering::Relaxed);
        let _ = watch.join();
        if Instant::now() >= deadline && !self.request.control.stop.load(Ordering::Relaxed) && measured.error.is_some() {
            let why = format!("{CUT}, after {:.0} s", measured.seconds);
            return Trial::failed(measured.settings, contended, measured.seconds, why);
        }
        measured
    }

    /// One trial: one client, then [`TRIAL_CLIENTS`], with `asked` applied.
    fn measure(&self, backend: &str, asked: &Settings, contended: bool, control: RunControl) -> Trial {
        let (request, prompts, hardware, started) = (self.request, self.prompts, self.hardware, Instant::now());
        let threads: usize = asked.get("threads").and_then(|t| t.parse().ok()).unwrap_or(0);
        let plan = SweepPlan {
            backends: vec![backend.to_string()],
            prompt_tokens: vec![Length::fixed(TRIAL_PROMPT)],
            max_tokens: vec![Length::fixed(TRIAL_OUTPUT)],
            concurrency: vec![1, TRIAL_CLIENTS],
            requests: TRIAL_REQUESTS,
            warmup: Some(TRIAL_WARMUP),
            duration_s: Some(TRIAL_POINT_S),
            threads,
            ..SweepPlan::default()
        };
        let applied = Applied {
            settings: knobs(backend, 1).iter().filter(|k| k.env.is_some()).filter_map(|k| Some((k.name.to_string(), asked.get(k.name)?.clone()))).collect(),
            threads: None,
            from: "a tuning trial".into(),
        };
        let ctx = request.model.sweep_context(prompts, crate::worker_spawner(move |_, _| applied.clone()), None, control);
        let settings = serde_json::to_value(&plan).unwrap_or_default();
        let mut run = RunFile::new(Vec::new(), hardware.clone(), request.model.record(), settings);
        let mut sink = printer(Format::Jsonl, Box::new(std::io::sink()));
        let seconds = || started.elapsed().as_secs_f64();
        if let Err(e) = run_points(&plan, plan.points(), &ctx, &mut run, sink.as_mut(), &mut NoProgress) {
            return Trial::failed(asked.clone(), contended, seconds(), format!("{e:#}"));
        }
        let Some(info) = run.backends.first() else {
            let why = run.points.iter().flat_map(|p| p.error_messages.first()).next().cloned().unwrap_or_else(|| "the worker did not start".into());
            return Trial::failed(asked.clone(), contended, seconds(), why);
        };
        let mut ran_with = info.settings.clone();
        let threads = if threads > 0 { threads } else { lx_machine::hardware::threads_or_cores(info.threads) };
        ran_with.insert("threads".into(), threads.to_string());
        if let Some(bad) = run.points.iter().find(|p| p.errors > 0 || p.requests == 0) {
            let why = bad.error_messages.first().cloned().unwrap_or_else(|| "no request completed".into());
            return Trial::failed(ran_with, contended, seconds(), why);
        }
        if run.stopped || run.points.len() < 2 {
            return Trial::failed(ran_with, contended, seconds(), "stopped before both points were measured".into());
        }
        let (single, batched) = (&run.points[0], &run.points[1]);
        Trial::new(ran_with, contended, single.decode_tps.p50, single.prefill_tps.p50, batched.throughput_tps, seconds())
    }
}
