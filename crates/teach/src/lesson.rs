//! Lessons: each teaching demo ([`crate::demo`]) as the app teaches it: a question, the
//! shapes an audience can predict, the figures drawn as the points settle, and why the
//! answer is what it is. One lesson per demo, so a new demo is a new lesson; what is
//! measured and how it is judged stay the demo's.

use serde::Serialize;

use lx_engine::backend::BackendInfo;
use lx_results::report::handout::{Answer, CheckRow, Handout};
use lx_results::results::{PointResult, RunFile};

use crate::demo::{self, Demo, DEMOS};

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

impl Metric {
    /// The value at one point (`None`: the point did not measure it); `backends` are the run's
    /// loaded backends (where cache sizes come from).
    pub fn of(self, p: &PointResult, backends: &[BackendInfo]) -> Option<f64> {
        let v = match self {
            Metric::TtftP50 => p.ttft_ms.p50,
            Metric::TtftP95 => p.ttft_ms.p95,
            Metric::DecodeP50 => p.decode_tps.p50,
            Metric::Throughput => p.throughput_tps,
            Metric::DecodersMaxItl => demo::short_requests_max_itl(p),
            Metric::DecodersItlP99 => demo::decoders_itl(p, demo::DISAGG_LONG_PROMPT).p99,
            Metric::LongPromptTtft => demo::mean_ttft_of(p, demo::DISAGG_LONG_PROMPT),
            Metric::SequencesInBudget => (demo::KV_BUDGET_BYTES as f64 / demo::kv_bytes_per_sequence(p, backends)?).floor(),
            Metric::MeanKl => p.fidelity?.fidelity.mean_kl,
        };
        // A divergence of 0 is a measurement (the same model); no other figure is 0.
        (p.requests > 0 && v.is_finite() && (v > 0.0 || (self == Metric::MeanKl && v == 0.0))).then_some(v)
    }
}

/// One drawn figure: its name, unit, and the points (by their place in the demo's plan)
/// it is drawn over.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    pub metric: Metric,
    pub label: &'static str,
    pub unit: &'static str,
    pub points: Vec<usize>,
}

/// A prediction the audience can pick: in words, and as the way each figure goes.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    pub label: &'static str,
    /// One per figure.
    pub trends: Vec<Trend>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
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

fn figure(metric: Metric, label: &'static str, unit: &'static str, points: &[usize]) -> Figure {
    Figure { metric, label, unit, points: points.to_vec() }
}

fn choice(label: &'static str, trends: &[Trend]) -> Choice {
    Choice { label, trends: trends.to_vec() }
}

