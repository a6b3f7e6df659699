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
    // Which CPU the binary was compiled for (`-C target-cpu`): `latency-explorer --version`
    // says it, so a bundle states whether it runs on any x86-64-v3 machine or only on ones
    // like the build machine (.cargo/config.toml's `native`).
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let cpu = flags
        .split('\x1f')
        .filter_map(|f| f.strip_prefix("-C").unwrap_or(f).strip_prefix("target-cpu="))
        .next_back()
        .unwrap_or("default");
    println!("cargo:rustc-env=LX_TARGET_CPU={cpu}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    tauri_build::build();
}
