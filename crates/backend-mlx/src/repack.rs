//! Lossless repacking of GGUF Q4_0, Q4_1 and Q8_0 blocks into MLX's affine quantized layout
//! (plain Rust, compiled and tested everywhere).
//!
//! MLX's affine format stores, per group of `group` consecutive weights of a row, a `scale`
//! and a `bias`, and each weight as an unsigned `bits`-bit integer `q`, meaning
//! `scale * q + bias`; the integers are packed little-endian into u32 words, element `e` of a
//! row at bits `bits * (e % (32 / bits))` of word `e / (32 / bits)`. The three GGUF types map
//! onto it exactly, with groups of 32 (one GGUF block):
//! - Q4_0: `d * (q - 8)`, q in 0..16 → scale `d`, bias `-8 d`;
//! - Q4_1: `d * q + m` → scale `d`, bias `m`;
//! - Q8_0: `d * q`, q signed → stored `q + 128`, scale `d`, bias `-128 d`.
//!
//! (MLX's own GGUF loader does the same for these three types.)

use lx_format::gguf::GgmlType;

/// Weights per GGUF block, and so per MLX group here.
pub const GROUP: usize = 32;

/// One matrix in MLX's affine layout; `rows` × `cols` logical weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Affine {
    pub rows: usize,
    pub cols: usize,
    pub bits: u32,
    pub group: usize,
    /// `rows` × `cols * bits / 32` words.
    pub packed: Vec<u32>,
    /// `rows` × `cols / group`.
    pub scales: Vec<f32>,
    /// `rows` × `cols / group`.
    pub biases: Vec<f32>,
}

/// True for the GGUF types [`to_affine`] repacks.
pub fn repackable(t: GgmlType) -> bool {
    matches!(t, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Repacks the raw bytes of a `rows` × `cols` tensor of type `t` (Q4_0, Q4_1 or Q8_0).
/// `None` for any other type, a `cols` that is not a multiple of 32, or a byte count that
/// does not match the shape.
pub fn to_affine(t: GgmlType, bytes: &[u8], rows: usize, cols: usize) -> Option<Affine> {
    let (bits, block_bytes) = match t {
        GgmlType::Q4_0 => (4u32, 18usize),
        GgmlType::Q4_1 => (4, 20),
        GgmlType::Q8_0 => (8, 34),
        _ => return None,
    };
    if cols == 0 || !cols.is_multiple_of(GROUP) || bytes.len() != rows * cols / GROUP * block_bytes {
        return None;
    }
    let blocks = rows * cols / GROUP;
    let per_word = (32 / bits) as usize;
    let mut packed = vec![0u32; rows * cols / per_word];
    let mut scales = Vec::with_capacity(blocks);
    let mut biases = Vec::with_capacity(blocks);
    let mut q = [0u32; GROUP];
    for (bi, b) in bytes.chunks_exact(block_bytes).enumerate() {
        let d = f16_at(b, 0);
        match t {
            GgmlType::Q4_0 | GgmlType::Q4_1 => {
                // 16 bytes of nibbles: byte j holds weight j (low) and weight j + 16 (high).
                let qs = &b[block_bytes - 16..];
                for j in 0..16 {
                    q[j] = u32::from(qs[j] & 0x0F);
                    q[j + 16] = u32::from(qs[j] >> 4);
                }
                scales.push(d);
                biases.push(if t == GgmlType::Q4_0 { -8.0 * d } else { f16_at(b, 2) });
            }
            _ => {
                for j in 0..GROUP {
                    q[j] = u32::from((b[2 + j] as i8 as i16 + 128) as u8);
                }
                scales.push(d);
                biases.push(-128.0 * d);
            }
        }
        // A block never straddles a row (cols is a multiple of 32), so element bi*32 + j of
        // the flattened matrix is element j of this block.
        let first_word = bi * GROUP / per_word;
        for (j, &v) in q.iter().enumerate() {
            packed[first_word + j / per_word] |= v << (bits as usize * (j % per_word));
        }
    }
    Some(Affine { rows, cols, bits, group: GROUP, packed, scales, biases })
}

impl Affine {
    /// The weights as f32, row-major (what MLX's `dequantize` computes); for tests and checks.
    pub fn dequantize(&self) -> Vec<f32> {
        let per_word = (32 / self.bits) as usize;
        let mask = (1u32 << self.bits) - 1;
        (0..self.rows * self.cols)
            .map(|e| {
                let q = (self.packed[e / per_word] >> (self.bits as usize * (e % per_word))) & mask;
                let g = e / self.group;
                self.scales[g] * q as f32 + self.biases[g]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    fn check(candle: GgmlDType, ours: GgmlType) {
        let (rows, cols) = (3, 96);
        let vals: Vec<f32> = (0..rows * cols).map(|i| ((i * 53 % 97) as f32 - 48.0) / 7.0 + (i % 5) as f32 * 0.01).collect();
        let t = Tensor::from_vec(vals, (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, candle).unwrap();
        let want = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let a = to_affine(ours, &q.data().unwrap(), rows, cols).unwrap();
        assert_eq!(a.packed.len(), rows * cols * a.bits as usize / 32);
        assert_eq!(a.scales.len(), rows * cols / 32);
        let got = a.dequantize();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // scale * q + bias and d * (q - o) round differently in the last bit.
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{ours:?} element {i}: {g} vs {w}");
        }
    }

    #[test]
    fn q4_0_matches_candle() {
        check(GgmlDType::Q4_0, GgmlType::Q4_0);
    }

    #[test]
    fn q4_1_matches_candle() {
        check(GgmlDType::Q4_1, GgmlType::Q4_1);
    }

    #[test]
    fn q8_0_matches_candle() {
        check(GgmlDType::Q8_0, GgmlType::Q8_0);
    }

    #[test]
    fn refuses_what_it_cannot_repack() {
        assert!(to_affine(GgmlType::Q5_0, &[0; 22], 1, 32).is_none());
        assert!(to_affine(GgmlType::Q8_0, &[0; 34], 1, 16).is_none());
        assert!(to_affine(GgmlType::Q8_0, &[0; 33], 1, 32).is_none());
    }
}
