/**
 * Types of what the app's commands take and return, mirroring the Rust side
 * (`lx_drivers::live`, `src-tauri/src/events.rs`, `src-tauri/src/commands/*`). Field names
 * are camelCase except where a Rust type is passed through unchanged (model facts,
 * hardware report, backend info, distributions), which keep Rust's snake_case.
 */

export type Policy = "serial" | "static" | "continuous" | "chunked";
export const POLICIES: Policy[] = ["serial", "static", "continuous", "chunked"];

/** Live mode's settings (`LiveSettings`). */
export interface LiveSettings {
  backends: string[];
  promptTokens: number;
  concurrency: number;
  maxTokens: number;
  policy: Policy;
  chunkTokens: number;
  threads: number;
  gpuLayers?: number | null;
  rotateAfterS: number;
  batchMs: number;
  hangTimeoutS: number;
}

export interface Distribution {
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
  count: number;
}

export interface Capabilities {
  mixed_position_batches: boolean;
  max_batch_tokens: number;
  slots: number;
  ctx_per_slot: number;
  prefix_copy: boolean;
}

export interface BackendInfo {
  name: string;
  version: string;
  /** Read back from the library after loading. */
  device: string;
  /** Set when a backend that could have used a GPU ran (partly) on the CPU: how much and why. */
  cpu_fallback?: string | null;
  threads: number;
  capabilities: Capabilities;
  /** The backend's own settings as it ran with them (candle's `weights`, llama.cpp's `flash_attn`...). */
  settings?: Record<string, string>;
  /** Where those came from: this machine's tuned profile, the environment, or the defaults. */
  settings_from?: string | null;
}

export interface Capacity {
  slots: number;
  ctxPerSlot: number;
  maxBatchTokens: number;
  threads: number;
  gpuLayers: number | null;
}

export type BackendState = "loading" | "ready" | "measuring" | "error" | "stopped";

export interface SettingKey {
  backend: string;
  policy: Policy;
  promptTokens: number;
  concurrency: number;
  maxTokens: number;
  chunkTokens: number;
}

export interface SettingSummary {
  key: SettingKey;
  requests: number;
  ttftMs: Distribution;
  decodeTps: Distribution;
  queueMs: Distribution;
  prefillTps: Distribution;
  e2eMs: Distribution;
  throughputTps: number;
  windowS: number;
}

export interface PrefillSpan {
  tokens: number;
  startMs: number;
  endMs: number;
}

export type FinishReason = "length" | "stop" | "cancelled";

/** Live mode's events (`LiveEvent`), delivered in batches. */
export type LiveEvent =
  | { type: "settingsApplied"; settings: LiveSettings; atMs: number }
  | {
      type: "backendStatus";
      backend: string;
      state: BackendState;
      info: BackendInfo | null;
      loadMs: number | null;
      pid: number | null;
      capacity: Capacity | null;
      message: string | null;
      atMs: number;
    }
  | {
      type: "requestStarted";
      id: number;
      backend: string;
      promptTokens: number;
      maxTokens: number;
      policy: Policy;
      concurrency: number;
      atMs: number;
      preview: boolean;
      promptTail: string | null;
    }
  | { type: "requestAdmitted"; id: number; atMs: number; queueMs: number }
  | { type: "requestPrefill"; id: number; tokens: number; startMs: number; endMs: number }
  | { type: "previewTokens"; id: number; firstIndex: number; pieces: string[]; atMs: number[] }
  | {
      type: "requestDone";
      id: number;
      backend: string;
      policy: Policy;
      promptTokens: number;
      maxTokens: number;
      concurrency: number;
      submitAtMs: number;
      admitAtMs: number | null;
      prefill: PrefillSpan[];
      firstTokenAtMs: number | null;
      lastTokenAtMs: number | null;
      outputTokens: number;
      ttftMs: number | null;
      queueMs: number | null;
      decodeTps: number | null;
      prefillTps: number | null;
      e2eMs: number | null;
      settled: boolean;
      finish: FinishReason | null;
      error: string | null;
    }
  | { type: "summary"; summary: SettingSummary }
  | {
      type: "tick";
      atMs: number;
      backend: string;
      throughputTps: number | null;
      inFlight: number;
      queued: number;
      prefilling: number;
      ttftP50Ms: number | null;
      ttftP95Ms: number | null;
    }
  | { type: "sensorsOpened"; sources: string[]; notAvailable: string[]; everyMs: number }
  | {
      type: "sensors";
      atMs: number;
      cpuMhz: number | null;
      gpuMhz: number | null;
      tempC: number | null;
      /** Since the previous reading; null where nothing gives power. */
      powerW: number | null;
      throttling: string[];
    }
  | { type: "workerCrashed"; backend: string; reason: string; pid: number | null; atMs: number }
  | { type: "paused"; reason: string; atMs: number }
  | { type: "rejected"; message: string }
  | { type: "stopped"; atMs: number };

