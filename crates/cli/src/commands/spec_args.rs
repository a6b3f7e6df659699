//! Speculative decoding's options, the same for `lx sweep`, `lx generate` and `lx live`.

use clap::Args;
use lx_core::speculative::{Drafter, Speculation};

fn drafters(s: &str) -> Result<Vec<Drafter>, String> {
    s.split(',').map(|d| d.trim().parse()).collect()
}

#[derive(Args, Debug, Clone)]
pub struct SpecArgs {
    /// Speculative decoding: none (plain decoding) or lookup (drafts from n-gram matches in
    /// each request's own prompt and output, verified in one pass); `lx sweep` takes both,
    /// comma-separated, as a dimension.
    #[arg(long, default_value = "none", value_parser = drafters)]
    pub spec: Vec<Vec<Drafter>>,
    /// Longest n-gram the lookup drafter matches (tried first).
    #[arg(long, default_value_t = Speculation::default().ngram_max)]
    pub spec_ngram_max: u32,
    /// Shortest n-gram the lookup drafter matches.
    #[arg(long, default_value_t = Speculation::default().ngram_min)]
    pub spec_ngram_min: u32,
    /// Most tokens drafted for one sequence in one pass.
    #[arg(long, default_value_t = Speculation::default().draft_max)]
    pub spec_draft_max: u32,
    /// Always draft --spec-draft-max tokens when a match is found (as llama.cpp's
    /// llama-lookup does), instead of adapting each sequence's draft length to how its
    /// drafts fare.
    #[arg(long)]
    pub spec_fixed: bool,
}

impl SpecArgs {
    /// The drafters asked for, in order.
    pub fn drafters(&self) -> Vec<Drafter> {
        self.spec.iter().flatten().copied().collect()
    }

    /// The settings, with the first drafter asked for.
    pub fn settings(&self) -> Speculation {
        Speculation {
            drafter: self.drafters().first().copied().unwrap_or_default(),
            ngram_max: self.spec_ngram_max,
            ngram_min: self.spec_ngram_min,
            draft_max: self.spec_draft_max,
            adaptive: !self.spec_fixed,
        }
    }
}
