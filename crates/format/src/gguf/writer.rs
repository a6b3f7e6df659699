//! [`GgufWriter`]: GGUF files for test fixtures here and in other crates, re-quantized
//! models and shape-only models ([`super::synth`]), whose made-up weights are generated
//! while the file is written rather than held in memory.

use super::*;

/// Builds small GGUF files (version 3), mainly as test fixtures.
///
/// ```
/// # use lx_format::gguf::{GgufWriter, GgufFile};
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
    data: TensorData,
    /// Raw tensors are written as given, even when inconsistent (for broken fixtures).
    checked: bool,
}

#[derive(Debug, Clone)]
enum TensorData {
    Bytes(Vec<u8>),
    /// Made-up values, generated as the file is written ([`super::synth::fill`]).
    Synthetic(super::synth::Fill),
}

impl PendingTensor {
    fn len(&self) -> u64 {
        match &self.data {
            TensorData::Bytes(b) => b.len() as u64,
            TensorData::Synthetic(_) => {
                let ty = GgmlType::from_id(self.type_id).expect("synthetic tensors have known types");
                ty.bytes_for(self.dims.iter().product()).unwrap_or(0)
            }
        }
    }
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
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 0, data: TensorData::Bytes(bytes), checked: true });
        self
    }

    /// Adds an F16 tensor from f32 values (rounded to nearest even).
    pub fn tensor_f16(mut self, name: impl Into<String>, dims: &[u64], data: &[f32]) -> Self {
        let bytes = data.iter().flat_map(|&v| f32_to_f16_bits(v).to_le_bytes()).collect();
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 1, data: TensorData::Bytes(bytes), checked: true });
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
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: 8, data: TensorData::Bytes(bytes), checked: true });
        self
    }

    /// Adds a Q4_0 tensor from f32 values: blocks of 32 values, each an f16 scale and 32
    /// four-bit codes (value = scale * (code - 8)), byte j holding codes j and j + 16. The
    /// scale maps the block's value of largest magnitude to code 0, so it keeps its sign
    /// exactly and the other values share 15 steps. `dims[0]` must be a multiple of 32.
    pub fn tensor_q4_0(mut self, name: impl Into<String>, dims: &[u64], data: &[f32]) -> Self {
        let mut bytes = Vec::with_capacity(data.len() / 32 * 18);
        for block in data.chunks(32) {
            let extreme = block.iter().fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
            let d = extreme / -8.0;
            let inv = if d != 0.0 { 1.0 / d } else { 0.0 };
            let code = |v: f32| ((v * inv).round() + 8.0).clamp(0.0, 15.0) as u8;
            bytes.extend_from_slice(&f32_to_f16_bits(d).to_le_bytes());
            bytes.extend((0..16).map(|j| code(block[j]) | code(block[j + 16]) << 4));
        }
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: GgmlType::Q4_0.id(), data: TensorData::Bytes(bytes), checked: true });
        self
    }

    /// Adds a tensor of type `ty` from its raw bytes ([`GgufWriter::write`] fails when their
    /// count does not match `dims`).
    pub fn tensor(mut self, name: impl Into<String>, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Self {
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: ty.id(), data: TensorData::Bytes(data), checked: true });
        self
    }

    /// Adds a tensor of type `ty` whose made-up values are generated as the file is written
    /// (see [`super::synth::Fill`]): a shape-only model's weights. `dims[0]` must be a
    /// multiple of the type's block size.
    pub fn tensor_synthetic(mut self, name: impl Into<String>, dims: &[u64], ty: GgmlType, fill: super::synth::Fill) -> Self {
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id: ty.id(), data: TensorData::Synthetic(fill), checked: true });
        self
    }

    /// Each tensor as it will be written: name, dims (ggml order) and type (`None` for a raw
    /// tensor of an unknown type id).
    pub fn planned_tensors(&self) -> impl Iterator<Item = (&str, &[u64], Option<GgmlType>)> {
        self.tensors.iter().map(|t| (t.name.as_str(), t.dims.as_slice(), GgmlType::from_id(t.type_id)))
    }

    /// The size of the file [`GgufWriter::write`] writes, in bytes.
    pub fn file_size(&self) -> u64 {
        let mut sink = CountingSink(0);
        let header = self.header(&mut sink).map(|_| sink.0).unwrap_or(0);
        let data: u64 = self.tensors.iter().map(|t| t.len().div_ceil(self.alignment) * self.alignment).sum();
        header + data
    }

    /// Adds a tensor exactly as given: any type id, any bytes, no checks. For broken fixtures.
    pub fn tensor_raw(mut self, name: impl Into<String>, dims: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        self.tensors.push(PendingTensor { name: name.into(), dims: dims.to_vec(), type_id, data: TensorData::Bytes(data), checked: false });
        self
    }

    /// The file's bytes. Fails if a checked tensor's data does not match its shape.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut out = Vec::new();
        self.emit(&mut out).map_err(|e| match e {
            Emit::Bad(e) => e,
            Emit::Io(e) => unreachable!("writing to memory failed: {e}"),
        })?;
        Ok(out)
    }

    /// Writes the file, atomically: a reader sees the whole file or none. Generated tensors
    /// are streamed, so a shape-only model of several gigabytes needs little memory.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        self.write_reporting(path, &mut |_, _| {})
    }

    /// [`GgufWriter::write`], calling `progress(bytes written, file size)` about every 64 MiB.
    pub fn write_reporting(&self, path: impl AsRef<Path>, progress: &mut dyn FnMut(u64, u64)) -> Result<(), GgufError> {
        let path = path.as_ref();
        let total = self.file_size();
        let io_err = |source| GgufError::Io { path: path.to_path_buf(), source };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let written = File::create(&tmp).map_err(Emit::Io).and_then(|f| {
            let mut out = Reporting { out: io::BufWriter::with_capacity(1 << 20, f), done: 0, next: 0, total, progress };
            self.emit(&mut out)?;
            (out.progress)(out.done, total);
            out.flush().map_err(Emit::Io)
        });
        let renamed = written.and_then(|()| std::fs::rename(&tmp, path).map_err(Emit::Io));
        if let Err(e) = renamed {
            std::fs::remove_file(&tmp).ok();
            return Err(match e {
                Emit::Io(e) => io_err(e),
                Emit::Bad(GgufError::BadTensor { tensor, reason, .. }) => GgufError::BadTensor { path: path.to_path_buf(), tensor, reason },
                Emit::Bad(other) => other,
            });
        }
        Ok(())
    }

    /// Header, metadata and tensor descriptions, padded to the data section; returns each
    /// tensor's offset in the data section. Fails if a checked tensor's data does not match
    /// its shape.
    fn header(&self, out: &mut dyn Write) -> Result<Vec<u64>, Emit> {
        let mut head = Vec::new();
        head.extend_from_slice(&GGUF_MAGIC);
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (k, v) in &self.kvs {
            put_str(&mut head, k);
            head.extend_from_slice(&v.value_type().id().to_le_bytes());
            put_value(&mut head, v);
        }
        let align = self.alignment;
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            if t.checked {
                let ty = GgmlType::from_id(t.type_id).expect("checked tensors have known types");
                let n: u64 = t.dims.iter().product();
                let expected = ty.bytes_for(n).unwrap_or(u64::MAX);
                if t.len() != expected {
                    let reason = format!("shape {:?} of type {ty} needs {expected} bytes ({n} values), but {} bytes were given", t.dims, t.len());
                    return Err(Emit::Bad(GgufError::BadTensor { path: PathBuf::from("<GgufWriter>"), tensor: t.name.clone(), reason }));
                }
            }
            put_str(&mut head, &t.name);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.type_id.to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + t.len()).div_ceil(align) * align;
        }
        if !self.tensors.is_empty() {
            let pad = (head.len() as u64).div_ceil(align) * align;
            head.resize(pad as usize, 0);
        }
        out.write_all(&head).map_err(Emit::Io)?;
        Ok(offsets)
    }

    fn emit(&self, out: &mut dyn Write) -> Result<(), Emit> {
        self.header(out)?;
        let align = self.alignment;
        for t in &self.tensors {
            match &t.data {
                TensorData::Bytes(b) => out.write_all(b).map_err(Emit::Io)?,
                TensorData::Synthetic(fill) => {
                    let ty = GgmlType::from_id(t.type_id).expect("synthetic tensors have known types");
                    super::synth::fill(ty, t.len(), fill, out).map_err(Emit::Io)?;
                }
            }
            let pad = t.len().div_ceil(align) * align - t.len();
            out.write_all(&vec![0u8; pad as usize]).map_err(Emit::Io)?;
        }
        Ok(())
    }
}

/// Why writing failed: the file's content, or the output.
enum Emit {
    Bad(GgufError),
    Io(io::Error),
}

/// Passes writes on, reporting the running count now and then.
struct Reporting<'a, W: Write> {
    out: W,
    done: u64,
    next: u64,
    total: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

impl<W: Write> Write for Reporting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.done += n as u64;
        if self.done >= self.next {
            (self.progress)(self.done, self.total);
            self.next = self.done + (64 << 20);
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Counts what is written to it.
struct CountingSink(u64);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
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

/// IEEE single from half (exact).
pub(super) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        // Subnormal: value = mant * 2^-24.
        (0, m) => {
            let v = m as f32 * 2f32.powi(-24);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// IEEE half from single, round to nearest even.
pub(super) fn f32_to_f16_bits(v: f32) -> u16 {
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
