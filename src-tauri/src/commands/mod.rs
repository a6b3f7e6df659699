//! The app's commands, one file per area. Each is `async` (so none runs on the UI thread)
//! and hands anything slow to a blocking thread; all measuring is done by the engine.

pub mod advise;
pub mod export;
pub mod fidelity;
pub mod gallery;
pub mod lessons;
pub mod live;
pub mod models;
pub mod runs;
pub mod servers;
pub mod sweep;
pub mod system;
pub mod tune;

use crate::error::{CmdError, CmdResult};

/// Ask the user for a file of the `filter` kind (its name and extension), in a native
/// dialog on the Rust side: the web view itself has no file access. `None` when cancelled.
pub(crate) async fn pick_file(app: tauri::AppHandle, title: &'static str, filter: (&'static str, &'static str)) -> CmdResult<Option<String>> {
    use tauri_plugin_dialog::DialogExt;
    blocking(move || {
        app.dialog()
            .file()
            .set_title(title)
            .add_filter(filter.0, &[filter.1])
            .blocking_pick_file()
            .and_then(|f| f.into_path().ok())
            .map(|p| p.display().to_string())
    })
    .await
}

/// Run blocking work off the async runtime's threads.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> CmdResult<T> {
    tauri::async_runtime::spawn_blocking(f).await.map_err(|e| CmdError::Io(format!("background task failed: {e}")))
}
