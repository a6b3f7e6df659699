//! This machine's sensors during a live session: each tick's newest reading as an event
//! (power over the last interval, clocks, temperature), and throttling said as it happens:
//! the clock's run is kept while one load holds steady (one backend measured at one
//! setting) and judged as a sweep's point is.

use std::time::Instant;

use crate::live::LiveEvent;
use lx_machine::sensors::{clock_fell, power_between, Reading, Sampler, Sensors, SAMPLE_EVERY};

use super::rotation::Phase;
use super::Session;

/// The longest clock run judged: the last minute of readings.
const CLOCK_RUN: usize = (60_000 / SAMPLE_EVERY.as_millis()) as usize;

pub(super) struct Sensing {
    sampler: Sampler,
    origin: Instant,
    last: Option<Reading>,
    /// The steady load the clock run belongs to: (generation, measuring since).
    load: Option<(u64, Instant)>,
    clock: Vec<(f64, f64)>,
}

impl Sensing {
    /// Open the sensors and start reading; the event that says what they read here.
    pub(super) fn start() -> (Sensing, LiveEvent) {
        let sensors = Sensors::open();
        let opened = LiveEvent::SensorsOpened {
            sources: sensors.sources().to_vec(),
            not_available: sensors.not_available().to_vec(),
            every_ms: SAMPLE_EVERY.as_secs_f64() * 1e3,
        };
        let origin = sensors.origin();
        (Sensing { sampler: Sampler::start(sensors, SAMPLE_EVERY), origin, last: None, load: None, clock: Vec::new() }, opened)
    }
}

impl Session {
    /// The newest reading since the last call, as an event (nothing when none came).
    pub(super) fn sense(&mut self) {
        let load = match self.phase {
            Phase::Measuring { since, .. } => Some((self.generation, since)),
            _ => None,
        };
        let t0 = self.t0;
        let Some(s) = self.sensing.as_mut() else { return };
        let readings = s.sampler.take();
        let Some(newest) = readings.last().cloned() else { return };
        if s.load != load {
            s.load = load;
            s.clock.clear();
        }
        let clock_of = |r: &Reading| r.gpus.first().and_then(|g| g.clock_mhz).or(r.cpu_mhz);
        if s.load.is_some() {
            s.clock.extend(readings.iter().filter_map(|r| Some((r.t_ms, clock_of(r)?))));
            let over = s.clock.len().saturating_sub(CLOCK_RUN);
            s.clock.drain(..over);
        }
        let which = if newest.gpus.first().and_then(|g| g.clock_mhz).is_some() { "GPU 0" } else { "CPU" };
        let throttling = clock_fell(&s.clock).map(|(from, to)| format!("{which} clock fell from {from:.0} to {to:.0} MHz ({:+.0}%) while the load was steady", 100.0 * (to / from - 1.0)));
        let held = newest.gpus.iter().flat_map(|g| g.held_back_by.iter().map(move |w| format!("GPU {} clocks held back by {w}", g.index)));
        let throttling: Vec<String> = throttling.into_iter().chain(held).collect();
        let power_w = s.last.as_ref().and_then(|before| power_between(before, &newest)).map(|(w, _)| w);
        let at_ms = session_ms(t0, s.origin, newest.t_ms);
        let event = LiveEvent::Sensors {
            at_ms,
            cpu_mhz: newest.cpu_mhz,
            gpu_mhz: newest.gpus.first().and_then(|g| g.clock_mhz),
            temp_c: newest.gpus.first().and_then(|g| g.temp_c).or(newest.cpu_temp_c),
            power_w,
            throttling,
        };
        s.last = Some(newest);
        self.emit(event);
    }
}

/// A reading's time (`t_ms` after the sensors' `origin`) on the session's clock (from `t0`).
fn session_ms(t0: Instant, origin: Instant, t_ms: f64) -> f64 {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    ms(origin.saturating_duration_since(t0)) - ms(t0.saturating_duration_since(origin)) + t_ms
}
