//! `prompt-length`: a longer prompt delays the first token; decoding goes as fast as before.

use lx_client::traffic::Traffic;
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::sizing::{Sizing, LONG_PROMPTS};
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "prompt-length",
    shows: "prompt length drives TTFT, not decode speed",
    points,
    sizing: Sizing::LongPrompt,
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::Alone,
};

/// Same output length, concurrency 1: only the prompt changes. The long prompt needs no
/// warm-up of its own (the short one warmed the worker) and costs seconds each.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    (
        vec![at.point(Policy::Continuous, 64, 24, 1, 3, 1, Traffic::default()), at.point(Policy::Continuous, LONG_PROMPTS[0], 24, 1, 2, 0, Traffic::default())],
        vec!["prompt 64", "prompt 1024"],
    )
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let (a, b) = (&points[0], &points[1]);
    let ttft = b.ttft_ms.p50 / a.ttft_ms.p50;
    let decode = (b.decode_tps.p50 / a.decode_tps.p50 - 1.0).abs();
    let (short, long) = (a.prompt_tokens, b.prompt_tokens);
    (
        vec![
            Check::new(format!("TTFT p50, prompt {long} ÷ prompt {short}"), ttft, ">=", 4.0),
            Check::new(format!("decode tok/s p50, relative change {short} → {long}"), decode, "<", 0.30),
        ],
        format!(
            "A {}× longer prompt made the first token {ttft:.1}× slower while decode speed changed by {:.0}%: prefill cost grows with the prompt, decode does not.",
            long / short.max(1),
            decode * 100.0
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Does a longer prompt slow down every token, or only the first?",
        figures: vec![figure(Metric::TtftP50, "time to first token", "ms", &[0, 1]), figure(Metric::DecodeP50, "decode speed per request", "tok/s", &[0, 1])],
        choices: vec![
            choice("Every token slows: the first comes later and the rest come slower", &[Up, Down]),
            choice("Only the first: it comes later, then tokens flow as fast as before", &[Up, Flat]),
            choice("Nothing much changes", &[Flat, Flat]),
        ],
        answer: 1,
        why: "The whole prompt is computed before the first token can come (prefill): many tokens per pass over the weights, so its time grows with the prompt and the machine's arithmetic sets it. Every later token is one pass that reads every weight once (decode): the same work whatever the prompt, so memory bandwidth sets it.",
    }
}
