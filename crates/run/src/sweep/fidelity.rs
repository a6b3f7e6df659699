//! The fidelity of what a sweep or a demo runs (`--fidelity`): each backend, KV cache type
//! and drafter among its points scored before the points, against the run's reference, and
//! each point then given the figures of what it ran.

use std::path::Path;

use lx_engine::backend::KvTypes;
use lx_engine::speculative::{Drafter, Speculation};
use lx_client::target::Spawner;
use lx_results::results::PointResult;
use lx_results::studies::fidelity::{FidelityRun, Measured};

use super::{SweepPlan, SweepPoint};
use crate::fidelity::{Compared, Entry, Job, Watch};

/// Chunks of the text a sweep scores when `--fidelity` gives no number: 2 × 255 positions,
/// seconds per backend and setting on a CPU (MLX's CPU build takes minutes).
pub const DEFAULT_CHUNKS: usize = 2;

/// What sets a point's configuration apart, in words: its KV cache type where it is not the
/// default, and its drafter.
pub fn setting(kv: KvTypes, drafter: Drafter) -> String {
    let mut parts = Vec::new();
    if !kv.is_default() {
        parts.push(if kv.k == kv.v { format!("KV {}", kv.k.name()) } else { format!("KV {}/{}", kv.k.name(), kv.v.name()) });
    }
    match drafter {
        Drafter::None => {}
        Drafter::Lookup => parts.push("drafts: prompt lookup".into()),
        Drafter::Draft => parts.push("drafts: a draft model".into()),
    }
    if parts.is_empty() {
        "as run".into()
    } else {
        parts.join(", ")
    }
}

/// One entry per configuration among `points` (servers left out: they score nothing), a
/// drafting one after the entry that decodes without drafts on the same settings (measured
/// even where no point runs it: drafting is compared with it).
pub fn entries(points: &[SweepPoint], plan: &SweepPlan, spawn: &Spawner, model: &Path) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for p in points.iter().filter(|p| !plan.servers.contains(&p.backend)) {
        let (kv, spec) = (p.traffic.kv, p.traffic.spec);
        let find = |out: &[Entry], setting: &str| out.iter().position(|e| e.backend == p.backend && e.setting == setting);
        let plain = find(&out, &setting(kv, Drafter::None)).unwrap_or_else(|| {
            out.push(Entry {
                backend: p.backend.clone(),
                setting: setting(kv, Drafter::None),
                spawn: spawn.clone(),
                settings: Default::default(),
                model: model.to_path_buf(),
                kv,
                speculation: Speculation::default(),
                draft_model: None,
                compared: Compared::Reference,
                plain: None,
            });
            out.len() - 1
        });
        if spec.drafter != Drafter::None && find(&out, &setting(kv, spec.drafter)).is_none() {
            let draft_model = if spec.drafter == Drafter::Draft { plan.draft_model.clone() } else { None };
            out.push(Entry { setting: setting(kv, spec.drafter), speculation: spec, draft_model, compared: Compared::Drafting, plain: Some(plain), ..out[plain].clone() });
        }
    }
    out
}

/// Scores every configuration of `points` with `basis`' text against its reference.
pub fn measure(basis: &Job, entries: Vec<Entry>, threads: usize, watch: &mut dyn Watch) -> Result<FidelityRun, String> {
    let mut job = basis.clone();
    job.entries = entries;
    job.plan.threads = threads;
    crate::fidelity::run(&job, watch)
}

/// The figures of what `point` ran, where `run` measured it.
pub fn of_point(run: &FidelityRun, point: &PointResult) -> Option<Measured> {
    run.measured(&point.backend, &setting(point.traffic.kv, point.traffic.spec.drafter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_engine::backend::KvType;

    #[test]
    fn a_configuration_is_named_by_what_sets_it_apart() {
        let q8 = KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 };
        assert_eq!(setting(KvTypes::default(), Drafter::None), "as run");
        assert_eq!(setting(q8, Drafter::Lookup), "KV q8_0, drafts: prompt lookup");
        assert_eq!(setting(KvTypes { k: KvType::Q8_0, v: KvType::Q4_0 }, Drafter::Draft), "KV q8_0/q4_0, drafts: a draft model");
    }

    /// Each configuration once, drafting after (and compared with) the same settings
    /// without drafts, which is measured even where no point runs it; servers left out.
    #[test]
    fn every_configuration_of_the_points_is_one_entry() {
        let spawn: Spawner = std::sync::Arc::new(|_: &str, _: &lx_engine::backend::LoadSpec, _: &lx_engine::scheduler::SchedulerConfig| Err(lx_client::target::TargetError::Load("not started in this test".into())));
        let plan = SweepPlan { servers: vec!["vllm".into()], ..SweepPlan::default() };
        let lookup = Speculation { drafter: Drafter::Lookup, ..Speculation::default() };
        let q8 = KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 };
        let point = |backend: &str, kv: KvTypes, spec: Speculation| {
            let mut p = plan.points().remove(0);
            p.backend = backend.into();
            (p.traffic.kv, p.traffic.spec) = (kv, spec);
            p
        };
        let points = [
            point("llama", KvTypes::default(), lookup),
            point("llama", KvTypes::default(), Speculation::default()),
            point("llama", q8, Speculation::default()),
            point("candle", KvTypes::default(), Speculation::default()),
            point("vllm", KvTypes::default(), Speculation::default()),
            point("llama", KvTypes::default(), lookup),
        ];
        let entries = entries(&points, &plan, &spawn, Path::new("m.gguf"));
        let got: Vec<(&str, &str, Compared, Option<usize>)> = entries.iter().map(|e| (e.backend.as_str(), e.setting.as_str(), e.compared, e.plain)).collect();
        assert_eq!(
            got,
            [
                ("llama", "as run", Compared::Reference, None),
                ("llama", "drafts: prompt lookup", Compared::Drafting, Some(0)),
                ("llama", "KV q8_0", Compared::Reference, None),
                ("candle", "as run", Compared::Reference, None),
            ]
        );
        assert_eq!((entries[1].speculation, entries[2].kv), (lookup, q8));
    }
}
