//! A lesson's handout: the question, why the answer is what it is, and each machine's
//! measured answer (its charts, checks and numbers) on one self-contained page, made the
//! way [`super::html`] makes a run's. Several machines' runs of one lesson overlay on the same
//! charts, a line per machine, so a class can compare its laptops.

use std::fmt::Write;

use super::chart::{escape, label, Chart, Series};
use super::{row, utc, STYLE};

/// What the lesson asks and draws (the same for every machine).
#[derive(Debug, Clone, PartialEq)]
pub struct Handout {
    pub name: String,
    pub question: String,
    pub shows: String,
    pub why: String,
    /// Each drawn figure's name and unit.
    pub figures: Vec<(String, String)>,
    pub runs: Vec<Answer>,
}

/// One machine's run of the lesson.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The machine in a line: CPU, cores, GPUs.
    pub machine: String,
    /// The backend as it ran: name, version, device, threads.
    pub backend: String,
    pub model: String,
    pub started_unix_ms: u64,
    /// The file it was made from.
    pub source: String,
    /// Per figure: (point label, value) in the lesson's order.
    pub figures: Vec<Vec<(String, f64)>>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub checks: Vec<CheckRow>,
    pub sentence: String,
    pub sizing: Option<String>,
    pub held: bool,
}

/// A check as the handout prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRow {
    pub what: String,
    pub value: f64,
    /// `≥`, `>`, `≤` or `<`.
    pub op: String,
    pub threshold: f64,
    pub holds: bool,
}

const HANDOUT_STYLE: &str = ".question{font-size:1.6em;font-weight:600;margin:.4em 0}.why{font-size:1.05em;max-width:60em}\
.held{color:#0b6b2f;font-weight:600}.failed{color:#a02000;font-weight:600}.sentence{font-size:1.1em}";

impl Handout {
    /// One chart per figure, a line per machine along the lesson's points.
    pub fn charts(&self) -> Vec<Chart> {
        self.figures
            .iter()
            .enumerate()
            .map(|(i, (name, unit))| {
                let x_names = self.runs.iter().find_map(|r| r.figures.get(i).filter(|f| !f.is_empty())).map(|f| f.iter().map(|(l, _)| l.clone()).collect()).unwrap_or_default();
                let series = self
                    .runs
                    .iter()
                    .map(|r| Series {
                        label: format!("{} · {}", r.machine, r.backend),
                        points: r.figures.get(i).map(|f| f.iter().enumerate().map(|(x, (_, y))| (x as f64, *y)).collect()).unwrap_or_default(),
                        ceiling: Vec::new(),
                    })
                    .collect();
                Chart { title: name.clone(), x_label: String::new(), y_label: unit.clone(), series, ceiling_note: String::new(), x_names }
            })
            .collect()
    }

