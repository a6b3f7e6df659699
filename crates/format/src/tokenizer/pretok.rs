//! Pre-tokenizers of byte-level BPE vocabularies: how a text fragment is cut into words before
//! BPE merges run inside each word.
//!
//! Hugging Face writes these as regexes with lookaheads (`\s+(?!\S)`) and Unicode classes; the
//! `regex` crate has neither lookaround nor a way to match llama.cpp's Unicode 15.1 classes, so,
//! as llama.cpp does (`src/unicode.cpp`), each pattern is a hand-written scanner. They follow
//! llama.cpp's scanners rather than the regexes where the two differ (an unassigned code point
//! counts as "not a letter, number or space" like punctuation; `(?i:'s)` only folds ASCII).
//!
//! - [`PreTokenizer::Gpt2`]: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - [`PreTokenizer::Llama3`]: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - [`PreTokenizer::Qwen2`]: as Llama 3 but `\p{N}` (single digits) instead of `\p{N}{1,3}`
//! - [`PreTokenizer::DigitsGpt2`] (SmolLM, StarCoder, Command R, ...): two passes, each digit
//!   cut out on its own (`\p{N}`), then the GPT-2 pattern inside each piece
//! - [`PreTokenizer::Default`] (llama.cpp's fallback for `default` or a missing name): four
//!   passes, each cutting the pieces of the one before: runs of `[\p{P}$+<=>^~|]`, the GPT-2
//!   pattern, runs of `\p{N}`, and `[0-9]{3}` from the left.

use super::unicode::{flags, L, N, P, WS};

/// A pre-tokenizer as llama.cpp chooses it from `tokenizer.ggml.pre`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PreTokenizer {
    Gpt2,
    Llama3,
    Qwen2,
    DigitsGpt2,
    Default,
}

/// What `tokenizer.ggml.pre` selects besides the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PreConfig {
    pub pre: PreTokenizer,
    /// A word that is itself a vocabulary token is emitted whole, without merges.
    pub ignore_merges: bool,
    /// `tokenizer.ggml.add_bos_token` when the GGUF does not say.
    pub add_bos_default: bool,
}

/// `tokenizer.ggml.pre` values we support, grouped as llama.cpp's `llama_vocab::impl::load`
/// groups them (only names whose handling there is nothing but the split and these flags).
const LLAMA3_NAMES: &[&str] =
    &["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"];
const QWEN2_NAMES: &[&str] = &["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"];
const GPT2_NAMES: &[&str] = &["gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "exaone4", "roberta-bpe", "jina-v1-en"];
const DIGITS_GPT2_NAMES: &[&str] =
    &["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"];

/// The supported names, for error messages.
pub(super) fn supported_names() -> String {
    let mut all = vec!["default"];
    all.extend(LLAMA3_NAMES.iter().chain(QWEN2_NAMES).chain(GPT2_NAMES).chain(DIGITS_GPT2_NAMES));
    all.join(", ")
}

impl PreConfig {
    /// The configuration for a `tokenizer.ggml.pre` value (`None`: the key is missing, which
    /// llama.cpp treats as `default`), or `None` when we do not support it.
    pub(super) fn from_name(name: Option<&str>) -> Option<PreConfig> {
        let cfg = |pre, ignore_merges, add_bos_default| Some(PreConfig { pre, ignore_merges, add_bos_default });
        match name {
            None | Some("default") => cfg(PreTokenizer::Default, false, false),
            Some(n) if LLAMA3_NAMES.contains(&n) => cfg(PreTokenizer::Llama3, true, true),
            Some(n) if QWEN2_NAMES.contains(&n) => cfg(PreTokenizer::Qwen2, false, false),
            Some(n) if GPT2_NAMES.contains(&n) => cfg(PreTokenizer::Gpt2, false, false),
            Some(n) if DIGITS_GPT2_NAMES.contains(&n) => cfg(PreTokenizer::DigitsGpt2, false, false),
            Some(_) => None,
        }
    }
}

/// A code point is "defined" (in the fragment); out-of-range positions have no flags at all.
const IN: u8 = 1 << 7;

/// One text fragment's code points and their flags, with llama.cpp's out-of-range conventions.
struct Chars {
    cps: Vec<char>,
    fl: Vec<u8>,
}

impl Chars {
    fn new(text: &str) -> Chars {
        let cps: Vec<char> = text.chars().collect();
        let fl = cps.iter().map(|&c| flags(c) | IN).collect();
        Chars { cps, fl }
    }
}

/// One segment `[ini, end)` of a [`Chars`], scanned by one pattern: positions outside the
/// segment read as "no character" (`None`, flags 0).
struct Seg<'a> {
    c: &'a Chars,
    ini: usize,
    end: usize,
}

