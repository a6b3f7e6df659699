//! Workload presets: a named workload (its prompt and output lengths, arrivals, shared prefix)
//! and the objectives that decide whether it is served well. Each built-in preset is a TOML
//! file in `crates/decide/presets/` that says where its numbers come from; a user's own
//! file in the same format is read the same way, and a bad one is refused with the line and
//! the reason.

use serde::{Deserialize, Deserializer};

use lx_format::workload::PromptText;
use lx_results::decision::{Bound, Objectives, PresetRecord};

use lx_run::sweep::{Length, SweepPlan};

/// The built-in presets, by name: TTFT-bound, throughput-bound, then mixed.
pub const BUILT_IN: [(&str, &str); 7] = [
    ("code-completion", include_str!("../presets/code-completion.toml")),
    ("chat", include_str!("../presets/chat.toml")),
    ("voice-agent", include_str!("../presets/voice-agent.toml")),
    ("rag", include_str!("../presets/rag.toml")),
    ("batch-enrichment", include_str!("../presets/batch-enrichment.toml")),
    ("overnight-eval", include_str!("../presets/overnight-eval.toml")),
    ("agent-pipeline", include_str!("../presets/agent-pipeline.toml")),
];

/// A workload and its objectives.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: String,
    pub summary: String,
    pub bound: Bound,
    /// Prompt lengths, the shared prefix included.
    pub prompt_tokens: Length,
    /// Every prompt starts with the same this many tokens.
    pub shared_prefix: u32,
    /// Compute the shared prefix once and copy it (our scheduler; a server caches as it does).
    pub prefix_cache: bool,
    pub prompts: PromptText,
    pub max_tokens: Length,
    /// Open-loop arrival rate of a sweep with the preset, requests/s; a capacity search starts
    /// from one request's measured service time instead, and from this only where it measured
    /// none.
    pub start_rate: f64,
    /// Sequences served at once in open loop (the scheduler's slots).
    pub slots: usize,
    pub objectives: Objectives,
    /// A batch job's size and deadline (throughput-bound presets).
    pub job: Option<Job>,
    /// `built in`, or the file it was read from.
    pub source: String,
}

/// N requests that must finish within T.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    pub requests: usize,
    pub deadline_s: f64,
}

/// Why a preset could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("no preset named '{0}' (built in: {names}); or give a preset file's path", names = BUILT_IN.map(|(n, _)| n).join(", "))]
    Unknown(String),
    #[error("cannot read the preset file {path}: {source}")]
    Unreadable { path: String, source: std::io::Error },
    /// The file's line and the reason, as the TOML reader or our checks put them.
    #[error("preset {source_name}: {why}")]
    Invalid { source_name: String, why: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    summary: String,
    bound: Bound,
    prompt: Prompt,
    output: Output,
    arrivals: Arrivals,
    objectives: ObjectivesFile,
    job: Option<JobFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Prompt {
    #[serde(deserialize_with = "length")]
    tokens: Length,
    #[serde(default)]
    shared_prefix: u32,
    #[serde(default)]
    prefix_cache: bool,
    #[serde(default)]
    text: PromptText,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Output {
    #[serde(deserialize_with = "length")]
    tokens: Length,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arrivals {
    #[serde(deserialize_with = "positive")]
    start_rate: f64,
    #[serde(deserialize_with = "at_least_one")]
    slots: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectivesFile {
    #[serde(default, deserialize_with = "some_positive")]
    ttft_ms: Option<f64>,
    #[serde(default, deserialize_with = "some_positive")]
    decode_tps: Option<f64>,
    #[serde(deserialize_with = "share")]
    attainment: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    #[serde(deserialize_with = "at_least_one")]
    requests: usize,
    #[serde(deserialize_with = "duration")]
    deadline: f64,
}

/// `64`, or `"64..512"` (drawn uniformly per request).
fn length<'de, D: Deserializer<'de>>(d: D) -> Result<Length, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Fixed(u32),
        Text(String),
    }
    let l = match Raw::deserialize(d)? {
        Raw::Fixed(n) => Length::new(None, n),
        Raw::Text(t) => t.parse::<Length>(),
    };
    l.map_err(serde::de::Error::custom)
}

fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x.is_finite() && x > 0.0 { Ok(x) } else { Err(serde::de::Error::custom(format!("{x}: must be a positive number"))) }
}

fn some_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    positive(d).map(Some)
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let n = usize::deserialize(d)?;
    if n >= 1 { Ok(n) } else { Err(serde::de::Error::custom("must be at least 1")) }
}

