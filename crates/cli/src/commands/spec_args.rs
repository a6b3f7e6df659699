//! Speculative decoding's options, the same for `lx sweep`, `lx generate` and `lx live`.

use clap::Args;
use lx_engine::speculative::{Drafter, Speculation};

fn drafters(s: &str) -> Result<Vec<Drafter>, String> {
    s.split(',').map(|d| d.trim().parse()).collect()
}

#[derive(Args, Debug, Clone)]
pub struct SpecArgs {
    /// Speculative decoding: none (plain decoding), lookup (drafts from n-gram matches in
    /// each request's own prompt and output) or draft (drafts from a draft model, see
    /// --spec-draft-model), verified in one pass; `lx sweep` takes several, comma-separated,
    /// as a dimension.
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
    /// llama-lookup does), instead of planning each pass's drafts from how each sequence's
    /// drafts fare and what passes of each size cost on this machine.
    #[arg(long)]
    pub spec_fixed: bool,
    /// Prompt lookup also matches what earlier requests on the same worker wrote (as
    /// llama.cpp's lookup cache does) where a request's own text has no match. A repeated
    /// prompt then drafts its answer for free, which flatters a benchmark that repeats its
    /// prompts; off by default, and every result that used it says "shared".
    #[arg(long)]
    pub spec_shared_cache: bool,
    /// The draft model for --spec draft: a .gguf that shares the model's vocabulary, loaded
    /// beside it on the same backend. Default: one made from the model itself (`lx models
    /// draft`), which every result names as such.
    #[arg(long)]
    pub spec_draft_model: Option<std::path::PathBuf>,
}

impl SpecArgs {
    /// The drafters asked for, in order.
    pub fn drafters(&self) -> Vec<Drafter> {
        self.spec.iter().flatten().copied().collect()
    }

    /// The draft model to load beside `model`: `Some` when a draft model drafts (made from
    /// the model on first use unless --spec-draft-model names one), checked to share its
    /// vocabulary.
    pub fn draft_model(&self, model: &std::path::Path) -> anyhow::Result<Option<std::path::PathBuf>> {
        if !self.drafters().contains(&Drafter::Draft) {
            anyhow::ensure!(self.spec_draft_model.is_none(), "--spec-draft-model is the draft model of --spec draft, which was not asked for");
            return Ok(None);
        }
        lx_local::draft::resolve(model, self.spec_draft_model.as_deref()).map(Some)
    }

    /// The settings, with the first drafter asked for.
    pub fn settings(&self) -> Speculation {
        Speculation {
            drafter: self.drafters().first().copied().unwrap_or_default(),
            ngram_max: self.spec_ngram_max,
            ngram_min: self.spec_ngram_min,
            draft_max: self.spec_draft_max,
            adaptive: !self.spec_fixed,
            shared_cache: self.spec_shared_cache,
        }
    }
}