impl Seg<'_> {
    fn cp(&self, i: usize) -> Option<char> {
        (self.ini <= i && i < self.end).then(|| self.c.cps[i])
    }
    fn fl(&self, i: usize) -> u8 {
        if self.ini <= i && i < self.end {
            self.c.fl[i]
        } else {
            0
        }
    }
    fn is(&self, i: usize, mask: u8) -> bool {
        self.fl(i) & mask != 0
    }
    /// `[^\s\p{L}\p{N}]`: an in-range code point that is neither space, letter nor number.
    fn is_other(&self, i: usize) -> bool {
        let f = self.fl(i);
        f & (WS | L | N) == 0 && f != 0
    }
    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (ASCII case folded when `fold`): its length.
    fn contraction(&self, pos: usize, fold: bool) -> Option<usize> {
        if self.cp(pos) != Some('\'') || pos + 1 >= self.end {
            return None;
        }
        let low = |c: char| if fold { c.to_ascii_lowercase() } else { c };
        let n = low(self.c.cps[pos + 1]);
        if matches!(n, 's' | 't' | 'm' | 'd') {
            return Some(2);
        }
        if pos + 2 < self.end {
            let nn = low(self.c.cps[pos + 2]);
            if matches!((n, nn), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                return Some(3);
            }
        }
        None
    }
    /// Length of the whitespace run at `pos`, and the end of its last `\r` or `\n` (0: none).
    fn spaces(&self, pos: usize) -> (usize, usize) {
        let (mut n, mut last_rn) = (0, 0);
        while self.is(pos + n, WS) {
            if matches!(self.cp(pos + n), Some('\r' | '\n')) {
                last_rn = pos + n + 1;
            }
            n += 1;
        }
        (n, last_rn)
    }
}

impl PreTokenizer {
    /// Cuts `text` into words; returns their byte ranges, in order, covering the text.
    pub(super) fn split(self, text: &str) -> Vec<(usize, usize)> {
        let chars = Chars::new(text);
        let n = chars.cps.len();
        // Word ends, as code point indices.
        let mut ends = Vec::with_capacity(n / 3 + 1);
        match self {
            PreTokenizer::Gpt2 => gpt2(&Seg { c: &chars, ini: 0, end: n }, &mut ends),
            PreTokenizer::Llama3 => llama3(&Seg { c: &chars, ini: 0, end: n }, false, &mut ends),
            PreTokenizer::Qwen2 => llama3(&Seg { c: &chars, ini: 0, end: n }, true, &mut ends),
            PreTokenizer::DigitsGpt2 => {
                let digits = refine(&chars, &[n], |s, out| by_matches(s, out, |s, i| s.is(i, N).then_some(1)));
                ends = refine(&chars, &digits, gpt2);
            }
            PreTokenizer::Default => {
                let is_punct = |s: &Seg, i: usize| s.is(i, P) || matches!(s.cp(i), Some('$' | '+' | '<' | '=' | '>' | '^' | '~' | '|'));
                let ends1 = refine(&chars, &[n], |s, out| by_matches(s, out, |s, i| run(s, i, is_punct)));
                let ends2 = refine(&chars, &ends1, gpt2);
                let ends3 = refine(&chars, &ends2, |s, out| by_matches(s, out, |s, i| run(s, i, |s, i| s.is(i, N))));
                ends = refine(&chars, &ends3, |s, out| {
                    by_matches(s, out, |s, i| (0..3).all(|k| s.cp(i + k).is_some_and(|c| c.is_ascii_digit())).then_some(3))
                });
            }
        }
        // code point indices -> byte offsets
        let mut byte_at = Vec::with_capacity(n + 1);
        byte_at.extend(text.char_indices().map(|(b, _)| b));
        byte_at.push(text.len());
        let mut words = Vec::with_capacity(ends.len());
        let mut start = 0;
        for e in ends {
            if e > start {
                words.push((byte_at[start], byte_at[e]));
                start = e;
            }
        }
        debug_assert_eq!(start, n);
        words
    }
}

