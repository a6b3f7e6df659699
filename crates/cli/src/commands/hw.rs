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
    let build = if hw.build_features.is_empty() { "CPU only (no GPU features)".to_string() } else { hw.build_features.join(", ") };
    println!("build     {build}");
    println!("backends");
    for (name, devices) in &hw.backend_devices {
        println!("  {name:<8}{}", devices.join("; "));
    }
    Ok(0)
}
