//! `lx bench`: the standard suite on every backend of the build, a score per backend, and
//! one self-describing file to share; `--sustained` keeps one shape's load on for minutes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use lx_client::traffic::{PointSpec, RunControl};
use lx_engine::scheduler::Policy;
use lx_local::model::OpenModel;
use lx_local::sweep::SweepJob;
use lx_results::bench::score::Reference;
use lx_results::bench::sustained::{Sustained, Trial};
use lx_results::bench::{BackendBench, BenchFile, BenchModel, Build, Machine, Shape, Suite, SuiteName};
use lx_results::results::PointResult;
use lx_run::sweep::{Length, SweepObserver, SweepPlan};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// The quick suite (the default): three shapes, three repetitions, at most 90 s a backend.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The full suite: five shapes up to 4,096-token prompts and 8 clients, at most 15 minutes
    /// a backend.
    #[arg(long)]
    full: bool,
    /// The larger tier: the suite on a shape-only twin of Qwen2.5 1.5B (`--model
    /// synth:qwen2.5-1.5b`, the same file on every machine), on each backend the machine can
    /// hold it on, with a bound in proportion to its size.
    #[arg(long, conflicts_with = "sustained")]
    large: bool,
    /// Backends, comma-separated. Default: every backend of this build that runs the model.
    #[arg(long)]
    backend: Option<String>,
    /// Measure each shape this many times instead of the suite's number (fewer: a shorter run
    /// with a wider interval; the file says how many ran).
    #[arg(long)]
    repetitions: Option<usize>,
    /// Compute threads (default: the tuned profile's, else physical cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Run every backend with its own defaults, not this machine's tuned profile (`lx tune`).
    #[arg(long)]
    untuned: bool,
    /// Keep the suite's one-client chat load on this long (90s, 10m) on one backend instead
    /// of running the suite: decode rate, clocks, power and throttling over time.
    #[arg(long, value_parser = lx_decide::preset::parse_duration)]
    sustained: Option<f64>,
    /// Sustained: the length of one trial's measured window, seconds.
    #[arg(long, default_value_t = lx_engine::defaults::SUSTAINED_TRIAL_S, requires = "sustained")]
    trial: f64,
    /// Sustained: an idle pause after each trial, seconds (0: the load never stops).
    #[arg(long, default_value_t = 0.0, requires = "sustained")]
    cooldown: f64,
    /// Where to write the bench file (default: bench-SUITE-FINGERPRINT-DATE.json here).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Measure nothing: score these bench files again against this build's reference
    /// machine, in place (after the reference was measured again).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with_all = ["quick", "full", "sustained", "out"])]
    rescore: Vec<PathBuf>,
}

/// Prints nothing per point: `lx bench` prints its own table per backend.
struct Silent;
impl lx_results::printers::Printer for Silent {
    fn point(&mut self, _point: &PointResult) -> std::io::Result<()> {
        Ok(())
    }
}

/// The larger tier's model (`--large`).
const LARGE: &str = "synth:qwen2.5-1.5b";

