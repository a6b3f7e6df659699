//! A lesson's handout: one lesson's runs from any number of machines, side by side, as
//! `lx report` writes it.

use lx_results::report::handout::{Answer, CheckRow, Handout};
use lx_results::results::RunFile;

use crate::demo;
use crate::lesson::Lesson;

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
        let l = demo::find(report.demo).map_err(|e| e.to_string())?.lesson();
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

#[cfg(test)]
mod tests {
    use super::*;

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
