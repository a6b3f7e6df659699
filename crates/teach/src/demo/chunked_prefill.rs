//! `chunked-prefill`: a long prompt computed in chunks does not stall everyone's decode.

use lx_client::traffic::{Arrivals, Scripted, Traffic};
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "chunked-prefill",
    shows: "chunked prefill keeps a long prompt from stalling everyone's decode",
    points,
    sizing: Sizing::ChatsOutlast { long_prompt: LONG_PROMPT },
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// The long prompt, and when it arrives.
pub(super) const LONG_PROMPT: u32 = 2048;
const LONG_AT_MS: f64 = 1000.0;

/// Three short requests decode; a long prompt arrives while they do.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let mut requests = vec![Scripted { at_ms: 0.0, prompt_tokens: 64, max_tokens: 48 }; 3];
    requests.push(Scripted { at_ms: LONG_AT_MS, prompt_tokens: LONG_PROMPT, max_tokens: 4 });
    let traffic = Traffic { arrivals: Arrivals::Script { requests }, ..Default::default() };
    (vec![at.point(Policy::Continuous, 64, 48, 4, 4, 1, traffic.clone()), at.point(Policy::Chunked, 64, 48, 4, 4, 1, traffic)], vec!["continuous", "chunked"])
}

/// Largest ITL of the requests that were decoding when the long prompt arrived (the short
/// ones).
pub(super) fn short_requests_max_itl(p: &PointResult) -> f64 {
    p.samples.iter().filter(|r| r.prompt_tokens < LONG_PROMPT).flat_map(|r| r.itl_ms()).fold(f64::NAN, f64::max)
}

fn long_request_ttft(p: &PointResult) -> f64 {
    p.samples.iter().filter(|r| r.prompt_tokens == LONG_PROMPT).filter_map(|r| r.ttft_ms()).fold(f64::NAN, f64::max)
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let (a, b) = (&points[0], &points[1]);
    let itl = short_requests_max_itl(a) / short_requests_max_itl(b);
    let ttft = long_request_ttft(b) / long_request_ttft(a);
    (
        vec![
            Check::new("largest ITL of the decoding requests, continuous ÷ chunked", itl, ">=", 2.0),
            Check::new("long prompt's TTFT, chunked ÷ continuous (the cost)", ttft, "<=", 1.5),
        ],
        format!(
            "While a {LONG_PROMPT}-token prompt was prefilled, chunking cut the worst stall of the decoding requests {itl:.1}× at a cost of {:+.0}% on the long prompt's TTFT.",
            (ttft - 1.0) * 100.0
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "A 2048-token prompt arrives while three chats are streaming. What happens to their tokens?",
        figures: vec![figure(Metric::DecodersMaxItl, "the chats' longest wait between tokens", "ms", &[0, 1])],
        choices: vec![
            choice("They stall while the prompt is read, unless it is read in chunks", &[Down]),
            choice("Nothing: they stream on either way", &[Flat]),
            choice("Reading in chunks makes the stall longer", &[Up]),
        ],
        answer: 0,
        why: "Unchunked, the long prompt is one pass of 2048 tokens and every chat's next token waits for that pass. In chunks, each pass computes a slice of the prompt and also the chats' next tokens, so they keep coming.",
    }
}
