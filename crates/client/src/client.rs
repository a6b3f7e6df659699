//! The client side of a measurement, shared by sweeps ([`crate::load`]) and live mode
//! (`lx_run::live`): the requests in flight on one [`Target`], how each is submitted, how
//! every reply is booked on its request's [`RequestRecord`], and when a silent target is
//! given up as hung. The two differ only in when they submit (a point's fixed count and
//! arrival times; live mode's changing settings) and in what they do with each request once
//! it ends, so that is all they keep of their own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::target::TargetError;
use crate::records::RequestRecord;
use crate::protocol::Reply;
use lx_engine::scheduler::{FinishReason, SchedEvent, WorkRequest};
use crate::target::Target;

/// One request in flight: its record, and whatever its driver keeps beside it (`T`).
pub struct Flight<T> {
    /// When it was submitted (in open loop: when it was due), the origin of its record's times.
    pub submitted: Instant,
    pub record: RequestRecord,
    pub tag: T,
}

/// What one reply from the target meant.
pub enum Heard<T> {
    /// A forward pass (the event as the target sent it: its stamps are on the target's clock).
    Step(SchedEvent),
    /// An event about request `id`, still in flight, already booked on its record.
    Booked { id: u64, event: SchedEvent },
    /// A request ended (finished, cancelled or failed); it is no longer in flight.
    Ended(Flight<T>),
    /// The target refused a command: a bug on our side.
    Refused(String),
    /// Nothing for us: a reply that is not an event, or an event about a request that has
    /// already ended.
    Nothing,
}

/// The requests in flight on one target.
pub struct Clients<T> {
    flights: HashMap<u64, Flight<T>>,
    /// When the target last said anything while requests were in flight.
    last_heard: Instant,
}

impl<T> Default for Clients<T> {
    fn default() -> Self {
        Self { flights: HashMap::new(), last_heard: Instant::now() }
    }
}

impl<T> Clients<T> {
    pub fn len(&self) -> usize {
        self.flights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flights.is_empty()
    }

    pub fn ids(&self) -> Vec<u64> {
        self.flights.keys().copied().collect()
    }

