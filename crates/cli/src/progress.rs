//! Progress on stderr: model fetches and sweeps.

use indicatif::{ProgressBar, ProgressStyle};
use lx_client::records::RequestRecord;
use lx_client::traffic::Observer;
use lx_engine::scheduler::Policy;
use lx_run::sweep::SweepObserver;

/// Draws model-fetch progress as a bar.
pub fn fetch_reporter() -> impl FnMut(lx_models::Progress) {
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}").expect("valid template"));
    move |p: lx_models::Progress| draw(&bar, p)
}

/// Show one fetch progress event on `bar`.
fn draw(bar: &ProgressBar, p: lx_models::Progress) {
    use lx_models::Progress as P;
    match p {
        P::Downloading { part, parts, name } => {
            bar.set_length(0);
            bar.set_message(format!("downloading {name} ({part}/{parts})"));
            bar.tick();
        }
        P::Transferring { bytes_done, bytes_total } => {
            bar.set_length(bytes_total.unwrap_or(0));
            bar.set_position(bytes_done);
            bar.set_message("downloading");
        }
        P::Extracting { part, parts } => bar.set_message(format!("extracting part {part}/{parts}")),
        P::Verifying { bytes_done, bytes_total } => {
            bar.set_length(bytes_total);
            bar.set_position(bytes_done);
            bar.set_message("verifying sha256");
        }
        P::Generating { bytes_done, bytes_total } => {
            bar.set_length(bytes_total);
            bar.set_position(bytes_done);
            bar.set_message("writing a synthetic model");
        }
        P::Done { path, already_present } => {
            bar.finish_and_clear();
            if !already_present {
                eprintln!("fetched and verified {}", path.display());
            }
        }
        _ => {}
    }
}

/// A sweep's progress: one bar over all measured requests.
pub struct SweepProgress {
    bar: ProgressBar,
}

impl SweepProgress {
    pub fn new(total_requests: u64) -> Self {
        let bar = ProgressBar::new(total_requests);
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} requests, {elapsed}").expect("valid template"));
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Self { bar }
    }

    /// A line on stderr, above the bar when there is one (indicatif hides it off a terminal).
    fn say(&self, line: String) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Said while this machine's limits are measured for the ceilings.
pub const PROBING: &str = "measuring this machine's limits for the ceilings (once per machine and build)...";

/// Said when a run goes on without ceilings.
pub fn no_ceilings(why: &anyhow::Error) -> String {
    format!("warning: no ceilings in this run: {why:#}")
}

impl Observer for SweepProgress {
    fn done(&mut self, _record: &RequestRecord) {
        self.bar.inc(1);
    }
}

impl SweepObserver for SweepProgress {
    fn loading(&mut self, backend: &str) {
        self.bar.set_message(format!("loading {backend}"));
    }
    fn loaded(&mut self, backend: &str, info: &lx_engine::backend::BackendInfo, load_ms: f64) {
        self.say(format!("{backend}: {} on {} (loaded in {:.0} ms)", info.version, info.device, load_ms));
        if let Some(why) = &info.cpu_fallback {
            self.say(format!("warning: {why}"));
        }
    }
    fn point_started(&mut self, index: usize, total: usize, backend: &str, policy: Policy, spec: &lx_client::traffic::PointSpec) {
        self.bar.set_message(format!("[{}/{}] {backend} {policy} pp{} tg{} c{}", index + 1, total, spec.prompt_tokens, spec.max_tokens, spec.concurrency));
    }
    fn point_done(&mut self, point: &lx_results::results::PointResult) {
        for e in &point.error_messages {
            self.say(format!("error: {}: {e}", point.test_name()));
        }
    }
    fn probing(&mut self) {
        self.say(PROBING.into());
    }
    fn fidelity(&mut self, what: &str) {
        self.say(format!("fidelity: measuring {what}"));
    }
    fn ceilings(&mut self, basis: Result<(&lx_machine::probe::Probe, &lx_machine::roofline::ModelCost), &anyhow::Error>) {
        if let Err(e) = basis {
            self.say(no_ceilings(e));
        }
    }
    fn run_file_unsaved(&mut self, why: &str) {
        self.say(format!("warning: the run file was not updated ({why}); measuring goes on, and it is written again after the next point"));
    }
}