pub fn run(args: BenchArgs) -> anyhow::Result<i32> {
    if !args.rescore.is_empty() {
        for path in &args.rescore {
            let mut file = BenchFile::read(path)?;
            let reference = Reference::for_file(&file);
            file.score(reference.as_ref());
            file.write_atomic(path)?;
            let scores: Vec<String> = file.backends.iter().map(|b| format!("{} {}", b.name, b.score.as_ref().map_or("no score".into(), |s| s.describe()))).collect();
            eprintln!("{}: {}", path.display(), scores.join(", "));
        }
        return Ok(0);
    }
    let model = if args.large {
        anyhow::ensure!(args.model.model == "default", "--large is the suite on {LARGE}: give it or --model, not both");
        crate::commands::ModelArg { model: LARGE.into() }.open()?
    } else {
        args.model.open()?
    };
    let model = Arc::new(model);
    let name = if args.full { SuiteName::Full } else { SuiteName::Quick };
    let mut suite = Suite::for_model(name, std::fs::metadata(&model.path)?.len());
    if let Some(r) = args.repetitions {
        anyhow::ensure!(r >= 1, "--repetitions: at least 1");
        suite.repetitions = r;
    }
    anyhow::ensure!((suite.longest() as usize) <= model.context_length, "the {} suite needs a context of {} tokens; this model has {}", suite.name, suite.longest(), model.context_length);
    let (backends, skipped) = backends(&args, &model)?;
    for why in &skipped {
        eprintln!("{why}");
    }
    anyhow::ensure!(!backends.is_empty(), "no backend of this build runs this model");
    let hardware = lx_local::hardware_report();
    let mut record = model.record();
    // A twin is written the same on every machine, so its hash names it as well as a file's.
    if record.sha256.is_none() {
        record.sha256 = Some(lx_local::model::file_sha256(&model.path)?);
    }
    let mut file = BenchFile {
        schema: lx_results::bench::SCHEMA.into(),
        schema_version: lx_results::bench::SCHEMA_VERSION,
        started_unix_ms: lx_engine::date::now_unix_ms(),
        suite: suite.clone(),
        machine: Machine::new(&hardware, lx_machine::power::read()),
        build: Build { lx_version: env!("CARGO_PKG_VERSION").into(), features: hardware.build_features.clone(), compiled_for: lx_machine::hardware::compiled_for() },
        model: BenchModel::of(&record),
        backends: Vec::new(),
        sustained: None,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let when = lx_engine::date::UtcDate::from_unix(file.started_unix_ms / 1000).minutes().replace([' ', ':'], "-").replace("-UTC", "");
        let kind = if args.sustained.is_some() { "sustained".to_string() } else { suite.name.to_string() };
        PathBuf::from(format!("bench-{kind}-{}-{when}.json", file.machine.fingerprint))
    });
    let control = RunControl::default();
    crate::commands::stop_on_ctrl_c(&control);

    if let Some(asked) = args.sustained {
        anyhow::ensure!(args.trial >= 2.0, "--trial: at least 2 seconds (a trial must hold a whole request)");
        anyhow::ensure!(args.cooldown >= 0.0, "--cooldown: seconds, 0 or more");
        let backend = &backends[0];
        eprintln!("sustained: {backend}, {} for {asked:.0} s in {:.0} s trials{}", shape_text(&suite.shapes[0]), args.trial, if args.cooldown > 0.0 { format!(", {:.0} s idle after each", args.cooldown) } else { String::new() });
        let s = sustained(&args, &model, backend, &suite.shapes[0], asked, &control)?;
        println!("{}", s.verdict());
        for line in s.sensors.iter().chain(&s.sensors_missing) {
            println!("  {line}");
        }
        file.sustained = Some(s);
        file.write_atomic(&out)?;
        eprintln!("bench file written to {}", out.display());
        return Ok(if control.stop.load(Ordering::SeqCst) { 130 } else { 0 });
    }

    let reference = Reference::for_file(&file);
    eprintln!("{} suite on {} ({}): {}", suite.name, file.model.name, backends.join(", "), suite.shapes.iter().map(shape_text).collect::<Vec<_>>().join("; "));
    for backend in &backends {
        if control.stop.load(Ordering::SeqCst) {
            break;
        }
        let b = measure(&args, &model, backend, &suite, &control)?;
        file.backends.push(b);
        file.score(reference.as_ref());
        print_backend(file.backends.last().expect("just pushed"), &suite);
        // Written after every backend, so a stopped bench keeps what it measured.
        file.write_atomic(&out)?;
    }
    eprintln!("bench file written to {}", out.display());
    Ok(if control.stop.load(Ordering::SeqCst) { 130 } else { 0 })
}

fn shape_text(s: &Shape) -> String {
    format!("{} ({} in, {} out, {} client{})", s.name, s.prompt_tokens, s.max_tokens, s.clients, if s.clients == 1 { "" } else { "s" })
}

/// The backends to run, and a line for each one of the build left out and why.
fn backends(args: &BenchArgs, model: &OpenModel) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let asked: Vec<String> = match &args.backend {
        Some(list) => list.split(',').filter(|b| !b.trim().is_empty()).map(|b| lx_local::canonical(b.trim()).map(String::from)).collect::<anyhow::Result<_>>()?,
        None => lx_local::built(),
    };
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for b in asked {
        match lx_local::unavailable(&b).or_else(|| lx_local::unavailable_for(&b, &model.path)) {
            Some(why) if args.backend.is_some() => anyhow::bail!("{b}: {why}"),
            Some(why) => skipped.push(format!("{b} left out: {why}")),
            None => run.push(b),
        }
    }
    Ok((run, skipped))
}

