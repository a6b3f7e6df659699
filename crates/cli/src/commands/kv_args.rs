//! The KV cache's types, the same for `lx sweep`, `lx generate` and `lx live`: llama.cpp's
//! cache types, part of what each worker loads.

use clap::Args;
use lx_engine::backend::{KvType, KvTypes};

#[derive(Args, Debug, Clone)]
pub struct KvArgs {
    /// KV cache type for keys and values, llama.cpp only: f16 (its default), q8_0 or q4_0.
    /// A quantized V cache turns flash attention on (llama.cpp keeps one only inside it).
    #[arg(long)]
    pub kv_type: Option<KvType>,
    /// The keys' cache type alone (overrides --kv-type for keys).
    #[arg(long)]
    pub kv_type_k: Option<KvType>,
    /// The values' cache type alone (overrides --kv-type for values).
    #[arg(long)]
    pub kv_type_v: Option<KvType>,
}

impl KvArgs {
    /// The types asked for (f16 for whatever no option names).
    pub fn types(&self) -> KvTypes {
        KvTypes { k: self.kv_type_k.or(self.kv_type).unwrap_or_default(), v: self.kv_type_v.or(self.kv_type).unwrap_or_default() }
    }

    /// [`KvArgs::types`], refused when the run names a backend or server whose cache cannot
    /// take them.
    pub fn types_for(&self, backends: &[String]) -> anyhow::Result<KvTypes> {
        let kv = self.types();
        for b in backends {
            kv.for_backend(b).map_err(anyhow::Error::msg)?;
        }
        Ok(kv)
    }
}
