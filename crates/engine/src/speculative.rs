//! Speculative decoding's drafting side: which tokens to propose for a sequence before the
//! target model verifies them all in one pass (the verifying, and running a draft model, are
//! the scheduler's).
//!
//! Prompt lookup drafts without a second model: the tokens that followed the latest earlier
//! occurrence of the sequence's last n tokens, in its own prompt and output only (a draft
//! never comes from another request, so a repeated prompt does not make the next request's
//! drafts free). How much each sequence drafts is planned pass by pass ([`plan`]): a drafted
//! position is worth its cost only when it is likely enough to hold, and what it costs
//! depends on the machine (almost nothing on a GPU; most of a pass on a small CPU, where each
//! position needs its own logits over a large vocabulary), so the plan weighs each
//! sequence's recent acceptance against the measured cost of passes of each size, down to
//! not drafting at all.

use serde::{Deserialize, Serialize};

use crate::backend::TokenId;
use crate::invalid::Invalid;

/// Where drafts come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Drafter {
    /// Plain decoding: one token per sequence per pass.
    #[default]
    None,
    /// Prompt lookup: n-gram matches in the sequence's own prompt and output.
    Lookup,
    /// A draft model that shares the target's vocabulary, loaded beside it in the same
    /// worker with a KV cache of its own, decoding greedily.
    Draft,
}

impl Drafter {
    pub const ALL: [Drafter; 3] = [Drafter::None, Drafter::Lookup, Drafter::Draft];

    pub fn name(self) -> &'static str {
        match self {
            Drafter::None => "none",
            Drafter::Lookup => "lookup",
            Drafter::Draft => "draft",
        }
    }
}

impl std::fmt::Display for Drafter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Drafter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Drafter::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| format!("unknown drafter '{s}' (expected none, lookup or draft)"))
    }
}

/// Speculative decoding's settings, recorded with every point that uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct Speculation {
    pub drafter: Drafter,
    /// Longest n-gram matched (tried first).
    pub ngram_max: u32,
    /// Shortest n-gram matched.
    pub ngram_min: u32,
    /// Most tokens drafted for one sequence in one pass.
    pub draft_max: u32,
    /// Plan each pass's drafts from each sequence's recent acceptance and what passes of
    /// each size cost on this machine (down to not drafting); false drafts `draft_max`
    /// whenever a match is found, as llama.cpp's `llama-lookup` does.
    pub adaptive: bool,
    /// Prompt lookup also matches what earlier requests on the worker wrote (prompt and
    /// output), as llama.cpp's lookup cache does, where its own text has no match (a draft
    /// model ignores it). A repeated prompt then drafts its answer for free: real for a
    /// service that gets the same questions, flattering for a benchmark that repeats its
    /// prompts. Off unless asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_cache: bool,
}

impl Default for Speculation {
    fn default() -> Self {
        Speculation { drafter: Drafter::None, ngram_max: 4, ngram_min: 2, draft_max: 12, adaptive: true, shared_cache: false }
    }
}

impl Speculation {
    pub fn is_on(&self) -> bool {
        self.drafter != Drafter::None
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        if !self.is_on() {
            return Ok(());
        }
        if self.ngram_min == 0 || self.ngram_min > self.ngram_max {
            return Err(Invalid::new("spec_ngram_min", format!("--spec-ngram-min {} must be at least 1 and at most --spec-ngram-max {}", self.ngram_min, self.ngram_max)));
        }
        if self.draft_max == 0 {
            return Err(Invalid::new("spec_draft_max", "--spec-draft-max must be at least 1 token"));
        }
        Ok(())
    }

    /// `lookup n2-4 d8`, `draft d8 fixed`, `lookup n2-4 d8 shared`: the settings on one line,
    /// as tables and names show them.
    pub fn label(&self) -> String {
        let fixed = if self.adaptive { "" } else { " fixed" };
        let shared = if self.shared_cache { " shared" } else { "" };
        match self.drafter {
            Drafter::None => "none".into(),
            Drafter::Lookup => format!("lookup n{}-{} d{}{fixed}{shared}", self.ngram_min, self.ngram_max, self.draft_max),
            Drafter::Draft => format!("draft d{}{fixed}", self.draft_max),
        }
    }
}

