//! `static-vs-continuous`: with requests arriving over time, a static batch makes them wait.

use lx_client::traffic::{Arrivals, Traffic};
use lx_engine::backend::BackendInfo;
use lx_engine::scheduler::Policy;
use lx_results::results::PointResult;

use super::sizing::Sizing;
use super::{At, Check, Def, Judge, Servers, SweepPoint};
use crate::lesson::{choice, figure, Metric, Teaching, Trend::*};

pub(super) const DEF: Def = Def {
    name: "static-vs-continuous",
    shows: "static batching costs TTFT when requests arrive over time",
    points,
    sizing: Sizing::RateOverCapacity(OVER_CAPACITY),
    scores_fidelity: false,
    judge: Judge::Table(checks),
    teaching,
    servers: Servers::None,
};

/// The demo runs above capacity, so that requests queue (nothing waits below it, whatever
/// the policy), but not so far above that every request mostly waits.
pub(super) const OVER_CAPACITY: f64 = 1.3;

/// Identical Poisson arrivals and drawn lengths (same seed) for both policies, at a rate
/// above what 4 slots sustain on this machine, so requests queue: mixed output lengths make
/// a static batch hold its slots for its longest member, and its queue grows faster. The
/// rate is measured, not fixed: a fixed 4 requests/s was above capacity on one 2-core
/// machine and below it on a faster one, where nothing waited and the demo showed nothing.
/// So 4 closed-loop clients first measure the capacity.
fn points(at: &At) -> (Vec<SweepPoint>, Vec<&'static str>) {
    let traffic = Traffic { arrivals: Arrivals::Poisson { rate: 1.0 }, prompt_tokens_from: Some(48), max_tokens_from: Some(8), seed: 7, ..Default::default() };
    let capacity = Traffic { arrivals: Arrivals::Closed, ..traffic.clone() };
    (
        vec![
            at.point(Policy::Continuous, 96, 32, 4, 12, 4, capacity),
            at.point(Policy::Static, 96, 32, 4, 14, 2, traffic.clone()),
            at.point(Policy::Continuous, 96, 32, 4, 14, 2, traffic),
        ],
        vec!["capacity (4 clients)", "static", "continuous"],
    )
}

fn checks(points: &[PointResult], _: &[BackendInfo]) -> (Vec<Check>, String) {
    let (capacity, a, b) = (&points[0], &points[1], &points[2]);
    let r = a.ttft_ms.p95 / b.ttft_ms.p95;
    let rate = match a.traffic.arrivals {
        Arrivals::Poisson { rate } => rate,
        _ => f64::NAN,
    };
    (
        vec![Check::new("TTFT p95, static ÷ continuous", r, ">", 1.0)],
        format!(
            "With the same arrivals ({rate:.2} requests/s, {OVER_CAPACITY}× the {:.2}/s that 4 clients completed), static batching's TTFT p95 was {r:.2}× continuous batching's: a request arriving while a static batch runs waits for its longest member.",
            capacity.requests_per_min / 60.0
        ),
    )
}

fn teaching() -> Teaching {
    Teaching {
        question: "Requests arrive at random moments. Is it better to start a batch together and run it to the end, or let each request join as soon as a place frees?",
        figures: vec![figure(Metric::TtftP95, "time to first token, p95", "ms", &[1, 2])],
        choices: vec![
            choice("Joining as places free: first tokens come sooner", &[Down]),
            choice("No difference", &[Flat]),
            choice("Whole batches: first tokens come sooner", &[Up]),
        ],
        answer: 0,
        why: "A static batch holds all its places until its longest member ends; a request arriving meanwhile waits for the whole batch. Continuous batching admits it at the next step, so only a full machine makes it wait.",
    }
}
