//! A prefilled sequence's state on its way from one worker to another (disaggregated
//! prefill and decode).
//!
//! The backend saves a slot's cached keys and values as bytes of its own format
//! ([`crate::backend::Backend::save_state`]); this module frames them (a magic, the number of
//! positions, the length and a checksum, so a damaged or foreign blob is refused here with a
//! reason instead of reaching a library's parser) and moves them one of two ways: as text
//! inside the worker protocol's lines, through the coordinator (`pipe`), or as a file the
//! decoder reads and deletes (`file`, in shared memory where the system has it). Which path
//! costs what is part of what disaggregation teaches, so both are measured.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// How a prefilled sequence's state travels from the prefill worker to the decode worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum TransferVia {
    /// Inside the protocol's lines, read and written again by the coordinator.
    Pipe,
    /// A file in shared memory (`/dev/shm` where there is one), named in the lines: the
    /// default, as it costs a copy in and a copy out where the pipe also costs the text's
    /// encoding and two parses (4x the time for a 14 MB state on two cores, MEASUREMENTS).
    #[default]
    File,
}

impl TransferVia {
    pub const ALL: [TransferVia; 2] = [TransferVia::Pipe, TransferVia::File];

    pub fn name(self) -> &'static str {
        match self {
            TransferVia::Pipe => "pipe",
            TransferVia::File => "file",
        }
    }
}

impl std::str::FromStr for TransferVia {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TransferVia::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| format!("unknown transfer path '{s}' (expected pipe or file)"))
    }
}

/// Where the prefill worker puts a state: asked for per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum Route {
    Pipe,
    /// Files go into this directory (the coordinator's, removed with it).
    File { dir: PathBuf },
}

/// A saved state in transit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum Blob {
    Pipe { base64: String },
    File { path: PathBuf },
}

const MAGIC: &[u8; 4] = b"LXKV";
const VERSION: u32 = 1;
/// magic, version, positions, payload length, checksum.
const HEADER: usize = 4 + 4 + 4 + 8 + 8;

/// A 64-bit checksum of a state's positions and bytes, eight at a time (fast enough for tens
/// of MB per request; it guards against damage, not against anyone).
fn checksum(positions: u32, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (bytes.len() as u64 ^ K).wrapping_mul(K) ^ u64::from(positions);
    let words = bytes.chunks_exact(8);
    let rest = words.remainder();
    for w in words {
        h = (h ^ u64::from_le_bytes(w.try_into().expect("eight bytes"))).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    h ^ (h >> 31)
}

/// `payload` (a backend's saved state of `positions` positions) with its frame.
pub fn frame(positions: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&positions.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(positions, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The positions and payload of a framed state, or why it is not one.
pub fn unframe(bytes: &[u8]) -> Result<(u32, &[u8]), String> {
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        return Err(format!("not a saved sequence state ({} bytes without its header)", bytes.len()));
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"));
    let long = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    if word(4) != VERSION {
        return Err(format!("a saved state of format {}, this build reads {VERSION}", word(4)));
    }
    let (positions, len, sum) = (word(8), long(12), long(20));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("the saved state is cut or padded: {} bytes where its header says {len}", payload.len()));
    }
    if checksum(positions, payload) != sum {
        return Err("the saved state is damaged (its checksum does not match)".into());
    }
    Ok((positions, payload))
}

/// Sends framed state `bytes` of request `id` the way `route` asks.
pub fn put(route: &Route, id: u64, bytes: &[u8]) -> std::io::Result<Blob> {
    match route {
        Route::Pipe => Ok(Blob::Pipe { base64: base64::engine::general_purpose::STANDARD.encode(bytes) }),
        Route::File { dir } => {
            let path = dir.join(format!("request-{id}.kv"));
            std::fs::write(&path, bytes)?;
            Ok(Blob::File { path })
        }
    }
}

/// The framed bytes of `blob`; a file is deleted once read (it has one reader).
pub fn take(blob: &Blob) -> Result<Vec<u8>, String> {
    match blob {
        Blob::Pipe { base64 } => base64::engine::general_purpose::STANDARD.decode(base64).map_err(|e| format!("the state's text is not base64: {e}")),
        Blob::File { path } => {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read the state's file {}: {e}", path.display()))?;
            let _ = std::fs::remove_file(path);
            Ok(bytes)
        }
    }
}

/// Deletes what a blob left behind (a request that ended before its state was read).
pub fn discard(blob: &Blob) {
    if let Blob::File { path } = blob {
        let _ = std::fs::remove_file(path);
    }
}

/// Where state files go: shared memory where the system has it (the transfer then costs a
/// copy into memory and out again, never a disk), the temporary directory elsewhere.
pub fn file_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new().prefix("lx-kv-").tempdir_in(shm) {
            return Ok(dir);
        }
    }
    tempfile::Builder::new().prefix("lx-kv-").tempdir()
}

/// The layout our own backends (candle, MLX) save a cache in: a header of its shape, then
/// per layer the keys and then the values of every position, as little-endian f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct F32Cache {
    pub layers: usize,
    pub kv_heads: usize,
    pub key_length: usize,
    pub value_length: usize,
}

