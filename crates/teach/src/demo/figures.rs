//! Figures read off a demo's measured points: what its checks compare and its lesson draws.

use lx_client::stats::Distribution;
use lx_engine::backend::{BackendInfo, KvType};
use lx_results::results::PointResult;

use super::{chunked_prefill, disaggregation, kv_cache};
use crate::lesson::Metric;

/// The inter-token gaps of the requests that are not `long_prompt` tokens long (the ones
/// decoding while long prompts arrive): their distribution, as a sweep's ITL columns have it.
pub(super) fn decoders_itl(p: &PointResult, long_prompt: u32) -> Distribution {
    Distribution::of(p.samples.iter().filter(|r| r.prompt_tokens < long_prompt).flat_map(|r| r.itl_ms()))
}

/// The mean transfer of the states of `prompt_tokens`-token prompts a point moved: (ms, MB,
/// MB/s); NaN where none moved.
pub(super) fn transfer(p: &PointResult, prompt_tokens: u32) -> (f64, f64, f64) {
    let moved: Vec<_> = p.samples.iter().filter(|r| r.prompt_tokens == prompt_tokens).filter_map(|r| r.transfer).collect();
    if moved.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let n = moved.len() as f64;
    let ms = moved.iter().map(|t| t.ms()).sum::<f64>() / n;
    let mb = moved.iter().map(|t| t.bytes as f64).sum::<f64>() / n / 1e6;
    (ms, mb, mb / (ms / 1e3))
}

/// The mean TTFT of a point's `prompt_tokens`-token requests, ms (NaN: none).
pub(super) fn mean_ttft_of(p: &PointResult, prompt_tokens: u32) -> f64 {
    let t: Vec<f64> = p.samples.iter().filter(|r| r.prompt_tokens == prompt_tokens).filter_map(|r| r.ttft_ms()).collect();
    t.iter().sum::<f64>() / t.len() as f64
}

/// KV cache bytes per sequence of the worker that measured `p`: its backend's own account of
/// the cache it allocated (for every slot), over the slots.
pub(super) fn kv_bytes_per_sequence(p: &PointResult, backends: &[BackendInfo]) -> Option<f64> {
    let kv = p.traffic.kv;
    let matches = |b: &&BackendInfo| {
        let setting = |key: &str, t: KvType| b.settings.get(key).map(String::as_str).unwrap_or("f16") == t.name();
        b.name == p.backend && setting("kv_type_k", kv.k) && setting("kv_type_v", kv.v)
    };
    let b = backends.iter().find(matches)?;
    Some(b.kv_cache_bytes? as f64 / b.capabilities.slots.max(1) as f64)
}

/// The share of tokens two points' requests (in order: the same prompts) wrote alike before
/// they first parted.
pub(super) fn same_text_share(a: &PointResult, b: &PointResult) -> f64 {
    let (mut same, mut total) = (0usize, 0usize);
    for (x, y) in a.samples.iter().zip(&b.samples) {
        same += x.tokens.iter().zip(&y.tokens).take_while(|(s, t)| s == t).count();
        total += x.tokens.len().max(y.tokens.len());
    }
    if total == 0 {
        f64::NAN
    } else {
        same as f64 / total as f64
    }
}

// What a lesson's figure reads is defined here, beside the demos whose points it reads, so
// that the lesson's types know nothing of any demo.
impl Metric {
    /// The value at one point (`None`: the point did not measure it); `backends` are the run's
    /// loaded backends (where cache sizes come from).
    pub fn of(self, p: &PointResult, backends: &[BackendInfo]) -> Option<f64> {
        let v = match self {
            Metric::TtftP50 => p.ttft_ms.p50,
            Metric::TtftP95 => p.ttft_ms.p95,
            Metric::DecodeP50 => p.decode_tps.p50,
            Metric::Throughput => p.throughput_tps,
            Metric::DecodersMaxItl => chunked_prefill::short_requests_max_itl(p),
            Metric::DecodersItlP99 => decoders_itl(p, disaggregation::LONG_PROMPT).p99,
            Metric::LongPromptTtft => mean_ttft_of(p, disaggregation::LONG_PROMPT),
            Metric::SequencesInBudget => (kv_cache::BUDGET_BYTES as f64 / kv_bytes_per_sequence(p, backends)?).floor(),
            Metric::MeanKl => p.fidelity?.fidelity.mean_kl,
        };
        // A divergence of 0 is a measurement (the same model); no other figure is 0.
        (p.requests > 0 && v.is_finite() && (v > 0.0 || (self == Metric::MeanKl && v == 0.0))).then_some(v)
    }
}
