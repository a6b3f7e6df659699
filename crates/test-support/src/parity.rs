//! Comparing token streams from different runs, backends or batch shapes.
//!
//! Greedy decoding is only as deterministic as the kernels: llama.cpp's CPU kernels
//! round differently for different batch shapes, and this moves a token's
//! log-probability by up to about 0.3 nats on the default model (measured: see the
//! docs/METHODS.md, "Parity"). Where the top two candidates are that close, two correct runs
//! may pick differently and then go their own ways. So streams are compared exactly
//! up to their first difference, and a difference is accepted only where the
//! reference itself was nearly tied between the two tokens. Where the distribution is
//! flat, three or more candidates can be that close, and any of them is such a tie.

use lx_engine::backend::{Scored, TokenId};

/// Log-probabilities closer than this to the most likely token's count as a near-tie.
pub const NEAR_TIE_NATS: f32 = 0.5;

/// How many of the reference's most likely tokens a run records for [`compare`]: enough for
/// a flat distribution's near-ties (measured: batching picked a third candidate 0.20 nats
/// below the first).
pub const ALTERNATIVES: usize = 5;

/// How a candidate stream compares with a reference stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Tokens identical from the start.
    pub agreed: usize,
    /// Where the streams part at a near-tie, with the reference's top-2 gap there.
    pub parted_at_tie: Option<(usize, f32)>,
}

/// Compare `got` with `want` (whose per-position alternatives are `want_top`, most likely
/// first). Err explains the first difference that is not a near-tie within `tie_nats`: the
/// other run's token must be one of the reference's alternatives there, less likely than its
/// choice by under `tie_nats`.
pub fn compare(want: &[TokenId], want_top: &[Vec<Scored>], got: &[TokenId], tie_nats: f32) -> Result<Agreement, String> {
    let n = want.len().min(got.len());
    let Some(at) = (0..n).find(|&i| want[i] != got[i]) else {
        return Ok(Agreement { agreed: n, parted_at_tie: None });
    };
    let top = want_top.get(at).filter(|t| t.len() >= 2).ok_or_else(|| format!("streams differ at {at} and the reference has no alternatives there"))?;
    let gap = top.iter().find(|c| c.token == got[at]).map(|c| top[0].logprob - c.logprob);
    match gap {
        Some(gap) if gap < tie_nats => Ok(Agreement { agreed: at, parted_at_tie: Some((at, gap)) }),
        Some(gap) => Err(format!("streams differ at {at}: reference {} (logprob {:.3}), got {}, {gap:.3} nats less likely there", want[at], top[0].logprob, got[at])),
        None => Err(format!(
            "streams differ at {at}: reference {} (logprob {:.3}), got {}, not among its {} most likely (the last of them {:.3} nats below)",
            want[at],
            top[0].logprob,
            got[at],
            top.len(),
            top[0].logprob - top[top.len() - 1].logprob
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(a: TokenId, la: f32, b: TokenId, lb: f32) -> Vec<Scored> {
        vec![Scored { token: a, logprob: la }, Scored { token: b, logprob: lb }]
    }

    #[test]
    fn identical_streams_agree_fully() {
        let t = vec![top(1, -0.1, 2, -3.0); 3];
        assert_eq!(compare(&[1, 1, 1], &t, &[1, 1, 1], 0.5).unwrap(), Agreement { agreed: 3, parted_at_tie: None });
    }

    #[test]
    fn parting_at_a_near_tie_is_accepted() {
        let t = vec![top(1, -0.1, 2, -3.0), top(5, -0.70, 6, -0.75)];
        let a = compare(&[1, 5], &t, &[1, 6], 0.5).unwrap();
        assert_eq!(a.agreed, 1);
        assert!((a.parted_at_tie.unwrap().1 - 0.05).abs() < 1e-6);
    }

    #[test]
    fn parting_where_the_reference_was_sure_fails() {
        let t = vec![top(1, -0.1, 2, -3.0), top(5, -0.1, 6, -2.5)];
        assert!(compare(&[1, 5], &t, &[1, 6], 0.5).unwrap_err().contains("differ at 1"));
        // Not even among the alternatives: a mix-up.
        let t = vec![top(1, -0.7, 2, -0.71)];
        assert!(compare(&[1], &t, &[9], 0.5).unwrap_err().contains("not among its 2 most likely"));
    }

    /// A flat distribution: the third candidate is as near a tie as the second.
    #[test]
    fn any_nearly_tied_alternative_is_accepted() {
        let three = vec![vec![Scored { token: 5, logprob: -2.40 }, Scored { token: 6, logprob: -2.52 }, Scored { token: 7, logprob: -2.60 }, Scored { token: 8, logprob: -3.10 }]];
        let a = compare(&[5], &three, &[7], 0.5).unwrap();
        assert_eq!(a.agreed, 0);
        assert!((a.parted_at_tie.unwrap().1 - 0.20).abs() < 1e-6);
        // The fourth is 0.7 nats below: not a tie.
        assert!(compare(&[5], &three, &[8], 0.5).unwrap_err().contains("0.700 nats less likely"));
    }
}