/// The lesson of `demo`.
pub fn lesson(demo: Demo) -> Lesson {
    use Trend::{Down, Flat, Up};
    let (question, figures, choices, answer, why) = match demo.name {
        "prompt-length" => (
            "Does a longer prompt slow down every token, or only the first?",
            vec![figure(Metric::TtftP50, "time to first token", "ms", &[0, 1]), figure(Metric::DecodeP50, "decode speed per request", "tok/s", &[0, 1])],
            vec![
                choice("Every token slows: the first comes later and the rest come slower", &[Up, Down]),
                choice("Only the first: it comes later, then tokens flow as fast as before", &[Up, Flat]),
                choice("Nothing much changes", &[Flat, Flat]),
            ],
            1,
            "The whole prompt is computed before the first token can come (prefill): many tokens per pass over the weights, so its time grows with the prompt and the machine's arithmetic sets it. Every later token is one pass that reads every weight once (decode): the same work whatever the prompt, so memory bandwidth sets it.",
        ),
        "batching" => (
            "Four people ask at once instead of one. Does each answer come slower, and does the machine do more in total?",
            vec![figure(Metric::Throughput, "tokens per second, all clients", "tok/s", &[0, 1]), figure(Metric::DecodeP50, "decode speed per request", "tok/s", &[0, 1])],
            vec![
                choice("More in total, each one slower", &[Up, Down]),
                choice("The same total, split four ways", &[Flat, Down]),
                choice("Each as fast as alone: four times the total", &[Up, Flat]),
            ],
            0,
            "A decode step reads every weight once however many sequences it carries: four sequences share that read, so the total grows. The step also does four sequences' arithmetic: a GPU has compute to spare and barely slows, a small CPU has little and slows more, so each sequence gets its next token later while the total still grows.",
        ),
        "static-vs-continuous" => (
            "Requests arrive at random moments. Is it better to start a batch together and run it to the end, or let each request join as soon as a place frees?",
            vec![figure(Metric::TtftP95, "time to first token, p95", "ms", &[1, 2])],
            vec![
                choice("Joining as places free: first tokens come sooner", &[Down]),
                choice("No difference", &[Flat]),
                choice("Whole batches: first tokens come sooner", &[Up]),
            ],
            0,
            "A static batch holds all its places until its longest member ends; a request arriving meanwhile waits for the whole batch. Continuous batching admits it at the next step, so only a full machine makes it wait.",
        ),
        "chunked-prefill" => (
            "A 2048-token prompt arrives while three chats are streaming. What happens to their tokens?",
            vec![figure(Metric::DecodersMaxItl, "the chats' longest wait between tokens", "ms", &[0, 1])],
            vec![
                choice("They stall while the prompt is read, unless it is read in chunks", &[Down]),
                choice("Nothing: they stream on either way", &[Flat]),
                choice("Reading in chunks makes the stall longer", &[Up]),
            ],
            0,
            "Unchunked, the long prompt is one pass of 2048 tokens and every chat's next token waits for that pass. In chunks, each pass computes a slice of the prompt and also the chats' next tokens, so they keep coming.",
        ),
        "prefix-cache" => (
            "Every request starts with the same 1024-token instructions. Must the server compute them again each time?",
            vec![figure(Metric::TtftP50, "time to first token", "ms", &[0, 1])],
            vec![
                choice("No: with the cache on, the first token comes far sooner", &[Up]),
                choice("Yes: every prompt token is computed anyway", &[Flat]),
                choice("Looking the prefix up costs more than it saves", &[Down]),
            ],
            0,
            "The keys and values a prefix leaves in the KV cache depend only on the prefix. Kept, they let the next request compute only its own suffix: the first token then costs the suffix's prefill, not the whole prompt's.",
        ),
        "speculative" => (
            "Can guessing the next tokens from the prompt make decoding faster, and what does a wrong guess cost?",
            vec![
                figure(Metric::DecodeP50, "decode speed, copying a passage", "tok/s", &[0, 1]),
                figure(Metric::DecodeP50, "decode speed, continuing prose", "tok/s", &[2, 3]),
            ],
            vec![
                choice("Faster when the output repeats the prompt, about the same otherwise", &[Up, Flat]),
                choice("Faster on both", &[Up, Up]),
                choice("Slower on both: checking guesses costs", &[Down, Down]),
            ],
            0,
            "The model checks a whole guess in one pass, which costs little more than one token's pass; every guessed token it agrees with is a pass saved. Where the output copies the prompt most guesses hold; on new prose few do, and a failed guess costs only the extra positions of one pass.",
        ),
        "kv-cache" => (
            "Store the KV cache in 8 bits instead of 16. How many more conversations fit in the same memory, and at what price?",
            vec![
                figure(Metric::SequencesInBudget, "sequences a 256 MiB cache holds", "sequences", &[0, 1]),
                figure(Metric::Throughput, "tokens per second, 4 clients", "tok/s", &[0, 1]),
            ],
            vec![
                choice("Nearly twice as many, at about the same speed", &[Up, Flat]),
                choice("No more: the model's weights take the memory", &[Flat, Flat]),
                choice("Twice as many, but much slower", &[Up, Down]),
            ],
            0,
            "Each sequence's cache grows with its length and is separate from the weights; q8_0 stores 32 values in 34 bytes where f16 takes 64. Reading the smaller cache costs a little dequantizing, and the text moves a little because the stored values are rounded.",
        ),
        "disaggregation" => (
            "Long prompts keep stalling the chats. Would a second worker that only reads prompts help, and what would it cost?",
            vec![
                figure(Metric::DecodersItlP99, "the chats' p99 wait between tokens", "ms", &[0, 2]),
                figure(Metric::LongPromptTtft, "the long prompts' time to first token", "ms", &[0, 2]),
            ],
            vec![
                choice("The chats stop stalling; the long prompts wait longer", &[Down, Up]),
                choice("The chats stop stalling, at no cost", &[Down, Flat]),
                choice("No change: it is the same machine", &[Flat, Flat]),
            ],
            0,
            "The prefill worker computes each long prompt and hands its KV cache to the decode worker, whose passes then carry only the chats' tokens. On one machine the two workers split its cores, so each is slower than one worker alone, and the hand-over adds a transfer.",
        ),
        "fidelity" => (
            "Two ways to make a backend decode faster: let it check tokens drafted from the prompt, or store its KV cache in 4 bits. Is the faster backend still computing the same model?",
            vec![
                figure(Metric::DecodeP50, "decode speed, copying a passage", "tok/s", &[0, 1]),
                figure(Metric::MeanKl, "how far drafting moves the model (KL)", "nats", &[0, 1]),
                figure(Metric::MeanKl, "how far a 4-bit cache moves it (KL)", "nats", &[0, 2]),
            ],
            vec![
                choice("Drafting is faster and the same model; the 4-bit cache is another model", &[Up, Flat, Up]),
                choice("Both compute the same model: faster is only faster", &[Up, Flat, Flat]),
                choice("Drafted guesses change the model; the 4-bit cache does not", &[Up, Up, Flat]),
            ],
            0,
            "Each drafted token is kept only if the model, computing it in one verify pass, would have chosen it too: the output is the model's own, and its distributions differ from plain decoding by rounding alone. A 4-bit cache stores every key and value rounded to 16 levels, so each attention reads slightly different numbers than the model's: a measurably different distribution, and now and then a different token. KL divergence against the reference says how far each setting moved the model (0: not at all).",
        ),
        _ => unreachable!("every demo has a lesson (see the test)"),
    };
    let labels = demo::plan(demo, "llama", 0).labels;
    Lesson { name: demo.name, shows: demo.shows, question, figures, choices, answer, why, labels, on_a_server: demo::ON_A_SERVER.contains(&demo.name) }
}

