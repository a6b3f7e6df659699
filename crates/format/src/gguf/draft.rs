//! Draft models made from a model itself, for speculative decoding when no smaller sibling
//! that shares its vocabulary is at hand: every token id means the same, and the draft costs
//! less per token. Two recipes: a lower-bit copy (its 8-bit matrices, in practice the
//! output head over the whole vocabulary, at 4 bits) and a copy without some middle layers.
//! A file made this way carries [`DRAFT_KEY`], and every result drafted with it says so.

use std::ops::Range;
use std::path::Path;

use super::writer::f16_bits_to_f32;
use super::{GgmlType, GgufError, GgufFile, GgufWriter, ModelFacts, Value};

/// Metadata key a draft made here carries: what it was made from.
pub const DRAFT_KEY: &str = "lx.draft_of";

/// Gemma 3's layer pattern: five sliding-window layers, then a global one.
pub const GEMMA3_PERIOD: u32 = 6;

/// How to make a draft from a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipe {
    /// Every Q8_0 matrix at Q4_0: half the bytes to read for the output head, the largest
    /// matrix of a small model with a large vocabulary.
    LowerBits,
    /// Without these transformer blocks (the later ones renumbered to follow on).
    WithoutLayers(Range<u32>),
}

/// The writer for `real` made into a draft by `recipe`.
pub fn make(real: &GgufFile, recipe: &Recipe) -> Result<GgufWriter, GgufError> {
    let bad = |reason: String| GgufError::BadTensor { path: real.path().to_path_buf(), tensor: String::new(), reason };
    let block_key = real.arch_key("block_count")?;
    let layers = real.get_u32(&block_key)?;
    let original = real.metadata("general.name").and_then(Value::as_str).map(String::from).unwrap_or_else(|| {
        real.path().file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    });
    let (made_from, dropped) = match recipe {
        Recipe::LowerBits => {
            if !real.tensors().iter().any(|t| t.ggml_type == GgmlType::Q8_0) {
                return Err(bad("it has no Q8_0 matrix to store at fewer bits".into()));
            }
            (format!("{original} with its Q8_0 matrices at Q4_0"), 0..0)
        }
        Recipe::WithoutLayers(drop) => {
            let n = drop.end.saturating_sub(drop.start);
            if n == 0 || n >= layers || drop.end > layers {
                return Err(bad(format!("a draft leaves out some but not all of the model's {layers} layers, not {}..{}", drop.start, drop.end)));
            }
            // Gemma 3 chooses sliding-window or global attention by layer index: only whole
            // periods can go, or the layers after them would attend the wrong way.
            if real.architecture()? == "gemma3" && n % GEMMA3_PERIOD != 0 {
                return Err(bad(format!("Gemma 3 layers come in groups of {GEMMA3_PERIOD} (five sliding-window, one global): leave out a multiple of {GEMMA3_PERIOD}, not {n}")));
            }
            (format!("{original} without layers {}-{} of {layers}", drop.start, drop.end - 1), drop.clone())
        }
    };
    let removed = dropped.end - dropped.start;
    let mut w = GgufWriter::new();
    for (key, value) in real.metadata_pairs() {
        if key != block_key && key != DRAFT_KEY && key != "general.name" {
            w = w.kv(key, value.clone());
        }
    }
    w = w.kv(&block_key, layers - removed).kv("general.name", format!("draft: {made_from}")).kv(DRAFT_KEY, made_from);
    for t in real.tensors() {
        let name = match split_block(&t.name) {
            Some((b, _)) if dropped.contains(&b) => continue,
            Some((b, rest)) if removed > 0 && b >= dropped.end => format!("blk.{}.{rest}", b - removed),
            _ => t.name.clone(),
        };
        let bytes = real.read_tensor_bytes(&t.name)?;
        w = if *recipe == Recipe::LowerBits && t.ggml_type == GgmlType::Q8_0 {
            w.tensor_q4_0(name, &t.dims, &q8_0_values(&bytes))
        } else {
            w.tensor(name, &t.dims, t.ggml_type, bytes)
        };
    }
    Ok(w)
}

/// The values of Q8_0 blocks (an f16 scale, then 32 signed bytes).
fn q8_0_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(34)
        .flat_map(|b| {
            let d = f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]));
            b[2..].iter().map(move |&q| d * q as i8 as f32)
        })
        .collect()
}

/// Refuses a draft whose token ids do not mean what the target's do: drafted ids are
/// verified by the target as they are, so the two vocabularies must be the same list. What
/// the draft is comes back from the same read.
pub fn check_vocabulary(target: &Path, draft: &Path) -> Result<ModelFacts, String> {
    let open = |p: &Path| GgufFile::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let (t, d) = (open(target)?, open(draft)?);
    let tokens = |g: &GgufFile| g.get_str_array("tokenizer.ggml.tokens").map(<[String]>::to_vec).map_err(|e| format!("{}: {e}", g.path().display()));
    let (tt, dt) = (tokens(&t)?, tokens(&d)?);
    let refuse = |what: String| {
        Err(format!("the draft model {} cannot draft for {}: {what}; a draft must share the target's vocabulary", draft.display(), target.display()))
    };
    if tt.len() != dt.len() {
        return refuse(format!("its vocabulary has {} tokens, the target's {}", dt.len(), tt.len()));
    }
    if let Some(i) = tt.iter().zip(&dt).position(|(a, b)| a != b) {
        return refuse(format!("token {i} is {:?} in the draft and {:?} in the target", dt[i], tt[i]));
    }
    ModelFacts::from_gguf(&d).map_err(|e| format!("{}: {e}", draft.display()))
}

