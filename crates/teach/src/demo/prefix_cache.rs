//! `prefix-cache`: a stable prompt prefix kept in the cache costs nothing the next time.

use lx_client::traffic::Traffic;
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "prefix-cache",
    shows: "prefix caching removes the cost of a stable prompt prefix",
    points,
    sizing: Sizing::Fixed,
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// The stable prefix and the varying suffix.
const PREFIX_TOKENS: u32 = 1024;
const PREFIX_SUFFIX: u32 = 32;

/// Caching on first: its warm-up computes the prefix once; off needs no warm-up then.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let on = Traffic { prefix_tokens: PREFIX_TOKENS, prefix_cache: true, ..Default::default() };
    let off = Traffic { prefix_cache: false, ..on.clone() };
    let total = PREFIX_TOKENS + PREFIX_SUFFIX;
    (vec![at.point(Policy::Continuous, total, 4, 1, 3, 1, on), at.point(Policy::Continuous, total, 4, 1, 2, 0, off)], vec!["cache on", "cache off"])
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let r = points[1].ttft_ms.p50 / points[0].ttft_ms.p50;
    (
        vec![Check::new(format!("TTFT p50, cache off ÷ cache on ({PREFIX_TOKENS}-token prefix)"), r, ">=", 3.0)],
        format!("Reusing the cached {PREFIX_TOKENS}-token prefix made the first token {r:.1}× faster: only the {PREFIX_SUFFIX}-token suffix was computed."),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Every request starts with the same 1024-token instructions. Must the server compute them again each time?",
        figures: vec![figure(Metric::TtftP50, "time to first token", "ms", &[0, 1])],
        choices: vec![
            choice("No: with the cache on, the first token comes far sooner", &[Up]),
            choice("Yes: every prompt token is computed anyway", &[Flat]),
            choice("Looking the prefix up costs more than it saves", &[Down]),
        ],
        answer: 0,
        why: "The keys and values a prefix leaves in the KV cache depend only on the prefix. Kept, they let the next request compute only its own suffix: the first token then costs the suffix's prefill, not the whole prompt's.",
    }
}
