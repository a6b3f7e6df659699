//! `lx models list|fetch`.

use clap::Subcommand;
use indicatif::ProgressBar;

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
}

/// Show one fetch progress event on `bar`.
pub fn draw(bar: &ProgressBar, p: lx_models::Progress) {
    use lx_models::Progress as P;
    match p {
        P::Downloading { part, parts, name } => {
            bar.set_length(0);
            bar.set_message(format!("downloading {name} ({part}/{parts})"));
            bar.tick();
        }
        P::Transferring { bytes_done, bytes_total } => {
            bar.set_length(bytes_total.unwrap_or(0));
            bar.set_position(bytes_done);
            bar.set_message("downloading");
        }
        P::Extracting { part, parts } => bar.set_message(format!("extracting part {part}/{parts}")),
        P::Verifying { bytes_done, bytes_total } => {
            bar.set_length(bytes_total);
            bar.set_position(bytes_done);
            bar.set_message("verifying sha256");
        }
        P::Done { path, already_present } => {
            bar.finish_and_clear();
            if !already_present {
                eprintln!("fetched and verified {}", path.display());
            }
        }
        _ => {}
    }
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
    }
    Ok(0)
}
