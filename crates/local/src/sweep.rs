//! A sweep as `lx sweep` and the app both run it: a checked plan on an open model, the run
//! file begun with this machine's report, the ceilings' basis (this machine's limits, probed
//! once per machine and build, and the model's cost per token), prompts from the model's
//! tokenizer, and the run file rewritten after every point. The front ends differ only in
//! how they show it (a printer and a [`SweepObserver`]) and where the file goes.

use std::path::PathBuf;
use std::sync::Arc;

use lx_client::target::Spawner;
use lx_client::traffic::RunControl;
use lx_run::sweep::{run_points, SweepError, SweepObserver, SweepPlan, SweepPoint};
use lx_format::workload::PromptBuilder;
use lx_results::printers::Printer;
use lx_results::results::RunFile;

use crate::model::OpenModel;

/// One sweep, ready to run.
pub struct SweepJob {
    /// Shared: the app keeps the model open for live mode while a sweep runs on it.
    pub model: Arc<OpenModel>,
    pub plan: SweepPlan,
    /// The run file, begun when the job was made (its start time can name the file).
    pub run: RunFile,
    /// Where the run file is written after every point; `None`: kept in memory only.
    pub out: Option<PathBuf>,
    pub control: RunControl,
    /// Compute the ceilings beside every point (probing this machine the first time).
    pub ceilings: bool,
    spawn: Spawner,
}

impl SweepJob {
    /// Checks `plan` against `model` (a typo or a prompt longer than the context is refused
    /// before anything loads) and begins the run file, recording `command` as what made it.
    /// A plan that drafts with a draft model gets one here: the one it names (checked to
    /// share the model's vocabulary), else one made from the model ([`crate::draft`]).
    pub fn new(model: Arc<OpenModel>, mut plan: SweepPlan, command: Vec<String>, spawn: Spawner) -> anyhow::Result<SweepJob> {
        plan.validate(Some(model.context_length))?;
        // The run file says the warm-up the points ran with, not that it was left to the default.
        plan.warmup = Some(plan.warmup());
        if plan.spec.contains(&lx_engine::speculative::Drafter::Draft) && plan.has_workers() {
            plan.draft_model = Some(crate::draft::resolve(&model.path, plan.draft_model.as_deref())?);
        }
        let run = RunFile::new(command, crate::hardware_report(), model.record(), serde_json::to_value(&plan)?);
        Ok(SweepJob { model, plan, run, out: None, control: RunControl::default(), ceilings: true, spawn })
    }

    /// Points the sweep will measure.
    pub fn total_points(&self) -> usize {
        self.plan.points().len()
    }

    /// Runs every point, the ceilings' basis first (only for our own workers: a server's
    /// device is not this machine). Returns the run file as it stands (every completed point,
    /// marked stopped when the control was raised) and how many points had errors, or what
    /// ended the sweep.
    pub fn run(self, printer: &mut dyn Printer, observer: &mut dyn SweepObserver) -> (RunFile, Result<usize, SweepError>) {
        let points = self.plan.points();
        self.run_points(points, printer, observer)
    }

    /// [`run`](Self::run) for a list of the plan's points chosen by the caller (`lx bench`
    /// measures a suite's shapes, each with its own requests, not the plan's whole grid).
    pub fn run_points(self, points: Vec<SweepPoint>, printer: &mut dyn Printer, observer: &mut dyn SweepObserver) -> (RunFile, Result<usize, SweepError>) {
        let SweepJob { model, plan, mut run, out, control, ceilings, spawn } = self;
        if ceilings && plan.has_workers() {
            match crate::limits::ceilings_basis(&model.path, &mut || observer.probing()) {
                Ok((limits, cost)) => {
                    observer.ceilings(Ok((&limits, &cost)));
                    (run.limits, run.model_cost) = (Some(limits), Some(cost));
                }
                Err(e) => observer.ceilings(Err(&e)),
            }
        }
        let prompts = PromptBuilder::new(&model.tokenizer);
        let mut ctx = model.sweep_context(&prompts, spawn, out, control);
        ctx.fidelity = Some(crate::fidelity::sweep_basis(model.clone(), run.command.clone()));
        let failed = run_points(&plan, points, &ctx, &mut run, printer, observer);
        (run, failed)
    }
}
