//! The worker process: one backend and the engine's scheduler in a process of its own, so a
//! backend that crashes, hangs or leaks ends a worker, never the program measuring it.
//!
//! The worker's side reads commands and answers in lines ([`process::serve`]); the
//! coordinator's side starts it over a [`child`] process and talks to it
//! ([`coordinator::Worker`], a [`lx_client::target::Target`]); [`spawn`] starts workers by
//! backend name, one or, for disaggregated serving, two that hand sequences over
//! ([`disaggregated`]).

pub mod child;
pub mod coordinator;
pub mod process;
pub mod spawn;
pub mod disaggregated;
