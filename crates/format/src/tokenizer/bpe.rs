//! Byte-level BPE ("gpt2" vocabularies: Llama 3, Qwen2/2.5/3, GPT-2, ...), as llama.cpp's
//! `llm_tokenizer_bpe_session` does it:
//!
//! 1. The pre-tokenizer ([`PreTokenizer`]) cuts the fragment into words.
//! 2. Each word's UTF-8 bytes are written in GPT-2's byte-to-unicode alphabet (printable
//!    Latin-1 bytes stand for themselves, the other 68 bytes for U+0100..U+0143; a space is `Ġ`).
//! 3. With `ignore_merges` (Llama 3), a word that is a vocabulary token is emitted as is.
//! 4. Otherwise start from the word's characters and repeatedly merge the adjacent pair with
//!    the lowest rank in `tokenizer.ggml.merges` (ties: the leftmost), then emit each symbol's
//!    token. A symbol that is not a token (only possible with inconsistent merges) falls back to
//!    its single-byte pieces, ASCII ones only, as llama.cpp looks them up.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::pretok::{PreConfig, PreTokenizer};
use crate::tokenizer::TokenId;

/// What only byte-level BPE vocabularies have.
#[derive(Clone)]
pub(super) struct Bpe {
    pub pre: PreTokenizer,
    pub ignore_merges: bool,
    /// Each distinct side of a merge, interned.
    parts: HashMap<Box<str>, u32>,
    /// `(left part, right part)` packed in a u64 → rank (index in `tokenizer.ggml.merges`;
    /// the first of duplicates wins, as in llama.cpp's `emplace`).
    ranks: HashMap<u64, u32>,
}

/// GPT-2's byte → character table.
pub(super) const BYTE_TO_CHAR: [char; 256] = {
    let mut t = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0usize;
    while b < 256 {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        let cp = if printable {
            b as u32
        } else {
            n += 1;
            255 + n
        };
        t[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => panic!("not a char"),
        };
        b += 1;
    }
    t
};

/// The inverse of [`BYTE_TO_CHAR`].
fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x143 => {
            // the (cp - 0x100)-th byte that is not printable
            let k = (cp - 0x100) as usize;
            (0..=255u8).filter(|&b| !matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)).nth(k)
        }
        _ => None,
    }
}