/// Runs `scan` over each segment of `ends` (word ends from the previous pass) and returns the
/// finer word ends.
fn refine(chars: &Chars, ends: &[usize], scan: impl Fn(&Seg, &mut Vec<usize>)) -> Vec<usize> {
    let mut out = Vec::with_capacity(ends.len() * 2);
    let mut ini = 0;
    for &end in ends {
        scan(&Seg { c: chars, ini, end }, &mut out);
        ini = end;
    }
    out
}

/// Length of the run of code points satisfying `pred` starting at `i` (`None` if empty).
fn run(s: &Seg, i: usize, pred: impl Fn(&Seg, usize) -> bool) -> Option<usize> {
    let mut j = i;
    while pred(s, j) {
        j += 1;
    }
    (j > i).then_some(j - i)
}

/// Like `std::regex_iterator` over a segment: leftmost matches (`m(seg, i)` is the length of
/// a match starting at `i`) and the gaps between them are the words.
fn by_matches(s: &Seg, out: &mut Vec<usize>, m: impl Fn(&Seg, usize) -> Option<usize>) {
    let (mut i, mut last) = (s.ini, s.ini);
    while i < s.end {
        match m(s, i) {
            Some(len) => {
                if i > last {
                    out.push(i); // the gap before the match
                }
                i += len;
                out.push(i);
                last = i;
            }
            None => i += 1,
        }
    }
    if last < s.end {
        out.push(s.end);
    }
}

/// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
fn gpt2(s: &Seg, out: &mut Vec<usize>) {
    let mut pos = s.ini;
    while pos < s.end {
        let c = s.c.cps[pos];
        if let Some(len) = s.contraction(pos, false) {
            pos += len;
            out.push(pos);
            continue;
        }
        // ` ?X+` for X = letter, number, other: the optional space, then the run
        let space = usize::from(c == ' ');
        let f2 = if c == ' ' { s.fl(pos + 1) } else { s.fl(pos) };
        let class: Option<fn(&Seg, usize) -> bool> = if f2 & L != 0 {
            Some(|s, i| s.is(i, L))
        } else if f2 & N != 0 {
            Some(|s, i| s.is(i, N))
        } else if f2 & (WS | L | N) == 0 && f2 != 0 {
            Some(|s, i| s.is_other(i))
        } else {
            None
        };
        if let Some(class) = class {
            pos += space;
            while class(s, pos) {
                pos += 1;
            }
            out.push(pos);
            continue;
        }
        let (n, _) = s.spaces(pos);
        if n > 1 && s.cp(pos + n).is_some() {
            pos += n - 1; // \s+(?!\S): leave the last space to the word after
        } else if n > 0 {
            pos += n;
        } else {
            pos += 1;
        }
        out.push(pos);
    }
}