/// A plan for `backend` whose grid holds every shape of `suite` (the points run are the
/// shapes alone: [`suite_points`]).
fn plan(args: &BenchArgs, backend: &str, suite: &Suite) -> SweepPlan {
    let uniq = |v: Vec<u32>| {
        let mut v = v;
        v.sort_unstable();
        v.dedup();
        v.into_iter().map(Length::fixed).collect()
    };
    let mut concurrency: Vec<usize> = suite.shapes.iter().map(|s| s.clients).collect();
    concurrency.sort_unstable();
    concurrency.dedup();
    SweepPlan {
        backends: vec![backend.to_string()],
        prompt_tokens: uniq(suite.shapes.iter().map(|s| s.prompt_tokens).collect()),
        max_tokens: uniq(suite.shapes.iter().map(|s| s.max_tokens).collect()),
        concurrency,
        repetitions: suite.repetitions,
        threads: args.threads,
        policies: vec![Policy::Continuous],
        ..SweepPlan::default()
    }
}

/// The plan's points that are shapes of the suite, each with the shape's requests and warm-up.
fn suite_points(plan: &SweepPlan, suite: &Suite) -> Vec<lx_run::sweep::SweepPoint> {
    plan.points()
        .into_iter()
        .filter_map(|mut p| {
            let shape = suite.shape_of(p.spec.prompt_tokens, p.spec.max_tokens, p.spec.concurrency)?;
            p.spec = PointSpec { requests: shape.requests, warmup: shape.warmup, ..p.spec };
            Some(p)
        })
        .collect()
}

/// Raises `mine` once the user stops or `bound` has passed; the returned flag ends the watch.
fn guard(bound: Duration, user: Arc<AtomicBool>, mine: Arc<AtomicBool>) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while !finished.load(Ordering::SeqCst) {
            if user.load(Ordering::SeqCst) || start.elapsed() >= bound {
                mine.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    done
}

/// The suite on one backend, stopped at the suite's bound.
fn measure(args: &BenchArgs, model: &Arc<OpenModel>, backend: &str, suite: &Suite, user: &RunControl) -> anyhow::Result<BackendBench> {
    let plan = plan(args, backend, suite);
    let points = suite_points(&plan, suite);
    let total = points.len();
    let requests: usize = points.iter().map(|p| p.spec.requests).sum();
    let usage = if args.untuned { lx_local::profile::Use::Untuned } else { lx_local::profile::Use::Measure };
    let spawn = lx_local::spawner(usage, 0);
    let mut job = SweepJob::new(model.clone(), plan, vec!["lx".into(), "bench".into()], spawn)?;
    // The backend's own stop, raised by the bound or by the user's Ctrl-C.
    let control = RunControl { stop: Arc::new(AtomicBool::new(false)), ..job.control.clone() };
    job.control = control.clone();
    let watch = guard(Duration::from_secs_f64(suite.bound_s), user.stop.clone(), control.stop.clone());
    let started = Instant::now();
    let specs = points.iter().map(|p| p.spec.clone()).collect();
    let mut bounded = Bounded { progress: crate::progress::SweepProgress::new(requests as u64), specs, done: 0, done_here: 0, started, bound: suite.bound_s, stop: control.stop.clone(), best: (0.0, 0.0), foreseen: None };
    let (run, failed) = job.run_points(points, &mut Silent, &mut bounded);
    bounded.progress.finish();
    watch.store(true, Ordering::SeqCst);
    failed?;
    let info = run.backends.iter().find(|b| b.name == backend);
    let tuned = info.and_then(|i| i.settings_from.as_deref()).is_some_and(lx_local::profile::is_tuned);
    let mut b = BackendBench::from_run(&run, backend, suite, tuned).ok_or_else(|| anyhow::anyhow!("{backend}: no point was measured"))?;
    let measured = run.points.iter().filter(|p| !p.stopped).count();
    if let Some(why) = bounded.foreseen {
        b.notes.push(why);
    } else if run.stopped && !user.stop.load(Ordering::SeqCst) {
        b.notes.push(format!("stopped at the {} suite's bound of {:.0} s after {measured} of {total} points ({} of {} repetitions complete)", suite.name, suite.bound_s, b.complete_repetitions().len(), suite.repetitions));
    } else if run.stopped {
        b.notes.push(format!("stopped by the user after {measured} of {total} points"));
    }
    eprintln!("{backend}: {measured} of {total} points in {:.0} s", started.elapsed().as_secs_f64());
    Ok(b)
}

/// Stops a backend as soon as what it measured shows that the rest cannot fit in the bound
/// (a backend many times slower than the suite was made for), instead of at the bound.
struct Bounded {
    progress: crate::progress::SweepProgress,
    specs: Vec<PointSpec>,
    /// Points finished, and measured requests finished in the current one.
    done: usize,
    done_here: usize,
    started: Instant,
    bound: f64,
    stop: Arc<AtomicBool>,
    /// The fastest prefill and decode any request has had: one request alone is the fastest,
    /// so the rates of one among several clients never make the bound look nearer.
    best: (f64, f64),
    foreseen: Option<String>,
}

impl Bounded {
    /// The least the requests still to come can take at these rates: every prompt prefilled
    /// one after another, and each round of clients decoding its output (more clients only
    /// slow one request's decode, so this is a lower bound).
    fn least_left_s(&self, prefill: f64, decode: f64) -> f64 {
        self.specs[self.done..]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let sent = if i == 0 { s.requests.saturating_sub(self.done_here) } else { s.warmup + s.requests } as f64;
                sent * s.prompt_tokens as f64 / prefill + (sent / s.concurrency as f64).ceil() * s.max_tokens as f64 / decode
            })
            .sum()
    }
}

