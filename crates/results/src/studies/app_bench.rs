//! Does the app perturb what it measures (`scripts/app-bench`, tests/e2e/bench.mjs)? One
//! llama.cpp setting measured alternately headless (`lx sweep`) and live in the app while it
//! draws, H A H A ... H. Each app run is held against the mean of the headless runs on either
//! side of it, so a slow drift of the machine cancels; the verdict is the median over rounds,
//! so one disturbed round cannot decide it; and the two headless runs' own distance says how
//! much the machine moved meanwhile. The file also keeps each process's CPU use while the
//! app drew: what the window costs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::numbers::{fixed, median, row};

/// An app-bench file: every run's figures, in the order measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppBench {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    /// When the first run began (ISO 8601, UTC).
    pub date: String,
    /// `lx hw --json` of the machine.
    pub hardware: serde_json::Value,
    /// `latency-explorer --version`: the app and the CPU it was built for.
    pub app: String,
    pub setting: Setting,
    /// The largest median deviation that passes.
    pub tolerance: f64,
    /// One more than the rounds: before the first app run and after each.
    pub headless: Vec<Figures>,
    pub app_runs: Vec<AppRun>,
    /// The 1-minute load average after each round.
    #[serde(default)]
    pub load_average: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setting {
    pub backend: String,
    pub policy: String,
    pub prompt_tokens: usize,
    pub concurrency: usize,
    pub max_tokens: usize,
    /// Requests each run measures.
    pub requests: usize,
    pub threads: usize,
    /// Whether `threads` is the app's automatic count (it leaves the window a core where the
    /// machine has no spare hyper-threads), not one the user gave.
    pub threads_auto: bool,
}

/// One run's point: the medians over its requests, and its throughput.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Figures {
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    pub throughput_tok_s: f64,
    pub requests: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppRun {
    #[serde(flatten)]
    pub figures: Figures,
    /// CPU use per process from the first settled request to the last counted, in cores:
    /// `app`, `worker llama`, `WebKitWebProcess`, `WebKitNetworkProcess`.
    pub cpu_cores: BTreeMap<String, f64>,
    /// How long that was.
    pub cpu_seconds: f64,
}

pub const KIND: &str = "app-bench";
pub const TABLES: &[&str] = &["verdict", "summary", "rounds", "cpu"];

/// The figures held, as tables name them, and how each is read from a run.
const FIGURES: [(&str, fn(&Figures) -> f64); 3] =
    [("TTFT p50 (ms)", |f| f.ttft_ms), ("decode p50 (tok/s)", |f| f.decode_tok_s), ("throughput (tok/s)", |f| f.throughput_tok_s)];

/// The processes the `cpu` table shows, in its column order.
const ROLES: [&str; 4] = ["WebKitWebProcess", "app", "WebKitNetworkProcess", "worker llama"];

pub fn header(table: &str) -> [String; 2] {
    let [h, a]: [&str; 2] = match table {
        "verdict" => ["| threads | rounds | TTFT p50 | decode p50 | throughput | median headless noise | verdict |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"],
        "summary" => ["| threads | figure | median app vs headless | per round | median headless noise |", "| --- | --- | ---: | --- | ---: |"],
        "rounds" => [
            "| round | figure | lx sweep before | app, drawing live | lx sweep after | app vs headless mean | headless before vs after |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ],
        _ => ["| threads | web view | app process | WebKit network | worker | seconds measured per round |", "| --- | ---: | ---: | ---: | ---: | --- |"],
    };
    [h.into(), a.into()]
}

/// `+1.2%`.
fn signed_percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1}%", x * 100.0)
    } else {
        "-".into()
    }
}

fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", x * 100.0)
    } else {
        "-".into()
    }
}

/// A figure's app run against the headless runs around it.
struct Round {
    before: f64,
    app: f64,
    after: f64,
}

impl Round {
    fn base(&self) -> f64 {
        (self.before + self.after) / 2.0
    }
    /// The app's deviation from the mean of the headless runs around it.
    fn deviation(&self) -> f64 {
        (self.app - self.base()) / self.base()
    }
    /// How far the two headless runs were apart: the machine's own noise over the round.
    fn noise(&self) -> f64 {
        (self.before - self.after).abs() / self.base()
    }
}

