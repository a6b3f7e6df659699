//! Teaching demos: each one measures a serving trade-off live, on one model and backend,
//! and checks that the trade-off showed up, as a ratio between points of the same run (so a
//! busy or slow machine shifts both sides alike).
//!
//! A demo is a hand-made list of sweep points ([`plan`]) run by a [`lx_run::sweep::Session`]
//! like any sweep, then judged ([`judge`]). The CLI's `lx demo` and the app both go through
//! [`run_demo`]; the thresholds are the ones the project promises (docs/SERVING.md, "Teaching
//! demos"), not tuned to pass.
//!
//! Each demo is one module: its points, how they are sized to this machine, its checks and
//! its lesson, in one [`Def`] that [`Demo`] reaches. A new demo is a new module and a new
//! variant; nothing else matches on a demo.

mod figures;
mod run;
mod sizing;

mod batching;
mod chunked_prefill;
mod disaggregation;
mod fidelity;
mod kv_cache;
mod prefix_cache;
mod prompt_length;
mod speculative;
mod static_vs_continuous;

use serde::Serialize;

use lx_client::traffic::{PointSpec, Traffic};
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::{PointResult, RunFile};
use lx_run::sweep::{SweepPlan, SweepPoint};

use crate::lesson::{Lesson, Teaching};

pub use run::{run_demo, run_demo_on_server};
pub use sizing::{point_label, Sizing, LONG_PROMPTS};

/// A teaching demo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demo {
    PromptLength,
    Batching,
    StaticVsContinuous,
    ChunkedPrefill,
    PrefixCache,
    Speculative,
    KvCache,
    Disaggregation,
    Fidelity,
}

/// Every demo, in the order `lx demo` lists them and the app teaches them.
pub const DEMOS: [Demo; 9] = [
    Demo::PromptLength,
    Demo::Batching,
    Demo::StaticVsContinuous,
    Demo::ChunkedPrefill,
    Demo::PrefixCache,
    Demo::Speculative,
    Demo::KvCache,
    Demo::Disaggregation,
    Demo::Fidelity,
];

/// Where a demo's workload can go besides a backend of this app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    /// Nowhere: its point is how our scheduler runs requests.
    None,
    /// To servers as well, whose rows follow the backend's: its point is what the workload
    /// does to a target, not how our scheduler runs it.
    Beside,
    /// To one server on its own: its point does not depend on who schedules the requests.
    Alone,
}

impl Servers {
    /// The names of the demos whose workload goes where this says.
    pub fn demos(self) -> Vec<&'static str> {
        DEMOS.iter().filter(|d| d.servers() == self).map(|d| d.name()).collect()
    }
}

/// One demo, whole: what its module defines.
pub(crate) struct Def {
    pub name: &'static str,
    /// The claim, as one line.
    pub shows: &'static str,
    /// Its points on one backend, each with its label for the table.
    pub points: fn(&At) -> (Vec<SweepPoint>, Vec<&'static str>),
    pub sizing: Sizing,
    /// Whether every setting is scored against the reference first (the sweep's
    /// `fidelity_chunks`), so that each point has its KL divergence beside its speed.
    pub scores_fidelity: bool,
    pub judge: Judge,
    /// Its lesson's question, figures, choices and answer.
    pub teaching: fn() -> Teaching,
    pub servers: Servers,
}

/// How a demo's measured points are judged.
pub(crate) enum Judge {
    /// In the common table (TTFT, decode, ITL, throughput, errors, and fidelity where
    /// scored), with these checks and sentence once every point measured without errors.
    Table(fn(&[PointResult], &[BackendInfo]) -> (Vec<Check>, String)),
    /// A table of its own.
    Own(fn(Demo, &[String], &[PointResult]) -> Report),
}

impl Demo {
    fn def(self) -> &'static Def {
        match self {
            Demo::PromptLength => &prompt_length::DEF,
            Demo::Batching => &batching::DEF,
            Demo::StaticVsContinuous => &static_vs_continuous::DEF,
            Demo::ChunkedPrefill => &chunked_prefill::DEF,
            Demo::PrefixCache => &prefix_cache::DEF,
            Demo::Speculative => &speculative::DEF,
            Demo::KvCache => &kv_cache::DEF,
            Demo::Disaggregation => &disaggregation::DEF,
            Demo::Fidelity => &fidelity::DEF,
        }
    }

