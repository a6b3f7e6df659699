//! The fixed suites `lx bench` runs: the same shapes, requests and repetitions on every
//! machine, so two files compare by design.

use serde::{Deserialize, Serialize};

/// Which suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuiteName {
    /// About two minutes for llama.cpp and candle on a 2-core laptop-class CPU.
    Quick,
    /// Longer prompts, more clients, more requests: about ten minutes a backend there.
    Full,
}

impl std::fmt::Display for SuiteName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SuiteName::Quick => "quick",
            SuiteName::Full => "full",
        })
    }
}

/// One workload shape: what each client sends and how many clients send at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Shape {
    pub name: String,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub clients: usize,
    /// Measured requests per repetition.
    pub requests: usize,
    /// Unmeasured requests before each repetition.
    pub warmup: usize,
}

/// A suite as it ran (a file keeps it whole, so a reader never needs this build's tables).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    pub name: SuiteName,
    pub shapes: Vec<Shape>,
    /// Every shape measured this many times, backend by backend; the score's interval comes
    /// from their spread.
    pub repetitions: usize,
    /// The most one backend may take, seconds: a backend still running then is stopped, and
    /// keeps the repetitions it finished.
    pub bound_s: f64,
}

/// The file the suites' bounds are set for: the default model, Gemma 3 270M Q4_K_M.
const BOUND_MODEL_BYTES: f64 = 253_113_024.0;

fn shape(name: &str, prompt_tokens: u32, max_tokens: u32, clients: usize, requests: usize, warmup: usize) -> Shape {
    Shape { name: name.into(), prompt_tokens, max_tokens, clients, requests, warmup }
}

impl Suite {
    pub fn of(name: SuiteName) -> Suite {
        match name {
            // A short chat turn, one document to read, and four people chatting at once.
            SuiteName::Quick => Suite {
                name,
                shapes: vec![shape("chat", 128, 32, 1, 3, 1), shape("document", 1024, 8, 1, 2, 1), shape("4 chats", 128, 32, 4, 4, 4)],
                repetitions: 3,
                bound_s: 90.0,
            },
            SuiteName::Full => Suite {
                name,
                shapes: vec![
                    shape("chat", 128, 64, 1, 6, 1),
                    shape("document", 2048, 16, 1, 3, 1),
                    shape("long document", 4096, 16, 1, 2, 1),
                    shape("4 chats", 128, 64, 4, 8, 4),
                    shape("8 chats", 256, 128, 8, 8, 8),
                ],
                repetitions: 3,
                bound_s: 900.0,
            },
        }
    }

    /// `name` for a model file of `file_bytes`: the suites' bounds are set for the default
    /// model, and a larger model reads that many more bytes a token, so its bound grows in
    /// proportion (a smaller one keeps the suite's).
    pub fn for_model(name: SuiteName, file_bytes: u64) -> Suite {
        let mut s = Suite::of(name);
        s.bound_s *= (file_bytes as f64 / BOUND_MODEL_BYTES).max(1.0);
        s
    }

    /// The shape a point of `prompt_tokens`, `max_tokens` and `clients` measured.
    pub fn shape_of(&self, prompt_tokens: u32, max_tokens: u32, clients: usize) -> Option<&Shape> {
        self.shapes.iter().find(|s| (s.prompt_tokens, s.max_tokens, s.clients) == (prompt_tokens, max_tokens, clients))
    }

    /// The longest prompt and output together, which a model's context must hold.
    pub fn longest(&self) -> u32 {
        self.shapes.iter().map(|s| s.prompt_tokens + s.max_tokens).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_names_each_shape_once_and_runs_its_clients_at_least_once() {
        for name in [SuiteName::Quick, SuiteName::Full] {
            let s = Suite::of(name);
            assert!(s.repetitions >= 2, "an interval needs two repetitions");
            for (i, a) in s.shapes.iter().enumerate() {
                assert!(a.requests >= a.clients, "{}: every client sends at least once", a.name);
                assert_eq!(s.shape_of(a.prompt_tokens, a.max_tokens, a.clients), Some(a), "{}: its lengths find it", a.name);
                assert!(s.shapes[i + 1..].iter().all(|b| b.name != a.name));
            }
            assert!(s.shapes.iter().any(|x| x.clients == 1) && s.shapes.iter().any(|x| x.clients > 1), "one client and several");
        }
        assert!(Suite::of(SuiteName::Full).longest() > Suite::of(SuiteName::Quick).longest());
    }

    #[test]
    fn a_larger_model_gets_a_bound_in_proportion_and_a_smaller_one_the_suites() {
        let quick = Suite::of(SuiteName::Quick);
        assert_eq!(Suite::for_model(SuiteName::Quick, 98_362_432), quick);
        let large = Suite::for_model(SuiteName::Quick, 4 * 253_113_024);
        assert_eq!(large.bound_s, 4.0 * quick.bound_s);
        assert_eq!(Suite { bound_s: quick.bound_s, ..large }, quick, "only the bound changes");
    }
}
