//! GGUF tensors read to host f32 through candle's dequantization kernels: MLX holds Q4_0,
//! Q4_1 and Q8_0 as they are (`repack`), and every other type (Q5_0, the K-quants, the float
//! types) becomes f16 or MLX's own 4-bit from these values.

use std::borrow::Cow;

use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::Device;
use lx_engine::backend::BackendError;
use lx_format::gguf::{GgmlType, GgufFile};

/// candle's name for a ggml type, where candle can read it.
fn candle_type(t: GgmlType) -> Option<GgmlDType> {
    use GgmlType as G;
    Some(match t {
        G::F32 => GgmlDType::F32,
        G::F16 => GgmlDType::F16,
        G::BF16 => GgmlDType::BF16,
        G::Q4_0 => GgmlDType::Q4_0,
        G::Q4_1 => GgmlDType::Q4_1,
        G::Q5_0 => GgmlDType::Q5_0,
        G::Q5_1 => GgmlDType::Q5_1,
        G::Q8_0 => GgmlDType::Q8_0,
        G::Q8_1 => GgmlDType::Q8_1,
        G::Q2_K => GgmlDType::Q2K,
        G::Q3_K => GgmlDType::Q3K,
        G::Q4_K => GgmlDType::Q4K,
        G::Q5_K => GgmlDType::Q5K,
        G::Q6_K => GgmlDType::Q6K,
        G::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}

/// Tensor `name` (of type `t`, `rows` × `cols`, outermost first) as f32 values, row-major.
pub fn host_f32(g: &GgufFile, name: &str, t: GgmlType, rows: usize, cols: usize) -> Result<Vec<f32>, BackendError> {
    let unreadable = || BackendError::Unsupported(format!("tensor `{name}` is {}, a type this backend cannot read", t.name()));
    let dtype = candle_type(t).ok_or_else(unreadable)?;
    let bytes = g.read_tensor_bytes(name).map_err(|e| BackendError::Load(e.to_string()))?;
    let err = |e: candle_core::Error| BackendError::Load(format!("tensor `{name}`: {e}"));
    let storage = QStorage::from_data(Cow::Owned(bytes), &Device::Cpu, dtype).map_err(err)?;
    let q = QTensor::new(storage, (rows, cols)).map_err(err)?;
    q.dequantize(&Device::Cpu).and_then(|t| t.flatten_all()).and_then(|t| t.to_vec1::<f32>()).map_err(err)
}