/// What the verdict says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every figure's median deviation is within the tolerance.
    Passed,
    /// Outside it, on a machine that held still.
    Failed,
    /// Outside it, but the headless runs around the app moved more than the tolerance
    /// themselves: the machine, not the app, is what the figures show.
    Inconclusive,
}

impl AppBench {
    fn rounds(&self, figure: fn(&Figures) -> f64) -> Vec<Round> {
        self.app_runs
            .iter()
            .zip(self.headless.windows(2))
            .map(|(a, h)| Round { before: figure(&h[0]), app: figure(&a.figures), after: figure(&h[1]) })
            .collect()
    }

    /// Each figure's median deviation and median headless noise over the rounds.
    fn medians(&self) -> Vec<(f64, f64)> {
        FIGURES
            .iter()
            .map(|(_, f)| {
                let r = self.rounds(*f);
                (median(&r.iter().map(Round::deviation).collect::<Vec<_>>()), median(&r.iter().map(Round::noise).collect::<Vec<_>>()))
            })
            .collect()
    }

    pub fn verdict(&self) -> Verdict {
        let m = self.medians();
        let worst = m.iter().map(|(d, _)| d.abs()).fold(0.0, f64::max);
        let noise = m.iter().map(|(_, n)| *n).fold(0.0, f64::max);
        if worst <= self.tolerance {
            Verdict::Passed
        } else if noise > self.tolerance {
            Verdict::Inconclusive
        } else {
            Verdict::Failed
        }
    }

    /// `1 (auto)`: the thread count, and whether it was the app's own choice.
    fn threads(&self) -> String {
        format!("{}{}", self.setting.threads, if self.setting.threads_auto { " (auto)" } else { "" })
    }

