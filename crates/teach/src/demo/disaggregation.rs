//! `disaggregation`: a prefill worker of its own keeps long prompts from stalling the
//! decoders, at the price of a KV transfer and a split machine.

use lx_client::traffic::{Arrivals, Scripted, Traffic};
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::figures::{decoders_itl, mean_ttft_of, transfer};
use super::sizing::Sizing;
use super::{report, At, Check, Def, Demo, Judge, Report, Servers, SweepPoint, INCOMPLETE};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "disaggregation",
    shows: "a separate prefill worker keeps long prompts from stalling the decoders, at the price of a KV transfer and a split machine",
    points,
    sizing: Sizing::ChatsOutlast { long_prompt: LONG_PROMPT },
    scores_fidelity: false,
    judge: Judge::Own(judge),
    teaching,
    servers: Servers::Beside,
};

/// Chat requests decoding, and long prompts arriving among them (when, ms).
const CHAT: Scripted = Scripted { at_ms: 0.0, prompt_tokens: 64, max_tokens: 96 };
pub(super) const LONG_PROMPT: u32 = 2048;
const LONG_AT_MS: [f64; 2] = [300.0, 1200.0];
/// How much smaller the decoders' p99 inter-token gap must be with a prefill worker of its
/// own than with one worker that runs each long prompt in one pass.
const ITL_GAIN: f64 = 2.0;

/// Three chat requests decode; two long prompts arrive while they do. One worker computing
/// each prompt in one pass, the same worker in chunks, and two workers.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let mut requests = vec![CHAT; 3];
    requests.extend(LONG_AT_MS.map(|at_ms| Scripted { at_ms, prompt_tokens: LONG_PROMPT, max_tokens: 4 }));
    let traffic = Traffic { arrivals: Arrivals::Script { requests }, ..Default::default() };
    let (p, m) = (CHAT.prompt_tokens, CHAT.max_tokens);
    (
        [Policy::Continuous, Policy::Chunked, Policy::Disaggregated].map(|policy| at.point(policy, p, m, 5, 5, 1, traffic.clone())).to_vec(),
        vec!["continuous", "chunked", "disaggregated"],
    )
}

/// Its own columns (what the chat requests felt, what the long prompts waited, what moved),
/// for the three ways of serving and any server after them.
fn judge(demo: Demo, labels: &[String], points: &[PointResult]) -> Report {
    let header = ["", "chat ITL p50 ms", "chat ITL p99 ms", "long prompts' TTFT ms", "long prompt's transfer", "throughput tok/s", "errors"].map(String::from).to_vec();
    let itl = |p: &PointResult| decoders_itl(p, LONG_PROMPT);
    let long_ttft = |p: &PointResult| mean_ttft_of(p, LONG_PROMPT);
    let rows = labels
        .iter()
        .zip(points)
        .map(|(label, p)| {
            let (ms, mb, _) = transfer(p, LONG_PROMPT);
            vec![
                label.clone(),
                format!("{:.0}", itl(p).p50),
                format!("{:.0}", itl(p).p99),
                format!("{:.0}", long_ttft(p)),
                if ms.is_nan() { "-".into() } else { format!("{mb:.1} MB in {ms:.0} ms") },
                format!("{:.1}", p.throughput_tps),
                p.errors.to_string(),
            ]
        })
        .collect();
    let complete = points.len() >= 3 && labels.len() == points.len() && points[..3].iter().all(|p| p.errors == 0 && p.requests > 0);
    if !complete {
        return report(demo, header, rows, false, Vec::new(), INCOMPLETE.to_string());
    }
    let (a, chunked, split) = (&points[0], &points[1], &points[2]);
    let gain = itl(a).p99 / itl(split).p99;
    let (ms, mb, rate) = transfer(split, LONG_PROMPT);
    let (chat_ms, chat_mb, _) = transfer(split, CHAT.prompt_tokens);
    let checks = vec![Check::new("the decoders' ITL p99, continuous ÷ disaggregated", gain, ">=", ITL_GAIN)];
    let sentence = format!(
        "While two {LONG_PROMPT}-token prompts were prefilled, a decode worker of its own kept the chat requests' p99 inter-token gap at {:.0} ms where one worker computing each prompt in one pass let it reach {:.0} ms ({gain:.1}×; chunking: {:.0} ms). The price: each long prompt's state ({mb:.1} MB) took {ms:.0} ms to move ({rate:.0} MB/s; a chat prompt's {chat_mb:.1} MB, {chat_ms:.0} ms), the long prompts' first tokens came after {:.1} s instead of {:.1} s, and the machine's cores were split, so throughput was {:.0}% of one worker's. Split across two devices (a GPU prefilling for another), each phase gets its own hardware; split on one machine, as here, decode is protected but nothing is gained in total.",
        itl(split).p99,
        itl(a).p99,
        itl(chunked).p99,
        long_ttft(split) / 1e3,
        long_ttft(a) / 1e3,
        split.throughput_tps / a.throughput_tps * 100.0
    );
    report(demo, header, rows, true, checks, sentence)
}

fn teaching() -> Teaching {
    Teaching {
        question: "Long prompts keep stalling the chats. Would a second worker that only reads prompts help, and what would it cost?",
        figures: vec![
            figure(Metric::DecodersItlP99, "the chats' p99 wait between tokens", "ms", &[0, 2]),
            figure(Metric::LongPromptTtft, "the long prompts' time to first token", "ms", &[0, 2]),
        ],
        choices: vec![
            choice("The chats stop stalling; the long prompts wait longer", &[Down, Up]),
            choice("The chats stop stalling, at no cost", &[Down, Flat]),
            choice("No change: it is the same machine", &[Flat, Flat]),
        ],
        answer: 0,
        why: "The prefill worker computes each long prompt and hands its KV cache to the decode worker, whose passes then carry only the chats' tokens. On one machine the two workers split its cores, so each is slower than one worker alone, and the hand-over adds a transfer.",
    }
}
