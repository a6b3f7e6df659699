//! The worker side: one backend, one scheduler, one process.
//!
//! `serve` reads commands on a thread of their own (so a long forward pass never
//! delays reading the next request) and runs the scheduler on the calling thread,
//! writing each pass's events in one flush.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Instant;

use lx_engine::backend::{Backend, BackendError, LoadSpec};
use lx_client::protocol::{Command, Reply, PROTOCOL_VERSION};
use lx_engine::scheduler::{Scheduler, SchedulerConfig};

/// Makes a backend from a load spec; the binary maps a backend name to one of these. Called
/// once for the model, and once more for a draft model when the spec names one.
pub type Loader = Box<dyn Fn(&LoadSpec) -> Result<Box<dyn Backend>, BackendError>>;

/// The model, and its draft model when the spec names one (checked to share its vocabulary),
/// under a scheduler whose configuration they can run.
pub fn load_with_draft(load: &dyn Fn(&LoadSpec) -> Result<Box<dyn Backend>, BackendError>, spec: &LoadSpec, config: SchedulerConfig, epoch: Instant) -> Result<Scheduler<dyn Backend>, String> {
    let backend = load(spec).map_err(|e| e.to_string())?;
    let mut s = Scheduler::new(backend, config.clone(), epoch);
    if let Some(path) = &spec.draft_model {
        let facts = lx_format::gguf::draft::check_vocabulary(&spec.model_path, path)?;
        let draft = load(&LoadSpec { model_path: path.clone(), draft_model: None, ..spec.clone() }).map_err(|e| format!("draft model: {e}"))?;
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let name = facts.draft_of.or(facts.name).map(|n| format!("{n} ({file})")).unwrap_or(file);
        s.set_draft(draft, name)?;
    }
    s.check(&config).map_err(|e| e.to_string())?;
    Ok(s)
}

/// The commands of the next read (each parsed, or why not), waiting for one; `None` at the
/// end of input. A line that the read cut short is completed before the batch ends.
fn read_batch<R: Read>(input: &mut BufReader<R>) -> Option<Vec<Result<Command, String>>> {
    let mut batch = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if !matches!(input.read_line(&mut line), Ok(n) if n > 0) {
            return (!batch.is_empty()).then_some(batch);
        }
        if !line.trim().is_empty() {
            batch.push(serde_json::from_str::<Command>(&line).map_err(|e| format!("bad command line: {e}")));
        }
        if input.buffer().is_empty() && !batch.is_empty() {
            return Some(batch);
        }
    }
}

