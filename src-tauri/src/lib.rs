//! Latency Explorer's desktop app: a thin Tauri 2 shell over the engine.
//!
//! Commands (see `commands/`) own the engine's objects (the open model, the live session, a
//! sweep) and stream what they report to the UI through `tauri::ipc::Channel`s; nothing here
//! measures. The same binary hosts the backend workers: started as `APP worker --backend
//! NAME` it serves the worker protocol and nothing else, which is what
//! `lx_local::worker_command` (re-executing the current binary) relies on.

pub mod bindings;
pub mod commands;
pub mod error;
pub mod events;
pub mod state;
pub mod threads;

use tauri::Manager;

use crate::state::Locked;

/// The binary's entry point: a worker when asked for one, else the app.
pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--version" | "-V") => {
            println!("latency-explorer {} (built for target-cpu={})", env!("CARGO_PKG_VERSION"), env!("LX_TARGET_CPU"));
            return;
        }
        Some("--help" | "-h") => {
            println!("Latency Explorer {}: measure how fast a local LLM answers (TTFT, tokens/s), live.\n\nusage: latency-explorer           start the app\n       latency-explorer worker --backend NAME   (internal: host one backend's worker)\n       latency-explorer worker --probe          (internal: measure this machine's limits)", env!("CARGO_PKG_VERSION"));
            return;
        }
        _ => {}
    }
    lx_local::serve_if_asked(&args);
    run();
}

/// On Linux, WebKitGTK composites the page with OpenGL. Without a GPU (a CPU-only
/// machine, a VM, Xvfb) that is done in software and costs a large share of a core on
/// every redraw, taken from the model being measured; with a GPU it competes with a GPU
/// backend. The page is plain 2-D (canvas charts, no WebGL, no 3-D CSS), so the app asks
/// for the non-composited path unless the user chose otherwise (set the variable to 0).
/// Measured under Xvfb while live: the web view's CPU fell from 38% to 8% of a core.
fn quiet_webview() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("WEBKIT_DISABLE_COMPOSITING_MODE").is_none() {
        // Called first thing in `main`, before any thread exists.
        std::env::set_var("WEBKIT_DISABLE_COMPOSITING_MODE", "1");
    }
}

/// Start the app.
pub fn run() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        eprintln!("error: no display (neither DISPLAY nor WAYLAND_DISPLAY is set): start the app from a desktop session, or under xvfb-run for a headless check");
        std::process::exit(1);
    }
    quiet_webview();
    tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .register_uri_scheme_protocol(commands::gallery::SCHEME, |ctx, _request| commands::gallery::serve(&ctx.app_handle().state::<state::AppState>()))
        .setup(|app| {
            let runs_dir = app
                .path()
                .app_data_dir()
                .map(|d| d.join("runs"))
                .unwrap_or_else(|_| std::env::temp_dir().join("latency-explorer").join("runs"));
            app.manage(state::AppState::new(runs_dir));
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            // The machine and its backends.
            commands::system::hardware,
            commands::system::backends,
            commands::system::check_backends,
            commands::system::machine_speed,
            commands::system::memory_fit,
            commands::system::settings_fit,
            // OpenAI-compatible servers as backends.
            commands::servers::server_add,
            commands::servers::server_remove,
            // Models: catalog, open (fetching when needed), pick a file.
            commands::models::models,
            commands::models::current_model,
            commands::models::open_model,
            commands::models::pick_model_file,
            // Live mode.
            commands::live::live_start,
            commands::live::live_update,
            commands::live::live_ceiling,
            commands::live::live_retry,
            commands::live::live_preview_next,
            commands::live::live_stop,
            commands::live::live_save,
            commands::live::live_sustained,
            // Sweeps.
            commands::sweep::sweep_start,
            commands::sweep::sweep_cancel,
            commands::sweep::parse_lengths,
            // Lessons: the teaching demos, step by step.
            commands::lessons::lessons,
            commands::lessons::lesson_start,
            commands::lessons::lesson_cancel,
            commands::lessons::lesson_handout,
            // Tuning this machine's backend settings (lx tune).
            commands::tune::tune_status,
            commands::tune::tune_start,
            commands::tune::tune_cancel,
            // How faithfully each backend and setting runs the model (lx fidelity).
            commands::fidelity::fidelity_start,
            commands::fidelity::fidelity_cancel,
            // From a workload preset to a recommendation (lx advise).
            commands::advise::advise_presets,
            commands::advise::advise_start,
            commands::advise::advise_cancel,
            // Saved runs, overlaid on the charts.
            commands::runs::run_open,
            commands::runs::pick_run_file,
            // Exports.
            commands::export::export_csv,
            commands::export::export_png,
            // The gallery of machines (lx bench files).
            commands::gallery::gallery_add,
            commands::gallery::pick_bench_files,
        ])
        .build(tauri::generate_context!())
        .expect("the app could not start")
        .run(|app, event| {
            // Workers are child processes: shut them down with the window, not after it.
            if let tauri::RunEvent::Exit = event {
                let state = app.state::<state::AppState>();
                let live = state.live.locked().take();
                drop(live); // stops the session and its workers
                let sweep = state.sweep.locked().take();
                if let Some(s) = sweep {
                    s.stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = s.thread.join();
                }
            }
        });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_worker_command_re_executes_this_binary() {
        assert_eq!(lx_local::worker_command("llama").program, std::env::current_exe().unwrap());
    }
}