    /// Its name (`lx demo NAME`).
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The claim it checks, as one line.
    pub fn shows(self) -> &'static str {
        self.def().shows
    }

    pub fn servers(self) -> Servers {
        self.def().servers
    }

    /// Its lesson, as the app teaches it.
    pub fn lesson(self) -> Lesson {
        let t = (self.def().teaching)();
        let labels = plan(self, lx_engine::kind::BackendKind::DEFAULT.name(), 0).labels;
        Lesson { name: self.name(), shows: self.shows(), question: t.question, figures: t.figures, choices: t.choices, answer: t.answer, why: t.why, labels, on_a_server: self.servers() == Servers::Alone }
    }
}

/// Every demo's lesson, in [`DEMOS`]' order.
pub fn lessons() -> Vec<Lesson> {
    DEMOS.into_iter().map(Demo::lesson).collect()
}

/// A demo name that is not one of [`DEMOS`]; the message lists those.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown demo '{}' (expected one of: {})", .0, DEMOS.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownDemo(pub String);

/// Find a demo by name, or say which exist.
pub fn find(name: &str) -> Result<Demo, UnknownDemo> {
    DEMOS.iter().copied().find(|d| d.name() == name).ok_or_else(|| UnknownDemo(name.to_string()))
}

/// Makes a demo's points on one backend.
pub(crate) struct At<'a> {
    backend: &'a str,
}

impl At<'_> {
    /// A point of `concurrency` clients sending `requests` requests (after `warmup` more) of
    /// `prompt_tokens` tokens that write `max_tokens`, under `policy`.
    #[allow(clippy::too_many_arguments)]
    fn point(&self, policy: Policy, prompt_tokens: u32, max_tokens: u32, concurrency: usize, requests: usize, warmup: usize, traffic: Traffic) -> SweepPoint {
        SweepPoint {
            backend: self.backend.to_string(),
            policy,
            spec: PointSpec { prompt_tokens, max_tokens, concurrency, requests, warmup, stop_at_eos: false, top_logprobs: 0 },
            traffic,
            repetition: None,
        }
    }
}

/// What a demo runs: points on one backend, each with a label for the table.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Threads, chunk size and batch limits for the points (its grid is not used).
    pub sweep: SweepPlan,
    pub points: Vec<SweepPoint>,
    pub labels: Vec<String>,
    /// How the points after the first are sized from what the first measured, so that the
    /// effect shows on a slow laptop and on a fast GPU alike.
    pub sizing: Sizing,
}

/// The points of demo `demo` on `backend`. Kept short (few requests, short outputs): each
/// demo takes well under a minute on two CPU cores.
pub fn plan(demo: Demo, backend: &str, threads: usize) -> Plan {
    let def = demo.def();
    let fidelity_chunks = def.scores_fidelity.then_some(lx_run::sweep::fidelity::DEFAULT_CHUNKS);
    let sweep = SweepPlan { backends: vec![backend.to_string()], threads, fidelity_chunks, ..SweepPlan::default() };
    let (points, labels) = (def.points)(&At { backend });
    Plan { sweep, points, labels: labels.into_iter().map(String::from).collect(), sizing: def.sizing }
}

/// One teaching-point check: a ratio measured in the run against its threshold.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Check {
    /// What is compared, e.g. `TTFT p50, prompt 1024 ÷ prompt 64`.
    pub what: String,
    pub value: f64,
    /// `>=`, `>`, `<=` or `<`.
    pub op: &'static str,
    pub threshold: f64,
    pub holds: bool,
}

