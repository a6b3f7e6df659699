use std::path::Path;
use std::time::Duration;

use super::*;

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn no_gpu() -> Result<Box<dyn GpuSource>, String> {
    Err("none in this test".into())
}

#[test]
fn the_cpu_clock_is_cpufreqs_mean_else_cpuinfos() {
    let root = tempfile::tempdir().unwrap();
    let (sys, proc) = (root.path().join("sys"), root.path().join("proc"));
    write(&proc, "cpuinfo", "processor\t: 0\ncpu MHz\t\t: 2596.142\nprocessor\t: 1\ncpu MHz\t\t: 2400.000\n");
    let mut clock = CpuClock::open(&sys, &proc).unwrap();
    assert_eq!(clock.read(), Some(2498.071));
    assert!(clock.describe().contains("cpuinfo"), "{}", clock.describe());
    // cpufreq (kHz) wins where it exists; cpufreq's own files (policy0, cpuidle) are not cores.
    write(&sys, "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2000000\n");
    write(&sys, "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "3500000\n");
    write(&sys, "devices/system/cpu/cpufreq/policy0/scaling_cur_freq", "9999999\n");
    let mut clock = CpuClock::open(&sys, &proc).unwrap();
    assert_eq!(clock.read(), Some(2750.0));
    assert_eq!(clock.describe(), "cpufreq, 2 cores");
    write(&sys, "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "1000000\n");
    assert_eq!(clock.read(), Some(1500.0));
    let empty = tempfile::tempdir().unwrap();
    let why = CpuClock::open(empty.path(), empty.path()).err().unwrap();
    assert!(why.contains("cpufreq") && why.contains("cpuinfo"), "{why}");
}

#[test]
fn package_energy_sums_the_packages_and_undoes_a_counter_wrap() {
    let root = tempfile::tempdir().unwrap();
    let sys = root.path();
    // Two packages, a core subzone and a platform zone, as a two-socket laptop-less server
    // and a laptop's powercap trees mix them: only the package zones count.
    for (zone, name, energy) in [("intel-rapl:0", "package-0", "1000000"), ("intel-rapl:0:0", "core", "5"), ("intel-rapl:1", "psys", "7"), ("intel-rapl:2", "package-1", "262143000000")] {
        write(sys, &format!("class/powercap/{zone}/name"), &format!("{name}\n"));
        write(sys, &format!("class/powercap/{zone}/energy_uj"), &format!("{energy}\n"));
        write(sys, &format!("class/powercap/{zone}/max_energy_range_uj"), "262143328850\n");
    }
    let mut cap = Powercap::open(sys).unwrap();
    assert_eq!(cap.describe(), "powercap RAPL (package-0, package-1)");
    assert_eq!(cap.read_j(), Some(0.0));
    // package-0 moves 2.5 J; package-1 wraps: 328,850 µJ to its range's end, then 171,150.
    write(sys, "class/powercap/intel-rapl:0/energy_uj", "3500000\n");
    write(sys, "class/powercap/intel-rapl:2/energy_uj", "171150\n");
    assert_eq!(cap.read_j(), Some(3.0));
    write(sys, "class/powercap/intel-rapl:0/energy_uj", "4500000\n");
    assert_eq!(cap.read_j(), Some(4.0));

    let none = tempfile::tempdir().unwrap();
    let why = Powercap::open(none.path()).err().unwrap();
    assert!(why.contains("no powercap/RAPL here"), "{why}");
    write(none.path(), "class/powercap/intel-rapl:1/name", "psys\n");
    assert!(Powercap::open(none.path()).err().unwrap().contains("has no package zone"));
}

/// NVML values in NVML's units for one GPU under a load that hits its power cap: the
/// readings a replay hands out, one per `read`. Not recorded from a GPU (none was at hand):
/// written to the units and bit masks of NVML's header, which `lx hw --sensors --json`
/// prints on a machine that has one.
const NVML_UNDER_LOAD: &str = r#"[
  [{"index": 0, "power_mw": 98000, "energy_mj": 5000000, "sm_clock_mhz": 345, "temp_c": 31, "util_pct": 0, "throttle_bits": 1}],
  [{"index": 0, "power_mw": 652000, "energy_mj": 5163000, "sm_clock_mhz": 1980, "temp_c": 52, "util_pct": 100, "throttle_bits": 0}],
  [{"index": 0, "power_mw": 700000, "energy_mj": 5338000, "sm_clock_mhz": 1755, "temp_c": 58, "util_pct": 100, "throttle_bits": 4}]
]"#;

fn replay() -> Box<dyn GpuSource> {
    Box::new(Replay { label: "the test's values".into(), readings: serde_json::from_str(NVML_UNDER_LOAD).unwrap(), next: 0 })
}

#[test]
fn nvml_values_become_watts_joules_since_opened_and_named_reasons() {
    let empty = tempfile::tempdir().unwrap();
    let mut sensors = Sensors::open_at(empty.path(), empty.path(), Ok(replay()));
    // Opening read the first values: energy counts from there.
    let loaded = sensors.read();
    let g = &loaded.gpus[0];
    assert_eq!((g.power_w, g.energy_j, g.clock_mhz, g.temp_c, g.util_pct), (Some(652.0), Some(163.0), Some(1980.0), Some(52.0), Some(100.0)));
    assert!(g.held_back_by.is_empty(), "idle is not a reason: {:?}", g.held_back_by);
    let capped = sensors.read();
    assert_eq!((capped.gpus[0].energy_j, capped.gpus[0].held_back_by.clone()), (Some(338.0), vec!["power cap".to_string()]));
    assert_eq!(sensors.sources(), ["NVIDIA (replayed: the test's values)"]);
    // Nothing else exists in the empty tree, and each says why.
    let missing = sensors.not_available();
    assert!(missing.len() == 3 && missing[0].starts_with("CPU clock: ") && missing[1].starts_with("CPU package power: ") && missing[2].starts_with("CPU temperature: "), "{missing:?}");
    // 175 J over 1 s between the two readings, whatever the wall clock between them was.
    let (a, b) = (Reading { t_ms: 0.0, ..loaded }, Reading { t_ms: 1000.0, ..capped });
    assert_eq!(power_between(&a, &b), Some((175.0, vec!["GPU 0".to_string()])));
}

fn reading(t_ms: f64, cpu_mhz: f64, cpu_j: f64, gpu_j: f64, gpu_mhz: f64, capped: bool) -> Reading {
    let gpu = GpuReading { index: 0, energy_j: Some(gpu_j), clock_mhz: Some(gpu_mhz), held_back_by: if capped { vec!["power cap".into()] } else { vec![] }, ..Default::default() };
    Reading { t_ms, cpu_mhz: Some(cpu_mhz), cpu_energy_j: Some(cpu_j), cpu_temp_c: None, gpus: vec![gpu] }
}

fn trace(readings: Vec<Reading>) -> Trace {
    let empty = tempfile::tempdir().unwrap();
    let sensors = Sensors::open_at(empty.path(), empty.path(), no_gpu());
    Trace { readings, cost: Duration::from_millis(1), span: Duration::from_secs(4), sensors }
}

#[test]
fn a_window_gets_its_energy_per_token_clocks_and_throttling() {
    // 30 W of CPU package and 600 W of GPU, readings every 250 ms from 0 to 4 s; the GPU's
    // clock steps from 1980 to 1500 MHz at 2 s, held back by its power cap from then on.
    let readings = (0..=16)
        .map(|i| {
            let t = i as f64 * 250.0;
            reading(t, 2600.0, 0.030 * t, 0.600 * t, if t < 2000.0 { 1980.0 } else { 1500.0 }, t >= 2000.0)
        })
        .collect();
    let trace = trace(readings);
    // The window opens between two readings: energy is interpolated at its ends.
    let s = SensorSummary::of(&trace, 100.0, 3900.0, 1900, true);
    assert_eq!(s.readings, 15);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
    assert!(close(s.energy_j.unwrap(), 3.8 * 630.0), "{:?}", s.energy_j);
    assert!(close(s.power_w.unwrap(), 630.0) && close(s.cpu_package_w.unwrap(), 30.0) && close(s.gpus[0].power_w.unwrap(), 600.0));
    assert_eq!(s.power_of, ["CPU packages", "GPU 0"]);
    assert!(close(s.joules_per_token.unwrap(), 3.8 * 630.0 / 1900.0));
    assert!(close(s.tokens_per_s_per_w.unwrap(), 1900.0 / (3.8 * 630.0)));
    assert_eq!(s.cpu_mhz, Some(Span { mean: 2600.0, min: 2600.0, max: 2600.0 }));
    assert_eq!(s.clock_mhz(), Some(s.gpus[0].clock_mhz.unwrap().mean));
    assert_eq!(
        s.throttling,
        ["GPU 0 clock fell from 1980 to 1500 MHz (-24%) while the load was steady", "GPU 0 clocks held back by power cap in 8 of 15 readings"]
    );
    assert!(close(s.sampler_cpu_share, 0.001 / 4.0));
    assert_eq!((s.trace.first().unwrap().t_ms, s.trace.last().unwrap().t_ms), (-100.0, 4000.0 - 100.0));
    // Open loop: the load itself changes, so a falling clock is not called throttling.
    let open = SensorSummary::of(&trace, 100.0, 3900.0, 1900, false);
    assert_eq!(open.throttling, ["GPU 0 clocks held back by power cap in 8 of 15 readings"]);
    // A window inside one sampling interval: the two readings around it stand for it.
    let short = SensorSummary::of(&trace, 1010.0, 1110.0, 10, true);
    assert_eq!(short.readings, 0);
    assert!(close(short.energy_j.unwrap(), 0.1 * 630.0) && close(short.joules_per_token.unwrap(), 6.3));
    assert!(short.throttling.is_empty());
}

#[test]
fn where_nothing_gives_power_there_is_no_figure_and_no_zero() {
    let readings = (0..10).map(|i| Reading { t_ms: i as f64 * 250.0, cpu_mhz: Some(2596.0), ..Default::default() }).collect();
    let s = SensorSummary::of(&trace(readings), 0.0, 2250.0, 100, true);
    assert_eq!((s.power_w, s.energy_j, s.joules_per_token, s.tokens_per_s_per_w), (None, None, None, None));
    assert!(s.power_of.is_empty());
    assert_eq!(s.clock_mhz(), Some(2596.0));
    assert_eq!(s.not_available.len(), 4, "{:?}", s.not_available);
}

#[test]
fn a_clock_falls_only_when_it_falls_far_enough_for_long_enough() {
    let series = |mhz: &[f64], every: f64| mhz.iter().enumerate().map(|(i, &m)| (i as f64 * every, m)).collect::<Vec<_>>();
    let falling = [3000.0, 3000.0, 2950.0, 2900.0, 2800.0, 2700.0, 2600.0, 2600.0];
    assert_eq!(clock_fell(&series(&falling, 300.0)), Some((3000.0, 2600.0)));
    // Too short a time, too few readings, or a wander under 10%: not throttling.
    assert_eq!(clock_fell(&series(&falling, 250.0)), None);
    assert_eq!(clock_fell(&series(&falling[..7], 400.0)), None);
    assert_eq!(clock_fell(&series(&[3000.0, 3000.0, 2950.0, 2900.0, 2850.0, 2800.0, 2750.0, 2750.0], 300.0)), None);
}

#[test]
fn the_sampler_reads_this_machine_at_its_rate_and_costs_little() {
    let sensors = Sensors::open();
    // Every source is either read or said to be unavailable.
    assert_eq!(sensors.sources().len() + sensors.not_available().len(), 4, "{:?} {:?}", sensors.sources(), sensors.not_available());
    let sampler = Sampler::start(sensors, Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(520));
    let early = sampler.take();
    let trace = sampler.finish();
    let n = early.len() + trace.readings.len();
    // One at the start, one every 50 ms, one at the end: 12 on time; a loaded machine is late.
    assert!((6..=13).contains(&n), "{n} readings in {:?}", trace.span);
    assert!(early.windows(2).all(|w| w[1].t_ms > w[0].t_ms));
    // Reading the sensors 20 times a second takes under 1% of one core here (a read is a
    // few small files, or NVML calls where there is a GPU).
    assert!(trace.cost_share() < 0.01, "the sampler took {:.3}% of a core", trace.cost_share() * 100.0);
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        assert!(early.iter().all(|r| r.cpu_mhz.is_some_and(|m| m > 0.0)), "x86 Linux always has cpuinfo's clock");
    }
}

