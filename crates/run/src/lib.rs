//! The ways a run is made, shared by the CLI and the app: a sweep over a grid of points
//! ([`sweep`]), live mode that follows the user's settings as they change ([`live`]), and a
//! model's fidelity against a reference on a shipped text ([`fidelity`]). Each drives any
//! target through a spawner it is given, never a worker process of its own.

pub mod sweep;
pub mod live;
pub mod fidelity;
