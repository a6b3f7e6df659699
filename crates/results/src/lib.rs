//! What a run leaves, and everything that shows it: the run-file schema ([`results`]), the
//! tables printed as a sweep goes and by `lx show` ([`printers`]), the HTML page
//! ([`report`]), comparisons of runs ([`compare`]) and of repeated runs ([`repeats`]), what speculative
//! decoding did ([`speculation`]), what disaggregated serving moved ([`transfer`]), what a run decided (presets, capacity searches, deadline
//! plans, advice: [`decision`]); and the result files of
//! the studies that are not run files, with their tables ([`studies`]).

pub mod results;
pub mod printers;
pub mod compare;
pub mod report;
pub mod repeats;
pub mod speculation;
pub mod transfer;
pub mod decision;
pub mod studies;
pub mod bench;
mod versioned;