#[test]
fn the_cpu_temperature_is_the_hottest_package_sensor_else_a_cpu_thermal_zone() {
    let root = tempfile::tempdir().unwrap();
    let sys = root.path();
    // A thermal zone of the CPU's type, and one that is not (the ACPI's).
    write(sys, "class/thermal/thermal_zone0/type", "acpitz\n");
    write(sys, "class/thermal/thermal_zone0/temp", "27800\n");
    write(sys, "class/thermal/thermal_zone1/type", "x86_pkg_temp\n");
    write(sys, "class/thermal/thermal_zone1/temp", "61000\n");
    let mut t = CpuTemp::open(sys).unwrap();
    assert_eq!((t.read(), t.describe().as_str()), (Some(61.0), "thermal zone x86_pkg_temp"));
    // hwmon's package sensors win where there are some; a GPU's or a disk's are not the CPU.
    write(sys, "class/hwmon/hwmon0/name", "nvme\n");
    write(sys, "class/hwmon/hwmon0/temp1_input", "90000\n");
    write(sys, "class/hwmon/hwmon1/name", "k10temp\n");
    write(sys, "class/hwmon/hwmon1/temp1_input", "71250\n");
    let mut t = CpuTemp::open(sys).unwrap();
    assert_eq!((t.read(), t.describe().as_str()), (Some(71.25), "hwmon k10temp"));
    let empty = tempfile::tempdir().unwrap();
    let why = CpuTemp::open(empty.path()).err().unwrap();
    assert!(why.starts_with("no CPU temperature sensor here"), "{why}");
    // The sensors name it among what they read or cannot.
    let s = Sensors::open_at(sys, sys, no_gpu());
    assert!(s.sources().iter().any(|x| x == "CPU temperature: hwmon k10temp"), "{:?}", s.sources());
    let none = Sensors::open_at(empty.path(), empty.path(), no_gpu());
    assert!(none.not_available().iter().any(|x| x.starts_with("CPU temperature: no CPU temperature sensor")), "{:?}", none.not_available());
}