impl Check {
    fn new(what: impl Into<String>, value: f64, op: &'static str, threshold: f64) -> Check {
        let holds = value.is_finite()
            && match op {
                ">=" => value >= threshold,
                ">" => value > threshold,
                "<=" => value <= threshold,
                _ => value < threshold,
            };
        Check { what: what.into(), value, op, threshold, holds }
    }
}

/// A demo's outcome: a small table, the checks, one sentence.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct Report {
    pub demo: &'static str,
    /// How the demo sized its load to this machine (`None`: as planned).
    pub sizing: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub checks: Vec<Check>,
    pub sentence: String,
    /// Every check held (and every point measured without errors).
    pub held: bool,
}

impl Report {
    /// Its measured points as a Markdown table, a row per point.
    pub fn table(&self) -> Vec<String> {
        let mut lines = vec![format!("| {} |", self.header.join(" | ")), format!("|{}", " ---: |".repeat(self.header.len()))];
        lines.extend(self.rows.iter().map(|row| format!("| {} |", row.join(" | "))));
        lines
    }
}

/// What a demo that did not measure every point says.
const INCOMPLETE: &str = "the demo did not measure every point (see the errors), so it shows nothing";

/// Judge a demo's measured points (in [`plan`]'s order).
pub fn judge(demo: Demo, labels: &[String], points: &[PointResult]) -> Report {
    judge_with(demo, labels, points, &[])
}

/// [`judge`], with the backends the run loaded (what `kv-cache` reads its caches' sizes from).
pub fn judge_with(demo: Demo, labels: &[String], points: &[PointResult], backends: &[BackendInfo]) -> Report {
    let checks = match demo.def().judge {
        Judge::Own(judge) => return judge(demo, labels, points),
        Judge::Table(checks) => checks,
    };
    let mut header = ["", "TTFT p50 ms", "TTFT p95 ms", "decode tok/s p50", "max ITL ms", "throughput tok/s", "errors"].to_vec();
    let fidelity = points.iter().any(|p| p.fidelity.is_some());
    if fidelity {
        header.extend(["mean KL nats", "top-1 agreement"]);
    }
    let rows = labels
        .iter()
        .zip(points)
        .map(|(label, p)| {
            let mut row = vec![
                label.clone(),
                format!("{:.0}", p.ttft_ms.p50),
                format!("{:.0}", p.ttft_ms.p95),
                format!("{:.1}", p.decode_tps.p50),
                format!("{:.0}", p.itl_ms.max),
                format!("{:.1}", p.throughput_tps),
                p.errors.to_string(),
            ];
            if fidelity {
                let f = p.fidelity.map(|m| m.fidelity);
                row.push(f.map_or("-".into(), |f| lx_results::studies::fidelity::kl(f.mean_kl)));
                row.push(f.map_or("-".into(), |f| format!("{:.2}%", 100.0 * f.top1_agreement)));
            }
            row
        })
        .collect();
    let complete = points.len() == labels.len() && points.iter().all(|p| p.errors == 0 && p.requests > 0) && (!demo.def().scores_fidelity || points.iter().all(|p| p.fidelity.is_some()));
    let (checks, sentence) = if complete { checks(points, backends) } else { (Vec::new(), INCOMPLETE.to_string()) };
    report(demo, header.into_iter().map(String::from).collect(), rows, complete, checks, sentence)
}

fn report(demo: Demo, header: Vec<String>, rows: Vec<Vec<String>>, complete: bool, checks: Vec<Check>, sentence: String) -> Report {
    let held = complete && checks.iter().all(|c| c.holds);
    // The sentence draws the lesson only from a run that showed it.
    let sentence = if complete && !held {
        format!("{}. But a check failed, so this run does not show that {}.", sentence.split(':').next().unwrap_or(&sentence).trim_end_matches('.'), demo.shows())
    } else {
        sentence
    };
    Report { demo: demo.name(), sizing: None, header, rows, checks, sentence, held }
}

