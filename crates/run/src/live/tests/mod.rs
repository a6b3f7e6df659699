//! Unit tests of live mode: the pure pieces (settings, capacity, batching, the event
//! format), then whole sessions over fake workers.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{BackendState, Capacity, EventBatcher, EventSink, LiveError, LiveEvent, LiveSession, LiveSettings};
use lx_engine::scheduler::Policy;
use lx_engine::speculative::{Drafter, Speculation};

mod fake;

use fake::{fakes, model};

/// `settings` checked against the fake model's context, as a front end hands them over.
fn checked(settings: LiveSettings) -> super::Checked {
    settings.check(model().context_length).unwrap()
}

/// Collects every event with its arrival time.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(Instant, LiveEvent)>>>, Arc<Mutex<Vec<(Instant, usize)>>>);

impl Log {
    fn sink(&self) -> EventSink {
        let (events, batches) = (self.0.clone(), self.1.clone());
        Box::new(move |batch: Vec<LiveEvent>| {
            let now = Instant::now();
            batches.lock().unwrap().push((now, batch.len()));
            events.lock().unwrap().extend(batch.into_iter().map(|e| (now, e)));
        })
    }
    fn events(&self) -> Vec<LiveEvent> {
        self.0.lock().unwrap().iter().map(|(_, e)| e.clone()).collect()
    }
    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&LiveEvent) -> bool) -> LiveEvent {
        let end = Instant::now() + timeout;
        loop {
            if let Some((_, e)) = self.0.lock().unwrap().iter().find(|(_, e)| pred(e)) {
                return e.clone();
            }
            assert!(Instant::now() < end, "timed out waiting for {what}; events: {:#?}", self.events().iter().rev().take(12).collect::<Vec<_>>());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    fn count(&self, pred: impl Fn(&LiveEvent) -> bool) -> usize {
        self.0.lock().unwrap().iter().filter(|(_, e)| pred(e)).count()
    }
}

fn done_settled(prompt: u32) -> impl Fn(&LiveEvent) -> bool {
    move |e| matches!(e, LiveEvent::RequestDone { settled: true, prompt_tokens, .. } if *prompt_tokens == prompt)
}

// -- pure pieces -------------------------------------------------------------------------

#[test]
fn settings_are_checked_against_the_context() {
    let s = LiveSettings::default();
    assert!(s.validate(2048).is_ok());
    let too_long = LiveSettings { prompt_tokens: 2000, ..s.clone() }.validate(2048).unwrap_err();
    assert_eq!((too_long.field, too_long.why.as_str()), ("prompt_tokens", "prompt tokens + output tokens = 2064 exceeds the model's context of 2048 tokens"));
    assert_eq!(LiveSettings { concurrency: 0, ..s.clone() }.validate(2048).unwrap_err().field, "concurrency");
    assert_eq!(LiveSettings { backends: vec![], ..s.clone() }.validate(2048).unwrap_err().field, "backends");
    assert_eq!(LiveSettings { max_tokens: 0, ..s }.validate(2048).unwrap_err().field, "max_tokens");
}

#[test]
fn settings_come_from_partial_camel_case_json() {
    let s: LiveSettings = serde_json::from_str(r#"{"prompt_tokens": 512, "concurrency": 4, "policy": "chunked"}"#).unwrap();
    assert_eq!((s.prompt_tokens, s.concurrency, s.policy), (512, 4, Policy::Chunked));
    assert_eq!(s.max_tokens, LiveSettings::default().max_tokens);
}

#[test]
fn capacity_grows_in_powers_of_two_and_never_shrinks() {
    let s = LiveSettings { prompt_tokens: 100, max_tokens: 64, concurrency: 3, ..Default::default() };
    let c = Capacity::for_settings(&s, None, 32768);
    assert_eq!((c.slots, c.ctx_per_slot), (4, 1024));
    assert!(c.fits(&s));
    let bigger = LiveSettings { prompt_tokens: 1500, concurrency: 5, ..s.clone() };
    assert_eq!(c.misfit(&bigger), Some("more clients"));
    assert_eq!(c.misfit(&LiveSettings { prompt_tokens: 1500, ..s.clone() }), Some("a larger context"));
    let c2 = Capacity::for_settings(&bigger, Some(&c), 32768);
    assert_eq!((c2.slots, c2.ctx_per_slot), (8, 2048));
    // Back down: the loaded capacity still fits, no reload.
    assert!(c2.fits(&s));
    assert_eq!(Capacity::for_settings(&s, Some(&c2), 32768).ctx_per_slot, 2048);
    // Never beyond the model's context.
    let long = LiveSettings { prompt_tokens: 30000, max_tokens: 700, ..s.clone() };
    assert_eq!(Capacity::for_settings(&long, None, 32768).ctx_per_slot, 32768);
    // A thread change needs a reload.
    assert!(!c2.fits(&LiveSettings { threads: 3, ..s.clone() }));
}

#[test]
fn a_draft_model_another_cache_type_or_two_workers_need_a_reload_and_a_draft_stays_loaded() {
    use lx_engine::backend::{KvType, KvTypes};
    let plain = LiveSettings::default();
    let c = Capacity::for_settings(&plain, None, 32768);
    let drafting = LiveSettings { spec: Speculation { drafter: Drafter::Draft, ..Speculation::default() }, ..plain.clone() };
    assert!(!c.draft && !c.fits(&drafting), "no draft model is loaded yet");
    let with_draft = Capacity::for_settings(&drafting, Some(&c), 32768);
    assert!(with_draft.draft && with_draft.fits(&drafting));
    // Back to plain decoding or prompt lookup: the draft stays loaded, no reload.
    assert!(with_draft.fits(&plain));
    assert!(Capacity::for_settings(&plain, Some(&with_draft), 32768).draft);
    let q8 = LiveSettings { kv: KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 }, ..plain.clone() };
    assert_eq!(c.misfit(&q8), Some("another KV cache type"));
    // Two workers, or one again: each is a reload, and says which.
    let split = LiveSettings { policy: lx_engine::scheduler::Policy::Disaggregated, ..plain.clone() };
    assert_eq!(c.misfit(&split), Some("a prefill worker and a decode worker"));
    let two = Capacity::for_settings(&split, Some(&c), 32768);
    assert!(two.disaggregated && two.fits(&split));
    assert_eq!(two.misfit(&plain), Some("one worker"));
    assert_eq!(Capacity::for_settings(&q8, Some(&c), 32768).kv, q8.kv);
    // Only llama.cpp takes them.
    let e = LiveSettings { backends: vec!["candle".into()], ..q8 }.validate(32768).unwrap_err();
    assert_eq!(e.field, "kv");
}

#[test]
fn scheduler_budget_matches_a_sweep_point_within_capacity() {
    let s = LiveSettings { prompt_tokens: 256, concurrency: 4, ..Default::default() };
    let cap = Capacity::for_settings(&s, None, 32768);
    assert_eq!(s.scheduler(&cap).max_batch_tokens, 1024);
    assert_eq!(s.scheduler(&cap).max_batch_seqs, 4);
    let tiny = LiveSettings { prompt_tokens: 16, concurrency: 1, ..Default::default() };
    assert_eq!(tiny.scheduler(&cap).max_batch_tokens, 512);
}

#[test]
fn batcher_merges_preview_pieces_and_keeps_the_latest_tick_and_summary() {
    let mut b = EventBatcher::new(Duration::from_millis(50));
    let t0 = Instant::now();
    let piece = |i: u32| LiveEvent::PreviewTokens { id: 7, first_index: i, pieces: vec![format!("p{i}")], at_ms: vec![i as f64], drafted: vec![i % 3 == 0] };
    for i in 0..100 {
        b.push(piece(i));
    }
    let tick = |at: f64| LiveEvent::Tick { at_ms: at, backend: "x".into(), throughput_tps: None, in_flight: 0, queued: 0, prefilling: 0, ttft_p50_ms: None, ttft_p95_ms: None };
    b.push(tick(1.0));
    b.push(tick(2.0));
    let first = b.flush_due(t0).expect("first flush is immediate");
    assert_eq!(first.len(), 2, "{first:?}");
    match &first[0] {
        LiveEvent::PreviewTokens { first_index: 0, pieces, at_ms, drafted, .. } => {
            assert_eq!(pieces.len(), 100);
            assert_eq!(pieces[99], "p99");
            assert_eq!(at_ms.len(), 100);
            assert_eq!((drafted.len(), drafted[99], drafted[98]), (100, true, false), "each token keeps its own mark");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(first[1], LiveEvent::Tick { at_ms, .. } if at_ms == 2.0));
    // Not due again before the interval.
    b.push(piece(100));
    assert!(b.flush_due(t0 + Duration::from_millis(10)).is_none());
    assert!(b.flush_due(t0 + Duration::from_millis(50)).is_some());
    // A gap in indices (another request, or a lost piece) is not merged.
    b.push(piece(101));
    b.push(piece(103));
    assert_eq!(b.len(), 2);
}

#[test]
fn batcher_rate_is_bounded_whatever_the_event_rate() {
    let mut b = EventBatcher::new(Duration::from_millis(50));
    let t0 = Instant::now();
    let mut batches = 0;
    // One simulated second, an event every 100 µs.
    for us in (0..1_000_000u64).step_by(100) {
        b.push(LiveEvent::Rejected { message: String::new() });
        if b.flush_due(t0 + Duration::from_micros(us)).is_some() {
            batches += 1;
        }
    }
    assert!((19..=21).contains(&batches), "{batches} batches in one second");
}

#[test]
fn events_serialise_tagged_with_their_fields_as_named() {
    let e = LiveEvent::RequestAdmitted { id: 3, at_ms: 1.5, queue_ms: 0.5 };
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v, serde_json::json!({"type": "requestAdmitted", "id": 3, "at_ms": 1.5, "queue_ms": 0.5}));
    let back: LiveEvent = serde_json::from_value(v).unwrap();
    assert_eq!(back, e);
}

// -- the session over fake workers -------------------------------------------------------

#[test]
fn keeps_n_clients_busy_and_reports_requests() {
    let (spawner, _f) = fakes(20, 2000);
    let log = Log::default();
    let settings = LiveSettings { prompt_tokens: 64, max_tokens: 8, concurrency: 3, ..Default::default() };
    let session = LiveSession::start(checked(settings), model(), spawner, log.sink()).unwrap();
    log.wait_for("ready", Duration::from_secs(5), |e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Ready, .. }));
    let done = log.wait_for("a settled request", Duration::from_secs(5), done_settled(64));
    match done {
        LiveEvent::RequestDone { ttft_ms: Some(ttft), decode_tps: Some(tps), output_tokens: 8, prefill, admit_at_ms: Some(_), .. } => {
            assert!(ttft > 0.0 && tps > 0.0);
            assert!(!prefill.is_empty());
        }
        other => panic!("{other:?}"),
    }
    log.wait_for("a summary", Duration::from_secs(5), |e| matches!(e, LiveEvent::Summary { summary, .. } if summary.throughput_tps > 0.0));
    log.wait_for("a tick", Duration::from_secs(5), |e| matches!(e, LiveEvent::Tick { in_flight: 3, .. }));
    // Exactly one preview stream, with one piece per token.
    let previews = log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. }));
    assert_eq!(previews, 1);
    let results = session.stop();
    assert_eq!(results.len(), 1);
    assert!(results[0].requests > 0 && results[0].throughput_tps > 0.0, "{:?}", results[0].ttft_ms);
    assert!(matches!(log.events().last(), Some(LiveEvent::Stopped { .. })));
    // Never more in flight than the concurrency.
    let mut open = std::collections::HashSet::new();
    let mut most = 0;
    for e in log.events() {
        match e {
            LiveEvent::RequestStarted { id, .. } => {
                open.insert(id);
            }
            LiveEvent::RequestDone { id, .. } => {
                open.remove(&id);
            }
            _ => {}
        }
        most = most.max(open.len());
    }
    assert_eq!(most, 3);
}