/// Up to `k` tokens that followed the latest earlier occurrence of the text's last n tokens,
/// for n from `ngram_max` down to `ngram_min` (the longest match wins). The text is `prompt`
/// followed by `generated`.
pub fn lookup(prompt: &[TokenId], generated: &[TokenId], ngram_min: usize, ngram_max: usize, k: usize) -> Vec<TokenId> {
    let len = prompt.len() + generated.len();
    let at = |i: usize| if i < prompt.len() { prompt[i] } else { generated[i - prompt.len()] };
    if k == 0 {
        return Vec::new();
    }
    for n in (ngram_min.max(1)..=ngram_max).rev() {
        if len <= n {
            continue;
        }
        let tail = len - n;
        // Latest first: in a copy, the place being copied is the most recent match.
        for start in (0..tail).rev() {
            if (0..n).all(|j| at(start + j) == at(tail + j)) {
                let from = start + n;
                return (from..(from + k).min(len)).map(at).collect();
            }
        }
    }
    Vec::new()
}

/// What earlier requests on a worker wrote, for prompt lookup's shared cache: each finished
/// request's text (prompt and output), the most recent [`SHARED_TOKENS`] tokens in all, with
/// every n-gram indexed by where its latest occurrence ends, so a lookup costs one hash per n
/// however much is kept. A match never runs from one request's text into the next's.
#[derive(Debug, Default)]
pub struct SharedText {
    /// The texts kept, oldest first; `first` numbers the oldest.
    texts: std::collections::VecDeque<Vec<TokenId>>,
    first: u64,
    tokens: usize,
    /// The n-grams indexed (shortest, longest), as the settings were when it was filled.
    ngrams: (usize, usize),
    /// An n-gram -> (text number, the position after its latest occurrence). Entries of texts
    /// let go are skipped, and dropped when the index is rebuilt.
    index: std::collections::HashMap<Vec<TokenId>, (u64, usize)>,
}

/// The most tokens a shared cache keeps (the oldest texts go first).
pub const SHARED_TOKENS: usize = 1 << 16;

impl SharedText {
    /// Keep `text` (a finished request's prompt and output) for later requests' lookups.
    pub fn add(&mut self, text: Vec<TokenId>, ngram_min: usize, ngram_max: usize) {
        let ngrams = (ngram_min.max(1), ngram_max);
        if ngrams != self.ngrams {
            *self = SharedText { ngrams, ..SharedText::default() };
        }
        let text = if text.len() > SHARED_TOKENS { text[text.len() - SHARED_TOKENS..].to_vec() } else { text };
        let number = self.first + self.texts.len() as u64;
        Self::index_text(&mut self.index, self.ngrams, number, &text);
        self.tokens += text.len();
        self.texts.push_back(text);
        while self.tokens > SHARED_TOKENS {
            let gone = self.texts.pop_front().expect("tokens are in texts");
            self.tokens -= gone.len();
            self.first += 1;
        }
        // Stale entries of texts let go stay until they outnumber the live ones.
        let (lo, hi) = self.ngrams;
        if self.index.len() > 2 * (hi + 1 - lo.min(hi + 1)) * SHARED_TOKENS {
            self.index.clear();
            for (i, t) in self.texts.iter().enumerate() {
                Self::index_text(&mut self.index, self.ngrams, self.first + i as u64, t);
            }
        }
    }

    fn index_text(index: &mut std::collections::HashMap<Vec<TokenId>, (u64, usize)>, (lo, hi): (usize, usize), number: u64, text: &[TokenId]) {
        // Only n-grams something follows: a match must have a continuation to draft.
        for end in 1..text.len() {
            for n in lo..=hi.min(end) {
                index.insert(text[end - n..end].to_vec(), (number, end));
            }
        }
    }

