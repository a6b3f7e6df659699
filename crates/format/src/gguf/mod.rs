//! Our own reader (and a small writer) for GGUF model files, versions 2 and 3.
//!
//! [`GgufFile::open`] reads the header, every metadata key/value and every tensor
//! description, but none of the weights, so it is quick even on large files. Every
//! read is bounds-checked against the file length, and the file must be long
//! enough to hold every tensor's data as computed from its shape and ggml type.
//!
//! On top of the raw metadata sit two summaries shared by the whole workspace:
//! [`ModelFacts`] (what a result file records about the model) and [`ModelConfig`]
//! (the hyper-parameters the candle and MLX backends build their graphs from).
//!
//! [`GgufWriter`] builds small GGUF files, used to make test fixtures here and in
//! other crates.
//!
//! Layout of a GGUF file (all little-endian):
//! ```text
//! magic "GGUF" | version u32 | tensor count u64 | kv count u64
//! kv*      : key (string) | value type u32 | value
//! tensor*  : name (string) | n_dims u32 | dims u64 * n_dims | ggml type u32 | offset u64
//! padding to `general.alignment` (default 32)
//! data     : each tensor at data start + its offset (offsets are multiples of the alignment)
//! string   : length u64 | UTF-8 bytes (no terminator)
//! array    : element type u32 | count u64 | elements
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of each tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a ggml tensor has.
pub const MAX_DIMS: usize = 4;

/// Errors reading or writing a GGUF file. Each one reads as a sentence naming the file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a GGUF file ({}; a GGUF file starts with \"GGUF\")", path.display(), describe_start(found))]
    NotGguf { path: PathBuf, found: Vec<u8> },
    #[error("{}: unsupported GGUF version {version} (supported: 2 and 3){hint}", path.display())]
    UnsupportedVersion { path: PathBuf, version: u32, hint: &'static str },
    #[error(
        "{} is truncated: expected {what} ({needed} bytes at offset {offset}), but the file is only {file_len} bytes long",
        path.display()
    )]
    Truncated { path: PathBuf, what: String, offset: u64, needed: u64, file_len: u64 },
    #[error("{}: metadata key {key:?} has unknown value type {type_id}", path.display())]
    UnknownValueType { path: PathBuf, key: String, type_id: u32 },
    #[error("{}: tensor {tensor:?} has unknown ggml type id {type_id}", path.display())]
    UnknownTensorType { path: PathBuf, tensor: String, type_id: u32 },
    #[error("{}: tensor {tensor:?}: {reason}", path.display())]
    BadTensor { path: PathBuf, tensor: String, reason: String },
    #[error("{}: invalid metadata: {reason}", path.display())]
    BadMetadata { path: PathBuf, reason: String },
    #[error("{}: missing metadata key {key:?}", path.display())]
    MissingKey { path: PathBuf, key: String },
    #[error("{}: metadata key {key:?} holds {found}, expected {expected}", path.display())]
    WrongType { path: PathBuf, key: String, expected: &'static str, found: String },
    #[error("{}: tensor {tensor:?} not found", path.display())]
    NoSuchTensor { path: PathBuf, tensor: String },
}

fn describe_start(found: &[u8]) -> String {
    if found.is_empty() {
        "it is empty".to_string()
    } else {
        format!("it starts with {:?}", String::from_utf8_lossy(found))
    }
}

impl GgufError {
    /// True for [`GgufError::MissingKey`].
    pub fn is_missing_key(&self) -> bool {
        matches!(self, GgufError::MissingKey { .. })
    }
}

/// Turns "key missing" into `Ok(None)`, keeping every other error.
pub trait OptionalKey<T> {
    fn optional(self) -> Result<Option<T>, GgufError>;
}

impl<T> OptionalKey<T> for Result<T, GgufError> {
    fn optional(self) -> Result<Option<T>, GgufError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_missing_key() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

pub mod draft;
mod facts;
pub mod synth;
mod values;
mod writer;
#[cfg(test)]
mod tests;

pub use facts::*;
pub use values::*;
pub use writer::*;

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

/// A parsed GGUF file: metadata and tensor descriptions. Weights stay on disk.
#[derive(Debug, Clone)]
pub struct GgufFile {
    path: PathBuf,
    file_size: u64,
    version: u32,
    alignment: u64,
    data_offset: u64,
    /// Key/value pairs in file order.
    kvs: Vec<(String, Value)>,
    index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
}

struct Reader<'p> {
    inner: BufReader<File>,
    pos: u64,
    len: u64,
    path: &'p Path,
}