#[test]
fn the_machine_s_sensors_are_read_through_the_session_and_said_once() {
    let (spawner, _f) = fakes(20, 2000);
    let log = Log::default();
    let session = LiveSession::start(checked(LiveSettings { prompt_tokens: 64, max_tokens: 8, concurrency: 2, ..Default::default() }), model(), spawner, log.sink()).unwrap();
    log.wait_for("a settled request", Duration::from_secs(5), done_settled(64));
    let third = |e: &LiveEvent| matches!(e, LiveEvent::Sensors { .. });
    let end = Instant::now() + Duration::from_secs(5);
    while log.count(third) < 3 {
        assert!(Instant::now() < end, "fewer than 3 sensor readings in 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(session);
    let events = log.events();
    let opened: Vec<&LiveEvent> = events.iter().filter(|e| matches!(e, LiveEvent::SensorsOpened { .. })).collect();
    match opened.as_slice() {
        [LiveEvent::SensorsOpened { sources, not_available, every_ms }] => {
            assert_eq!(sources.len() + not_available.len(), 4, "{sources:?} {not_available:?}");
            assert_eq!(*every_ms, lx_machine::sensors::SAMPLE_EVERY.as_secs_f64() * 1e3);
        }
        other => panic!("one SensorsOpened expected: {other:?}"),
    }
    let times: Vec<f64> = events.iter().filter_map(|e| match e { LiveEvent::Sensors { at_ms, .. } => Some(*at_ms), _ => None }).collect();
    assert!(times.windows(2).all(|w| w[1] > w[0]) && times[0] >= 0.0, "{times:?}");
    let readings: Vec<&LiveEvent> = events.iter().filter(|e| third(e)).collect();
    for e in readings {
        let LiveEvent::Sensors { cpu_mhz, power_w, .. } = e else { unreachable!() };
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert!(cpu_mhz.is_some_and(|m| m > 0.0), "{e:?}");
        }
        // Power is a figure only where something gives it, and never negative.
        assert!(power_w.is_none_or(|w| w >= 0.0), "{e:?}");
    }
}

#[test]
fn a_settings_change_applies_to_the_next_requests_within_200_ms() {
    // Prefill 50 µs per token: a 1024-token prompt takes ~50 ms longer than a 64-token one.
    let (spawner, f) = fakes(50, 1000);
    let log = Log::default();
    // Short batches, so the arrival time at the sink is close to the submit time.
    let settings = LiveSettings { prompt_tokens: 64, max_tokens: 4, concurrency: 2, batch_ms: 20, ..Default::default() };
    let session = LiveSession::start(checked(settings.clone()), model(), spawner, log.sink()).unwrap();
    for _ in 0..3 {
        log.wait_for("settled requests at 64", Duration::from_secs(5), done_settled(64));
    }
    let loads_before = f.loads.load(Ordering::SeqCst);
    let changed = Instant::now();
    session.update(LiveSettings { prompt_tokens: 900, ..settings }).unwrap();
    // The first request with the new length is submitted within 200 ms of the change.
    let end = Instant::now() + Duration::from_secs(5);
    let started_at = loop {
        let found = log.0.lock().unwrap().iter().find_map(|(t, e)| matches!(e, LiveEvent::RequestStarted { prompt_tokens: 900, .. }).then_some(*t));
        if let Some(t) = found {
            break t;
        }
        assert!(Instant::now() < end, "no request with the new prompt length");
        std::thread::sleep(Duration::from_millis(1));
    };
    // (The event reaches the sink in the next batch, up to 20 ms after the submit.)
    assert!(started_at.duration_since(changed) < Duration::from_millis(200), "{:?}", started_at.duration_since(changed));
    log.wait_for("settled requests at 900", Duration::from_secs(5), done_settled(900));
    // Nothing was reloaded (900 + 4 fits the 1024-token slots) and nothing measured was lost.
    assert_eq!(f.loads.load(Ordering::SeqCst), loads_before);
    let results = session.stop();
    let ttft = |p: u32| results.iter().find(|r| r.prompt_tokens == p).map(|r| r.ttft_ms.p50).unwrap();
    assert!(ttft(900) > ttft(64), "TTFT at 900 ({}) should exceed TTFT at 64 ({})", ttft(900), ttft(64));
    assert_eq!(results.len(), 2);
}

#[test]
fn a_setting_beyond_the_loaded_context_reloads_and_carries_on() {
    let (spawner, f) = fakes(1, 500);
    let log = Log::default();
    let settings = LiveSettings { prompt_tokens: 64, max_tokens: 4, concurrency: 2, ..Default::default() };
    let session = LiveSession::start(checked(settings.clone()), model(), spawner, log.sink()).unwrap();
    log.wait_for("settled at 64", Duration::from_secs(5), done_settled(64));
    session.update(LiveSettings { prompt_tokens: 3000, concurrency: 6, ..settings }).unwrap();
    log.wait_for("settled at 3000", Duration::from_secs(5), done_settled(3000));
    assert_eq!(f.loads.load(Ordering::SeqCst), 2);
    let reload = log.events().into_iter().rev().find_map(|e| match e {
        LiveEvent::BackendStatus { state: BackendState::Ready, capacity: Some(c), .. } => Some(c),
        _ => None,
    }).unwrap();
    assert_eq!((reload.slots, reload.ctx_per_slot), (8, 4096));
    drop(session);
}

#[test]
fn invalid_updates_are_refused_and_change_nothing() {
    let (spawner, _f) = fakes(1, 500);
    let log = Log::default();
    let session = LiveSession::start(checked(LiveSettings::default()), model(), spawner, log.sink()).unwrap();
    let err = session.update(LiveSettings { prompt_tokens: 9000, ..Default::default() }).unwrap_err();
    assert!(matches!(&err, LiveError::Invalid(i) if i.field == "prompt_tokens" && i.why.contains("context")), "{err}");
    drop(session);
}

#[test]
fn a_crashed_worker_is_reported_and_retry_recovers() {
    let (spawner, f) = fakes(10, 1000);
    let log = Log::default();
    let settings = LiveSettings { prompt_tokens: 32, max_tokens: 16, concurrency: 2, ..Default::default() };
    let session = LiveSession::start(checked(settings), model(), spawner, log.sink()).unwrap();
    log.wait_for("settled", Duration::from_secs(5), done_settled(32));
    for c in f.crash.lock().unwrap().iter() {
        c.store(true, Ordering::SeqCst);
    }
    let crashed = log.wait_for("crash", Duration::from_secs(5), |e| matches!(e, LiveEvent::WorkerCrashed { .. }));
    assert!(matches!(crashed, LiveEvent::WorkerCrashed { ref reason, .. } if reason.contains("signal 9")), "{crashed:?}");
    log.wait_for("paused", Duration::from_secs(5), |e| matches!(e, LiveEvent::Paused { .. }));
    log.wait_for("failed requests", Duration::from_secs(5), |e| matches!(e, LiveEvent::RequestDone { error: Some(_), .. }));
    let before = log.count(done_settled(32));
    // Nothing runs while paused.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(log.count(done_settled(32)), before);
    session.retry().unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while log.count(done_settled(32)) <= before + 2 {
        assert!(Instant::now() < end, "no requests after retry");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(f.loads.load(Ordering::SeqCst), 2);
    drop(session);
}

#[test]
fn a_failed_load_is_reported_and_pauses() {
    let (spawner, f) = fakes(1, 500);
    f.fail_loads.store(true, Ordering::SeqCst);
    let log = Log::default();
    let session = LiveSession::start(checked(LiveSettings::default()), model(), spawner, log.sink()).unwrap();
    let e = log.wait_for("error", Duration::from_secs(5), |e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Error, .. }));
    assert!(matches!(e, LiveEvent::BackendStatus { message: Some(ref m), .. } if m.contains("test")));
    log.wait_for("paused", Duration::from_secs(5), |e| matches!(e, LiveEvent::Paused { .. }));
    f.fail_loads.store(false, Ordering::SeqCst);
    session.retry().unwrap();
    log.wait_for("settled after retry", Duration::from_secs(5), done_settled(LiveSettings::default().prompt_tokens));
    drop(session);
}

