//! Speculative decoding, ours against llama.cpp's own (`scripts/spec-compare`): `lx generate
//! --spec lookup` against `llama-lookup`, and `lx generate --spec draft` against
//! `llama-speculative-simple` with the same draft model, on the same prompts, each held
//! against its own plain decoding in the same round, so the speed-ups compare even where the
//! two tools time decoding a little differently.

use serde::{Deserialize, Serialize};

use super::numbers::{fixed, median, paired_ratio, row};

/// A spec-compare file: every round's four runs per prompt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpecCompare {
    /// Always [`KIND`].
    pub kind: String,
    pub command: Vec<String>,
    pub date: String,
    pub hardware: serde_json::Value,
    pub threads: usize,
    /// Output tokens of every run.
    pub tokens: usize,
    /// llama-lookup's draft length (and llama-speculative-simple's).
    pub their_draft_max: usize,
    /// The draft model both draft-model runs used, when they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    /// The prompts' texts, by name.
    pub prompts: std::collections::BTreeMap<String, String>,
    pub rounds: Vec<Round>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Round {
    pub round: usize,
    pub prompt: String,
    pub ours_plain: Run,
    pub ours_lookup: Run,
    pub theirs_plain: Run,
    pub theirs_lookup: Run,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ours_draft: Option<Run>,
    /// llama-speculative-simple with the same draft model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theirs_draft: Option<Run>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub decode_tok_s: f64,
    pub drafted: u64,
    pub accepted: u64,
    /// The generated text.
    pub text: String,
}

pub const KIND: &str = "spec-compare";
pub const TABLES: &[&str] = &["lookup", "draft"];

pub fn header(table: &str) -> [String; 2] {
    let (ours, theirs) = match table {
        "draft" => ("draft", "llama-speculative-simple"),
        _ => ("lookup", "llama-lookup"),
    };
    [
        format!("| prompt | rounds | ours plain tok/s | ours {ours} tok/s | ours speed-up | ours accepted | llama.cpp plain tok/s | {theirs} tok/s | {theirs} speed-up | {theirs} accepted | same text as {theirs} |"),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
    ]
}

/// `96.6% of 88`: accepted of drafted, over every round.
fn accepted(runs: &[&Run]) -> String {
    let (a, d) = runs.iter().fold((0, 0), |(a, d), r| (a + r.accepted, d + r.drafted));
    if d == 0 {
        "none drafted".into()
    } else {
        format!("{:.1}% of {d}", 100.0 * a as f64 / d as f64)
    }
}

impl SpecCompare {
    /// A row per prompt, in the order first measured: medians over rounds, and speed-ups as
    /// the median of each round's own ratio. `lookup` compares prompt lookup, `draft` a draft
    /// model (rounds without draft-model runs are left out).
    pub fn rows(&self, table: &str) -> Vec<String> {
        let (ours, theirs): (fn(&Round) -> Option<&Run>, fn(&Round) -> Option<&Run>) = match table {
            "draft" => (|r| r.ours_draft.as_ref(), |r| r.theirs_draft.as_ref()),
            _ => (|r| Some(&r.ours_lookup), |r| Some(&r.theirs_lookup)),
        };
        let mut names: Vec<&str> = Vec::new();
        for r in &self.rounds {
            if !names.contains(&r.prompt.as_str()) {
                names.push(&r.prompt);
            }
        }
        names
            .into_iter()
            .filter_map(|name| {
                let rounds: Vec<(&Round, &Run, &Run)> = self.rounds.iter().filter(|r| r.prompt == name).filter_map(|r| Some((r, ours(r)?, theirs(r)?))).collect();
                if rounds.is_empty() {
                    return None;
                }
                let rate = |f: &dyn Fn(&(&Round, &Run, &Run)) -> f64| rounds.iter().map(f).collect::<Vec<_>>();
                let (op, ol) = (rate(&|r| r.0.ours_plain.decode_tok_s), rate(&|r| r.1.decode_tok_s));
                let (tp, tl) = (rate(&|r| r.0.theirs_plain.decode_tok_s), rate(&|r| r.2.decode_tok_s));
                // llama.cpp's tools count one token more than they were asked for: the same
                // text is one text a prefix of the other.
                let same = rounds
                    .iter()
                    .filter(|(_, o, t)| {
                        let (a, b) = (o.text.trim_end(), t.text.trim_end());
                        a.starts_with(b) || b.starts_with(a)
                    })
                    .count();
                Some(row(&[
                    name.to_string(),
                    rounds.len().to_string(),
                    fixed(median(&op), 1),
                    fixed(median(&ol), 1),
                    format!("{}x", fixed(paired_ratio(&ol, &op), 2)),
                    accepted(&rounds.iter().map(|r| r.1).collect::<Vec<_>>()),
                    fixed(median(&tp), 1),
                    fixed(median(&tl), 1),
                    format!("{}x", fixed(paired_ratio(&tl, &tp), 2)),
                    accepted(&rounds.iter().map(|r| r.2).collect::<Vec<_>>()),
                    format!("{same} of {}", rounds.len()),
                ]))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(decode_tok_s: f64, drafted: u64, accepted: u64, text: &str) -> Run {
        Run { decode_tok_s, drafted, accepted, text: text.into() }
    }

    #[test]
    fn speed_ups_are_per_round_and_acceptance_pools_the_rounds() {
        let round = |i: usize, prompt: &str, ours: f64, theirs: f64| Round {
            round: i,
            prompt: prompt.into(),
            ours_plain: run(40.0, 0, 0, "a"),
            ours_lookup: run(40.0 * ours, 100, 90, "b"),
            theirs_plain: run(45.0, 0, 0, "a"),
            theirs_lookup: run(45.0 * theirs, 50, 40, if i == 1 { "b and more" } else { "c" }),
            ours_draft: (prompt == "prose").then(|| run(20.0, 10, 5, "d")),
            theirs_draft: (prompt == "prose").then(|| run(30.0, 10, 8, "d")),
        };
        let f = SpecCompare {
            kind: KIND.into(),
            command: vec![],
            date: "2026-12-04T22:00:00+00:00".into(),
            hardware: serde_json::json!({}),
            threads: 2,
            tokens: 128,
            their_draft_max: 16,
            draft_model: Some("d.gguf".into()),
            prompts: Default::default(),
            rounds: vec![round(1, "copy", 2.5, 2.0), round(1, "prose", 1.0, 0.8), round(2, "copy", 2.7, 2.4), round(3, "copy", 2.6, 2.2)],
        };
        let rows = f.rows("lookup");
        assert_eq!(rows[0], "| copy | 3 | 40.0 | 104.0 | 2.60x | 90.0% of 300 | 45.0 | 99.0 | 2.20x | 80.0% of 150 | 1 of 3 |");
        assert_eq!(rows[1], "| prose | 1 | 40.0 | 40.0 | 1.00x | 90.0% of 100 | 45.0 | 36.0 | 0.80x | 80.0% of 50 | 1 of 1 |");
        let back: SpecCompare = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back.rows("lookup"), rows);
        // Only the prose rounds ran a draft model.
        assert_eq!(f.rows("draft"), vec!["| prose | 1 | 40.0 | 20.0 | 0.50x | 50.0% of 10 | 45.0 | 30.0 | 0.67x | 80.0% of 10 | 1 of 1 |"]);
    }
}
