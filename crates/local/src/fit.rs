//! `lx fit`: what fits in a memory before anything loads. For each backend of this build
//! (and each KV cache type llama.cpp takes), the longest context that fits at a few
//! concurrencies and the most sequences that fit at the model's full context, from the
//! backends' own predictions ([`crate::memory`]).

use lx_engine::backend::{KvType, KvTypes, LoadSpec};
use lx_engine::footprint::Footprint;
use lx_engine::scheduler::Policy;
use lx_run::live::{Capacity, LiveSettings, MAX_CONCURRENCY};
use lx_format::gguf::{GgufFile, ModelConfig};
use serde::{Deserialize, Serialize};

use crate::profile::Settings;

/// Concurrencies each plan gives the longest context for.
pub const SEQUENCES: [usize; 3] = [1, 4, 16];

/// The most sequences a plan looks for.
const MOST_SEQUENCES: usize = 4096;

/// One backend's (and KV type's) plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub backend: String,
    pub kv: KvTypes,
    /// The backend's settings the plan was made with (the tuned profile's, the
    /// environment's, or none: the defaults).
    pub settings: Settings,
    /// Per [`SEQUENCES`] entry: the longest context per sequence that fits (`None`: not even
    /// one token) and its footprint.
    pub longest: Vec<(usize, Option<(usize, Footprint)>)>,
    /// The most sequences that fit at the model's full context, and their footprint.
    pub most_at_full: Option<(usize, Footprint)>,
    /// What one sequence at the full context needs, fit or not.
    pub one_at_full: Footprint,
}

/// What a plan is made for.
pub struct Question<'a> {
    pub model_path: &'a std::path::Path,
    pub memory: u64,
    /// The model's trained context: the longest a plan looks for.
    pub full_context: usize,
    /// The worker process's own memory, by backend.
    pub runtime: &'a dyn Fn(&str) -> u64,
    /// The backend's own settings a worker would load with, by backend.
    pub settings: &'a dyn Fn(&str) -> Settings,
}

/// The load a plan checks: `slots` sequences of `ctx` tokens, batches as `lx serve` sizes them.
pub fn load(model_path: &std::path::Path, slots: usize, ctx: usize, kv: KvTypes) -> LoadSpec {
    LoadSpec {
        model_path: model_path.to_path_buf(),
        slots,
        ctx_per_slot: ctx,
        max_batch_tokens: lx_engine::scheduler::batch_tokens_for(ctx, slots),
        gpu_layers: None,
        kv,
        ..Default::default()
    }
}

/// The model's trained context length.
pub fn full_context(model_path: &std::path::Path) -> Result<usize, String> {
    let g = GgufFile::open(model_path).map_err(|e| e.to_string())?;
    Ok(ModelConfig::from_gguf(&g).map_err(|e| e.to_string())?.context_length as usize)
}

/// The largest `n` in `1..=most` for which `fits(n)` holds, with what `fits` gave; `fits`
/// must hold for every `n` below one it holds for.
fn largest<T>(most: usize, fits: impl Fn(usize) -> Option<T>) -> Option<(usize, T)> {
    let first = fits(1)?;
    let (mut lo, mut hi, mut at_lo) = (1, most, first);
    if let Some(t) = fits(most) {
        return Some((most, t));
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match fits(mid) {
            Some(t) => (lo, at_lo) = (mid, t),
            None => hi = mid,
        }
    }
    Some((lo, at_lo))
}

/// The KV cache types a backend plans with: llama.cpp's three, the others' one.
pub fn kv_types(backend: &str) -> Vec<KvTypes> {
    let types = crate::BackendKind::of(backend).map_or(&[KvType::F16][..], |k| k.capabilities().kv_types);
    types.iter().map(|&t| KvTypes { k: t, v: t }).collect()
}

/// How `backend` stores its KV cache when asked for `kv`: candle and MLX keep f32 whatever
/// the load says.
pub fn kv_label(backend: &str, kv: KvTypes) -> String {
    match crate::BackendKind::of(backend).and_then(|k| k.capabilities().kv_kept_as) {
        Some(kept) => kept.to_string(),
        None => kv.label(),
    }
}

/// `backend`'s plan with KV type `kv`.
pub fn plan(q: &Question, backend: &str, kv: KvTypes) -> Result<Plan, String> {
    let settings = (q.settings)(backend);
    let runtime = (q.runtime)(backend);
    let footprint = |slots: usize, ctx: usize| crate::memory::footprint(backend, &LoadSpec { settings: settings.clone(), ..load(q.model_path, slots, ctx, kv) }, runtime);
    let one_at_full = footprint(1, q.full_context)?;
    let fits = |slots: usize, ctx: usize| footprint(slots, ctx).ok().filter(|f| f.total() <= q.memory);
    let longest = SEQUENCES.iter().map(|&n| (n, largest(q.full_context, |ctx| fits(n, ctx)))).collect();
    let most_at_full = largest(MOST_SEQUENCES, |n| fits(n, q.full_context));
    Ok(Plan { backend: backend.to_string(), kv, settings, longest, most_at_full, one_at_full })
}

/// What the live controls' settings ask of the memory on one backend: the load the live
/// session would make for them ([`Capacity::for_settings`]), and how far the prompt and
/// the clients can go, the other settings kept, before a load no longer fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SettingsFit {
    pub backend: String,
    /// The load's footprint: both workers' with the `disaggregated` policy; without a draft
    /// model (made or read when the session loads it).
    pub needs: Footprint,
    /// The memory it is held to.
    pub memory_bytes: u64,
    pub fits: bool,
    /// The longest prompt that fits at these clients and output tokens (`None`: none does).
    pub longest_prompt: Option<usize>,
    /// The most clients that fit at this prompt and output length, up to
    /// [`MAX_CONCURRENCY`] (`None`: not one).
    pub most_clients: Option<usize>,
}

