//! How long one decode step takes with the next step's graph built ahead and without, at a
//! given cache size: SEQS sequences (default 1) of the same prompt decoding together, SmolLM2
//! (or the GGUF given), q4 weights, rounds alternating.
//! `cargo run --release -p lx-backend-mlx --features mlx --example decode_steps -- [MODEL.gguf] [CTX] [SEQS]`
//! Beside each round: the CPU time of the process's two busiest threads, MLX's evaluating
//! thread first, in ms a step; a step's time less the first is how long MLX waited for the host.
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
    let seqs: u32 = args.next().map_or(1, |c| c.parse().expect("SEQS: a number"));
    let (prompt, steps) = (16u32, 63);
    let load = |overlap| {
        let spec = LoadSpec { model_path: model.clone(), slots: seqs as usize, ctx_per_slot: ctx, max_batch_tokens: 64 * seqs as usize, gpu_layers: Some(0), ..Default::default() };
        MlxBackend::load_with(&spec, &Options { weights: WeightMode::Mlx4, cpu: true, overlap }).expect("MLX loads the model")
    };
    let mut backends = [(true, load(true)), (false, load(false))];
    // Each sequence fed its own tokens at `pos`.
    let batch = |tokens: &[Vec<u32>], pos: usize| Batch {
        chunks: tokens.iter().enumerate().map(|(s, t)| Chunk { slot: s as u32, pos: pos as u32, tokens: t.clone(), outputs: Outputs::Last, score: Vec::new() }).collect(),
        top_logprobs: 0,
    };
    let next_of = |out: Vec<lx_engine::backend::ChunkOutput>| -> Vec<Vec<u32>> { out.iter().map(|o| vec![o.choices[0].token]).collect() };
    for round in 0..4 {
        for k in 0..2 {
            let (overlap, b) = &mut backends[(k + round) % 2];
            (0..seqs).for_each(|s| b.clear(s));
            let mut next = next_of(b.step(&batch(&vec![(1000..1000 + prompt).collect(); seqs as usize], 0)).unwrap());
            let (t0, busy0) = (Instant::now(), thread_cpu());
            for i in 0..steps {
                next = next_of(b.step(&batch(&next, prompt as usize + i)).unwrap());
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3 / steps as f64;
            let busy = busiest(&busy0, &thread_cpu(), steps);
            if round > 0 {
                println!("ctx {ctx:>6}  seqs {seqs}  overlap {:<3}  {ms:7.2} ms a step  ({} built ahead so far)  busiest threads, ms a step: {busy}", if *overlap { "on" } else { "off" }, b.steps_built_ahead());
            }
        }
    }
}

/// CPU seconds each thread of this process has used, by thread id (Linux; empty elsewhere):
/// MLX evaluates on a thread of its own, so its share of a step says whether the step's time
/// is spent computing or waiting for the host.
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
fn thread_cpu() -> std::collections::BTreeMap<u32, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for t in tasks.flatten() {
        let (Ok(id), Ok(stat)) = (t.file_name().to_string_lossy().parse::<u32>(), std::fs::read_to_string(t.path().join("stat"))) else { continue };
        // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<f64> = rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse().ok()).collect();
        if f.len() == 2 {
            out.insert(id, (f[0] + f[1]) / 100.0);
        }
    }
    out
}

/// The two busiest threads between two readings, in ms of CPU a step.
#[cfg(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64"))))]
fn busiest(before: &std::collections::BTreeMap<u32, f64>, after: &std::collections::BTreeMap<u32, f64>, steps: usize) -> String {
    let mut used: Vec<f64> = after.iter().map(|(id, s)| (s - before.get(id).copied().unwrap_or(0.0)) * 1e3 / steps as f64).collect();
    used.sort_by(|a, b| b.total_cmp(a));
    used.iter().take(2).map(|ms| format!("{ms:.1}")).collect::<Vec<_>>().join(", ")
}

#[cfg(not(all(feature = "mlx", any(all(target_os = "macos", target_arch = "aarch64"), all(target_os = "linux", target_arch = "x86_64")))))]
fn main() {
    eprintln!("needs the mlx feature on macOS aarch64 or Linux x86_64");
}
