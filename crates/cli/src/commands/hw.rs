//! `lx hw`: the machine a measurement would be taken on.

use clap::Args;

#[derive(Args)]
pub struct HwArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: HwArgs) -> anyhow::Result<i32> {
    let hw = lx_backends::hardware_report();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&hw)?);
        return Ok(0);
    }
    println!("CPU       {}", hw.cpu);
    println!("cores     {} physical, {} logical", hw.physical_cores, hw.logical_cores);
    println!("memory    {:.1} GiB", hw.memory_bytes as f64 / (1u64 << 30) as f64);
    println!("OS        {} ({})", hw.os, hw.arch);
    println!("features  {}", hw.cpu_features.join(" "));
    if hw.gpus.is_empty() {
        println!("GPUs      none found");
    }
    for gpu in &hw.gpus {
        println!("GPU       {gpu}");
    }
    println!("backends");
    for (name, devices) in &hw.backend_devices {
        println!("  {name:<8}{}", devices.join("; "));
    }
    println!("what proves each backend here (docs/PLATFORMS.md)");
    for r in lx_backends::platforms::here() {
        println!("  {} · {} · {}: built in CI: {}; tested in CI: {}; measured: {}", r.backend, r.platform, r.device, r.built_in_ci, r.tested_in_ci, r.measured);
    }
    Ok(0)
}