impl F32Cache {
    const HEADER: usize = 16;

    /// The header, for a buffer sized for `positions` positions.
    pub fn begin(&self, positions: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER + self.layers * self.layer_values(positions) * 4);
        for n in [self.layers, self.kv_heads, self.key_length, self.value_length] {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out
    }

    fn layer_values(&self, positions: usize) -> usize {
        self.kv_heads * positions * (self.key_length + self.value_length)
    }

    /// Appends values to a buffer [`F32Cache::begin`] started.
    pub fn push(out: &mut Vec<u8>, values: &[f32]) {
        out.extend(values.iter().flat_map(|x| x.to_le_bytes()));
    }

    /// Layer by layer, keys then values, the `positions` positions' values in `bytes`, once
    /// the header says this shape and the length fits; otherwise what differs.
    pub fn read<'b>(&self, bytes: &'b [u8], positions: usize) -> Result<impl Iterator<Item = (Vec<f32>, Vec<f32>)> + 'b, String> {
        let mine = [self.layers, self.kv_heads, self.key_length, self.value_length];
        let header: Vec<usize> = bytes.chunks_exact(4).take(4).map(|w| u32::from_le_bytes(w.try_into().expect("four bytes")) as usize).collect();
        if header != mine {
            return Err(format!("a state of shape {header:?} (layers, key heads, key and value lengths) cannot go into a cache of shape {mine:?}"));
        }
        let want = Self::HEADER + self.layers * self.layer_values(positions) * 4;
        if bytes.len() != want {
            return Err(format!("{} bytes where {positions} positions take {want}", bytes.len()));
        }
        let floats = |b: &[u8]| b.chunks_exact(4).map(|w| f32::from_le_bytes(w.try_into().expect("four bytes"))).collect::<Vec<f32>>();
        let (k, v) = (self.kv_heads * positions * self.key_length * 4, self.kv_heads * positions * self.value_length * 4);
        Ok(bytes[Self::HEADER..].chunks_exact((k + v).max(1)).map(move |layer| (floats(&layer[..k]), floats(&layer[k..]))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_state_reads_back_and_damage_is_refused_with_why() {
        let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let framed = frame(37, &payload);
        assert_eq!(unframe(&framed).unwrap(), (37, &payload[..]));
        let mut flipped = framed.clone();
        flipped[HEADER + 500] ^= 1;
        assert_eq!(unframe(&flipped).unwrap_err(), "the saved state is damaged (its checksum does not match)");
        assert!(unframe(&framed[..framed.len() - 1]).unwrap_err().contains("cut or padded"));
        assert!(unframe(b"GGUF and more bytes than a header has").unwrap_err().starts_with("not a saved sequence state"));
        let mut other = framed.clone();
        other[4] = 9;
        assert_eq!(unframe(&other).unwrap_err(), "a saved state of format 9, this build reads 1");
        // Any damage anywhere is caught, header included.
        let mut m = lx_test_support::fuzz::Mutator::new(0x5eed_0bad);
        for case in 0..500 {
            let mut bytes = framed.clone();
            m.mutate(&mut bytes, 0);
            if bytes != framed {
                assert!(unframe(&bytes).is_err(), "case {case}");
            }
        }
    }

    #[test]
    fn an_f32_cache_reads_back_and_another_shape_is_refused() {
        let shape = F32Cache { layers: 2, kv_heads: 1, key_length: 2, value_length: 3 };
        let mut bytes = shape.begin(2);
        for layer in 0..2 {
            F32Cache::push(&mut bytes, &[layer as f32; 4]);
            F32Cache::push(&mut bytes, &[-(layer as f32); 6]);
        }
        let layers: Vec<_> = shape.read(&bytes, 2).unwrap().collect();
        assert_eq!(layers, vec![(vec![0.0; 4], vec![-0.0; 6]), (vec![1.0; 4], vec![-1.0; 6])]);
        assert_eq!(shape.read(&bytes, 3).err().unwrap(), "96 bytes where 3 positions take 136");
        let other = F32Cache { layers: 3, ..shape };
        assert!(other.read(&bytes, 2).err().unwrap().starts_with("a state of shape [2, 1, 2, 3]"));
        assert_eq!(shape.read(&shape.begin(0), 0).unwrap().count(), 0);
    }

    #[test]
    fn both_routes_deliver_the_same_bytes_and_a_file_is_read_once() {
        let framed = frame(3, b"some cached keys and values");
        assert_eq!(take(&put(&Route::Pipe, 1, &framed).unwrap()).unwrap(), framed);
        let dir = file_dir().unwrap();
        let blob = put(&Route::File { dir: dir.path().to_path_buf() }, 2, &framed).unwrap();
        assert_eq!(take(&blob).unwrap(), framed);
        assert!(take(&blob).unwrap_err().starts_with("cannot read the state's file"));
        assert!(take(&Blob::Pipe { base64: "not base64!".into() }).unwrap_err().starts_with("the state's text is not base64"));
    }
}