/// A share of requests: more than 0, at most 1.
fn share<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x > 0.0 && x <= 1.0 { Ok(x) } else { Err(serde::de::Error::custom(format!("{x}: a share of requests, more than 0 and at most 1 (0.95 for the 95th percentile)"))) }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let t = String::deserialize(d)?;
    parse_duration(&t).map_err(serde::de::Error::custom)
}

/// Seconds in `90`, `90s`, `5m`, `1h30m`, `2.5h`.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    let bad = || format!("'{text}': a duration is seconds, or a number with s, m or h (90s, 5m, 1h30m)");
    let t = text.trim();
    if let Ok(s) = t.parse::<f64>() {
        return if s.is_finite() && s > 0.0 { Ok(s) } else { Err(bad()) };
    }
    let (mut total, mut number) = (0.0, String::new());
    for c in t.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'h' | 'm' | 's' => {
                let n: f64 = number.parse().map_err(|_| bad())?;
                total += n * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                number.clear();
            }
            ' ' => {}
            _ => return Err(bad()),
        }
    }
    if !number.is_empty() || !(total.is_finite() && total > 0.0) {
        return Err(bad());
    }
    Ok(total)
}

impl Preset {
    /// A built-in preset by name, or a preset file by path (anything with a `/` or ending
    /// in `.toml`).
    pub fn load(name_or_path: &str) -> Result<Preset, PresetError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Preset::parse(text, "built in");
        }
        if name_or_path.contains(std::path::MAIN_SEPARATOR) || name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let text = std::fs::read_to_string(name_or_path).map_err(|source| PresetError::Unreadable { path: name_or_path.into(), source })?;
            return Preset::parse(&text, name_or_path);
        }
        Err(PresetError::Unknown(name_or_path.into()))
    }

    /// Reads a preset file's text; `source` names it in messages and in results.
    pub fn parse(text: &str, source: &str) -> Result<Preset, PresetError> {
        let invalid = |why: String| PresetError::Invalid { source_name: source.to_string(), why };
        let f: File = toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_string()))?;
        // Checks across fields have no single value to point at: name the line of the key.
        let at = |key: &str| line_of(text, key).map(|n| format!("line {n}: ")).unwrap_or_default();
        if f.prompt.shared_prefix >= f.prompt.tokens.shortest() {
            return Err(invalid(format!(
                "{}shared_prefix {} must be shorter than the shortest prompt ({} tokens): prompt tokens count the prefix",
                at("shared_prefix"),
                f.prompt.shared_prefix,
                f.prompt.tokens.shortest()
            )));
        }
        if f.prompt.prefix_cache && f.prompt.shared_prefix == 0 {
            return Err(invalid(format!("{}prefix_cache needs a shared_prefix to cache", at("prefix_cache"))));
        }
        if f.bound == Bound::Throughput && f.job.is_none() {
            return Err(invalid(format!("{}a throughput-bound preset needs a [job] with requests and a deadline", at("bound"))));
        }
        if f.bound != Bound::Throughput && f.objectives.ttft_ms.is_none() && f.objectives.decode_tps.is_none() {
            return Err(invalid(format!("{}a {}-bound preset needs ttft_ms or decode_tps", at("[objectives]"), f.bound.name())));
        }
        Ok(Preset {
            name: f.name,
            summary: f.summary,
            bound: f.bound,
            prompt_tokens: f.prompt.tokens,
            shared_prefix: f.prompt.shared_prefix,
            prefix_cache: f.prompt.prefix_cache,
            prompts: f.prompt.text,
            max_tokens: f.output.tokens,
            start_rate: f.arrivals.start_rate,
            slots: f.arrivals.slots,
            objectives: Objectives { ttft_ms: f.objectives.ttft_ms, decode_tps: f.objectives.decode_tps, attainment: f.objectives.attainment },
            job: f.job.map(|j| Job { requests: j.requests, deadline_s: j.deadline }),
            source: source.to_string(),
        })
    }

    /// What a run made from it records.
    pub fn record(&self) -> PresetRecord {
        PresetRecord { name: self.name.clone(), summary: self.summary.clone(), bound: self.bound, objectives: self.objectives, source: self.source.clone() }
    }

    /// The workload in a sweep plan: lengths, prefix, prompts and objectives; open-loop
    /// arrivals at its start rate on its slots unless `keep_arrivals` (the caller gave its own).
    pub fn apply(&self, plan: &mut SweepPlan, keep_arrivals: bool) {
        plan.prompt_tokens = vec![self.prompt_tokens];
        plan.max_tokens = vec![self.max_tokens];
        plan.prefix_tokens = self.shared_prefix;
        plan.prefix_cache = vec![self.prefix_cache];
        plan.prompts = self.prompts;
        plan.slo = self.objectives.slo();
        if !keep_arrivals {
            plan.rates = vec![self.start_rate];
            plan.concurrency = vec![self.slots];
        }
    }
}

