//! The compute rate for prefill, measured through llama.cpp's own library: ggml's
//! matrix product of a Q4_K weight matrix with a batch of f32 activations, the operation
//! that dominates a quantized model's prompt processing (ggml quantizes the activations to
//! 8 bits and runs integer dot products, so it can beat an f32 GEMM on the same CPU).
//!
//! The one module that calls C directly: llama-cpp-2 wraps models and contexts, not ggml's
//! tensor operations, and the rate must come from the library that runs the model.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use llama_cpp_sys_2 as sys;
use lx_machine::roofline::Limits;

/// Rows of activations (prompt tokens), and the weight matrix's sides.
const TOKENS: i64 = 512;
const SIDE: i64 = 2048;

/// The product's inputs for `side`² weights and `tokens` rows: made-up values of the scale a
/// model's weights and activations have.
fn inputs(side: i64, tokens: i64) -> (Vec<f32>, Vec<f32>) {
    let weights = (0..side * side).map(|i| ((i * 7919 % 2003) as f32 / 2003.0 - 0.5) * 0.1).collect();
    let acts = (0..side * tokens).map(|i| (i * 104_729 % 1999) as f32 / 1999.0 - 0.5).collect();
    (weights, acts)
}

/// The product must be the product: a few entries of `out` (`tokens` rows of `n_out`
/// values: each activation row times each of `n_out` weight rows of `k` values) against f32
/// arithmetic, within what 4.5-bit weights allow.
fn check_product(out: &[f32], weights: &[f32], acts: &[f32], k: i64, n_out: i64, tokens: i64) -> Result<(), String> {
    let at = |m: i64, n: i64| (m.min(tokens - 1), n.min(n_out - 1));
    let mismatch = [at(0, 0), at(1, 17), at(tokens - 1, n_out - 1), at(300, 1024)].into_iter().find_map(|(m, n)| {
        let exact: f32 = (0..k).map(|i| weights[(n * k + i) as usize] * acts[(m * k + i) as usize]).sum();
        let got = out[(m * n_out + n) as usize];
        // Each term is at most 0.05 × 0.5: the sum's scale is √k of them.
        ((got - exact).abs() > 0.1 * 0.025 * (k as f32).sqrt()).then(|| format!("row {m}, column {n}: ggml {got}, f32 {exact}"))
    });
    mismatch.map_or(Ok(()), |m| Err(format!("ggml's matrix product is wrong: {m}")))
}

/// FLOP/s of ggml's Q4_K × f32 matrix product with `threads` threads on the CPU (through
/// the same backend interface as a GPU's, on ggml's CPU device), best of runs over at least
/// `min_time`, and a description of what was measured.
pub fn matmul_flops_per_s(threads: usize, min_time: Duration) -> Result<(f64, String), String> {
    super::runtime();
    // SAFETY: ggml's device list is fixed once the runtime is initialised.
    let cpu = unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) };
    if cpu.is_null() {
        return Err("ggml has no CPU device in this build".into());
    }
    let flops = device_matmul_flops(cpu, SIDE, Some(threads.max(1)), min_time)?;
    Ok((flops, format!("ggml Q4_K × f32 matrix product, {TOKENS}×{SIDE}×{SIDE}, {threads} threads")))
}

/// A GPU's matrix: larger than the CPU's, so that launching the kernel is a small part of it.
const GPU_SIDE: i64 = 4096;
/// The bandwidth tensor: 512 MiB of f32, far beyond any GPU's caches.
const GPU_READ_ROWS: i64 = 32_768;
const GPU_READ_COLS: i64 = 4096;

/// A GPU llama.cpp's library can use in this build, as ggml lists it.
pub struct Gpu {
    device: sys::ggml_backend_dev_t,
    /// ggml's name and description: `Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
}

/// Every GPU of the build (none in a CPU-only build).
pub fn gpus() -> Vec<Gpu> {
    super::runtime();
    // SAFETY: ggml's device list is fixed once the runtime is initialised; the strings it
    // returns live as long as the devices.
    unsafe {
        (0..sys::ggml_backend_dev_count())
            .map(|i| sys::ggml_backend_dev_get(i))
            .filter(|&d| matches!(sys::ggml_backend_dev_type(d), sys::GGML_BACKEND_DEVICE_TYPE_GPU | sys::GGML_BACKEND_DEVICE_TYPE_IGPU))
            .map(|device| {
                let text = |p: *const std::os::raw::c_char| if p.is_null() { String::new() } else { std::ffi::CStr::from_ptr(p).to_string_lossy().trim().to_string() };
                Gpu { device, name: format!("{} {}", text(sys::ggml_backend_dev_name(device)), text(sys::ggml_backend_dev_description(device))) }
            })
            .collect()
    }
}