/// The demo a run file measured (`lx demo NAME --out FILE` records it in its settings,
/// with the backend and threads), judged again from its points: what `lx show` prints for
/// it. `None` for a run that is not a demo's.
pub fn judge_run(run: &RunFile) -> Option<Result<Report, UnknownDemo>> {
    let name = run.settings.get("demo")?.as_str()?;
    let backend = run.settings.get("backend").and_then(|b| b.as_str()).unwrap_or(lx_engine::kind::BackendKind::DEFAULT.name());
    let threads = run.settings.get("threads").and_then(|t| t.as_u64()).unwrap_or(0) as usize;
    Some(find(name).map(|demo| {
        // Points past the plan's are its workload sent to servers, named by their backend.
        let plan = plan(demo, backend, threads);
        let mut labels = plan.labels;
        labels.extend(run.points.iter().skip(labels.len()).map(|p| p.backend.clone()));
        run::judged(demo, &labels, plan.sizing, &run.points, &run.backends)
    }))
}

/// A check's comparison as people write it (`≥` for `>=`).
pub fn op_sign(op: &str) -> &str {
    match op {
        ">=" => "≥",
        "<=" => "≤",
        other => other,
    }
}

/// Demos' checks as one Markdown table: a row per check, with the value measured, the
/// threshold it needed and whether it held; a demo that measured nothing checkable says so.
pub fn checks_table(reports: &[Report]) -> Vec<String> {
    let mut lines = vec!["| demo | check | measured | needs | held |".to_string(), "| --- | --- | ---: | --- | --- |".to_string()];
    for r in reports {
        if r.checks.is_empty() {
            lines.push(format!("| `{}` | {} | - | - | no |", r.demo, r.sentence));
        }
        for c in &r.checks {
            let op = op_sign(c.op);
            lines.push(format!("| `{}` | {} | {} | {op} {} | {} |", r.demo, c.what, lx_results::studies::numbers::check_value(c.value), c.threshold, if c.holds { "yes" } else { "no" }));
        }
    }
    lines
}

#[cfg(test)]
pub(crate) mod tests {
    use super::chunked_prefill::LONG_PROMPT as CHUNKED_LONG_PROMPT;
    use super::disaggregation::LONG_PROMPT as DISAGG_LONG_PROMPT;
    use super::run::judged;
    use super::sizing::{chat_tokens_for, long_prompt_for, sized, with_chat_tokens, with_rate, CHAT_MOST_TOKENS};
    use super::static_vs_continuous::OVER_CAPACITY;
    use super::*;
    use lx_client::records::RequestRecord;
    use lx_client::traffic::Arrivals;
    use lx_engine::backend::{KvType, KvTypes};
    use lx_client::traffic::PointRun;
    use lx_engine::scheduler::FinishReason;

