//! How a demo sizes its load to this machine from what its first point measured, so that its
//! effect shows on a slow laptop and on a fast GPU alike.

use lx_client::traffic::Arrivals;
use lx_results::results::PointResult;
use lx_run::sweep::SweepPoint;

/// What a demo sizes to this machine from its first point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizing {
    /// Every point is as planned.
    Fixed,
    /// The first point runs closed loop and measures the completed requests per second
    /// (capacity); every later point with Poisson arrivals gets this multiple of it as its
    /// rate.
    RateOverCapacity(f64),
    /// The first point is the short prompt; the second's prompt is the shortest of
    /// [`LONG_PROMPTS`] whose prefill, at the short prompt's measured rate, takes
    /// [`LONG_PREFILL_OVER_TTFT`] times the short prompt's whole TTFT. A fast GPU computes a
    /// 1024-token prompt in about the time its fixed per-request cost takes, and the ratio the
    /// demo checks would then show that cost, not prefill.
    LongPrompt,
    /// Chat requests decode while long prompts (of this many tokens) arrive among them: one
    /// request measured alone first gives this machine's decode rate, and every chat then
    /// writes enough tokens to still be decoding [`CHATS_OUTLAST_MS`] after the last long
    /// prompt arrives. Fixed lengths did not: a fast GPU finishes a 48-token chat before a
    /// prompt arriving at 1 s, and then nothing stalls, with or without chunks.
    ChatsOutlast { long_prompt: u32 },
}

/// How long after the last long prompt's arrival the chats should still be decoding.
pub(super) const CHATS_OUTLAST_MS: f64 = 500.0;
/// The most tokens a sized chat writes (what the worker's context is loaded for).
pub(super) const CHAT_MOST_TOKENS: u32 = 1024;
/// The long prompts [`Sizing::LongPrompt`] chooses from (the first is the CPU's).
pub const LONG_PROMPTS: [u32; 3] = [1024, 2048, 4096];
/// How many times the short prompt's TTFT the long prompt's prefill should take: twice the
/// 4× the check needs, so that prefill, not the fixed cost, decides it.
const LONG_PREFILL_OVER_TTFT: f64 = 8.0;

/// Tokens each chat writes on a machine that decodes one request at `decode_tps`: enough to
/// decode alone until [`CHATS_OUTLAST_MS`] after the last `long_prompt`-token prompt
/// arrives (sharing the passes only slows them, so they last at least that long), never
/// fewer than planned.
pub(super) fn chat_tokens_for(decode_tps: f64, points: &[SweepPoint], long_prompt: u32) -> u32 {
    let (mut last_long_ms, mut planned) = (0.0f64, 0u32);
    for p in points {
        if let Arrivals::Script { requests } = &p.traffic.arrivals {
            for r in requests {
                if r.prompt_tokens == long_prompt {
                    last_long_ms = last_long_ms.max(r.at_ms);
                } else {
                    planned = planned.max(r.max_tokens);
                }
            }
        }
    }
    let needed = ((last_long_ms + CHATS_OUTLAST_MS) / 1e3 * decode_tps).ceil();
    (needed as u32).clamp(planned, CHAT_MOST_TOKENS)
}

/// The points with every scripted request that is not a `long_prompt`-token prompt writing
/// `tokens` tokens.
pub(super) fn with_chat_tokens(mut points: Vec<SweepPoint>, long_prompt: u32, tokens: u32) -> Vec<SweepPoint> {
    for p in &mut points {
        if let Arrivals::Script { requests } = &mut p.traffic.arrivals {
            for r in requests.iter_mut().filter(|r| r.prompt_tokens != long_prompt) {
                r.max_tokens = tokens;
            }
        }
        p.spec.max_tokens = p.spec.max_tokens.max(tokens);
    }
    points
}

/// A point's label: the plan's, or for a point sized by its prompt, that prompt's length.
pub fn point_label(labels: &[String], sizing: Sizing, index: usize, prompt_tokens: u32) -> String {
    match (sizing, labels.get(index)) {
        (Sizing::LongPrompt, Some(_)) => format!("prompt {prompt_tokens}"),
        (_, Some(label)) => label.clone(),
        (_, None) => format!("point {}", index + 1),
    }
}

/// The points after the first, sized from what the first (`measured`) measured.
pub(super) fn sized(sizing: Sizing, measured: &PointResult, mut rest: Vec<SweepPoint>) -> Vec<SweepPoint> {
    match sizing {
        Sizing::Fixed => rest,
        Sizing::RateOverCapacity(factor) => with_rate(rest, factor * measured.requests_per_min / 60.0),
        Sizing::ChatsOutlast { .. } => rest,
        Sizing::LongPrompt => {
            if let Some(long) = rest.first_mut() {
                long.spec.prompt_tokens = long_prompt_for(measured);
            }
            rest
        }
    }
}

/// The short prompt's prefill rate (the worker's own, else its tokens over its TTFT) and
/// TTFT, ms.
fn short_prompt_speed(short: &PointResult) -> (f64, f64) {
    let ttft = short.ttft_ms.p50;
    let rate = if short.prefill_tps.count > 0 { short.prefill_tps.p50 } else { f64::from(short.prompt_tokens) / (ttft / 1e3) };
    (rate, ttft)
}

/// The long prompt for a machine whose short prompt measured `short`.
pub(super) fn long_prompt_for(short: &PointResult) -> u32 {
    let (rate, ttft) = short_prompt_speed(short);
    let prefill_ms = |tokens: u32| f64::from(tokens) / rate * 1e3;
    LONG_PROMPTS.into_iter().find(|&l| prefill_ms(l) >= LONG_PREFILL_OVER_TTFT * ttft).unwrap_or(LONG_PROMPTS[LONG_PROMPTS.len() - 1])
}

/// How a sized demo chose its load, from its first two points (`None` for a fixed one).
pub(super) fn sizing_note(sizing: Sizing, first: &PointResult, second: &PointResult) -> Option<String> {
    match sizing {
        Sizing::Fixed => None,
        // Said by the run that measured it (the request measured first is not in the file).
        Sizing::ChatsOutlast { .. } => None,
        Sizing::RateOverCapacity(factor) => {
            let capacity = first.requests_per_min / 60.0;
            Some(format!("sized to this machine: {} clients completed {capacity:.2} requests/s, so requests arrived at {factor}× that ({:.2}/s)", first.concurrency, factor * capacity))
        }
        Sizing::LongPrompt => {
            let (rate, ttft) = short_prompt_speed(first);
            Some(format!(
                "sized to this machine: the {}-token prompt was computed at {rate:.0} tok/s and its first token took {ttft:.0} ms, so the long prompt is {} tokens (the shortest of {} whose prefill takes {LONG_PREFILL_OVER_TTFT}× that)",
                first.prompt_tokens,
                second.prompt_tokens,
                LONG_PROMPTS.map(|l| l.to_string()).join(", ")
            ))
        }
    }
}

/// The points, with every Poisson arrival rate set to `rate` requests per second.
pub(super) fn with_rate(mut points: Vec<SweepPoint>, rate: f64) -> Vec<SweepPoint> {
    for p in &mut points {
        if let Arrivals::Poisson { rate: r } = &mut p.traffic.arrivals {
            *r = rate;
        }
    }
    points
}
