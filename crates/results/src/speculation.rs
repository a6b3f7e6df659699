//! What speculative decoding did at a point, from its requests' and passes' records: how
//! many drafted tokens the target accepted, how many tokens each pass yielded, and what the
//! drafting and the verify passes cost beside plain decode passes.

use lx_client::records::RequestRecord;
use lx_client::stats::median;

use crate::results::PointResult;
use crate::studies::numbers::fixed;

/// One point's speculative decoding, over its completed requests.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecSummary {
    /// The drafter and its settings (`lookup n2-4 d8`).
    pub label: String,
    pub drafted: u64,
    pub accepted: u64,
    /// Verify passes (passes in which a request had a draft).
    pub verify_passes: u64,
    /// Output tokens after the first, per pass that produced any of them: 1 without drafts.
    pub tokens_per_pass: f64,
    /// Time spent drafting, per request (outside the passes).
    pub draft_ms_per_request: f64,
    /// Median wall time of a pass with drafts in it, and of a decode-only pass without.
    pub verify_pass_ms_p50: f64,
    pub plain_pass_ms_p50: f64,
}

impl SpecSummary {
    /// Accepted ÷ drafted.
    pub fn acceptance(&self) -> f64 {
        self.accepted as f64 / self.drafted as f64
    }

    /// Accepted drafted tokens per verify pass.
    pub fn accepted_per_pass(&self) -> f64 {
        self.accepted as f64 / self.verify_passes as f64
    }

    /// The summary of `p`, or none when its traffic did not speculate.
    pub fn of(p: &PointResult) -> Option<SpecSummary> {
        if !p.traffic.spec.is_on() {
            return None;
        }
        let ok: Vec<&RequestRecord> = p.samples.iter().filter(|r| r.ok()).collect();
        let tally = |f: fn(&lx_client::records::SpecTally) -> u64| ok.iter().filter_map(|r| r.spec.as_ref()).map(f).sum::<u64>();
        let later_tokens: usize = ok.iter().map(|r| r.tokens.len().saturating_sub(1)).sum();
        let decode_passes: usize = ok.iter().map(|r| distinct(&r.token_steps[r.token_steps.len().min(1)..])).sum();
        let draft_ms: f64 = ok.iter().filter_map(|r| r.spec.as_ref()).map(|s| s.draft_ms).sum();
        let pass_ms = |verify: bool| {
            let ms: Vec<f64> = p.steps.iter().filter(|s| (s.draft_tokens > 0) == verify && s.prefill_tokens == 0).map(|s| s.end_ms - s.start_ms).collect();
            median(&ms)
        };
        Some(SpecSummary {
            label: p.traffic.spec.label(),
            drafted: tally(|s| u64::from(s.drafted)),
            accepted: tally(|s| u64::from(s.accepted)),
            verify_passes: tally(|s| u64::from(s.passes)),
            tokens_per_pass: later_tokens as f64 / decode_passes as f64,
            draft_ms_per_request: draft_ms / ok.len() as f64,
            verify_pass_ms_p50: pass_ms(true),
            plain_pass_ms_p50: pass_ms(false),
        })
    }
}

/// Distinct values of a non-decreasing list.
fn distinct(steps: &[u64]) -> usize {
    steps.windows(2).filter(|w| w[0] != w[1]).count() + usize::from(!steps.is_empty())
}

/// The table of every point that speculated (nothing when none did), as `lx sweep` prints it
/// under its table and `lx show --table speculation` alone.
pub fn speculation_table(points: &[PointResult]) -> Vec<String> {
    let rows: Vec<(&PointResult, SpecSummary)> = points.iter().filter_map(|p| SpecSummary::of(p).map(|s| (p, s))).collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        "| backend | policy | test | drafted | accepted | acceptance | accepted per verify pass | tokens per pass | draft ms per request | verify pass ms p50 | plain decode pass ms p50 |".to_string(),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".to_string(),
    ];
    for (p, s) in rows {
        lines.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.backend,
            p.policy_label(),
            p.row_name(),
            s.drafted,
            s.accepted,
            if s.drafted > 0 { format!("{:.1}%", 100.0 * s.acceptance()) } else { "-".into() },
            fixed(s.accepted_per_pass(), 2),
            fixed(s.tokens_per_pass, 2),
            fixed(s.draft_ms_per_request, 3),
            fixed(s.verify_pass_ms_p50, 2),
            fixed(s.plain_pass_ms_p50, 2),
        ));
    }
    lines
}