/// The handout of one lesson's runs (`(run, file name)`, one per machine): every run must be
/// a run of the same demo (`lx demo NAME --out`, or a lesson in the app).
pub fn handout(runs: &[(RunFile, String)]) -> Result<Handout, String> {
    let mut lesson_of_all: Option<Lesson> = None;
    let mut answers = Vec::new();
    for (run, source) in runs {
        let report = match demo::judge_run(run) {
            None => return Err(format!("{source} is not a lesson's run: it names no demo (runs from `lx demo NAME --out FILE` or the app's Lessons are)")),
            Some(Err(e)) => return Err(format!("{source}: {e}")),
            Some(Ok(r)) => r,
        };
        let l = lesson(demo::find(report.demo).map_err(|e| e.to_string())?);
        if let Some(first) = &lesson_of_all {
            if first.name != l.name {
                return Err(format!("{source} is a run of {}, not of {}: one handout shows one lesson", l.name, first.name));
            }
        }
        let label = |i: usize| report.rows.get(i).and_then(|r| r.first()).cloned().unwrap_or_else(|| format!("point {}", i + 1));
        let figures = l
            .figures
            .iter()
            .map(|f| f.points.iter().filter_map(|&i| Some((label(i), f.metric.of(run.points.get(i)?, &run.backends)?))).collect())
            .collect();
        let hw = &run.hardware;
        let gpus = if hw.gpus.is_empty() { String::new() } else { format!(", {}", hw.gpus.join("; ")) };
        let backend = run.backends.first().map_or_else(|| run.points.first().map(|p| p.backend.clone()).unwrap_or_default(), |b| format!("{} on {}", b.name, b.device));
        answers.push(Answer {
            machine: format!("{} ({} cores{gpus})", hw.cpu, hw.physical_cores),
            backend,
            model: run.model.facts.name.clone().unwrap_or_else(|| run.model.facts.architecture.clone()),
            started_unix_ms: run.started_unix_ms,
            source: source.clone(),
            figures,
            header: report.header.clone(),
            rows: report.rows.clone(),
            checks: report.checks.iter().map(|c| CheckRow { what: c.what.clone(), value: c.value, op: demo::op_sign(c.op).into(), threshold: c.threshold, holds: c.holds }).collect(),
            sentence: report.sentence.clone(),
            sizing: report.sizing.clone(),
            held: report.held,
        });
        lesson_of_all.get_or_insert(l);
    }
    let l = lesson_of_all.ok_or("a handout needs at least one lesson's run")?;
    Ok(Handout {
        name: l.name.into(),
        question: l.question.into(),
        shows: l.shows.into(),
        why: l.why.into(),
        figures: l.figures.iter().map(|f| (f.label.to_string(), f.unit.to_string())).collect(),
        runs: answers,
    })
}

