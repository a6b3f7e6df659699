//! The ways a run is made, shared by the CLI and the app: a sweep over a grid of points
//! ([`sweep`]), live mode that follows the user's settings as they change ([`live`]) and the
//! serving demos ([`demo`]), and the decisions made from measurements: workload presets
//! ([`preset`]), capacity searches and deadline plans ([`capacity`]) and advice ([`advise`]).

pub mod sweep;
pub mod live;
pub mod demo;
pub mod lesson;
pub mod preset;
pub mod capacity;
pub mod advise;
pub mod fidelity;
