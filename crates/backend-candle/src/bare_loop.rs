//! The reference loop for harness-overhead checks: our model code driven directly (one
//! sequence, CPU, no engine, no step interface), so that the engine's figures for candle
//! can be compared with what candle does with nothing in between. Used by this crate's
//! `bare` example and the CLI's `overhead` example.

use candle_core::Device;
use lx_engine::backend::{choose_greedy, BackendError, TokenId};

use crate::{load_model, KvCache, LoadOptions, Model, RopeTable, Rows, WeightFormat};

/// One sequence over a model loaded on the CPU, with a cache of `ctx` positions.
pub struct BareLoop {
    model: Model,
    ropes: (RopeTable, RopeTable),
    cache: KvCache,
}

impl BareLoop {
    /// Loads the model; call `lx_backend_candle::set_thread_env` first, as a worker does.
    pub fn load(path: &std::path::Path, ctx: usize, layer_weights: WeightFormat) -> Result<Self, BackendError> {
        let device = Device::Cpu;
        let model = load_model(path, &device, LoadOptions { layer_weights })?;
        let ropes = model.rope_tables(ctx).map_err(load_err)?;
        let cache = KvCache::new(&model.cfg, ctx, &device).map_err(load_err)?;
        Ok(Self { model, ropes, cache })
    }

    /// Forget the sequence.
    pub fn reset(&mut self) {
        self.cache.len = 0;
    }

    /// Appends `tokens` at `pos` and returns the greedy next token.
    pub fn append(&mut self, tokens: &[TokenId], pos: usize) -> Result<TokenId, BackendError> {
        let vocab = self.model.cfg.vocab_size;
        let mut next = 0;
        self.model
            .forward(&[tokens], &[pos], &mut [&mut self.cache], &self.ropes, Rows::Last, &mut |_, logits| {
                let v = logits.flatten_all()?.to_vec1::<f32>()?;
                next = choose_greedy(&v[..vocab], 0).token;
                Ok(())
            })
            .map_err(|e| BackendError::Step(e.to_string()))?;
        self.cache.len = pos + tokens.len();
        Ok(next)
    }
}

fn load_err(e: candle_core::Error) -> BackendError {
    BackendError::Load(e.to_string())
}