/// Every demo's lesson, in [`DEMOS`]' order.
pub fn lessons() -> Vec<Lesson> {
    DEMOS.into_iter().map(lesson).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_demo_is_a_lesson_whose_choices_and_figures_agree() {
        let all = lessons();
        assert_eq!(all.iter().map(|l| l.name).collect::<Vec<_>>(), DEMOS.map(|d| d.name));
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
        let l = lesson(demo::find("static-vs-continuous").unwrap());
        let mut p = demo::tests::result(lx_engine::scheduler::Policy::Static, vec![(96, vec![250.0, 260.0])], 300.0);
        assert_eq!(l.values(0, &p, &[]), vec![None], "the capacity point is not drawn");
        assert_eq!(l.values(1, &p, &[]), vec![Some(p.ttft_ms.p95)]);
        assert!((p.ttft_ms.p95 - 250.0).abs() < 1.0);
        p.requests = 0;
        assert_eq!(l.values(1, &p, &[]), vec![None], "a point that measured nothing draws nothing");
    }

    #[test]
    fn a_handout_is_made_from_lesson_runs_only_one_lesson_at_a_time() {
        let read = |name: &str| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results").join(name);
            (RunFile::read(&path).unwrap(), name.to_string())
        };
        let prompt = read("demo-prompt-length.json");
        let h = handout(&[prompt.clone(), prompt.clone()]).unwrap();
        assert_eq!((h.name.as_str(), h.runs.len(), h.figures.len()), ("prompt-length", 2, 2));
        // Each figure has its two points, named as the demo's table names them, valued as
        // the run measured them.
        let ttft = &h.runs[0].figures[0];
        assert_eq!(ttft.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(), ["prompt 64", "prompt 1024"]);
        assert_eq!(ttft[1].1, prompt.0.points[1].ttft_ms.p50);
        let report = demo::judge_run(&prompt.0).unwrap().unwrap();
        assert_eq!(h.runs[0].checks[0].value, report.checks[0].value);
        assert_eq!(h.charts()[0].series.len(), 2, "a line per run");

        let batching = read("demo-batching.json");
        assert!(handout(&[prompt.clone(), batching]).unwrap_err().contains("is a run of batching, not of prompt-length"));
        let sweep = read("batching-pp128-c8-static.json");
        assert!(handout(&[sweep]).unwrap_err().contains("is not a lesson's run"));
        assert!(handout(&[]).is_err());
    }
}
