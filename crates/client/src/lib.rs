//! The measuring client: what serves requests, seen from outside, and how it is measured.
//!
//! Anything that serves requests is a [`target::Target`] (our worker process, in
//! `lx-worker`; an OpenAI-compatible server, in `lx-openai`), speaking in [`protocol`]'s
//! replies. One client loop drives any target ([`client`]); [`traffic`] generates the
//! load of a sweep's point; every reply is stamped on the client's clock ([`records`]) and
//! the stamps become distributions ([`stats`]). Every figure the product reports is taken
//! here, so none depends on who scheduled the requests.

pub mod protocol;
pub mod target;
pub mod client;
pub mod records;
pub mod stats;
pub mod traffic;
