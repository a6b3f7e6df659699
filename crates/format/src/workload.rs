//! Exact-length prompts from a fixed corpus of English prose.
//!
//! Latency depends on prompt length, so a prompt of "512 tokens" must be 512 tokens on every
//! backend. [`PromptBuilder`] tokenizes the built-in [`CORPUS`] once with the model's
//! [`Tokenizer`] and hands out slices of that token stream: exactly the number of ids asked for,
//! BOS included, the same ids every time for the same inputs.
//!
//! The corpus is about 3,100 words (roughly 4,000 tokens with Gemma's tokenizer) of original
//! prose written for this project: two essays (lighthouses, rivers), a short story, and notes on
//! baking. Prompts longer than the corpus **cycle**: after the last corpus token the stream
//! continues with the first one again, so a 32,767-token prompt repeats the corpus several
//! times. That keeps lengths exact at any size; the text stays natural prose within each
//! pass, though a model may notice the repetition.
//!
//! Prompts are token ids, not text: they are cut at token boundaries and never re-tokenized,
//! which is what keeps their length exact.

use crate::tokenizer::TokenId;
use crate::tokenizer::Tokenizer;

/// The prose the prompts are cut from: original text, files in `crates/format/corpus/`,
/// separated by blank lines.
pub const CORPUS: &str = concat!(
    include_str!("../corpus/lighthouses.txt"),
    "\n",
    include_str!("../corpus/rivers.txt"),
    "\n",
    include_str!("../corpus/clockmaker.txt"),
    "\n",
    include_str!("../corpus/bread.txt"),
);

/// What a prompt asks of the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum PromptText {
    /// Prose to continue: the output is new text (free continuation).
    #[default]
    Prose,
    /// A passage to repeat word for word: the output is grounded in the input, as in
    /// rewriting, extraction or code editing, where speculative drafts from the prompt hold.
    Copy,
}

impl PromptText {
    pub fn name(self) -> &'static str {
        match self {
            PromptText::Prose => "prose",
            PromptText::Copy => "copy",
        }
    }
}

impl std::str::FromStr for PromptText {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [PromptText::Prose, PromptText::Copy].into_iter().find(|p| p.name() == s).ok_or_else(|| format!("unknown prompt text '{s}' (expected prose or copy)"))
    }
}

/// The words around a copy prompt's passage; the repeat is primed with the passage's first
/// [`COPY_PRIMED`] tokens, so that even a small model starts copying at the right place.
const COPY_HEAD: &str = "Repeat the passage below exactly, word for word.\n\nPassage:\n";
const COPY_TAIL: &str = "\n\nThe passage, repeated exactly:\n";
const COPY_PRIMED: usize = 4;

/// Builds exact-length prompts from the corpus's token stream.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    /// The corpus tokenized without BOS/EOS.
    stream: Vec<TokenId>,
    /// [`COPY_HEAD`] and [`COPY_TAIL`], tokenized.
    copy_head: Vec<TokenId>,
    copy_tail: Vec<TokenId>,
    /// Token that starts every prompt, when the model adds one.
    bos: Option<TokenId>,
    /// Distance between the starting offsets of consecutive variants.
    stride: usize,
}

impl PromptBuilder {
    /// Tokenizes the corpus once (a few milliseconds).
    pub fn new(tokenizer: &Tokenizer) -> PromptBuilder {
        PromptBuilder::from_text(tokenizer, CORPUS)
    }

    /// Same, over other text (tests, custom corpora). The text must tokenize to at least one token.
    pub fn from_text(tokenizer: &Tokenizer, text: &str) -> PromptBuilder {
        let stream = tokenizer.encode_with(text, false, false);
        assert!(!stream.is_empty(), "the prompt corpus tokenized to nothing");
        let bos = if tokenizer.add_bos() { tokenizer.bos() } else { None };
        // Golden-ratio spacing: any number of variants start at well spread-out points.
        let stride = ((stream.len() as f64 * 0.618_033_988_749_895) as usize).max(1);
        let copy_head = tokenizer.encode_with(COPY_HEAD, false, false);
        let copy_tail = tokenizer.encode_with(COPY_TAIL, false, false);
        PromptBuilder { stream, bos, stride, copy_head, copy_tail }
    }

    /// Exactly `n_tokens` ids of the kind `text` asks for: [`PromptBuilder::prompt`] or
    /// [`PromptBuilder::copy`].
    pub fn of(&self, text: PromptText, n_tokens: usize, variant: u64) -> Vec<TokenId> {
        match text {
            PromptText::Prose => self.prompt(n_tokens, variant),
            PromptText::Copy => self.copy(n_tokens, variant),
        }
    }

