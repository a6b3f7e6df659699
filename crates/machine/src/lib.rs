//! The machine a run measures on: what it is ([`hardware`]) and how it is powered ([`power`]), what it does while a run goes
//! on ([`sensors`]: CPU, memory, GPU through NVML), how fast it can move memory and compute
//! ([`probe`]) and what that allows a model ([`roofline`]: the ceilings every figure is
//! drawn against).

pub mod hardware;
pub mod power;
pub mod sensors;
pub mod probe;
pub mod roofline;
