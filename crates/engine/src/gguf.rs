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

// ---------------------------------------------------------------------------------------------
// Metadata values
// ---------------------------------------------------------------------------------------------

/// GGUF metadata value type ids, as stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Smallest encoding of one element of this type (strings and arrays: their length prefix).
    fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// GGUF strings should be UTF-8; invalid bytes are replaced with U+FFFD.
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array: all elements have one type; arrays may nest.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Array {
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Integer elements widened to i128 (None for non-integer arrays).
    fn ints(&self) -> Option<Vec<i128>> {
        Some(match self {
            Array::U8(v) => v.iter().map(|&x| x as i128).collect(),
            Array::I8(v) => v.iter().map(|&x| x as i128).collect(),
            Array::U16(v) => v.iter().map(|&x| x as i128).collect(),
            Array::I16(v) => v.iter().map(|&x| x as i128).collect(),
            Array::U32(v) => v.iter().map(|&x| x as i128).collect(),
            Array::I32(v) => v.iter().map(|&x| x as i128).collect(),
            Array::U64(v) => v.iter().map(|&x| x as i128).collect(),
            Array::I64(v) => v.iter().map(|&x| x as i128).collect(),
            _ => return None,
        })
    }
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Any integer type, widened.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v as i128,
            Value::I8(v) => v as i128,
            Value::U16(v) => v as i128,
            Value::I16(v) => v as i128,
            Value::U32(v) => v as i128,
            Value::I32(v) => v as i128,
            Value::U64(v) => v as i128,
            Value::I64(v) => v as i128,
            _ => return None,
        })
    }

    /// Any integer type that fits in a u64.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|v| u64::try_from(v).ok())
    }

    /// Any integer type that fits in a u32.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_i128().and_then(|v| u32::try_from(v).ok())
    }

    /// Any integer type that fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_i128().and_then(|v| i64::try_from(v).ok())
    }

    /// A float, or an integer converted to one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_i128().map(|v| v as f64),
        }
    }

    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            _ => self.as_f64().map(|v| v as f32),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for error messages: `u32 7`, `string "llama"`, `array of 3 f32`.
    pub fn describe(&self) -> String {
        match self {
            Value::String(s) => {
                let short: String = s.chars().take(40).collect();
                format!("string {short:?}")
            }
            Value::Array(a) => format!("array of {} {}", a.len(), a.element_type().name()),
            other => format!("{} {}", other.value_type().name(), other),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(v) => write!(f, "{v}"),
            Value::Array(a) => write!(f, "[{} x {}]", a.len(), a.element_type().name()),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl From<$t> for Value { fn from(x: $t) -> Value { Value::$v(x) } })*
    };
}
value_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64, Array => Array);

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

macro_rules! array_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(
            impl From<Vec<$t>> for Array { fn from(x: Vec<$t>) -> Array { Array::$v(x) } }
            impl From<Vec<$t>> for Value { fn from(x: Vec<$t>) -> Value { Value::Array(Array::$v(x)) } }
        )*
    };
}
array_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64, Array => Array);

impl From<Vec<&str>> for Value {
    fn from(x: Vec<&str>) -> Value {
        Value::Array(Array::String(x.into_iter().map(str::to_string).collect()))
    }
}

// ---------------------------------------------------------------------------------------------
// ggml tensor types
// ---------------------------------------------------------------------------------------------

/// ggml tensor element types that can appear in a GGUF file.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// (type, id, name, elements per block, bytes per block), from ggml's type traits.
const GGML_TYPES: &[(GgmlType, u32, &str, u64, u64)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 2 + 16),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 2 + 2 + 16),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 2 + 4 + 16),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 2 + 2 + 4 + 16),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 2 + 32),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 2 + 2 + 32),
    (GgmlType::Q2_K, 10, "Q2_K", 256, 2 + 2 + 16 + 64),
    (GgmlType::Q3_K, 11, "Q3_K", 256, 2 + 64 + 32 + 12),
    (GgmlType::Q4_K, 12, "Q4_K", 256, 2 + 2 + 12 + 128),
    (GgmlType::Q5_K, 13, "Q5_K", 256, 2 + 2 + 12 + 128 + 32),
    (GgmlType::Q6_K, 14, "Q6_K", 256, 2 + 16 + 192),
    (GgmlType::Q8_K, 15, "Q8_K", 256, 4 + 256 + 32),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", 256, 2 + 64),
    (GgmlType::IQ2_XS, 17, "IQ2_XS", 256, 2 + 64 + 8),
    (GgmlType::IQ3_XXS, 18, "IQ3_XXS", 256, 2 + 96),
    (GgmlType::IQ1_S, 19, "IQ1_S", 256, 2 + 32 + 16),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 2 + 16),
    (GgmlType::IQ3_S, 21, "IQ3_S", 256, 2 + 104 + 4),
    (GgmlType::IQ2_S, 22, "IQ2_S", 256, 2 + 64 + 16),
    (GgmlType::IQ4_XS, 23, "IQ4_XS", 256, 2 + 2 + 4 + 128),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::IQ1_M, 29, "IQ1_M", 256, 32 + 16 + 8),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::TQ1_0, 34, "TQ1_0", 256, 2 + 4 + 48),
    (GgmlType::TQ2_0, 35, "TQ2_0", 256, 2 + 64),
    (GgmlType::MXFP4, 39, "MXFP4", 32, 1 + 16),
    (GgmlType::NVFP4, 40, "NVFP4", 64, 4 + 32),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 2 + 16),
    (GgmlType::Q2_0, 42, "Q2_0", 64, 2 + 16),
];

