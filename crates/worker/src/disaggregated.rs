//! Disaggregated prefill and decode: two worker processes behind one [`Target`].
//!
//! The prefill worker computes each prompt and its first token, saves the sequence's state
//! and hands it over ([`lx_engine::handoff`]); this target passes it to the decode worker, which
//! loads it into a slot and decodes everything it holds together, one pass per step. The
//! decoders never wait for a long prompt, since no prompt is computed where they run; the
//! price is the transfer, which every request's record carries, and the compute of one
//! machine split in two.
//!
//! Stamps from the two workers are mapped onto one clock here (the target's own), and their
//! passes are numbered in one sequence, so everything above sees one target. A worker that
//! dies fails the requests it held and no others; the next request that needs it starts a
//! new one.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};


use lx_engine::backend::{BackendInfo, LoadSpec};
use crate::child::WorkerCommand;
use crate::coordinator::Worker;
use lx_client::target::TargetError;
use lx_engine::handoff::{self, Route, TransferVia};
use lx_engine::split::Device;
use lx_client::protocol::Reply;
use lx_engine::scheduler::{Handoff, Policy, SchedEvent, SchedulerConfig, WorkRequest};
use lx_client::target::Target;

impl Disaggregated {
    /// The two workers' process ids (prefill, decode), where they run.
    pub fn pids(&self) -> [Option<u32>; 2] {
        [self.parts[0].worker.as_ref().map(Worker::pid), self.parts[1].worker.as_ref().map(Worker::pid)]
    }
}

/// Which worker holds a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Prefill,
    Decode,
}

/// One of the two workers and what this target needs to renumber its passes.
struct Part {
    stage: Stage,
    worker: Option<Worker>,
    spec: LoadSpec,
    /// Its current pass: (the worker's number, ours).
    step: (u64, u64),
}

/// A prefill worker and a decode worker as one target.
pub struct Disaggregated {
    command: WorkerCommand,
    config: SchedulerConfig,
    load_timeout: Duration,
    parts: [Part; 2],
    info: BackendInfo,
    load_ms: f64,
    /// Our clock's zero: every stamp passed up is nanoseconds since it.
    epoch: Instant,
    /// Requests in flight: where each is, and what it asked (the decode worker gets it again).
    requests: HashMap<u64, (Stage, WorkRequest)>,
    /// The pass (ours) that made each handed-over request's first token.
    first_step: HashMap<u64, u64>,
    steps: u64,
    /// Replies made here (failures of a dead worker's requests), sent before any other.
    pending: VecDeque<(Instant, Reply)>,
    route: Route,
    /// Where state files go (`file`), removed with the target.
    _files: Option<tempfile::TempDir>,
    /// Which worker `recv` listens to first, alternating so neither starves.
    turn: usize,
}

impl Disaggregated {
    /// Start both workers with `spec` loaded, each with its share of the threads and its
    /// device (`config.split`). `cores` is what a thread count of 0 means.
    pub fn spawn(command: &WorkerCommand, spec: &LoadSpec, config: &SchedulerConfig, load_timeout: Duration, cores: usize) -> Result<Disaggregated, TargetError> {
        let split = config.split;
        let threads = split.threads(spec.threads, cores);
        let files = match split.via {
            TransferVia::Pipe => None,
            TransferVia::File => Some(handoff::file_dir().map_err(|e| TargetError::Load(format!("cannot make a directory for the transferred states: {e}")))?),
        };
        let route = match &files {
            Some(dir) => Route::File { dir: dir.path().to_path_buf() },
            None => Route::Pipe,
        };
        let part = |stage, n, device: Device| Part {
            stage,
            worker: None,
            spec: LoadSpec { threads: n, gpu_layers: device.gpu_layers(spec.gpu_layers), ..spec.clone() },
            step: (0, 0),
        };
        let mut t = Disaggregated {
            command: command.clone(),
            config: config.clone(),
            load_timeout,
            parts: [part(Stage::Prefill, threads.0, split.prefill_device), part(Stage::Decode, threads.1, split.decode_device)],
            info: BackendInfo::default(),
            load_ms: 0.0,
            epoch: Instant::now(),
            requests: HashMap::new(),
            first_step: HashMap::new(),
            steps: 0,
            pending: VecDeque::new(),
            route,
            _files: files,
            turn: 0,
        };
        let started = Instant::now();
        for k in 0..2 {
            t.start(k)?;
        }
        t.load_ms = started.elapsed().as_secs_f64() * 1e3;
        let (p, d) = (t.parts[0].worker.as_ref().expect("started"), t.parts[1].worker.as_ref().expect("started"));
        let mut info = p.info().clone();
        info.device = if p.info().device == d.info().device {
            format!("prefill and decode: {}", p.info().device)
        } else {
            format!("prefill: {}; decode: {}", p.info().device, d.info().device)
        };
        info.cpu_fallback = p.info().cpu_fallback.clone().or_else(|| d.info().cpu_fallback.clone());
        info.threads = p.info().threads + d.info().threads;
        info.kv_cache_bytes = p.info().kv_cache_bytes.zip(d.info().kv_cache_bytes).map(|(a, b)| a + b);
        info.settings.insert("disaggregated".into(), split.label((p.info().threads, d.info().threads)));
        t.info = info;
        Ok(t)
    }