impl<'p> Reader<'p> {
    fn need(&self, n: u64, what: impl FnOnce() -> String) -> Result<(), GgufError> {
        if self.pos.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(GgufError::Truncated {
                path: self.path.to_path_buf(),
                what: what(),
                offset: self.pos,
                needed: n,
                file_len: self.len,
            });
        }
        Ok(())
    }

    fn bytes<const N: usize>(&mut self, what: impl FnOnce() -> String) -> Result<[u8; N], GgufError> {
        self.need(N as u64, what)?;
        let mut b = [0u8; N];
        self.inner.read_exact(&mut b).map_err(|e| self.io(e))?;
        self.pos += N as u64;
        Ok(b)
    }

    fn io(&self, source: io::Error) -> GgufError {
        GgufError::Io { path: self.path.to_path_buf(), source }
    }

    fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(|| format!("length of {}", what()))?;
        self.need(len, || format!("{} ({len} bytes of text)", what()))?;
        let mut buf = vec![0u8; len as usize];
        self.inner.read_exact(&mut buf).map_err(|e| self.io(e))?;
        self.pos += len;
        Ok(match String::from_utf8(buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Reads `count` fixed-size elements of `size` bytes each into one buffer.
    fn fixed(&mut self, count: u64, size: u64, what: &dyn Fn() -> String) -> Result<Vec<u8>, GgufError> {
        let total = count.saturating_mul(size);
        self.need(total, || format!("{} ({count} elements of {size} bytes)", what()))?;
        let mut buf = vec![0u8; total as usize];
        self.inner.read_exact(&mut buf).map_err(|e| self.io(e))?;
        self.pos += total;
        Ok(buf)
    }

    fn value(&mut self, ty: ValueType, key: &str) -> Result<Value, GgufError> {
        let what = || format!("value of metadata key {key:?}");
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.bytes(what)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.bytes(what)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.bytes(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.bytes(what)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.bytes(what)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.bytes(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.bytes(what)?)),
            ValueType::Bool => Value::Bool(u8::from_le_bytes(self.bytes(what)?) != 0),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.bytes(what)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.bytes(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.bytes(what)?)),
            ValueType::String => Value::String(self.string(&what)?),
            ValueType::Array => Value::Array(self.array(key, 0)?),
        })
    }

    fn array(&mut self, key: &str, depth: usize) -> Result<Array, GgufError> {
        if depth > 16 {
            return Err(GgufError::BadMetadata {
                path: self.path.to_path_buf(),
                reason: format!("key {key:?}: arrays nested more than 16 deep"),
            });
        }
        let type_id = self.u32(|| format!("array element type of metadata key {key:?}"))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            type_id,
        })?;
        let count = self.u64(|| format!("array length of metadata key {key:?}"))?;
        // Cheap check before allocating: every element takes at least min_size bytes.
        self.need(count.saturating_mul(ty.min_size()), || {
            format!("{count} {} elements of metadata key {key:?}", ty.name())
        })?;
        let what = || format!("elements of metadata key {key:?}");
        macro_rules! fixed {
            ($t:ty, $v:ident) => {{
                let n = std::mem::size_of::<$t>();
                let buf = self.fixed(count, n as u64, &what)?;
                Array::$v(buf.chunks_exact(n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect())
            }};
        }
        Ok(match ty {
            ValueType::U8 => Array::U8(self.fixed(count, 1, &what)?),
            ValueType::I8 => fixed!(i8, I8),
            ValueType::U16 => fixed!(u16, U16),
            ValueType::I16 => fixed!(i16, I16),
            ValueType::U32 => fixed!(u32, U32),
            ValueType::I32 => fixed!(i32, I32),
            ValueType::F32 => fixed!(f32, F32),
            ValueType::U64 => fixed!(u64, U64),
            ValueType::I64 => fixed!(i64, I64),
            ValueType::F64 => fixed!(f64, F64),
            ValueType::Bool => Array::Bool(self.fixed(count, 1, &what)?.into_iter().map(|b| b != 0).collect()),
            ValueType::String => {
                let mut v = Vec::with_capacity(count as usize);
                for i in 0..count {
                    v.push(self.string(&|| format!("string {i} of metadata key {key:?}"))?);
                }
                Array::String(v)
            }
            ValueType::Array => {
                let mut v = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    v.push(self.array(key, depth + 1)?);
                }
                Array::Array(v)
            }
        })
    }
}

impl GgufFile {
    /// Reads the header, metadata and tensor descriptions of a GGUF file (not the weights)
    /// and checks that the file is long enough to hold every tensor.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io_err = |source| GgufError::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io_err)?;
        let file_size = file.metadata().map_err(io_err)?.len();
        let mut r = Reader { inner: BufReader::with_capacity(1 << 20, file), pos: 0, len: file_size, path };

