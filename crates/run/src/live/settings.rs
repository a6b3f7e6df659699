//! What a live session runs ([`LiveSettings`]), the unit its figures are kept by
//! ([`SettingKey`]), and what a worker is loaded for ([`Capacity`]): the checks on a
//! change, and the sizing that decides whether it needs a reload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use lx_engine::backend::{KvTypes, LoadSpec};
use lx_engine::scheduler::{Policy, SchedulerConfig};
use lx_engine::invalid::Invalid;
use lx_engine::speculative::{Drafter, Speculation};
use lx_results::results::PointResult;

/// What live mode runs. Every field can change while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct LiveSettings {
    /// Backends to measure, in turn (canonical names: `llama`, `candle`, `mlx`).
    pub backends: Vec<String>,
    /// Prompt length of each request, in tokens (BOS included).
    pub prompt_tokens: u32,
    /// Clients kept busy (closed loop).
    pub concurrency: usize,
    /// Output tokens per request (EOS ignored).
    pub max_tokens: u32,
    /// Scheduling policy.
    pub policy: Policy,
    /// `chunked` policy: prompt tokens per pass.
    pub chunk_tokens: usize,
    /// Compute threads; 0 means physical cores. Changing it reloads the workers.
    pub threads: usize,
    /// Layers offloaded to a GPU; `None` means all. Changing it reloads the workers.
    pub gpu_layers: Option<u32>,
    /// With several backends: seconds each one is measured before the next takes over.
    pub rotate_after_s: f64,
    /// Least time between two event batches, in ms.
    pub batch_ms: u64,
    /// A worker silent this long with requests in flight is declared hung and killed, in s.
    pub hang_timeout_s: f64,
    /// Speculative decoding in our scheduler (servers decode as they were started).
    pub spec: Speculation,
    /// The KV cache's types (llama.cpp only). Changing them reloads the workers.
    pub kv: KvTypes,
}

impl Default for LiveSettings {
    fn default() -> Self {
        Self {
            backends: vec![lx_engine::kind::BackendKind::DEFAULT.name().into()],
            prompt_tokens: lx_engine::defaults::LIVE_PROMPT_TOKENS,
            concurrency: 1,
            max_tokens: lx_engine::defaults::LIVE_MAX_TOKENS,
            policy: Policy::Continuous,
            chunk_tokens: lx_engine::defaults::CHUNK_TOKENS,
            threads: 0,
            gpu_layers: None,
            rotate_after_s: lx_engine::defaults::LIVE_ROTATE_AFTER_S,
            batch_ms: lx_engine::defaults::LIVE_BATCH_MS,
            hang_timeout_s: lx_engine::defaults::HANG_TIMEOUT_S as f64,
            spec: Speculation::default(),
            kv: KvTypes::default(),
        }
    }
}

/// Live settings checked once, where they enter ([`LiveSettings::check`]): a session starts
/// with these and takes them as updates, so nothing inside checks them again.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    settings: LiveSettings,
    /// The context they were checked against.
    model_context: usize,
}

impl Checked {
    pub fn settings(&self) -> &LiveSettings {
        &self.settings
    }

    pub fn into_settings(self) -> LiveSettings {
        self.settings
    }

    /// These settings for a model of `model_context` tokens: as they are when that is the
    /// context they were checked against, else checked against it.
    pub fn for_context(self, model_context: usize) -> Result<Checked, Invalid> {
        if self.model_context == model_context {
            Ok(self)
        } else {
            self.settings.check(model_context)
        }
    }
}

/// Most concurrent clients live mode accepts.
pub const MAX_CONCURRENCY: usize = lx_engine::defaults::LIVE_MAX_CONCURRENCY;

impl LiveSettings {
    /// The run file a session with these settings is saved as: the settings under
    /// `{"mode": "live", "live": ...}`.
    pub fn run_file(&self, command: Vec<String>, hardware: lx_machine::hardware::HardwareReport, model: lx_results::results::ModelRecord) -> lx_results::results::RunFile {
        lx_results::results::RunFile::new(command, hardware, model, serde_json::json!({ "mode": "live", "live": self }))
    }

    /// The settings, checked against a model's context: what a session starts with and takes
    /// as an update. The message names the field.
    pub fn check(self, model_context: usize) -> Result<Checked, Invalid> {
        self.validate(model_context)?;
        Ok(Checked { settings: self, model_context })
    }

