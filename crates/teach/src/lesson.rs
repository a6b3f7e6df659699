//! Lessons: a teaching demo as the app teaches it: a question, the shapes an audience can
//! predict, the figures drawn as the points settle, and why the answer is what it is. Each
//! demo's module writes its own ([`Teaching`]); what is measured and how it is judged stay the
//! demo's, and so does what each figure reads off a point (`Metric::of`).

use serde::Serialize;

use lx_engine::backend::BackendInfo;
use lx_results::results::PointResult;

/// Which way a figure goes from a lesson's first compared point to its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum Trend {
    Up,
    Flat,
    Down,
}

/// A figure a lesson draws, one value per point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    TtftP50,
    TtftP95,
    /// Per-request decode rate, median.
    DecodeP50,
    /// All requests' output over the window.
    Throughput,
    /// The largest gap between tokens of the requests decoding while a long prompt arrived.
    DecodersMaxItl,
    /// The 99th percentile of those gaps.
    DecodersItlP99,
    /// The long prompts' mean TTFT.
    LongPromptTtft,
    /// Sequences of the `kv-cache` demo's length its memory budget holds.
    SequencesInBudget,
    /// Mean KL divergence of the point's settings from the reference (with drafts: from
    /// decoding without them), nats; 0 is the same model.
    MeanKl,
}

/// One drawn figure: its name, unit, and the points (by their place in the demo's plan)
/// it is drawn over.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Figure {
    pub metric: Metric,
    pub label: &'static str,
    pub unit: &'static str,
    pub points: Vec<usize>,
}

/// A prediction the audience can pick: in words, and as the way each figure goes.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Choice {
    pub label: &'static str,
    /// One per figure.
    pub trends: Vec<Trend>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Lesson {
    /// The demo's name (`lx demo NAME`).
    pub name: &'static str,
    /// The claim, as one line.
    pub shows: &'static str,
    /// The question put to the audience.
    pub question: &'static str,
    pub figures: Vec<Figure>,
    pub choices: Vec<Choice>,
    /// The choice the claim makes.
    pub answer: usize,
    /// Why the answer is what it is: the mechanism the numbers show.
    pub why: &'static str,
    /// The points as the demo plans them (a sized point's label changes with its size).
    pub labels: Vec<String>,
    /// Whether it can measure a server alone (else: why it needs a backend of the app).
    pub on_a_server: bool,
}

const SCHEDULER: &str = "it shows how our scheduler runs requests, and a server schedules them its own way: pick a backend of this app";

impl Lesson {
    /// The value of each figure at one point, `None` where it is not drawn over that point.
    pub fn values(&self, index: usize, p: &PointResult, backends: &[BackendInfo]) -> Vec<Option<f64>> {
        self.figures.iter().map(|f| if f.points.contains(&index) { f.metric.of(p, backends) } else { None }).collect()
    }

    /// Why it cannot measure a server on its own (`None`: it can).
    pub fn server_refusal(&self) -> Option<&'static str> {
        (!self.on_a_server).then_some(SCHEDULER)
    }
}

/// What a demo's module says to teach it: everything of its [`Lesson`] but what the demo
/// itself knows (name, claim, points).
pub(crate) struct Teaching {
    pub question: &'static str,
    pub figures: Vec<Figure>,
    pub choices: Vec<Choice>,
    pub answer: usize,
    pub why: &'static str,
}

pub(crate) fn figure(metric: Metric, label: &'static str, unit: &'static str, points: &[usize]) -> Figure {
    Figure { metric, label, unit, points: points.to_vec() }
}

pub(crate) fn choice(label: &'static str, trends: &[Trend]) -> Choice {
    Choice { label, trends: trends.to_vec() }
}

#[cfg(test)]
mod tests {
    use crate::demo::{self, lessons, DEMOS};

    #[test]
    fn every_demo_is_a_lesson_whose_choices_and_figures_agree() {
        let all = lessons();
        assert_eq!(all.iter().map(|l| l.name).collect::<Vec<_>>(), DEMOS.map(|d| d.name()));
        for l in &all {
            let points = demo::plan(demo::find(l.name).unwrap(), "llama", 0).points.len();
            assert!(l.question.ends_with('?'), "{}", l.name);
            assert!(l.choices.len() >= 2 && l.answer < l.choices.len(), "{}", l.name);
            assert!(l.choices.iter().all(|c| c.trends.len() == l.figures.len()), "{}: a trend per figure", l.name);
            // The choices are told apart by their shapes, not only their words.
            for (i, a) in l.choices.iter().enumerate() {
                assert!(l.choices[i + 1..].iter().all(|b| b.trends != a.trends), "{}: two choices draw the same shape", l.name);
            }
            assert!(l.figures.iter().all(|f| f.points.len() >= 2 && f.points.iter().all(|&i| i < points)), "{}", l.name);
            assert_eq!(l.labels.len(), points);
        }
        assert!(all[0].on_a_server && all[0].server_refusal().is_none());
        assert!(all[1].server_refusal().unwrap().contains("a server schedules them its own way"));
    }

    #[test]
    fn a_figure_is_read_from_its_points_only() {
        let l = demo::find("static-vs-continuous").unwrap().lesson();
        let mut p = demo::tests::result(lx_engine::scheduler::Policy::Static, vec![(96, vec![250.0, 260.0])], 300.0);
        assert_eq!(l.values(0, &p, &[]), vec![None], "the capacity point is not drawn");
        assert_eq!(l.values(1, &p, &[]), vec![Some(p.ttft_ms.p95)]);
        assert!((p.ttft_ms.p95 - 250.0).abs() < 1.0);
        p.requests = 0;
        assert_eq!(l.values(1, &p, &[]), vec![None], "a point that measured nothing draws nothing");
    }
}
