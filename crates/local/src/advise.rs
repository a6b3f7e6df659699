//! `lx advise` as the CLI and the app both run it: the preset's workload as a plan on an open
//! model, the run file begun with this machine's report and the preset, one session whose
//! workers stay loaded from trial to trial, and the run file rewritten after every trial.

use std::path::PathBuf;
use std::sync::Arc;

use lx_client::target::Spawner;
use lx_client::traffic::RunControl;
use lx_decide::advise::{advise, Request};
use lx_decide::capacity::{Bench, TRIAL_REQUESTS};
use lx_run::sweep::{Session, SweepError, SweepObserver, SweepPlan};
use lx_format::workload::PromptBuilder;
use lx_results::decision::Advice;
use lx_results::printers::Printer;
use lx_results::results::RunFile;

use crate::model::OpenModel;

/// One advice, ready to run.
pub struct AdviseJob {
    pub model: Arc<OpenModel>,
    pub request: Request,
    /// The workload every trial shares (the preset's lengths, prefix and objectives).
    pub plan: SweepPlan,
    pub run: RunFile,
    /// Where the run file is written after every trial; `None`: kept in memory only.
    pub out: Option<PathBuf>,
    pub control: RunControl,
    spawn: Spawner,
}

impl AdviseJob {
    /// Checks the preset's workload against `model` (a prompt longer than its context is
    /// refused before anything loads) and begins the run file.
    pub fn new(model: Arc<OpenModel>, request: Request, threads: usize, seed: u64, command: Vec<String>, spawn: Spawner) -> anyhow::Result<AdviseJob> {
        if request.candidates.is_empty() {
            anyhow::bail!("nothing to advise on: name a backend or a server");
        }
        if request.policies.is_empty() {
            anyhow::bail!("give at least one scheduling policy");
        }
        if request.most_clients == 0 {
            anyhow::bail!("the most clients to try must be at least 1");
        }
        let mut plan = SweepPlan {
            backends: request.candidates.clone(),
            servers: request.servers.clone(),
            policies: request.policies.clone(),
            threads,
            seed,
            warmup: Some(0),
            requests: TRIAL_REQUESTS,
            ..SweepPlan::default()
        };
        request.preset.apply(&mut plan, false);
        // Workers load once, with slots for the most sequences any trial runs at once.
        plan.concurrency = vec![request.preset.slots.max(request.most_clients)];
        plan.validate(Some(model.context_length))?;
        let mut run = RunFile::new(command, crate::hardware_report(), model.record(), serde_json::to_value(&plan)?);
        run.preset = Some(request.preset.record());
        Ok(AdviseJob { model, request, plan, run, out: None, control: RunControl::default(), spawn })
    }

    /// Runs the trials and the confirmation. Returns the run file as it stands (every trial's
    /// point, the searches or plans, the advice; marked stopped when the control was raised)
    /// and the advice, or what ended it.
    pub fn run(self, printer: &mut dyn Printer, observer: &mut dyn SweepObserver) -> (RunFile, Result<Advice, SweepError>) {
        let AdviseJob { model, request, plan, mut run, out, control, spawn } = self;
        let prompts = PromptBuilder::new(&model.tokenizer);
        let ctx = model.sweep_context(&prompts, spawn, out.clone(), control);
        let mut session = Session::new(plan.load_spec_for(model.path.clone(), &plan.points()));
        if let Err(e) = printer.header(&run) {
            return (run, Err(e.into()));
        }
        let advice = {
            let mut bench = Bench::new(&plan, &ctx, &mut session, &mut run, printer, observer, request.preset.objectives);
            advise(&request, &mut bench)
        };
        drop(session);
        let advice = advice.and_then(|a| printer.footer(&run).map(|()| a).map_err(SweepError::from));
        // The advice and its decisions came after the last trial's write.
        if let Some(path) = &out {
            if let Err(e) = run.write_atomic(path) {
                let kept = RunFile::read(path).map(|r| r.points.len()).unwrap_or(0);
                return (run.clone(), Err(SweepError::Unsaved { path: path.clone(), why: e.to_string(), kept, total: run.points.len() }));
            }
        }
        (run, advice)
    }
}
