/**
 * Sweeps: the same engine sweep as `lx sweep`, with a progress bar and cancel. Points appear
 * in the table (and on the curves) as they finish; the run file is the CLI's format.
 */
import { h, setText } from "../lib/dom";
import { ms as fmtMs, num, tps as fmtTps } from "../lib/format";
import type { AppError, Length, Limits, PointFigures, Policy, SweepEvent, SweepOptions, SweepPlan } from "../ipc/types";
import type { Drafter } from "../ipc/generated/Drafter";
import type { PromptText } from "../ipc/generated/PromptText";
import { POLICIES } from "../ipc/types";
import { backendLabel } from "./charts";
import { CHUNK_TOKENS, FIDELITY_CHUNKS, HANG_TIMEOUT_S, READING_PACE_TPS, SPECULATION, SWEEP_FORM } from "../ipc/generated/defaults";
import { klText } from "../lib/fidelity";

// The speculative-decoding choices that stand for several drafters.
const SPEC_CHOICES: Record<string, Drafter[]> = { both: ["none", "lookup"], all: ["none", "lookup", "draft"] };

/** Whole numbers from `min` (and at most `max`, where there is a most), each once. */
export function parseList(text: string, min: number, max = Infinity): number[] | string {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0) return "give at least one value";
  const out: number[] = [];
  for (const p of parts) {
    const v = Number(p);
    if (!Number.isInteger(v) || v < min || v > max) return `'${p}' is not a whole number ${max === Infinity ? `of at least ${min}` : `from ${min} to ${max}`}`;
    if (!out.includes(v)) out.push(v);
  }
  return out;
}

/** Positive numbers (rates, seconds); an empty field is none. */
export function parseNumbers(text: string): number[] | string {
  const out: number[] = [];
  for (const p of text.split(/[\s,]+/).filter(Boolean)) {
    const v = Number(p);
    if (!Number.isFinite(v) || v <= 0) return `'${p}' is not a positive number`;
    if (!out.includes(v)) out.push(v);
  }
  return out;
}

export interface SweepHooks {
  backends: () => string[];
  /** Lengths as `lx sweep` reads them (`64, 256..512`), parsed by the engine; rejects with
   * why a field cannot be read. */
  parseLengths: (text: string) => Promise<Length[]>;
  context: () => number;
  start: (plan: SweepPlan, options: SweepOptions, onEvent: (e: SweepEvent) => void) => Promise<string>;
  cancel: () => Promise<void>;
  exportCsv: () => Promise<void>;
  /** A point measured, with the weight bytes per decode step of the sweep's model (null
   * before the ceilings came, or without them). */
  onPoint: (e: Extract<SweepEvent, { type: "pointDone" }>, weightBytesPerStep: number | null) => void;
  /** A backend's device and its measured limits, when a sweep has ceilings. */
  onLimits: (limits: Limits) => void;
  error: (e: AppError) => void;
}

