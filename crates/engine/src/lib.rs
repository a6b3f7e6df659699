//! The engine: everything between a request and a backend's forward pass, in one process.
//!
//! Backends (llama.cpp, candle, MLX) implement the small [`backend::Backend`] step
//! interface in their own crates, and say what they can do in [`kind`]'s table; this crate
//! schedules requests over it ([`scheduler`], the one scheduler), drafts tokens for
//! speculative decoding ([`speculative`]), and hands a sequence's state from one device or
//! process to another ([`handoff`], [`split`]). [`defaults`] owns every default and limit.
//! Three small utilities every crate above uses live here too: files written whole
//! ([`atomic_file`]), whether a file is still the one read ([`stamp`]) and UTC dates
//! ([`date`]). It knows nothing of processes, clients, the machine, run files or printing.

pub mod defaults;
pub mod backend;
pub mod kind;
pub mod footprint;
pub mod scheduler;
pub mod speculative;
pub mod handoff;
pub mod split;
pub mod invalid;
pub mod atomic_file;
pub mod stamp;
pub mod date;
