//! `kv-cache`: a q8_0 KV cache fits nearly twice the sequences of f16 in the same memory.

use lx_client::traffic::Traffic;
use lx_engine::backend::{BackendInfo, KvType, KvTypes};
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::figures::{kv_bytes_per_sequence, same_text_share};
use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "kv-cache",
    shows: "a q8_0 KV cache fits nearly twice the sequences of f16 in the same memory, at a small cost in speed and text",
    points,
    sizing: Sizing::Fixed,
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// Each sequence's context, and the memory the caches are held to (what a small GPU or a
/// phone leaves a model's cache). q8_0 stores 34 bytes per 32 values where f16 stores 64:
/// 1.88x the sequences, less what whole sequences leave over.
const PROMPT: u32 = 448;
const OUTPUT: u32 = 64;
pub(super) const BUDGET_BYTES: u64 = 256 << 20;
const ADMITS: f64 = 1.8;

/// The same four prompts (a worker per cache type starts the prompt sequence again) through
/// an f16 cache and a q8_0 one: what each cache takes per sequence (llama.cpp's own account
/// of its buffers), the speed, and how far the text moves.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let q8 = KvTypes { k: KvType::Q8_0, v: KvType::Q8_0 };
    (
        vec![at.point(Policy::Continuous, PROMPT, OUTPUT, 4, 8, 1, Traffic::default()), at.point(Policy::Continuous, PROMPT, OUTPUT, 4, 8, 1, Traffic { kv: q8, ..Traffic::default() })],
        vec!["f16 cache", "q8_0 cache"],
    )
}

fn checks(points: &[PointResult], backends: &[BackendInfo]) -> (Vec<Check>, String) {
    let (a, b) = (&points[0], &points[1]);
    let admitted = |p: &PointResult| kv_bytes_per_sequence(p, backends).map_or(f64::NAN, |per| (BUDGET_BYTES as f64 / per).floor());
    let (f16, q8) = (admitted(a), admitted(b));
    let speed = b.throughput_tps / a.throughput_tps;
    let same = same_text_share(a, b);
    (
        vec![Check::new(format!("sequences of {} tokens a {} MiB cache holds, q8_0 ÷ f16", PROMPT + OUTPUT, BUDGET_BYTES >> 20), q8 / f16, ">=", ADMITS)],
        format!(
            "In {} MiB a q8_0 cache holds {q8:.0} sequences of {} tokens where f16 holds {f16:.0} ({:.2}×); at 4 clients it ran at {speed:.2}× f16's throughput, and {:.0}% of the greedy text was the same before it first parted: the cache's bytes per sequence, not the model's, decide how many sequences fit.",
            BUDGET_BYTES >> 20,
            PROMPT + OUTPUT,
            q8 / f16,
            same * 100.0
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Store the KV cache in 8 bits instead of 16. How many more conversations fit in the same memory, and at what price?",
        figures: vec![
            figure(Metric::SequencesInBudget, "sequences a 256 MiB cache holds", "sequences", &[0, 1]),
            figure(Metric::Throughput, "tokens per second, 4 clients", "tok/s", &[0, 1]),
        ],
        choices: vec![
            choice("Nearly twice as many, at about the same speed", &[Up, Flat]),
            choice("No more: the model's weights take the memory", &[Flat, Flat]),
            choice("Twice as many, but much slower", &[Up, Down]),
        ],
        answer: 0,
        why: "Each sequence's cache grows with its length and is separate from the weights; q8_0 stores 32 values in 34 bytes where f16 takes 64. Reading the smaller cache costs a little dequantizing, and the text moves a little because the stored values are rounded.",
    }
}
