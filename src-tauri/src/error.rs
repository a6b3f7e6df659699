//! The one error type commands return. It keeps its kind, so the UI can tell a missing
//! model from a busy sweep, and serialises as `{ "kind": "...", "message": "..." }`.

use serde::Serialize;

/// Why a command failed.
#[derive(Debug, thiserror::Error, Serialize, ts_rs::TS)]
#[serde(tag = "kind", content = "message", rename_all = "camelCase")]
pub enum CmdError {
    /// No model is open yet: open one first (`open_model`).
    #[error("no model is open: choose one first")]
    NoModel,
    /// The model could not be found, fetched or read.
    #[error("{0}")]
    Model(String),
    /// Live mode refused or failed.
    #[error("{0}")]
    Live(String),
    /// A sweep refused or failed.
    #[error("{0}")]
    Sweep(String),
    /// A server could not be added: unreachable, refused us, or a name already taken.
    #[error("{0}")]
    Server(String),
    /// Reading or writing a file failed.
    #[error("{0}")]
    Io(String),
    /// Something else is running that must finish first.
    #[error("{0}")]
    Busy(String),
}

/// What commands return.
pub type CmdResult<T> = Result<T, CmdError>;

impl CmdError {
    /// A model error with its whole cause chain on one line.
    pub fn model(e: anyhow::Error) -> Self {
        CmdError::Model(format!("{e:#}"))
    }

    /// Live mode's refusal (settings it cannot use, a session that has ended), as said.
    pub fn live(e: impl std::fmt::Display) -> Self {
        CmdError::Live(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_their_kind_on_the_wire() {
        let v = serde_json::to_value(CmdError::Live("bad".into())).unwrap();
        assert_eq!(v, serde_json::json!({"kind": "live", "message": "bad"}));
        let v = serde_json::to_value(CmdError::NoModel).unwrap();
        assert_eq!(v, serde_json::json!({"kind": "noModel"}));
    }
}