impl lx_client::traffic::Observer for Bounded {
    /// After each measured request: stop now if the rest, at its rates, cannot fit.
    fn done(&mut self, r: &lx_client::records::RequestRecord) {
        self.progress.done(r);
        self.done_here += 1;
        let (Some(prefill), Some(decode)) = (r.prefill_tps(), r.decode_tps()) else { return };
        self.best = (self.best.0.max(prefill), self.best.1.max(decode));
        let (prefill, decode) = self.best;
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = self.least_left_s(prefill, decode);
        if self.foreseen.is_none() && elapsed + left > self.bound {
            self.foreseen = Some(format!(
                "stopped early: at its rates ({prefill:.1} prefill, {decode:.1} decode tok/s) the rest of the suite needs at least {left:.0} s more, past the {:.0} s bound",
                self.bound
            ));
            self.stop.store(true, Ordering::SeqCst);
        }
    }
}

impl SweepObserver for Bounded {
    fn loaded(&mut self, backend: &str, info: &lx_engine::backend::BackendInfo, load_ms: f64) {
        self.progress.loaded(backend, info, load_ms);
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &PointSpec) {
        self.progress.point_started(index, total, backend, policy, spec);
    }
    fn point_done(&mut self, point: &PointResult) {
        self.progress.point_done(point);
        (self.done, self.done_here) = (self.done + 1, 0);
    }
    fn probing(&mut self) {
        self.progress.probing();
    }
    fn ceilings(&mut self, basis: Result<(&lx_machine::probe::Probe, &lx_machine::roofline::ModelCost), &anyhow::Error>) {
        self.progress.ceilings(basis);
    }
}

/// One backend's figures: each shape's means over repetitions, against the ceilings.
fn print_backend(b: &BackendBench, suite: &Suite) {
    println!("\n{} ({}, {}; {})", b.name, b.version, b.device, if b.tuned { "tuned" } else { "not tuned" });
    println!("| shape | prefill tok/s | of ceiling | decode tok/s | of ceiling | TTFT ms | peak MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let fig = |v: &[Option<f64>]| {
        let s = lx_results::repeats::Spread::of(v.iter().flatten().copied());
        match (s, lx_results::bench::mean(v.iter().flatten().copied())) {
            (Some(s), _) => format!("{:.1} ± {:.1}", s.mean, s.sd),
            (None, Some(m)) => format!("{m:.1}"),
            _ => "—".into(),
        }
    };
    let pct = |v: Option<f64>| v.map_or("—".into(), |v| format!("{:.0}%", v * 100.0));
    for (s, f) in suite.shapes.iter().zip(&b.shapes) {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            shape_text(s),
            fig(&f.prefill_tps),
            pct(f.prefill_of_ceiling),
            fig(&f.decode_tps),
            pct(f.decode_of_ceiling),
            fig(&f.ttft_ms),
            f.peak_rss_mib.map_or("—".into(), |m| format!("{m:.0}"))
        );
    }
    if let Some(s) = &b.score {
        println!("score {} against {} (100), from {} repetitions", s.describe(), s.reference, s.each.len());
    }
    for n in &b.notes {
        println!("note: {n}");
    }
}