    /// Check the settings against the model's context, keeping nothing: a front end's early
    /// check (before a model is loaded, with `usize::MAX`). The message names the field.
    pub fn validate(&self, model_context: usize) -> Result<(), Invalid> {
        if self.backends.is_empty() {
            return Err(Invalid::new("backends", "select at least one backend"));
        }
        for b in &self.backends {
            self.kv.for_backend(b).map_err(|why| Invalid::new("kv", why))?;
        }
        if self.prompt_tokens == 0 {
            return Err(Invalid::new("prompt_tokens", "prompt tokens must be at least 1 (the BOS token counts)"));
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(Invalid::new("concurrency", format!("concurrency must be between 1 and {MAX_CONCURRENCY}")));
        }
        if self.max_tokens == 0 {
            return Err(Invalid::new("max_tokens", "output tokens must be at least 1"));
        }
        if self.chunk_tokens == 0 {
            return Err(Invalid::new("chunk_tokens", "the prefill chunk must be at least 1 token"));
        }
        if self.rotate_after_s.is_nan() || self.rotate_after_s <= 0.0 {
            return Err(Invalid::new("rotate_after_s", "the rotation period must be positive"));
        }
        if self.hang_timeout_s.is_nan() || self.hang_timeout_s <= 0.0 {
            return Err(Invalid::new("hang_timeout_s", "the hang timeout must be positive"));
        }
        self.spec.validate()?;
        let need = self.prompt_tokens as usize + self.max_tokens as usize;
        if need > model_context {
            return Err(Invalid::new("prompt_tokens", format!("prompt tokens + output tokens = {need} exceeds the model's context of {model_context} tokens")));
        }
        Ok(())
    }

    /// The key of `backend`'s figures under these settings.
    pub(super) fn key(&self, backend: &str) -> SettingKey {
        let (drafter, spec_fixed, shared_cache) = SettingKey::decoding(&self.spec);
        SettingKey {
            backend: backend.to_string(),
            policy: self.policy,
            prompt_tokens: self.prompt_tokens,
            concurrency: self.concurrency,
            max_tokens: self.max_tokens,
            chunk_tokens: self.chunk_tokens,
            drafter,
            spec_fixed,
            shared_cache,
            kv: self.kv,
        }
    }

    /// Each backend's key under these settings, as [`SettingKey::id`]s: what the UI looks
    /// the current summary up by.
    pub(super) fn key_ids(&self) -> BTreeMap<String, String> {
        self.backends.iter().map(|b| (b.clone(), self.key(b).id())).collect()
    }

    /// Tokens per pass the scheduler may use: room for every client's whole prompt, as a
    /// sweep point with the same setting gets (see `SweepPlan::load_spec_for`), within what the
    /// loaded context allows.
    fn step_budget(&self, capacity: &Capacity) -> usize {
        lx_engine::scheduler::batch_tokens_for(self.prompt_tokens as usize, self.concurrency).min(capacity.max_batch_tokens)
    }

    pub(super) fn scheduler(&self, capacity: &Capacity) -> SchedulerConfig {
        let mut s = SchedulerConfig::new(self.policy, self.concurrency, self.step_budget(capacity));
        s.chunk_tokens = self.chunk_tokens;
        s.spec = self.spec;
        s
    }
}

/// One setting of one backend: the unit summaries and curves are kept by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct SettingKey {
    /// Backend name.
    pub backend: String,
    /// Scheduling policy.
    pub policy: Policy,
    /// Prompt tokens per request.
    pub prompt_tokens: u32,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Output tokens per request.
    pub max_tokens: u32,
    /// Prefill chunk (matters for `chunked` only).
    pub chunk_tokens: usize,
    /// Speculative decoding's drafter (`none`: plain decoding).
    #[serde(default)]
    pub drafter: Drafter,
    /// Drafts of the most tokens every pass, instead of planned ones.
    #[serde(default)]
    pub spec_fixed: bool,
    /// Prompt lookup also matched earlier requests' text.
    #[serde(default)]
    pub shared_cache: bool,
    /// The KV cache's types.
    #[serde(default)]
    pub kv: KvTypes,
}

impl SettingKey {
    /// The key as one string, equal for equal keys: what the UI keeps summaries and sweep
    /// points by. It receives it beside them, so it never builds a key itself.
    pub fn id(&self) -> String {
        serde_json::to_string(self).expect("a setting key is plain data")
    }