/// Bytes of a normal token's text (llama.cpp's `llama_decode_text`, including its marker for a
/// character outside the byte alphabet).
pub(super) fn decode_token_text(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

impl Bpe {
    /// From the `tokenizer.ggml.merges` strings (`"left right"`).
    pub(super) fn new(cfg: PreConfig, merges: &[String]) -> Bpe {
        let mut parts: HashMap<Box<str>, u32> = HashMap::with_capacity(merges.len() / 2);
        let mut intern = |s: &str| -> u32 {
            let next = parts.len() as u32;
            *parts.entry(s.into()).or_insert(next)
        };
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            // llama.cpp: split at the first space from byte 1 on; no space: two empty sides
            let (left, right) = match m.as_bytes().iter().skip(1).position(|&b| b == b' ') {
                Some(p) => (&m[..p + 1], &m[p + 2..]),
                None => ("", ""),
            };
            let key = pack(intern(left), intern(right));
            ranks.entry(key).or_insert(rank as u32);
        }
        Bpe { pre: cfg.pre, ignore_merges: cfg.ignore_merges, parts, ranks }
    }

    /// Number of distinct merges.
    pub(super) fn n_merges(&self) -> usize {
        self.ranks.len()
    }

    /// Tokenizes one text fragment (between special tokens).
    pub(super) fn encode_fragment(&self, to_id: &HashMap<String, TokenId>, fragment: &str, out: &mut Vec<TokenId>) {
        let mut word = String::new();
        let mut syms: Vec<Symbol> = Vec::new();
        let mut queue: BinaryHeap<Reverse<(u32, u32, u32, u32)>> = BinaryHeap::new();
        for (a, b) in self.pre.split(fragment) {
            word.clear();
            word.extend(fragment.as_bytes()[a..b].iter().map(|&b| BYTE_TO_CHAR[b as usize]));
            if self.ignore_merges {
                if let Some(&id) = to_id.get(word.as_str()) {
                    out.push(id);
                    continue;
                }
            }
            self.merge(&word, &mut syms, &mut queue);
            for s in syms.iter().filter(|s| s.len > 0) {
                let piece = &word[s.start as usize..(s.start + s.len) as usize];
                match to_id.get(piece) {
                    Some(&id) => out.push(id),
                    None => {
                        for b in piece.bytes().filter(u8::is_ascii) {
                            let mut one = [0u8; 4];
                            if let Some(&id) = to_id.get(char::from(b).encode_utf8(&mut one) as &str) {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }

    fn part(&self, word: &str, s: &Symbol) -> Option<u32> {
        self.parts.get(&word[s.start as usize..(s.start + s.len) as usize]).copied()
    }

    /// Merges the characters of one byte-encoded word into `syms` (merged-away symbols have
    /// length 0). The queue holds `(rank, left, right, merged length)`, smallest first.
    fn merge(&self, word: &str, syms: &mut Vec<Symbol>, queue: &mut BinaryHeap<Reverse<(u32, u32, u32, u32)>>) {
        syms.clear();
        queue.clear();
        for (i, c) in word.char_indices() {
            let idx = syms.len() as i32;
            let mut s = Symbol { start: i as u32, len: c.len_utf8() as u32, prev: idx - 1, next: idx + 1, part: None };
            s.part = self.part(word, &s);
            syms.push(s);
        }
        if let Some(last) = syms.last_mut() {
            last.next = -1;
        }
        let n = syms.len();
        let push = |syms: &[Symbol], queue: &mut BinaryHeap<Reverse<(u32, u32, u32, u32)>>, l: i32, r: i32| {
            if l < 0 || r < 0 {
                return;
            }
            let (ls, rs) = (&syms[l as usize], &syms[r as usize]);
            if let (Some(a), Some(b)) = (ls.part, rs.part) {
                if let Some(&rank) = self.ranks.get(&pack(a, b)) {
                    queue.push(Reverse((rank, l as u32, r as u32, ls.len + rs.len)));
                }
            }
        };
        for i in 1..n as i32 {
            push(syms, queue, i - 1, i);
        }
        while let Some(Reverse((_, l, r, size))) = queue.pop() {
            let (l, r) = (l as usize, r as usize);
            let (ln, rn) = (syms[l].len, syms[r].len);
            if ln == 0 || rn == 0 || ln + rn != size {
                continue; // stale: one side was merged since
            }
            syms[l].len = size;
            syms[r].len = 0;
            let rnext = syms[r].next;
            syms[l].next = rnext;
            if rnext >= 0 {
                syms[rnext as usize].prev = l as i32;
            }
            syms[l].part = self.part(word, &syms[l]);
            let lprev = syms[l].prev;
            push(syms, queue, lprev, l as i32);
            push(syms, queue, l as i32, rnext);
        }
    }
}

fn pack(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
    /// Interned text, if the text is a side of some merge.
    part: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[b'\t' as usize], 'ĉ');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        assert_eq!(BYTE_TO_CHAR[0], 'Ā');
        assert_eq!(BYTE_TO_CHAR[0xAD], 'Ń');
        assert_eq!(BYTE_TO_CHAR[0xFF], 'ÿ');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(BYTE_TO_CHAR[b as usize]), Some(b));
        }
        assert_eq!(char_to_byte('ġ'), Some(0x7F)); // U+0121: 0x00-0x20 took U+0100..U+0120
        assert_eq!(char_to_byte('ń'), None); // U+0144, past the alphabet
        assert_eq!(decode_token_text("ĠhelloĊ"), b" hello\n");
        assert_eq!(decode_token_text("a€"), b"a[UNK_BYTE_0xe282aca\xe2\x82\xac]");
    }

    #[test]
    fn merge_sides() {
        let b = Bpe::new(PreConfig::from_name(Some("gpt-2")).unwrap(), &["Ġ t".into(), "Ġ t".into(), "a b c".into(), "x".into()]);
        assert_eq!(b.n_merges(), 3);
        let (g, t) = (b.parts["Ġ"], b.parts["t"]);
        assert_eq!(b.ranks[&pack(g, t)], 0);
        assert_eq!(b.ranks[&pack(b.parts["a"], b.parts["b c"])], 2);
        assert_eq!(b.ranks[&pack(b.parts[""], b.parts[""])], 3);
    }
}
