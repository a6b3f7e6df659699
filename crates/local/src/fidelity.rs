//! A fidelity run of this build ([`lx_run::fidelity`]): the reference, and every backend
//! with every setting that changes what it computes, as workers of this binary start them.
//!
//! Per backend: llama.cpp's KV cache types (f16, q8_0, q4_0); candle's weight formats; MLX's
//! weights as loaded and re-quantized to 4 bits; then speculative decoding by prompt lookup
//! on each backend, and by a draft model on llama.cpp, each against the same backend decoding
//! without drafts, beside the rounding that computing a token among others brings (what it
//! generated, scored back in one pass); and the draft model itself, as a model, against the
//! reference.

use std::path::{Path, PathBuf};

use anyhow::Context;
use lx_engine::backend::KvTypes;
use lx_engine::speculative::{Drafter, Speculation};
use lx_run::fidelity::{text::Text, Compared, Entry, Job, Plan};
use lx_format::gguf::GgufFile;
use lx_format::tokenizer::Tokenizer;
use lx_results::studies::fidelity::FileId;

use crate::model::OpenModel;
use crate::BackendKind;

/// The backend the reference distribution is computed on: llama.cpp, with an f16 cache.
const REFERENCE: BackendKind = BackendKind::Llama;

/// What to measure besides the reference.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// Backends to measure (canonical names); every backend of the build when empty.
    pub backends: Vec<String>,
    /// A higher-precision file of the same model to measure against (default: the model).
    pub reference_model: Option<PathBuf>,
    /// The draft model for speculative decoding by a draft model (default: one made from
    /// the model, [`crate::draft::resolve`]).
    pub draft_model: Option<PathBuf>,
    /// Leave speculative decoding and the draft model out.
    pub no_drafts: bool,
    /// The text to score (default: the shipped one).
    pub text: Option<PathBuf>,
}

/// The job for `model`: its text tokenized, the reference checked to share its vocabulary,
/// and every entry of the build.
pub fn job(model: &OpenModel, asked: &Asked, plan: Plan, command: Vec<String>) -> anyhow::Result<Job> {
    let mut job = basis(model, asked.text.as_deref(), asked.reference_model.as_deref(), plan, command)?;
    let backends: Vec<String> = if asked.backends.is_empty() {
        crate::built()
    } else {
        asked.backends.clone()
    };
    for b in &backends {
        if let Some(why) = crate::unavailable(b) {
            anyhow::bail!("{b} cannot run in this build: {why}");
        }
    }
    let draft = if asked.no_drafts { None } else { Some(crate::draft::resolve(&model.path, asked.draft_model.as_deref())?) };
    job.entries = entries(&model.path, &backends, draft.as_deref());
    Ok(job)
}

/// A job for `model` with no entries yet: `text` (default: the shipped one) tokenized, and
/// the reference (llama.cpp with an f16 KV cache on `reference_model`, default the model's
/// own file) checked to share the model's vocabulary.
pub fn basis(model: &OpenModel, text: Option<&Path>, reference_model: Option<&Path>, plan: Plan, command: Vec<String>) -> anyhow::Result<Job> {
    let text = match text {
        Some(path) => Text::from_file(path).map_err(anyhow::Error::msg)?,
        None => Text::shipped(),
    };
    let reference_path = reference_model.map_or_else(|| model.path.clone(), Path::to_path_buf);
    if reference_path != model.path {
        same_vocabulary(&model.tokenizer, &reference_path)?;
    }
    let tokens = model.tokenizer.encode_with(&text.body, true, false);
    let bos = if model.tokenizer.add_bos() { model.tokenizer.bos() } else { None };
    let reference = entry(REFERENCE.name(), "KV f16 (the reference)", vec![], &reference_path);
    Ok(Job {
        model: file_id(&model.path, model.sha256.clone()),
        model_context: model.context_length,
        reference,
        reference_id: file_id(&reference_path, (reference_path == model.path).then(|| model.sha256.clone()).flatten()),
        text,
        tokens,
        bos,
        plan,
        entries: Vec::new(),
        control: Default::default(),
        out: None,
        command,
        hardware: serde_json::to_value(crate::hardware_report()).unwrap_or_default(),
    })
}

