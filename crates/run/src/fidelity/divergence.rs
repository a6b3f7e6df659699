//! How far one next-token distribution is from another, position by position, and the
//! figures a run reports over all positions.
//!
//! The reference keeps its best `top` alternatives per position, and the candidate reports
//! its log-probabilities for exactly those tokens, so the divergence is computed over them and
//! the rest of the vocabulary taken as one outcome. That is KL divergence between the two
//! distributions coarsened alike: never above the whole-vocabulary figure, and equal to it
//! but for the reference's mass outside its best `top` (which runs report as `uncovered`).

use lx_engine::backend::{Choice, Scored, TokenId};
use lx_results::studies::fidelity::Fidelity;

/// What the reference gave one position: the log-probability of the text's next token, and
/// its best alternatives, most likely first.
#[derive(Debug, Clone, PartialEq)]
pub struct RefRow {
    pub target: f32,
    pub top: Vec<Scored>,
}

impl RefRow {
    /// From a reference's scored row: asked to score the next token alone, with its best
    /// alternatives.
    pub fn from_choice(c: &Choice) -> Option<RefRow> {
        Some(RefRow { target: c.scored.first()?.logprob, top: c.top.clone() })
    }

    /// The tokens a candidate is asked to score here: the text's next token, then the
    /// reference's alternatives (the order [`position`] reads them in).
    pub fn asks(&self, next: TokenId) -> Vec<TokenId> {
        std::iter::once(next).chain(self.top.iter().map(|s| s.token)).collect()
    }

    /// Probability outside the kept alternatives.
    pub fn uncovered(&self) -> f64 {
        (1.0 - self.top.iter().map(|s| f64::from(s.logprob).exp()).sum::<f64>()).max(0.0)
    }
}

/// One position compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    /// KL(reference ‖ candidate), nats.
    pub kl: f64,
    /// Both put the same token first.
    pub same_top: bool,
    /// The candidate's negative log-likelihood of the text's next token.
    pub nll: f64,
}

/// KL(p ‖ q) over `pairs` of log-probabilities (p's, q's) of the same tokens, with the rest
/// of each distribution as one more outcome.
pub fn coarse_kl(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut kl, mut p_sum, mut q_sum) = (0.0, 0.0, 0.0);
    for (lp, lq) in pairs {
        let p = lp.exp();
        kl += p * (lp - lq);
        p_sum += p;
        q_sum += lq.exp();
    }
    let (p_rest, q_rest) = ((1.0 - p_sum).max(0.0), (1.0 - q_sum).max(f64::MIN_POSITIVE));
    // Below rounding of the sums there is no rest to weigh.
    if p_rest > 1e-9 {
        kl += p_rest * (p_rest.ln() - q_rest.ln());
    }
    kl.max(0.0)
}

/// A candidate's row (asked to score [`RefRow::asks`]) against the reference's.
pub fn position(reference: &RefRow, candidate: &Choice) -> Result<Position, String> {
    let scored = &candidate.scored;
    if scored.len() != reference.top.len() + 1 {
        return Err(format!("the candidate scored {} tokens where {} were asked", scored.len(), reference.top.len() + 1));
    }
    let pairs = reference.top.iter().zip(&scored[1..]).map(|(p, q)| (f64::from(p.logprob), f64::from(q.logprob)));
    let best = reference.top.first().map(|s| s.token);
    Ok(Position { kl: coarse_kl(pairs), same_top: best == Some(candidate.token), nll: -f64::from(scored[0].logprob) })
}

/// Two runs of the same backend compared on the tokens both generated: each position's
/// alternatives from the run decoding without drafts (`plain`) against the drafting run's
/// (`other`), up to the first token where they part (which counts as a disagreement). A
/// token of `plain`'s alternatives missing from `other`'s is given `other`'s least kept
/// log-probability, an upper bound.
pub fn generated(plain: (&[TokenId], &[Vec<Scored>]), other: (&[TokenId], &[Vec<Scored>])) -> Vec<Position> {
    let mut out = Vec::new();
    for ((pt, pa), (ot, oa)) in plain.0.iter().zip(plain.1).zip(other.0.iter().zip(other.1)) {
        let floor = oa.last().map_or(f64::NEG_INFINITY, |s| f64::from(s.logprob));
        let q = |t: TokenId| oa.iter().find(|s| s.token == t).map_or(floor, |s| f64::from(s.logprob));
        let kl = coarse_kl(pa.iter().map(|s| (f64::from(s.logprob), q(s.token))));
        out.push(Position { kl, same_top: pt == ot, nll: f64::NAN });
        if pt != ot {
            break;
        }
    }
    out
}