    /// A point of requests of (prompt tokens, each token's time after submit, ms).
    pub(crate) fn result(policy: Policy, samples: Vec<(u32, Vec<f64>)>, window_ms: f64) -> PointResult {
        let records = samples
            .into_iter()
            .enumerate()
            .map(|(i, (prompt, token_ms))| {
                let mut r = RequestRecord::new(i as u64, prompt, token_ms.len() as u32, 0.0);
                r.tokens = vec![1; token_ms.len()];
                r.token_ms = token_ms;
                r.finish = Some(FinishReason::Length);
                r
            })
            .collect();
        let spec = PointSpec { prompt_tokens: 64, max_tokens: 4, concurrency: 1, requests: 1, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        PointResult::from_run("hash", policy, &spec, PointRun { records, steps: Vec::new(), window_ms, worker_error: None, stopped: false, opened: None })
    }

    fn labels(d: Demo) -> Vec<String> {
        plan(d, "llama", 2).labels
    }

    #[test]
    fn every_demo_has_a_plan_of_labelled_points_on_one_backend() {
        for d in DEMOS {
            let p = plan(d, "candle", 2);
            assert_eq!(p.points.len(), p.labels.len(), "{}", d.name());
            assert!(p.points.len() >= 2);
            assert!(p.points.iter().all(|pt| pt.backend == "candle"));
        }
        assert!(find("nope").unwrap_err().to_string().contains("prompt-length, batching"));
        assert_eq!(find("batching").unwrap().name(), "batching");
        // Prefix caching needs a slot for the cache; the long prompt fits its context.
        let p = plan(find("prefix-cache").unwrap(), "llama", 2);
        let load = p.sweep.load_spec_for("m".into(), &p.points);
        assert_eq!(load.slots, 2);
        let p = plan(find("chunked-prefill").unwrap(), "llama", 2);
        let load = p.sweep.load_spec_for("m".into(), &p.points);
        assert!(load.ctx_per_slot >= 2048 + 4 && load.max_batch_tokens >= 2048 + 3, "{load:?}");
    }

    #[test]
    fn static_vs_continuous_measures_capacity_first_and_sets_the_rate_from_it() {
        let p = plan(find("static-vs-continuous").unwrap(), "llama", 2);
        assert_eq!(p.sizing, Sizing::RateOverCapacity(OVER_CAPACITY));
        assert_eq!(p.points[0].traffic.arrivals, Arrivals::Closed, "the capacity point is closed loop");
        let rest = with_rate(p.points[1..].to_vec(), 2.6);
        assert!(rest.iter().all(|pt| pt.traffic.arrivals == Arrivals::Poisson { rate: 2.6 }));
        // Both policies see the same drawn lengths and arrivals.
        assert_eq!((rest[0].traffic.seed, rest[0].policy, rest[1].policy), (rest[1].traffic.seed, Policy::Static, Policy::Continuous));
        assert_eq!(plan(find("batching").unwrap(), "llama", 2).sizing, Sizing::Fixed);
    }

    #[test]
    fn prompt_length_sizes_its_long_prompt_so_that_prefill_decides_the_ratio() {
        let short = |rate: f64, ttft_ms: f64| {
            let mut p = result(Policy::Continuous, vec![(64, vec![ttft_ms, ttft_ms + 10.0])], 100.0);
            p.prefill_tps = lx_client::stats::Distribution::of([rate]);
            p
        };
        // A CPU: 1024 tokens at 800 tok/s take 1.28 s, 14× a 90 ms first token.
        assert_eq!(long_prompt_for(&short(800.0, 90.0)), 1024);
        // A GPU whose first token is mostly fixed cost: 1024 tokens take 51 ms, 5× its 10 ms.
        assert_eq!(long_prompt_for(&short(20_000.0, 10.0)), 2048);
        assert_eq!(long_prompt_for(&short(200_000.0, 10.0)), 4096, "the longest when none is long enough");
        // A server reports no prefill rate: its TTFT stands for it.
        let mut served = short(0.0, 100.0);
        served.prefill_tps = lx_client::stats::Distribution::of(std::iter::empty());
        assert_eq!(long_prompt_for(&served), 1024);
        let p = plan(find("prompt-length").unwrap(), "llama", 2);
        assert_eq!(p.sizing, Sizing::LongPrompt);
        let rest = sized(p.sizing, &short(20_000.0, 10.0), p.points[1..].to_vec());
        assert_eq!(rest[0].spec.prompt_tokens, 2048);
        // Judged from its points: labels and texts name the sizes measured.
        let mut long = result(Policy::Continuous, vec![(2048, vec![800.0, 810.0])], 1000.0);
        long.prompt_tokens = 2048;
        let r = judged(find("prompt-length").unwrap(), &p.labels, p.sizing, &[short(20_000.0, 10.0), long], &[]);
        assert!(r.rows[1][0] == "prompt 2048" && r.checks[0].what == "TTFT p50, prompt 2048 ÷ prompt 64", "{r:?}");
        assert!(r.sentence.starts_with("A 32× longer prompt"), "{}", r.sentence);
        assert!(r.sizing.as_deref().unwrap().contains("tok/s and its first token took 10 ms, so the long prompt is 2048 tokens"), "{r:?}");
    }

    #[test]
    fn chats_are_sized_to_outlast_the_long_prompts_arrival_on_a_fast_machine() {
        let p = plan(find("chunked-prefill").unwrap(), "llama", 2);
        assert_eq!(p.sizing, Sizing::ChatsOutlast { long_prompt: CHUNKED_LONG_PROMPT });
        // 90 tok/s alone: 1.5 s of decode is 135 tokens; a slow machine keeps the planned 48,
        // a fast one stops at the most the worker is loaded for.
        assert_eq!(chat_tokens_for(90.0, &p.points, CHUNKED_LONG_PROMPT), 135);
        assert_eq!(chat_tokens_for(10.0, &p.points, CHUNKED_LONG_PROMPT), 48);
        assert_eq!(chat_tokens_for(5000.0, &p.points, CHUNKED_LONG_PROMPT), CHAT_MOST_TOKENS);
        let sized = with_chat_tokens(p.points, CHUNKED_LONG_PROMPT, 135);
        let Arrivals::Script { requests } = &sized[1].traffic.arrivals else { panic!("scripted") };
        assert_eq!(requests.iter().map(|r| (r.prompt_tokens, r.max_tokens)).collect::<Vec<_>>(), [(64, 135), (64, 135), (64, 135), (CHUNKED_LONG_PROMPT, 4)]);
        // The disaggregation demo's chats outlast its second long prompt, at 1.2 s.
        let d = plan(find("disaggregation").unwrap(), "llama", 2);
        assert_eq!(chat_tokens_for(90.0, &d.points, DISAGG_LONG_PROMPT), 153);
    }

    #[test]
    fn prompt_length_check_holds_only_when_ttft_grows_and_decode_stays() {
        let d = find("prompt-length").unwrap();
        // TTFT 100 → 800 ms (8×), decode 10 ms/token on both: holds.
        let short = result(Policy::Continuous, vec![(64, vec![100.0, 110.0, 120.0])], 1000.0);
        let long = result(Policy::Continuous, vec![(1024, vec![800.0, 810.0, 820.0])], 1000.0);
        assert!(judge(d, &labels(d), &[short.clone(), long]).held);
        // Decode 2× slower at the long prompt: fails.
        let slow = result(Policy::Continuous, vec![(1024, vec![800.0, 820.0, 840.0])], 1000.0);
        let r = judge(d, &labels(d), &[short.clone(), slow]);
        assert!(!r.held && r.checks[0].holds && !r.checks[1].holds, "{r:?}");
        assert!(r.sentence.contains("does not show that prompt length drives TTFT"), "{}", r.sentence);
        // TTFT only 2×: fails.
        let near = result(Policy::Continuous, vec![(1024, vec![200.0, 210.0, 220.0])], 1000.0);
        assert!(!judge(d, &labels(d), &[short, near]).held);
    }

    #[test]
    fn kv_cache_check_reads_each_caches_size_from_its_backend_and_compares_the_texts() {
        let d = find("kv-cache").unwrap();
        let backend = |kv_cache_bytes: u64, q8: bool| BackendInfo {
            name: "hash".into(),
            capabilities: lx_engine::backend::Capabilities { slots: 4, ..Default::default() },
            settings: if q8 { [("kv_type_k", "q8_0"), ("kv_type_v", "q8_0")].map(|(k, v)| (k.to_string(), v.to_string())).into() } else { Default::default() },
            kv_cache_bytes: Some(kv_cache_bytes),
            ..Default::default()
        };
        let f16 = result(Policy::Continuous, vec![(448, vec![10.0, 20.0, 30.0, 40.0]); 4], 40.0);
        let mut q8 = result(Policy::Continuous, vec![(448, vec![11.0, 22.0, 33.0, 44.0]); 4], 44.0);
        q8.traffic.kv = KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 };
        // The last request's text parts at its third token.
        q8.samples[3].tokens = vec![1, 1, 2, 2];
        // 36 MiB and 19.125 MiB for 4 sequences: 9 MiB and 4.78 MiB each; 256 MiB holds 28
        // and 53 of them.
        let backends = [backend(36 << 20, false), backend(19_584 << 10, true)];
        let r = judge_with(d, &labels(d), &[f16.clone(), q8.clone()], &backends);
        assert!(r.held, "{r:?}");
        assert!((r.checks[0].value - 53.0 / 28.0).abs() < 1e-9, "{r:?}");
        assert!(r.sentence.contains("holds 53 sequences of 512 tokens where f16 holds 28 (1.89×); at 4 clients it ran at 0.91× f16's throughput") && r.sentence.contains("88% of the greedy text"), "{}", r.sentence);
        // A cache that is not smaller fails; a run without the backends' sizes shows nothing.
        assert!(!judge_with(d, &labels(d), &[f16.clone(), q8.clone()], &[backend(36 << 20, false), backend(30 << 20, true)]).held);
        assert!(!judge(d, &labels(d), &[f16, q8]).held);
    }