/// How a sweep or demo on `model` makes its fidelity run (`--fidelity`): the shipped text
/// against llama.cpp's f16 cache on the model's file, in chunks of the default context.
pub fn sweep_basis(model: std::sync::Arc<OpenModel>, command: Vec<String>) -> lx_run::sweep::FidelityBasis {
    std::sync::Arc::new(move |chunks| {
        let plan = Plan { chunks: Some(chunks), ..Plan::default() };
        basis(&model, None, None, plan, command.clone()).map_err(|e| format!("{e:#}"))
    })
}

/// Every entry for `backends` on `model`, a drafting entry after the entry it is compared with.
pub fn entries(model: &Path, backends: &[String], draft: Option<&Path>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for backend in backends {
        let plain = out.len();
        let Some(kind) = BackendKind::of(backend) else { continue };
        match kind {
            BackendKind::Llama => {
                for &t in kind.capabilities().kv_types {
                    let mut e = entry(backend, &format!("KV {}", t.name()), vec![], model);
                    e.kv = KvTypes { k: t, v: t };
                    out.push(e);
                }
            }
            BackendKind::Candle => {
                for w in lx_backend_candle::WeightFormat::ALL {
                    out.push(entry(backend, &format!("weights {}", w.name()), vec![("weights", w.name())], model));
                }
            }
            BackendKind::Mlx => {
                for (w, label) in [("as-loaded", "weights as loaded"), ("q4", "weights re-quantized to MLX 4-bit")] {
                    out.push(entry(backend, label, vec![("weights", w)], model));
                }
            }
        }
        let Some(draft) = draft else { continue };
        let base = out[plain].clone();
        out.push(Entry { setting: format!("{}, scored in one pass", base.setting), compared: Compared::OnePass, plain: Some(plain), ..base.clone() });
        let drafting = |drafter: Drafter, label: &str| {
            let mut e = Entry { setting: format!("{}, drafts: {label}", base.setting), compared: Compared::Drafting, plain: Some(plain), ..base.clone() };
            // Fixed drafts: drafting whenever a match is found, so that drafts are verified.
            e.speculation = Speculation { drafter, adaptive: false, ..Speculation::default() };
            e
        };
        out.push(drafting(Drafter::Lookup, "prompt lookup"));
        // A draft model's own figures, and drafting with it, are scored where the reference
        // runs: the other backends draft with it through the same scheduler.
        if kind == REFERENCE {
            let mut with_model = drafting(Drafter::Draft, "a draft model");
            with_model.draft_model = Some(draft.to_path_buf());
            out.push(with_model);
            let name = draft.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            out.push(entry(backend, &format!("the draft model {name}, as a model"), vec![], draft));
        }
    }
    out
}

/// An entry on `backend` with its own `settings` over this machine's tuned choice of the rest.
fn entry(backend: &str, setting: &str, settings: Vec<(&str, &str)>, model: &Path) -> Entry {
    Entry {
        backend: backend.into(),
        setting: setting.into(),
        spawn: crate::spawner(crate::profile::Use::Measure, 0),
        settings: settings.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        model: model.to_path_buf(),
        kv: KvTypes::default(),
        speculation: Speculation::default(),
        draft_model: None,
        compared: Compared::Reference,
        plain: None,
    }
}

fn file_id(path: &Path, sha256: Option<String>) -> FileId {
    FileId { name: path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned()), sha256 }
}

/// Refuses a reference whose vocabulary is not the model's: positions would not name the
/// same tokens.
fn same_vocabulary(ours: &Tokenizer, reference: &Path) -> anyhow::Result<()> {
    let gguf = GgufFile::open(reference).with_context(|| format!("cannot use {} as a reference model", reference.display()))?;
    let theirs = Tokenizer::from_gguf(&gguf).with_context(|| format!("cannot read the tokenizer of the reference model {}", reference.display()))?;
    if ours.vocab_size() != theirs.vocab_size() {
        anyhow::bail!(
            "the reference model {} has a vocabulary of {} tokens where the model has {}: a reference must be the same model (another precision of its file)",
            reference.display(),
            theirs.vocab_size(),
            ours.vocab_size()
        );
    }
    if let Some(id) = (0..ours.vocab_size() as u32).find(|&i| ours.token_bytes(i) != theirs.token_bytes(i)) {
        anyhow::bail!(
            "the reference model {} names token {id} {:?} where the model names it {:?}: a reference must be the same model (another precision of its file)",
            reference.display(),
            String::from_utf8_lossy(theirs.token_bytes(id)),
            String::from_utf8_lossy(ours.token_bytes(id))
        );
    }
    Ok(())
}