impl GgmlType {
    fn row(self) -> &'static (GgmlType, u32, &'static str, u64, u64) {
        GGML_TYPES.iter().find(|r| r.0 == self).expect("every GgmlType has a row")
    }

    /// The type with this on-disk id, if we know it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().find(|r| r.1 == id).map(|r| r.0)
    }

    /// The on-disk id.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name, e.g. `Q4_K`.
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block (1 for plain types).
    pub fn block_size(self) -> u64 {
        self.row().3
    }

    /// Bytes per block.
    pub fn type_size(self) -> u64 {
        self.row().4
    }

    /// Bytes taken by `n_elements` elements (which must be a multiple of the block size).
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        (n_elements / self.block_size()).checked_mul(self.type_size())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One tensor's description (not its data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the innermost (contiguous) one.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements (product of the dimensions; 1 for a scalar).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Bytes of data.
    pub fn n_bytes(&self) -> u64 {
        self.ggml_type.bytes_for(self.n_elements()).unwrap_or(u64::MAX)
    }
}

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

// ---------------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------------

/// llama.cpp's name for a `general.file_type` value (`LLAMA_FTYPE_*`).
pub fn file_type_name(file_type: u32) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        39 => "NVFP4",
        40 => "Q1_0",
        41 => "Q2_0",
        _ => return None,
    })
}

/// How a model's weights are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantization {
    /// `general.file_type` as stored, if present.
    pub file_type: Option<u32>,
    /// llama.cpp's name for it, e.g. `Q4_K_M`. When `general.file_type` is absent or unknown,
    /// the most common ggml type of the matrices followed by ` (guessed)`.
    pub name: String,
    /// Number of tensors of each ggml type, e.g. `{"F32": 163, "Q4_K": 50, ...}`.
    pub tensor_types: BTreeMap<String, u64>,
}

/// What a result file records about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    pub path: PathBuf,
    pub file_size: u64,
    pub gguf_version: u32,
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Sum of all tensors' elements.
    pub parameter_count: u64,
    pub tensor_count: u64,
    pub quantization: Quantization,
    pub context_length: Option<u64>,
    pub embedding_length: Option<u64>,
    pub block_count: Option<u64>,
    pub head_count: Option<u64>,
    pub head_count_kv: Option<u64>,
    pub vocab_size: Option<u64>,
}

impl ModelFacts {
    /// Summarises a parsed file. Fails only if `general.architecture` is missing or not a string;
    /// other missing keys become `None`.
    pub fn from_gguf(g: &GgufFile) -> Result<ModelFacts, GgufError> {
        let arch = g.architecture()?.to_string();
        let arch_u64 = |suffix: &str| -> Option<u64> { g.get_u32_or_max(&format!("{arch}.{suffix}")).ok().map(u64::from) };
        let arch_u64_wide = |suffix: &str| -> Option<u64> {
            g.get_u64(&format!("{arch}.{suffix}")).ok().or_else(|| arch_u64(suffix))
        };

        let mut tensor_types: BTreeMap<String, u64> = BTreeMap::new();
        let mut matrix_types: BTreeMap<GgmlType, u64> = BTreeMap::new();
        for t in g.tensors() {
            *tensor_types.entry(t.ggml_type.name().to_string()).or_default() += 1;
            if t.dims.len() >= 2 {
                *matrix_types.entry(t.ggml_type).or_default() += t.n_elements();
            }
        }
        let file_type = g.get_u32("general.file_type").ok();
        let name = match file_type.and_then(|ft| file_type_name(ft & !1024)) {
            Some(n) if file_type.unwrap_or(0) & 1024 != 0 => format!("{n} (guessed)"),
            Some(n) => n.to_string(),
            None => match matrix_types.iter().max_by_key(|(_, n)| **n) {
                Some((t, _)) => format!("{t} (guessed)"),
                None => "unknown".to_string(),
            },
        };

        Ok(ModelFacts {
            path: g.path().to_path_buf(),
            file_size: g.file_size(),
            gguf_version: g.version(),
            name: g.get_str("general.name").ok().map(str::to_string),
            parameter_count: g.parameter_count(),
            tensor_count: g.tensors().len() as u64,
            quantization: Quantization { file_type, name, tensor_types },
            context_length: arch_u64_wide("context_length"),
            embedding_length: arch_u64_wide("embedding_length"),
            block_count: arch_u64_wide("block_count"),
            head_count: arch_u64("attention.head_count"),
            head_count_kv: arch_u64("attention.head_count_kv"),
            vocab_size: g.vocab_size(),
            architecture: arch,
        })
    }

