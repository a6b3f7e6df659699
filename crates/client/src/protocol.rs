//! The worker protocol: JSON lines over the worker's stdin and stdout.
//!
//! The coordinator sends [`Command`]s; the worker answers with [`Reply`]s. The first
//! line a worker writes is `Hello` with its protocol version; a coordinator refuses a
//! worker of another version. Times in replies are nanoseconds on the worker's clock;
//! the coordinator maps them onto its own with `Ping`/`Pong` (see `coordinator`).
//! Diagnostics go to the worker's stderr, never stdout.

use serde::{Deserialize, Serialize};

use lx_engine::backend::{BackendInfo, LoadSpec};
use lx_engine::scheduler::{SchedEvent, SchedulerConfig, WorkRequest};

/// Bumped on any incompatible change to [`Command`] or [`Reply`].
pub const PROTOCOL_VERSION: u32 = 1;

/// Coordinator → worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Load the model; answered by `Loaded` or `LoadFailed`. Sent once.
    Load { spec: LoadSpec, scheduler: SchedulerConfig },
    /// Change scheduling for requests admitted from now on.
    Configure { scheduler: SchedulerConfig },
    /// Queue a request; its progress comes back as `Event`s.
    Submit { request: WorkRequest },
    /// Drop a request.
    Cancel { id: u64 },
    /// Clock probe; answered by `Pong` with the same nonce.
    Ping { nonce: u64 },
    /// Finish and exit.
    Shutdown,
}

/// Worker → coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Hello { protocol: u32, version: String, pid: u32 },
    Loaded { info: BackendInfo, load_ms: f64 },
    LoadFailed { error: String },
    Pong { nonce: u64, t: u64 },
    /// Scheduler events of one pass are written together and flushed once.
    Event(SchedEvent),
    /// A command the worker could not act on (bad line, configure before load...).
    Error { error: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_engine::scheduler::Policy;

    #[test]
    fn lines_round_trip() {
        let cmds = vec![
            Command::Submit { request: WorkRequest { id: 3, prompt: vec![2, 5], max_tokens: 4, stop_tokens: vec![], top_logprobs: 0, prefix_tokens: 0, handoff: Default::default(), score: None } },
            Command::Configure { scheduler: SchedulerConfig::new(Policy::Chunked, 4, 512) },
            Command::Shutdown,
        ];
        for c in cmds {
            let line = serde_json::to_string(&c).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Command>(&line).unwrap(), c);
        }
        let r = Reply::Event(SchedEvent::Token { id: 1, step: 2, index: 0, token: 9, t: 5, top: vec![], drafted: false });
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), r);
    }

    /// Damaged lines in either direction (the worker reading commands, the coordinator reading
    /// replies) parse or are refused with an error, never a panic.
    #[test]
    fn damaged_lines_are_refused_never_a_panic() {
        let lines: Vec<String> = [
            serde_json::to_string(&Command::Submit { request: WorkRequest { id: 3, prompt: vec![2, 5, 7], max_tokens: 4, stop_tokens: vec![1], top_logprobs: 2, prefix_tokens: 0, handoff: Default::default(), score: None } }),
            serde_json::to_string(&Command::Configure { scheduler: SchedulerConfig::new(Policy::Chunked, 4, 512) }),
            serde_json::to_string(&Reply::Event(SchedEvent::Step { step: 4, seqs: 2, prefill_tokens: 16, decode_tokens: 1, draft_tokens: 0, t_start: 10, t_end: 20, compute: Some(9) })),
            serde_json::to_string(&Reply::Event(SchedEvent::Failed { id: 9, error: "backend step failed".into() })),
        ]
        .into_iter()
        .map(Result::unwrap)
        .collect();
        let mut m = lx_test_support::fuzz::Mutator::new(0x0bad_11fe);
        let mut refused = 0;
        for case in 0..4000 {
            let mut bytes = lines[case % lines.len()].clone().into_bytes();
            m.mutate(&mut bytes, 0);
            let parsed = std::panic::catch_unwind(|| {
                (serde_json::from_slice::<Command>(&bytes).is_err(), serde_json::from_slice::<Reply>(&bytes).is_err())
            });
            match parsed {
                Ok((true, true)) => refused += 1,
                Ok(_) => {}
                Err(_) => panic!("case {case} panicked"),
            }
        }
        assert!(refused > 0);
    }
}
