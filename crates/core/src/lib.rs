//! The execution core: everything between a request and a backend's forward pass.
//!
//! Backends (llama.cpp, candle, MLX) implement the small [`backend::Backend`] step
//! interface in their own crates; this crate schedules requests over it ([`scheduler`]),
//! runs it in a worker process ([`worker`], [`protocol`], [`coordinator`], over a
//! [`child`] process that answers in lines), drives any
//! [`target::Target`] through one client loop ([`client`]), generates traffic
//! ([`traffic`]), stamps every reply on the client side ([`records`]) and turns the stamps
//! into distributions ([`stats`]). It knows nothing of the machine, run files or printing.

pub mod defaults;
pub mod backend;
pub mod kind;
pub mod footprint;
pub mod scheduler;
pub mod speculative;
pub mod handoff;
pub mod split;
pub mod disaggregated;
pub mod spawn;
pub mod stats;
pub mod child;
pub mod coordinator;
pub mod protocol;
pub mod worker;
pub mod target;
pub mod client;
pub mod records;
pub mod traffic;
pub mod atomic_file;
pub mod invalid;
pub mod stamp;
pub mod date;
