//! Reading the sensors on a thread of their own while a point runs, timing every read so
//! the sampler's own cost is known (and reported beside what it measured).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Reading, Sensors};

/// How often a sampler reads. NVML's power figure is its own average over about a second
/// and a RAPL counter moves every millisecond, so four readings a second resolve both.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Readings taken so far, and the time the reads took.
#[derive(Default)]
struct Taken {
    readings: Vec<Reading>,
    cost: Duration,
}

/// A thread reading the sensors every `every`, from `start` until `finish`.
pub struct Sampler {
    stop: Sender<()>,
    taken: Arc<Mutex<Taken>>,
    thread: Option<JoinHandle<Sensors>>,
    started: Instant,
}

/// What a sampler read: every reading, what they cost, and the sensors back for the next.
pub struct Trace {
    pub readings: Vec<Reading>,
    /// Time spent reading, summed.
    pub cost: Duration,
    /// From `start` to `finish`.
    pub span: Duration,
    pub sensors: Sensors,
}

impl Trace {
    /// The sampler's own CPU time as a share of one core over its span.
    pub fn cost_share(&self) -> f64 {
        let span = self.span.as_secs_f64();
        if span > 0.0 { self.cost.as_secs_f64() / span } else { 0.0 }
    }
}

impl Sampler {
    /// Read once now, then every `every`.
    pub fn start(mut sensors: Sensors, every: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let taken = Arc::new(Mutex::new(Taken::default()));
        let shared = Arc::clone(&taken);
        let read = move |sensors: &mut Sensors| {
            let t = Instant::now();
            let r = sensors.read();
            let mut taken = shared.lock().unwrap_or_else(|e| e.into_inner());
            taken.cost += t.elapsed();
            taken.readings.push(r);
        };
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("lx-sensors".into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    read(&mut sensors);
                    next += every;
                    match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
                        Err(RecvTimeoutError::Timeout) => {}
                        // Asked to stop (or the handle is gone): one last reading closes the span.
                        _ => {
                            read(&mut sensors);
                            return sensors;
                        }
                    }
                }
            })
            .expect("spawn the sensor thread");
        Self { stop, taken, thread: Some(thread), started }
    }

    /// The readings since the last `take` (live mode reads them as they come).
    pub fn take(&self) -> Vec<Reading> {
        std::mem::take(&mut self.taken.lock().unwrap_or_else(|e| e.into_inner()).readings)
    }

    /// Stop after one last reading; the readings not taken yet, and the sensors.
    pub fn finish(mut self) -> Trace {
        let _ = self.stop.send(());
        let sensors = self.thread.take().expect("joined once").join().expect("the sensor thread does not panic");
        let span = self.started.elapsed();
        let taken = std::mem::take(&mut *self.taken.lock().unwrap_or_else(|e| e.into_inner()));
        Trace { readings: taken.readings, cost: taken.cost, span, sensors }
    }
}