/// The 1-based line where `key` is first set (or, for `[table]`, opened).
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines().position(|l| {
        let l = l.trim_start();
        if key.starts_with('[') { l.starts_with(key) } else { l.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')) }
    }).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_preset_reads_and_says_where_its_numbers_come_from() {
        for (name, text) in BUILT_IN {
            let p = Preset::parse(text, "built in").unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.name, name);
            assert!(text.contains("# Where the numbers come from:"), "{name} has no sources");
            assert_eq!(p.job.is_some(), p.bound == Bound::Throughput, "{name}: a job exactly when throughput-bound");
            let mut plan = SweepPlan::default();
            p.apply(&mut plan, false);
            assert_eq!(plan.validate(Some(32768)), Ok(()), "{name}'s workload is a valid sweep");
        }
        let bounds: Vec<Bound> = BUILT_IN.iter().map(|(_, t)| Preset::parse(t, "").unwrap().bound).collect();
        assert_eq!(bounds, [Bound::Ttft, Bound::Ttft, Bound::Ttft, Bound::Throughput, Bound::Throughput, Bound::Throughput, Bound::Mixed]);
        let chat = Preset::load("chat").unwrap();
        assert_eq!((chat.prompt_tokens, chat.objectives.ttft_ms, chat.objectives.attainment), (Length { from: Some(64), to: 512 }, Some(2000.0), 0.95));
        assert_eq!(Preset::load("agent-pipeline").unwrap().shared_prefix, 512);
        assert_eq!(Preset::load("rag").unwrap().job, Some(Job { requests: 500, deadline_s: 3600.0 }));
    }

    /// A bad file is refused with the line that is wrong and why.
    #[test]
    fn a_bad_preset_is_refused_with_its_line_and_the_reason() {
        let chat = BUILT_IN[1].1;
        let refused = |text: &str, needles: &[&str]| {
            let e = Preset::parse(text, "mine.toml").unwrap_err().to_string();
            assert!(e.starts_with("preset mine.toml: "), "{e}");
            for n in needles {
                assert!(e.contains(n), "'{e}' lacks '{n}'");
            }
        };
        let line = |key: &str| line_of(chat, key).unwrap().to_string();
        refused(&chat.replace("attainment = 0.95", "attainment = 95"), &["line ", &line("attainment"), "a share of requests"]);
        refused(&chat.replace("tokens = \"64..512\"", "tokens = \"512..64\""), &[&format!("line {}", line("tokens")), "512..64"]);
        refused(&chat.replace("slots = 8", "slot = 8"), &["unknown field", "slot"]);
        refused(&chat.replace("start_rate = 0.5", "start_rate = -1"), &["must be a positive number"]);
        refused(&chat.replace("bound = \"ttft\"", "bound = \"fast\""), &["fast"]);
        refused(&chat.replace("[output]", "[outputs]"), &["outputs"]);
        refused(&chat.replace("tokens = \"64..512\"", "tokens = \"64..512\"\nshared_prefix = 64"), &["line 21: shared_prefix 64 must be shorter"]);
        refused(&chat.replace("bound = \"ttft\"", "bound = \"throughput\""), &["needs a [job]"]);
        refused("name = \"x\"\nsummary = ", &["line 2"]);
        assert!(matches!(Preset::load("chatt"), Err(PresetError::Unknown(_))));
        assert!(Preset::load("chatt").unwrap_err().to_string().contains("chat, voice-agent"));
        assert!(matches!(Preset::load("/no/such/preset.toml"), Err(PresetError::Unreadable { .. })));
    }

    #[test]
    fn durations_read_in_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("90"), Ok(90.0));
        assert_eq!(parse_duration("5m"), Ok(300.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("2.5h"), Ok(9000.0));
        assert_eq!(parse_duration("45s"), Ok(45.0));
        for bad in ["", "5x", "m", "-3", "0", "1h30"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
