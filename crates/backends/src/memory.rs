//! A model that cannot fit is refused before a worker tries to load it (and the machine
//! starts swapping, or the worker is killed half-way): the weights (the file, which the
//! backends map or read whole) and the KV cache the slots need, against the memory the
//! system has available now. Both are counted low (an f16 cache, sliding-window layers at
//! their window, no scratch buffers), so a refusal is certain; the numbers are in the message.

use lx_core::backend::LoadSpec;
use lx_format::gguf::GgufFile;
use lx_machine::roofline::ModelCost;

/// Whether `spec`'s load lives in system memory: a build without discrete-GPU features,
/// every layer kept on the CPU (`--gpu-layers 0`), or Apple Silicon's unified memory.
/// A discrete GPU's memory is its own, and not checked here.
pub fn in_system_memory(spec: &LoadSpec) -> bool {
    spec.gpu_layers == Some(0) || !(cfg!(feature = "cuda") || cfg!(feature = "vulkan"))
}

/// Weights (the file) and an f16 KV cache for `slots` sequences of `ctx` tokens; `None` for a
/// model that cannot be read.
fn need(path: &std::path::Path, slots: usize, ctx: usize) -> Option<(u64, u64)> {
    let gguf = GgufFile::open(path).ok()?;
    let cost = ModelCost::from_gguf(&gguf).ok()?;
    Some((gguf.file_size(), slots.max(1) as u64 * cost.kv_bytes_at(ctx as u64)))
}

/// Refuse `spec` when its weights and KV cache (and its draft model's, when it has one) need
/// more than `available` bytes, with the cache's keys and values stored as `spec.kv` says
/// (llama.cpp's types; other backends' caches are counted as f16, which is low for candle's
/// f32). A model that cannot be read is not refused here: the worker says what is wrong
/// with it.
pub fn check(spec: &LoadSpec, available: u64) -> Result<(), String> {
    let Some((mut weights, mut f16)) = need(&spec.model_path, spec.slots, spec.ctx_per_slot) else { return Ok(()) };
    if let Some((w, kv)) = spec.draft_model.as_deref().and_then(|d| need(d, spec.slots, spec.ctx_per_slot)) {
        (weights, f16) = (weights + w, f16 + kv);
    }
    let kv = (f16 as f64 * spec.kv.of_f16()) as u64;
    if weights + kv <= available {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Err(format!(
        "{}{} does not fit in memory: it needs at least {:.1} GiB ({:.1} GiB of weights and {:.1} GiB of KV cache{} for {} sequences of {} tokens), and {:.1} GiB is available; ask for fewer concurrent requests or shorter ones, or close other programs",
        spec.model_path.display(),
        if spec.draft_model.is_some() { " with its draft model" } else { "" },
        gib(weights + kv),
        gib(weights),
        gib(kv),
        if spec.kv.is_default() { String::new() } else { format!(" (K {}, V {})", spec.kv.k.name(), spec.kv.v.name()) },
        spec.slots.max(1),
        spec.ctx_per_slot,
        gib(available),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_core::backend::{KvType, KvTypes};

    fn spec(slots: usize, ctx: usize) -> LoadSpec {
        LoadSpec { model_path: lx_models::default_model_path(), threads: 0, slots, ctx_per_slot: ctx, max_batch_tokens: 512, gpu_layers: Some(0), ..Default::default() }
    }

    /// The default model (253 MB) with 4 sequences of 1024 tokens fits in 1 GiB; with 512
    /// sequences of 32,000 tokens its KV cache alone (three global layers of 1 KiB per token
    /// and fifteen local ones capped at 512 positions) is 50.6 GiB, refused with the numbers.
    #[test]
    fn refuses_what_cannot_fit_and_says_by_how_much() {
        if !lx_models::default_model_path().exists() {
            panic!("the default model is missing: run `lx models fetch default` (scripts/test does)");
        }
        assert_eq!(check(&spec(4, 1024), 1 << 30), Ok(()));
        let e = check(&spec(512, 32_000), 16 << 30).unwrap_err();
        assert!(e.contains("does not fit in memory: it needs at least 50.9 GiB (0.2 GiB of weights and 50.6 GiB of KV cache for 512 sequences of 32000 tokens), and 16.0 GiB is available"), "{e}");
        assert!(spec(1, 1).gpu_layers == Some(0) && in_system_memory(&spec(1, 1)));
        // A quantized cache: q8_0 takes 34 bytes per 32 values where f16 takes 64, q4_0 18.
        let kv = |k, v| LoadSpec { kv: KvTypes { k, v }, ..spec(512, 32_000) };
        let e = check(&kv(KvType::Q8_0, KvType::Q8_0), 16 << 30).unwrap_err();
        assert!(e.contains("and 26.9 GiB of KV cache (K q8_0, V q8_0) for 512 sequences"), "{e}");
        assert_eq!(check(&kv(KvType::Q4_0, KvType::Q4_0), 16 << 30), Ok(()), "14.2 GiB of q4_0 cache fits");
        // A draft model (here the model itself) doubles both: what fits alone does not with it.
        assert_eq!(check(&spec(512, 32_000), 64 << 30), Ok(()));
        let drafted = LoadSpec { draft_model: Some(lx_models::default_model_path()), ..spec(512, 32_000) };
        let e = check(&drafted, 64 << 30).unwrap_err();
        assert!(e.contains("with its draft model does not fit in memory: it needs at least 101."), "{e}");
    }

    #[test]
    fn a_model_that_cannot_be_read_is_left_to_the_worker() {
        let mut s = spec(1, 16);
        s.model_path = "/nonexistent/model.gguf".into();
        assert_eq!(check(&s, 0), Ok(()));
    }
}
