//! The app's commands, one file per area. Each is `async` (so none runs on the UI thread)
//! and hands anything slow to a blocking thread; all measuring is done by the engine.

pub mod export;
pub mod live;
pub mod models;
pub mod runs;
pub mod servers;
pub mod sweep;
pub mod system;
pub mod tune;

use crate::error::{CmdError, CmdResult};

/// The compute threads the app measures with: `0` (auto) leaves a core for the window when
/// the backend would otherwise take every one (see [`threads_beside_a_window`]); any other
/// number is used as given.
pub(crate) fn app_threads(threads: usize) -> usize {
    if threads == 0 {
        threads_beside_a_window()
    } else {
        threads
    }
}

/// The default thread count beside a window that draws live: all physical cores, less one
/// when they are all the hardware threads this process may use. A backend's threads wait for
/// each other at every step, so a repaint that takes a slice of one of their cores stalls all
/// of them: with llama.cpp on both cores of a 2-core machine the app measured decode 8% slower
/// than headless `lx sweep`, with one core left for the window within 5% (scripts/app-bench;
/// docs/APP.md). Where there are spare hyper-threads the window runs on those and every
/// physical core still computes.
pub(crate) fn threads_beside_a_window() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    threads_leaving_a_core(lx_engine::hardware::physical_cores(), logical)
}

/// [`threads_beside_a_window`] for a machine with `physical` cores and `logical` hardware threads.
fn threads_leaving_a_core(physical: usize, logical: usize) -> usize {
    let physical = physical.max(1);
    if logical > physical {
        physical
    } else {
        logical.saturating_sub(1).max(1)
    }
}


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

#[cfg(test)]
mod tests {
    #[test]
    fn a_window_gets_a_core_of_its_own_unless_hyper_threads_are_spare() {
        use super::threads_leaving_a_core as t;
        assert_eq!(t(2, 2), 1, "2-core VM: one computes, one draws");
        assert_eq!(t(8, 8), 7, "Apple M-series: no hyper-threads");
        assert_eq!(t(1, 1), 1, "never zero threads");
        assert_eq!(t(8, 16), 8, "SMT: the window runs on a sibling thread");
        assert_eq!(t(8, 4), 3, "affinity narrower than the physical cores");
        let here = super::threads_beside_a_window();
        assert!(here >= 1 && here <= lx_engine::hardware::physical_cores(), "{here}");
    }
}