impl Gpu {
    /// The device's limits, measured on it through ggml's backend interface, as the model
    /// runs there: read bandwidth (`ggml_sum_rows` over 512 MiB of f32: every byte read
    /// once, 128 KiB written) and the Q4_K × f32 matrix product (4096² weights by 512 rows,
    /// its result checked against f32 arithmetic). Best of runs over at least `min_time`
    /// each. When it fails, why, with the device's name.
    pub fn measure(&self, min_time: Duration) -> Result<Limits, String> {
        let name = &self.name;
        // The faster of two reads of the whole buffer: a plain sum, and the quantized
        // matrix-vector product a decode step is made of (a ceiling must not be beaten by
        // the kernels the model runs).
        let sum = device_read_bandwidth(self.device, min_time).map_err(|e| format!("{name}: memory bandwidth not measured: {e}"))?;
        let matvec = device_matvec_bandwidth(self.device, min_time).map_err(|e| format!("{name}: memory bandwidth not measured: {e}"))?;
        let flops = device_matmul_flops(self.device, GPU_SIDE, None, min_time).map_err(|e| format!("{name}: compute rate not measured: {e}"))?;
        let method = format!("ggml Q4_K × f32 matrix product on the device, {TOKENS}×{GPU_SIDE}×{GPU_SIDE}");
        Ok(Limits { device: name.clone(), memory_bytes_per_s: sum.max(matvec), compute_flops_per_s: flops, compute_method: method })
    }
}

/// One graph on one device: its tensors made by `build` in a context of their own, allocated
/// on the device (with `threads` threads, for the CPU's), filled by `fill`, computed over
/// `min_time` and at least twice (the first run also prepares the device's kernels; the
/// best time is kept), then read back by `read`.
///
/// SAFETY (for the callers' closures): `build` makes tensors in the context it is given and
/// returns the graph's output; `fill` and `read` move bytes within the sizes ggml reports.
unsafe fn time_on_device<T>(
    dev: sys::ggml_backend_dev_t,
    threads: Option<usize>,
    min_time: Duration,
    build: impl FnOnce(*mut sys::ggml_context) -> Vec<*mut sys::ggml_tensor>,
    fill: impl FnOnce(&[*mut sys::ggml_tensor]),
    read: impl FnOnce(&[*mut sys::ggml_tensor]) -> Result<T, String>,
) -> Result<(f64, T), String> {
    unsafe {
        let backend = sys::ggml_backend_dev_init(dev, std::ptr::null());
        if backend.is_null() {
            return Err("the device did not start".into());
        }
        if let Some(n) = threads {
            sys::ggml_backend_cpu_set_n_threads(backend, n as i32);
        }
        let params = sys::ggml_init_params { mem_size: 16 * sys::ggml_tensor_overhead() + sys::ggml_graph_overhead(), mem_buffer: std::ptr::null_mut(), no_alloc: true };
        let ctx = sys::ggml_init(params);
        if ctx.is_null() {
            sys::ggml_backend_free(backend);
            return Err("ggml could not allocate its context".into());
        }
        // The last tensor is the graph's output; the graph goes in the same context.
        let tensors = build(ctx);
        let graph = sys::ggml_new_graph(ctx);
        sys::ggml_build_forward_expand(graph, *tensors.last().expect("an output"));
        let buffer = sys::ggml_backend_alloc_ctx_tensors(ctx, backend);
        let result = if buffer.is_null() {
            Err("the device could not hold the tensors".to_string())
        } else {
            fill(&tensors);
            let started = Instant::now();
            let (mut best, mut runs, mut status) = (f64::INFINITY, 0, sys::GGML_STATUS_SUCCESS);
            while status == sys::GGML_STATUS_SUCCESS && (runs < 2 || started.elapsed() < min_time) {
                let t0 = Instant::now();
                // Returns once the device has finished (it synchronises).
                status = sys::ggml_backend_graph_compute(backend, graph);
                best = best.min(t0.elapsed().as_secs_f64());
                runs += 1;
            }
            if status != sys::GGML_STATUS_SUCCESS {
                Err(format!("the graph failed (status {status})"))
            } else {
                read(&tensors).map(|v| (best, v))
            }
        };
        if !buffer.is_null() {
            sys::ggml_backend_buffer_free(buffer);
        }
        sys::ggml_free(ctx);
        sys::ggml_backend_free(backend);
        result
    }
}