/// Times each trial and pauses after it for the cool-down (the worker stays loaded, idle).
struct Trials {
    progress: crate::progress::SweepProgress,
    first_start: Option<Instant>,
    ends: Vec<f64>,
    cooldown: Duration,
}

impl lx_client::traffic::Observer for Trials {
    fn done(&mut self, r: &lx_client::records::RequestRecord) {
        self.progress.done(r);
    }
}

impl SweepObserver for Trials {
    fn loaded(&mut self, backend: &str, info: &lx_engine::backend::BackendInfo, load_ms: f64) {
        self.progress.loaded(backend, info, load_ms);
    }
    fn point_started(&mut self, _index: usize, _total: usize, _backend: &str, _policy: Policy, _spec: &PointSpec) {
        self.first_start.get_or_insert_with(Instant::now);
    }
    fn point_done(&mut self, point: &PointResult) {
        self.progress.point_done(point);
        self.ends.push(self.first_start.map_or(0.0, |s| s.elapsed().as_secs_f64()));
        if !self.cooldown.is_zero() {
            std::thread::sleep(self.cooldown);
        }
    }
}

/// `shape` kept on `backend` for `asked` seconds, one point per trial.
fn sustained(args: &BenchArgs, model: &Arc<OpenModel>, backend: &str, shape: &Shape, asked: f64, user: &RunControl) -> anyhow::Result<Sustained> {
    let trials = ((asked / (args.trial + args.cooldown)).ceil() as usize).max(1);
    let one = Suite { name: SuiteName::Quick, shapes: vec![shape.clone()], repetitions: trials, bound_s: asked };
    let mut plan = plan(args, backend, &one);
    plan.duration_s = Some(args.trial);
    let mut points = suite_points(&plan, &one);
    for (i, p) in points.iter_mut().enumerate() {
        // Requests until the trial's window is over; only the first trial warms up.
        p.spec.requests = usize::MAX;
        p.spec.warmup = if i == 0 { shape.warmup } else { 0 };
    }
    let usage = if args.untuned { lx_local::profile::Use::Untuned } else { lx_local::profile::Use::Measure };
    let mut job = SweepJob::new(model.clone(), plan, vec!["lx".into(), "bench".into(), "--sustained".into()], lx_local::spawner(usage, 0))?;
    job.control = user.clone();
    let mut observer = Trials { progress: crate::progress::SweepProgress::new(0), first_start: None, ends: Vec::new(), cooldown: Duration::from_secs_f64(args.cooldown) };
    let (run, failed) = job.run_points(points, &mut Silent, &mut observer);
    observer.progress.finish();
    failed?;
    let ok: Vec<(&PointResult, f64)> = run.points.iter().zip(&observer.ends).filter(|(p, _)| p.requests > 0 && p.errors == 0).map(|(p, &e)| (p, e)).collect();
    let trials: Vec<Trial> = ok.iter().map(|(p, end)| Trial::of(p, *end)).collect();
    let sensors = ok.iter().find_map(|(p, _)| p.sensors.as_ref());
    let read = sensors.map(|s| s.sources.clone()).unwrap_or_default();
    let mut missing = sensors.map(|s| s.not_available.clone()).unwrap_or_default();
    if read.is_empty() {
        missing.insert(0, "this machine reads none of the sensors (clock, power, temperature): the rate over time is all there is".into());
    }
    Ok(Sustained::of(backend, shape.clone(), asked, args.trial, args.cooldown, trials, read, missing))
}
