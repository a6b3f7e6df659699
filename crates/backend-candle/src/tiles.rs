//! Which matrices candle 0.11's x86 kernels repack into tiles, and so which ones `dual`
//! multiplies through candle's quantized kernels in prefill too: the model holds its
//! matrices by this rule and the memory prediction counts them by it.

use lx_format::gguf::{GgmlType, TensorInfo};

/// Whether `dual` multiplies this layer matrix through candle's quantized kernels in
/// prefill too, and keeps no f16 copy of it: where candle's x86 kernels with VNNI repack the
/// matrix for products of several rows (Q4_K, Q6_K and Q8_0, a Q5_0 matrix re-encoded to
/// Q8_0 included, in whole 16-row by 256-value tiles). Those kernels prefill faster than the
/// f16 gemm: on Qwen2.5 Coder 1.5B, whose matrices all are such, candle-reference measured
/// 85.5 against 22.9 tok/s on one thread. Gemma 3 270M's 640-wide rows are not whole tiles,
/// so there only the attention output and down projections qualify.
pub fn dual_keeps_quantized(t: &TensorInfo) -> bool {
    let held = if t.ggml_type == GgmlType::Q5_0 { GgmlType::Q8_0 } else { t.ggml_type };
    // Measured with VNNI only (AVX-512 here): whether AVX2's kernels beat f16 is not known.
    x86_level().1 && whole_tiles(t) && repacked_per_weight(held, true).is_some()
}

/// Whether a matrix is whole tiles of 16 rows by 256 values, the only ones candle repacks.
pub(crate) fn whole_tiles(t: &TensorInfo) -> bool {
    t.dims.len() == 2 && t.dims[0].is_multiple_of(256) && t.dims[1].is_multiple_of(16)
}

/// Bytes per weight of the tiles candle 0.11's x86 kernels repack a quantized matrix into
/// (16 rows by one 256-value superblock: unpacked f32 scales beside the quants), where its
/// kernels take that type: Q4_K always, Q6_K for products of more than one row, Q8_0 with
/// VNNI. `None`: kept as stored.
pub(crate) fn repacked_per_weight(t: GgmlType, several_rows: bool) -> Option<f64> {
    if !cfg!(target_arch = "x86_64") || !x86_level().0 {
        return None;
    }
    match t {
        GgmlType::Q4_K => Some(3072.0 / 4096.0),
        GgmlType::Q6_K if several_rows => Some(5120.0 / 4096.0),
        GgmlType::Q8_0 if x86_level().1 => Some(544.0 / 512.0),
        _ => None,
    }
}

/// Whether candle's repacking kernels run here (AVX2 and FMA), and whether with VNNI.
fn x86_level() -> (bool, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        let vnni = (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni")) || is_x86_feature_detected!("avxvnni");
        (vnni || (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")), vnni)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (false, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(ggml_type: GgmlType, cols: u64, rows: u64) -> TensorInfo {
        TensorInfo { name: "blk.0.ffn_down.weight".into(), dims: vec![cols, rows], ggml_type, offset: 0 }
    }

    /// `dual` drops its f16 copy exactly where candle's x86 kernels with VNNI tile the stored
    /// matrix for several rows: whole 16-row by 256-value tiles of Q4_K, Q6_K or Q8_0 (a Q5_0
    /// matrix is held as Q8_0).
    #[test]
    fn dual_keeps_only_the_matrices_candle_tiles_quantized() {
        let vnni = x86_level().1;
        let qwen_down = matrix(GgmlType::Q4_K, 8960, 1536);
        assert_eq!(dual_keeps_quantized(&qwen_down), vnni);
        assert_eq!(dual_keeps_quantized(&matrix(GgmlType::Q6_K, 1536, 256)), vnni);
        assert_eq!(dual_keeps_quantized(&matrix(GgmlType::Q5_0, 2048, 640)), vnni, "Q5_0 is held as Q8_0");
        assert_eq!(dual_keeps_quantized(&matrix(GgmlType::Q8_0, 2048, 640)), vnni);
        assert!(!dual_keeps_quantized(&matrix(GgmlType::Q4_K, 640, 2048)), "Gemma 3 270M's 640-wide rows are not whole tiles");
        assert!(!dual_keeps_quantized(&matrix(GgmlType::Q4_K, 1536, 1000)), "nor are 1000 rows");
        assert!(!dual_keeps_quantized(&matrix(GgmlType::Q4_1, 1536, 256)), "Q4_1 has no tiled kernel");
        assert!(!dual_keeps_quantized(&TensorInfo { dims: vec![1536], ..qwen_down.clone() }), "a vector is no matrix");
    }
}
