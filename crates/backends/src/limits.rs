//! This machine's limits for the ceilings beside every measurement: measured once per
//! machine and build in a child process (`lx worker --probe`, so that llama.cpp's library
//! never runs inside the app or the measuring process), then read from the cache.

use std::io::Read;
use std::time::{Duration, Instant};

use lx_engine::probe::{self, Probe};

/// A probe takes a few seconds; past this the child is stopped and the run goes on without.
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// The cached probe for this machine and build, or a new one when there is none or
/// `refresh` asks (then `measuring` is called first, to say why there is a wait).
pub fn limits(refresh: bool, measuring: &mut dyn FnMut()) -> anyhow::Result<Probe> {
    let key = probe::machine_key(&crate::hardware_report());
    let path = probe::cache_path(&lx_models::cache_dir());
    if !refresh {
        if let Some(cached) = probe::cached(&path, &key) {
            return Ok(cached);
        }
    }
    measuring();
    let mut command = crate::worker_command("llama");
    let mut child = std::process::Command::new(&command.program)
        .args(["worker", "--probe"])
        .envs(command.env.drain(..))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start the probe ({}): {e}", command.program.display()))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > PROBE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the probe of this machine's limits took over {} s and was stopped", PROBE_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    if !status.success() {
        anyhow::bail!("the probe of this machine's limits failed ({status})");
    }
    let mut measured: Probe = serde_json::from_str(&out).map_err(|e| anyhow::anyhow!("the probe's answer is not a probe: {e}"))?;
    measured.key = key;
    // Kept even when other work ran beside it (its tables say so, `Probe::busy_note`): a
    // probe refused under load would be taken again under the same load by every run.
    probe::save(&path, &measured)?;
    Ok(measured)
}

/// What the ceilings of a run on `model` are computed from: this machine's limits
/// ([`limits`]) and the model's cost per token.
pub fn ceilings_basis(model: &std::path::Path, measuring: &mut dyn FnMut()) -> anyhow::Result<(Probe, lx_engine::roofline::ModelCost)> {
    let cost = lx_engine::roofline::ModelCost::from_gguf(&lx_engine::gguf::GgufFile::open(model)?)?;
    Ok((limits(false, measuring)?, cost))
}

/// The probe itself, in the child: memory bandwidth with every logical core, and ggml's
/// quantized matrix product with as many threads as the backends use by default (the
/// physical cores); then each GPU of the build, on the device.
pub fn measure_here() -> anyhow::Result<Probe> {
    let hw = lx_engine::hardware::probe();
    let compute = || lx_backend_llamacpp::probe::matmul_flops_per_s(hw.physical_cores.max(1), Duration::from_millis(1500)).map_err(anyhow::Error::msg);
    let mut measured = probe::measure(String::new(), hw.logical_cores.max(1), &compute)?;
    // Every GPU of the build too, through the same library on the device.
    for gpu in lx_backend_llamacpp::probe::gpu_limits(Duration::from_millis(1000)) {
        match gpu {
            Ok(limits) => measured.devices.push(limits),
            Err(why) => measured.unmeasured.push(why),
        }
    }
    Ok(measured)
}
