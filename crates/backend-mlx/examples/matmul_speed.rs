//! How fast MLX multiplies on this device, per weight form: one (rows × 640) × (640 × 2048)
//! product, the shape of Gemma 3 270M's FFN, with f16, f32 and 4-bit affine weights.
//! `cargo run --release -p lx-backend-mlx --features mlx --example matmul_speed`
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
fn main() {
    use mlx_rs::{ops, transforms, Array, Dtype};
    use std::time::Instant;
    let (k, n) = (640, 2048);
    // A fixed spread of values (mlx-rs's random module does not link on Linux).
    let values = |len: usize| (0..len).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 500.0).collect::<Vec<f32>>();
    let w = Array::from_slice(&values((n * k) as usize), &[n, k]);
    let w16 = w.as_dtype(Dtype::Float16).unwrap();
    let (q, s, b) = ops::quantize(&w, 64, 4).unwrap();
    transforms::eval([&w, &w16, &q, &s, &b]).unwrap();
    for rows in [1, 64] {
        let x = Array::from_slice(&values((rows * k) as usize), &[rows, k]);
        x.eval().unwrap();
        let time = |name: &str, f: &dyn Fn() -> Array| {
            f().eval().unwrap();
            let t0 = Instant::now();
            let reps = 5;
            for _ in 0..reps {
                f().eval().unwrap();
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3 / reps as f64;
            println!("rows {rows:>3}  {name:<10} {ms:8.2} ms  {:6.2} GFLOP/s", 2.0 * (rows * k * n) as f64 / ms / 1e6);
        };
        time("f32", &|| ops::matmul(&x, ops::transpose(&w).unwrap()).unwrap());
        time("f16", &|| ops::matmul(x.as_dtype(Dtype::Float16).unwrap(), ops::transpose(&w16).unwrap()).unwrap());
        time("4-bit g64", &|| ops::quantized_matmul(&x, &q, &s, &b, true, 64, 4).unwrap());
    }
}

#[cfg(not(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64")))))]
fn main() {
    eprintln!("build with --features mlx on macOS aarch64 or Linux x86_64");
}