/// Bytes per second the device reads: a sum over every row of a 512 MiB f32 tensor.
fn device_read_bandwidth(dev: sys::ggml_backend_dev_t, min_time: Duration) -> Result<f64, String> {
    let (rows, cols) = (GPU_READ_ROWS, GPU_READ_COLS);
    // Row r holds r's index in every column, so each sum is known exactly (small integers
    // times 4096 are exact in f32 up to 2^24 / 4096 = 4096).
    let value = |r: i64| (r % 1024) as f32;
    let data: Vec<f32> = (0..rows).flat_map(|r| std::iter::repeat_n(value(r), cols as usize)).collect();
    // SAFETY: the tensors are the ones `build` made; `fill` writes exactly the input's bytes
    // and `read` reads exactly the output's (one f32 per row).
    let (seconds, ()) = unsafe {
        time_on_device(
            dev,
            None,
            min_time,
            |ctx| {
                let a = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, cols, rows);
                vec![a, sys::ggml_sum_rows(ctx, a)]
            },
            |t| sys::ggml_backend_tensor_set(t[0], data.as_ptr().cast(), 0, sys::ggml_nbytes(t[0])),
            |t| {
                let mut sums = vec![0f32; rows as usize];
                sys::ggml_backend_tensor_get(t[1], sums.as_mut_ptr().cast(), 0, sys::ggml_nbytes(t[1]));
                match (0..rows).find(|&r| sums[r as usize] != value(r) * cols as f32) {
                    Some(r) => Err(format!("row {r} summed to {}, not {}", sums[r as usize], value(r) * cols as f32)),
                    None => Ok(()),
                }
            },
        )?
    };
    Ok((rows * cols * 4) as f64 / seconds)
}

/// Bytes per second the device reads as a decode step does: a Q4_K matrix of 4096 columns
/// by 65,536 rows (151 MB) times one f32 vector. Its rows repeat every 256, so their
/// products must too; the first few are checked against f32 arithmetic.
fn device_matvec_bandwidth(dev: sys::ggml_backend_dev_t, min_time: Duration) -> Result<f64, String> {
    const ROWS: i64 = 65_536;
    const PERIOD: i64 = 256;
    let (weights, acts) = inputs(GPU_SIDE, 1);
    let weights = &weights[..(PERIOD * GPU_SIDE) as usize];
    // (`inputs` makes a square matrix; one period of its rows is all this needs.)
    // SAFETY: as in `device_matmul_flops`: one period quantized into a host buffer of the
    // size ggml gives, repeated to fill the device tensor exactly.
    let (seconds, bytes) = unsafe {
        let row = sys::ggml_row_size(sys::GGML_TYPE_Q4_K, GPU_SIDE);
        let mut period = vec![0u8; row * PERIOD as usize];
        let written = sys::ggml_quantize_chunk(sys::GGML_TYPE_Q4_K, weights.as_ptr(), period.as_mut_ptr().cast(), 0, PERIOD, GPU_SIDE, std::ptr::null());
        if written != period.len() {
            return Err(format!("ggml quantized {written} bytes, expected {}", period.len()));
        }
        let q: Vec<u8> = period.iter().copied().cycle().take(row * ROWS as usize).collect();
        time_on_device(
            dev,
            None,
            min_time,
            |ctx| {
                let w = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_Q4_K, GPU_SIDE, ROWS);
                let x = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, GPU_SIDE, 1);
                vec![w, x, sys::ggml_mul_mat(ctx, w, x)]
            },
            |t| {
                sys::ggml_backend_tensor_set(t[0], q.as_ptr().cast(), 0, sys::ggml_nbytes(t[0]));
                sys::ggml_backend_tensor_set(t[1], acts.as_ptr().cast(), 0, sys::ggml_nbytes(t[1]));
            },
            |t| {
                let mut out = vec![0f32; ROWS as usize];
                sys::ggml_backend_tensor_get(t[2], out.as_mut_ptr().cast(), 0, sys::ggml_nbytes(t[2]));
                check_product(&out[..PERIOD as usize], weights, &acts, GPU_SIDE, PERIOD, 1)?;
                match (PERIOD..ROWS).find(|&r| out[r as usize] != out[(r % PERIOD) as usize]) {
                    Some(r) => Err(format!("row {r} gave {}, its twin row {} gave {}", out[r as usize], r % PERIOD, out[(r % PERIOD) as usize])),
                    None => Ok(sys::ggml_nbytes(t[0]) + sys::ggml_nbytes(t[1])),
                }
            },
        )?
    };
    Ok(bytes as f64 / seconds)
}

