//! Lossless re-encodings of quantized weights into formats candle runs faster.
//!
//! candle 0.11.1 has SIMD dot products on x86 for Q4_0, Q8_0 and the K-quants but not
//! for Q5_0, which Q4_K_M files use for every tensor whose rows are not a multiple of
//! 256 (Gemma 3 270M: attn_q/k/v, ffn_gate/up). A Q5_0 block is a scale `d` and 32
//! five-bit values `q` meaning `d * (q - 16)`; a Q8_0 block is a scale `d` and 32 signed
//! bytes meaning `d * q`. So `q - 16` (in -16..=15) stored as i8 under the same `d` is the
//! same weight, bit for bit, and both formats take their activations as Q8_0: the
//! matmul computes the same integer dot products, only faster (at 34 instead of 22
//! bytes per 32 weights).

use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{Device, Result};
use std::borrow::Cow;

const Q5_0_BLOCK_BYTES: usize = 22;
const Q8_0_BLOCK_BYTES: usize = 34;

/// Re-encodes Q5_0 block bytes as Q8_0 block bytes (exactly the same values).
pub fn q5_0_to_q8_0_bytes(src: &[u8]) -> Vec<u8> {
    debug_assert_eq!(src.len() % Q5_0_BLOCK_BYTES, 0);
    let blocks = src.len() / Q5_0_BLOCK_BYTES;
    let mut out = vec![0u8; blocks * Q8_0_BLOCK_BYTES];
    for (b, o) in src
        .chunks_exact(Q5_0_BLOCK_BYTES)
        .zip(out.chunks_exact_mut(Q8_0_BLOCK_BYTES))
    {
        // d (f16) is copied unchanged.
        o[0] = b[0];
        o[1] = b[1];
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let qs = &b[6..22];
        for j in 0..16 {
            let hi0 = (((qh >> j) << 4) & 0x10) as u8;
            let hi1 = ((qh >> (j + 12)) & 0x10) as u8;
            let x0 = ((qs[j] & 0x0F) | hi0) as i8 - 16;
            let x1 = ((qs[j] >> 4) | hi1) as i8 - 16;
            o[2 + j] = x0 as u8;
            o[2 + j + 16] = x1 as u8;
        }
    }
    out
}

/// A Q5_0 tensor re-encoded as Q8_0 on `device`; any other tensor is returned as is.
pub fn q5_0_as_q8_0(t: QTensor, device: &Device) -> Result<QTensor> {
    if t.dtype() != GgmlDType::Q5_0 {
        return Ok(t);
    }
    let bytes = q5_0_to_q8_0_bytes(&t.data()?);
    let shape = t.shape().clone();
    drop(t);
    let storage = QStorage::from_data(Cow::Owned(bytes), device, GgmlDType::Q8_0)?;
    QTensor::new(storage, shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;

    #[test]
    fn q5_0_to_q8_0_is_exact() -> Result<()> {
        let dev = Device::Cpu;
        let vals: Vec<f32> = (0..4 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0)
            .collect();
        let t = Tensor::from_vec(vals, (4, 64), &dev)?;
        let q5 = QTensor::quantize(&t, GgmlDType::Q5_0)?;
        let a = q5.dequantize(&dev)?.flatten_all()?.to_vec1::<f32>()?;
        let q8 = q5_0_as_q8_0(q5, &dev)?;
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        let b = q8.dequantize(&dev)?.flatten_all()?.to_vec1::<f32>()?;
        assert_eq!(a, b);
        Ok(())
    }
}
