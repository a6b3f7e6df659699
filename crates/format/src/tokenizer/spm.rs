//! SentencePiece-style ("llama") merging of one text fragment, as llama.cpp's
//! `llm_tokenizer_spm_session` does it: spaces escaped as U+2581 `▁`, UTF-8 characters merged
//! pairwise by the highest score of the merged piece, unknown pieces emitted as byte tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use crate::tokenizer::TokenId;

/// What only SPM vocabularies have.
#[derive(Clone)]
pub(super) struct Spm {
    /// Byte fallback token of each byte (`<0xNN>`, else the byte as text, else unknown).
    pub byte_ids: Box<[TokenId; 256]>,
    /// Put a space before the text and after each special token (`tokenizer.ggml.add_space_prefix`).
    pub add_space_prefix: bool,
}

impl Spm {
    /// Tokenizes one text fragment (between special tokens); `after_special` is true at the
    /// start of the text and right after a special token.
    pub(super) fn encode_fragment(
        &self,
        to_id: &HashMap<String, TokenId>,
        scores: &[f32],
        fragment: &str,
        after_special: bool,
        out: &mut Vec<TokenId>,
    ) {
        let mut escaped = String::with_capacity(fragment.len() + 3);
        if self.add_space_prefix && after_special {
            escaped.push('\u{2581}');
        }
        for c in fragment.chars() {
            escaped.push(if c == ' ' { '\u{2581}' } else { c });
        }
        self.merge(to_id, scores, &escaped, out);
    }

    /// SentencePiece BPE on one escaped fragment.
    fn merge(&self, to_id: &HashMap<String, TokenId>, scores: &[f32], text: &str, out: &mut Vec<TokenId>) {
        let bytes = text.as_bytes();
        let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
        let mut offs = 0usize;
        while offs < bytes.len() {
            let len = utf8_len(bytes[offs]).min(bytes.len() - offs);
            let idx = syms.len() as i32;
            syms.push(Symbol {
                start: offs as u32,
                len: len as u32,
                prev: idx - 1,
                next: if offs + len == bytes.len() { -1 } else { idx + 1 },
            });
            offs += len;
        }

        let mut queue = BinaryHeap::with_capacity(syms.len());
        let try_add = |syms: &[Symbol], queue: &mut BinaryHeap<Bigram>, left: i32, right: i32| {
            if left < 0 || right < 0 {
                return;
            }
            let (l, r) = (&syms[left as usize], &syms[right as usize]);
            let start = l.start as usize;
            let size = (l.len + r.len) as usize;
            let Some(s) = text.get(start..start + size) else { return };
            if let Some(&id) = to_id.get(s) {
                queue.push(Bigram { score: scores[id as usize], left, right, size: size as u32 });
            }
        };
        for i in 1..syms.len() as i32 {
            try_add(&syms, &mut queue, i - 1, i);
        }
        while let Some(b) = queue.pop() {
            let (li, ri) = (b.left as usize, b.right as usize);
            let (ln, rn) = (syms[li].len, syms[ri].len);
            if ln == 0 || rn == 0 || ln + rn != b.size {
                continue; // stale: one side was merged since
            }
            syms[li].len = ln + rn;
            syms[ri].len = 0;
            let rnext = syms[ri].next;
            syms[li].next = rnext;
            if rnext >= 0 {
                syms[rnext as usize].prev = b.left;
            }
            let lprev = syms[li].prev;
            try_add(&syms, &mut queue, lprev, b.left);
            try_add(&syms, &mut queue, b.left, rnext);
        }

        let mut i = if syms.is_empty() { -1 } else { 0 };
        while i != -1 {
            let s = &syms[i as usize];
            let piece = &bytes[s.start as usize..(s.start + s.len) as usize];
            match std::str::from_utf8(piece).ok().and_then(|p| to_id.get(p)) {
                Some(&id) => out.push(id),
                None => out.extend(piece.iter().map(|&b| self.byte_ids[b as usize])),
            }
            i = s.next;
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

/// A candidate merge; the heap pops the highest score first, then the leftmost.
#[derive(Debug, Clone, Copy)]
struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // As C++ `<` on floats: equal values (and -0.0 / 0.0) tie, then the smaller left wins.
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then(other.left.cmp(&self.left))
    }
}

/// Length of a UTF-8 sequence from its first byte (llama.cpp's `unicode_len_utf8`).
fn utf8_len(b: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(b >> 4) as usize]
}