/// The figures of a run over its positions: the mean, 99th percentile (interpolated between
/// the two nearest ranks, as `llama-perplexity` and most statistics packages take it) and
/// largest divergence, the share of agreeing top choices, and the perplexity where each
/// position has a likelihood.
pub fn summarize(positions: &[Position]) -> Option<Fidelity> {
    let n = positions.len();
    if n == 0 {
        return None;
    }
    let mut kls: Vec<f64> = positions.iter().map(|p| p.kl).collect();
    kls.sort_by(f64::total_cmp);
    let at = 0.99 * (n - 1) as f64;
    let (below, above) = (at.floor() as usize, (at.ceil() as usize).min(n - 1));
    let p99 = kls[below] + (at - below as f64) * (kls[above] - kls[below]);
    let nll: f64 = positions.iter().map(|p| p.nll).sum::<f64>() / n as f64;
    Some(Fidelity {
        mean_kl: kls.iter().sum::<f64>() / n as f64,
        p99_kl: p99,
        max_kl: kls[n - 1],
        top1_agreement: positions.iter().filter(|p| p.same_top).count() as f64 / n as f64,
        perplexity: nll.is_finite().then(|| nll.exp()),
        positions: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(pairs: &[(TokenId, f64)]) -> Vec<Scored> {
        pairs.iter().map(|&(token, p)| Scored { token, logprob: p.ln() as f32 }).collect()
    }

    /// KL over a whole small distribution, by its definition.
    fn exact(p: &[f64], q: &[f64]) -> f64 {
        p.iter().zip(q).map(|(a, b)| a * (a / b).ln()).sum()
    }

    #[test]
    fn a_distribution_kept_whole_gives_the_exact_divergence() {
        let (p, q): ([f64; 3], [f64; 3]) = ([0.5, 0.3, 0.2], [0.4, 0.4, 0.2]);
        let got = coarse_kl(p.iter().zip(&q).map(|(a, b)| (a.ln(), b.ln())));
        assert!((got - exact(&p, &q)).abs() < 1e-12, "{got}");
        assert_eq!(coarse_kl(p.iter().map(|a| (a.ln(), a.ln()))), 0.0);
    }

    #[test]
    fn the_rest_of_the_vocabulary_counts_as_one_outcome() {
        // Keeping two of four tokens: the last two merge (0.2 + 0.1 against 0.1 + 0.1).
        let (p, q): ([f64; 4], [f64; 4]) = ([0.4, 0.3, 0.2, 0.1], [0.5, 0.3, 0.1, 0.1]);
        let got = coarse_kl(p[..2].iter().zip(&q[..2]).map(|(a, b)| (a.ln(), b.ln())));
        let merged = exact(&[0.4, 0.3, 0.3], &[0.5, 0.3, 0.2]);
        assert!((got - merged).abs() < 1e-12, "{got} vs {merged}");
        assert!(got <= exact(&p, &q), "coarsening never adds divergence");
    }

    #[test]
    fn a_position_reads_the_tokens_it_asked_for_in_order() {
        let reference = RefRow { target: 0.3f32.ln(), top: scored(&[(5, 0.6), (9, 0.3)]) };
        assert_eq!(reference.asks(9), vec![9, 5, 9]);
        assert!((reference.uncovered() - 0.1).abs() < 1e-6);
        let candidate = Choice { token: 9, top: Vec::new(), scored: scored(&[(9, 0.5), (5, 0.4), (9, 0.5)]) };
        let p = position(&reference, &candidate).unwrap();
        assert!(!p.same_top);
        assert!((p.nll - -(0.5f64.ln())).abs() < 1e-6);
        assert!((p.kl - exact(&[0.6, 0.3, 0.1], &[0.4, 0.5, 0.1])).abs() < 1e-6);
        let short = Choice { scored: scored(&[(9, 0.5)]), ..candidate };
        assert!(position(&reference, &short).unwrap_err().contains("scored 1 tokens where 3 were asked"));
    }

    #[test]
    fn generated_runs_compare_until_they_part() {
        let a = scored(&[(1, 0.7), (2, 0.2)]);
        let plain_alts = vec![a.clone(), a.clone(), a.clone()];
        let same = generated((&[1, 1, 1], &plain_alts), (&[1, 1, 1], &plain_alts));
        assert_eq!(same.len(), 3);
        assert!(same.iter().all(|p| p.kl == 0.0 && p.same_top));
        let parted = generated((&[1, 1, 1], &plain_alts), (&[1, 2, 2], &plain_alts));
        assert_eq!(parted.len(), 2, "stops at the first token where they part");
        assert!(!parted[1].same_top);
        let f = summarize(&parted).unwrap();
        assert_eq!((f.top1_agreement, f.perplexity, f.positions), (0.5, None, 2));
    }

    #[test]
    fn summaries_take_the_mean_the_99th_percentile_and_the_largest() {
        let positions: Vec<Position> = (1..=200).map(|i| Position { kl: f64::from(i), same_top: i % 2 == 0, nll: 1.0 }).collect();
        let f = summarize(&positions).unwrap();
        assert_eq!((f.mean_kl, f.max_kl, f.top1_agreement), (100.5, 200.0, 0.5));
        assert!((f.p99_kl - 198.01).abs() < 1e-9, "0.99 of the way from the first to the last: {}", f.p99_kl);
        assert!((f.perplexity.unwrap() - std::f64::consts::E).abs() < 1e-12);
        assert!(summarize(&[]).is_none());
    }
}
