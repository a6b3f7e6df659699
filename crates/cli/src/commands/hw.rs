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
    /// Read this machine's power, clock and temperature sensors for a few seconds: what a
    /// sweep's power W, J/token and clock MHz columns come from, and what is not available
    /// here. With --json, GPU values are also given in NVML's own units (a recording).
    #[arg(long, conflicts_with_all = ["check", "limits"])]
    sensors: bool,
    /// With --sensors: for how long, in seconds.
    #[arg(long, requires = "sensors", default_value_t = 2.0)]
    seconds: f64,
}

pub fn run(args: HwArgs) -> anyhow::Result<i32> {
    if args.check {
        return check(args.json);
    }
    if args.limits {
        return limits(args.json, args.refresh);
    }
    if args.sensors {
        return sensors(args.json, args.seconds);
    }
    let hw = lx_local::hardware_report();
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
    let probe = lx_local::limits::limits(refresh, &mut || eprintln!("measuring this machine's limits (once per machine and build)..."))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&probe)?);
        return Ok(0);
    }
    for l in &probe.devices {
        println!("{}", l.device);
        println!("  memory read  {:.1} GB/s", l.memory_bytes_per_s / 1e9);
        println!("  compute      {:.1} GFLOP/s ({})", l.compute_flops_per_s / 1e9, l.compute_method);
    }
    for why in &probe.unmeasured {
        println!("not measured: {why}");
    }
    println!("measured in {:.1} s; `lx hw --limits --refresh` measures again", probe.seconds);
    if let Some(note) = probe.busy_note() {
        println!("warning: {note}");
    }
    Ok(0)
}

fn sensors(json: bool, seconds: f64) -> anyhow::Result<i32> {
    use lx_machine::sensors::{power_between, Sensors, SAMPLE_EVERY};
    anyhow::ensure!(seconds > 0.0 && seconds <= 3600.0, "--seconds must be above 0 and at most 3600");
    let mut sensors = Sensors::open();
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds);
    let mut readings = Vec::new();
    let mut raw = Vec::new();
    let mut cost = std::time::Duration::ZERO;
    loop {
        let t = std::time::Instant::now();
        readings.push(sensors.read());
        cost += t.elapsed();
        raw.push(sensors.last_gpu_raw().to_vec());
        if std::time::Instant::now() >= end {
            break;
        }
        std::thread::sleep(SAMPLE_EVERY.min(end.saturating_duration_since(std::time::Instant::now())));
    }
    let (first, last) = (&readings[0], &readings[readings.len() - 1]);
    let power = power_between(first, last);
    let per_read_ms = cost.as_secs_f64() * 1e3 / readings.len() as f64;
    if json {
        let out = serde_json::json!({
            "sources": sensors.sources(),
            "not_available": sensors.not_available(),
            "read_ms": per_read_ms,
            "power_w": power.as_ref().map(|p| p.0),
            "power_of": power.as_ref().map(|p| p.1.clone()),
            "readings": readings,
            "nvml_raw": raw,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    for s in sensors.sources() {
        println!("reads       {s}");
    }
    for m in sensors.not_available() {
        println!("not here    {m}");
    }
    let mhz: Vec<f64> = readings.iter().filter_map(|r| r.cpu_mhz).collect();
    if !mhz.is_empty() {
        println!("CPU clock   {:.0} MHz (mean of {} readings)", mhz.iter().sum::<f64>() / mhz.len() as f64, mhz.len());
    }
    for g in &last.gpus {
        let f = |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.0} {unit}"));
        println!("GPU {}       {}, {}, {}, {} busy{}", g.index, f(g.power_w, "W"), f(g.clock_mhz, "MHz"), f(g.temp_c, "°C"), f(g.util_pct, "%"), if g.held_back_by.is_empty() { String::new() } else { format!(", held back by {}", g.held_back_by.join(", ")) });
    }
    match power {
        Some((w, of)) => println!("power       {w:.1} W over {seconds} s ({})", of.join(" + ")),
        None => println!("power       not available here"),
    }
    println!("one reading took {per_read_ms:.3} ms");
    Ok(0)
}

fn check(json: bool) -> anyhow::Result<i32> {
    if !json {
        println!("| backend | asked for | ran on | result | load ms | run ms |");
        println!("| --- | --- | --- | --- | ---: | ---: |");
    }
    let rows = lx_local::check::run(&mut |r| {
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