    /// Opens the file and summarises it.
    pub fn read(path: impl AsRef<Path>) -> Result<ModelFacts, GgufError> {
        ModelFacts::from_gguf(&GgufFile::open(path)?)
    }
}

/// RoPE context scaling, from `{arch}.rope.scaling.*`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// `none`, `linear`, `yarn`, `longrope`, ...
    pub kind: String,
    pub factor: Option<f32>,
    pub original_context_length: Option<u32>,
}

/// Transformer hyper-parameters from `{arch}.*` keys, shared by the candle and MLX backends.
///
/// Defaults follow llama.cpp: `head_count_kv` defaults to `head_count`, `key_length` and
/// `value_length` to `embedding_length / head_count`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub architecture: String,
    pub context_length: u32,
    pub embedding_length: u32,
    pub feed_forward_length: u32,
    pub block_count: u32,
    pub head_count: u32,
    pub head_count_kv: u32,
    /// Per-head size of keys (and queries).
    pub key_length: u32,
    /// Per-head size of values.
    pub value_length: u32,
    /// `attention.layer_norm_rms_epsilon` (RMSNorm models).
    pub layer_norm_rms_epsilon: Option<f32>,
    /// `attention.layer_norm_epsilon` (LayerNorm models).
    pub layer_norm_epsilon: Option<f32>,
    /// `rope.freq_base`, when present (llama.cpp's default is 10000).
    pub rope_freq_base: Option<f32>,
    /// `rope.dimension_count`, when present.
    pub rope_dimension_count: Option<u32>,
    /// `attention.sliding_window`, when present (Gemma 2/3, Mistral).
    pub sliding_window: Option<u32>,
    /// `rope.scaling.*`, when present.
    pub rope_scaling: Option<RopeScaling>,
    /// Number of tokens in the vocabulary.
    pub vocab_size: u32,
}