/// `blk.N.rest` -> (N, rest).
fn split_block(name: &str) -> Option<(u32, &str)> {
    let (n, rest) = name.strip_prefix("blk.")?.split_once('.')?;
    Some((n.parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(path: &Path, arch: &str, layers: u32) {
        let mut w = GgufWriter::new()
            .kv("general.architecture", arch)
            .kv("general.name", "tiny")
            .kv(format!("{arch}.block_count"), layers)
            .kv("tokenizer.ggml.tokens", vec!["a", "b"])
            .tensor_q8_0("token_embd.weight", &[32, 2], &(0..64).map(|i| i as f32 / 8.0 - 4.0).collect::<Vec<_>>())
            .tensor_f32("output_norm.weight", &[2], &[0.5, 0.5]);
        for b in 0..layers {
            w = w.tensor_f32(format!("blk.{b}.attn_norm.weight"), &[2], &[b as f32, 1.0]);
        }
        w.write(path).unwrap();
    }

    #[test]
    fn a_draft_without_layers_renumbers_the_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (full, draft) = (dir.path().join("full.gguf"), dir.path().join("draft.gguf"));
        tiny(&full, "llama", 4);
        let real = GgufFile::open(&full).unwrap();
        make(&real, &Recipe::WithoutLayers(1..3)).unwrap().write(&draft).unwrap();

        let d = GgufFile::open(&draft).unwrap();
        assert_eq!(d.get_u32("llama.block_count").unwrap(), 2);
        assert_eq!(d.get_str(DRAFT_KEY).unwrap(), "tiny without layers 1-2 of 4");
        let names: Vec<&str> = d.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", "blk.1.attn_norm.weight"]);
        assert_eq!(d.read_tensor_bytes("blk.1.attn_norm.weight").unwrap(), real.read_tensor_bytes("blk.3.attn_norm.weight").unwrap());
        assert_eq!(d.read_tensor_bytes("token_embd.weight").unwrap(), real.read_tensor_bytes("token_embd.weight").unwrap());

        for drop in [0..0, 0..4, 3..5] {
            let e = make(&real, &Recipe::WithoutLayers(drop)).unwrap_err().to_string();
            assert!(e.contains("some but not all of the model's 4 layers"), "{e}");
        }
        tiny(&full, "gemma3", 12);
        let gemma = GgufFile::open(&full).unwrap();
        assert!(make(&gemma, &Recipe::WithoutLayers(3..6)).unwrap_err().to_string().contains("multiple of 6, not 3"));
        assert!(make(&gemma, &Recipe::WithoutLayers(0..6)).is_ok());
    }

    #[test]
    fn a_lower_bit_draft_stores_q8_0_at_q4_0_within_half_a_step() {
        let dir = tempfile::tempdir().unwrap();
        let (full, draft) = (dir.path().join("full.gguf"), dir.path().join("draft.gguf"));
        tiny(&full, "llama", 2);
        let real = GgufFile::open(&full).unwrap();
        make(&real, &Recipe::LowerBits).unwrap().write(&draft).unwrap();
        let d = GgufFile::open(&draft).unwrap();
        assert_eq!(d.get_u32("llama.block_count").unwrap(), 2);
        assert_eq!(d.get_str(DRAFT_KEY).unwrap(), "tiny with its Q8_0 matrices at Q4_0");
        assert_eq!(d.tensor("token_embd.weight").unwrap().ggml_type, GgmlType::Q4_0);
        assert_eq!(d.read_tensor_bytes("blk.1.attn_norm.weight").unwrap(), real.read_tensor_bytes("blk.1.attn_norm.weight").unwrap());

        let before = q8_0_values(&real.read_tensor_bytes("token_embd.weight").unwrap());
        let q4 = d.read_tensor_bytes("token_embd.weight").unwrap();
        let after: Vec<f32> = q4
            .chunks_exact(18)
            .flat_map(|b| {
                let s = f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]));
                let codes: Vec<u8> = (0..16).map(|j| b[2 + j] & 15).chain((0..16).map(|j| b[2 + j] >> 4)).collect();
                codes.into_iter().map(move |c| s * (c as f32 - 8.0))
            })
            .collect();
        for (block_before, block_after) in before.chunks(32).zip(after.chunks(32)) {
            let extreme = block_before.iter().fold(0f32, |m, v| m.max(v.abs()));
            let step = extreme / 8.0;
            for (a, b) in block_before.iter().zip(block_after) {
                assert!((a - b).abs() <= step / 2.0 + 1e-3, "{a} -> {b} (step {step})");
            }
        }
        // The extreme value is code 0 and comes back but for the f16 rounding of its scale.
        assert!((after[0] - before[0]).abs() <= before[0].abs() / 1024.0, "{} -> {}", before[0], after[0]);

        let e = make(&GgufFile::open(&draft).unwrap(), &Recipe::LowerBits).unwrap_err().to_string();
        assert!(e.contains("no Q8_0 matrix"), "{e}");
    }

    #[test]
    fn a_draft_must_share_the_vocabulary() {
        let dir = tempfile::tempdir().unwrap();
        let (full, other) = (dir.path().join("full.gguf"), dir.path().join("other.gguf"));
        tiny(&full, "llama", 2);
        assert!(check_vocabulary(&full, &full).is_ok());
        GgufWriter::new().kv("general.architecture", "llama").kv("tokenizer.ggml.tokens", vec!["a", "c"]).write(&other).unwrap();
        let e = check_vocabulary(&full, &other).unwrap_err();
        assert!(e.contains("token 1 is \"c\" in the draft and \"b\" in the target"), "{e}");
        GgufWriter::new().kv("general.architecture", "llama").kv("tokenizer.ggml.tokens", vec!["a"]).write(&other).unwrap();
        assert!(check_vocabulary(&full, &other).unwrap_err().contains("1 tokens, the target's 2"));
    }
}
