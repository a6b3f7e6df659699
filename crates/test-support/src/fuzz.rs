//! Seeded mutation of valid inputs, for the robustness tests of every reader (GGUF files, run
//! files, the worker protocol, a server's event stream): corrupted copies that each must read
//! or fail with an error, never panic. Deterministic, so a failing case replays from its
//! number.

/// A small xorshift generator and the edits it makes.
pub struct Mutator {
    state: u64,
}

impl Mutator {
    pub fn new(seed: u64) -> Self {
        Mutator { state: seed.max(1) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One to four edits of `bytes` (not empty): a byte overwritten, a bit flipped, an extreme
    /// little-endian u64 planted where a length or count may be, the tail cut off (at least
    /// `keep` bytes stay), a span deleted, a span duplicated.
    pub fn mutate(&mut self, bytes: &mut Vec<u8>, keep: usize) {
        for _ in 0..1 + self.below(4) {
            if bytes.is_empty() {
                return;
            }
            let at = self.below(bytes.len());
            match self.below(6) {
                0 => bytes[at] = self.next_u64() as u8,
                1 => bytes[at] ^= 1 << self.below(8),
                2 => {
                    let v = [u64::MAX, u64::MAX / 2, 1 << 40, u32::MAX as u64, 0][self.below(5)];
                    let end = (at + 8).min(bytes.len());
                    bytes[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
                }
                3 => bytes.truncate(at.max(keep)),
                4 => {
                    let len = self.below(32).min(bytes.len() - at);
                    bytes.drain(at..at + len);
                }
                _ => {
                    let len = self.below(32).min(bytes.len() - at);
                    let span: Vec<u8> = bytes[at..at + len].to_vec();
                    bytes.splice(at..at, span);
                }
            }
        }
    }
}