/// Serve the protocol until `Shutdown` or end of input. Returns when done; I/O errors on
/// the output (the coordinator went away) end the loop quietly.
///
/// Commands that arrive in one read go to the scheduler as one batch: a burst of
/// submissions (sent together by the coordinator) is admitted to one pass, where a request
/// read a moment after the others would have waited a whole prefill for its own, and held
/// up the others' first decode with it.
pub fn serve<R: Read + Send + 'static>(loader: Loader, mut input: BufReader<R>, mut output: impl Write) -> std::io::Result<()> {
    let epoch = Instant::now();
    let (tx, rx) = mpsc::channel::<Vec<Result<Command, String>>>();
    std::thread::spawn(move || while let Some(batch) = read_batch(&mut input) {
        if tx.send(batch).is_err() {
            return;
        }
    });
    let send = |out: &mut dyn Write, reply: &Reply| -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, reply)?;
        out.write_all(b"\n")
    };
    send(&mut output, &Reply::Hello { protocol: PROTOCOL_VERSION, version: env!("CARGO_PKG_VERSION").into(), pid: std::process::id() })?;
    output.flush()?;

    // Before the model is loaded only Load, Ping and Shutdown make sense.
    let mut loader = Some(loader);
    let mut scheduler: Option<Scheduler<dyn Backend>> = None;
    loop {
        let wait = scheduler.as_ref().and_then(|s| s.idle_for());
        let next = match wait {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => rx.recv_timeout(d),
        };
        let mut pending = match next {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) => Vec::new(),
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        // Take everything already queued, so a burst of submits lands in one pass.
        pending.extend(rx.try_iter().flatten());
        let mut events = Vec::new();
        for cmd in pending {
            match cmd {
                Err(error) => events.push(Reply::Error { error }),
                Ok(Command::Shutdown) => {
                    for r in &events {
                        send(&mut output, r)?;
                    }
                    return output.flush();
                }
                Ok(Command::Ping { nonce }) => {
                    events.push(Reply::Pong { nonce, t: epoch.elapsed().as_nanos() as u64 })
                }
                Ok(Command::Load { spec, scheduler: config }) => match (loader.take(), config.validate()) {
                    (None, _) => events.push(Reply::Error { error: "model already loaded".into() }),
                    (Some(_), Err(invalid)) => events.push(Reply::LoadFailed { error: invalid.to_string() }),
                    (Some(load), Ok(())) => {
                        let t0 = Instant::now();
                        match load_with_draft(&load, &spec, config, epoch) {
                            Ok(s) => {
                                let mut info = s.backend().info().clone();
                                info.settings_from = std::env::var(lx_engine::backend::SETTINGS_FROM_ENV).ok();
                                info.draft = s.draft_name().map(str::to_string);
                                scheduler = Some(s);
                                events.push(Reply::Loaded { info, load_ms: t0.elapsed().as_secs_f64() * 1e3 });
                            }
                            Err(error) => events.push(Reply::LoadFailed { error }),
                        }
                    }
                },
                Ok(cmd) => match scheduler.as_mut() {
                    None => events.push(Reply::Error { error: "no model loaded yet".into() }),
                    Some(s) => match cmd {
                        Command::Configure { scheduler: config } => match s.check(&config) {
                            Ok(()) => s.configure(config),
                            Err(invalid) => events.push(Reply::Error { error: invalid.to_string() }),
                        },
                        Command::Submit { request } => s.submit(request, &mut |e| events.push(Reply::Event(e))),
                        Command::Cancel { id } => s.cancel(id, &mut |e| events.push(Reply::Event(e))),
                        _ => unreachable!("handled above"),
                    },
                },
            }
        }
        for r in &events {
            send(&mut output, r)?;
        }
        output.flush()?;
        if let Some(s) = scheduler.as_mut() {
            if s.idle_for() == Some(std::time::Duration::ZERO) {
                // What admission says goes out before the pass: a request resumed from a
                // transferred state has its first token then, not a pass later.
                let mut out = Vec::with_capacity(8);
                s.admit(&mut |e| out.push(Reply::Event(e)));
                if !out.is_empty() {
                    for r in out.drain(..) {
                        send(&mut output, &r)?;
                    }
                    output.flush()?;
                }
                s.step(&mut |e| out.push(Reply::Event(e)));
                for r in &out {
                    send(&mut output, r)?;
                }
                output.flush()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Hands out its chunks one `read` at a time, as a pipe hands out what was written.
    struct Reads(VecDeque<Vec<u8>>);

    impl Read for Reads {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(chunk) = self.0.pop_front() else { return Ok(0) };
            buf[..chunk.len()].copy_from_slice(&chunk);
            Ok(chunk.len())
        }
    }

    fn pings(nonces: &[u64]) -> Vec<u8> {
        nonces.iter().map(|n| format!("{}\n", serde_json::to_string(&Command::Ping { nonce: *n }).unwrap())).collect::<String>().into_bytes()
    }

    fn nonces(batch: Vec<Result<Command, String>>) -> Vec<u64> {
        batch.into_iter().map(|c| if let Ok(Command::Ping { nonce }) = c { nonce } else { panic!("{c:?}") }).collect()
    }

    /// What one write sent arrives as one batch (a burst of submissions, one pass); a line
    /// cut across two reads is completed first; blank lines are skipped; a bad line is
    /// reported in its batch.
    #[test]
    fn commands_of_one_read_are_one_batch() {
        let mut burst = pings(&[1, 2, 3]);
        let tail = burst.split_off(burst.len() - 5);
        let mut second = tail;
        second.extend(b"\n".iter());
        let mut input = BufReader::new(Reads(VecDeque::from([pings(&[0]), burst, second, pings(&[4, 5]), b"nonsense\n".to_vec()])));
        assert_eq!(nonces(read_batch(&mut input).unwrap()), [0]);
        assert_eq!(nonces(read_batch(&mut input).unwrap()), [1, 2, 3]);
        assert_eq!(nonces(read_batch(&mut input).unwrap()), [4, 5]);
        let bad = read_batch(&mut input).unwrap();
        assert!(matches!(bad.as_slice(), [Err(e)] if e.starts_with("bad command line")), "{bad:?}");
        assert!(read_batch(&mut input).is_none());
    }
}
