//! Starting targets that are our worker processes: one worker, or, for the `disaggregated`
//! policy, a prefill worker and a decode worker behind one target.

use std::sync::Arc;
use std::time::Duration;

use lx_engine::backend::LoadSpec;
use crate::child::WorkerCommand;
use crate::coordinator::Worker;
use lx_client::target::TargetError;
use lx_engine::scheduler::SchedulerConfig;
use lx_client::target::{Spawner, Target};

/// Starts the worker process `cmd` with `spec` loaded, or, for the `disaggregated` policy,
/// a prefill worker and a decode worker behind one target. `cores` is what a thread count
/// of 0 means when two workers share the machine.
pub fn spawn_workers(cmd: &WorkerCommand, spec: &LoadSpec, config: &SchedulerConfig, load_timeout: Duration, cores: usize) -> Result<Box<dyn Target>, TargetError> {
    if config.policy == lx_engine::scheduler::Policy::Disaggregated {
        return crate::disaggregated::Disaggregated::spawn(cmd, spec, config, load_timeout, cores).map(|t| Box::new(t) as Box<dyn Target>);
    }
    Worker::spawn(cmd, spec, config, load_timeout).map(|w| Box::new(w) as Box<dyn Target>)
}

/// A [`Spawner`] that starts worker processes with `command(backend)`.
pub fn process_spawner(command: impl Fn(&str) -> WorkerCommand + Send + Sync + 'static, load_timeout: Duration) -> Spawner {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Arc::new(move |backend: &str, spec: &LoadSpec, config: &SchedulerConfig| spawn_workers(&command(backend), spec, config, load_timeout, cores))
}
