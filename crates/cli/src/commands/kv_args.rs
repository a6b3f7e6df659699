//! The KV cache's types, the same for `lx sweep`, `lx generate` and `lx live`: llama.cpp's
//! cache types, handed to its workers through their environment.

use anyhow::bail;
use clap::Args;
use lx_core::backend::KvType;

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
    /// The types asked for, keys then values; none when no option was given.
    pub fn types(&self) -> Option<(KvType, KvType)> {
        let (k, v) = (self.kv_type_k.or(self.kv_type), self.kv_type_v.or(self.kv_type));
        (k.is_some() || v.is_some()).then(|| (k.unwrap_or_default(), v.unwrap_or_default()))
    }

    /// Set the types for the llama.cpp workers this run starts, or refuse them when the run
    /// names a backend or server whose cache cannot take them.
    pub fn apply(&self, backends: &[String]) -> anyhow::Result<()> {
        let Some((k, v)) = self.types() else { return Ok(()) };
        if let Some(other) = backends.iter().find(|b| b.as_str() != "llama") {
            let why = match other.as_str() {
                "candle" => "candle keeps its KV cache in f32",
                "mlx" => "our MLX backend keeps its KV cache in f32",
                _ => "a server's cache is set where the server is started",
            };
            bail!("--kv-type is llama.cpp's cache types, and {why}: measure {other} in a run without --kv-type");
        }
        // Read by the llama.cpp workers this process starts (they inherit its environment).
        std::env::set_var(lx_backends::KV_TYPE_K_ENV, k.name());
        std::env::set_var(lx_backends::KV_TYPE_V_ENV, v.name());
        Ok(())
    }
}
