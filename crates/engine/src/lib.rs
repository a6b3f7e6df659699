//! Latency Explorer's engine: everything that measures, and nothing that runs a model.
//!
//! Backends (llama.cpp, candle, MLX) implement the small [`backend::Backend`] step
//! interface in their own crates; this crate schedules requests over it
//! ([`scheduler`]), runs it in a worker process ([`worker`], [`protocol`]), generates
//! traffic ([`traffic`]) and stamps time on the client side ([`coordinator`], [`client`],
//! [`records`]), and turns the stamps into distributions ([`stats`]), result files
//! ([`results`]), tables ([`printers`]), comparisons of runs ([`compare`]) and pages
//! ([`report`]). It has no dependency on any backend library.

pub mod backend;
pub mod gguf;
pub mod arch;
pub mod tokenizer;
pub mod workload;
pub mod hardware;
pub mod scheduler;
pub mod stats;
pub mod coordinator;
pub mod protocol;
pub mod worker;
pub mod target;
pub mod client;
pub mod records;
pub mod traffic;
pub mod printers;
pub mod results;
pub mod atomic_file;
pub mod stamp;
pub mod date;
pub mod compare;
pub mod report;
pub mod repeats;
pub mod roofline;
pub mod probe;
pub mod sensors;
pub mod sweep;
pub mod live;
pub mod parity;
pub mod fuzz;
pub mod demo;