    #[test]
    fn chunked_check_looks_at_the_short_requests_stall_and_the_long_ttft() {
        let d = find("chunked-prefill").unwrap();
        let shorts = |gap: f64| (0..3).map(|_| (64u32, vec![100.0, 150.0, 150.0 + gap, 200.0 + gap])).collect::<Vec<_>>();
        let mut cont = shorts(5000.0);
        cont.push((CHUNKED_LONG_PROMPT, vec![5000.0, 5050.0]));
        let mut chunk = shorts(700.0);
        chunk.push((CHUNKED_LONG_PROMPT, vec![5500.0, 5550.0]));
        let (a, b) = (result(Policy::Continuous, cont, 6000.0), result(Policy::Chunked, chunk.clone(), 6000.0));
        let r = judge(d, &labels(d), &[a.clone(), b]);
        assert!(r.held, "{r:?}");
        assert!((r.checks[0].value - 5000.0 / 700.0).abs() < 1e-9);
        // Chunking that doubles the long prompt's TTFT is not "a small cost".
        chunk[3].1 = vec![10_000.0, 10_050.0];
        assert!(!judge(d, &labels(d), &[a, result(Policy::Chunked, chunk, 11_000.0)]).held);
    }

    #[test]
    fn disaggregation_checks_the_decoders_p99_gap_and_prices_the_transfer() {
        let d = find("disaggregation").unwrap();
        // Three decoders with 100 gaps each; one worker stalls them twice for 2 s, chunking for
        // 300 ms, two workers never.
        let decoders = |stall: f64| {
            (0..3)
                .map(|_| {
                    let mut t = vec![100.0];
                    for i in 1..=100 {
                        t.push(t[i - 1] + if i == 20 || i == 60 { stall } else { 40.0 });
                    }
                    (64u32, t)
                })
                .collect::<Vec<_>>()
        };
        let point = |policy, stall: f64, long_ttft: f64| {
            let mut samples = decoders(stall);
            samples.extend(vec![(DISAGG_LONG_PROMPT, vec![long_ttft, long_ttft + 40.0]); 2]);
            result(policy, samples, 5000.0)
        };
        let mut split = point(Policy::Disaggregated, 40.0, 6000.0);
        for r in &mut split.samples {
            let mb = if r.prompt_tokens == DISAGG_LONG_PROMPT { 14_000_000 } else { 1_000_000 };
            r.transfer = Some(lx_client::records::Transfer { bytes: mb, save_start_ms: 10.0, save_end_ms: 30.0, load_start_ms: 100.0, load_end_ms: 110.0 });
        }
        let points = [point(Policy::Continuous, 2000.0, 3000.0), point(Policy::Chunked, 300.0, 3500.0), split];
        let r = judge(d, &labels(d), &points);
        assert!(r.held, "{r:?}");
        // Six stalls in 300 gaps: the p99 is a stall's.
        assert!((r.checks[0].value / (2000.0 / 40.0) - 1.0).abs() < 0.002, "{r:?}");
        assert!(r.sentence.contains("(14.0 MB) took 100 ms to move (140 MB/s; a chat prompt's 1.0 MB, 100 ms)"), "{}", r.sentence);
        assert!(r.sentence.contains("came after 6.0 s instead of 3.0 s"), "{}", r.sentence);
        // Two workers that stall the decoders as much as one worker does show nothing.
        let same = [points[0].clone(), points[1].clone(), point(Policy::Disaggregated, 2000.0, 6000.0)];
        assert!(!judge(d, &labels(d), &same).held);
    }

