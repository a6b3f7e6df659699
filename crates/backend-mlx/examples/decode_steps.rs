//! How long one decode step takes with the next step's graph built ahead and without, at a
//! given cache size: one sequence, SmolLM2 (or the GGUF given), q4 weights, rounds alternating.
//! `cargo run --release -p lx-backend-mlx --features mlx --example decode_steps -- [MODEL.gguf] [CTX]`
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
fn main() {
    use lx_backend_mlx::{MlxBackend, Options, WeightMode};
    use lx_engine::backend::{Backend, Batch, Chunk, LoadSpec, Outputs};
    use std::time::Instant;
    let mut args = std::env::args().skip(1);
    let model = args.next().map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/latency-explorer/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    let ctx: usize = args.next().map_or(96, |c| c.parse().expect("CTX: a number"));
    let (prompt, steps) = (16u32, 31);
    let load = |overlap| {
        let spec = LoadSpec { model_path: model.clone(), slots: 1, ctx_per_slot: ctx, max_batch_tokens: 64, gpu_layers: Some(0), ..Default::default() };
        MlxBackend::load_with(&spec, &Options { weights: WeightMode::Mlx4, cpu: true, overlap }).expect("MLX loads the model")
    };
    let mut backends = [(true, load(true)), (false, load(false))];
    let one = |slot_tokens: Vec<u32>, pos: usize| Batch { chunks: vec![Chunk { slot: 0, pos: pos as u32, tokens: slot_tokens, outputs: Outputs::Last, score: Vec::new() }], top_logprobs: 0 };
    for round in 0..4 {
        for k in 0..2 {
            let (overlap, b) = &mut backends[(k + round) % 2];
            b.clear(0);
            let mut next = b.step(&one((1000..1000 + prompt).collect(), 0)).unwrap()[0].choices[0].token;
            let t0 = Instant::now();
            for i in 0..steps {
                next = b.step(&one(vec![next], prompt as usize + i)).unwrap()[0].choices[0].token;
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3 / steps as f64;
            if round > 0 {
                println!("ctx {ctx:>6}  overlap {:<3}  {ms:7.2} ms a step  ({} built ahead so far)", if *overlap { "on" } else { "off" }, b.steps_built_ahead());
            }
        }
    }
}

#[cfg(not(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64")))))]
fn main() {
    eprintln!("needs the mlx feature on macOS aarch64 or Linux x86_64");
}