    /// Exactly `n_tokens` ids asking for a passage to be repeated: BOS, an instruction, a
    /// passage of the corpus from [`PromptBuilder::offset`]`(variant)`, then "repeated
    /// exactly:" and the passage's first few tokens. A length too short to hold the
    /// instruction and a passage of 8 tokens is a plain prompt.
    pub fn copy(&self, n_tokens: usize, variant: u64) -> Vec<TokenId> {
        let frame = usize::from(self.bos.is_some()) + self.copy_head.len() + self.copy_tail.len() + COPY_PRIMED;
        let Some(passage) = n_tokens.checked_sub(frame).filter(|&p| p >= 8) else { return self.prompt(n_tokens, variant) };
        let mut out = Vec::with_capacity(n_tokens);
        out.extend(self.bos);
        out.extend_from_slice(&self.copy_head);
        let start = out.len();
        self.extend_cycling(&mut out, self.offset(variant), passage);
        out.extend_from_slice(&self.copy_tail);
        out.extend_from_within(start..start + COPY_PRIMED);
        out
    }

    /// Number of tokens in one pass over the corpus.
    pub fn corpus_len(&self) -> usize {
        self.stream.len()
    }

    /// The corpus token stream (no BOS).
    pub fn corpus_tokens(&self) -> &[TokenId] {
        &self.stream
    }

    /// Where variant `variant`'s text starts in the corpus stream. Variant 0 starts at the
    /// beginning; the others at spread-out points.
    pub fn offset(&self, variant: u64) -> usize {
        let len = self.stream.len() as u128;
        ((variant as u128 * self.stride as u128) % len) as usize
    }

    /// Exactly `n_tokens` ids: BOS (when the model adds one) followed by `n_tokens - 1` corpus
    /// tokens starting at [`PromptBuilder::offset`]`(variant)`, cycling through the corpus as
    /// often as needed. `n_tokens = 1` is BOS alone (the same for every variant); `0` is empty.
    /// Same inputs, same ids.
    pub fn prompt(&self, n_tokens: usize, variant: u64) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(n_tokens);
        if n_tokens == 0 {
            return out;
        }
        let body = match self.bos {
            Some(bos) => {
                out.push(bos);
                n_tokens - 1
            }
            None => n_tokens,
        };
        self.extend_cycling(&mut out, self.offset(variant), body);
        out
    }

    /// A prompt of `prefix_tokens + suffix_tokens` ids whose first `prefix_tokens` are the same
    /// for every variant (BOS first, then the corpus from its start: exactly
    /// `prompt(prefix_tokens, 0)`), followed by `suffix_tokens` that depend on `variant`. For
    /// variant 0 the suffix simply continues the prefix's text; other variants jump to
    /// spread-out points of the corpus. For prefix-caching experiments.
    pub fn prompt_with_prefix(&self, prefix_tokens: usize, suffix_tokens: usize, variant: u64) -> Vec<TokenId> {
        let mut out = self.prompt(prefix_tokens, 0);
        out.reserve(suffix_tokens);
        let prefix_body = prefix_tokens.saturating_sub(usize::from(self.bos.is_some()));
        let start = (prefix_body % self.stream.len() + self.offset(variant)) % self.stream.len();
        self.extend_cycling(&mut out, start, suffix_tokens);
        out
    }

    fn extend_cycling(&self, out: &mut Vec<TokenId>, mut start: usize, mut count: usize) {
        while count > 0 {
            let take = count.min(self.stream.len() - start);
            out.extend_from_slice(&self.stream[start..start + take]);
            count -= take;
            start = 0;
        }
    }
}

/// A prompt of `total` ids whose first `prefix` are shared by every variant, made from an
/// exact-length prompt source such as `|n, i| builder.prompt(n, i)`: the prefix is variant
/// 0's first `prefix` ids, the rest continues variant `variant` past the same point. Over
/// [`PromptBuilder::prompt`] this gives exactly [`PromptBuilder::prompt_with_prefix`]`(prefix,
/// total - prefix, variant)` (tested), for callers that only hold the prompt function.
pub fn prefixed_prompt(prompt: &dyn Fn(u32, usize) -> Vec<TokenId>, prefix: u32, total: u32, variant: usize) -> Vec<TokenId> {
    if prefix == 0 {
        return prompt(total, variant);
    }
    let mut out = prompt(prefix.min(total), 0);
    out.extend_from_slice(&prompt(total, variant)[out.len()..]);
    out
}

