//! The text a fidelity run scores, and how it is cut into chunks: as llama.cpp's
//! `llama-perplexity` cuts it, so that our figures and its own can be held side by side.

use lx_engine::backend::TokenId;
use sha2::{Digest, Sha256};

/// A text to score, with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub name: String,
    pub source: String,
    pub body: String,
}

impl Text {
    /// The text shipped with Latency Explorer (crates/run/texts/README.md says what it is).
    pub fn shipped() -> Text {
        Text {
            name: "The Devil's Dictionary (preface, ABASEMENT to BAAL)".into(),
            source: "Ambrose Bierce, 1911, public domain; Debian's dict-devil 1.0-13.1, eight entries left out".into(),
            body: include_str!("../../texts/devils-dictionary.txt").into(),
        }
    }

    /// A text file of the user's.
    pub fn from_file(path: &std::path::Path) -> Result<Text, String> {
        let body = std::fs::read_to_string(path).map_err(|e| format!("cannot read the text {}: {e}", path.display()))?;
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        Ok(Text { name, source: path.display().to_string(), body })
    }

    pub fn sha256(&self) -> String {
        Sha256::digest(self.body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The text's tokens cut into whole chunks of `context` (what is left over is not scored),
/// at most `limit` of them, each chunk's first token replaced by `bos` where the model starts
/// a sequence with one. Each chunk is scored from a fresh cache, over its second half.
pub fn chunks(tokens: &[TokenId], context: usize, bos: Option<TokenId>, limit: Option<usize>) -> Result<Vec<Vec<TokenId>>, String> {
    if context < 8 {
        return Err(format!("a context of {context} tokens is too short to score (at least 8)"));
    }
    let whole = tokens.len() / context;
    if whole == 0 {
        return Err(format!("the text has {} tokens, fewer than one chunk of {context}: use a longer text or a shorter --context", tokens.len()));
    }
    let n = limit.map_or(whole, |l| l.min(whole)).max(1);
    Ok(tokens
        .chunks_exact(context)
        .take(n)
        .map(|c| {
            let mut c = c.to_vec();
            if let Some(b) = bos {
                c[0] = b;
            }
            c
        })
        .collect())
}

/// The first position scored in a chunk of `context`: every scored position sees at least
/// half a context before it.
pub fn first_scored(context: usize) -> usize {
    context / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_whole_and_start_with_bos() {
        let tokens: Vec<TokenId> = (10..45).collect();
        let c = chunks(&tokens, 16, Some(2), None).unwrap();
        assert_eq!(c.len(), 2, "35 tokens hold two whole chunks of 16");
        assert_eq!(c[0][0], 2);
        assert_eq!(&c[0][1..], &tokens[1..16]);
        assert_eq!(c[1][0], 2);
        assert_eq!(&c[1][1..], &tokens[17..32]);
        assert_eq!(chunks(&tokens, 16, None, Some(1)).unwrap(), vec![tokens[..16].to_vec()]);
        assert!(chunks(&tokens, 64, None, None).unwrap_err().contains("fewer than one chunk of 64"));
        assert!(chunks(&tokens, 4, None, None).is_err());
        assert_eq!(first_scored(512), 256);
    }

    #[test]
    fn the_shipped_text_is_the_one_its_readme_names() {
        let t = Text::shipped();
        assert_eq!(t.sha256(), "48cccbd80e84198ed9a02ed08e67329a12a392aafc079fe05b3d60b343207a91");
        assert!(t.body.starts_with("PREFACE"));
    }
}