export class SweepPanel {
  readonly el: HTMLElement;
  private prompts = h("input", { type: "text", value: SWEEP_FORM.prompt_tokens, "aria-label": "prompt lengths, comma-separated (A..B: a range)" }) as HTMLInputElement;
  private conc = h("input", { type: "text", value: SWEEP_FORM.concurrency, "aria-label": "concurrencies, comma-separated" }) as HTMLInputElement;
  private maxTok = h("input", { type: "text", value: SWEEP_FORM.max_tokens, "aria-label": "output tokens, comma-separated (A..B: a range)" }) as HTMLInputElement;
  private requests = h("input", { type: "number", min: 1, max: 10000, value: SWEEP_FORM.requests, "aria-label": "measured requests per point" }) as HTMLInputElement;
  // Everything else `lx sweep` has, under "More options" (empty: lx sweep's default).
  private depths = h("input", { type: "text", value: SWEEP_FORM.depths, "aria-label": "context depths, tokens already in the context, comma-separated" }) as HTMLInputElement;
  private rates = h("input", { type: "text", value: "", placeholder: "closed loop", "aria-label": "arrival rates, requests per second, comma-separated" }) as HTMLInputElement;
  private maxInFlight = h("input", { type: "number", min: 1, value: "", placeholder: "no cap", "aria-label": "most requests in flight (open loop)" }) as HTMLInputElement;
  private duration = h("input", { type: "number", min: 1, value: "", placeholder: "until done", "aria-label": "seconds per point at most" }) as HTMLInputElement;
  private seed = h("input", { type: "number", min: 0, value: SWEEP_FORM.seed, "aria-label": "seed of arrivals and drawn lengths" }) as HTMLInputElement;
  private repetitions = h("input", { type: "number", min: 1, max: 100, value: SWEEP_FORM.repetitions, "aria-label": "repetitions of every point" }) as HTMLInputElement;
  private warmup = h("input", { type: "number", min: 0, value: "", placeholder: "largest clients", "aria-label": "warm-up requests per point" }) as HTMLInputElement;
  private prefix = h("input", { type: "number", min: 0, value: SWEEP_FORM.prefix_tokens, "aria-label": "shared prefix tokens" }) as HTMLInputElement;
  private prefixCache = h("select", { "aria-label": "prefix caching" }, ...[["off", "off"], ["on", "on"], ["both", "off and on"]].map(([v, t]) => h("option", { value: v }, t))) as HTMLSelectElement;
  private spec = h("select", { "aria-label": "speculative decoding", "data-testid": "sweep-spec" }, ...[["none", "off"], ["lookup", "prompt lookup"], ["draft", "draft model"], ["both", "off and prompt lookup"], ["all", "off, prompt lookup and draft model"]].map(([v, t]) => h("option", { value: v }, t))) as HTMLSelectElement;
  private promptText = h("select", { "aria-label": "what the prompts ask for", "data-testid": "sweep-prompts" }, ...[["prose", "prose to continue"], ["copy", "a passage to copy"]].map(([v, t]) => h("option", { value: v }, t))) as HTMLSelectElement;
  private maxBatch = h("input", { type: "number", min: 1, value: "", placeholder: "clients", "aria-label": "most sequences per pass" }) as HTMLInputElement;
  private maxBatchTokens = h("input", { type: "number", min: 1, value: "", placeholder: "auto", "aria-label": "most tokens per pass" }) as HTMLInputElement;
  private chunk = h("input", { type: "number", min: 1, value: CHUNK_TOKENS, "aria-label": "chunked policy: prompt tokens per pass" }) as HTMLInputElement;
  private sloTtft = h("input", { type: "number", min: 1, value: "", placeholder: "none", "aria-label": "SLO: most TTFT, ms" }) as HTMLInputElement;
  private sloDecode = h("input", { type: "number", min: 0.1, step: 0.1, value: READING_PACE_TPS, "aria-label": "SLO: least decode rate, tokens per second" }) as HTMLInputElement;
  private stopAtEos = h("input", { type: "checkbox", "aria-label": "stop at end of sequence" }) as HTMLInputElement;
  private gpuLayers = h("input", { type: "number", min: 0, value: "", placeholder: "all", "aria-label": "layers offloaded to the GPU" }) as HTMLInputElement;
  private hangTimeout = h("input", { type: "number", min: 1, value: "", placeholder: String(HANG_TIMEOUT_S), "aria-label": "seconds of silence before a worker is given up" }) as HTMLInputElement;
  private noCeilings = h("input", { type: "checkbox", "aria-label": "leave out the ceilings" }) as HTMLInputElement;
  private fidelity = h("input", { type: "checkbox", "aria-label": "measure each backend's fidelity first" }) as HTMLInputElement;
  private policyBoxes = POLICIES.map((p) => h("input", { type: "checkbox", value: p, checked: p === "continuous" }) as HTMLInputElement);
  private startBtn = h("button", { type: "button", class: "primary", "data-testid": "sweep-start" }, "Run sweep");
  private cancelBtn = h("button", { type: "button", disabled: true, "data-testid": "sweep-cancel" }, "Cancel");
  private csvBtn = h("button", { type: "button", disabled: true }, "Export CSV");
  private bar = h("progress", { max: 1, value: 0, "aria-label": "sweep progress", "data-testid": "sweep-progress" }) as HTMLProgressElement;
  private status = h("div", { class: "muted small", "data-testid": "sweep-status" });
  private ceilings = h("p", { class: "muted small", "data-testid": "sweep-ceilings" });
  private table = h("tbody", {});
  private sensorNotes = h("p", { class: "muted small", "data-testid": "sweep-sensors" });
  private sensorPoints: PointFigures[] = [];
  /** The running sweep's model: weight bytes per decode step (from its ceilings). */
  private weightBytes: number | null = null;
  /** The running sweep's backends and the limits of the device each loaded on. */
  private devices = new Map<string, DeviceCeilings>();
  private busy: string | null = null;
  private formError = h("div", { class: "form-error", role: "alert" });
  running = false;