/// A uniform number in [0, 1) for draw `i` of stream `stream` under `seed`: a pure function
/// (SplitMix64 finaliser), so a workload does not depend on the order draws are made in.
pub fn unit(seed: u64, i: u64, stream: u64) -> f64 {
    let mut z = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> (Tokenizer, PromptBuilder) {
        let path = lx_models::default_model_path();
        assert!(
            path.exists(),
            "the real model is missing at {} (set LX_MODEL, or fetch it first: `lx models fetch default`)",
            path.display()
        );
        let t = Tokenizer::from_path(&path).unwrap();
        let b = PromptBuilder::new(&t);
        (t, b)
    }

    #[test]
    fn a_copy_prompt_holds_a_passage_and_primes_its_repeat() {
        let (t, b) = builder();
        for n in [64usize, 256, 1000] {
            let p = b.copy(n, 3);
            assert_eq!(p.len(), n);
            assert_eq!(p, b.of(PromptText::Copy, n, 3));
            let text = t.decode(&p);
            assert!(text.starts_with("Repeat the passage below exactly") && text.contains("The passage, repeated exactly:"), "{text}");
            // The repeat starts as the passage does.
            let passage_at = 1 + b.copy_head.len();
            assert_eq!(p[n - COPY_PRIMED..], p[passage_at..passage_at + COPY_PRIMED]);
            assert_eq!(p[passage_at..passage_at + 8], b.corpus_tokens()[b.offset(3)..b.offset(3) + 8]);
        }
        // Too short for a passage: a plain prompt of the same length.
        assert_eq!(b.copy(12, 1), b.prompt(12, 1));
        assert_eq!(b.of(PromptText::Prose, 40, 2), b.prompt(40, 2));
        assert_eq!("copy".parse::<PromptText>(), Ok(PromptText::Copy));
        assert!("poem".parse::<PromptText>().unwrap_err().contains("prose or copy"));
    }

    #[test]
    fn corpus_is_big_enough() {
        let words = CORPUS.split_whitespace().count();
        assert!(words >= 3000, "{words} words");
    }

    #[test]
    fn exact_lengths_bos_first_deterministic_and_variants_differ() {
        let (t, b) = builder();
        let bos = t.bos().unwrap();
        assert!(b.corpus_len() > 3000, "{}", b.corpus_len());
        for n in [1usize, 7, 64, 1000, 32767] {
            let mut seen = Vec::new();
            for variant in 0..4u64 {
                let p = b.prompt(n, variant);
                assert_eq!(p.len(), n, "n={n} variant={variant}");
                assert_eq!(p[0], bos);
                assert!(!p[1..].contains(&bos), "BOS only at the start");
                assert_eq!(p, b.prompt(n, variant), "deterministic");
                assert_eq!(p, PromptBuilder::new(&t).prompt(n, variant), "deterministic across builders");
                if n > 1 {
                    assert!(!seen.contains(&p), "n={n}: variant {variant} repeats an earlier one");
                }
                seen.push(p);
            }
        }
        assert_eq!(b.prompt(1, 0), vec![bos]);
        assert!(b.prompt(0, 3).is_empty());
        // Variant 0 is the corpus from its start; the body decodes to corpus text.
        let p = b.prompt(64, 0);
        assert!(CORPUS.starts_with(&t.decode(&p)), "{:?}", t.decode(&p));
        // Long prompts cycle.
        let long = b.prompt(2 * b.corpus_len() + 10, 0);
        assert_eq!(long[1..=b.corpus_len()], long[1 + b.corpus_len()..=2 * b.corpus_len()]);
    }

    #[test]
    fn shared_prefix() {
        let (t, b) = builder();
        let a = b.prompt_with_prefix(100, 50, 0);
        let c = b.prompt_with_prefix(100, 50, 1);
        let d = b.prompt_with_prefix(100, 50, 2);
        assert_eq!((a.len(), c.len(), d.len()), (150, 150, 150));
        assert_eq!(a[..100], c[..100]);
        assert_eq!(a[..100], d[..100]);
        assert_eq!(a[..100], b.prompt(100, 0)[..]);
        assert_eq!(a[0], t.bos().unwrap());
        assert_ne!(a[100..], c[100..]);
        assert_ne!(c[100..], d[100..]);
        // variant 0's suffix continues the prefix text
        assert_eq!(a, b.prompt(150, 0));
        assert_eq!(b.prompt_with_prefix(100, 50, 1), c);
        assert_eq!(b.prompt_with_prefix(1, 5, 0), b.prompt(6, 0));
        assert_eq!(b.prompt_with_prefix(3000, 9000, 7).len(), 12000);
        // The prompt-function form gives the same ids.
        let f = |n: u32, i: usize| b.prompt(n as usize, i as u64);
        for (p, s, v) in [(100usize, 50usize, 0usize), (100, 50, 1), (1024, 32, 5), (1, 5, 3)] {
            assert_eq!(prefixed_prompt(&f, p as u32, (p + s) as u32, v), b.prompt_with_prefix(p, s, v as u64), "prefix {p} suffix {s} variant {v}");
        }
    }

    #[test]
    fn unit_draws_are_uniform_and_reproducible() {
        let xs: Vec<f64> = (0..10_000).map(|i| unit(7, i, 1)).collect();
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
        assert_eq!(unit(7, 3, 1), unit(7, 3, 1));
        assert_ne!(unit(7, 3, 1), unit(8, 3, 1));
        assert_ne!(unit(7, 3, 1), unit(7, 3, 2));
    }
}