#[test]
fn several_backends_take_turns_and_never_overlap() {
    let (spawner, _f) = fakes(5, 1000);
    let log = Log::default();
    let settings = LiveSettings {
        backends: vec!["a".into(), "b".into()],
        prompt_tokens: 32,
        max_tokens: 8,
        concurrency: 2,
        rotate_after_s: 0.15,
        ..Default::default()
    };
    let session = LiveSession::start(checked(settings), model(), spawner, log.sink()).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let rotations = log.count(|e| matches!(e, LiveEvent::BackendStatus { state: BackendState::Measuring, .. }));
        if rotations >= 4 {
            break;
        }
        assert!(Instant::now() < end, "backends did not rotate");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(session);
    // Replay: a request never starts on one backend while another's is in flight.
    let mut open: HashMap<u64, String> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for e in log.events() {
        match e {
            LiveEvent::RequestStarted { id, backend, .. } => {
                assert!(open.values().all(|b| *b == backend), "{backend} started while {:?} ran", open);
                seen.insert(backend.clone());
                open.insert(id, backend);
            }
            LiveEvent::RequestDone { id, .. } => {
                open.remove(&id);
            }
            _ => {}
        }
    }
    assert_eq!(seen.len(), 2);
}

#[test]
fn the_sink_sees_at_most_about_ten_batches_a_second() {
    // Tiny requests: thousands of events a second.
    let (spawner, _f) = fakes(0, 100);
    let log = Log::default();
    let settings = LiveSettings { prompt_tokens: 8, max_tokens: 32, concurrency: 8, ..Default::default() };
    let session = LiveSession::start(checked(settings), model(), spawner, log.sink()).unwrap();
    log.wait_for("settled", Duration::from_secs(5), done_settled(8));
    let from = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let batches = log.1.lock().unwrap().iter().filter(|(t, _)| *t >= from).count();
    let events = log.0.lock().unwrap().iter().filter(|(t, _)| *t >= from).count();
    drop(session);
    assert!(batches <= 12, "{batches} batches in a second");
    assert!(events > batches * 5, "batching should carry several events each ({events} events in {batches} batches)");
}

