//! Fake workers for the session tests: the real worker protocol, scheduler and serve loop on
//! a thread, over a model that only sleeps (per prompt token and per pass); a test can crash
//! the workers or fail their loads at will.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lx_engine::backend::{
    Backend, BackendError, BackendInfo, Batch, Capabilities, Choice, ChunkOutput, LoadSpec, Outputs,
};
use lx_client::target::TargetError;
use crate::live::LiveModel;
use lx_client::protocol::{Command, Reply};
use lx_engine::scheduler::{SchedulerConfig, WorkRequest};
use lx_client::target::{Spawner, Target};

// -- a fake model that takes time like a real one: per prompt token and per pass --------

struct SlowModel {
    info: BackendInfo,
    prefill_us_per_token: u64,
    step_us: u64,
}

impl Backend for SlowModel {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn step(&mut self, batch: &Batch) -> Result<Vec<ChunkOutput>, BackendError> {
        let prompt: usize = batch.chunks.iter().filter(|c| c.tokens.len() > 1).map(|c| c.tokens.len()).sum();
        std::thread::sleep(Duration::from_micros(self.step_us + self.prefill_us_per_token * prompt as u64));
        Ok(batch
            .chunks
            .iter()
            .filter(|c| c.outputs != Outputs::None)
            .map(|c| ChunkOutput { slot: c.slot, choices: vec![Choice { token: 65 + (c.pos % 26), ..Default::default() }] })
            .collect())
    }
    fn clear(&mut self, _slot: lx_engine::backend::Slot) {}
    fn truncate(&mut self, _slot: lx_engine::backend::Slot, _len: u32) -> Result<(), BackendError> {
        Ok(())
    }
}

/// Bytes in from the coordinator side.
struct ChanReader {
    rx: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}
impl Read for ChanReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            match self.rx.recv() {
                Ok(b) => self.buf = b,
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf.drain(..n);
        Ok(n)
    }
}

/// Lines out to the coordinator side, stamped on receipt; fails once "crashed".
struct ChanWriter {
    tx: Sender<(Instant, Reply)>,
    line: Vec<u8>,
    crash: Arc<AtomicBool>,
}
impl Write for ChanWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.crash.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("crashed"));
        }
        self.line.extend_from_slice(b);
        while let Some(n) = self.line.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.line.drain(..=n).collect();
            let reply: Reply = serde_json::from_slice(&line).expect("worker writes replies");
            let _ = self.tx.send((Instant::now(), reply));
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The worker protocol served on a thread: the real scheduler and serve loop, a fake model.
struct FakeWorker {
    info: BackendInfo,
    to_worker: Sender<Vec<u8>>,
    from_worker: Receiver<(Instant, Reply)>,
    epoch: Instant,
    crash: Arc<AtomicBool>,
    gone: bool,
}

impl FakeWorker {
    fn send(&mut self, cmd: &Command) -> Result<(), TargetError> {
        if self.gone || self.crash.load(Ordering::SeqCst) {
            self.gone = true;
            return Err(TargetError::Died("exited on signal 9 (test)".into()));
        }
        let mut line = serde_json::to_vec(cmd).unwrap();
        line.push(b'\n');
        self.to_worker.send(line).map_err(|_| TargetError::Died("exited".into()))
    }
}

impl Target for FakeWorker {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn load_ms(&self) -> f64 {
        1.0
    }
    fn configure(&mut self, config: &SchedulerConfig) -> Result<(), TargetError> {
        self.send(&Command::Configure { scheduler: config.clone() })
    }
    fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError> {
        self.send(&Command::Submit { request })
    }
    fn cancel(&mut self, id: u64) {
        let _ = self.send(&Command::Cancel { id });
    }
    fn close(&mut self) {
        let _ = self.send(&Command::Shutdown);
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
        if self.gone || self.crash.load(Ordering::SeqCst) {
            self.gone = true;
            return Err(TargetError::Died("exited on signal 9 (test)".into()));
        }
        match self.from_worker.recv_timeout(timeout) {
            Ok(r) => Ok(Some(r)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                self.gone = true;
                let killed = self.crash.load(Ordering::SeqCst);
                Err(TargetError::Died(if killed { "exited on signal 9 (test)" } else { "exited" }.into()))
            }
        }
    }
    fn to_local(&self, worker_ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(worker_ns)
    }
    fn kill(&mut self) {
        self.crash.store(true, Ordering::SeqCst);
        self.gone = true;
    }
}

