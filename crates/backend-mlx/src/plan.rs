//! How one engine batch becomes one MLX graph, in plain Rust (compiled and tested everywhere).
//!
//! All chunks of a batch are laid end to end as the rows of one activation matrix, so every
//! projection and feed-forward runs once for the whole batch, whatever each chunk's slot and
//! position. Only RoPE, the KV-cache write and attention run per chunk, on that chunk's rows.

use lx_engine::backend::{BackendError, Batch, Capabilities, Outputs, TokenId};

/// One chunk's place in the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPlan {
    pub slot: usize,
    /// First position the chunk writes.
    pub pos: usize,
    pub len: usize,
    /// First row of the chunk in the step's activation matrix.
    pub row: usize,
    pub outputs: Outputs,
}

/// A validated step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPlan {
    /// Every chunk's tokens, end to end.
    pub tokens: Vec<TokenId>,
    pub chunks: Vec<ChunkPlan>,
    /// Rows whose logits are needed, in batch order.
    pub out_rows: Vec<u32>,
    /// Cached length of every slot after the step.
    pub lens_after: Vec<usize>,
}

/// Checks `batch` against the slots' cached lengths and lays it out.
pub fn plan(batch: &Batch, lens: &[usize], caps: &Capabilities, vocab: usize) -> Result<StepPlan, BackendError> {
    let lens_after = batch.check(caps, lens, vocab)?;
    let mut out = StepPlan { tokens: Vec::with_capacity(batch.token_count()), chunks: Vec::new(), out_rows: Vec::new(), lens_after };
    for c in &batch.chunks {
        let row = out.tokens.len();
        out.tokens.extend_from_slice(&c.tokens);
        match c.outputs {
            Outputs::None => {}
            Outputs::Last => out.out_rows.push((row + c.tokens.len() - 1) as u32),
            Outputs::All => out.out_rows.extend((row..row + c.tokens.len()).map(|r| r as u32)),
        }
        out.chunks.push(ChunkPlan { slot: c.slot as usize, pos: c.pos as usize, len: c.tokens.len(), row, outputs: c.outputs });
    }
    Ok(out)
}

/// Cache positions `start..end` that a chunk of `len` queries at `pos..pos + len` attends to:
/// everything up to its last query, cut to the sliding window of the first query.
pub fn key_span(pos: usize, len: usize, window: Option<usize>) -> (usize, usize) {
    let start = match window {
        Some(w) => (pos + 1).saturating_sub(w),
        None => 0,
    };
    (start, pos + len)
}

/// Additive mask (`len` × keys, row-major; 0 visible, -inf hidden) for queries at
/// `pos..pos + len` over keys at `key_span(pos, len, window)`: causal, and on sliding-window
/// layers a query sees itself and the `window - 1` positions before it (as llama.cpp).
/// `None` for a single query, which sees every key of its span.
pub fn mask(pos: usize, len: usize, window: Option<usize>) -> Option<Vec<f32>> {
    if len == 1 {
        return None;
    }
    let (start, end) = key_span(pos, len, window);
    let keys = end - start;
    let mut m = vec![0f32; len * keys];
    for i in 0..len {
        let q = pos + i;
        for j in 0..keys {
            let k = start + j;
            if k > q || window.is_some_and(|w| q - k >= w) {
                m[i * keys + j] = f32::NEG_INFINITY;
            }
        }
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_engine::backend::Chunk;

    fn caps() -> Capabilities {
        Capabilities { mixed_position_batches: true, max_batch_tokens: 64, slots: 3, ctx_per_slot: 32, prefix_copy: true }
    }

    fn chunk(slot: u32, pos: u32, tokens: &[u32], outputs: Outputs) -> Chunk {
        Chunk { slot, pos, tokens: tokens.to_vec(), outputs, score: Vec::new() }
    }

    #[test]
    fn lays_chunks_end_to_end_and_picks_output_rows() {
        let batch = Batch {
            chunks: vec![
                chunk(0, 0, &[5, 6, 7], Outputs::Last),
                chunk(2, 4, &[8], Outputs::Last),
                chunk(1, 0, &[1, 2], Outputs::None),
                chunk(1, 2, &[3, 4], Outputs::All),
            ],
            top_logprobs: 0,
        };
        let p = plan(&batch, &[0, 0, 4], &caps(), 100).unwrap();
        assert_eq!(p.tokens, vec![5, 6, 7, 8, 1, 2, 3, 4]);
        assert_eq!(p.chunks.iter().map(|c| c.row).collect::<Vec<_>>(), vec![0, 3, 4, 6]);
        assert_eq!(p.out_rows, vec![2, 3, 6, 7]);
        assert_eq!(p.lens_after, vec![3, 4, 5]);
    }

    #[test]
    fn rejects_bad_chunks() {
        let lens = [0, 0, 0];
        let bad = [
            (chunk(3, 0, &[1], Outputs::Last), "out of range"),
            (chunk(0, 1, &[1], Outputs::Last), "only 0 positions are cached"),
            (chunk(0, 0, &[], Outputs::Last), "empty chunk"),
            (chunk(0, 0, &[1; 33], Outputs::Last), "past ctx_per_slot"),
            (chunk(0, 0, &[100], Outputs::Last), "token id 100"),
        ];
        for (c, want) in bad {
            let err = plan(&Batch { chunks: vec![c], top_logprobs: 0 }, &lens, &caps(), 100).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
        let big = Batch { chunks: vec![chunk(0, 0, &[1; 30], Outputs::Last), chunk(1, 0, &[1; 30], Outputs::Last), chunk(2, 0, &[1; 30], Outputs::Last)], top_logprobs: 0 };
        assert!(plan(&big, &lens, &caps(), 100).unwrap_err().to_string().contains("max_batch_tokens"));
    }

    #[test]
    fn masks_match_the_definition() {
        for window in [None, Some(1), Some(3), Some(8)] {
            for pos in 0..10 {
                for len in 1..7 {
                    let (start, end) = key_span(pos, len, window);
                    assert_eq!(end, pos + len);
                    let keys = end - start;
                    let m = mask(pos, len, window);
                    for i in 0..len {
                        let q = pos + i;
                        // Every visible key of every query lies in the span.
                        for k in 0..=q {
                            let visible = window.is_none_or(|w| q - k < w);
                            if visible {
                                assert!(k >= start, "pos {pos} len {len} window {window:?}: key {k} cut off");
                            }
                            if k >= start {
                                let got = m.as_ref().map_or(0.0, |m| m[i * keys + (k - start)]);
                                assert_eq!(got == 0.0, visible, "pos {pos} len {len} window {window:?} q {q} k {k}");
                            }
                        }
                        for k in q + 1..end {
                            assert_eq!(m.as_ref().unwrap()[i * keys + (k - start)], f32::NEG_INFINITY);
                        }
                    }
                }
            }
        }
    }
}