  constructor(private hooks: SweepHooks) {
    const field = (label: string, input: HTMLElement) => h("label", { class: "sweep-field" }, h("span", {}, label), input);
    this.startBtn.addEventListener("click", () => void this.start());
    this.cancelBtn.addEventListener("click", () => {
      setText(this.status, "cancelling: finishing bookkeeping…");
      this.cancelBtn.disabled = true;
      void this.hooks.cancel();
    });
    this.csvBtn.addEventListener("click", () => void this.hooks.exportCsv());
    this.el = h(
      "section",
      { class: "card sweep", "aria-label": "sweep" },
      h("header", { class: "card-head" }, h("span", {}, "Sweep"), h("span", { class: "muted small" }, "the same grid and run files as lx sweep; uses the backends selected on the left")),
      h(
        "div",
        { class: "sweep-form" },
        field("Prompt tokens", this.prompts),
        field("Clients", this.conc),
        field("Output tokens", this.maxTok),
        field("Requests per point", this.requests),
        h("fieldset", { class: "sweep-policies" }, h("legend", {}, "Policies"), ...this.policyBoxes.map((b) => h("label", {}, b, ` ${b.value}`))),
      ),
      h(
        "details",
        { class: "sweep-more", "data-testid": "sweep-more" },
        h("summary", {}, "More options: depth, open loop, shared prefix, batch limits, SLO, repetitions, GPU layers"),
        h(
          "div",
          { class: "sweep-form" },
          field("Depths (tokens in context)", this.depths),
          field("Arrival rates (req/s)", this.rates),
          field("Max in flight", this.maxInFlight),
          field("Seconds per point", this.duration),
          field("Seed", this.seed),
          field("Repetitions", this.repetitions),
          field("Warm-up requests", this.warmup),
          field("Shared prefix tokens", this.prefix),
          field("Prefix caching", this.prefixCache),
          field("Speculative decoding", this.spec),
          field("Prompts", this.promptText),
          field("Max sequences per pass", this.maxBatch),
          field("Max tokens per pass", this.maxBatchTokens),
          field("Chunk tokens (chunked)", this.chunk),
          field("SLO: TTFT ≤ ms", this.sloTtft),
          field("SLO: decode ≥ tok/s", this.sloDecode),
          field("GPU layers", this.gpuLayers),
          field("Hang timeout (s)", this.hangTimeout),
          h("label", { class: "sweep-check" }, this.stopAtEos, " stop at end of sequence"),
          h("label", { class: "sweep-check" }, this.noCeilings, " no ceilings (skips the probe)"),
          h("label", { class: "sweep-check", title: "Before the points, score a fixed text with each backend and setting against llama.cpp's f16 KV cache: the KL and top-1 columns" }, this.fidelity, " fidelity first (KL vs llama.cpp f16)"),
        ),
      ),
      this.formError,
      h("div", { class: "sweep-actions" }, this.startBtn, this.cancelBtn, this.csvBtn, this.bar),
      this.status,
      h(
        "div",
        { class: "table-scroll" },
        h(
          "table",
          { class: "points", "data-testid": "sweep-points" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ...["backend", "policy", "prompt", "clients", "out", "TTFT p50", "TTFT p95", "decode p50", "throughput"].map((c) => h("th", {}, c)),
              // Shown by a sweep that measured fidelity (the table's with-fidelity class).
              ...["KL nats", "top-1 %"].map((c) => h("th", { class: "fidelity-col" }, c)),
              h("th", { title: "the worker's peak resident memory over the point, warm-up included" }, "peak MiB"),
              ...["decode % of ceiling", "power W", "J/token", "clock MHz", "errors"].map((c) => h("th", {}, c)),
            ),
          ),
          this.table,
        ),
      ),
      this.ceilings,
      this.sensorNotes,
    );
  }

  private async start() {
    // The engine reads the lengths (a round trip): until it has, the button is off, and the
    // status and the bar start over, so neither a second click nor the last sweep's "Done" or
    // full bar is taken for this one.
    this.startBtn.disabled = true;
    setText(this.status, "checking the form…");
    this.bar.value = 0;
    const ctx = this.hooks.context();
    // Lengths longer than the model's context are refused when the sweep starts, with the
    // context named, as lx sweep refuses them.
    const lengths = (text: string) => this.hooks.parseLengths(text).catch((e: AppError) => e.message);
    const prompts = await lengths(this.prompts.value);
    const conc = parseList(this.conc.value, 1);
    const maxTok = await lengths(this.maxTok.value);
    const rates = parseNumbers(this.rates.value);
    const depths = parseList(this.depths.value, 0, ctx);
    const policies = this.policyBoxes.filter((b) => b.checked).map((b) => b.value as Policy);
    const requests = Math.round(Number(this.requests.value));
    // An empty number field is lx sweep's default; anything else must be a number.
    const opt = (i: HTMLInputElement) => (i.value.trim() === "" ? null : Number(i.value));
    const problem =
      typeof prompts === "string" ? `Prompt tokens: ${prompts}` : typeof conc === "string" ? `Clients: ${conc}` : typeof maxTok === "string" ? `Output tokens: ${maxTok}` : typeof rates === "string" ? `Arrival rates: ${rates}` : typeof depths === "string" ? `Depths: ${depths}` : policies.length === 0 ? "Choose at least one policy" : !(requests >= 1) ? "Requests per point: at least 1" : "";
    setText(this.formError, problem);
    if (problem) {
      this.startBtn.disabled = false;
      setText(this.status, "");
      return;
    }
    const cache = this.prefixCache.value;
    const concurrency = conc as number[];
    // What a blank field means is said by its placeholder: lx sweep's default.
    const plan: SweepPlan = {
      backends: this.hooks.backends(),
      policies,
      prompt_tokens: prompts as Length[],
      concurrency,
      max_tokens: maxTok as Length[],
      requests,
      warmup: opt(this.warmup),
      repetitions: opt(this.repetitions) ?? SWEEP_FORM.repetitions,
      // auto: this machine's tuned choice, as in live mode
      threads: 0,
      depths: depths as number[],
      rates: rates as number[],
      max_in_flight: opt(this.maxInFlight),
      duration_s: opt(this.duration),
      seed: opt(this.seed) ?? SWEEP_FORM.seed,
      prefix_tokens: opt(this.prefix) ?? SWEEP_FORM.prefix_tokens,
      prefix_cache: cache === "both" ? [false, true] : [cache === "on"],
      spec: SPEC_CHOICES[this.spec.value] ?? [this.spec.value as Drafter],
      spec_settings: SPECULATION,
      draft_model: null,
      kv: { k: "f16", v: "f16" },
      prompts: this.promptText.value as PromptText,
      max_batch_seqs: opt(this.maxBatch),
      max_batch_tokens: opt(this.maxBatchTokens),
      chunk_tokens: opt(this.chunk) ?? CHUNK_TOKENS,
      slo: { ttft_ms: opt(this.sloTtft), decode_tps: opt(this.sloDecode) ?? READING_PACE_TPS },
      stop_at_eos: this.stopAtEos.checked,
      gpu_layers: opt(this.gpuLayers),
      // disaggregated: the threads shared out between the two workers, states through shared memory
      split: { prefill_threads: 0, decode_threads: 0, prefill_device: "same", decode_device: "same", via: "file", prefill_chunks: false },
      fidelity_chunks: this.fidelity.checked ? FIDELITY_CHUNKS : null,
    };
    const options: SweepOptions = { hang_timeout_s: opt(this.hangTimeout), no_ceilings: this.noCeilings.checked };
    this.table.replaceChildren();
    this.table.parentElement?.classList.toggle("with-fidelity", this.fidelity.checked);
    this.sensorPoints = [];
    this.weightBytes = null;
    this.devices.clear();
    this.busy = null;
    setText(this.ceilings, "");
    setText(this.sensorNotes, "");
    this.bar.value = 0;
    this.setRunning(true);
    setText(this.status, "starting…");
    try {
      const path = await this.hooks.start(plan, options, (e) => this.event(e));
      this.el.dataset.runFile = path;
    } catch (e) {
      this.setRunning(false);
      setText(this.status, "");
      // A plan the engine refuses (a length past the model's context, say) is the form's to
      // say, beside its fields; anything else is the app's.
      const err = e as AppError;
      if (err.kind === "sweep") setText(this.formError, err.message);
      else this.hooks.error(err);
    }
  }

  private setRunning(on: boolean) {
    this.running = on;
    this.startBtn.disabled = on;
    this.cancelBtn.disabled = !on;
  }

  private event(e: SweepEvent) {
    switch (e.type) {
      case "started":
        setText(this.status, `${e.total_points} points, ${num(e.total_requests)} measured requests · writing ${e.path}`);
        break;
      case "probing":
        setText(this.status, "measuring this machine's memory bandwidth and compute rate for the ceilings (once per machine and build)…");
        break;
      case "fidelity":
        setText(this.status, `fidelity: scoring the text with ${e.what}…`);
        break;
      case "ceilings":
        this.weightBytes = e.weight_bytes_per_step;
        this.busy = e.busy;
        break;
      case "deviceCeilings":
        this.devices.set(e.backend, { backend: e.backend, device: e.device, limits: e.limits });
        if (e.limits) this.hooks.onLimits(e.limits);
        if (this.weightBytes) setText(this.ceilings, explainCeilings([...this.devices.values()], this.weightBytes) + (this.busy ? ` Note: ${this.busy}.` : ""));
        break;
      case "noCeilings":
        setText(this.ceilings, `No ceilings in this run: ${e.message}`);
        break;
      case "loading":
        setText(this.status, `loading ${backendLabel(e.backend)}…`);
        break;
      case "loaded":
        setText(this.status, `${backendLabel(e.backend)} loaded on ${e.info.device} in ${fmtMs(e.load_ms)}${e.info.cpu_fallback ? ` · warning: ${e.info.cpu_fallback}` : ""}`);
        break;
      case "pointStarted":
        setText(this.status, `point ${e.index + 1}/${e.total}: ${backendLabel(e.backend)} ${e.policy}, ${e.spec.prompt_tokens}-token prompts, ${e.spec.concurrency} clients, ${e.spec.max_tokens} output tokens`);
        break;
      case "progress":
        this.bar.value = e.total > 0 ? e.done / e.total : 0;
        break;
      case "pointDone": {
        const p = e.point;
        const ok = p.requests > 0;
        this.table.append(
          h(
            "tr",
            { class: p.errors > 0 ? "has-errors" : "", title: p.error_messages.join("\n") },
            ...[backendLabel(p.backend), p.policy, lengthLabel(p.prompt_tokens_from == null ? null : p.prompt_tokens_from - p.depth, p.prompt_tokens - p.depth) + (p.depth ? ` d${p.depth}` : "") + (p.repetition ? ` #${p.repetition}` : ""), String(p.concurrency), lengthLabel(p.max_tokens_from, p.max_tokens), ok ? fmtMs(p.ttft_ms.p50) : "—", ok ? fmtMs(p.ttft_ms.p95) : "—", ok ? fmtTps(p.decode_tps.p50) : "—", ok ? fmtTps(p.throughput_tps) : "—"].map((c) => h("td", {}, c)),
            ...[klText(p.mean_kl), p.top1_agreement == null ? "—" : (100 * p.top1_agreement).toFixed(2)].map((c) => h("td", { class: "fidelity-col" }, c)),
            ...[num(p.peak_mib), ok ? ofCeiling(p.decode_tps.p50, p.ceiling?.decode_tps, p.ceiling?.decode_bound) : "—", num(p.power_w, 1), num(p.joules_per_token, 3), num(p.clock_mhz), String(p.errors)].map((c) => h("td", {}, c)),
          ),
        );
        this.sensorPoints.push(p);
        setText(this.sensorNotes, sensorNotes(this.sensorPoints));
        this.hooks.onPoint(e, this.weightBytes);
        break;
      }
      case "finished":
        this.setRunning(false);
        this.bar.value = e.stopped ? this.bar.value : 1;
        this.csvBtn.disabled = false;
        setText(this.status, `${e.stopped ? "Cancelled" : "Done"}${e.failed_points ? ` · ${e.failed_points} point(s) had errors (hover a row)` : ""} · run file ${e.path}`);
        break;
      case "failed":
        this.setRunning(false);
        setText(this.status, "");
        this.hooks.error({ kind: "sweep", message: e.message });
        break;
    }
  }
}