/// Llama 3 (`single_digits = false`) and Qwen2 (`true`).
fn llama3(s: &Seg, single_digits: bool, out: &mut Vec<usize>) {
    let mut pos = s.ini;
    while pos < s.end {
        let c = s.c.cps[pos];
        let f = s.fl(pos);
        if let Some(len) = s.contraction(pos, true) {
            pos += len;
            out.push(pos);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(c == '\r' || c == '\n' || f & N != 0) && (f & L != 0 || s.is(pos + 1, L)) {
            pos += 1;
            while s.is(pos, L) {
                pos += 1;
            }
            out.push(pos);
            continue;
        }
        // \p{N}{1,3} or \p{N}
        if f & N != 0 {
            if single_digits {
                pos += 1;
            } else {
                let mut ini = pos;
                while s.is(pos, N) {
                    pos += 1;
                    if pos - ini >= 3 {
                        out.push(pos);
                        ini = pos;
                    }
                }
            }
            if out.last() != Some(&pos) {
                out.push(pos);
            }
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        let f2 = if c == ' ' { s.fl(pos + 1) } else { f };
        if f2 & (WS | L | N) == 0 && f != 0 {
            pos += usize::from(c == ' ');
            while s.is_other(pos) {
                pos += 1;
            }
            while matches!(s.cp(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            out.push(pos);
            continue;
        }
        let (n, last_rn) = s.spaces(pos);
        if last_rn > 0 {
            pos = last_rn; // \s*[\r\n]+
        } else if n > 1 && s.cp(pos + n).is_some() {
            pos += n - 1; // \s+(?!\S)
        } else if n > 0 {
            pos += n; // \s+
        } else {
            pos += 1;
        }
        out.push(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
        pre.split(text).into_iter().map(|(a, b)| &text[a..b]).collect()
    }

    use PreTokenizer::{Default, DigitsGpt2, Gpt2, Llama3, Qwen2};

    #[test]
    fn names() {
        assert_eq!(PreConfig::from_name(Some("llama-bpe")).unwrap().pre, Llama3);
        assert!(PreConfig::from_name(Some("llama-bpe")).unwrap().ignore_merges);
        assert!(PreConfig::from_name(Some("llama-bpe")).unwrap().add_bos_default);
        assert_eq!(PreConfig::from_name(Some("qwen2")).unwrap().pre, Qwen2);
        assert!(!PreConfig::from_name(Some("qwen2")).unwrap().add_bos_default);
        assert_eq!(PreConfig::from_name(Some("gpt-2")).unwrap().pre, Gpt2);
        let smollm = PreConfig::from_name(Some("smollm")).unwrap();
        assert_eq!((smollm.pre, smollm.ignore_merges, smollm.add_bos_default), (DigitsGpt2, false, false));
        assert_eq!(PreConfig::from_name(Some("default")).unwrap().pre, Default);
        assert_eq!(PreConfig::from_name(None).unwrap().pre, Default);
        assert_eq!(PreConfig::from_name(Some("tekken")), None);
        assert!(supported_names().contains("llama-bpe") && supported_names().contains("qwen2"));
    }

    #[test]
    fn contractions() {
        let t = "I've they'll we'D it's don't I'M you're 'S 'Re 'vE 'LL x'y '";
        assert_eq!(
            words(Llama3, t),
            ["I", "'ve", " they", "'ll", " we", "'D", " it", "'s", " don", "'t", " I", "'M", " you", "'re", " '", "S", " '", "Re", " '", "vE", " '", "LL", " x", "'y", " '"]
        );
        // GPT-2 is case sensitive: 'D and 'M are not contractions there
        assert_eq!(
            words(Gpt2, "I've we'D it's I'M they'll 'll"),
            ["I", "'ve", " we", "'", "D", " it", "'s", " I", "'", "M", " they", "'ll", " '", "ll"]
        );
        assert_eq!(words(Qwen2, "WE'RE"), ["WE", "'RE"]);
    }

    #[test]
    fn digits() {
        assert_eq!(words(Llama3, "1 12 123 1234 1234567"), ["1", " ", "12", " ", "123", " ", "123", "4", " ", "123", "456", "7"]);
        assert_eq!(words(Qwen2, "2024 x1"), ["2", "0", "2", "4", " x", "1"]);
        assert_eq!(words(Gpt2, "2024 x1 12345"), ["2024", " x", "1", " 12345"]);
        // each digit alone first, so a space before a number stays a word of its own
        assert_eq!(words(DigitsGpt2, "2024 x1 12"), ["2", "0", "2", "4", " x", "1", " ", "1", "2"]);
        assert_eq!(words(DigitsGpt2, "a 1 b ²"), ["a", " ", "1", " b", " ", "²"]);
        // non-ASCII numbers count too: ² ½ Ⅻ and Devanagari digits
        assert_eq!(words(Llama3, "x²½Ⅻ१२३४"), ["x", "²½Ⅻ", "१२३", "४"]);
        assert_eq!(words(Default, "12345 a1234"), ["123", "45", " a", "123", "4"]);
    }

    #[test]
    fn whitespace() {
        // \s+(?!\S): a run of spaces before a word leaves its last space to the word
        assert_eq!(words(Llama3, "a   b"), ["a", "  ", " b"]);
        assert_eq!(words(Gpt2, "a   b"), ["a", "  ", " b"]);
        // at the end of the text the whole run is one word
        assert_eq!(words(Llama3, "a   "), ["a", "   "]);
        assert_eq!(words(Gpt2, "a   "), ["a", "   "]);
        assert_eq!(words(Llama3, "   "), ["   "]);
        // newlines: \s*[\r\n]+ takes spaces up to the last newline of the run
        assert_eq!(words(Llama3, "a \n\n  b"), ["a", " \n\n", " ", " b"]);
        assert_eq!(words(Llama3, "a\r\n\tb"), ["a", "\r\n", "\tb"]);
        assert_eq!(words(Gpt2, "a \n\n  b"), ["a", " \n\n ", " b"]);
        assert_eq!(words(Qwen2, "x\n"), ["x", "\n"]);
        // tabs and other spaces are a letter's optional prefix in Llama 3, not in GPT-2
        assert_eq!(words(Llama3, "\tb\u{3000}c"), ["\tb", "\u{3000}c"]);
        assert_eq!(words(Gpt2, "\tb"), ["\t", "b"]);
        assert_eq!(words(Llama3, ""), Vec::<&str>::new());
    }

    #[test]
    fn punctuation() {
        assert_eq!(words(Llama3, "Hello, world!!\n\nok"), ["Hello", ",", " world", "!!\n\n", "ok"]);
        assert_eq!(words(Llama3, "a ... b --> c"), ["a", " ...", " b", " -->", " c"]);
        assert_eq!(words(Gpt2, "a ... b!!\n"), ["a", " ...", " b", "!!", "\n"]);
        // a punctuation mark directly before letters is their prefix in Llama 3
        assert_eq!(words(Llama3, "(foo) .bar"), ["(foo", ")", " .", "bar"]);
        assert_eq!(words(Llama3, "$x"), ["$x"]);
        assert_eq!(words(Gpt2, "$x"), ["$", "x"]);
        // the default pre-tokenizer cuts punctuation runs out first
        assert_eq!(words(Default, "a...b $x"), ["a", "...", "b", " ", "$", "x"]);
    }

    #[test]
    fn scripts_and_emoji() {
        assert_eq!(words(Llama3, "Привет мир"), ["Привет", " мир"]);
        assert_eq!(words(Llama3, "中文：今天"), ["中文", "：今天"]);
        assert_eq!(words(Gpt2, "中文：今天"), ["中文", "：", "今天"]);
        // combining marks are not letters: the word stops at them
        assert_eq!(words(Llama3, "नदी के"), ["नद", "ी", " क", "े"]);
        assert_eq!(words(Llama3, "ok👍🏽 🚀x"), ["ok", "👍🏽", " 🚀", "x"]);
        assert_eq!(words(Gpt2, "ok👍🏽 🚀x"), ["ok", "👍🏽", " 🚀", "x"]);
        // an unassigned (in Unicode 15.1) code point is "other", like punctuation
        assert_eq!(words(Llama3, "a\u{10D40}\u{10D41}b"), ["a", "\u{10D40}\u{10D41}", "b"]);
    }
}
