//! Shape-only models on disk ([`lx_format::gguf::synth`]): `lx models synth`, and
//! `synth:NAME` wherever a model is named (`lx sweep --model synth:llama3.1-8b`, the app's
//! model field), made once into the model directory and reused.

use std::path::{Path, PathBuf};

use anyhow::Context;
use lx_format::gguf::synth::{self, Preset, Quant};
use lx_format::gguf::{GgufFile, GgufWriter};

/// How a model spec names a shape-only model: `synth:PRESET[-QUANT]`.
pub const SPEC_PREFIX: &str = "synth:";

/// What to make a shape-only model from.
pub enum Source<'a> {
    /// A preset by name (`gemma3-1b`, `llama3.1-8b-q8_0`; see [`synth::PRESETS`]).
    Preset(&'a str),
    /// The twin of a real model: a catalog name, a `.gguf` path or `hf:...`.
    Like(&'a str),
}

/// Where `synth:NAME` lives: `<model dir>/synthetic/NAME.gguf`, NAME in its canonical form.
pub fn path_for(name: &str) -> PathBuf {
    lx_models::model_dir().join("synthetic").join(format!("{name}.gguf"))
}

/// The writer and canonical name for `source`. A twin's real model is resolved (fetched if
/// it is a catalog model not yet here) and only its header is read.
fn plan(source: &Source, progress: &mut dyn FnMut(lx_models::Progress)) -> anyhow::Result<(String, GgufWriter)> {
    match source {
        Source::Preset(name) => {
            let (preset, quant): (Preset, Quant) = synth::preset(name).map_err(anyhow::Error::msg)?;
            let canonical = format!("{}-{}", preset.name, quant.name());
            let writer = preset.shape.writer(quant, &canonical);
            Ok((canonical, writer))
        }
        Source::Like(spec) => {
            let parsed = lx_models::ModelSpec::parse(spec)?;
            let resolved = lx_models::resolve(&parsed, &lx_models::Options::default(), progress)?;
            let real = GgufFile::open(&resolved.path).with_context(|| format!("cannot read {}", resolved.path.display()))?;
            let stem = resolved.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
            let writer = synth::twin_of(&real).with_context(|| format!("cannot make a twin of {}", resolved.path.display()))?;
            Ok((format!("twin-of-{stem}"), writer))
        }
    }
}

/// What [`make`] wrote.
pub struct Made {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub parameters: u64,
}

/// Write the shape-only model for `source` to `out` (default: [`path_for`] its name).
pub fn make(source: &Source, out: Option<&Path>, progress: &mut dyn FnMut(lx_models::Progress)) -> anyhow::Result<Made> {
    let (name, writer) = plan(source, progress)?;
    let path = out.map(Path::to_path_buf).unwrap_or_else(|| path_for(&name));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let bytes = writer.file_size();
    let parameters = writer.planned_tensors().map(|(_, dims, _)| dims.iter().product::<u64>()).sum();
    writer.write_reporting(&path, &mut |done, total| progress(lx_models::Progress::Generating { bytes_done: done, bytes_total: total })).with_context(|| format!("cannot write {} ({:.1} GB)", path.display(), bytes as f64 / 1e9))?;
    // Nothing was downloaded: the fetch display closes without a "fetched and verified" line.
    progress(lx_models::Progress::Done { path: path.clone(), already_present: true });
    Ok(Made { name, path, bytes, parameters })
}

/// The file for a `synth:NAME` spec, made on first use. `None` when `spec` is not one.
pub fn resolve_spec(spec: &str, progress: &mut dyn FnMut(lx_models::Progress)) -> Option<anyhow::Result<PathBuf>> {
    let name = spec.strip_prefix(SPEC_PREFIX)?;
    Some((|| {
        let (preset, quant) = synth::preset(name).map_err(anyhow::Error::msg)?;
        let path = path_for(&format!("{}-{}", preset.name, quant.name()));
        // A file is written whole or not at all (GgufWriter::write), so one that exists is complete.
        if !path.is_file() {
            make(&Source::Preset(name), Some(&path), progress)?;
        }
        Ok(path)
    })())
}

/// One preset as a model picker lists it.
pub struct Listing {
    /// `synth:NAME`, what a model field takes.
    pub spec: String,
    pub name: String,
    pub architecture: &'static str,
    pub quantization: &'static str,
    pub parameters: u64,
    pub bytes: u64,
    pub path: PathBuf,
}

/// Every preset with its size, computed once (each needs its vocabulary built).
pub fn listing() -> &'static [Listing] {
    static LISTING: std::sync::OnceLock<Vec<Listing>> = std::sync::OnceLock::new();
    LISTING.get_or_init(|| {
        synth::preset_names()
            .into_iter()
            .filter_map(|name| {
                let (preset, quant) = synth::preset(&name).ok()?;
                let w = preset.shape.writer(quant, &name);
                Some(Listing {
                    spec: format!("{SPEC_PREFIX}{name}"),
                    parameters: w.planned_tensors().map(|(_, dims, _)| dims.iter().product::<u64>()).sum(),
                    bytes: w.file_size(),
                    path: path_for(&name),
                    architecture: preset.shape.architecture,
                    quantization: quant.name(),
                    name,
                })
            })
            .collect()
    })
}
