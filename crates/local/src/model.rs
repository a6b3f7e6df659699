//! Open a model as the coordinator needs it: a local file, its facts and its tokenizer.

use std::path::PathBuf;

use anyhow::Context;
use lx_format::gguf::{GgufFile, ModelFacts};
use lx_run::live::{LiveModel, LiveSettings};
use lx_client::traffic::RunControl;
use lx_results::results::{ModelRecord, RunFile};
use lx_engine::stamp::FileStamp;
use lx_run::sweep::SweepContext;
use lx_client::target::Spawner;
use lx_format::tokenizer::Tokenizer;
use lx_format::workload::PromptBuilder;

/// A model ready to measure.
pub struct OpenModel {
    pub path: PathBuf,
    pub facts: ModelFacts,
    pub sha256: Option<String>,
    pub tokenizer: Tokenizer,
    pub context_length: usize,
    /// The file as it was opened: runs stop measuring once it is replaced or rewritten.
    pub stamp: FileStamp,
}

impl OpenModel {
    /// Resolve `spec` (a catalog name, a path, `hf:...` or `synth:NAME`), fetching a catalog model if it is
    /// missing, then read its header and tokenizer. Every failure says what to do.
    pub fn open(spec: &str, progress: &mut dyn FnMut(lx_models::Progress)) -> anyhow::Result<Self> {
        let (path, sha256) = match crate::synth::resolve_spec(spec, progress) {
            Some(made) => (made?, None),
            None => {
                let parsed = lx_models::ModelSpec::parse(spec)?;
                let resolved = lx_models::resolve(&parsed, &lx_models::Options::default(), progress)?;
                (resolved.path, resolved.sha256)
            }
        };
        let stamp = FileStamp::of(&path).with_context(|| format!("cannot use {} as a model", path.display()))?;
        let gguf = GgufFile::open(&path).with_context(|| format!("cannot use {} as a model", path.display()))?;
        let facts = ModelFacts::from_gguf(&gguf).with_context(|| format!("cannot use {} as a model", path.display()))?;
        let tokenizer = Tokenizer::from_gguf(&gguf).with_context(|| format!("cannot read the tokenizer of {}", path.display()))?;
        let context_length = facts.context_length.map_or(lx_engine::defaults::CONTEXT_FALLBACK_TOKENS, |c| c as usize);
        Ok(Self { path, facts, sha256, tokenizer, context_length, stamp })
    }

    pub fn record(&self) -> ModelRecord {
        ModelRecord { facts: self.facts.clone(), sha256: self.sha256.clone() }
    }

    /// What a sweep of this model needs: `lx sweep`, `lx demo`, `lx tune` and the app's sweeps
    /// differ only in their prompts, how they start workers, where the run file goes and how
    /// they stop.
    pub fn sweep_context<'a>(&self, prompts: &'a PromptBuilder, spawn: Spawner, out: Option<PathBuf>, control: RunControl) -> SweepContext<'a> {
        SweepContext {
            model_path: self.path.clone(),
            model_stamp: self.stamp.clone(),
            prompts,
            stop_tokens: self.tokenizer.eos_tokens().to_vec(),
            spawn,
            out,
            control,
            fidelity: None,
        }
    }

    /// What live mode needs of this model: exact-length prompts and each token's bytes for
    /// the preview (`lx live` and the app's live mode alike).
    /// What a live session needs of the model; `draft_model` is the draft for `--spec draft`
    /// (default: one made from the model, [`crate::draft::resolve`]).
    pub fn live_model(&self, draft_model: Option<std::path::PathBuf>) -> LiveModel {
        let prompts = PromptBuilder::new(&self.tokenizer);
        let tokenizer = self.tokenizer.clone();
        let path = self.path.clone();
        let cost = lx_format::gguf::GgufFile::open(&self.path).ok().and_then(|g| lx_machine::roofline::ModelCost::from_gguf(&g).ok());
        LiveModel {
            model_path: self.path.clone(),
            context_length: self.context_length,
            prompt: Box::new(move |n, i| prompts.prompt(n as usize, i as u64)),
            token_bytes: Box::new(move |t| tokenizer.token_bytes(t).to_vec()),
            draft_model: std::sync::Arc::new(move || crate::draft::resolve(&path, draft_model.as_deref()).map_err(|e| format!("{e:#}"))),
            kv_bytes_f16: Box::new(move |ctx| cost.as_ref().map(|c| c.kv_bytes_at(ctx as u64))),
        }
    }

    /// The run file a live session of this model is saved as (one point per setting), with
    /// this machine's report.
    pub fn live_run_file(&self, command: Vec<String>, settings: &LiveSettings) -> RunFile {
        settings.run_file(command, crate::hardware_report(), self.record())
    }
}

/// A file's sha256 (hex), read through once: for a model opened by path, whose content no
/// catalog entry vouches for (`lx bench` names a model by it).
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
