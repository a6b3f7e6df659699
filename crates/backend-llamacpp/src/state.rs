//! One sequence's state (its cached keys and values) as bytes, out of a llama.cpp context
//! and into another: disaggregated prefill and decode move it between worker processes.
//!
//! The other module that calls unsafe code: llama-cpp-2's safe wrappers hand a sequence's
//! state out only as an opaque value that cannot be built from bytes, and bytes are what
//! crosses a process boundary. llama.cpp checks a state against the context it goes into
//! (layers, cache types, sizes) and refuses one that differs; the engine checks the bytes'
//! frame and checksum before they get here.
#![allow(unsafe_code)]

use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::context::LlamaContext;
use lx_engine::backend::{BackendError, Slot};

/// `slot`'s whole state, in llama.cpp's own format.
pub(crate) fn save(ctx: &LlamaContext<'_>, slot: Slot) -> Result<Vec<u8>, BackendError> {
    let flags = LlamaStateSeqFlags::empty();
    let size = ctx.state_seq_get_size_ext(slot as i32, flags);
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` has the size llama.cpp just reported for this sequence, and nothing
    // runs on the context in between (it is borrowed here).
    let written = unsafe { ctx.state_seq_get_data_ext(bytes.as_mut_ptr(), slot as i32, flags) };
    if written != size {
        return Err(BackendError::Step(format!("llama.cpp saved {written} bytes of slot {slot}'s state, {size} expected")));
    }
    Ok(bytes)
}

/// Makes `slot` hold `bytes`, a state [`save`] made in a context of the same model.
pub(crate) fn load(ctx: &mut LlamaContext<'_>, slot: Slot, bytes: &[u8]) -> Result<(), BackendError> {
    // SAFETY: llama.cpp reads at most `bytes.len()` bytes and validates what it reads.
    let read = unsafe { ctx.state_seq_set_data_ext(bytes, slot as i32, LlamaStateSeqFlags::empty()) };
    if read {
        Ok(())
    } else {
        let why = crate::logs::take_recent().join("; ");
        Err(BackendError::Step(format!("llama.cpp refused the state{}", if why.is_empty() { String::new() } else { format!(": {why}") })))
    }
}