        // Magic: check what is there before complaining about length.
        let head_len = file_size.min(4) as usize;
        let mut head = vec![0u8; head_len];
        r.inner.read_exact(&mut head).map_err(io_err)?;
        r.pos = head_len as u64;
        if head.as_slice() != &GGUF_MAGIC[..head_len] || head_len < 4 {
            if head_len > 0 && head.as_slice() == &GGUF_MAGIC[..head_len] {
                return Err(GgufError::Truncated {
                    path: path.to_path_buf(),
                    what: "the 4-byte magic \"GGUF\"".into(),
                    offset: 0,
                    needed: 4,
                    file_len: file_size,
                });
            }
            return Err(GgufError::NotGguf { path: path.to_path_buf(), found: head });
        }

        let version = r.u32(|| "the format version".into())?;
        if version != 2 && version != 3 {
            let hint = if version == 1 {
                " (version 1 is the obsolete 2023 format; convert the model again)"
            } else if version.swap_bytes() <= 3 {
                " (this looks like a big-endian GGUF file)"
            } else {
                ""
            };
            return Err(GgufError::UnsupportedVersion { path: path.to_path_buf(), version, hint });
        }
        let n_tensors = r.u64(|| "the tensor count".into())?;
        let n_kv = r.u64(|| "the metadata key/value count".into())?;
        // Each kv takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8 + 4 + 4 + 8.
        r.need(n_kv.saturating_mul(13), || format!("{n_kv} metadata key/value pairs"))?;
        r.need(n_kv.saturating_mul(13).saturating_add(n_tensors.saturating_mul(24)), || {
            format!("{n_kv} metadata key/value pairs and {n_tensors} tensor descriptions")
        })?;

