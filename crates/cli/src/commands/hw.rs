//! `lx hw`: the machine a measurement would be taken on; `--check` proves each backend
//! runs here, on each device it can use.

use clap::Args;

#[derive(Args)]
pub struct HwArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Load a tiny generated model on every backend and device of this build and run a
    /// few tokens: a table of what works here (exit status 1 when any row fails).
    #[arg(long)]
    check: bool,
    /// Print this machine's limits, the ceilings' basis: memory read bandwidth and the
    /// matrix-product rate (measured once per machine and build, then cached).
    #[arg(long, conflicts_with = "check")]
    limits: bool,
    /// With --limits: measure again instead of using the cached figures.
    #[arg(long, requires = "limits")]
    refresh: bool,
}

pub fn run(args: HwArgs) -> anyhow::Result<i32> {
    if args.check {
        return check(args.json);
    }
    if args.limits {
        return limits(args.json, args.refresh);
    }
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

fn limits(json: bool, refresh: bool) -> anyhow::Result<i32> {
    let probe = lx_backends::limits::limits(refresh, &mut || eprintln!("measuring this machine's limits (once per machine and build)..."))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&probe)?);
        return Ok(0);
    }
    for l in &probe.devices {
        println!("{}", l.device);
        println!("  memory read  {:.1} GB/s", l.memory_bytes_per_s / 1e9);
        println!("  compute      {:.1} GFLOP/s ({})", l.compute_flops_per_s / 1e9, l.compute_method);
    }
    println!("measured in {:.1} s; `lx hw --limits --refresh` measures again", probe.seconds);
    if let Some(note) = probe.busy_note() {
        println!("warning: {note}");
    }
    Ok(0)
}

fn check(json: bool) -> anyhow::Result<i32> {
    if !json {
        println!("| backend | asked for | ran on | result | load ms | run ms |");
        println!("| --- | --- | --- | --- | ---: | ---: |");
    }
    let rows = lx_backends::check::run(&mut |r| {
        if json {
            return;
        }
        let result = match (&r.error, &r.cpu_fallback) {
            (Some(e), _) => format!("failed: {}", e.replace('|', "/")),
            (None, Some(why)) => format!("ok ({} tokens); {why}", r.tokens),
            (None, None) => format!("ok ({} tokens)", r.tokens),
        };
        let device = if r.device.is_empty() { "-" } else { &r.device };
        println!("| {} | {} | {device} | {result} | {:.0} | {:.0} |", r.backend, r.requested, r.load_ms, r.run_ms);
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(if rows.iter().all(|r| r.ok) { 0 } else { 1 })
}
