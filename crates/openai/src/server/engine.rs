//! The server's side of the engine: one thread owns the target (our worker process), takes
//! requests from the HTTP handlers, and routes each request's events back to its handler.
//! A worker that dies fails the requests it held and is started afresh for the next one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::TokenId;
use lx_client::target::TargetError;
use lx_client::protocol::Reply;
use lx_engine::scheduler::{FinishReason, SchedEvent, WorkRequest};
use lx_client::target::Target;
use tokio::sync::mpsc::UnboundedSender;

use super::metrics::Metrics;

/// What a handler hears about its request.
#[derive(Debug)]
pub enum Event {
    Token(TokenId),
    Finished(FinishReason),
    Failed(String),
}

enum Cmd {
    Submit { request: WorkRequest, events: UnboundedSender<Event> },
    Cancel(u64),
}

/// Starts the target, again after it died.
pub type Start = Box<dyn Fn() -> Result<Box<dyn Target>, TargetError> + Send>;

/// The handle the HTTP side holds.
pub struct Engine {
    tx: std::sync::Mutex<Sender<Cmd>>,
    next_id: AtomicU64,
    pub metrics: Arc<Metrics>,
}

impl Engine {
    /// Run `target` on a thread of its own; `start` replaces it if it dies.
    pub fn spawn(target: Box<dyn Target>, start: Start) -> Arc<Engine> {
        let (tx, rx) = mpsc::channel();
        let metrics = Arc::new(Metrics::default());
        let m = Arc::clone(&metrics);
        std::thread::Builder::new()
            .name("lx-serve-engine".into())
            .spawn(move || run(Some(target), start, rx, &m))
            .expect("cannot start the engine thread");
        Arc::new(Engine { tx: std::sync::Mutex::new(tx), next_id: AtomicU64::new(1), metrics })
    }

    /// Queue a request (its id is assigned here); its events go to `events`.
    pub fn submit(&self, mut request: WorkRequest, events: UnboundedSender<Event>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request.id = id;
        self.send(Cmd::Submit { request, events });
        id
    }

    /// End a request early (its client went away). Harmless once it has ended.
    pub fn cancel(&self, id: u64) {
        self.send(Cmd::Cancel(id));
    }

    fn send(&self, cmd: Cmd) {
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(cmd);
    }
}

struct Flight {
    events: UnboundedSender<Event>,
    submitted: Instant,
    admitted: bool,
    last_token: Option<Instant>,
}

/// While requests run, how long the loop waits for the worker before it looks for new
/// requests again: the most a request waits to be handed to the worker.
const TICK: Duration = Duration::from_millis(1);

fn run(mut target: Option<Box<dyn Target>>, start: Start, rx: Receiver<Cmd>, metrics: &Metrics) {
    let mut flights: HashMap<u64, Flight> = HashMap::new();
    loop {
        // Idle: sleep until a request comes (no wake-ups to steal the worker's cores).
        let mut next = if flights.is_empty() { rx.recv().map_err(|_| TryRecvError::Disconnected) } else { rx.try_recv() };
        loop {
            match next {
                Ok(Cmd::Submit { request, events }) => {
                    // A worker that died while idle is replaced before it is given work.
                    if target.as_mut().is_some_and(|t| t.is_gone()) {
                        target = None;
                    }
                    if target.is_none() {
                        match start() {
                            Ok(t) => target = Some(t),
                            Err(e) => {
                                metrics.failed.fetch_add(1, Ordering::Relaxed);
                                let _ = events.send(Event::Failed(format!("the worker could not be started: {e}")));
                                next = rx.try_recv();
                                continue;
                            }
                        }
                    }
                    let id = request.id;
                    metrics.queued.fetch_add(1, Ordering::Relaxed);
                    flights.insert(id, Flight { events, submitted: Instant::now(), admitted: false, last_token: None });
                    if let Err(e) = target.as_mut().expect("started above").submit(request) {
                        died(&mut target, &mut flights, metrics, e.to_string());
                    }
                }
                Ok(Cmd::Cancel(id)) => {
                    if flights.contains_key(&id) {
                        if let Some(t) = target.as_mut() {
                            t.cancel(id);
                        }
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
            next = rx.try_recv();
        }
        let Some(t) = target.as_mut() else {
            std::thread::sleep(TICK);
            continue;
        };
        match t.recv(TICK) {
            Ok(Some((at, Reply::Event(event)))) => route(&mut flights, metrics, at, event),
            Ok(_) => {}
            Err(e) => died(&mut target, &mut flights, metrics, e.to_string()),
        }
    }
}

fn route(flights: &mut HashMap<u64, Flight>, metrics: &Metrics, at: Instant, event: SchedEvent) {
    let id = match &event {
        SchedEvent::Admitted { id, .. } | SchedEvent::Token { id, .. } | SchedEvent::Finished { id, .. } | SchedEvent::Failed { id, .. } => *id,
        _ => return,
    };
    let Some(f) = flights.get_mut(&id) else { return };
    let admit = |f: &mut Flight| {
        if !f.admitted {
            f.admitted = true;
            metrics.queued.fetch_sub(1, Ordering::Relaxed);
            metrics.running.fetch_add(1, Ordering::Relaxed);
        }
    };
    match event {
        SchedEvent::Admitted { .. } => admit(f),
        SchedEvent::Token { token, .. } => {
            admit(f);
            match f.last_token {
                None => metrics.ttft(at.saturating_duration_since(f.submitted).as_secs_f64()),
                Some(last) => metrics.itl(at.saturating_duration_since(last).as_secs_f64()),
            }
            f.last_token = Some(at);
            let _ = f.events.send(Event::Token(token));
        }
        SchedEvent::Finished { reason, .. } => {
            let f = end(flights, id, metrics);
            let counter = if reason == FinishReason::Cancelled { &metrics.cancelled } else { &metrics.finished };
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = f.events.send(Event::Finished(reason));
        }
        SchedEvent::Failed { error, .. } => {
            let f = end(flights, id, metrics);
            metrics.failed.fetch_add(1, Ordering::Relaxed);
            let _ = f.events.send(Event::Failed(error));
        }
        _ => {}
    }
}

fn end(flights: &mut HashMap<u64, Flight>, id: u64, metrics: &Metrics) -> Flight {
    let f = flights.remove(&id).expect("looked up by the caller");
    let gauge = if f.admitted { &metrics.running } else { &metrics.queued };
    gauge.fetch_sub(1, Ordering::Relaxed);
    f
}

fn died(target: &mut Option<Box<dyn Target>>, flights: &mut HashMap<u64, Flight>, metrics: &Metrics, why: String) {
    if let Some(mut t) = target.take() {
        t.kill();
    }
    let ids: Vec<u64> = flights.keys().copied().collect();
    for id in ids {
        let f = end(flights, id, metrics);
        metrics.failed.fetch_add(1, Ordering::Relaxed);
        let _ = f.events.send(Event::Failed(format!("{why}; the next request starts a fresh worker")));
    }
}