    pub fn rows(&self, table: &str) -> Vec<String> {
        match table {
            "verdict" => {
                let m = self.medians();
                let noise: Vec<f64> = m.iter().map(|(_, n)| *n).collect();
                let lo = noise.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = noise.iter().copied().fold(0.0, f64::max);
                let verdict = match self.verdict() {
                    Verdict::Passed => format!("passed (tolerance {})", percent(self.tolerance)),
                    Verdict::Failed => "failed".into(),
                    Verdict::Inconclusive => "inconclusive: the machine moved".into(),
                };
                let mut cells = vec![self.threads(), self.app_runs.len().to_string()];
                cells.extend(m.iter().map(|(d, _)| signed_percent(*d)));
                cells.extend([format!("{}-{}", fixed(lo * 100.0, 1), percent(hi)), verdict]);
                vec![row(&cells)]
            }
            "summary" => FIGURES
                .iter()
                .zip(self.medians())
                .map(|((name, f), (dev, noise))| {
                    let per: Vec<String> = self.rounds(*f).iter().map(|r| signed_percent(r.deviation())).collect();
                    row(&[self.threads(), name.to_string(), signed_percent(dev), per.join(", "), percent(noise)])
                })
                .collect(),
            "rounds" => {
                let mut out = Vec::new();
                for i in 0..self.app_runs.len() {
                    for (name, f) in FIGURES {
                        let r = &self.rounds(f)[i];
                        let num = |x: f64| if x.abs() >= 100.0 { fixed(x, 0) } else { fixed(x, 2) };
                        out.push(row(&[(i + 1).to_string(), name.into(), num(r.before), num(r.app), num(r.after), signed_percent(r.deviation()), percent(r.noise())]));
                    }
                }
                out
            }
            _ => {
                // The median over rounds of each process's share of a core.
                let mut cells = vec![self.threads()];
                for role in ROLES {
                    let seen: Vec<f64> = self.app_runs.iter().filter_map(|a| a.cpu_cores.get(role).copied()).collect();
                    cells.push(if seen.is_empty() { "-".into() } else { percent(median(&seen)) });
                }
                let secs: Vec<String> = self.app_runs.iter().map(|a| format!("{:.0}", a.cpu_seconds)).collect();
                cells.push(secs.join(", "));
                vec![row(&cells)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(ttft_ms: f64, decode_tok_s: f64, throughput_tok_s: f64) -> Figures {
        Figures { ttft_ms, decode_tok_s, throughput_tok_s, requests: 24 }
    }

    fn bench(headless: Vec<Figures>, app: Vec<Figures>) -> AppBench {
        AppBench {
            kind: KIND.into(),
            command: vec!["scripts/app-bench".into()],
            date: "2026-12-04T21:00:00Z".into(),
            hardware: serde_json::json!({}),
            app: "latency-explorer 0.1.0".into(),
            setting: Setting { backend: "llama".into(), policy: "continuous".into(), prompt_tokens: 256, concurrency: 1, max_tokens: 64, requests: 24, threads: 1, threads_auto: true },
            tolerance: 0.05,
            headless,
            app_runs: app
                .into_iter()
                .map(|figures| AppRun { figures, cpu_cores: BTreeMap::from([("app".into(), 0.013), ("WebKitWebProcess".into(), 0.036), ("worker llama".into(), 0.98)]), cpu_seconds: 40.0 })
                .collect(),
            load_average: vec![],
        }
    }

    #[test]
    fn each_app_run_is_held_against_the_headless_runs_around_it() {
        // Round 1: app 1050 against (1000 + 1100) / 2 = 1050: 0%, the headless pair 9.5% apart.
        // Round 2: app 1155 against (1100 + 1100) / 2: +5%. Round 3: app 990 against 1100: -10%.
        let h = vec![figures(1000.0, 40.0, 20.0), figures(1100.0, 40.0, 20.0), figures(1100.0, 40.0, 20.0), figures(1100.0, 40.0, 20.0)];
        let a = vec![figures(1050.0, 40.0, 20.0), figures(1155.0, 42.0, 20.0), figures(990.0, 38.0, 20.0)];
        let b = bench(h, a);
        let rounds = b.rows("rounds");
        assert_eq!(rounds.len(), 9);
        assert_eq!(rounds[0], "| 1 | TTFT p50 (ms) | 1000 | 1050 | 1100 | +0.0% | 9.5% |");
        assert_eq!(rounds[4], "| 2 | decode p50 (tok/s) | 40.00 | 42.00 | 40.00 | +5.0% | 0.0% |");
        // The medians: TTFT's deviations 0, +5, -10 give +0.0%; its noise 9.5, 0, 0 gives 0.
        let summary = b.rows("summary");
        assert_eq!(summary[0], "| 1 (auto) | TTFT p50 (ms) | +0.0% | +0.0%, +5.0%, -10.0% | 0.0% |");
        assert_eq!(b.verdict(), Verdict::Passed);
        assert_eq!(b.rows("verdict"), ["| 1 (auto) | 3 | +0.0% | +0.0% | +0.0% | 0.0-0.0% | passed (tolerance 5.0%) |"]);
        assert_eq!(b.rows("cpu"), ["| 1 (auto) | 3.6% | 1.3% | - | 98.0% | 40, 40, 40 |"]);

        // The app slower in every round on a still machine fails; on a moving one it says so.
        let still = bench(vec![figures(1000.0, 40.0, 20.0); 3], vec![figures(1100.0, 40.0, 20.0); 2]);
        assert_eq!(still.verdict(), Verdict::Failed);
        let moving = bench(vec![figures(1000.0, 40.0, 20.0), figures(1200.0, 40.0, 20.0), figures(1000.0, 40.0, 20.0)], vec![figures(1250.0, 40.0, 20.0); 2]);
        assert_eq!(moving.verdict(), Verdict::Inconclusive);
        assert!(moving.rows("verdict")[0].ends_with("| inconclusive: the machine moved |"), "{:?}", moving.rows("verdict"));

        // The file reads back as the script writes it (figures beside the CPU use in a run).
        let text = serde_json::to_string(&b).unwrap();
        assert!(text.contains(r#""app_runs":[{"ttft_ms":1050.0"#), "{text}");
        let back: AppBench = serde_json::from_str(&text).unwrap();
        assert_eq!(back.rows("rounds"), rounds);
    }
}
