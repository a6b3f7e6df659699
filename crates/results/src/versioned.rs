//! The head of a self-describing result file: `schema` names what it is, `schema_version` how
//! new. Versions only ever add optional fields, so a reader takes every version up to its own.

use serde_json::Value;

/// What the bytes of a file that should hold `schema` turned out to be.
pub(crate) enum Head {
    NotJson(serde_json::Error),
    /// JSON of another kind, kept for a caller that reads other files too.
    Other(Value),
    /// A version newer than the reader's.
    Newer(u64),
    Ours(Value),
}

pub(crate) fn head(bytes: &[u8], schema: &str, newest: u32) -> Head {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Head::NotJson(e),
    };
    if value.get("schema").and_then(Value::as_str) != Some(schema) {
        return Head::Other(value);
    }
    match value.get("schema_version").and_then(Value::as_u64).unwrap_or(0) {
        v if v > u64::from(newest) => Head::Newer(v),
        _ => Head::Ours(value),
    }
}
