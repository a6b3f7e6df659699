//! MLX's own 4-bit mode ([`WeightMode::Mlx4`](crate::WeightMode::Mlx4)), and the GGUF file in
//! which llama.cpp runs exactly the same weights.
//!
//! An MLX user's 4-bit model is an f16 model quantized by MLX (`mlx.core.quantize`: affine,
//! 4 bits, group 64, f16 scales and biases). This mode does the same to every matrix of the
//! GGUF file, dequantized to f16 first; its figures are what such a model gives. It is a
//! coarser model than the file, so llama.cpp running the file is no reference for it:
//! [`write_gguf`] writes MLX's 4-bit weights out, dequantized to f32 (exact), and llama.cpp
//! running that file computes the very weights MLX runs, in f32 arithmetic as MLX's CPU build
//! does (llama.cpp would round the activations to 8 bits for any quantized matrix).

use std::path::Path;

use lx_engine::backend::BackendError;
use lx_format::gguf::{GgufFile, GgufWriter};
use mlx_rs::{ops, transforms, Array, Dtype};

use crate::dequant::host_f32;
use crate::repack::Affine;

/// MLX's defaults for `quantize`.
pub const GROUP: usize = 64;
pub const BITS: u32 = 4;

/// True when this mode quantizes a matrix of `cols` inputs; any other matrix stays f16.
pub fn applies(cols: usize) -> bool {
    cols.is_multiple_of(GROUP)
}

/// `w` (`rows` × `cols`, row-major) rounded to f16 and quantized by MLX.
pub fn quantize(w: &[f32], rows: usize, cols: usize) -> Result<Affine, BackendError> {
    let err = |e: mlx_rs::error::Exception| BackendError::Load(format!("MLX 4-bit quantization: {e}"));
    let w = Array::from_slice(w, &[rows as i32, cols as i32]).as_dtype(Dtype::Float16).map_err(err)?;
    let (packed, scales, biases) = ops::quantize(&w, GROUP as i32, BITS as i32).map_err(err)?;
    // f16 values held as f32: exact, and the dtype the graph's activations have.
    let scales = scales.as_dtype(Dtype::Float32).map_err(err)?;
    let biases = biases.as_dtype(Dtype::Float32).map_err(err)?;
    transforms::eval([&packed, &scales, &biases]).map_err(err)?;
    Ok(Affine {
        rows,
        cols,
        bits: BITS,
        group: GROUP,
        packed: packed.as_slice::<u32>().to_vec(),
        scales: scales.as_slice::<f32>().to_vec(),
        biases: biases.as_slice::<f32>().to_vec(),
    })
}

/// Writes `src` to `dst` as this mode holds it: every matrix MLX quantizes becomes f32 holding
/// exactly MLX's 4-bit weights, any other matrix f16, every other tensor and all metadata as in
/// `src`. Returns how many matrices hold MLX's 4-bit weights. (About 4 bytes a weight: 1.1 GB
/// for the default model.)
pub fn write_gguf(src: &Path, dst: &Path) -> Result<usize, BackendError> {
    let load = |e: lx_format::gguf::GgufError| BackendError::Load(e.to_string());
    let g = GgufFile::open(src).map_err(load)?;
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata_pairs() {
        w = w.kv(k, v.clone());
    }
    let mut quantized = 0;
    for t in g.tensors() {
        w = match t.dims[..] {
            [cols, rows] => {
                let (rows, cols) = (rows as usize, cols as usize);
                let values = host_f32(&g, &t.name, t.ggml_type, rows, cols)?;
                if applies(cols) {
                    quantized += 1;
                    w.tensor_f32(&t.name, &t.dims, &quantize(&values, rows, cols)?.dequantize())
                } else {
                    w.tensor_f16(&t.name, &t.dims, &values)
                }
            }
            _ => w.tensor(&t.name, &t.dims, t.ggml_type, g.read_tensor_bytes(&t.name).map_err(load)?),
        };
    }
    w.write(dst).map_err(load)?;
    Ok(quantized)
}
