//! The session thread: a `Session` owns one worker per selected backend and runs the loop
//! that takes commands from the handle, drives the backend being measured, and reports.
//! This file holds its state, the loop and the commands; the parts of one turn of the loop
//! sit beside it: `rotation` (which backend runs, and its worker's life), `requests` (the
//! closed loop of clients), `accounting` (which requests count, and the figures reported).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use crate::live::{
    BackendState, Control, EventBatcher, EventSink, LiveEvent, LiveModel, LiveSettings, SettingKey,
    LOOP_TICK,
};
use lx_client::client::Clients;
use lx_client::target::Spawner;

mod accounting;
mod requests;
mod rotation;
mod sensing;

use accounting::{SettingStats, Stint};
use requests::LiveRequest;
use rotation::{Phase, LiveBackend};
use sensing::Sensing;

pub(super) struct Session {
    settings: LiveSettings,
    model: LiveModel,
    spawner: Spawner,
    sink: EventSink,
    rx: Receiver<Control>,
    t0: Instant,
    slots: Vec<LiveBackend>,
    phase: Phase,
    /// Round-robin position: the slot measured last.
    last_slot: Option<usize>,
    /// Stay on this slot at the next choice (reload).
    prefer: Option<usize>,
    /// The requests in flight on the backend being measured.
    clients: Clients<LiveRequest>,
    next_id: u64,
    sent: usize,
    /// Raised by every change of setting, backend or worker: requests of an older
    /// generation no longer count.
    generation: u64,
    first_after_load: bool,
    want_preview: bool,
    stats: HashMap<SettingKey, SettingStats>,
    /// Backends that turned out to be servers scheduling requests themselves: their
    /// results say so, since our policy settings did not apply.
    servers: HashSet<String>,
    dirty: Vec<SettingKey>,
    stint: Option<Stint>,
    recent_tokens: VecDeque<Instant>,
    last_tick: Instant,
    batcher: EventBatcher,
    paused_reported: bool,
    /// This machine's sensors, read on their own thread (from `run`).
    sensing: Option<Sensing>,
}

impl Session {
    pub(super) fn new(settings: LiveSettings, model: LiveModel, spawner: Spawner, sink: EventSink, rx: Receiver<Control>) -> Self {
        let slots = settings
            .backends
            .iter()
            .map(|b| LiveBackend { name: b.clone(), endpoint: None, capacity: None, failed: None })
            .collect();
        let batcher = EventBatcher::new(Duration::from_millis(settings.batch_ms));
        let now = Instant::now();
        Self {
            settings,
            model,
            spawner,
            sink,
            rx,
            t0: now,
            slots,
            phase: Phase::Choose,
            last_slot: None,
            prefer: None,
            clients: Clients::default(),
            next_id: 1,
            sent: 0,
            generation: 0,
            first_after_load: true,
            servers: HashSet::new(),
            want_preview: true,
            stats: HashMap::new(),
            dirty: Vec::new(),
            stint: None,
            recent_tokens: VecDeque::new(),
            last_tick: now,
            batcher,
            paused_reported: false,
            sensing: None,
        }
    }

    fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.t0).as_secs_f64() * 1e3
    }

    fn now_ms(&self) -> f64 {
        self.ms(Instant::now())
    }

    fn emit(&mut self, event: LiveEvent) {
        self.batcher.push(event);
    }

    pub(super) fn run(mut self) {
        let at_ms = self.now_ms();
        self.emit(LiveEvent::SettingsApplied { settings: self.settings.clone(), key_ids: self.settings.key_ids(), at_ms });
        let (sensing, opened) = Sensing::start();
        self.sensing = Some(sensing);
        self.emit(opened);
        loop {
            if !self.commands() {
                break;
            }
            self.drive();
            self.housekeeping();
        }
        self.shutdown();
    }

    /// Handle every waiting command; false on Stop (or when the handle is gone).
    fn commands(&mut self) -> bool {
        // Block briefly only when there is nothing to receive from a worker.
        let idle = matches!(self.phase, Phase::Paused | Phase::Loading { .. });
        let first = if idle {
            match self.rx.recv_timeout(LOOP_TICK) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        } else {
            match self.rx.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return false,
            }
        };
        let mut next = first;
        while let Some(cmd) = next {
            match cmd {
                Control::Stop => return false,
                Control::Update(s) => self.apply(s),
                Control::Retry => self.retry(),
                Control::Preview => self.want_preview = true,
                Control::Results(reply) => {
                    let _ = reply.send(self.results());
                }
            }
            next = self.rx.try_recv().ok();
        }
        true
    }

    /// New settings, checked where they entered ([`super::LiveSession::update`]).
    fn apply(&mut self, new: super::Checked) {
        let old = std::mem::replace(&mut self.settings, new.into_settings());
        self.batcher.set_interval(Duration::from_millis(self.settings.batch_ms));
        // The backend selection: keep the workers of backends still selected, in the new order.
        if old.backends != self.settings.backends {
            let active = self.active_slot().map(|i| self.slots[i].name.clone());
            let mut old_slots: Vec<LiveBackend> = std::mem::take(&mut self.slots);
            for name in self.settings.backends.clone() {
                let slot = match old_slots.iter().position(|s| s.name == name) {
                    Some(i) => old_slots.swap_remove(i),
                    None => LiveBackend { name, endpoint: None, capacity: None, failed: None },
                };
                self.slots.push(slot);
            }
            for removed in old_slots {
                let at_ms = self.now_ms();
                self.emit(status(&removed.name, BackendState::Stopped, at_ms));
                drop(removed); // shuts its worker down
            }
            let still = active.as_ref().and_then(|n| self.slots.iter().position(|s| &s.name == n));
            match (&mut self.phase, still) {
                (Phase::Measuring { slot, .. } | Phase::Draining { slot }, Some(i)) => *slot = i,
                (Phase::Loading { slot, .. }, Some(i)) => *slot = i,
                (Phase::Paused, _) => self.phase = Phase::Choose,
                (_, None) if active.is_some() => {
                    // The active backend was removed: its requests go with its worker.
                    self.cancel_in_flight("its backend was deselected");
                    self.phase = Phase::Choose;
                }
                _ => {}
            }
            self.last_slot = still;
            self.prefer = None;
        }
        if old.key("") != self.settings.key("") {
            self.new_generation();
        }
        // The policy and limits go to the worker now; prompts and lengths apply at the next submit.
        if let Some(i) = self.active_slot() {
            if let Some(cap) = self.slots[i].capacity {
                if cap.fits(&self.settings) {
                    let config = self.settings.scheduler(&cap);
                    if let Some(ep) = self.slots[i].endpoint.as_mut() {
                        if let Err(e) = ep.configure(&config) {
                            self.crashed(i, e.to_string());
                        }
                    }
                }
            }
        }
        let at_ms = self.now_ms();
        self.emit(LiveEvent::SettingsApplied { settings: self.settings.clone(), key_ids: self.settings.key_ids(), at_ms });
    }

    fn retry(&mut self) {
        for i in 0..self.slots.len() {
            if self.slots[i].failed.take().is_some() {
                let at_ms = self.now_ms();
                let name = self.slots[i].name.clone();
                self.emit(status(&name, BackendState::Stopped, at_ms));
            }
        }
        if matches!(self.phase, Phase::Paused) {
            self.phase = Phase::Choose;
        }
        self.paused_reported = false;
    }

    fn shutdown(&mut self) {
        self.cancel_in_flight("live mode stopped");
        self.close_stint();
        for i in 0..self.slots.len() {
            if let Some(ep) = self.slots[i].endpoint.as_mut() {
                ep.close();
            }
        }
        let names: Vec<String> = self.slots.iter().map(|s| s.name.clone()).collect();
        self.slots.clear(); // waits for each worker to exit
        let at_ms = self.now_ms();
        for name in names {
            self.emit(status(&name, BackendState::Stopped, at_ms));
        }
        self.emit(LiveEvent::Stopped { at_ms });
        if let Some(batch) = self.batcher.flush_all() {
            (self.sink)(batch);
        }
    }
}

fn status(backend: &str, state: BackendState, at_ms: f64) -> LiveEvent {
    LiveEvent::BackendStatus { backend: backend.into(), state, info: None, load_ms: None, pid: None, capacity: None, message: None, at_ms }
}