export type RequestDone = Extract<LiveEvent, { type: "requestDone" }>;
export type RequestStarted = Extract<LiveEvent, { type: "requestStarted" }>;
export type Tick = Extract<LiveEvent, { type: "tick" }>;
export type SensorReading = Extract<LiveEvent, { type: "sensors" }>;
export type SensorsOpened = Extract<LiveEvent, { type: "sensorsOpened" }>;
export type BackendStatus = Extract<LiveEvent, { type: "backendStatus" }>;

/** `BackendAvailability`. */
export interface BackendAvailability {
  name: string;
  label: string;
  available: boolean;
  reason: string | null;
  devices: string[];
  /** What proves it on this platform (docs/PLATFORMS.md), one line per device. */
  proven: string[];
  /** An OpenAI-compatible server the user added: it schedules requests itself. */
  server: boolean;
}

/** `ServerSpec`: a server to add as a backend. */
export interface ServerSpec {
  /** Its API's base address, up to and including `/v1`. */
  url: string;
  /** What charts and results call it (default: the address's host and port). */
  name: string | null;
  /** The model to ask for (default: the first one the server lists). */
  model: string | null;
  /** Stream from /v1/chat/completions instead of /v1/completions. */
  chat: boolean;
}

/** One row of the backend check: a tiny model on one backend and device. */
export interface CheckRow {
  backend: string;
  /** "default" (the backend's own choice, its GPU where it has one) or "cpu". */
  requested: string;
  /** Where it ran, read back from the library ("" when it did not load). */
  device: string;
  cpu_fallback?: string | null;
  ok: boolean;
  error?: string | null;
  load_ms: number;
  run_ms: number;
  tokens: number;
}

export interface HardwareReport {
  cpu: string;
  physical_cores: number;
  logical_cores: number;
  memory_bytes: number;
  os: string;
  arch: string;
  cpu_features: string[];
  /** GPUs the OS shows (absent in results written before it was added). */
  gpus?: string[];
  backend_devices: [string, string[]][];
  /** Backend features compiled into this build (cuda, metal, mlx, vulkan); empty for a CPU-only build without MLX. */
  build_features?: string[];
}

export interface CatalogModel {
  name: string;
  description: string;
  size: number;
  quantization: string;
  parameters: string | null;
  architecture: string;
  license: string;
  isDefault: boolean;
  present: boolean;
  verified: boolean;
  path: string;
  /** A shape-only model (`synth:NAME`): timings only, text is noise; written on first use. */
  synthetic: boolean;
}

export interface ModelFacts {
  path: string;
  file_size: number;
  gguf_version: number;
  architecture: string;
  name: string | null;
  parameter_count: number;
  tensor_count: number;
  quantization: { file_type: number | null; name: string; tensor_types: Record<string, number> };
  context_length: number | null;
  embedding_length: number | null;
  block_count: number | null;
  head_count: number | null;
  head_count_kv: number | null;
  vocab_size: number | null;
  /** Set for a shape-only model: what it mimics (its timings stand for that model's; its text is noise). */
  synthetic?: string | null;
}

export interface ModelInfo {
  spec: string;
  name: string;
  path: string;
  contextLength: number;
  sha256: string | null;
  facts: ModelFacts;
}

export type FetchEvent =
  | { type: "downloading"; part: number; parts: number; name: string }
  | { type: "transferring"; bytesDone: number; bytesTotal: number | null }
  | { type: "extracting"; part: number; parts: number }
  | { type: "verifying"; bytesDone: number; bytesTotal: number }
  | { type: "generating"; bytesDone: number; bytesTotal: number }
  | { type: "done"; path: string; alreadyPresent: boolean };

/** Everything `lx sweep` takes for the engine's backends; left out (or null): its default. */
export interface SweepRequest {
  backends: string[];
  policies: Policy[];
  /** "64" or "64..512" (drawn per request). */
  promptTokens: (number | string)[];
  concurrency: number[];
  maxTokens: (number | string)[];
  requests: number;
  warmup?: number | null;
  threads?: number;
  chunkTokens?: number | null;
  depths?: number[];
  rates?: number[];
  maxInFlight?: number | null;
  seed?: number;
  durationS?: number | null;
  prefixTokens?: number;
  prefixCache?: boolean[];
  maxBatchSeqs?: number | null;
  maxBatchTokens?: number | null;
  sloTtftMs?: number | null;
  sloDecodeTps?: number | null;
  repetitions?: number | null;
  stopAtEos?: boolean;
  gpuLayers?: number | null;
  hangTimeoutS?: number | null;
  noCeilings?: boolean;
}

