//! This machine's limits for the ceilings beside every measurement: measured once per
//! machine and build in a child process (`lx worker --probe`, so that llama.cpp's library
//! never runs inside the app or the measuring process), then read from the cache.

use std::io::Write;
use std::time::{Duration, Instant};

use lx_worker::child::{LineChild, Next};

use lx_machine::probe::{self, Probe};
use lx_machine::roofline::Limits;
use serde::{Deserialize, Serialize};

/// Each stage of the probe (the CPU, then each GPU) takes seconds; past this the child is
/// stopped and the probe keeps what the stages before had measured.
const STAGE_TIMEOUT: Duration = Duration::from_secs(120);

/// One line of the probe's answer, in the order measured: the CPU's limits, the GPUs of the
/// build, then each GPU's limits or why not. So a GPU that hangs or crashes the child costs
/// its own figures only, and says so.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ProbeLine {
    Cpu(Probe),
    Gpus(Vec<String>),
    Measured(Limits),
    Unmeasured(String),
}

/// The cached probe for this machine and build, or a new one when there is none or
/// `refresh` asks (then `measuring` is called first, to say why there is a wait).
pub fn limits(refresh: bool, measuring: &mut dyn FnMut()) -> anyhow::Result<Probe> {
    if !refresh {
        if let Some(cached) = cached_limits() {
            return Ok(cached);
        }
    }
    let key = probe::machine_key(&crate::hardware_report());
    let path = probe::cache_path(&lx_models::cache_dir());
    measuring();
    let command = crate::worker::WorkerRole::Probe.command();
    let mut child = LineChild::spawn(&command, false).map_err(|e| anyhow::anyhow!("cannot start the probe ({}): {e}", command.program.display()))?;
    // An answer that made no sense leaves no child running: dropping it stops it.
    let measured = collect(&mut child, STAGE_TIMEOUT);
    let mut measured = measured?;
    measured.key = key;
    // Kept even when other work ran beside it (its tables say so, `Probe::busy_note`): a
    // probe refused under load would be taken again under the same load by every run.
    probe::save(&path, &measured)?;
    Ok(measured)
}

/// The cached probe for this machine and build, if one was measured (nothing is measured).
pub fn cached_limits() -> Option<Probe> {
    probe::cached(&probe::cache_path(&lx_models::cache_dir()), &probe::machine_key(&crate::hardware_report()))
}

/// The probe from the child's lines ([`ProbeLine`]), each stage given `stage_timeout`. The
/// child is stopped when a stage overruns; a GPU it did not finish is listed as not
/// measured, with why. Without the CPU's limits there is no probe.
fn collect(child: &mut LineChild, stage_timeout: Duration) -> anyhow::Result<Probe> {
    let started = Instant::now();
    let (mut cpu, mut gpus, mut done): (Option<Probe>, Option<Vec<String>>, usize) = (None, None, 0);
    let stopped = loop {
        let line = match child.next(stage_timeout) {
            Next::Line(_, line) => line,
            Next::Quiet => {
                child.kill();
                break Some(format!("took over {} s and was stopped", stage_timeout.as_secs_f64()));
            }
            Next::Closed => break (!child.exit_status().is_some_and(|s| s.success())).then(|| child.exit_reason()),
        };
        let line: ProbeLine = serde_json::from_str(&line).map_err(|e| anyhow::anyhow!("the probe's answer is not a probe: {e}: {line}"))?;
        match (line, cpu.as_mut()) {
            (ProbeLine::Cpu(p), None) => cpu = Some(p),
            (ProbeLine::Gpus(names), Some(_)) if gpus.is_none() => gpus = Some(names),
            (ProbeLine::Measured(limits), Some(p)) if gpus.as_ref().is_some_and(|g| done < g.len()) => {
                p.devices.push(limits);
                done += 1;
            }
            (ProbeLine::Unmeasured(why), Some(p)) if gpus.as_ref().is_some_and(|g| done < g.len()) => {
                p.unmeasured.push(why);
                done += 1;
            }
            (line, _) => anyhow::bail!("the probe answered out of order: {line:?}"),
        }
    };
    let Some(mut measured) = cpu else {
        anyhow::bail!("the probe of this machine's limits {}", stopped.as_deref().unwrap_or("ended without an answer"));
    };
    if let Some(why) = stopped {
        match gpus {
            None => measured.unmeasured.push(format!("GPUs: not listed: the probe {why}")),
            Some(names) => measured.unmeasured.extend(names.iter().skip(done).enumerate().map(|(i, name)| {
                if i == 0 { format!("{name}: not measured: the probe {why}") } else { format!("{name}: not measured: the probe was stopped before it") }
            })),
        }
    }
    measured.seconds = started.elapsed().as_secs_f64();
    Ok(measured)
}

/// What the ceilings of a run on `model` are computed from: this machine's limits
/// ([`limits`]) and the model's cost per token.
pub fn ceilings_basis(model: &std::path::Path, measuring: &mut dyn FnMut()) -> anyhow::Result<(Probe, lx_machine::roofline::ModelCost)> {
    let cost = lx_machine::roofline::ModelCost::from_gguf(&lx_format::gguf::GgufFile::open(model)?)?;
    Ok((limits(false, measuring)?, cost))
}