impl ModelConfig {
    pub fn from_gguf(g: &GgufFile) -> Result<ModelConfig, GgufError> {
        let arch = g.architecture()?.to_string();
        let key = |s: &str| format!("{arch}.{s}");
        let req = |s: &str| g.get_u32(&key(s));
        let head_count = req("attention.head_count")?;
        let embedding_length = req("embedding_length")?;
        if head_count == 0 {
            return Err(GgufError::BadMetadata { path: g.path().to_path_buf(), reason: format!("{} is 0", key("attention.head_count")) });
        }
        let default_head = embedding_length / head_count;
        let rope_scaling = match g.get_str(&key("rope.scaling.type")).optional()? {
            None => None,
            Some(kind) => Some(RopeScaling {
                kind: kind.to_string(),
                factor: g.get_f32(&key("rope.scaling.factor")).optional()?,
                original_context_length: g.get_u32(&key("rope.scaling.original_context_length")).optional()?,
            }),
        };
        let vocab_size = match g.vocab_size() {
            Some(v) => u32::try_from(v).map_err(|_| GgufError::BadMetadata {
                path: g.path().to_path_buf(),
                reason: format!("vocabulary of {v} tokens is too large"),
            })?,
            None => return Err(g.missing("tokenizer.ggml.tokens")),
        };
        Ok(ModelConfig {
            context_length: req("context_length")?,
            embedding_length,
            feed_forward_length: g.get_u32_or_max(&key("feed_forward_length"))?,
            block_count: req("block_count")?,
            head_count,
            head_count_kv: req("attention.head_count_kv").optional()?.unwrap_or(head_count),
            key_length: req("attention.key_length").optional()?.unwrap_or(default_head),
            value_length: req("attention.value_length").optional()?.unwrap_or(default_head),
            layer_norm_rms_epsilon: g.get_f32(&key("attention.layer_norm_rms_epsilon")).optional()?,
            layer_norm_epsilon: g.get_f32(&key("attention.layer_norm_epsilon")).optional()?,
            rope_freq_base: g.get_f32(&key("rope.freq_base")).optional()?,
            rope_dimension_count: req("rope.dimension_count").optional()?,
            sliding_window: req("attention.sliding_window").optional()?,
            rope_scaling,
            vocab_size,
            architecture: arch,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

/// Builds small GGUF files (version 3), mainly as test fixtures.
///
/// ```
/// # use lx_engine::gguf::{GgufWriter, GgufFile};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("tiny.gguf");
/// GgufWriter::new()
///     .kv("general.architecture", "llama")
///     .kv("llama.block_count", 2u32)
///     .tensor_f32("token_embd.weight", &[4, 3], &[0.0; 12])
///     .write(&path)
///     .unwrap();
/// let g = GgufFile::open(&path).unwrap();
/// assert_eq!(g.architecture().unwrap(), "llama");
/// assert_eq!(g.tensors()[0].dims, vec![4, 3]);
/// ```
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    kvs: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

#[derive(Debug, Clone)]
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    data: Vec<u8>,
    /// Raw tensors are written as given, even when inconsistent (for broken fixtures).
    checked: bool,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter { version: 3, alignment: DEFAULT_ALIGNMENT, kvs: Vec::new(), tensors: Vec::new() }
    }

    /// Writes format version 2 instead of 3 (the layouts are the same).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Adds (or replaces) a metadata pair. Setting `general.alignment` (a u32) changes the alignment used.
    pub fn kv(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        let key = key.into();
        let value = value.into();
        if key == "general.alignment" {
            if let Some(a) = value.as_u64().filter(|a| a.is_power_of_two()) {
                self.alignment = a;
            }
        }
        match self.kvs.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.kvs.push((key, value)),
        }
        self
    }

    /// Adds an F32 tensor. `dims` are in ggml order (innermost first); `data.len()` must equal their product
    /// ([`GgufWriter::write`] fails otherwise).
    pub fn tensor_f32(mut self, name: impl Into<String>, dims: &[u64], data: &[f32]) -> Self {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 0, data: bytes, checked: true });
        self
    }

    /// Adds an F16 tensor from f32 values (rounded to nearest even).
    pub fn tensor_f16(mut self, name: impl Into<String>, dims: &[u64], data: &[f32]) -> Self {
        let bytes = data.iter().flat_map(|&v| f32_to_f16_bits(v).to_le_bytes()).collect();
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 1, data: bytes, checked: true });
        self
    }

    /// Adds a Q8_0 tensor from f32 values: blocks of 32 values, each an f16 scale (the
    /// block's largest magnitude over 127) and 32 signed bytes. `dims[0]` must be a multiple
    /// of 32, as ggml requires of a Q8_0 row.
    pub fn tensor_q8_0(mut self, name: impl Into<String>, dims: &[u64], data: &[f32]) -> Self {
        let mut bytes = Vec::with_capacity(data.len() / 32 * 34);
        for block in data.chunks(32) {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            bytes.extend_from_slice(&f32_to_f16_bits(d).to_le_bytes());
            bytes.extend(block.iter().map(|v| (v * inv).round().clamp(-127.0, 127.0) as i8 as u8));
        }
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 8, data: bytes, checked: true });
        self
    }

    /// Adds a tensor of type `ty` from its raw bytes ([`GgufWriter::write`] fails when their
    /// count does not match `dims`).
    pub fn tensor(mut self, name: impl Into<String>, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Self {
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: ty.id(), data, checked: true });
        self
    }

    /// Adds a tensor exactly as given: any type id, any bytes, no checks. For broken fixtures.
    pub fn tensor_raw(mut self, name: impl Into<String>, dims: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id, data, checked: false });
        self
    }

    /// The file's bytes. Fails if a checked tensor's data does not match its shape.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let path = PathBuf::from("<GgufWriter>");
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (k, v) in &self.kvs {
            put_str(&mut out, k);
            out.extend_from_slice(&v.value_type().id().to_le_bytes());
            put_value(&mut out, v);
        }
        let align = self.alignment;
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            if t.checked {
                let ty = GgmlType::from_id(t.type_id).expect("checked tensors have known types");
                let n: u64 = t.dims.iter().product();
                let expected = ty.bytes_for(n).unwrap_or(u64::MAX);
                if t.data.len() as u64 != expected {
                    return Err(GgufError::BadTensor {
                        path,
                        tensor: t.name.clone(),
                        reason: format!(
                            "shape {:?} of type {ty} needs {expected} bytes ({n} values), but {} bytes were given",
                            t.dims,
                            t.data.len()
                        ),
                    });
                }
            }
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + t.data.len() as u64).div_ceil(align) * align;
        }
        if !self.tensors.is_empty() {
            let pad = (out.len() as u64).div_ceil(align) * align;
            out.resize(pad as usize, 0);
        }
        let data_start = out.len() as u64;
        for (t, off) in self.tensors.iter().zip(offsets) {
            out.resize((data_start + off) as usize, 0);
            out.extend_from_slice(&t.data);
        }
        if !self.tensors.is_empty() {
            let end = (out.len() as u64).div_ceil(align) * align;
            out.resize(end as usize, 0);
        }
        Ok(out)
    }

    /// Writes the file, atomically: a reader sees the whole file or none.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        let path = path.as_ref();
        let bytes = self.to_bytes().map_err(|e| match e {
            GgufError::BadTensor { tensor, reason, .. } => GgufError::BadTensor { path: path.to_path_buf(), tensor, reason },
            other => other,
        })?;
        let io_err = |source| GgufError::Io { path: path.to_path_buf(), source };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let written = File::create(&tmp).and_then(|mut f| {
            f.write_all(&bytes)?;
            f.flush()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
            std::fs::remove_file(&tmp).ok();
            return Err(io_err(e));
        }
        Ok(())
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.element_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_str(out, s)),
        Array::Array(v) => v.iter().for_each(|inner| put_array(out, inner)),
    }
}

