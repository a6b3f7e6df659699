//! The TypeScript types the UI exchanges with these commands, generated from the Rust types
//! (ts-rs) into `ui/src/ipc/generated/`, one file per type. `ui/src/ipc/types.ts` re-exports
//! them; nothing on the UI side declares a shape of its own. The test below regenerates them
//! and fails when the checked-in files differ, so a change on one side that the other does
//! not follow fails the build: `scripts/gen-types` (which sets `LX_WRITE_BINDINGS=1`)
//! rewrites them.

use std::path::{Path, PathBuf};

use ts_rs::{Config, ExportError, TS};

/// Where the generated files live, from the repository root.
pub const GENERATED_DIR: &str = "ui/src/ipc/generated";

/// Every type a command takes or returns, or a channel carries; each brings the types it
/// contains.
fn export_all(cfg: &Config) -> Result<(), ExportError> {
    lx_drivers::live::LiveSettings::export_all(cfg)?;
    lx_drivers::live::LiveEvent::export_all(cfg)?;
    lx_machine::hardware::HardwareReport::export_all(cfg)?;
    lx_models::Progress::export_all(cfg)?;
    lx_backends::check::CheckRow::export_all(cfg)?;
    crate::events::SweepEvent::export_all(cfg)?;
    crate::error::CmdError::export_all(cfg)?;
    crate::commands::models::CatalogModel::export_all(cfg)?;
    crate::commands::models::ModelInfo::export_all(cfg)?;
    crate::commands::runs::OpenedRun::export_all(cfg)?;
    crate::commands::servers::ServerSpec::export_all(cfg)?;
    crate::commands::sweep::SweepRequest::export_all(cfg)?;
    crate::commands::system::BackendAvailability::export_all(cfg)?;
    crate::commands::tune::TuneEvent::export_all(cfg)?;
    crate::commands::export::ExportSource::export_all(cfg)?;
    Ok(())
}

/// Writes every binding into `dir`. Counts that JavaScript reads as numbers (token and byte
/// counts, milliseconds since 1970) stay `number`: JSON carries no bigint.
pub fn write(dir: &Path) -> Result<(), ExportError> {
    export_all(&Config::new().with_large_int("number").with_out_dir(dir))
}

/// The `.ts` files under `dir`, by name, with their text.
fn read_dir(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            let path: PathBuf = entry?.path();
            if path.extension().is_some_and(|e| e == "ts") {
                let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
                out.push((name, std::fs::read_to_string(&path)?));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_typescript_types_are_current() {
        let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(GENERATED_DIR);
        let fresh = tempfile::tempdir().unwrap();
        write(fresh.path()).unwrap();
        let want = read_dir(fresh.path()).unwrap();
        assert!(want.len() > 20, "only {} types generated", want.len());
        if std::env::var_os("LX_WRITE_BINDINGS").is_some() {
            let _ = std::fs::remove_dir_all(&checked_in);
            write(&checked_in).unwrap();
            return;
        }
        let have = read_dir(&checked_in).unwrap();
        let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&have), names(&want), "{GENERATED_DIR} names other types than the Rust side: run scripts/gen-types");
        for ((name, have), (_, want)) in have.iter().zip(&want) {
            assert_eq!(have, want, "{GENERATED_DIR}/{name} is stale: run scripts/gen-types");
        }
    }
}
