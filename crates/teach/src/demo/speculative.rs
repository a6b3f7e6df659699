//! `speculative`: drafting from the prompt speeds up output that repeats it, and costs little
//! where drafts fail.

use lx_client::traffic::Traffic;
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_engine::speculative::{Drafter, Speculation};
use lx_format::workload::PromptText;
use lx_results::results::PointResult;
use lx_results::speculation::SpecSummary;

use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "speculative",
    shows: "speculative decoding speeds up output that repeats its input, and costs little when drafts fail",
    points,
    sizing: Sizing::Fixed,
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// Prompt and output lengths (the `fidelity` demo's too). The copy prompt's passage is
/// longer than the output, so the whole output can be a copy.
pub(super) const PROMPT: u32 = 320;
pub(super) const OUTPUT: u32 = 128;
/// What prompt lookup must give on each kind of prompt, per request. On a CPU the gain on a
/// copy is bounded by what a verify pass costs: on the 2-core AMD EPYC a pass of 1 + 12
/// positions took 5.6 plain passes' time (each drafted position needs logits over the
/// 262k-token vocabulary; `cargo run --example verify_cost`), so drafts that all hold give at
/// most 13 / 5.6 = 2.3×, and the demo measured 1.98× to 2.00× there. The check asks for 1.8×,
/// which a machine where positions are cheap (a GPU, an AMX Xeon) clears easily.
pub(super) const COPY_GAIN: f64 = 1.8;
const PROSE_FLOOR: f64 = 0.95;

/// One point of `PROMPT` tokens writing `OUTPUT`, one client, so that points differ only in
/// what they draft and cache.
pub(super) fn one_client(at: &At, traffic: Traffic) -> SweepPoint {
    at.point(Policy::Continuous, PROMPT, OUTPUT, 1, 3, 1, traffic)
}

/// Prompt lookup with its default draft length.
pub(super) fn lookup() -> Speculation {
    Speculation { drafter: Drafter::Lookup, ..Speculation::default() }
}

/// Plain against prompt lookup, on a passage to copy and on prose to continue; one client,
/// so each pair differs only in drafting.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let copy = Traffic { prompts: PromptText::Copy, ..Default::default() };
    (
        vec![
            one_client(at, copy.clone()),
            one_client(at, Traffic { spec: lookup(), ..copy }),
            one_client(at, Traffic::default()),
            one_client(at, Traffic { spec: lookup(), ..Traffic::default() }),
        ],
        vec!["copy, plain", "copy, prompt lookup", "prose, plain", "prose, prompt lookup"],
    )
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let copy = points[1].decode_tps.p50 / points[0].decode_tps.p50;
    let prose = points[3].decode_tps.p50 / points[2].decode_tps.p50;
    let acceptance = |p: &PointResult| match SpecSummary::of(p) {
        Some(s) if s.drafted > 0 => format!("{:.0}% of {} drafted tokens accepted", 100.0 * s.acceptance(), s.drafted),
        _ => "nothing drafted".into(),
    };
    (
        vec![
            Check::new("decode tok/s p50 per request, prompt lookup ÷ plain, copying a passage", copy, ">=", COPY_GAIN),
            Check::new("decode tok/s p50 per request, prompt lookup ÷ plain, continuing prose", prose, ">=", PROSE_FLOOR),
        ],
        format!(
            "Drafting from the prompt made decoding {copy:.2}× faster where the output repeats the input ({}) and {prose:.2}× plain speed on free continuation ({}): the target verifies a draft in one pass, so only drafts that hold pay.",
            acceptance(&points[1]),
            acceptance(&points[3])
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Can guessing the next tokens from the prompt make decoding faster, and what does a wrong guess cost?",
        figures: vec![figure(Metric::DecodeP50, "decode speed, copying a passage", "tok/s", &[0, 1]), figure(Metric::DecodeP50, "decode speed, continuing prose", "tok/s", &[2, 3])],
        choices: vec![
            choice("Faster when the output repeats the prompt, about the same otherwise", &[Up, Flat]),
            choice("Faster on both", &[Up, Up]),
            choice("Slower on both: checking guesses costs", &[Down, Down]),
        ],
        answer: 0,
        why: "The model checks a whole guess in one pass, which costs little more than one token's pass; every guessed token it agrees with is a pass saved. Where the output copies the prompt most guesses hold; on new prose few do, and a failed guess costs only the extra positions of one pass.",
    }
}