    #[test]
    fn batching_check_holds_only_near_the_backends_own_batched_rate() {
        let d = find("batching").unwrap();
        // One client: 4 tokens at 10 ms each in a 40 ms window; four clients: 16 tokens at
        // 20 ms each over 80 ms (2× the throughput, half the per-request speed).
        let one = result(Policy::Continuous, vec![(64, vec![10.0, 20.0, 30.0, 40.0])], 40.0);
        let four = result(Policy::Continuous, vec![(64, vec![20.0, 40.0, 60.0, 80.0]); 4], 80.0);
        let batched = |window_ms| result(Policy::Static, vec![(64, vec![20.0, 40.0, 60.0, 80.0]); 4], window_ms);
        let r = judge(d, &labels(d), &[one.clone(), four.clone(), batched(76.0)]);
        assert!(r.held, "{r:?}");
        assert!((r.checks[2].value - 76.0 / 80.0).abs() < 1e-9);
        // Throughput rises, but to 2/3 of what the backend does with batches of 4: the
        // harness is what limits it, and the demo says so.
        let r = judge(d, &labels(d), &[one, four, batched(53.3)]);
        assert!(!r.held && r.checks[0].holds && !r.checks[2].holds, "{r:?}");
    }

    #[test]
    fn a_point_with_errors_never_passes() {
        let d = find("prefix-cache").unwrap();
        let on = result(Policy::Continuous, vec![(1056, vec![100.0, 110.0])], 1000.0);
        let mut off = result(Policy::Continuous, vec![(1056, vec![2000.0, 2010.0])], 1000.0);
        assert!(judge(d, &labels(d), &[on.clone(), off.clone()]).held);
        off.errors = 1;
        let r = judge(d, &labels(d), &[on, off]);
        assert!(!r.held && r.checks.is_empty() && r.sentence.contains("errors"));
    }