/// [`SettingsFit`] for `s` on `backend`; `q.full_context` is the model's context.
pub fn for_settings(q: &Question, backend: &str, s: &LiveSettings) -> Result<SettingsFit, String> {
    let settings = (q.settings)(backend);
    let runtime = (q.runtime)(backend);
    let workers = if s.policy == Policy::Disaggregated { 2 } else { 1 };
    let needs = |s: &LiveSettings| -> Result<Footprint, String> {
        let c = Capacity::for_settings(s, None, q.full_context);
        let one = crate::memory::footprint(backend, &LoadSpec { settings: settings.clone(), ..load(q.model_path, c.slots, c.ctx_per_slot, s.kv) }, runtime)?;
        Ok(Footprint { weights: one.weights * workers, kv_cache: one.kv_cache * workers, scratch: one.scratch * workers, runtime: one.runtime * workers })
    };
    let fits = |s: &LiveSettings| needs(s).is_ok_and(|f| f.total() <= q.memory);
    let needed = needs(s)?;
    // The session sizes a load in powers of two (contexts from 1,024, at most the model's;
    // slots from 4), so only those sizes need trying: the largest that fits bounds them all.
    let max_tokens = s.max_tokens as usize;
    let contexts = (10..).map(|k| 1usize << k).take_while(|&c| c < q.full_context).chain([q.full_context]);
    let longest_prompt = contexts
        .filter(|&ctx| ctx > max_tokens)
        .take_while(|&ctx| fits(&LiveSettings { prompt_tokens: (ctx - max_tokens) as u32, ..s.clone() }))
        .last()
        .map(|ctx| ctx - max_tokens);
    let slots = (2..).map(|k| 1usize << k).take_while(|&n| n < MAX_CONCURRENCY).chain([MAX_CONCURRENCY]);
    let most_clients = slots.take_while(|&n| fits(&LiveSettings { concurrency: n, ..s.clone() })).last();
    Ok(SettingsFit { backend: backend.to_string(), fits: needed.total() <= q.memory, needs: needed, memory_bytes: q.memory, longest_prompt, most_clients })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_the_last_that_fits() {
        let under = |limit: usize| move |n: usize| (n <= limit).then_some(n * 10);
        assert_eq!(largest(100, under(37)), Some((37, 370)));
        assert_eq!(largest(100, under(1)), Some((1, 10)));
        assert_eq!(largest(100, under(100)), Some((100, 1000)));
        assert_eq!(largest(100, under(500)), Some((100, 1000)), "never past the most asked for");
        assert_eq!(largest(100, under(0)), None, "not even one");
    }

    /// The live controls' limits are the session's own loads: the longest prompt and the
    /// most clients fit, the next size the session would load does not, and a split into
    /// two workers needs both.
    #[test]
    fn the_controls_limits_are_the_largest_loads_that_fit() {
        let model = lx_models::default_model_path();
        assert!(model.exists(), "the default model is missing: run `lx models fetch default` (scripts/test does)");
        let runtime = |_: &str| 10 << 20;
        let settings = |_: &str| crate::profile::Settings::new();
        let at = |memory: u64| Question { model_path: &model, memory, full_context: 32_768, runtime: &runtime, settings: &settings };
        let s = LiveSettings { backends: vec!["candle".into()], prompt_tokens: 64, max_tokens: 64, concurrency: 8, ..LiveSettings::default() };
        let plenty = for_settings(&at(1 << 40), "candle", &s).unwrap();
        assert!(plenty.fits);
        assert_eq!((plenty.longest_prompt, plenty.most_clients), (Some(32_768 - 64), Some(MAX_CONCURRENCY)));
        // Room for 8 clients at 8,192 tokens, not 16,384.
        let need = |s: &LiveSettings| for_settings(&at(1 << 40), "candle", s).unwrap().needs.total();
        let room = need(&LiveSettings { prompt_tokens: 8192 - 64, ..s.clone() });
        let tight = for_settings(&at(room), "candle", &s).unwrap();
        assert!(tight.fits && tight.memory_bytes == room);
        assert_eq!(tight.longest_prompt, Some(8192 - 64));
        assert!(need(&LiveSettings { prompt_tokens: 16_384 - 64, ..s.clone() }) > room);
        // At this prompt the clients go to the most slots that fit.
        let clients = tight.most_clients.unwrap();
        assert!(clients >= 8 && need(&LiveSettings { concurrency: clients, ..s.clone() }) <= room, "{clients}");
        assert!(clients == MAX_CONCURRENCY || need(&LiveSettings { concurrency: clients * 2, ..s.clone() }) > room, "{clients}");
        // Two workers hold two models and two caches: what fits one exactly does not fit both.
        let one = tight.needs.total();
        let split = for_settings(&at(one), "candle", &LiveSettings { policy: Policy::Disaggregated, ..s.clone() }).unwrap();
        assert_eq!(split.needs.total(), 2 * one);
        assert!(for_settings(&at(one), "candle", &s).unwrap().fits && !split.fits);
        // Nothing fits in nothing.
        let none = for_settings(&at(1), "candle", &s).unwrap();
        assert_eq!((none.fits, none.longest_prompt, none.most_clients), (false, None, None));
    }

    #[test]
    fn only_llama_cpp_plans_its_cache_types() {
        assert_eq!(kv_types("llama").iter().map(|k| kv_label("llama", *k)).collect::<Vec<_>>(), ["f16", "q8_0", "q4_0"]);
        assert_eq!(kv_types("candle").iter().map(|k| kv_label("candle", *k)).collect::<Vec<_>>(), ["f32"]);
    }
}
