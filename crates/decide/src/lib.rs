//! The decisions made from measurements: workload presets that say what a use looks like
//! ([`preset`]), capacity searches and deadline plans on one kept session ([`capacity`]),
//! and advice on which backend and settings to choose ([`advise`]).

pub mod preset;
pub mod capacity;
pub mod advise;
