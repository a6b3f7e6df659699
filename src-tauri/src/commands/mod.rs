//! The app's commands, one file per area. Each is `async` (so none runs on the UI thread)
//! and hands anything slow to a blocking thread; all measuring is done by the engine.

pub mod export;
pub mod live;
pub mod models;
pub mod sweep;
pub mod system;

use crate::error::{CmdError, CmdResult};

/// The compute threads the app measures with: `0` (auto) leaves a core for the window when
/// the backend would otherwise take every one (see
/// [`lx_engine::hardware::threads_beside_a_window`]); any other number is used as given.
pub(crate) fn app_threads(threads: usize) -> usize {
    if threads == 0 {
        lx_engine::hardware::threads_beside_a_window()
    } else {
        threads
    }
}

/// Run blocking work off the async runtime's threads.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> CmdResult<T> {
    tauri::async_runtime::spawn_blocking(f).await.map_err(|e| CmdError::Io(format!("background task failed: {e}")))
}