    /// Start worker `k`, configured for its role.
    fn start(&mut self, k: usize) -> Result<(), TargetError> {
        let config = role_config(self.parts[k].stage, &self.config);
        let part = &mut self.parts[k];
        let worker = Worker::spawn(&self.command, &part.spec, &config, self.load_timeout).map_err(|e| match e {
            TargetError::Load(why) => TargetError::Load(format!("{} worker: {why}", stage_name(part.stage))),
            other => other,
        })?;
        part.worker = Some(worker);
        part.step = (0, 0);
        Ok(())
    }

    /// Worker `k`, started again if it died.
    fn worker(&mut self, k: usize) -> Result<&mut Worker, TargetError> {
        if self.parts[k].worker.as_mut().is_none_or(|w| w.is_gone()) {
            self.parts[k].worker = None;
            self.start(k)?;
        }
        Ok(self.parts[k].worker.as_mut().expect("started above"))
    }

    /// Fail every request worker `k` held: it died (`why`).
    fn lose(&mut self, k: usize, why: &str) {
        let stage = self.parts[k].stage;
        self.parts[k].worker = None;
        let mut lost: Vec<u64> = self.requests.iter().filter(|(_, (s, _))| *s == stage).map(|(id, _)| *id).collect();
        lost.sort_unstable();
        for id in lost {
            self.requests.remove(&id);
            self.first_step.remove(&id);
            let error = format!("the {} worker {why}", stage_name(stage));
            self.pending.push_back((Instant::now(), Reply::Event(SchedEvent::Failed { id, error })));
        }
    }

    /// The event from worker `k` on our clock and pass numbers; a handed-over state goes on
    /// to the decode worker here. `None` when it is nothing to pass up.
    fn adopt(&mut self, k: usize, mut event: SchedEvent) -> Option<SchedEvent> {
        {
            let worker = self.parts[k].worker.as_ref().expect("it just spoke");
            event.map_times(&|t| ns_since(self.epoch, worker.to_local(t)));
        }
        if let SchedEvent::Step { step, .. } = &mut event {
            self.steps += 1;
            self.parts[k].step = (*step, self.steps);
        }
        let (theirs, mine) = self.parts[k].step;
        event.map_step(&|s| if s == theirs { mine } else { s });
        match &mut event {
            SchedEvent::HandedOff { id, step, token, top, state, .. } => {
                let id = *id;
                let state = state.take();
                let Some((_, request)) = self.requests.get(&id).cloned() else {
                    // Cancelled on its way.
                    if let Some(state) = &state {
                        handoff::discard(state);
                    }
                    return None;
                };
                self.first_step.insert(id, *step);
                let Some(state) = state else {
                    self.requests.remove(&id);
                    return Some(SchedEvent::Failed { id, error: "the prefill worker handed over no state".into() });
                };
                let resume = WorkRequest { handoff: Handoff::In { token: *token, top: std::mem::take(top), state: state.clone() }, ..request };
                let sent = self.worker(1).and_then(|w| w.submit(resume));
                if let Err(e) = sent {
                    handoff::discard(&state);
                    self.requests.remove(&id);
                    self.pending.push_back((Instant::now(), Reply::Event(SchedEvent::Failed { id, error: format!("the decode worker: {e}") })));
                } else if let Some(r) = self.requests.get_mut(&id) {
                    r.0 = Stage::Decode;
                }
            }
            SchedEvent::Token { id, index: 0, step, .. } if k == 1 => {
                if let Some(s) = self.first_step.remove(id) {
                    *step = s;
                }
            }
            SchedEvent::Finished { id, .. } | SchedEvent::Failed { id, .. } => {
                self.requests.remove(id);
                self.first_step.remove(id);
            }
            _ => {}
        }
        Some(event)
    }
}