    /// Up to `k` tokens that followed the latest kept occurrence of the last n tokens of
    /// `tail`, for the longest n that has one (from the n-grams indexed, within
    /// `ngram_min..=ngram_max`).
    pub fn lookup(&self, tail: &[TokenId], ngram_min: usize, ngram_max: usize, k: usize) -> Vec<TokenId> {
        let (lo, hi) = (ngram_min.max(self.ngrams.0), ngram_max.min(self.ngrams.1));
        for n in (lo..=hi).rev() {
            if tail.len() < n {
                continue;
            }
            let Some(&(number, end)) = self.index.get(&tail[tail.len() - n..]) else { continue };
            let Some(text) = number.checked_sub(self.first).and_then(|i| self.texts.get(i as usize)) else { continue };
            return text[end..(end + k).min(text.len())].to_vec();
        }
        Vec::new()
    }

    /// Tokens kept.
    pub fn len(&self) -> usize {
        self.tokens
    }

    pub fn is_empty(&self) -> bool {
        self.tokens == 0
    }
}

/// How likely a sequence's next drafted token is to hold: the share of its recent draft
/// positions the target agreed with (a verify pass that accepted `a` of `d` counts `a` held
/// and, when `a < d`, one failed; what came after the first failure was never tested). Older
/// evidence fades, so a text that turns repetitive (a model falling into a loop) is drafted
/// for within a few tokens, and one that stops repeating is left alone as quickly. It starts
/// hopeful, so a new sequence tries drafting at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Acceptance {
    held: f64,
    failed: f64,
}

/// The weight each update leaves to what came before.
const REMEMBER: f64 = 0.75;

impl Default for Acceptance {
    fn default() -> Self {
        Acceptance { held: 4.0, failed: 1.0 }
    }
}

impl Acceptance {
    /// The chance that a drafted token holds, given the ones before it did.
    pub fn rate(&self) -> f64 {
        self.held / (self.held + self.failed)
    }

    /// After a verify pass: the first `accepted` of `drafted` tokens agreed with the target.
    /// A plain pass can count too: a draft proposed but not sent (a shadow) is one position
    /// drafted, accepted when the target chose the same token.
    pub fn record(&mut self, drafted: u32, accepted: u32) {
        if drafted == 0 {
            return;
        }
        self.held = self.held * REMEMBER + f64::from(accepted);
        self.failed = self.failed * REMEMBER + f64::from(u8::from(accepted < drafted));
    }
}

/// What a decode pass costs on this machine by how many positions it asks logits for (each
/// decoding sequence's newest token, plus every drafted token), as measured from the passes
/// run so far. On a GPU one more position costs almost nothing; on a 2-core CPU with a
/// 262k-token vocabulary a second position cost 0.8 of a whole one-position pass, and 1 + 8
/// cost 4.7 passes (llama.cpp, `docs/results/verify-cost-amd-avx512.txt`), so whether drafting
/// pays depends on the machine as much as on the drafts.
#[derive(Debug, Clone, Default)]
pub struct PassCosts {
    /// Nanoseconds by positions - 1: a running average, None where no pass of that size ran.
    ns: Vec<Option<f64>>,
}

/// The weight of a new measurement in a size's running average.
const COST_WEIGHT: f64 = 0.3;
/// Before a second size is measured, one more position is assumed to cost this share of a
/// one-position pass: low, so a size not tried yet looks worth trying (and then is measured).
const HOPEFUL_POSITION_COST: f64 = 0.2;

impl PassCosts {
    /// A decode pass (no prompt tokens in it) of `positions` outputs took `ns`.
    pub fn observe(&mut self, positions: usize, ns: u64) {
        if positions == 0 {
            return;
        }
        if self.ns.len() < positions {
            self.ns.resize(positions, None);
        }
        running_average(&mut self.ns[positions - 1], ns as f64);
    }

    /// The largest pass measured, in positions (0 before any).
    pub fn largest(&self) -> usize {
        self.ns.iter().rposition(Option::is_some).map_or(0, |i| i + 1)
    }

