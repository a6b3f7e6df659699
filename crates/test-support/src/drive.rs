//! The engine's scheduler driven to the end over any backend, and the token streams it gave:
//! what the batching, policy and backend parity tests compare.

use std::collections::BTreeMap;

use lx_engine::backend::{Backend, Scored, TokenId};
use lx_engine::scheduler::{SchedEvent, Scheduler, WorkRequest};

/// Per request id: its tokens in order, and the alternatives recorded at each.
pub type Streams = BTreeMap<u64, (Vec<TokenId>, Vec<Vec<Scored>>)>;

/// Submits `requests` in order and steps until no work is left; every event, in order.
/// `steps_after_first` passes run between the first request and the others (a prefix the
/// first one computes is then cached before the others arrive).
pub fn drive<B: Backend + ?Sized>(s: &mut Scheduler<B>, requests: Vec<WorkRequest>, steps_after_first: usize) -> Vec<SchedEvent> {
    let mut events = Vec::new();
    for (i, req) in requests.into_iter().enumerate() {
        s.submit(req, &mut |e| events.push(e));
        if i == 0 {
            for _ in 0..steps_after_first {
                s.step(&mut |e| events.push(e));
            }
        }
    }
    while s.has_work() {
        s.step(&mut |e| events.push(e));
    }
    events
}

/// The token streams of `events`. Panics on a failed request: a stream it cut short would
/// compare as a mismatch with a misleading message.
pub fn streams(events: &[SchedEvent]) -> Streams {
    let mut out = Streams::new();
    for e in events {
        match e {
            SchedEvent::Token { id, token, top, .. } => {
                let entry = out.entry(*id).or_default();
                entry.0.push(*token);
                entry.1.push(top.clone());
            }
            SchedEvent::Failed { id, error } => panic!("request {id} failed: {error}"),
            _ => {}
        }
    }
    out
}
