//! Tiny generated GGUF fixtures' tensors: deterministic weights of any ggml type candle can
//! quantize to. Their metadata and vocabulary come from `lx_format::gguf::synth`
//! (`Shape::header`, `spm_vocabulary`), as the shape-only models' do.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use lx_format::gguf::GgufWriter;

/// Deterministic pseudo-random values in [-scale, scale].
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// How a fixture tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ty {
    F32,
    F16,
    Q(GgmlDType),
}

/// A fixture tensor before it is written.
pub struct T {
    pub name: String,
    /// candle order: (out, in) for projections.
    pub shape: Vec<usize>,
    pub ty: Ty,
    pub data: Vec<f32>,
}

pub fn add_tensor(w: GgufWriter, t: &T) -> GgufWriter {
    let dims: Vec<u64> = t.shape.iter().rev().map(|&d| d as u64).collect();
    match t.ty {
        Ty::F32 => w.tensor_f32(&t.name, &dims, &t.data),
        Ty::F16 => w.tensor_f16(&t.name, &dims, &t.data),
        Ty::Q(q) => {
            let x = Tensor::from_vec(t.data.clone(), t.shape.as_slice(), &Device::Cpu).unwrap();
            let qt = QTensor::quantize(&x, q).unwrap();
            let id = match q {
                GgmlDType::Q4_0 => 2,
                GgmlDType::Q5_0 => 6,
                GgmlDType::Q8_0 => 8,
                other => panic!("fixture type {other:?}"),
            };
            w.tensor_raw(&t.name, &dims, id, qt.data().unwrap().into_owned())
        }
    }
}