/// FLOP/s of the Q4_K × f32 matrix product of `side`² weights by [`TOKENS`] rows on the device.
fn device_matmul_flops(dev: sys::ggml_backend_dev_t, side: i64, threads: Option<usize>, min_time: Duration) -> Result<f64, String> {
    let (weights, acts) = inputs(side, TOKENS);
    // SAFETY: the quantized bytes are written into a host buffer of the size ggml gives for
    // them, then copied whole into the device's tensor.
    let (seconds, ()) = unsafe {
        let row = sys::ggml_row_size(sys::GGML_TYPE_Q4_K, side);
        let mut q = vec![0u8; row * side as usize];
        let written = sys::ggml_quantize_chunk(sys::GGML_TYPE_Q4_K, weights.as_ptr(), q.as_mut_ptr().cast(), 0, side, side, std::ptr::null());
        if written != q.len() {
            return Err(format!("ggml quantized {written} bytes, expected {}", q.len()));
        }
        time_on_device(
            dev,
            threads,
            min_time,
            |ctx| {
                let w = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_Q4_K, side, side);
                let x = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, side, TOKENS);
                vec![w, x, sys::ggml_mul_mat(ctx, w, x)]
            },
            |t| {
                sys::ggml_backend_tensor_set(t[0], q.as_ptr().cast(), 0, sys::ggml_nbytes(t[0]));
                sys::ggml_backend_tensor_set(t[1], acts.as_ptr().cast(), 0, sys::ggml_nbytes(t[1]));
            },
            |t| {
                let mut out = vec![0f32; (side * TOKENS) as usize];
                sys::ggml_backend_tensor_get(t[2], out.as_mut_ptr().cast(), 0, sys::ggml_nbytes(t[2]));
                check_product(&out, &weights, &acts, side, side, TOKENS)
            },
        )?
    };
    Ok(2.0 * (TOKENS * side * side) as f64 / seconds)
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

    /// ggml's AMX kernels crash on Q4_K weights (the default model, four requests of a
    /// 512-token prompt on a Sapphire Rapids Xeon: SIGSEGV in `ggml_backend_amx_mul_mat`),
    /// so the build leaves them out (.cargo/config.toml) on whatever CPU it is built on.
    #[test]
    fn the_build_has_no_amx_kernels() {
        // SAFETY: a query of how ggml was compiled.
        assert_eq!(
            unsafe { sys::ggml_cpu_has_amx_int8() },
            0,
            "ggml was built with its AMX kernels: a llama.cpp build from before they were left out? (scripts/setup cleans it)"
        );
    }

    /// Every GPU of the build is measured (lavapipe's software device in the Vulkan tests),
    /// each figure from a result checked on the host; a CPU build has none to measure.
    #[test]
    fn every_gpu_of_the_build_gets_its_limits() {
        let limits: Vec<_> = gpus().iter().map(|gpu| gpu.measure(Duration::from_millis(100))).collect();
        if super::super::GPU_BUILD.is_none() {
            assert!(limits.is_empty(), "{limits:?}");
        }
        let gpus = llama_cpp_2::list_llama_ggml_backend_devices()
            .into_iter()
            .filter(|d| matches!(d.device_type, llama_cpp_2::LlamaBackendDeviceType::Gpu | llama_cpp_2::LlamaBackendDeviceType::IntegratedGpu))
            .count();
        assert_eq!(limits.len(), gpus, "{limits:?}");
        for l in limits {
            let l = l.unwrap();
            assert!(l.memory_bytes_per_s > 1e8 && l.compute_flops_per_s > 1e8, "{l:?}");
            eprintln!("{}: memory read {:.1} GB/s, compute {:.1} GFLOP/s", l.device, l.memory_bytes_per_s / 1e9, l.compute_flops_per_s / 1e9);
        }
    }
}