    pub fn get(&self, id: u64) -> Option<&Flight<T>> {
        self.flights.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Flight<T>> {
        self.flights.get_mut(&id)
    }

    pub fn flights(&self) -> impl Iterator<Item = &Flight<T>> {
        self.flights.values()
    }

    pub fn flights_mut(&mut self) -> impl Iterator<Item = &mut Flight<T>> {
        self.flights.values_mut()
    }

    /// Send `request`; it is in flight from `submitted` on, booked on `record`. A target that
    /// was idle starts its hang clock now, not when it last spoke.
    pub fn submit(&mut self, target: &mut dyn Target, request: WorkRequest, submitted: Instant, record: RequestRecord, tag: T) -> Result<(), TargetError> {
        if self.flights.is_empty() {
            self.last_heard = Instant::now();
        }
        self.flights.insert(request.id, Flight { submitted, record, tag });
        target.submit(request)
    }

    /// Wait up to `wait` for the target's next reply and book it; with the instant it was
    /// received. `Ok(None)` when nothing came.
    /// A target silent for longer than `hang_timeout` while requests are in flight is killed
    /// and reported as hung (the requests stay in flight: end them with [`Clients::end_all`]).
    pub fn receive(&mut self, target: &mut dyn Target, wait: Duration, hang_timeout: Duration) -> Result<Option<(Instant, Heard<T>)>, TargetError> {
        let (at, reply) = match target.recv(wait)? {
            Some(x) => x,
            None => {
                if !self.flights.is_empty() && self.last_heard.elapsed() > hang_timeout {
                    target.kill();
                    return Err(TargetError::Hung(hang_timeout));
                }
                return Ok(None);
            }
        };
        self.last_heard = Instant::now();
        let event = match reply {
            Reply::Event(e) => e,
            Reply::Error { error } => return Ok(Some((at, Heard::Refused(error)))),
            _ => return Ok(Some((at, Heard::Nothing))),
        };
        let id = match &event {
            SchedEvent::Step { .. } => return Ok(Some((at, Heard::Step(event)))),
            SchedEvent::Admitted { id, .. }
            | SchedEvent::Prefill { id, .. }
            | SchedEvent::PrefixReused { id, .. }
            | SchedEvent::Token { id, .. }
            | SchedEvent::Verified { id, .. }
            | SchedEvent::HandedOff { id, .. }
            | SchedEvent::StateLoaded { id, .. }
            | SchedEvent::Scored { id, .. }
            | SchedEvent::Finished { id, .. }
            | SchedEvent::Failed { id, .. }
            | SchedEvent::Warning { id, .. } => *id,
        };
        let Some(flight) = self.flights.get_mut(&id) else { return Ok(Some((at, Heard::Nothing))) };
        if flight.record.book(flight.submitted, at, &event, &|t| target.to_local(t)) {
            let ended = self.flights.remove(&id).expect("present above");
            return Ok(Some((at, Heard::Ended(ended))));
        }
        Ok(Some((at, Heard::Booked { id, event })))
    }

    /// End every request in flight with `why` (its target is gone or going), oldest first.
    /// `finish` says how they ended: `None` for a failure, or a reason such as cancelled.
    pub fn end_all(&mut self, finish: Option<FinishReason>, why: &str) -> Vec<Flight<T>> {
        let mut left: Vec<Flight<T>> = self.flights.drain().map(|(_, f)| f).collect();
        left.sort_by_key(|f| f.record.id);
        for f in &mut left {
            f.record.finish = finish;
            f.record.error = Some(why.to_string());
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use lx_engine::backend::BackendInfo;
    use lx_engine::scheduler::SchedulerConfig;

    /// A target that answers with a fixed list of replies, one per `recv`, then nothing.
    #[derive(Default)]
    struct Replies {
        replies: VecDeque<Reply>,
        submitted: Vec<u64>,
        killed: bool,
    }

    impl Target for Replies {
        fn info(&self) -> &BackendInfo {
            unimplemented!("the client loop does not ask")
        }
        fn load_ms(&self) -> f64 {
            0.0
        }
        fn configure(&mut self, _config: &SchedulerConfig) -> Result<(), TargetError> {
            Ok(())
        }
        fn submit(&mut self, request: WorkRequest) -> Result<(), TargetError> {
            self.submitted.push(request.id);
            Ok(())
        }
        fn cancel(&mut self, _id: u64) {}
        fn recv(&mut self, timeout: Duration) -> Result<Option<(Instant, Reply)>, TargetError> {
            match self.replies.pop_front() {
                Some(reply) => Ok(Some((Instant::now(), reply))),
                None => {
                    std::thread::sleep(timeout);
                    Ok(None)
                }
            }
        }
        fn to_local(&self, _target_ns: u64) -> Instant {
            Instant::now()
        }
        fn kill(&mut self) {
            self.killed = true;
        }
    }

    fn request(id: u64) -> (WorkRequest, RequestRecord) {
        let request = WorkRequest { id, prompt: vec![1, 2, 3], max_tokens: 2, stop_tokens: Vec::new(), top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: None };
        (request, RequestRecord::new(id, 3, 2, 0.0))
    }

    fn submit(clients: &mut Clients<&'static str>, target: &mut Replies, id: u64, tag: &'static str) {
        let (request, record) = request(id);
        clients.submit(target, request, Instant::now(), record, tag).unwrap();
    }

    fn token(id: u64, index: u32) -> Reply {
        Reply::Event(SchedEvent::Token { id, step: 1, index, token: 40 + index, t: 0, top: Vec::new(), drafted: false })
    }

    #[test]
    fn every_reply_is_booked_on_its_request_and_an_ended_request_leaves() {
        let mut target = Replies::default();
        let mut clients = Clients::default();
        submit(&mut clients, &mut target, 1, "first");
        submit(&mut clients, &mut target, 2, "second");
        assert_eq!((target.submitted.clone(), clients.len()), (vec![1, 2], 2));
        target.replies = VecDeque::from([
            Reply::Event(SchedEvent::Step { step: 1, seqs: 2, prefill_tokens: 6, decode_tokens: 0, draft_tokens: 0, t_start: 0, t_end: 0, compute: None }),
            token(1, 0),
            token(7, 0),
            Reply::Pong { nonce: 1, t: 0 },
            token(1, 1),
            Reply::Event(SchedEvent::Finished { id: 1, reason: FinishReason::Length, t: 0 }),
            Reply::Error { error: "no such command".into() },
            Reply::Event(SchedEvent::Failed { id: 2, error: "out of memory".into() }),
        ]);
        let mut next = || clients.receive(&mut target, Duration::ZERO, Duration::from_secs(60)).unwrap().expect("a reply").1;
        assert!(matches!(next(), Heard::Step(SchedEvent::Step { seqs: 2, .. })));
        assert!(matches!(next(), Heard::Booked { id: 1, event: SchedEvent::Token { index: 0, .. } }));
        // Events about requests that are not in flight, and replies that are not events, are nothing.
        assert!(matches!(next(), Heard::Nothing));
        assert!(matches!(next(), Heard::Nothing));
        assert!(matches!(next(), Heard::Booked { id: 1, .. }));
        let Heard::Ended(first) = next() else { panic!("request 1 finished") };
        assert_eq!((first.tag, first.record.tokens.clone(), first.record.finish), ("first", vec![40, 41], Some(FinishReason::Length)));
        assert!(first.record.ok() && first.record.token_ms.len() == 2);
        assert!(matches!(next(), Heard::Refused(e) if e == "no such command"));
        let Heard::Ended(second) = next() else { panic!("request 2 failed") };
        assert_eq!((second.tag, second.record.error.as_deref()), ("second", Some("out of memory")));
        assert!(clients.is_empty());
    }

    #[test]
    fn a_silent_target_is_given_up_as_hung_only_while_requests_are_in_flight() {
        let mut target = Replies::default();
        let mut clients = Clients::default();
        let hang = Duration::from_millis(20);
        // Idle: silence is not a hang, however long.
        std::thread::sleep(hang * 2);
        assert!(clients.receive(&mut target, Duration::from_millis(1), hang).unwrap().is_none());
        assert!(!target.killed);
        // The hang clock starts at the submit that ends the idle time, not at the last reply.
        submit(&mut clients, &mut target, 1, "waits");
        assert!(clients.receive(&mut target, Duration::from_millis(1), hang).unwrap().is_none());
        std::thread::sleep(hang);
        match clients.receive(&mut target, Duration::from_millis(1), hang) {
            Err(TargetError::Hung(t)) => assert_eq!(t, hang),
            other => panic!("expected a hang, got {:?}", other.map(|h| h.is_some())),
        }
        assert!(target.killed);
        // The request is still in flight, for its driver to end with the reason.
        assert_eq!(clients.ids(), vec![1]);
    }

    #[test]
    fn ending_every_request_books_the_reason_oldest_first() {
        let mut target = Replies::default();
        let mut clients = Clients::default();
        for id in [5, 3, 9] {
            submit(&mut clients, &mut target, id, "x");
        }
        let ended = clients.end_all(Some(FinishReason::Cancelled), "live mode stopped");
        assert_eq!(ended.iter().map(|f| f.record.id).collect::<Vec<_>>(), vec![3, 5, 9]);
        assert!(ended.iter().all(|f| f.record.finish == Some(FinishReason::Cancelled) && f.record.error.as_deref() == Some("live mode stopped")));
        assert!(clients.is_empty());
        submit(&mut clients, &mut target, 4, "x");
        let failed = clients.end_all(None, "worker llama: died");
        assert_eq!((failed[0].record.finish, failed[0].record.error.as_deref()), (None, Some("worker llama: died")));
    }
}
