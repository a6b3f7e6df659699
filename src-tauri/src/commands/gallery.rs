//! The gallery of machines in the app: the page `lx gallery` writes
//! (lx_results::bench::gallery), made of the bench files this project measured and the ones the
//! user adds, shown in a frame. The frame's page comes from the app's own `lxgallery:`
//! protocol with a policy of its own (its inline style and filter script, nothing fetched),
//! and the frame is sandboxed: the page cannot reach the app's commands.

use std::path::PathBuf;

use serde::Serialize;
use tauri::{AppHandle, State};

use super::blocking;
use crate::error::CmdResult;
use crate::state::{AppState, Gallery, Locked};

/// The protocol the page is served on.
pub const SCHEME: &str = "lxgallery";

/// The page's policy: its own inline style and its one inline script, nothing else.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

/// The gallery as it stands: its files and machines, and the files it could not read.
#[derive(Debug, Clone, Default, Serialize, ts_rs::TS)]
pub struct GalleryShown {
    /// Each file, by name (the shipped ones say so).
    pub files: Vec<String>,
    /// Distinct machines among them.
    pub machines: usize,
    /// Whether one of the files is from this machine.
    pub this_machine: bool,
    /// Files that could not be read, and why.
    pub problems: Vec<String>,
}

/// Build the page from the shipped files and `added`.
fn build(added: &[PathBuf]) -> (String, GalleryShown) {
    let (mine, problems) = lx_results::bench::gallery::load(added);
    let entries = lx_results::bench::gallery::with_shipped(mine);
    let here = lx_results::bench::Machine::here();
    let page = lx_results::bench::gallery::html(&entries, Some(&here));
    let machines: std::collections::BTreeSet<&str> = entries.iter().map(|e| e.file.machine.fingerprint.as_str()).collect();
    let shown = GalleryShown {
        files: entries.iter().map(|e| e.source.clone()).collect(),
        machines: machines.len(),
        this_machine: entries.iter().any(|e| e.file.machine.fingerprint == here),
        problems,
    };
    (page, shown)
}

/// Add bench files (none: the shipped ones alone) and make the page again.
#[tauri::command]
pub async fn gallery_add(state: State<'_, AppState>, paths: Vec<String>) -> CmdResult<GalleryShown> {
    let mut added = state.gallery.locked().added.clone();
    for p in paths.into_iter().map(PathBuf::from) {
        if !added.contains(&p) {
            added.push(p);
        }
    }
    let list = added.clone();
    let (page, mut shown) = blocking(move || build(&list)).await?;
    // A file that cannot be read is said once, and not kept.
    added.retain(|p| !shown.problems.iter().any(|why| why.contains(&p.display().to_string())));
    shown.problems.dedup();
    *state.gallery.locked() = Gallery { added, page };
    Ok(shown)
}

/// Ask the user for bench files (several at once). Empty when cancelled.
#[tauri::command]
pub async fn pick_bench_files(app: AppHandle) -> CmdResult<Vec<String>> {
    use tauri_plugin_dialog::DialogExt;
    blocking(move || {
        app.dialog()
            .file()
            .set_title("Add bench files (lx bench)")
            .add_filter("Latency Explorer bench", &["json"])
            .blocking_pick_files()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|f| f.into_path().ok())
            .map(|p| p.display().to_string())
            .collect()
    })
    .await
}

/// The page, as the protocol answers any request.
pub fn serve(state: &AppState) -> tauri::http::Response<Vec<u8>> {
    let page = state.gallery.locked().page.clone();
    let body = if page.is_empty() { build(&[]).0 } else { page };
    tauri::http::Response::builder()
        .header("Content-Type", "text/html; charset=utf-8")
        .header("Content-Security-Policy", PAGE_CSP)
        .header("Cache-Control", "no-store")
        .body(body.into_bytes())
        .expect("static headers are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_the_shipped_files_and_the_added_ones_and_says_what_it_could_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let (page, shown) = build(&[bad.clone()]);
        assert!(!shown.files.is_empty() && shown.files.iter().all(|f| f.ends_with("(shipped)")), "{:?}", shown.files);
        assert_eq!(shown.problems.len(), 1);
        assert!(shown.problems[0].contains("is not JSON"), "{:?}", shown.problems);
        assert!(page.contains("data-testid=\"score-bars\""));
        let state = AppState::new(dir.path().to_path_buf());
        let response = serve(&state);
        assert_eq!(response.headers()["Content-Security-Policy"], PAGE_CSP);
        assert!(String::from_utf8_lossy(response.body()).starts_with("<!DOCTYPE html>"));
    }
}
