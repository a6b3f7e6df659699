//! The report of a real run (the ceilings sweep in docs/results: llama.cpp and candle,
//! prompts 64 and 512, 1, 4 and 16 at once, with the machine's probe) and of made-up ones
//! for the edges.

use std::path::Path;

use super::*;
use lx_client::records::RequestRecord;
use lx_engine::scheduler::Policy;
use lx_client::traffic::{PointRun, PointSpec, Traffic};

const RUN: &[u8] = include_bytes!("../../../../docs/results/ceilings-llama-candle-pp64-512-c1-16.json");

fn real_run() -> RunFile {
    RunFile::read_bytes(RUN, Path::new("ceilings.json")).expect("the checked-in run reads")
}

/// A point of `requests` requests whose TTFT is `ttft` ms.
fn point(backend: &str, prompt: u32, concurrency: usize, ttft: f64) -> PointResult {
    let spec = PointSpec { prompt_tokens: prompt, max_tokens: 4, concurrency, requests: 2, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
    let records = (0..2)
        .map(|i| {
            let mut r = RequestRecord::new(i, prompt, 4, 0.0);
            r.token_ms = vec![ttft, ttft + 10.0, ttft + 20.0, ttft + 30.0];
            r.tokens = vec![1, 2, 3, 4];
            r.finish = Some(lx_engine::scheduler::FinishReason::Length);
            r
        })
        .collect();
    PointResult::from_run(backend, Policy::Continuous, &spec, PointRun { records, window_ms: 100.0, ..Default::default() })
}

#[test]
fn the_charts_follow_what_the_sweep_varied() {
    let run = real_run();
    let charts = charts(&run.points);
    let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Time to first token, median by prompt tokens",
            "Prefill rate, median by prompt tokens",
            "Decode rate per request, median by concurrent requests",
            "Throughput, all requests together by concurrent requests",
        ]
    );
    // Along prompt length, one curve per backend and concurrency; along concurrency, one
    // per backend and prompt length.
    assert_eq!(charts[0].series.len(), 6);
    assert_eq!(charts[2].series.len(), 4);
    for c in &charts {
        let drawn: usize = c.series.iter().map(|s| s.points.len()).sum();
        assert_eq!(drawn, run.points.len(), "{}: every point once", c.title);
        assert!(c.series.iter().all(|s| s.ceiling.len() == s.points.len()), "{}: a ceiling at every point", c.title);
    }
    // Each drawn value is the point's own median.
    let llama_c4 = charts[0].series.iter().find(|s| s.label == "llama · continuous · tg32 · c4").expect("the llama c4 curve");
    let p512 = run.points.iter().find(|p| p.backend == "llama" && p.concurrency == 4 && p.prompt_tokens == 512).unwrap();
    assert_eq!(llama_c4.points[1], (512.0, p512.ttft_ms.p50));
    assert_eq!(llama_c4.ceiling[1], (512.0, p512.ceiling.as_ref().unwrap().least_ttft_ms));
}

#[test]
fn the_page_holds_the_machine_the_model_the_ceilings_and_every_point() {
    let run = real_run();
    let page = html(&run, "ceilings.json");
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    // Self-contained: no script, nothing fetched.
    for banned in ["<script", " src=", "<link", "url(", "@import"] {
        assert!(!page.contains(banned), "the page has {banned}");
    }
    assert_eq!(page.matches("<svg").count(), 4);
    let body = &page[page.find("<tbody>").unwrap()..];
    assert_eq!(body.matches("<tr>").count(), run.points.len() + run.points.iter().map(|p| p.error_messages.len()).sum::<usize>());
    for p in &run.points {
        assert!(page.contains(&format!("<td class=\"n\">{:.1}</td>", p.ttft_ms.p50)), "TTFT p50 of {}", p.test_name());
    }
    let cpu = &run.limits.as_ref().unwrap().devices[0];
    assert!(page.contains(&format!("memory read {:.1} GB/s", cpu.memory_bytes_per_s / 1e9)));
    assert!(page.contains(&escape(&run.hardware.cpu)) && page.contains(&run.model.facts.quantization.name));
    assert!(page.contains(&escape(&run.command.join(" "))));
}

#[test]
fn one_setting_draws_no_chart_and_repetitions_are_averaged() {
    assert!(charts(&[point("llama", 64, 1, 20.0)]).is_empty());
    let mut a = point("llama", 64, 1, 20.0);
    let mut b = point("llama", 64, 1, 30.0);
    (a.repetition, b.repetition) = (Some(1), Some(2));
    let c = point("llama", 256, 1, 80.0);
    let expected = [(64.0, (a.ttft_ms.p50 + b.ttft_ms.p50) / 2.0), (256.0, c.ttft_ms.p50)];
    let charts = charts(&[a, b, c]);
    assert_eq!(charts[0].series.len(), 1);
    assert_eq!(charts[0].series[0].points, expected);
    // No probe, no ceiling line.
    assert!(charts[0].series[0].ceiling.is_empty() && !charts[0].legend().contains("ceiling"));
}

#[test]
fn open_loop_and_depth_sweeps_get_their_own_axes() {
    let at = |rate: f64, ttft: f64| point("llama", 64, 4, ttft).with_traffic(&Traffic { arrivals: Arrivals::Poisson { rate }, ..Default::default() });
    let charts = charts(&[at(1.0, 30.0), at(2.0, 45.0), at(4.0, 120.0)]);
    assert_eq!(charts.len(), 1);
    assert_eq!((charts[0].x_label.as_str(), charts[0].series[0].points.len()), ("arrivals per second", 3));
    let deep = |depth: u32, ttft: f64| {
        let mut p = point("llama", 64 + depth, 1, ttft).with_traffic(&Traffic { depth, prefix_tokens: depth, prefix_cache: true, ..Default::default() });
        p.decode_tps.p50 = 100.0 / (1.0 + f64::from(depth) / 1000.0);
        p
    };
    let charts = super::charts(&[deep(0, 20.0), deep(1024, 21.0), deep(4096, 22.0)]);
    let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(titles, ["Decode rate per request, median by context depth (tokens before the prompt)"]);
    assert_eq!(charts[0].series[0].label, "llama · continuous · pp64 · tg4 · c1");
}

#[test]
fn names_from_the_file_cannot_break_the_page() {
    let mut run = real_run();
    run.model.facts.name = Some("<script>alert(1)</script>".into());
    run.points.truncate(1);
    run.points[0].error_messages = vec!["a & b <c>".into()];
    let page = html(&run, "x\"y.json");
    assert!(!page.contains("<script>") && page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("a &amp; b &lt;c&gt;") && page.contains("x&quot;y.json"));
}
