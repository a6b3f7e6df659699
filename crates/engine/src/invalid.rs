//! A setting that cannot be used, as every check of settings reports it.

/// Which setting is wrong (its field's name in the plan or settings, so a front end can
/// point at it and a test can tell the cases apart) and why, in a sentence that names it as
/// the user gave it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct Invalid {
    pub field: &'static str,
    pub why: String,
}

impl Invalid {
    pub fn new(field: &'static str, why: impl Into<String>) -> Invalid {
        Invalid { field, why: why.into() }
    }
}