impl Disaggregated {
    /// Worker `k`'s next reply within `wait`, on our clock. A worker that died has its
    /// requests failed (queued in `pending`).
    fn poll(&mut self, k: usize, wait: Duration) -> Option<(Instant, Reply)> {
        let Some(w) = self.parts[k].worker.as_mut() else {
            std::thread::sleep(wait);
            return None;
        };
        match w.recv(wait) {
            Ok(Some((at, Reply::Event(event)))) => {
                self.turn = 1 - k;
                self.adopt(k, event).map(|event| (at, Reply::Event(event)))
            }
            Ok(Some(reply)) => Some(reply),
            Ok(None) => None,
            Err(e) => {
                let why = match e {
                    TargetError::Died(why) => why,
                    other => other.to_string(),
                };
                self.lose(k, &why);
                None
            }
        }
    }
}

/// How a worker schedules what it holds: the decode worker every sequence at once, as
/// `continuous` does; the prefill worker every prompt that fits the same way, or (with
/// `prefill_chunks`) in chunks, so a short prompt is not held up behind a long one.
fn role_config(stage: Stage, config: &SchedulerConfig) -> SchedulerConfig {
    let policy = if stage == Stage::Prefill && config.split.prefill_chunks { Policy::Chunked } else { Policy::Continuous };
    SchedulerConfig { policy, ..config.clone() }
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Prefill => "prefill",
        Stage::Decode => "decode",
    }
}

/// Nanoseconds from `epoch` to `t` (0 for an earlier instant).
fn ns_since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

impl Target for Disaggregated {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn load_ms(&self) -> f64 {
        self.load_ms
    }
    fn pid(&self) -> Option<u32> {
        self.parts[0].worker.as_ref().map(Worker::pid)
    }
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), TargetError> {
        self.config = config.clone();
        for part in &mut self.parts {
            if let Some(w) = part.worker.as_mut() {
                w.configure(role_config(part.stage, config))?;
            }
        }
        Ok(())
    }
    fn submit(&mut self, mut request: WorkRequest) -> Result<(), TargetError> {
        request.handoff = Handoff::Out { route: self.route.clone() };
        let id = request.id;
        self.requests.insert(id, (Stage::Prefill, request.clone()));
        let sent = self.worker(0).and_then(|w| w.submit(request));
        if let Err(e) = sent {
            // Only this request fails; the next one starts the worker again.
            self.requests.remove(&id);
            self.pending.push_back((Instant::now(), Reply::Event(SchedEvent::Failed { id, error: format!("the prefill worker: {e}") })));
        }
        Ok(())
    }
    fn cancel(&mut self, id: u64) {
        let Some((stage, _)) = self.requests.get(&id) else { return };
        let k = if *stage == Stage::Prefill { 0 } else { 1 };
        if let Some(w) = self.parts[k].worker.as_mut() {
            let _ = w.send(&lx_client::protocol::Command::Cancel { id });
        }
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(reply) = self.pending.pop_front() {
                return Ok(Some(reply));
            }
            // Both workers are asked in turn without waiting, then one waits a little: each
            // line is stamped by its reader thread when it arrives, so how long it waits here
            // moves no figure, only when it is passed up.
            for i in 0..2 {
                let k = (self.turn + i) % 2;
                if let Some(reply) = self.poll(k, Duration::ZERO) {
                    return Ok(Some(reply));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() && self.pending.is_empty() {
                return Ok(None);
            }
            self.turn = 1 - self.turn;
            if let Some(reply) = self.poll(self.turn, left.min(Duration::from_millis(1))) {
                return Ok(Some(reply));
            }
        }
    }
    fn to_local(&self, target_ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(target_ns)
    }
    fn kill(&mut self) {
        for part in &mut self.parts {
            if let Some(w) = part.worker.as_mut() {
                w.kill();
            }
        }
    }
    fn close(&mut self) {
        for part in &mut self.parts {
            if let Some(w) = part.worker.as_mut() {
                let _ = w.send(&lx_client::protocol::Command::Shutdown);
            }
        }
    }
    fn reset_peak_rss(&self) {
        for w in self.parts.iter().filter_map(|p| p.worker.as_ref()) {
            w.reset_peak_rss();
        }
    }
    fn peak_rss_mib(&self) -> Option<f64> {
        let peaks: Vec<f64> = self.parts.iter().filter_map(|p| p.worker.as_ref()?.peak_rss_mib()).collect();
        (!peaks.is_empty()).then(|| peaks.iter().sum())
    }
}