    /// The expected time of a pass of `positions` outputs: measured where a pass of that size
    /// ran, else along the line between the nearest measured sizes. Beyond the largest it is
    /// hopeful: each further position costs the least of [`HOPEFUL_POSITION_COST`] of a
    /// one-position pass and the slope from the smallest measured size to the largest. So a
    /// larger size that might pay is tried once and then known: costs jump with size on a
    /// CPU (a pass of 5 positions cost 1.5 of one of 4), and a line through the last jump
    /// would rule out every larger size unmeasured. None before any pass.
    pub fn estimate(&self, positions: usize) -> Option<f64> {
        let measured = |i: usize| self.ns.get(i).copied().flatten().map(|ns| (i + 1, ns));
        if let Some((_, ns)) = measured(positions.checked_sub(1)?) {
            return Some(ns);
        }
        let below = (0..positions.saturating_sub(1).min(self.ns.len())).rev().find_map(measured);
        let above = (positions..self.ns.len()).find_map(measured);
        match (below, above) {
            (Some((p0, t0)), Some((p1, t1))) => Some(t0 + (t1 - t0) * (positions - p0) as f64 / (p1 - p0) as f64),
            (Some((p0, t0)), None) => {
                let (ps, ts) = (0..p0).find_map(measured).expect("p0 itself is measured");
                let hopeful = HOPEFUL_POSITION_COST * ts / (1.0 + HOPEFUL_POSITION_COST * (ps - 1) as f64);
                let slope = if ps < p0 { hopeful.min(((t0 - ts) / (p0 - ps) as f64).max(0.0)) } else { hopeful };
                Some(t0 + slope * (positions - p0) as f64)
            }
            (None, Some((p1, t1))) => Some(t1 * positions as f64 / p1 as f64),
            (None, None) => None,
        }
    }
}

/// Fold a new measurement into a running average of the costs drafting is planned by (the
/// first measurement is the average).
pub fn running_average(avg: &mut Option<f64>, new: f64) {
    *avg = Some(avg.map_or(new, |a| a + COST_WEIGHT * (new - a)));
}

/// A decoding sequence's part in planning a pass: the chance each drafted token holds, the
/// most it could draft, and what starting to draft costs it (a draft model first reads the
/// text its cache has not seen; prompt lookup, nothing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub acceptance: f64,
    pub most: usize,
    pub setup_ns: f64,
}

/// How many tokens each candidate drafts in a pass of `decoding` sequences: the total that
/// makes the pass yield the most tokens per second, by the measured costs of passes of each
/// size and each sequence's acceptance. A sequence whose drafts hold with chance `a` yields
/// `1 + a + a² + ... + aᵏ` tokens from `k` drafted, so any given total goes to the positions
/// likeliest to hold; nothing where no total beats plain decoding. `draft_ns` is what
/// drafting one more token costs before the pass (a draft model's pass; prompt lookup's
/// microseconds count as nothing), and each candidate's `setup_ns` counts once it drafts.
///
/// Before any pass was measured, a candidate that costs nothing to start drafts all it can
/// (that is how the costs get measured); one with a cost to start waits for a plain pass.
pub fn plan(candidates: &[Candidate], decoding: usize, costs: &PassCosts, draft_ns: f64) -> Vec<usize> {
    let mut out = vec![0; candidates.len()];
    let Some(plain) = costs.estimate(decoding) else {
        return candidates.iter().map(|c| if c.setup_ns > 0.0 { 0 } else { c.most }).collect();
    };
    // Every candidate's next position in the order of its chance to hold (a candidate's own
    // chances fall with each position, so its first comes first).
    let mut gains: Vec<(f64, usize)> = candidates
        .iter()
        .enumerate()
        .flat_map(|(i, c)| (1..=c.most).scan(1.0, move |p, _| {
            *p *= c.acceptance;
            Some((*p, i))
        }))
        .collect();
    gains.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut best, mut best_rate, mut tokens, mut setup) = (0, decoding as f64 / plain, decoding as f64, 0.0);
    let mut started = vec![false; candidates.len()];
    for (k, &(gain, i)) in gains.iter().enumerate() {
        tokens += gain;
        if !std::mem::replace(&mut started[i], true) {
            setup += candidates[i].setup_ns;
        }
        let rate = tokens / (costs.estimate(decoding + k + 1).unwrap_or(plain) + draft_ns * (k + 1) as f64 + setup);
        if rate > best_rate {
            (best, best_rate) = (k + 1, rate);
        }
    }
    for &(_, i) in &gains[..best] {
        out[i] += 1;
    }
    out
}

