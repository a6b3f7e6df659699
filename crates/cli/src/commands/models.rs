//! `lx models list|fetch|synth|draft`.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum ModelsCmd {
    /// The catalog, and which models are downloaded.
    List,
    /// Download and verify a model (default: the default model). Idempotent.
    Fetch {
        /// Catalog name, or hf:OWNER/REPO/FILE.gguf.
        #[arg(default_value = "default")]
        name: String,
    },
    /// Write a shape-only model: a real model's tensor shapes and types with made-up
    /// weights. It times like the model it mimics (greedy, EOS ignored); its text is noise,
    /// and every result made with it says so. `--model synth:NAME` makes a preset on first use.
    Synth {
        /// A preset: NAME or NAME-q4_k_m / NAME-q8_0 (see --list).
        #[arg(conflicts_with_all = ["like", "list"], required_unless_present_any = ["like", "list"])]
        preset: Option<String>,
        /// The twin of a real model instead (catalog name, .gguf path or hf:...): its exact
        /// tensors and metadata, a made-up vocabulary of the same size.
        #[arg(long, conflicts_with = "list")]
        like: Option<String>,
        /// Where to write it (default: the model directory's synthetic/NAME.gguf).
        #[arg(long, short)]
        out: Option<std::path::PathBuf>,
        /// List the presets with their parameter counts and file sizes.
        #[arg(long)]
        list: bool,
    },
    /// Write a draft model for speculative decoding (`--spec draft`) from a model itself, with
    /// the same tokenizer: a lower-bit copy (its Q8_0 matrices at Q4_0) or a copy without some
    /// middle layers. Every result drafted with it says what it was made from. `--spec draft`
    /// makes the model's default one on first use.
    Draft {
        /// The model to draft for (catalog name, .gguf path or hf:...).
        #[arg(default_value = "default")]
        model: String,
        /// Leave out these layers, FROM-TO inclusive, instead of the default recipe (Gemma 3:
        /// the lower-bit copy; others: a fifth of the layers, past the middle).
        #[arg(long, value_parser = lx_local::draft::parse_drop)]
        drop: Option<std::ops::Range<u32>>,
        /// Where to write it (default: the model directory's drafts/STEM-without-FROM-TO.gguf).
        #[arg(long, short)]
        out: Option<std::path::PathBuf>,
    },
}

pub fn run(cmd: ModelsCmd) -> anyhow::Result<i32> {
    match cmd {
        ModelsCmd::List => {
            println!("| name | file | size | quantization | present | path |");
            println!("| --- | --- | ---: | --- | --- | --- |");
            for m in lx_models::list() {
                let state = match (m.present, m.verified) {
                    (true, true) => "yes (verified)",
                    (true, false) => "yes (not yet verified)",
                    _ => "no",
                };
                println!(
                    "| {}{} | {} | {:.1} MB | {} | {state} | {} |",
                    m.entry.name,
                    if m.entry.is_default() { " (default)" } else { "" },
                    m.entry.file,
                    m.entry.size as f64 / 1e6,
                    m.entry.quantization,
                    m.path.display()
                );
            }
        }
        ModelsCmd::Fetch { name } => {
            let spec = lx_models::ModelSpec::parse(&name)?;
            let resolved = lx_models::resolve(&spec, &lx_models::Options::default(), &mut crate::progress::fetch_reporter())?;
            println!("{}", resolved.path.display());
        }
        ModelsCmd::Synth { list: true, .. } => {
            println!("| name | architecture | parameters | file size | present | spec |");
            println!("| --- | --- | ---: | ---: | --- | --- |");
            for p in lx_local::synth::listing() {
                let present = if p.path.is_file() { "yes" } else { "no" };
                println!("| {} | {} | {:.2} B | {:.2} GB | {present} | {} |", p.name, p.architecture, p.parameters as f64 / 1e9, p.bytes as f64 / 1e9, p.spec);
            }
        }
        ModelsCmd::Synth { preset, like, out, .. } => {
            use lx_local::synth::{make, Source};
            let source = match (&preset, &like) {
                (_, Some(spec)) => Source::Like(spec),
                (Some(name), None) => Source::Preset(name),
                (None, None) => anyhow::bail!("name a preset or --like MODEL (see lx models synth --list)"),
            };
            let made = make(&source, out.as_deref(), &mut crate::progress::fetch_reporter())?;
            eprintln!(
                "wrote {} ({:.2} B parameters, {:.2} GB): {}",
                made.name,
                made.parameters as f64 / 1e9,
                made.bytes as f64 / 1e9,
                lx_format::gguf::synth::SYNTHETIC_NOTE
            );
            println!("{}", made.path.display());
        }
        ModelsCmd::Draft { model, drop, out } => {
            let spec = lx_models::ModelSpec::parse(&model)?;
            let resolved = lx_models::resolve(&spec, &lx_models::Options::default(), &mut crate::progress::fetch_reporter())?;
            let path = lx_local::draft::make(&resolved.path, drop.map(lx_format::gguf::draft::Recipe::WithoutLayers), out.as_deref())?;
            let facts = lx_format::gguf::ModelFacts::read(&path)?;
            eprintln!("draft: {}", facts.draft_of.as_deref().unwrap_or("a model of its own"));
            println!("{}", path.display());
        }
    }
    Ok(0)
}
