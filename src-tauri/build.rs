//! Tauri's build step. It embeds `../ui/dist` (see `frontendDist` in tauri.conf.json), which
//! must exist at compile time: when the front end has not been built yet (a fresh clone
//! running `cargo test --workspace`), a one-page placeholder is written there so the crate
//! still compiles; scripts/app-setup builds the real front end before building the app.

fn main() {
    let dist = std::path::Path::new("../ui/dist");
    if !dist.join("index.html").exists() {
        let _ = std::fs::create_dir_all(dist);
        let _ = std::fs::write(
            dist.join("index.html"),
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Latency Explorer</title></head>\
             <body style=\"font-family:sans-serif;padding:2em\"><h1>Latency Explorer</h1>\
             <p>The user interface was not built into this binary. Run <code>scripts/app-setup</code> \
             (or <code>npm ci &amp;&amp; npm run build</code> in <code>ui/</code>), then rebuild.</p></body></html>",
        );
    }
    tauri_build::build();
}
