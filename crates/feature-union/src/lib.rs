//! Nothing to call: this crate's dependencies, and the features it asks of them, are its
//! whole purpose (see its Cargo.toml). Every build of the workspace reaches it through
//! lx-format, so a dependency is compiled once with one set of features, whichever of the
//! CLI, the tests or the app is built first.
