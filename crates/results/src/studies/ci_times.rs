//! Where a test run's time goes (`scripts/ci-times`, which `.ci/run` wraps around
//! `scripts/test`): the run's phases from the markers its scripts print, the total, and how
//! the tests ended. A cold run (no cargo target directory yet) compiles every dependency; a
//! warm one only what changed.

use serde::{Deserialize, Serialize};

use super::numbers::row;

/// A ci-times file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CiTimes {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    /// When the run began (ISO 8601, UTC).
    pub date: String,
    /// The commit tested.
    pub commit: String,
    pub machine: Machine,
    /// `cold` (nothing compiled yet) or `warm`.
    pub caches: String,
    pub exit_status: i32,
    pub total_seconds: f64,
    /// In the order they ran.
    pub phases: Vec<Phase>,
    /// The closing line's counts; `None` when the run ended before printing it.
    pub tests: Option<TestCounts>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: Option<f64>,
    pub os: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TestCounts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

pub const KIND: &str = "ci-times";
pub const TABLES: &[&str] = &["summary", "phases"];

pub fn header(table: &str) -> [String; 2] {
    let [h, a]: [&str; 2] = match table {
        "summary" => ["| machine | caches | commit | total | tests | exit status |", "| --- | --- | --- | ---: | --- | ---: |"],
        _ => ["| machine | caches | phase | time | share of the run |", "| --- | --- | --- | ---: | ---: |"],
    };
    [h.into(), a.into()]
}

/// `1 h 02 min`, `12 min 05 s` or `42 s`.
fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, s) => format!("{m} min {s:02} s"),
        (h, m, _) => format!("{h} h {m:02} min"),
    }
}

impl CiTimes {
    fn machine(&self) -> String {
        let m = &self.machine;
        match m.memory_gib {
            Some(gib) => format!("{} ({} cores, {gib:.0} GiB)", m.cpu, m.cores),
            None => format!("{} ({} cores)", m.cpu, m.cores),
        }
    }

    pub fn rows(&self, table: &str) -> Vec<String> {
        let machine = self.machine();
        match table {
            "summary" => {
                let tests = match self.tests {
                    Some(t) => format!("{} passed, {} failed, {} skipped", t.passed, t.failed, t.skipped),
                    None => "no closing line (the run stopped early)".into(),
                };
                let exit = self.exit_status.to_string();
                vec![row(&[machine.as_str(), &self.caches, &self.commit, &duration(self.total_seconds), &tests, &exit])]
            }
            _ => {
                let mut rows: Vec<String> = self
                    .phases
                    .iter()
                    .map(|p| {
                        let share = format!("{:.0}%", 100.0 * p.seconds / self.total_seconds);
                        row(&[machine.as_str(), &self.caches, &p.name, &duration(p.seconds), &share])
                    })
                    .collect();
                rows.push(row(&[machine.as_str(), &self.caches, "**total**", &format!("**{}**", duration(self.total_seconds)), ""]));
                rows
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> CiTimes {
        serde_json::from_value(serde_json::json!({
            "kind": KIND, "command": ["scripts/test"], "date": "2026-12-05T12:10:00Z", "commit": "abc1234",
            "machine": {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 23.4, "os": "Linux"},
            "caches": "cold", "exit_status": 0, "total_seconds": 3725.4,
            "phases": [{"name": "build lx", "seconds": 1862.7}, {"name": "cargo test: run", "seconds": 1862.7}],
            "tests": {"passed": 489, "failed": 0, "skipped": 2}
        }))
        .unwrap()
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(725.0), "12 min 05 s");
        assert_eq!(duration(3725.4), "1 h 02 min");
    }

    #[test]
    fn the_summary_says_the_machine_total_and_tests() {
        assert_eq!(
            file().rows("summary"),
            ["| AMD EPYC (2 cores, 23 GiB) | cold | abc1234 | 1 h 02 min | 489 passed, 0 failed, 2 skipped | 0 |"]
        );
    }

    #[test]
    fn each_phase_has_its_share_and_the_total_closes_the_table() {
        let rows = file().rows("phases");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], "| AMD EPYC (2 cores, 23 GiB) | cold | build lx | 31 min 03 s | 50% |");
        assert!(rows[2].contains("**total** | **1 h 02 min**"), "{}", rows[2]);
    }

    #[test]
    fn a_run_that_stopped_early_says_so() {
        let mut f = file();
        f.tests = None;
        assert!(f.rows("summary")[0].contains("no closing line"));
    }
}