/// The probe itself, in the child, line by line on stdout ([`ProbeLine`]): memory
/// bandwidth with every logical core, and ggml's quantized matrix product with as many
/// threads as the backends use by default (the physical cores); then each GPU of the build,
/// on the device.
pub fn serve_probe() -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let mut say = |line: ProbeLine| -> anyhow::Result<()> {
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
        Ok(out.flush()?)
    };
    let hw = lx_machine::hardware::probe();
    let compute = || lx_backend_llamacpp::probe::matmul_flops_per_s(hw.physical_cores.max(1), Duration::from_millis(1500)).map_err(anyhow::Error::msg);
    say(ProbeLine::Cpu(probe::measure(String::new(), hw.logical_cores.max(1), &compute)?))?;
    let gpus = lx_backend_llamacpp::probe::gpus();
    say(ProbeLine::Gpus(gpus.iter().map(|g| g.name.clone()).collect()))?;
    for gpu in gpus {
        say(match gpu.measure(Duration::from_millis(1000)) {
            Ok(limits) => ProbeLine::Measured(limits),
            Err(why) => ProbeLine::Unmeasured(why),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(device: &str) -> Limits {
        Limits { device: device.into(), memory_bytes_per_s: 50e9, compute_flops_per_s: 400e9, compute_method: "ggml".into() }
    }

    /// A fake probe child: prints `lines` (as the real one would, one JSON value each),
    /// then runs `then` (a shell command: how it ends).
    fn child(lines: &[ProbeLine], then: &str) -> (tempfile::TempDir, LineChild) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lines");
        std::fs::write(&file, lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect::<String>()).unwrap();
        let command = lx_worker::child::WorkerCommand { program: "sh".into(), args: vec!["-c".into(), format!("cat '{}'; {then}", file.display())], env: Vec::new() };
        (dir, LineChild::spawn(&command, false).unwrap())
    }

    fn cpu() -> ProbeLine {
        ProbeLine::Cpu(Probe { key: String::new(), measured_unix_ms: 0, seconds: 0.0, devices: vec![limits("CPU (2 threads)")], others_cpu_share: None, unmeasured: Vec::new() })
    }

    fn gpus(names: &[&str]) -> ProbeLine {
        ProbeLine::Gpus(names.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn every_stage_answered_is_the_whole_probe() {
        let (_dir, mut c) = child(&[cpu(), gpus(&["GPU0 a", "GPU1 b"]), ProbeLine::Measured(limits("GPU0 a")), ProbeLine::Unmeasured("GPU1 b: out of memory".into())], "exit 0");
        let p = collect(&mut c, Duration::from_secs(60)).unwrap();
        assert_eq!(p.devices, vec![limits("CPU (2 threads)"), limits("GPU0 a")]);
        assert_eq!(p.unmeasured, vec!["GPU1 b: out of memory".to_string()]);
    }

    /// A GPU that hangs is stopped after its stage's time and named; what came before is kept.
    #[test]
    fn a_hanging_gpu_costs_its_own_figures_only() {
        let (_dir, mut c) = child(&[cpu(), gpus(&["GPU0 fast", "GPU1 hangs", "GPU2 after"]), ProbeLine::Measured(limits("GPU0 fast"))], "sleep 60");
        let started = Instant::now();
        let p = collect(&mut c, Duration::from_millis(500)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(30), "not stopped: {:?}", started.elapsed());
        assert_eq!(p.devices, vec![limits("CPU (2 threads)"), limits("GPU0 fast")]);
        assert_eq!(
            p.unmeasured,
            vec!["GPU1 hangs: not measured: the probe took over 0.5 s and was stopped".to_string(), "GPU2 after: not measured: the probe was stopped before it".to_string()]
        );
    }

    #[test]
    fn a_crash_on_a_gpu_is_said_with_the_exit_status() {
        let (_dir, mut c) = child(&[cpu(), gpus(&["GPU0 crashes"])], "echo 'out of luck' >&2; exit 3");
        let p = collect(&mut c, Duration::from_secs(60)).unwrap();
        assert_eq!(p.devices, vec![limits("CPU (2 threads)")]);
        assert_eq!(p.unmeasured, vec!["GPU0 crashes: not measured: the probe exited with status 3; last stderr: out of luck".to_string()]);
    }

    /// Without the CPU's limits there is nothing to keep: an error that says what happened.
    #[test]
    fn no_cpu_limits_is_an_error_that_says_why() {
        let (_dir, mut c) = child(&[], "exit 1");
        assert_eq!(collect(&mut c, Duration::from_secs(60)).unwrap_err().to_string(), "the probe of this machine's limits exited with status 1");
        let (_dir, mut c) = child(&[], "sleep 60");
        assert_eq!(collect(&mut c, Duration::from_millis(300)).unwrap_err().to_string(), "the probe of this machine's limits took over 0.3 s and was stopped");
        let (_dir, mut c) = child(&[cpu(), ProbeLine::Measured(limits("GPU0"))], "exit 0");
        assert!(collect(&mut c, Duration::from_secs(60)).unwrap_err().to_string().starts_with("the probe answered out of order: Measured"));
    }
}
