//! What the BPE pre-tokenizers need to know about a code point: letter (`\p{L}`), number
//! (`\p{N}`), punctuation (`\p{P}`), whitespace (`\s`).
//!
//! The categories must be llama.cpp's, not whatever Unicode version we happen to run on: a
//! character assigned after llama.cpp's tables were generated is "undefined" there and would
//! split differently. So the category ranges are generated from Unicode 15.1, as llama.cpp's
//! `src/unicode-data.cpp` is (`scripts/gen-unicode-tables` writes `unicode_tables.rs`).
//! Whitespace is the `White_Space` property, which has not changed since Unicode 6.3 and is
//! what [`char::is_whitespace`] tests.

use super::unicode_tables::RANGES;

/// General category L (letter).
pub(super) const L: u8 = 1 << 0;
/// General category N (number).
pub(super) const N: u8 = 1 << 1;
/// General category P (punctuation).
pub(super) const P: u8 = 1 << 2;
/// `White_Space`.
pub(super) const WS: u8 = 1 << 3;

/// Flags of the ASCII range, looked up without a search.
static ASCII: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < RANGES.len() && RANGES[i].0 < 128 {
        let (first, last, cat) = RANGES[i];
        let mut c = first;
        while c <= last && c < 128 {
            t[c as usize] = cat;
            c += 1;
        }
        i += 1;
    }
    // \t \n \v \f \r and space
    let mut c = 9;
    while c <= 13 {
        t[c] = WS;
        c += 1;
    }
    t[32] = WS;
    t
};

/// Category and whitespace flags of a code point (`L`, `N`, `P`, `WS`; 0 for anything else).
pub(super) fn flags(c: char) -> u8 {
    let cp = c as u32;
    if cp < 128 {
        return ASCII[cp as usize];
    }
    let i = RANGES.partition_point(|r| r.1 < cp);
    let cat = match RANGES.get(i) {
        Some(&(first, _, cat)) if first <= cp => cat,
        _ => 0,
    };
    if c.is_whitespace() {
        cat | WS
    } else {
        cat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_and_disjoint() {
        assert_eq!(super::super::unicode_tables::VERSION, "15.1.0");
        for w in RANGES.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "{w:?}");
        }
        assert!(RANGES.iter().all(|r| [L, N, P].contains(&r.2)));
    }

    #[test]
    fn categories() {
        for c in ['a', 'Z', 'é', 'ß', 'Ж', 'ש', 'ع', 'क', 'ก', '中', 'ー', 'ㄱ', '가', '\u{2EBF0}'] {
            assert_eq!(flags(c), L, "{c:?} U+{:04X}", c as u32);
        }
        for c in ['0', '9', '²', '½', 'Ⅻ', '٣', '१', '\u{1D7CE}'] {
            assert_eq!(flags(c), N, "{c:?}");
        }
        for c in ['!', '\'', '-', '_', '{', '¡', '«', '。', '、', '—', '…', '«'] {
            assert_eq!(flags(c), P, "{c:?}");
        }
        // symbols, marks, controls, private use, unassigned (in 15.1; U+10D40 is Garay, Unicode 16)
        for c in ['$', '+', '<', '^', '`', '|', '~', '€', '©', '😀', '\u{301}', '\u{200D}', '\u{FE0F}', '\0', '\u{7F}', '\u{E000}', '\u{378}', '\u{10D40}'] {
            assert_eq!(flags(c), 0, "{c:?}");
        }
    }

    #[test]
    fn whitespace_is_llama_cpp_set() {
        // llama.cpp's unicode_set_whitespace
        let set: Vec<u32> = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680]
            .into_iter()
            .chain(0x2000..=0x200A)
            .chain([0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
            .collect();
        let ours: Vec<u32> = (0..=0x10FFFFu32).filter_map(char::from_u32).filter(|&c| flags(c) & WS != 0).map(|c| c as u32).collect();
        assert_eq!(ours, set);
        assert_eq!(flags('\u{A0}'), WS); // Zs, not P/L/N
    }

    /// Our letters and numbers are a subset of what the standard library (a newer Unicode)
    /// calls alphabetic and numeric: categories of assigned characters do not move.
    #[test]
    fn agrees_with_std_where_defined() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let f = flags(c);
            if f & L != 0 {
                assert!(c.is_alphabetic(), "U+{:04X}", c as u32);
            }
            if f & N != 0 {
                assert!(c.is_numeric(), "U+{:04X}", c as u32);
            }
            if c.is_numeric() && f & N == 0 {
                // only characters new since Unicode 15.1
                assert_eq!(f, 0, "U+{:04X}", c as u32);
            }
        }
    }
}
