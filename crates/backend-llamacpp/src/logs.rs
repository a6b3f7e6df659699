//! llama.cpp explains failures only in its log ("unknown model architecture: 'x'"), while
//! its API returns a bare null. This keeps the last warning and error lines so a failed
//! load can say why, and keeps the rest of its chatter off the terminal (set
//! `LX_LLAMA_LOG=1` to see all of it on stderr).
//!
//! It also keeps where llama.cpp placed each layer while loading ("layer 3 assigned to
//! device Vulkan0"): the API has no call for it, and the log is llama.cpp's own account.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

const KEEP: usize = 16;
static RECENT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
/// The device of each layer, in the order llama.cpp reported them while loading.
static PLACEMENT: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The KV cache buffers llama.cpp allocated while a context was created, in bytes.
static KV_BUFFERS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// The weights' buffers llama.cpp allocated while a model loaded (mapped, repacked, on each
/// device), in bytes.
static MODEL_BUFFERS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// Whether a model is loading: only then are llama.cpp's debug lines read (for placement),
/// so decoding never formats log text it would throw away.
static LOADING: AtomicBool = AtomicBool::new(false);

struct Capture {
    echo: bool,
}

struct Text(String);

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "text" | "message") {
            self.0.push_str(value.trim());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if matches!(field.name(), "text" | "message") {
            self.0.push_str(format!("{value:?}").trim_matches('"').trim());
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if !self.echo && level > Level::WARN && !LOADING.load(Ordering::Relaxed) {
            return;
        }
        let mut text = Text(String::new());
        event.record(&mut text);
        if self.echo {
            eprintln!("[llama.cpp {level}] {}", text.0);
        }
        if let Some(device) = layer_device(&text.0) {
            PLACEMENT.lock().unwrap_or_else(|e| e.into_inner()).push(device.to_string());
        }
        if let Some(bytes) = buffer_bytes(&text.0, "KV buffer size =") {
            KV_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).push(bytes);
        }
        if let Some(bytes) = buffer_bytes(&text.0, "model buffer size =") {
            MODEL_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).push(bytes);
        }
        if level <= Level::WARN && !text.0.is_empty() {
            let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
            if recent.len() == KEEP {
                recent.pop_front();
            }
            recent.push_back(text.0);
        }
    }
}

/// Route llama.cpp's log through the capture. Called once, with the runtime's init.
pub fn install() {
    let echo = std::env::var_os("LX_LLAMA_LOG").is_some();
    // Another subscriber may already be set (an embedding program's): then leave it be.
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture { echo }));
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
}

/// Error and warning lines since the last call, oldest first.
pub fn take_recent() -> Vec<String> {
    RECENT.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect()
}

/// Start keeping where llama.cpp places each layer: call before loading a model.
pub fn start_placement() {
    PLACEMENT.lock().unwrap_or_else(|e| e.into_inner()).clear();
    MODEL_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    LOADING.store(true, Ordering::Relaxed);
}

/// The device of each layer placed since [`start_placement`], in layer order; stops keeping.
pub fn take_placement() -> Vec<String> {
    LOADING.store(false, Ordering::Relaxed);
    std::mem::take(&mut *PLACEMENT.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The bytes of the weights' buffers allocated since [`start_placement`]; `None` when
/// llama.cpp reported none.
pub fn take_model_buffers() -> Option<u64> {
    let buffers = std::mem::take(&mut *MODEL_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()));
    (!buffers.is_empty()).then(|| buffers.iter().sum())
}

/// Start keeping the KV cache buffers llama.cpp allocates: call before creating a context.
pub fn start_kv_buffers() {
    KV_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    LOADING.store(true, Ordering::Relaxed);
}

/// The bytes of every KV cache buffer allocated since [`start_kv_buffers`] (Gemma 3 has
/// two caches: its sliding-window layers' and its global layers'); `None` when llama.cpp
/// reported none. Stops keeping.
pub fn take_kv_buffers() -> Option<u64> {
    LOADING.store(false, Ordering::Relaxed);
    let buffers = std::mem::take(&mut *KV_BUFFERS.lock().unwrap_or_else(|e| e.into_inner()));
    (!buffers.is_empty()).then(|| buffers.iter().sum())
}

/// The size in a log line of the form "llama_kv_cache:        CPU KV buffer size =    18.00
/// MiB" or "load_tensors:   CPU_Mapped model buffer size =   235.16 MiB", after `what`
/// (llama.cpp prints MiB with two decimals).
fn buffer_bytes(line: &str, what: &str) -> Option<u64> {
    let (_, rest) = line.split_once(what)?;
    let mib: f64 = rest.trim().strip_suffix("MiB")?.trim().parse().ok()?;
    Some((mib * 1024.0 * 1024.0).round() as u64)
}

/// The device named by a log line of the form "layer  3 assigned to device Vulkan0, is_swa = 1".
fn layer_device(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("layer ")?;
    let (index, rest) = rest.trim_start().split_once(' ')?;
    index.parse::<u32>().ok()?;
    let device = rest.strip_prefix("assigned to device ")?;
    let device = device.split(',').next()?.trim();
    (!device.is_empty()).then_some(device)
}

#[cfg(test)]
mod tests {
    use super::{buffer_bytes, layer_device};

    fn kv_buffer_bytes(line: &str) -> Option<u64> {
        buffer_bytes(line, "KV buffer size =")
    }

    #[test]
    fn reads_the_size_of_a_kv_buffer() {
        assert_eq!(kv_buffer_bytes("llama_kv_cache:        CPU KV buffer size =    18.00 MiB"), Some(18 << 20));
        assert_eq!(kv_buffer_bytes("llama_kv_cache_iswa: KV buffer size = 0.50 MiB"), Some(1 << 19));
        assert_eq!(kv_buffer_bytes("llama_context: CPU compute buffer size = 5.00 MiB"), None);
        assert_eq!(kv_buffer_bytes("KV buffer size = lots"), None);
        assert_eq!(buffer_bytes("load_tensors:   CPU_REPACK model buffer size =    12.50 MiB", "model buffer size ="), Some(25 << 19));
    }

    #[test]
    fn reads_the_device_of_a_placed_layer() {
        assert_eq!(layer_device("layer   0 assigned to device CPU, is_swa = 1"), Some("CPU"));
        assert_eq!(layer_device("layer  18 assigned to device Vulkan0, is_swa = 0"), Some("Vulkan0"));
        assert_eq!(layer_device("layer 7 assigned to device CUDA0"), Some("CUDA0"));
        assert_eq!(layer_device("layer   0: filtered"), None);
        assert_eq!(layer_device("n_layer = 18"), None);
        assert_eq!(layer_device("layer x assigned to device CPU"), None);
    }
}
