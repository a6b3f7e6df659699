//! Live mode on the real default model, through worker processes hosted by the app binary
//! itself (`latency-explorer worker --backend llama`), without a window: settings changes
//! reach the next requests, a longer prompt takes longer to its first token, a killed
//! worker is reported and a retry recovers. Needs the default model (scripts/app-setup
//! fetches it on first start, or `lx models fetch default`); it fails, never skips, without.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lx_local::model::OpenModel;
use lx_worker::child::WorkerCommand;
use lx_worker::spawn::process_spawner;
use lx_run::live::{BackendState, LiveEvent, LiveSession, LiveSettings};

type Log = Arc<Mutex<Vec<LiveEvent>>>;

/// The long prompt: 31 times the short one, and with 8 output tokens still within the
/// first load's 1024-token slots. */
const LONG: u32 = 1000;

fn wait_for<T>(log: &Log, what: &str, timeout: Duration, mut f: impl FnMut(&[LiveEvent]) -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f(&log.lock().unwrap()) {
            return v;
        }
        if Instant::now() > end {
            let events = log.lock().unwrap();
            let tail: Vec<_> = events.iter().rev().take(10).collect();
            panic!("timed out waiting for {what}; last events: {tail:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn settled(events: &[LiveEvent], prompt: u32) -> usize {
    events.iter().filter(|e| matches!(e, LiveEvent::RequestDone { settled: true, prompt_tokens, .. } if *prompt_tokens == prompt)).count()
}

#[test]
fn live_mode_on_the_default_model() {
    let model = OpenModel::open("default", &mut |_| {}).expect("the default model must be present or fetchable (run scripts/app-setup)");
    // What the app's live command gives a session.
    let live_model = model.live_model(None);
    // The app binary hosts the workers, as it does when the app runs.
    let exe = env!("CARGO_BIN_EXE_latency-explorer");
    let spawner = process_spawner(
        move |backend: &str| WorkerCommand { program: exe.into(), ..lx_local::worker_command(backend) },
        Duration::from_secs(300),
    );
    let log: Log = Arc::default();
    let sink_log = Arc::clone(&log);
    let settings = LiveSettings { prompt_tokens: 32, max_tokens: 8, concurrency: 1, ..Default::default() };
    let session = LiveSession::start(settings.clone().check(live_model.context_length).unwrap(), live_model, spawner, Box::new(move |batch| sink_log.lock().unwrap().extend(batch))).unwrap();

    let device = wait_for(&log, "llama.cpp to load", Duration::from_secs(300), |ev| {
        ev.iter().find_map(|e| match e {
            LiveEvent::BackendStatus { state: BackendState::Ready, info: Some(info), .. } => Some(info.device.clone()),
            _ => None,
        })
    });
    eprintln!("llama.cpp on {device}");
    wait_for(&log, "3 settled requests at 32 tokens", Duration::from_secs(300), |ev| (settled(ev, 32) >= 3).then_some(()));

    // The preview streams decoded text.
    let text: String = log.lock().unwrap().iter().filter_map(|e| match e {
        LiveEvent::PreviewTokens { pieces, .. } => Some(pieces.concat()),
        _ => None,
    }).collect();
    assert!(!text.trim().is_empty(), "the preview streamed no text");

    // A longer prompt, without a restart: the next requests use it.
    session.update(LiveSettings { prompt_tokens: LONG, ..settings.clone() }).unwrap();
    wait_for(&log, "4 settled requests at the long prompt", Duration::from_secs(900), |ev| (settled(ev, LONG) >= 4).then_some(()));
    let results = session.results().unwrap();
    let ttft = |p: u32| results.iter().find(|r| r.prompt_tokens == p).map(|r| r.ttft_ms).expect("a point per prompt length");
    let (short, long) = (ttft(32), ttft(LONG));
    eprintln!("TTFT p50 / min: {:.1} / {:.1} ms at 32 tokens, {:.1} / {:.1} ms at {LONG} tokens", short.p50, short.min, long.p50, long.min);
    // The fastest of each: on a shared machine the medians of a few requests can be noisy,
    // but no request with 31 times the prompt beats the fastest short one.
    assert!(long.min > short.min, "TTFT at {LONG} tokens ({:.1} ms) should exceed TTFT at 32 ({:.1} ms)", long.min, short.min);
    let loads = log.lock().unwrap().iter().filter(|e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Loading, .. })).count();
    assert_eq!(loads, 1, "{LONG} + 8 tokens fit the first load (1024-token slots): no reload expected");

    // Kill the worker: the crash is reported with its signal, and a retry recovers.
    let pid = wait_for(&log, "the worker pid", Duration::from_secs(30), |ev| {
        ev.iter().rev().find_map(|e| match e {
            LiveEvent::BackendStatus { state: BackendState::Measuring, pid: Some(pid), .. } => Some(*pid),
            _ => None,
        })
    });
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let reason = wait_for(&log, "the crash report", Duration::from_secs(60), |ev| {
        ev.iter().find_map(|e| match e {
            LiveEvent::WorkerCrashed { reason, .. } => Some(reason.clone()),
            _ => None,
        })
    });
    assert!(reason.contains("signal 9"), "{reason}");
    wait_for(&log, "live mode to pause", Duration::from_secs(30), |ev| ev.iter().any(|e| matches!(e, LiveEvent::Paused { .. })).then_some(()));
    let before = settled(&log.lock().unwrap(), LONG);
    session.retry().unwrap();
    wait_for(&log, "requests after the retry", Duration::from_secs(600), |ev| (settled(ev, LONG) >= before + 2).then_some(()));
    let new_pid = log.lock().unwrap().iter().rev().find_map(|e| match e {
        LiveEvent::BackendStatus { state: BackendState::Measuring, pid: Some(p), .. } => Some(*p),
        _ => None,
    });
    assert_ne!(new_pid, Some(pid));

    let results = session.stop();
    assert!(results.iter().all(|r| r.errors == 0 && r.throughput_tps > 0.0), "{:?}", results.iter().map(|r| (r.prompt_tokens, r.errors, r.throughput_tps)).collect::<Vec<_>>());
    assert!(matches!(log.lock().unwrap().last(), Some(LiveEvent::Stopped { .. })));
}