/// IEEE half from single, round to nearest even.
fn f32_to_f16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x007f_ffff;
    if exp == 0xff {
        // Inf or NaN (keep NaN quiet).
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut h = (m >> shift) as u16;
        if rest > half || (rest == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h;
    }
    let mut h = ((e as u32) << 10 | (mant >> 13)) as u16;
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1; // may carry into the exponent, which is correct rounding
    }
    sign | h
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> GgufWriter {
        GgufWriter::new()
            .kv("general.architecture", "llama")
            .kv("general.name", "tiny")
            .kv("general.file_type", 1u32)
            .kv("llama.context_length", 128u32)
            .kv("llama.embedding_length", 8u64)
            .kv("llama.feed_forward_length", 16i32)
            .kv("llama.block_count", 2u16)
            .kv("llama.attention.head_count", 2u8)
            .kv("llama.attention.layer_norm_rms_epsilon", 1e-6f32)
            .kv("llama.rope.freq_base", 10000.0f64)
            .kv("tokenizer.ggml.tokens", vec!["<unk>", "<s>", "</s>", "a"])
            .tensor_f32("token_embd.weight", &[8, 4], &(0..32).map(|i| i as f32).collect::<Vec<_>>())
            .tensor_f16("output_norm.weight", &[8], &[1.0, 0.5, -2.0, 65504.0, 1e-8, 1.000_488_3, -0.0, 3.25])
    }

    fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn roundtrip_all_value_types_and_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let nested = Array::Array(vec![Array::U8(vec![1, 2]), Array::String(vec!["x".into()]), Array::Array(vec![Array::F64(vec![0.5])])]);
        let w = tiny()
            .kv("t.u8", 200u8)
            .kv("t.i8", -5i8)
            .kv("t.u16", 60000u16)
            .kv("t.i16", -300i16)
            .kv("t.u32", 4_000_000_000u32)
            .kv("t.i32", -7i32)
            .kv("t.f32", 1.5f32)
            .kv("t.bool", true)
            .kv("t.str", "héllo ▁ 世界")
            .kv("t.u64", u64::MAX)
            .kv("t.i64", i64::MIN)
            .kv("t.f64", -2.25f64)
            .kv("t.nested", nested.clone())
            .kv("t.bools", vec![true, false, true])
            .kv("t.empty", Vec::<i32>::new());
        for version in [2, 3] {
            let p = dir.path().join(format!("v{version}.gguf"));
            w.clone().version(version).write(&p).unwrap();
            let g = GgufFile::open(&p).unwrap();
            assert_eq!(g.version(), version);
            assert_eq!(g.metadata("t.u8"), Some(&Value::U8(200)));
            assert_eq!(g.metadata("t.i8"), Some(&Value::I8(-5)));
            assert_eq!(g.metadata("t.u16"), Some(&Value::U16(60000)));
            assert_eq!(g.metadata("t.i16"), Some(&Value::I16(-300)));
            assert_eq!(g.get_u32("t.u32").unwrap(), 4_000_000_000);
            assert_eq!(g.get_i64("t.i32").unwrap(), -7);
            assert_eq!(g.get_f32("t.f32").unwrap(), 1.5);
            assert!(g.get_bool("t.bool").unwrap());
            assert_eq!(g.get_str("t.str").unwrap(), "héllo ▁ 世界");
            assert_eq!(g.get_u64("t.u64").unwrap(), u64::MAX);
            assert_eq!(g.get_i64("t.i64").unwrap(), i64::MIN);
            assert_eq!(g.get_f32("t.f64").unwrap(), -2.25);
            assert_eq!(g.metadata("t.nested"), Some(&Value::Array(nested.clone())));
            assert_eq!(g.metadata("t.bools"), Some(&Value::Array(Array::Bool(vec![true, false, true]))));
            assert_eq!(g.get_array("t.empty").unwrap().len(), 0);
            assert_eq!(g.get_str_array("tokenizer.ggml.tokens").unwrap()[3], "a");
            // get_u32 accepts any integer type that fits
            assert_eq!(g.get_u32("llama.block_count").unwrap(), 2);
            assert_eq!(g.get_u32("llama.attention.head_count").unwrap(), 2);
            assert_eq!(g.get_u32("llama.embedding_length").unwrap(), 8);
            assert!(matches!(g.get_u32("t.i32"), Err(GgufError::WrongType { .. })));
            assert!(matches!(g.get_u32("t.u64"), Err(GgufError::WrongType { .. })));
            assert!(matches!(g.get_str("nope"), Err(GgufError::MissingKey { .. })));
            assert_eq!(g.get_str("nope").optional().unwrap(), None);
            let msg = g.get_str("t.u8").unwrap_err().to_string();
            assert!(msg.contains("t.u8") && msg.contains("expected a string"), "{msg}");

            assert_eq!(g.tensors().len(), 2);
            let t = &g.tensors()[0];
            assert_eq!((t.name.as_str(), t.dims.as_slice(), t.ggml_type, t.offset), ("token_embd.weight", &[8u64, 4][..], GgmlType::F32, 0));
            let t2 = &g.tensors()[1];
            assert_eq!(t2.ggml_type, GgmlType::F16);
            assert_eq!(t2.offset % g.alignment(), 0);
            assert_eq!(g.data_offset() % 32, 0);
            let data = g.read_tensor_bytes("token_embd.weight").unwrap();
            let vals: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            assert_eq!(vals, (0..32).map(|i| i as f32).collect::<Vec<_>>());
            let h = g.read_tensor_bytes("output_norm.weight").unwrap();
            let h: Vec<u16> = h.chunks_exact(2).map(|c| u16::from_le_bytes(c.try_into().unwrap())).collect();
            assert_eq!(h, vec![0x3c00, 0x3800, 0xc000, 0x7bff, 0x0000, 0x3c00, 0x8000, 0x4280]);
        }
    }

    #[test]
    fn facts_and_config_from_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tiny.gguf");
        tiny().write(&p).unwrap();
        let g = GgufFile::open(&p).unwrap();
        let f = ModelFacts::from_gguf(&g).unwrap();
        assert_eq!(f.architecture, "llama");
        assert_eq!(f.name.as_deref(), Some("tiny"));
        assert_eq!(f.parameter_count, 40);
        assert_eq!(f.quantization.name, "F16");
        assert_eq!(f.quantization.tensor_types.get("F32"), Some(&1));
        assert_eq!(f.quantization.tensor_types.get("F16"), Some(&1));
        assert_eq!((f.context_length, f.embedding_length, f.block_count, f.head_count), (Some(128), Some(8), Some(2), Some(2)));
        assert_eq!(f.head_count_kv, None);
        assert_eq!(f.vocab_size, Some(4));
        let json = serde_json::to_string(&f).unwrap();
        let back: ModelFacts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);

        let c = ModelConfig::from_gguf(&g).unwrap();
        assert_eq!(c.head_count_kv, 2);
        assert_eq!(c.key_length, 4);
        assert_eq!(c.feed_forward_length, 16);
        assert_eq!(c.layer_norm_rms_epsilon, Some(1e-6));
        assert_eq!(c.rope_freq_base, Some(10000.0));
        assert_eq!(c.sliding_window, None);
        assert_eq!(c.rope_scaling, None);
        assert_eq!(c.vocab_size, 4);
    }

    #[test]
    fn not_gguf() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("text.gguf", &b"hello world, not a model"[..]), ("short.gguf", b"GG"), ("empty.gguf", b"")] {
            let p = write(&dir, name, bytes);
            let err = GgufFile::open(&p).unwrap_err();
            let msg = err.to_string();
            if name == "short.gguf" {
                assert!(matches!(err, GgufError::Truncated { .. }), "{msg}");
            } else {
                assert!(matches!(err, GgufError::NotGguf { .. }), "{msg}");
                assert!(msg.contains("not a GGUF file") && msg.contains(name), "{msg}");
            }
        }
        let err = GgufFile::open(dir.path().join("absent.gguf")).unwrap_err();
        assert!(matches!(err, GgufError::Io { .. }) && err.to_string().contains("absent.gguf"));
    }

    #[test]
    fn bad_versions() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = tiny().to_bytes().unwrap();
        bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
        let err = GgufFile::open(write(&dir, "v1.gguf", &bytes)).unwrap_err();
        assert!(matches!(err, GgufError::UnsupportedVersion { version: 1, .. }), "{err}");
        bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
        let err = GgufFile::open(write(&dir, "be.gguf", &bytes)).unwrap_err();
        assert!(err.to_string().contains("big-endian"), "{err}");
    }

    /// Seeded mutation fuzzing: thousands of corrupted copies of a valid file (bytes
    /// overwritten with random, extreme or boundary values, spans deleted or duplicated)
    /// must each open or fail with an error, and what opens must also summarise and build
    /// a tokenizer or fail cleanly: never a panic, never a huge allocation. The seed of a
    /// failing case is in the message, so it can be replayed.
    #[test]
    fn corrupted_files_fail_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let valid = tiny().kv("tokenizer.ggml.model", "llama").kv("tokenizer.ggml.scores", vec![0f32, 0.0, 0.0, -1.0]).to_bytes().unwrap();
        let path = dir.path().join("fuzz.gguf");
        let mut m = crate::fuzz::Mutator::new(0x9e37_79b9_7f4a_7c15);
        let (mut opened, mut refused) = (0, 0);
        for case in 0..3000u32 {
            let mut bytes = valid.clone();
            m.mutate(&mut bytes, 4);
            std::fs::write(&path, &bytes).unwrap();
            let outcome = std::panic::catch_unwind(|| match GgufFile::open(&path) {
                Ok(g) => {
                    let _ = ModelFacts::from_gguf(&g);
                    if let Ok(t) = crate::tokenizer::Tokenizer::from_gguf(&g) {
                        let _ = t.decode(&t.encode("a b"));
                    }
                    true
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    false
                }
            });
            match outcome {
                Ok(true) => opened += 1,
                Ok(false) => refused += 1,
                Err(_) => panic!("case {case} panicked (replay: the same seed and loop, case {case}); {} bytes", bytes.len()),
            }
        }
        eprintln!("3000 corrupted copies: {opened} opened, {refused} refused with an error, none panicked");
        // Both outcomes happen: the mutations reach past the header, and they do break files.
        assert!(opened > 0 && refused > 0, "opened {opened}, refused {refused}");
    }

    #[test]
    fn truncated_anywhere_is_an_error_naming_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = tiny().to_bytes().unwrap();
        let full = write(&dir, "full.gguf", &bytes);
        GgufFile::open(&full).unwrap();
        let p = dir.path().join("cut.gguf");
        for cut in (4..bytes.len()).rev() {
            std::fs::write(&p, &bytes[..cut]).unwrap();
            match GgufFile::open(&p) {
                Err(GgufError::Truncated { what, file_len, .. }) => {
                    assert_eq!(file_len, cut as u64);
                    assert!(!what.is_empty());
                }
                // The final padding after the last tensor is not needed.
                Ok(_) if cut >= bytes.len() - 16 => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        // The message says what was expected.
        std::fs::write(&p, &bytes[..bytes.len() - 20]).unwrap();
        let msg = GgufFile::open(&p).unwrap_err().to_string();
        assert!(msg.contains("truncated") && msg.contains("output_norm.weight") && msg.contains("cut.gguf"), "{msg}");
        std::fs::write(&p, &bytes[..30]).unwrap();
        let msg = GgufFile::open(&p).unwrap_err().to_string();
        assert!(msg.contains("truncated") && msg.contains("metadata key/value pairs"), "{msg}");
        std::fs::write(&p, &bytes[..200]).unwrap();
        let msg = GgufFile::open(&p).unwrap_err().to_string();
        assert!(msg.contains("truncated") && msg.contains("metadata key"), "{msg}");
    }

    #[test]
    fn huge_lengths_do_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        put_str(&mut b, "k");
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
        let err = GgufFile::open(write(&dir, "huge.gguf", &b)).unwrap_err();
        assert!(matches!(err, GgufError::Truncated { .. }), "{err}");
        b.extend_from_slice(&[0u8; 64]);
        let mut c = b.clone();
        let n = c.len();
        c[n - 64 - 12..n - 64 - 8].copy_from_slice(&99u32.to_le_bytes());
        let err = GgufFile::open(write(&dir, "badtype.gguf", &c)).unwrap_err();
        assert!(matches!(err, GgufError::UnknownValueType { type_id: 99, .. }), "{err}");
    }

    #[test]
    fn unknown_tensor_type() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("unknown.gguf");
        tiny().tensor_raw("mystery.weight", &[32], 31, vec![0; 64]).write(&p).unwrap();
        let err = GgufFile::open(&p).unwrap_err();
        assert!(matches!(err, GgufError::UnknownTensorType { type_id: 31, .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("mystery.weight") && msg.contains("31"), "{msg}");
    }

    #[test]
    fn missing_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("noarch.gguf");
        GgufWriter::new().kv("general.name", "x").tensor_f32("a", &[2], &[1.0, 2.0]).write(&p).unwrap();
        let g = GgufFile::open(&p).unwrap();
        let err = ModelFacts::from_gguf(&g).unwrap_err();
        assert!(matches!(err, GgufError::MissingKey { ref key, .. } if key == "general.architecture"), "{err}");
        assert!(err.to_string().contains("general.architecture"));
        assert!(ModelConfig::from_gguf(&g).is_err());
        // and a missing hyper-parameter names the key
        let p = dir.path().join("nohead.gguf");
        GgufWriter::new().kv("general.architecture", "llama").kv("llama.embedding_length", 8u32).write(&p).unwrap();
        let err = ModelConfig::from_gguf(&GgufFile::open(&p).unwrap()).unwrap_err();
        assert!(err.to_string().contains("llama.attention.head_count"), "{err}");
    }

    #[test]
    fn wrong_shaped_tensors() {
        let dir = tempfile::tempdir().unwrap();
        // Writer refuses data that does not match the shape.
        let p = dir.path().join("w.gguf");
        let err = tiny().tensor_f32("bad", &[3, 2], &[0.0; 5]).write(&p).unwrap_err();
        assert!(matches!(err, GgufError::BadTensor { ref tensor, .. } if tensor == "bad"), "{err}");
        assert!(err.to_string().contains("24 bytes"), "{err}");
        // Quantized row length must be a multiple of the block size (Q4_0: 32).
        tiny().tensor_raw("q", &[20, 2], GgmlType::Q4_0.id(), vec![0; 36]).write(&p).unwrap();
        let err = GgufFile::open(&p).unwrap_err();
        assert!(matches!(err, GgufError::BadTensor { .. }) && err.to_string().contains("block size 32"), "{err}");
        // Too many dimensions.
        tiny().tensor_raw("five", &[1, 1, 1, 1, 1], 0, vec![0; 4]).write(&p).unwrap();
        let err = GgufFile::open(&p).unwrap_err();
        assert!(err.to_string().contains("5 dimensions"), "{err}");
        // Data claimed bigger than the file.
        tiny().tensor_raw("big", &[32, 1000], GgmlType::Q8_0.id(), vec![0; 34]).write(&p).unwrap();
        let err = GgufFile::open(&p).unwrap_err();
        assert!(matches!(err, GgufError::Truncated { .. }) && err.to_string().contains("\"big\""), "{err}");
    }

    #[test]
    fn block_sizes() {
        assert_eq!(GgmlType::Q4_K.bytes_for(256), Some(144));
        assert_eq!(GgmlType::Q6_K.bytes_for(512), Some(420));
        assert_eq!(GgmlType::Q5_0.bytes_for(64), Some(44));
        assert_eq!(GgmlType::Q8_0.bytes_for(32), Some(34));
        assert_eq!(GgmlType::BF16.bytes_for(3), Some(6));
        for row in GGML_TYPES {
            assert_eq!(GgmlType::from_id(row.1), Some(row.0));
            assert_eq!(row.0.id(), row.1);
        }
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(file_type_name(15), Some("Q4_K_M"));
    }

    #[test]
    fn real_model() {
        let path = lx_models::default_model_path();
        assert!(
            path.exists(),
            "the real model is missing at {} (set LX_MODEL, or fetch it first: `lx models fetch default`)",
            path.display()
        );
        let t = std::time::Instant::now();
        let g = GgufFile::open(&path).unwrap();
        let elapsed = t.elapsed();
        assert_eq!(g.architecture().unwrap(), "gemma3");
        let f = ModelFacts::from_gguf(&g).unwrap();
        assert_eq!(f.block_count, Some(18));
        assert_eq!(f.quantization.file_type, Some(15));
        assert_eq!(f.quantization.name, "Q4_K_M");
        assert_eq!(f.vocab_size, Some(262_144));
        assert_eq!(f.file_size, std::fs::metadata(&path).unwrap().len());
        let c = ModelConfig::from_gguf(&g).unwrap();
        assert_eq!(c.block_count, 18);
        assert_eq!(c.vocab_size, 262_144);
        assert!(c.sliding_window.is_some());
        eprintln!("opened in {elapsed:?}: {f:#?}\n{c:#?}");
        assert!(elapsed.as_secs_f64() < 5.0, "opening took {elapsed:?}");
    }
}
