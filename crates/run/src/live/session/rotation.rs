//! Which backend is measured, in turn, and the life of its worker: loading (on a helper
//! thread, so the loop keeps taking commands), measuring, handing over, and crashing.

use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use super::Session;
use crate::live::{BackendState, Capacity, LiveEvent};
use lx_client::target::Target;

/// One backend taking its turn in live mode, and its worker once loaded (not a KV lane:
/// that is [`lx_engine::backend::Slot`]).
pub(super) struct LiveBackend {
    pub(super) name: String,
    pub(super) endpoint: Option<Box<dyn Target>>,
    pub(super) capacity: Option<Capacity>,
    pub(super) failed: Option<String>,
}

pub(super) enum Phase {
    /// Pick the backend to measure next.
    Choose,
    /// Its worker is loading on a helper thread.
    Loading { slot: usize, capacity: Capacity, done: Receiver<Result<Box<dyn Target>, String>> },
    /// Submitting and receiving.
    Measuring { slot: usize, since: Instant, completed: usize },
    /// Waiting for the requests in flight to finish before handing over.
    Draining { slot: usize },
    /// Every backend failed: waiting for a retry.
    Paused,
}

impl Session {
    pub(super) fn active_slot(&self) -> Option<usize> {
        match self.phase {
            Phase::Measuring { slot, .. } | Phase::Draining { slot } | Phase::Loading { slot, .. } => Some(slot),
            _ => None,
        }
    }

