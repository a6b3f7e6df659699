//! The app's commands, one file per area. Each is `async` (so none runs on the UI thread)
//! and hands anything slow to a blocking thread; all measuring is done by the engine.

pub mod export;
pub mod live;
pub mod models;
pub mod sweep;
pub mod system;

use crate::error::{CmdError, CmdResult};

/// Run blocking work off the async runtime's threads.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> CmdResult<T> {
    tauri::async_runtime::spawn_blocking(f).await.map_err(|e| CmdError::Io(format!("background task failed: {e}")))
}