    #[test]
    fn a_demo_run_file_is_judged_again_and_its_checks_tabled() {
        let d = find("prefix-cache").unwrap();
        let on = result(Policy::Continuous, vec![(1056, vec![100.0, 110.0])], 1000.0);
        let off = result(Policy::Continuous, vec![(1056, vec![1160.0, 1170.0])], 1000.0);
        let held = judge(d, &labels(d), &[on.clone(), off]);
        let failed = judge(d, &labels(d), &[on.clone(), on]);
        let incomplete = judge(d, &labels(d), &[]);
        assert_eq!(
            checks_table(&[held, failed, incomplete]),
            [
                "| demo | check | measured | needs | held |",
                "| --- | --- | ---: | --- | --- |",
                "| `prefix-cache` | TTFT p50, cache off ÷ cache on (1024-token prefix) | 11.60 | ≥ 3 | yes |",
                "| `prefix-cache` | TTFT p50, cache off ÷ cache on (1024-token prefix) | 1.00 | ≥ 3 | no |",
                "| `prefix-cache` | the demo did not measure every point (see the errors), so it shows nothing | - | - | no |",
            ]
        );

        // A run file names its demo in its settings; one that does not is no demo's.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/batching-pp128-c8-static.json");
        let mut run = RunFile::read(&path).unwrap();
        assert!(judge_run(&run).is_none());
        run.settings = serde_json::json!({"demo": "prefix-cache", "backend": "llama", "threads": 2});
        let r = judge_run(&run).unwrap().unwrap();
        assert!(r.demo == "prefix-cache" && !r.held && r.checks.is_empty(), "one point of the two: {r:?}");
        run.settings["demo"] = "nope".into();
        assert_eq!(judge_run(&run).unwrap().unwrap_err(), UnknownDemo("nope".into()));
    }
}