/** Under the table: what the power and clock columns could not read here, and each point
 * that throttled. */
export function sensorNotes(points: PointFigures[]): string {
  const missing = points.find((p) => p.sensors_not_available.length)?.sensors_not_available ?? [];
  const throttled = points.flatMap((p) => p.throttling.map((t) => `${backendLabel(p.backend)} ${p.prompt_tokens}-token prompts at ${p.concurrency} clients: ${t}`));
  return [...missing.map((m) => `Not available here: ${m}.`), ...throttled.map((t) => `Throttling: ${t}.`)].join(" ");
}

/** A backend, the device it loaded on, and that device's measured limits (none when the
 * probe did not measure it). */
export interface DeviceCeilings {
  backend: string;
  device: string;
  limits: Limits | null;
}

/** What the ceilings mean, in this machine's numbers: for each device the sweep's backends
 * ran on, its limits and the fastest one request can decode there; then, once, why. */
export function explainCeilings(devices: DeviceCeilings[], weightBytes: number): string {
  const groups = new Map<string, DeviceCeilings[]>();
  for (const d of devices) {
    const key = d.limits ? d.limits.device : `none|${d.device}`;
    groups.set(key, [...(groups.get(key) ?? []), d]);
  }
  const mb = (weightBytes / 1e6).toFixed(0);
  const gbs = (l: Limits) => `${(l.memory_bytes_per_s / 1e9).toFixed(1)} GB/s`;
  const parts = [...groups.values()].map((g) => {
    const who = g.map((d) => backendLabel(d.backend)).join(", ");
    const l = g[0].limits;
    if (!l) return `${who} on ${g[0].device}: no ceilings (the probe did not measure that device).`;
    const most = l.memory_bytes_per_s / weightBytes;
    return (
      `${who}: ceilings from ${l.device}: memory read ${gbs(l)}, compute ${(l.compute_flops_per_s / 1e9).toFixed(0)} GFLOP/s (${l.compute_method}); ` +
      `one request decodes at most ${most.toFixed(0)} tok/s there (${gbs(l)} ÷ ${mb} MB).`
    );
  });
  if (!devices.some((d) => d.limits)) return parts.join(" ");
  return (
    parts.join(" ") +
    ` Decode reads every weight once per token (${mb} MB for this model): memory-bound. ` +
    `Requests decoding together share that read, until the arithmetic becomes the limit: compute-bound. ` +
    `Prefill computes all the prompt's tokens in one pass over the weights: compute-bound.`
  );
}

/** A median as a share of its ceiling and the limit behind it: `61% memory`; — without one. */
export function ofCeiling(value: number, ceiling: number | undefined, bound: string | undefined): string {
  return ceiling && ceiling > 0 ? `${Math.round((100 * value) / ceiling)}% ${bound}` : "—";
}

/** `512`, or `64..512` for a range. */
function lengthLabel(from: number | null | undefined, to: number): string {
  return from != null && from < to ? `${from}..${to}` : String(to);
}