    /// The setting a sweep point measured, keyed as live mode keys its own, so that a
    /// point and a live summary of the same setting meet on one curve. A run file keeps
    /// the prefill chunk per run, not per point: `chunk_tokens` is the sweep's.
    pub fn of_point(p: &PointResult, chunk_tokens: usize) -> SettingKey {
        let (drafter, spec_fixed, shared_cache) = SettingKey::decoding(&p.traffic.spec);
        SettingKey {
            backend: p.backend.clone(),
            policy: p.policy,
            prompt_tokens: p.prompt_tokens,
            concurrency: p.concurrency,
            max_tokens: p.max_tokens,
            chunk_tokens,
            drafter,
            spec_fixed,
            shared_cache,
            kv: p.traffic.kv,
        }
    }

    /// How a key tells speculative decoding's settings apart: the drafter, whether it
    /// drafts a fixed length, and whether prompt lookup reads earlier requests too.
    fn decoding(spec: &Speculation) -> (Drafter, bool, bool) {
        (spec.drafter, spec.is_on() && !spec.adaptive, spec.drafter == Drafter::Lookup && spec.shared_cache)
    }
}

/// What a worker was loaded for: a setting fits when it needs no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Capacity {
    /// Concurrent sequences (KV-cache lanes).
    pub slots: usize,
    /// Context of each sequence, in tokens.
    pub ctx_per_slot: usize,
    /// Most tokens one pass may carry.
    pub max_batch_tokens: usize,
    /// Compute threads asked for (0: physical cores).
    pub threads: usize,
    /// GPU layers asked for.
    pub gpu_layers: Option<u32>,
    /// A draft model is loaded beside the model (speculative decoding's `draft` drafter).
    #[serde(default)]
    pub draft: bool,
    /// The KV cache's types.
    #[serde(default)]
    pub kv: KvTypes,
    /// Two workers, one prefilling and one decoding (the `disaggregated` policy).
    #[serde(default)]
    pub disaggregated: bool,
    /// What the model's KV cache takes at this capacity and these types (the draft model's
    /// not counted), when the model's shape is known: set by the session as it loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_bytes: Option<u64>,
}

impl Capacity {
    /// The capacity to load for `s`, growing `current` (if any) in powers of two so that
    /// sliding a control back and forth does not reload the model each time.
    pub fn for_settings(s: &LiveSettings, current: Option<&Capacity>, model_context: usize) -> Capacity {
        let need_ctx = s.prompt_tokens as usize + s.max_tokens as usize;
        let mut slots = s.concurrency.next_power_of_two().max(4);
        let mut ctx = need_ctx.next_power_of_two().max(1024);
        let mut draft = s.spec.drafter == Drafter::Draft;
        if let Some(c) = current.filter(|c| c.threads == s.threads && c.gpu_layers == s.gpu_layers) {
            slots = slots.max(c.slots);
            ctx = ctx.max(c.ctx_per_slot);
            draft |= c.draft;
        }
        let ctx = ctx.min(model_context.max(need_ctx));
        Capacity {
            slots,
            ctx_per_slot: ctx,
            max_batch_tokens: lx_engine::scheduler::batch_tokens_for(ctx, slots),
            threads: s.threads,
            gpu_layers: s.gpu_layers,
            draft,
            kv: s.kv,
            disaggregated: s.policy == lx_engine::scheduler::Policy::Disaggregated,
            kv_cache_bytes: None,
        }
    }

    /// Whether a worker loaded with this capacity can serve `s` as it is.
    pub fn fits(&self, s: &LiveSettings) -> bool {
        self.misfit(s).is_none()
    }

    /// What a worker loaded with this capacity lacks to serve `s`, as the reload says it.
    pub fn misfit(&self, s: &LiveSettings) -> Option<&'static str> {
        let disaggregated = s.policy == lx_engine::scheduler::Policy::Disaggregated;
        if self.slots < s.concurrency {
            Some("more clients")
        } else if self.ctx_per_slot < s.prompt_tokens as usize + s.max_tokens as usize {
            Some("a larger context")
        } else if self.threads != s.threads || self.gpu_layers != s.gpu_layers {
            Some("other threads or GPU layers")
        } else if !self.draft && s.spec.drafter == Drafter::Draft {
            Some("a draft model")
        } else if self.kv != s.kv {
            Some("another KV cache type")
        } else if self.disaggregated != disaggregated {
            Some(if disaggregated { "a prefill worker and a decode worker" } else { "one worker" })
        } else {
            None
        }
    }

    pub(super) fn load_spec(&self, model_path: &std::path::Path) -> LoadSpec {
        LoadSpec {
            model_path: model_path.to_path_buf(),
            threads: self.threads,
            slots: self.slots,
            ctx_per_slot: self.ctx_per_slot,
            max_batch_tokens: self.max_batch_tokens,
            gpu_layers: self.gpu_layers,
            kv: self.kv,
            ..Default::default()
        }
    }
}
