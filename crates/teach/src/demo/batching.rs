//! `batching`: more clients get more throughput in total, each request a little slower.

use lx_client::traffic::Traffic;
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "batching",
    shows: "batching trades per-request speed for throughput",
    points,
    sizing: Sizing::Fixed,
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// Continuous batching at 4 clients must reach this share of the backend's own rate with 4
/// sequences per pass; below it, the harness (not the backend) is what limits it.
const BATCHED_RATE_SHARE: f64 = 0.9;

/// The third point is the backend's own batched rate: batches of 4 that start and end
/// together, every pass the same shape. Continuous batching at 4 clients should get it.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    (
        vec![
            at.point(Policy::Continuous, 64, 32, 1, 2, 1, Traffic::default()),
            at.point(Policy::Continuous, 64, 32, 4, 8, 4, Traffic::default()),
            at.point(Policy::Static, 64, 32, 4, 8, 0, Traffic::default()),
        ],
        vec!["1 client", "4 clients", "static batches of 4"],
    )
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let (a, b) = (&points[0], &points[1]);
    let thr = b.throughput_tps / a.throughput_tps;
    let dec = b.decode_tps.p50 / a.decode_tps.p50;
    let own = b.throughput_tps / points[2].throughput_tps;
    (
        vec![
            Check::new("throughput, 4 clients ÷ 1 client", thr, ">", 1.0),
            Check::new("per-request decode tok/s p50, 4 clients ÷ 1 client", dec, "<", 1.0),
            Check::new("throughput, 4 clients ÷ the backend's batched rate (static batches of 4)", own, ">=", BATCHED_RATE_SHARE),
        ],
        format!(
            "Four clients got {thr:.2}× the aggregate throughput of one ({:.0}% of what the backend does with batches of 4), while each request decoded at {:.0}% of the single-client speed.",
            own * 100.0,
            dec * 100.0
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Four people ask at once instead of one. Does each answer come slower, and does the machine do more in total?",
        figures: vec![figure(Metric::Throughput, "tokens per second, all clients", "tok/s", &[0, 1]), figure(Metric::DecodeP50, "decode speed per request", "tok/s", &[0, 1])],
        choices: vec![
            choice("More in total, each one slower", &[Up, Down]),
            choice("The same total, split four ways", &[Flat, Down]),
            choice("Each as fast as alone: four times the total", &[Up, Flat]),
        ],
        answer: 0,
        why: "A decode step reads every weight once however many sequences it carries: four sequences share that read, so the total grows. The step also does four sequences' arithmetic: a GPU has compute to spare and barely slows, a small CPU has little and slows more, so each sequence gets its next token later while the total still grows.",
    }
}
