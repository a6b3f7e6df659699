//! Where the real models are. A test that needs one fails, never skips, without it, and says
//! how to fetch it.

use std::path::PathBuf;

/// The default model: `LX_MODEL`, else the cache path. Panics with a clear message when
/// it is absent: a test that needs the real model must never pass without it.
pub fn model_path() -> PathBuf {
    let p = lx_models::default_model_path();
    assert!(
        p.is_file(),
        "this test needs the default model (Gemma 3 270M Q4_K_M GGUF) at {}; fetch it (`lx models fetch`) or set LX_MODEL",
        p.display()
    );
    p
}

/// The second real model (SmolLM2 135M Instruct Q4_1, llama architecture, byte-level BPE)
/// in the model cache. Panics with what to do when it is absent.
pub fn smollm2_path() -> PathBuf {
    let p = lx_models::catalog_model_path("smollm2").expect("the catalog names smollm2");
    assert!(p.is_file(), "this test needs SmolLM2 at {}; fetch it (`lx models fetch smollm2`)", p.display());
    p
}