/// When the plan gives a sequence drafting with a draft model nothing, one token is drafted
/// now and then anyway, so its acceptance is learnt again (prompt lookup needs no probe: its
/// proposals cost microseconds and are checked against what plain decoding writes). The wait
/// between probes doubles, up to `MAX_WAIT` passes, until the plan itself drafts again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    wait: u32,
    backoff: u32,
}

/// The longest wait between probes, in passes.
const MAX_WAIT: u32 = 64;

impl Default for Probe {
    fn default() -> Self {
        Probe { wait: 1, backoff: 1 }
    }
}

impl Probe {
    /// The plan gave the sequence nothing this pass: true when it probes instead.
    pub fn due(&mut self) -> bool {
        self.wait = self.wait.saturating_sub(1);
        if self.wait > 0 {
            return false;
        }
        self.backoff = (self.backoff * 2).min(MAX_WAIT);
        self.wait = self.backoff;
        true
    }

    /// The plan gave the sequence a draft: the next probe comes one pass after it stops.
    pub fn planned(&mut self) {
        *self = Probe::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_continues_the_latest_match_of_the_longest_ngram() {
        // "a b c d x a b c" -> the 3-gram "a b c" occurred at 0, followed by "d x a b c".
        let prompt = [1, 2, 3, 4, 9, 1, 2];
        let generated = [3];
        assert_eq!(lookup(&prompt, &generated, 1, 3, 4), vec![4, 9, 1, 2]);
        assert_eq!(lookup(&prompt, &generated, 1, 3, 2), vec![4, 9]);
        // The latest occurrence wins: "5 7" is followed by 8 the first time and 6 the second.
        assert_eq!(lookup(&[5, 7, 8, 5, 7, 6, 1], &[5, 7], 2, 2, 1), vec![6]);
        // A longer n-gram beats a later shorter one: "1 2" -> 3 at 0, but "2" alone -> 7 at 3.
        assert_eq!(lookup(&[1, 2, 3, 2, 7, 1], &[2], 1, 2, 1), vec![3]);
        // No match of at least ngram_min tokens: nothing.
        assert_eq!(lookup(&[1, 2, 3], &[4, 5], 2, 3, 4), Vec::<TokenId>::new());
        assert_eq!(lookup(&[1, 2, 3], &[4, 2], 1, 1, 4), vec![3, 4, 2]);
        // A match at the very end supplies only what follows it.
        assert_eq!(lookup(&[7, 7], &[7], 1, 1, 5), vec![7]);
        assert_eq!(lookup(&[1], &[], 1, 4, 3), Vec::<TokenId>::new());
        assert_eq!(lookup(&[1, 2, 1], &[2], 1, 4, 0), Vec::<TokenId>::new());
    }

    #[test]
    fn the_shared_text_finds_the_latest_match_in_earlier_requests_only_within_one() {
        let mut shared = SharedText::default();
        assert_eq!(shared.lookup(&[1, 2], 1, 3, 4), Vec::<TokenId>::new());
        shared.add(vec![1, 2, 3, 4, 5], 1, 3);
        shared.add(vec![9, 2, 3, 7], 1, 3);
        // "2 3" ends at 3 in both; the later text wins.
        assert_eq!(shared.lookup(&[8, 2, 3], 1, 3, 4), vec![7]);
        // The longest n-gram wins over a later shorter one: "1 2 3" is only in the first.
        assert_eq!(shared.lookup(&[1, 2, 3], 1, 3, 2), vec![4, 5]);
        // A match at a text's end has nothing to draft, and never runs into the next text.
        assert_eq!(shared.lookup(&[5], 1, 3, 4), Vec::<TokenId>::new());
        assert_eq!(shared.lookup(&[3, 4, 5], 1, 3, 4), Vec::<TokenId>::new());
        assert_eq!(shared.lookup(&[3, 4], 1, 3, 4), vec![5]);
        // Only the n-grams asked for: "3" alone matches, but not with n of 2 at least.
        assert_eq!(shared.lookup(&[6, 3], 1, 3, 1), vec![7]);
        assert_eq!(shared.lookup(&[6, 3], 2, 3, 1), Vec::<TokenId>::new());
        assert_eq!(shared.len(), 9);
        // The oldest text goes first once more than SHARED_TOKENS are kept.
        shared.add(vec![0; SHARED_TOKENS - 4], 1, 3);
        assert_eq!(shared.len(), SHARED_TOKENS);
        assert_eq!(shared.lookup(&[3, 4], 1, 3, 2), Vec::<TokenId>::new(), "the first text was let go");
        assert_eq!(shared.lookup(&[2, 3], 1, 3, 2), vec![7]);
    }

    #[test]
    fn acceptance_follows_recent_drafts() {
        let mut a = Acceptance::default();
        assert_eq!(a.rate(), 0.8, "a new sequence starts hopeful");
        for _ in 0..4 {
            a.record(1, 0);
        }
        let low = a.rate();
        assert!(low < 0.4, "{low}");
        // One pass of eight held drafts outweighs four failures.
        a.record(8, 8);
        assert!(a.rate() > 0.75, "{}", a.rate());
        // A partial acceptance counts what held and one failure; nothing drafted, nothing.
        let mut b = Acceptance::default();
        b.record(5, 2);
        assert_eq!(b.rate(), (3.0 + 2.0) / (3.0 + 2.0 + 0.75 + 1.0));
        b.record(0, 0);
        assert_eq!(b.rate(), (3.0 + 2.0) / (3.0 + 2.0 + 0.75 + 1.0));
    }

    #[test]
    fn pass_costs_are_measured_and_filled_in_between() {
        let mut c = PassCosts::default();
        assert_eq!((c.estimate(1), c.largest()), (None, 0));
        c.observe(1, 10);
        // One size measured: others hopefully cheap (each position 0.2 of a pass).
        assert_eq!(c.estimate(1), Some(10.0));
        assert_eq!(c.estimate(6), Some(20.0));
        c.observe(9, 50);
        assert_eq!(c.estimate(5), Some(30.0), "on the line between 1 and 9");
        assert_eq!(c.largest(), 9);
        assert_eq!(c.estimate(13), Some(58.0), "beyond: hopeful, 0.2 of a one-position pass each");
        let mut flat = PassCosts::default();
        flat.observe(1, 100);
        flat.observe(5, 104);
        assert_eq!(flat.estimate(9), Some(108.0), "beyond: the slope so far, where it is lower");
        c.observe(9, 60);
        assert_eq!(c.estimate(9), Some(53.0), "a running average");
        let mut only_large = PassCosts::default();
        only_large.observe(4, 40);
        assert_eq!(only_large.estimate(2), Some(20.0));
        assert_eq!(only_large.estimate(0), None);
    }

    /// Costs like a 2-core CPU's: a second position costs most of a pass.
    fn cpu_like() -> PassCosts {
        let mut c = PassCosts::default();
        for (positions, ms) in [(1, 12.6), (2, 23.5), (3, 28.1), (4, 31.9), (5, 47.7), (9, 64.7), (17, 92.6)] {
            c.observe(positions, (ms * 1e6) as u64);
        }
        c
    }

    /// Costs like a GPU's: positions are nearly free.
    fn gpu_like() -> PassCosts {
        let mut c = PassCosts::default();
        c.observe(1, 10_000_000);
        c.observe(17, 11_000_000);
        c
    }

    #[test]
    fn the_plan_drafts_where_it_pays_on_this_machine() {
        let one = |acceptance, most| [Candidate { acceptance, most, setup_ns: 0.0 }];
        // Drafts that mostly fail: nothing on a CPU, all of it on a GPU.
        assert_eq!(plan(&one(0.6, 8), 1, &cpu_like(), 0.0), vec![0]);
        assert_eq!(plan(&one(0.6, 8), 1, &gpu_like(), 0.0), vec![8]);
        // Drafts that hold: long ones on a CPU too (17 positions cost 7.3 passes, and yield
        // about 13 tokens at 97%).
        assert_eq!(plan(&one(0.97, 16), 1, &cpu_like(), 0.0), vec![16]);
        // A draft model's own time counts: at 12 ms a token it never pays on the CPU.
        assert_eq!(plan(&one(0.97, 16), 1, &cpu_like(), 12e6), vec![0]);
        // So does catching its cache up: on the GPU, 100 ms of it (ten passes) for 16 drafts
        // that bring 7.5 tokens does not pay; 5 ms does.
        let behind = |setup_ns| [Candidate { acceptance: 0.9, most: 16, setup_ns }];
        assert_eq!(plan(&behind(100e6), 1, &gpu_like(), 0.0), vec![0]);
        assert_eq!(plan(&behind(5e6), 1, &gpu_like(), 0.0), vec![16]);
        // Several sequences: the positions go to the likeliest.
        let two = [Candidate { acceptance: 0.99, most: 4, setup_ns: 0.0 }, Candidate { acceptance: 0.3, most: 4, setup_ns: 0.0 }];
        // On the GPU the unlikely sequence's third position (9% to be reached and hold)
        // brings less than the pass's average.
        assert_eq!(plan(&two, 2, &gpu_like(), 0.0), vec![4, 2]);
        let lengths = plan(&two, 2, &cpu_like(), 0.0);
        assert_eq!(lengths[1], 0, "{lengths:?}");
        assert!(lengths[0] > 0, "{lengths:?}");
        // Before any pass was measured: as much as each can, unless starting costs something.
        assert_eq!(plan(&two, 2, &PassCosts::default(), 0.0), vec![4, 4]);
        assert_eq!(plan(&behind(1.0), 1, &PassCosts::default(), 0.0), vec![0]);
        // Nothing to draft.
        assert_eq!(plan(&one(0.9, 0), 1, &cpu_like(), 0.0), vec![0]);
    }

    #[test]
    fn probes_come_less_often_until_the_plan_drafts_again() {
        let mut p = Probe::default();
        let mut probes = Vec::new();
        for pass in 0..40 {
            if p.due() {
                probes.push(pass);
            }
        }
        assert_eq!(probes, vec![0, 2, 6, 14, 30]);
        p.planned();
        assert!(p.due(), "right after the plan stops drafting");
    }

    #[test]
    fn settings_are_checked_and_named() {
        let on = Speculation { drafter: Drafter::Lookup, ..Default::default() };
        assert_eq!(on.label(), "lookup n2-4 d12");
        assert_eq!(Speculation { adaptive: false, ..on }.label(), "lookup n2-4 d12 fixed");
        assert_eq!(Speculation::default().label(), "none");
        assert!(on.validate().is_ok());
        assert_eq!(Speculation { ngram_min: 5, ..on }.validate().unwrap_err().field, "spec_ngram_min");
        assert_eq!(Speculation { draft_max: 0, ..on }.validate().unwrap_err().field, "spec_draft_max");
        assert!(Speculation { draft_max: 0, ..Default::default() }.validate().is_ok(), "off: nothing to check");
        assert_eq!("lookup".parse::<Drafter>(), Ok(Drafter::Lookup));
        assert_eq!(Speculation { drafter: Drafter::Draft, adaptive: false, ..on }.label(), "draft d12 fixed");
        assert!("model".parse::<Drafter>().unwrap_err().contains("none, lookup or draft"));
        assert_eq!(Speculation { shared_cache: true, ..on }.label(), "lookup n2-4 d12 shared");
    }
}