        let mut kvs = Vec::with_capacity(n_kv as usize);
        let mut index = HashMap::with_capacity(n_kv as usize);
        for i in 0..n_kv {
            let key = r.string(&|| format!("key of metadata pair {i}"))?;
            let type_id = r.u32(|| format!("value type of metadata key {key:?}"))?;
            let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
                path: path.to_path_buf(),
                key: key.clone(),
                type_id,
            })?;
            let value = r.value(ty, &key)?;
            if index.insert(key.clone(), kvs.len()).is_some() {
                return Err(GgufError::BadMetadata { path: path.to_path_buf(), reason: format!("duplicate key {key:?}") });
            }
            kvs.push((key, value));
        }

        let alignment = match kvs.get(index.get("general.alignment").copied().unwrap_or(usize::MAX)) {
            None => DEFAULT_ALIGNMENT,
            Some((_, v)) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => {
                    return Err(GgufError::BadMetadata {
                        path: path.to_path_buf(),
                        reason: format!("general.alignment is {}, expected a power of two", v.describe()),
                    })
                }
            },
        };

        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
        let mut names = std::collections::HashSet::with_capacity(n_tensors as usize);
        for i in 0..n_tensors {
            let name = r.string(&|| format!("name of tensor {i}"))?;
            let bad = |reason: String| GgufError::BadTensor { path: path.to_path_buf(), tensor: name.clone(), reason };
            let n_dims = r.u32(|| format!("dimension count of tensor {name:?}"))?;
            if n_dims as usize > MAX_DIMS {
                return Err(bad(format!("has {n_dims} dimensions, at most {MAX_DIMS} are allowed")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for d in 0..n_dims {
                dims.push(r.u64(|| format!("dimension {d} of tensor {name:?}"))?);
            }
            let type_id = r.u32(|| format!("ggml type of tensor {name:?}"))?;
            let offset = r.u64(|| format!("data offset of tensor {name:?}"))?;
            let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
                path: path.to_path_buf(),
                tensor: name.clone(),
                type_id,
            })?;
            if dims.iter().any(|&d| d > i64::MAX as u64) {
                return Err(bad(format!("dimension out of range: {dims:?}")));
            }
            let n_elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d).filter(|&n| n <= i64::MAX as u64));
            let Some(_n_elements) = n_elements else {
                return Err(bad(format!("shape {dims:?} has too many elements")));
            };
            let first = dims.first().copied().unwrap_or(1);
            if first % ggml_type.block_size() != 0 {
                return Err(bad(format!(
                    "shape {dims:?} does not fit type {ggml_type}: the first dimension ({first}) must be a multiple of its block size {}",
                    ggml_type.block_size()
                )));
            }
            if offset % alignment != 0 {
                return Err(bad(format!("data offset {offset} is not a multiple of the alignment {alignment}")));
            }
            if !names.insert(name.clone()) {
                return Err(bad("appears twice".into()));
            }
            tensors.push(TensorInfo { name, dims, ggml_type, offset });
        }

        let data_offset = if n_tensors > 0 { r.pos.div_ceil(alignment) * alignment } else { r.pos };
        for t in &tensors {
            let bytes = t.ggml_type.bytes_for(t.n_elements());
            let end = bytes.and_then(|b| data_offset.checked_add(t.offset)?.checked_add(b));
            if end.is_none_or(|end| end > file_size) {
                return Err(GgufError::Truncated {
                    path: path.to_path_buf(),
                    what: format!("data of tensor {:?} ({} {:?})", t.name, t.ggml_type, t.dims),
                    offset: data_offset.saturating_add(t.offset),
                    needed: bytes.unwrap_or(u64::MAX),
                    file_len: file_size,
                });
            }
        }

        Ok(GgufFile { path: path.to_path_buf(), file_size, version, alignment, data_offset, kvs, index, tensors })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Format version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// `general.alignment`, or 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Offset in the file where the tensor data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The value of a metadata key.
    pub fn metadata(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.kvs[i].1)
    }

    /// All metadata pairs, in file order.
    pub fn metadata_pairs(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.kvs.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Reads one tensor's raw bytes (as stored: quantized blocks for quantized types).
    pub fn read_tensor_bytes(&self, name: &str) -> Result<Vec<u8>, GgufError> {
        let t = self
            .tensor(name)
            .ok_or_else(|| GgufError::NoSuchTensor { path: self.path.clone(), tensor: name.to_string() })?;
        let io_err = |source| GgufError::Io { path: self.path.clone(), source };
        let mut f = File::open(&self.path).map_err(io_err)?;
        f.seek(SeekFrom::Start(self.data_offset + t.offset)).map_err(io_err)?;
        let mut buf = vec![0u8; t.n_bytes() as usize];
        f.read_exact(&mut buf).map_err(io_err)?;
        Ok(buf)
    }

    fn missing(&self, key: &str) -> GgufError {
        GgufError::MissingKey { path: self.path.clone(), key: key.to_string() }
    }

    fn wrong(&self, key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::WrongType { path: self.path.clone(), key: key.to_string(), expected, found: found.describe() }
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        f: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<T, GgufError> {
        let v = self.metadata(key).ok_or_else(|| self.missing(key))?;
        f(v).ok_or_else(|| self.wrong(key, expected, v))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.typed(key, "a string", Value::as_str)
    }

    /// Any integer type whose value fits in a u32.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.typed(key, "an integer from 0 to 4294967295", Value::as_u32)
    }

    /// Any integer type whose value fits in a u64.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }

    /// Any integer type whose value fits in an i64.
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        self.typed(key, "an integer", Value::as_i64)
    }

    /// A float (f32 or f64) or an integer.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        self.typed(key, "a number", Value::as_f32)
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        self.typed(key, "a bool", Value::as_bool)
    }

    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        self.typed(key, "an array", Value::as_array)
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        self.typed(key, "an array of strings", |v| match v {
            Value::Array(Array::String(s)) => Some(s.as_slice()),
            _ => None,
        })
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        self.typed(key, "an array of f32", |v| match v {
            Value::Array(Array::F32(s)) => Some(s.as_slice()),
            _ => None,
        })
    }

    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], GgufError> {
        self.typed(key, "an array of i32", |v| match v {
            Value::Array(Array::I32(s)) => Some(s.as_slice()),
            _ => None,
        })
    }

    /// An integer, or an array of integers (per-layer values) of which the largest is taken.
    fn get_u32_or_max(&self, key: &str) -> Result<u32, GgufError> {
        self.typed(key, "an integer or an array of integers", |v| match v {
            Value::Array(a) => a.ints()?.into_iter().max().and_then(|m| u32::try_from(m).ok()),
            other => other.as_u32(),
        })
    }

    /// `general.architecture`, e.g. `gemma3` or `llama`.
    pub fn architecture(&self) -> Result<&str, GgufError> {
        self.get_str("general.architecture")
    }

    /// `{architecture}.{suffix}`, e.g. `gemma3.block_count`.
    pub fn arch_key(&self, suffix: &str) -> Result<String, GgufError> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }

    /// Sum of all tensors' element counts.
    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().map(TensorInfo::n_elements).sum()
    }

    /// Number of tokens in the embedded vocabulary (or `{arch}.vocab_size`).
    pub fn vocab_size(&self) -> Option<u64> {
        if let Some(Value::Array(a)) = self.metadata("tokenizer.ggml.tokens") {
            return Some(a.len() as u64);
        }
        self.arch_key("vocab_size").ok().and_then(|k| self.get_u64(&k).ok())
    }
}
