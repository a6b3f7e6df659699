//! Speculative decoding's drafting side: which tokens to propose for a sequence before the
//! target model verifies them all in one pass (the verifying, and running a draft model, are
//! the scheduler's).
//!
//! Prompt lookup drafts without a second model: the tokens that followed the latest earlier
//! occurrence of the sequence's last n tokens, in its own prompt and output only (a draft
//! never comes from another request, so a repeated prompt does not make the next request's
//! drafts free). The draft length adapts to each sequence's recent acceptance, down to not
//! drafting at all for a while, because a verify pass of wrong drafts costs more than a plain
//! decode pass and gains nothing.

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
    /// Adapt each sequence's draft length to its recent acceptance (down to not drafting);
    /// false drafts `draft_max` whenever a match is found, as llama.cpp's `llama-lookup` does.
    pub adaptive: bool,
}

impl Default for Speculation {
    fn default() -> Self {
        Speculation { drafter: Drafter::None, ngram_max: 4, ngram_min: 2, draft_max: 8, adaptive: true }
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

    /// `lookup n2-4 d8`, `draft d8 fixed`: the settings on one line, as tables and names show them.
    pub fn label(&self) -> String {
        let fixed = if self.adaptive { "" } else { " fixed" };
        match self.drafter {
            Drafter::None => "none".into(),
            Drafter::Lookup => format!("lookup n{}-{} d{}{fixed}", self.ngram_min, self.ngram_max, self.draft_max),
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

/// One sequence's draft length, adapted to how its drafts fared: all accepted, twice as many
/// next time; some, one more than were accepted; none, half as many, and at none a pause
/// (longer after each failure in a row) before one token is tried again. A verify pass of
/// wrong drafts costs more than a plain pass: on a 2-core EPYC with the default model's
/// 262k-token vocabulary, where every drafted position needs its own logits, a pass of 1 + 8
/// tokens took 4.9 plain passes' time. So drafting backs off fast where drafts fail, and
/// a text that turns repetitive later is still caught.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftLength {
    max: u32,
    next: u32,
    /// Passes left without drafting.
    pause: u32,
    /// How long the next pause lasts; doubles with each failure in a row.
    backoff: u32,
    adaptive: bool,
}

/// The longest pause, in passes.
const MAX_PAUSE: u32 = 64;

impl DraftLength {
    pub fn new(s: &Speculation) -> Self {
        DraftLength { max: s.draft_max, next: s.draft_max, pause: 0, backoff: 1, adaptive: s.adaptive }
    }

    /// How many tokens this pass may draft (0 while paused). Counts the pass.
    pub fn allowed(&mut self) -> u32 {
        if self.pause > 0 {
            self.pause -= 1;
            return 0;
        }
        self.next
    }

    /// After a verify pass: the first `accepted` of `drafted` tokens agreed with the target.
    pub fn update(&mut self, drafted: u32, accepted: u32) {
        if !self.adaptive || drafted == 0 {
            return;
        }
        if accepted == drafted {
            self.next = (self.next * 2).clamp(1, self.max);
            self.backoff = 1;
        } else if accepted > 0 {
            self.next = (accepted + 1).min(self.max);
            self.backoff = 1;
        } else {
            self.next /= 2;
            if self.next == 0 {
                self.pause = self.backoff;
                self.backoff = (self.backoff * 2).min(MAX_PAUSE);
                self.next = 1;
            }
        }
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
    fn the_draft_length_follows_acceptance_down_to_a_pause() {
        let s = Speculation { drafter: Drafter::Lookup, ngram_max: 3, ngram_min: 1, draft_max: 8, adaptive: true };
        let mut d = DraftLength::new(&s);
        assert_eq!(d.allowed(), 8);
        d.update(8, 3);
        assert_eq!(d.allowed(), 4, "one more than were accepted");
        d.update(4, 4);
        assert_eq!(d.allowed(), 8, "all accepted: twice as many, at most draft_max");
        // Failing drafts halve it, then pause one pass, then two, then four...
        for expect in [4, 2, 1] {
            d.update(8, 0);
            assert_eq!(d.allowed(), expect);
        }
        let mut pauses = Vec::new();
        for _ in 0..4 {
            d.update(1, 0);
            let mut paused = 0;
            while d.allowed() == 0 {
                paused += 1;
            }
            pauses.push(paused);
        }
        assert_eq!(pauses, vec![1, 2, 4, 8]);
        // A success ends the backoff.
        d.update(1, 1);
        assert_eq!(d.allowed(), 2);
        d.update(2, 0);
        assert_eq!(d.allowed(), 1);
        d.update(1, 0);
        assert_eq!((d.allowed(), d.allowed()), (0, 1), "a pause of one pass again");

        // Fixed: always draft_max.
        let mut fixed = DraftLength::new(&Speculation { adaptive: false, ..s });
        fixed.update(8, 0);
        assert_eq!(fixed.allowed(), 8);
    }

    #[test]
    fn settings_are_checked_and_named() {
        let on = Speculation { drafter: Drafter::Lookup, ..Default::default() };
        assert_eq!(on.label(), "lookup n2-4 d8");
        assert_eq!(Speculation { adaptive: false, ..on }.label(), "lookup n2-4 d8 fixed");
        assert_eq!(Speculation::default().label(), "none");
        assert!(on.validate().is_ok());
        assert_eq!(Speculation { ngram_min: 5, ..on }.validate().unwrap_err().field, "spec_ngram_min");
        assert_eq!(Speculation { draft_max: 0, ..on }.validate().unwrap_err().field, "spec_draft_max");
        assert!(Speculation { draft_max: 0, ..Default::default() }.validate().is_ok(), "off: nothing to check");
        assert_eq!("lookup".parse::<Drafter>(), Ok(Drafter::Lookup));
        assert_eq!(Speculation { drafter: Drafter::Draft, adaptive: false, ..on }.label(), "draft d8 fixed");
        assert!("model".parse::<Drafter>().unwrap_err().contains("none, lookup or draft"));
    }
}
