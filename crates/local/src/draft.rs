//! Draft models for speculative decoding (`--spec draft`): a file the user names, or one made
//! from the target itself ([`lx_format::gguf::draft`]) once into the model directory and reused.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::Context;
use lx_format::gguf::draft::{self, Recipe};
use lx_format::gguf::GgufFile;

/// The recipe for a model when none is named. A copy without middle layers where the model
/// tolerates it: SmolLM2-135M without 6 of its 30 layers still writes sense. Not Gemma 3: the
/// default model without any whole group of 6 of its 18 layers writes noise, so its draft is
/// the lower-bit copy (the output head at 4 bits).
pub fn default_recipe(layers: u32, architecture: &str) -> Recipe {
    if architecture == "gemma3" {
        return Recipe::LowerBits;
    }
    let count = (layers / 5).max(1);
    let start = (layers - count) / 2 + count / 2;
    Recipe::WithoutLayers(start..start + count)
}

/// Parses `FROM-TO` (inclusive, as `lx models draft --drop 6-11`).
pub fn parse_drop(s: &str) -> Result<Range<u32>, String> {
    let bad = || format!("'{s}' is not a range of layers FROM-TO (e.g. 6-11)");
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let (a, b): (u32, u32) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if b < a {
        return Err(bad());
    }
    Ok(a..b + 1)
}

/// Where the draft of `model` by `recipe` lives: `<model dir>/drafts/<model file
/// stem>-q4-head.gguf` or `...-without-FROM-TO.gguf`.
pub fn path_for(model: &Path, recipe: &Recipe) -> PathBuf {
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let what = match recipe {
        Recipe::LowerBits => "q4_0-head".to_string(),
        Recipe::WithoutLayers(r) => format!("without-{}-{}", r.start, r.end - 1),
    };
    lx_models::model_dir().join("drafts").join(format!("{stem}-{what}.gguf"))
}

/// The draft of `model` by `recipe` (default: [`default_recipe`]), written to `out` (default:
/// [`path_for`], kept and reused once written). Returns its path.
pub fn make(model: &Path, recipe: Option<Recipe>, out: Option<&Path>) -> anyhow::Result<PathBuf> {
    let real = GgufFile::open(model).with_context(|| format!("cannot read {}", model.display()))?;
    let layers = real.get_u32(&real.arch_key("block_count")?)?;
    let recipe = recipe.unwrap_or_else(|| default_recipe(layers, real.architecture().unwrap_or_default()));
    let path = out.map(Path::to_path_buf).unwrap_or_else(|| path_for(model, &recipe));
    // A file is written whole or not at all (GgufWriter::write), so one that exists is complete.
    if path.is_file() && out.is_none() {
        return Ok(path);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let writer = draft::make(&real, &recipe).with_context(|| format!("cannot make a draft of {}", model.display()))?;
    writer.write(&path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The draft to use for `model`: `named` when given, else the one made from the model
/// ([`make`]); checked to share the model's vocabulary either way.
pub fn resolve(model: &Path, named: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match named {
        Some(p) => p.to_path_buf(),
        None => make(model, None, None)?,
    };
    draft::check_vocabulary(model, &path).map_err(anyhow::Error::msg)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_by_default_and_by_name() {
        assert_eq!(default_recipe(18, "gemma3"), Recipe::LowerBits);
        assert_eq!(default_recipe(30, "llama"), Recipe::WithoutLayers(15..21));
        assert_eq!(default_recipe(2, "llama"), Recipe::WithoutLayers(0..1));
        assert_eq!(parse_drop("6-11"), Ok(6..12));
        assert!(parse_drop("11-6").is_err());
        assert!(parse_drop("six").unwrap_err().contains("FROM-TO"));
    }
}