    pub(super) fn drive(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Paused) {
            Phase::Choose => self.choose(),
            Phase::Loading { slot, capacity, done } => match done.try_recv() {
                Ok(result) => self.loaded(slot, capacity, result),
                Err(TryRecvError::Empty) => self.phase = Phase::Loading { slot, capacity, done },
                Err(TryRecvError::Disconnected) => self.loaded(slot, capacity, Err("the worker loader thread died".into())),
            },
            Phase::Measuring { slot, since, completed } => {
                self.phase = Phase::Measuring { slot, since, completed };
                self.measure(slot);
            }
            Phase::Draining { slot } => {
                self.phase = Phase::Draining { slot };
                if self.clients.is_empty() {
                    self.last_slot = Some(slot);
                    self.set_state(slot, BackendState::Ready);
                    self.phase = Phase::Choose;
                } else {
                    self.measure(slot);
                }
            }
            Phase::Paused => {
                self.phase = Phase::Paused;
                if !self.paused_reported {
                    self.paused_reported = true;
                    let reason = self
                        .slots
                        .iter()
                        .filter_map(|s| s.failed.as_ref().map(|f| format!("{}: {f}", s.name)))
                        .collect::<Vec<_>>()
                        .join("; ");
                    let at_ms = self.now_ms();
                    self.emit(LiveEvent::Paused { reason, at_ms });
                }
            }
        }
    }

    fn choose(&mut self) {
        let n = self.slots.len();
        let start = match (self.prefer.take(), self.last_slot) {
            (Some(p), _) if p < n => p,
            (_, Some(l)) => (l + 1) % n.max(1),
            _ => 0,
        };
        let Some(i) = (0..n).map(|k| (start + k) % n).find(|&i| self.slots[i].failed.is_none()) else {
            self.phase = Phase::Paused;
            return;
        };
        self.paused_reported = false;
        let fits = self.slots[i].endpoint.is_some() && self.slots[i].capacity.is_some_and(|c| c.fits(&self.settings));
        if fits {
            let cap = self.slots[i].capacity.expect("checked");
            let config = self.settings.scheduler(&cap);
            if let Err(e) = self.slots[i].endpoint.as_mut().expect("checked").configure(&config) {
                self.crashed(i, e.to_string());
                return;
            }
            self.begin_measuring(i);
            return;
        }
        // Load (or reload with room for the new setting). The old worker goes first, so two
        // models never share the machine.
        let mut capacity = Capacity::for_settings(&self.settings, self.slots[i].capacity.as_ref(), self.model.context_length);
        capacity.kv_cache_bytes = (self.model.kv_bytes_f16)(capacity.ctx_per_slot).map(|f16| (capacity.slots as f64 * f16 as f64 * capacity.kv.of_f16()) as u64);
        if let Some(old) = self.slots[i].endpoint.take() {
            drop(old);
        }
        self.slots[i].capacity = None;
        let mut spec = capacity.load_spec(&self.model.model_path);
        let config = self.settings.scheduler(&capacity);
        let spawner = Arc::clone(&self.spawner);
        let draft_model = Arc::clone(&self.model.draft_model);
        let name = self.slots[i].name.clone();
        let (tx, done) = mpsc::channel();
        let spawned = std::thread::Builder::new().name(format!("lx-load-{name}")).spawn(move || {
            let loaded = (|| {
                if capacity.draft {
                    spec.draft_model = Some(draft_model()?);
                }
                spawner(&name, &spec, &config).map_err(|e| e.to_string())
            })();
            let _ = tx.send(loaded);
        });
        let at_ms = self.now_ms();
        let message = format!("loading for {} sequences × {} tokens", capacity.slots, capacity.ctx_per_slot);
        let name = self.slots[i].name.clone();
        self.emit(LiveEvent::BackendStatus {
            backend: name,
            state: BackendState::Loading,
            info: None,
            load_ms: None,
            pid: None,
            capacity: Some(capacity),
            message: Some(message),
            at_ms,
        });
        match spawned {
            Ok(_) => self.phase = Phase::Loading { slot: i, capacity, done },
            Err(e) => self.loaded(i, capacity, Err(format!("cannot start a loader thread: {e}"))),
        }
    }

    fn loaded(&mut self, i: usize, capacity: Capacity, result: Result<Box<dyn Target>, String>) {
        let at_ms = self.now_ms();
        let name = self.slots[i].name.clone();
        match result {
            Ok(ep) => {
                if ep.schedules_itself() {
                    self.servers.insert(name.clone());
                }
                self.emit(LiveEvent::BackendStatus {
                    backend: name,
                    state: BackendState::Ready,
                    info: Some(ep.info().clone()),
                    load_ms: Some(ep.load_ms()),
                    pid: ep.pid(),
                    capacity: Some(capacity),
                    message: None,
                    at_ms,
                });
                self.slots[i].endpoint = Some(ep);
                self.slots[i].capacity = Some(capacity);
                self.first_after_load = true;
                // Settings may have moved on while it loaded: choose again (it fits or reloads).
                self.prefer = Some(i);
                self.phase = Phase::Choose;
            }
            Err(message) => {
                self.slots[i].failed = Some(message.clone());
                self.emit(LiveEvent::BackendStatus {
                    backend: name,
                    state: BackendState::Error,
                    info: None,
                    load_ms: None,
                    pid: None,
                    capacity: None,
                    message: Some(message),
                    at_ms,
                });
                self.last_slot = Some(i);
                self.phase = Phase::Choose;
            }
        }
    }

    fn begin_measuring(&mut self, i: usize) {
        self.new_generation();
        self.recent_tokens.clear();
        self.set_state(i, BackendState::Measuring);
        self.phase = Phase::Measuring { slot: i, since: Instant::now(), completed: 0 };
    }

    fn set_state(&mut self, i: usize, state: BackendState) {
        let at_ms = self.now_ms();
        let s = &self.slots[i];
        let event = LiveEvent::BackendStatus {
            backend: s.name.clone(),
            state,
            info: s.endpoint.as_ref().map(|e| e.info().clone()),
            load_ms: s.endpoint.as_ref().map(|e| e.load_ms()),
            pid: s.endpoint.as_ref().and_then(|e| e.pid()),
            capacity: s.capacity,
            message: None,
            at_ms,
        };
        self.emit(event);
    }

    pub(super) fn crashed(&mut self, i: usize, reason: String) {
        let pid = self.slots[i].endpoint.as_ref().and_then(|e| e.pid());
        let name = self.slots[i].name.clone();
        let at_ms = self.now_ms();
        self.emit(LiveEvent::WorkerCrashed { backend: name.clone(), reason: reason.clone(), pid, at_ms });
        for f in self.clients.end_all(None, &format!("worker {name}: {reason}")) {
            self.finish(f);
        }
        if let Some(mut ep) = self.slots[i].endpoint.take() {
            ep.kill();
        }
        self.slots[i].capacity = None;
        self.slots[i].failed = Some(reason.clone());
        self.emit(LiveEvent::BackendStatus {
            backend: name,
            state: BackendState::Error,
            info: None,
            load_ms: None,
            pid,
            capacity: None,
            message: Some(reason),
            at_ms,
        });
        self.new_generation();
        self.last_slot = Some(i);
        self.phase = Phase::Choose;
    }
}
