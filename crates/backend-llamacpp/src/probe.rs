//! The CPU's compute rate for prefill, measured through llama.cpp's own library: ggml's
//! matrix product of a Q4_K weight matrix with a batch of f32 activations, the operation
//! that dominates a quantized model's prompt processing (ggml quantizes the activations to
//! 8 bits and runs integer dot products, so it can beat an f32 GEMM on the same CPU).
//!
//! The one module that calls C directly: llama-cpp-2 wraps models and contexts, not ggml's
//! tensor operations, and the rate must come from the library that runs the model.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use llama_cpp_sys_2 as sys;

/// Rows of activations (prompt tokens), and the weight matrix's sides.
const TOKENS: i64 = 512;
const SIDE: i64 = 2048;

/// FLOP/s of ggml's Q4_K × f32 matrix product with `threads` threads, best of runs over at
/// least `min_time`, and a description of what was measured.
pub fn matmul_flops_per_s(threads: usize, min_time: Duration) -> Result<(f64, String), String> {
    super::runtime();
    let weights_f32: Vec<f32> = (0..SIDE * SIDE).map(|i| ((i * 7919 % 2003) as f32 / 2003.0 - 0.5) * 0.1).collect();
    let acts: Vec<f32> = (0..SIDE * TOKENS).map(|i| (i * 104_729 % 1999) as f32 / 1999.0 - 0.5).collect();
    // Room for the three tensors and the graph.
    let params = sys::ggml_init_params { mem_size: 64 << 20, mem_buffer: std::ptr::null_mut(), no_alloc: false };
    // SAFETY: the context owns every tensor made from it; each tensor's data is written
    // only within the size ggml reports for it, and the context is freed once, at the end.
    unsafe {
        let ctx = sys::ggml_init(params);
        if ctx.is_null() {
            return Err("ggml could not allocate its context".into());
        }
        let w = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_Q4_K, SIDE, SIDE);
        let x = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, SIDE, TOKENS);
        let written = sys::ggml_quantize_chunk(sys::GGML_TYPE_Q4_K, weights_f32.as_ptr(), (*w).data, 0, SIDE, SIDE, std::ptr::null());
        if written != sys::ggml_nbytes(w) {
            sys::ggml_free(ctx);
            return Err(format!("ggml quantized {written} bytes, expected {}", sys::ggml_nbytes(w)));
        }
        std::ptr::copy_nonoverlapping(acts.as_ptr(), (*x).data as *mut f32, acts.len());
        let y = sys::ggml_mul_mat(ctx, w, x);
        let graph = sys::ggml_new_graph(ctx);
        sys::ggml_build_forward_expand(graph, y);
        // One plan and one work buffer for every run (`ggml_graph_compute_with_ctx` would take
        // a new buffer from the context each time and run out of it).
        let mut plan = sys::ggml_graph_plan(graph, threads.max(1) as i32, std::ptr::null_mut());
        let mut work = vec![0u8; plan.work_size];
        plan.work_data = work.as_mut_ptr();
        let started = Instant::now();
        let (mut best, mut runs) = (f64::INFINITY, 0);
        while runs < 3 || started.elapsed() < min_time {
            let t0 = Instant::now();
            let status = sys::ggml_graph_compute(graph, &mut plan);
            if status != sys::GGML_STATUS_SUCCESS {
                sys::ggml_free(ctx);
                return Err(format!("ggml's matrix product failed (status {status})"));
            }
            best = best.min(t0.elapsed().as_secs_f64());
            runs += 1;
        }
        // The product must be the product: a few entries against f32 arithmetic here, within
        // what 4.5-bit weights allow.
        let out = std::slice::from_raw_parts((*y).data as *const f32, (SIDE * TOKENS) as usize);
        let mismatch = [(0, 0), (1, 17), (TOKENS - 1, SIDE - 1), (300, 1024)].into_iter().find_map(|(m, n)| {
            let exact: f32 = (0..SIDE).map(|k| weights_f32[(n * SIDE + k) as usize] * acts[(m * SIDE + k) as usize]).sum();
            let got = out[(m * SIDE + n) as usize];
            // Each term is at most 0.05 × 0.5: the sum's scale is √SIDE of them.
            ((got - exact).abs() > 0.1 * 0.025 * (SIDE as f32).sqrt()).then(|| format!("row {m}, column {n}: ggml {got}, f32 {exact}"))
        });
        sys::ggml_free(ctx);
        if let Some(m) = mismatch {
            return Err(format!("ggml's matrix product is wrong: {m}"));
        }
        let flops = 2.0 * (TOKENS * SIDE * SIDE) as f64;
        Ok((flops / best, format!("ggml Q4_K × f32 matrix product, {TOKENS}×{SIDE}×{SIDE}, {threads} threads")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rate comes back (the product itself is checked against f32 arithmetic inside).
    #[test]
    fn measures_a_rate() {
        let (flops, what) = matmul_flops_per_s(1, Duration::from_millis(50)).unwrap();
        assert!(flops.is_finite() && flops > 1e8, "{flops} FLOP/s");
        assert!(what.contains("Q4_K"));
    }
}
