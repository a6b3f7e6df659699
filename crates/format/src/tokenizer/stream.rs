//! Text as tokens arrive: one token's bytes at a time, a character split across tokens
//! held back until it is complete. The preview pane, `lx serve`'s streamed text and `lx
//! generate` all print through it.

/// Turns one token at a time into text pieces, holding back bytes of a character that is
/// split across tokens until it is complete.
#[derive(Debug, Default)]
pub struct PieceDecoder {
    pending: Vec<u8>,
}

impl PieceDecoder {
    /// The text this token completes (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                let out = s.to_string();
                self.pending.clear();
                out
            }
            Err(e) => {
                let valid = e.valid_up_to();
                // An invalid sequence (not merely an unfinished one) will never complete:
                // show it as U+FFFD rather than hold it back forever.
                let (take, out) = match e.error_len() {
                    None => (valid, String::from_utf8_lossy(&self.pending[..valid]).into_owned()),
                    Some(bad) => (valid + bad, String::from_utf8_lossy(&self.pending[..valid + bad]).into_owned()),
                };
                self.pending.drain(..take);
                if e.error_len().is_some() && !self.pending.is_empty() {
                    // There may be more complete text after the bad bytes.
                    return out + &self.push(&[]);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piece_decoder_holds_back_split_characters() {
        let mut d = PieceDecoder::default();
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(d.push(b"a"), "a");
        assert_eq!(d.push(&euro[..1]), "");
        assert_eq!(d.push(&euro[1..2]), "");
        assert_eq!(d.push(&euro[2..]), "€");
        // An invalid byte is shown as U+FFFD, not held forever.
        assert_eq!(d.push(&[0xff, b'b']), "\u{FFFD}b");
        assert_eq!(d.push(b" c"), " c");
    }
}
