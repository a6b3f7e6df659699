//! `lx fit`: what fits in a memory before anything loads. For each backend of this build
//! (and each KV cache type llama.cpp takes), the longest context that fits at a few
//! concurrencies and the most sequences that fit at the model's full context, from the
//! backends' own predictions ([`crate::memory`]).

use lx_core::backend::{KvType, KvTypes, LoadSpec};
use lx_core::footprint::Footprint;
use lx_format::gguf::{GgufFile, ModelConfig};
use serde::{Deserialize, Serialize};

/// Concurrencies each plan gives the longest context for.
pub const SEQUENCES: [usize; 3] = [1, 4, 16];

/// The most sequences a plan looks for.
const MOST_SEQUENCES: usize = 4096;

/// One backend's (and KV type's) plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub backend: String,
    pub kv: KvTypes,
    /// The worker settings the plan was made with (the tuned profile's or the defaults).
    pub settings: Vec<(String, String)>,
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
    /// The worker settings, by backend.
    pub settings: &'a dyn Fn(&str) -> Vec<(String, String)>,
}

/// The load a plan checks: `slots` sequences of `ctx` tokens, batches as `lx serve` sizes them.
pub fn load(model_path: &std::path::Path, slots: usize, ctx: usize, kv: KvTypes) -> LoadSpec {
    LoadSpec {
        model_path: model_path.to_path_buf(),
        slots,
        ctx_per_slot: ctx,
        max_batch_tokens: lx_core::scheduler::batch_tokens_for(ctx, slots),
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
    match backend {
        "llama" => KvType::ALL.iter().map(|&t| KvTypes { k: t, v: t }).collect(),
        _ => vec![KvTypes::default()],
    }
}

/// How `backend` stores its KV cache when asked for `kv`: candle and MLX keep f32 whatever
/// the load says.
pub fn kv_label(backend: &str, kv: KvTypes) -> String {
    match backend {
        "llama" => kv.label(),
        _ => "f32".to_string(),
    }
}

/// `backend`'s plan with KV type `kv`.
pub fn plan(q: &Question, backend: &str, kv: KvTypes) -> Result<Plan, String> {
    let settings = (q.settings)(backend);
    let runtime = (q.runtime)(backend);
    let footprint = |slots: usize, ctx: usize| crate::memory::footprint(backend, &load(q.model_path, slots, ctx, kv), &settings, runtime);
    let one_at_full = footprint(1, q.full_context)?;
    let fits = |slots: usize, ctx: usize| footprint(slots, ctx).ok().filter(|f| f.total() <= q.memory);
    let longest = SEQUENCES.iter().map(|&n| (n, largest(q.full_context, |ctx| fits(n, ctx)))).collect();
    let most_at_full = largest(MOST_SEQUENCES, |n| fits(n, q.full_context));
    Ok(Plan { backend: backend.to_string(), kv, settings, longest, most_at_full, one_at_full })
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

    #[test]
    fn only_llama_cpp_plans_its_cache_types() {
        assert_eq!(kv_types("llama").iter().map(|k| kv_label("llama", *k)).collect::<Vec<_>>(), ["f16", "q8_0", "q4_0"]);
        assert_eq!(kv_types("candle").iter().map(|k| kv_label("candle", *k)).collect::<Vec<_>>(), ["f32"]);
    }
}