    /// The page.
    pub fn html(&self) -> String {
        let mut o = String::new();
        let title = format!("Lesson: {}", self.question);
        let _ = write!(o, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}{HANDOUT_STYLE}</style></head><body>", escape(&title));
        let runs = if self.runs.len() == 1 { "one run".to_string() } else { format!("{} runs, a line each on the charts", self.runs.len()) };
        let _ = write!(o, "<p>Latency Explorer lesson <code>{}</code>: {runs}.</p>", escape(&self.name));
        let _ = write!(o, "<h1 class=\"question\">{}</h1><p>{}</p>", escape(&self.question), escape(&self.shows));
        let charts = self.charts();
        if !charts.is_empty() {
            o.push_str("<h2>What was measured</h2><div class=\"charts\">");
            for c in &charts {
                let _ = write!(o, "<figure>{}{}</figure>", c.svg(), c.legend());
            }
            o.push_str("</div>");
        }
        let _ = write!(o, "<h2>Why</h2><p class=\"why\">{}</p>", escape(&self.why));
        for r in &self.runs {
            let _ = write!(o, "<h2>{} · {}</h2>", escape(&r.machine), escape(&r.backend));
            let _ = write!(o, "<p class=\"sentence\"><span class=\"{}\">{}</span> {}</p>", if r.held { "held" } else { "failed" }, if r.held { "Shown." } else { "Not shown in this run." }, escape(&r.sentence));
            o.push_str("<dl>");
            row(&mut o, "model", &r.model);
            row(&mut o, "measured", &utc(r.started_unix_ms));
            if let Some(s) = &r.sizing {
                row(&mut o, "load", s);
            }
            row(&mut o, "from", &r.source);
            o.push_str("</dl><table class=\"checks\"><thead><tr><th>check</th><th class=\"n\">measured</th><th>needs</th><th>held</th></tr></thead><tbody>");
            for c in &r.checks {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td class=\"n\">{}</td><td>{} {}</td><td>{}</td></tr>",
                    escape(&c.what),
                    crate::studies::numbers::check_value(c.value),
                    escape(&c.op),
                    label(c.threshold),
                    if c.holds { "yes" } else { "no" }
                );
            }
            o.push_str("</tbody></table><p></p><table class=\"points\"><thead><tr>");
            for (i, h) in r.header.iter().enumerate() {
                let _ = write!(o, "<th{}>{}</th>", if i > 0 { " class=\"n\"" } else { "" }, escape(h));
            }
            o.push_str("</tr></thead><tbody>");
            for cells in &r.rows {
                o.push_str("<tr>");
                for (i, c) in cells.iter().enumerate() {
                    let _ = write!(o, "<td{}>{}</td>", if i > 0 { " class=\"n\"" } else { "" }, escape(c));
                }
                o.push_str("</tr>");
            }
            o.push_str("</tbody></table>");
        }
        let _ = write!(o, "<p>Made by Latency Explorer from {}. Run it again with <code>lx demo {}</code>, or in the app's Lessons.</p></body></html>\n", escape(&self.runs.iter().map(|r| r.source.as_str()).collect::<Vec<_>>().join(", ")), escape(&self.name));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(machine: &str, ttft: [f64; 2], held: bool) -> Answer {
        Answer {
            machine: machine.into(),
            backend: "llama on CPU".into(),
            model: "gemma".into(),
            started_unix_ms: 1_764_900_000_000,
            source: format!("{machine}.json"),
            figures: vec![vec![("prompt 64".into(), ttft[0]), ("prompt 1024".into(), ttft[1])]],
            header: vec!["".into(), "TTFT p50 ms".into()],
            rows: vec![vec!["prompt 64".into(), format!("{:.0}", ttft[0])], vec!["prompt 1024".into(), format!("{:.0}", ttft[1])]],
            checks: vec![CheckRow { what: "TTFT p50, prompt 1024 ÷ prompt 64".into(), value: ttft[1] / ttft[0], op: "≥".into(), threshold: 4.0, holds: held }],
            sentence: "A 16× longer prompt <made> it slower.".into(),
            sizing: None,
            held,
        }
    }

    #[test]
    fn machines_overlay_on_one_chart_per_figure_and_each_keeps_its_checks() {
        let h = Handout {
            name: "prompt-length".into(),
            question: "Does a longer prompt slow every token?".into(),
            shows: "prompt length drives TTFT".into(),
            why: "prefill".into(),
            figures: vec![("time to first token".into(), "ms".into())],
            runs: vec![answer("laptop A", [100.0, 900.0], true), answer("laptop B", [50.0, 150.0], false)],
        };
        let charts = h.charts();
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].series.len(), 2, "a line per machine");
        assert_eq!(charts[0].x_names, ["prompt 64", "prompt 1024"]);
        assert_eq!(charts[0].series[1].points, [(0.0, 50.0), (1.0, 150.0)]);
        let page = h.html();
        assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script"));
        assert_eq!(page.matches("<svg").count(), 1);
        assert_eq!(page.matches("<circle").count(), 4);
        assert!(page.contains("<td class=\"n\">9.00</td><td>≥ 4</td><td>yes</td>") && page.contains("<td class=\"n\">3.00</td><td>≥ 4</td><td>no</td>"), "{page}");
        assert!(page.contains("made&gt;") && page.contains("Not shown in this run."));
    }
}