#[test]
fn preview_streams_one_request_at_a_time_on_demand() {
    let (spawner, _f) = fakes(1, 1000);
    let log = Log::default();
    let settings = LiveSettings { prompt_tokens: 16, max_tokens: 10, concurrency: 3, ..Default::default() };
    let session = LiveSession::start(checked(settings), model(), spawner, log.sink()).unwrap();
    log.wait_for("settled", Duration::from_secs(5), done_settled(16));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. })), 1);
    session.next_preview().unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while log.count(|e| matches!(e, LiveEvent::RequestStarted { preview: true, .. })) < 2 {
        assert!(Instant::now() < end);
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(session);
    let (pieces, ids): (usize, std::collections::HashSet<u64>) = log.events().iter().fold((0, Default::default()), |(n, mut ids), e| {
        if let LiveEvent::PreviewTokens { id, pieces, .. } = e {
            ids.insert(*id);
            (n + pieces.len(), ids)
        } else {
            (n, ids)
        }
    });
    assert!(pieces >= 10 && ids.len() <= 2);
    let tail = log.events().into_iter().find_map(|e| match e {
        LiveEvent::RequestStarted { preview: true, prompt_tail, .. } => prompt_tail,
        _ => None,
    });
    assert_eq!(tail.map(|t| t.chars().count()), Some(16));
}
