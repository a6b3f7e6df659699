//! The `disaggregated` policy's two workers, the same for `lx sweep` and `lx serve`.

use clap::Args;
use lx_engine::split::{Device, Split};
use lx_engine::handoff::TransferVia;

#[derive(Args, Debug, Clone)]
pub struct SplitArgs {
    /// disaggregated: the prefill worker's compute threads (default: half of --threads).
    #[arg(long, default_value_t = 0)]
    pub prefill_threads: usize,
    /// disaggregated: the decode worker's compute threads (default: the rest).
    #[arg(long, default_value_t = 0)]
    pub decode_threads: usize,
    /// disaggregated: where the prefill worker computes: same (as --gpu-layers says), cpu or gpu.
    #[arg(long, default_value = "same")]
    pub prefill_device: Device,
    /// disaggregated: where the decode worker computes: same, cpu or gpu.
    #[arg(long, default_value = "same")]
    pub decode_device: Device,
    /// disaggregated: how each prefilled state reaches the decode worker: file (a file in
    /// shared memory) or pipe (inside the workers' protocol, through lx).
    #[arg(long, default_value = "file")]
    pub transfer_via: TransferVia,
    /// disaggregated: the prefill worker computes prompts in chunks of --chunk-tokens, so a
    /// short prompt shares its passes with a long one instead of waiting behind it.
    #[arg(long)]
    pub prefill_chunked: bool,
}

impl SplitArgs {
    pub fn split(&self) -> Split {
        Split {
            prefill_threads: self.prefill_threads,
            decode_threads: self.decode_threads,
            prefill_device: self.prefill_device,
            decode_device: self.decode_device,
            via: self.transfer_via,
            prefill_chunks: self.prefill_chunked,
        }
    }
}
