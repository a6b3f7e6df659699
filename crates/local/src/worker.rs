//! The worker's command line, written and read in this one place. `lx` and the app both host
//! their workers by re-executing themselves as `worker --backend NAME` (one backend behind the
//! worker protocol) or `worker --probe` (this machine's limits, so llama.cpp's library never
//! runs inside the measuring process); both binaries read their arguments with
//! [`WorkerRole::from_args`] before anything else ([`crate::serve_if_asked`]).

use lx_worker::child::WorkerCommand;

static HOST: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Workers of this process run in `program` (an `lx` binary), not in this binary: for a
/// process that cannot host them (a test harness), without setting the environment of a
/// process whose other threads read it. The first call decides.
pub fn host_workers_in(program: std::path::PathBuf) {
    let _ = HOST.set(program);
}

/// What a worker process is asked to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerRole {
    /// `worker --backend NAME`: host one backend.
    Backend(String),
    /// `worker --probe`: measure this machine's limits and print them.
    Probe,
}

/// How the two roles are asked for, for a usage line.
pub const USAGE: &str = "worker --backend NAME | worker --probe";

impl WorkerRole {
    /// The arguments that ask for this role (after the program).
    pub fn args(&self) -> Vec<String> {
        match self {
            WorkerRole::Backend(name) => vec!["worker".into(), "--backend".into(), name.clone()],
            WorkerRole::Probe => vec!["worker".into(), "--probe".into()],
        }
    }

    /// If a process's arguments (program first) ask for a worker, which role; an error when
    /// they ask for one in a form this binary does not write.
    pub fn from_args(args: &[String]) -> Option<Result<WorkerRole, String>> {
        if args.get(1).map(String::as_str) != Some("worker") {
            return None;
        }
        let rest: Vec<&str> = args[2..].iter().map(String::as_str).collect();
        Some(match rest.as_slice() {
            ["--backend", name] => Ok(WorkerRole::Backend((*name).to_string())),
            ["--probe"] => Ok(WorkerRole::Probe),
            _ => Err(format!("usage: {USAGE} (got: worker {})", rest.join(" "))),
        })
    }

    /// How to start a worker in this role: this very binary (`LX_WORKER_EXE`, or
    /// [`host_workers_in`], names another, for tests and for a binary that cannot host
    /// workers).
    pub fn command(&self) -> WorkerCommand {
        let program = HOST.get()
            .map(|p| p.as_os_str().to_owned())
            .or_else(|| std::env::var_os("LX_WORKER_EXE"))
            .map(Into::into)
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| "lx".into());
        WorkerCommand { program, args: self.args(), env: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn worker_arguments_are_recognised_exactly() {
        assert_eq!(WorkerRole::from_args(&args(&["app"])), None);
        assert_eq!(WorkerRole::from_args(&args(&["app", "--foo"])), None);
        assert_eq!(WorkerRole::from_args(&args(&["app", "worker", "--backend", "llama"])), Some(Ok(WorkerRole::Backend("llama".into()))));
        assert_eq!(WorkerRole::from_args(&args(&["app", "worker", "--probe"])), Some(Ok(WorkerRole::Probe)));
        assert!(matches!(WorkerRole::from_args(&args(&["app", "worker"])), Some(Err(_))));
        assert!(matches!(WorkerRole::from_args(&args(&["app", "worker", "--backend", "llama", "x"])), Some(Err(_))));
        assert!(matches!(WorkerRole::from_args(&args(&["app", "worker", "--backend"])), Some(Err(_))));
    }

    #[test]
    fn what_is_written_is_what_is_read() {
        for role in [WorkerRole::Backend("candle".into()), WorkerRole::Probe] {
            let mut line = vec!["lx".to_string()];
            line.extend(role.command().args);
            assert_eq!(WorkerRole::from_args(&line), Some(Ok(role)));
        }
    }

    #[test]
    fn the_worker_command_re_executes_this_binary() {
        if std::env::var_os("LX_WORKER_EXE").is_none() && HOST.get().is_none() {
            assert_eq!(WorkerRole::Probe.command().program, std::env::current_exe().unwrap());
        }
    }
}