export interface PointSpec {
  prompt_tokens: number;
  max_tokens: number;
  concurrency: number;
  requests: number;
  warmup: number;
  stop_at_eos: boolean;
}

export interface PointFigures {
  backend: string;
  policy: Policy;
  promptTokens: number;
  concurrency: number;
  maxTokens: number;
  requests: number;
  errors: number;
  ttftMs: Distribution;
  decodeTps: Distribution;
  queueMs: Distribution;
  throughputTps: number;
  errorMessages: string[];
  /** Low ends of lengths drawn from a range; null: fixed. */
  promptTokensFrom: number | null;
  maxTokensFrom: number | null;
  /** Open-loop arrival rate (requests/s); null: closed loop. */
  rate: number | null;
  /** Which measurement of a repeated point; null: measured once. */
  repetition: number | null;
  /** Tokens in the context before the prompt (promptTokens includes them). */
  depth: number;
  prefillTps: Distribution;
  /** The most this setting allows on the device; null: no probe of this machine, or a server. */
  ceiling: PointCeiling | null;
  /** Mean power of what this machine's sensors read, W; null where nothing gives power. */
  powerW: number | null;
  joulesPerToken: number | null;
  /** The first GPU's clock, else the CPU's, MHz. */
  clockMhz: number | null;
  throttling: string[];
  sensorsNotAvailable: string[];
}

/** A saved run opened beside this session (`run_open`). */
export interface OpenedRun {
  path: string;
  /** The machine and when: "AMD EPYC, 2026-12-02 07:15 UTC". */
  label: string;
  model: string;
  /** A shape-only model (timings only). */
  synthetic: boolean;
  /** Weight bytes one decode step of its model reads. */
  weightBytesPerStep: number | null;
  /** Each backend and the device it ran on. */
  backends: string[];
  points: PointFigures[];
}

/** A device's measured limits (the engine's `roofline::Limits`). */
export interface Limits {
  device: string;
  memory_bytes_per_s: number;
  compute_flops_per_s: number;
  compute_method: string;
}

/** The machine's limits applied to one setting (the engine's `roofline::PointCeiling`). */
export interface PointCeiling {
  least_ttft_ms: number;
  prefill_tps: number;
  prefill_bound: "memory" | "compute";
  decode_tps: number;
  decode_bound: "memory" | "compute";
  throughput_tps: number;
  device: string;
}

export type SweepEvent =
  | { type: "started"; path: string; totalPoints: number; totalRequests: number }
  | { type: "probing" }
  | { type: "ceilings"; weightBytesPerStep: number; busy: string | null }
  | { type: "deviceCeilings"; backend: string; device: string; limits: Limits | null }
  | { type: "noCeilings"; message: string }
  | { type: "loading"; backend: string }
  | { type: "loaded"; backend: string; info: BackendInfo; loadMs: number }
  | { type: "pointStarted"; index: number; total: number; backend: string; policy: Policy; spec: PointSpec }
  | { type: "progress"; done: number; total: number }
  | { type: "pointDone"; point: PointFigures }
  | { type: "finished"; path: string; stopped: boolean; failedPoints: number }
  | { type: "failed"; message: string };

/** A command's error (`CmdError`). */
export interface AppError {
  kind: "noModel" | "model" | "live" | "sweep" | "server" | "io" | "busy" | "ipc";
  message: string;
}

/** Whether this machine is tuned for the open model (`lx tune`'s profile). */
export interface TuneStatus {
  tuned: boolean;
  /** One line per backend tuned: what sweeps and live mode run it with. */
  backends: string[];
  /** When not tuned: why. */
  why: string | null;
  /** The profile as `lx tune --show` prints it (Markdown), when tuned. */
  report: string | null;
}

/** What "Tune this machine" is doing (the `tune_start` channel). */
export type TuneEvent =
  | { type: "trial"; backend: string; settings: string; contended: boolean; elapsedS: number; budgetS: number }
  | { type: "measured"; backend: string; text: string }
  | { type: "note"; backend: string; note: string }
  | { type: "finished"; status: TuneStatus }
  | { type: "failed"; message: string };