/// A spawner of fake workers; `crash` makes the live ones die, `loads` counts starts.
pub(super) struct Fakes {
    pub(super) crash: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    pub(super) loads: Arc<AtomicUsize>,
    pub(super) fail_loads: Arc<AtomicBool>,
}

pub(super) fn fakes(prefill_us_per_token: u64, step_us: u64) -> (Spawner, Fakes) {
    let crash: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Default::default();
    let loads = Arc::new(AtomicUsize::new(0));
    let fail_loads = Arc::new(AtomicBool::new(false));
    let f = Fakes { crash: crash.clone(), loads: loads.clone(), fail_loads: fail_loads.clone() };
    let spawner: Spawner = Arc::new(move |backend: &str, spec: &LoadSpec, config: &SchedulerConfig| {
        loads.fetch_add(1, Ordering::SeqCst);
        if fail_loads.load(Ordering::SeqCst) {
            return Err(TargetError::Load("cannot load model: test".into()));
        }
        let info = BackendInfo {
            name: backend.into(),
            version: "fake".into(),
            device: "test".into(),
            cpu_fallback: None,
            threads: 1,
            capabilities: Capabilities {
                mixed_position_batches: true,
                max_batch_tokens: spec.max_batch_tokens,
                slots: spec.slots,
                ctx_per_slot: spec.ctx_per_slot,
                prefix_copy: false,
            },
            ..Default::default()
        };
        let (to_worker, rx_in) = mpsc::channel::<Vec<u8>>();
        let (tx_out, from_worker) = mpsc::channel();
        let dead = Arc::new(AtomicBool::new(false));
        crash.lock().unwrap().push(dead.clone());
        let model_info = info.clone();
        let epoch = Instant::now();
        let writer = ChanWriter { tx: tx_out, line: Vec::new(), crash: dead.clone() };
        std::thread::spawn(move || {
            let loader: lx_worker::process::Loader = Box::new(move |_spec: &LoadSpec| {
                Ok(Box::new(SlowModel { info: model_info.clone(), prefill_us_per_token, step_us }) as Box<dyn Backend>)
            });
            let input = BufReader::new(ChanReader { rx: rx_in, buf: Vec::new() });
            let _ = lx_worker::process::serve(loader, input, writer);
        });
        let mut w = FakeWorker { info, to_worker, from_worker, epoch, crash: dead, gone: false };
        w.send(&Command::Load { spec: spec.clone(), scheduler: config.clone() }).unwrap();
        // Hello, then Loaded.
        for _ in 0..2 {
            match w.recv(Duration::from_secs(5))? {
                Some((_, Reply::LoadFailed { error })) => return Err(TargetError::Load(error)),
                Some(_) => {}
                None => return Err(TargetError::Unexpected("fake worker did not answer".into())),
            }
        }
        Ok(Box::new(w) as Box<dyn Target>)
    });
    (spawner, f)
}

pub(super) fn model() -> LiveModel {
    LiveModel {
        model_path: "fake.gguf".into(),
        context_length: 8192,
        prompt: Box::new(|n, _| (0..n).map(|i| 97 + (i % 26)).collect()),
        token_bytes: Box::new(|t| vec![t as u8]),
        draft_model: std::sync::Arc::new(|| Err("the fake model has no draft".into())),
        kv_bytes_f16: Box::new(|ctx| Some(ctx as u64 * 1024)),
    }
}

#[allow(dead_code)]
fn _assert_bufread(_: impl BufRead) {}
