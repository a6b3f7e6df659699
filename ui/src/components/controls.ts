/**
 * Live mode's controls: backends (and OpenAI-compatible servers the user adds), prompt length (log slider with the exact count, which can
 * also be typed), concurrency, output tokens, policy, threads. Every control is a native
 * input, so all of them work from the keyboard. Changes reach the engine at most every
 * 100 ms while a slider moves (and once more when it stops), well inside the engine's
 * 200 ms promise.
 */
import { backendColor } from "../lib/colors";
import { h, setText } from "../lib/dom";
import { bytes, num } from "../lib/format";
import { choosesKv, kvOnlyNote } from "../lib/backends";
import { clampTokens, MIN_PROMPT, positionOf, STEPS, tokensAt } from "../lib/scale";
import { toAppError } from "../ipc/core";
import type { BackendAvailability, LiveSettings, Policy, ServerSpec, SettingsFit } from "../ipc/types";
import type { Drafter } from "../ipc/generated/Drafter";
import type { KvType } from "../ipc/generated/KvType";
import { POLICIES } from "../ipc/types";
import { APP_BATCH_MS, CONTEXT_FALLBACK_TOKENS, LIVE_MAX_CONCURRENCY, LIVE_SETTINGS } from "../ipc/generated/defaults";

const POLICY_HELP: Record<Policy, string> = {
  serial: "one request at a time",
  static: "batches form, run to the end; nothing joins",
  continuous: "requests join and leave every step",
  chunked: "continuous, with prompts split into chunks",
  disaggregated: "one worker prefills, another decodes; each prompt's KV cache moves between them (reloads the model)",
};

const KV_TYPES: KvType[] = ["f16", "q8_0", "q4_0"];

const KV_HELP: Record<KvType, string> = {
  f16: "16 bits per value, llama.cpp's default; changing it reloads the model",
  q8_0: "34 bytes per 32 values: about 1.9x the sequences in the same memory; turns flash attention on",
  q4_0: "18 bytes per 32 values: about 3.6x the sequences in the same memory; turns flash attention on",
};

const SPEC_HELP: Record<Drafter, string> = {
  none: "one token per request per pass",
  lookup: "drafts from each request's own prompt and output, verified in one pass; accepted tokens are underlined in the preview",
  draft: "a draft model (made from this model unless one is named) proposes tokens, verified in one pass; loads it beside the model; accepted tokens are underlined",
};

export const DEFAULT_SETTINGS: LiveSettings = { ...LIVE_SETTINGS, batch_ms: APP_BATCH_MS };

/** What the controls ask of the app to add and forget servers (each refreshes the list). */
export interface ServerHooks {
  add(spec: ServerSpec): Promise<string>;
  remove(name: string): Promise<void>;
}

export class Controls {
  readonly el: HTMLElement;
  settings: LiveSettings = { ...DEFAULT_SETTINGS, backends: [...DEFAULT_SETTINGS.backends] };
  private context = CONTEXT_FALLBACK_TOKENS;
  private backendBox = h("div", { class: "backend-list", role: "group", "aria-label": "backends" });
  private promptSlider = h("input", { type: "range", min: 0, max: STEPS, step: 1, "aria-label": "prompt length (logarithmic)", "data-testid": "prompt-slider" }) as HTMLInputElement;
  private promptInput = h("input", { type: "number", min: 1, step: 1, class: "exact", "aria-label": "prompt tokens, exact", "data-testid": "prompt-tokens" }) as HTMLInputElement;
  private promptRange = h("span", { class: "muted small" });
  private concSlider = h("input", { type: "range", min: 1, max: LIVE_MAX_CONCURRENCY, step: 1, "aria-label": "concurrent clients", "data-testid": "concurrency-slider" }) as HTMLInputElement;
  private concValue = h("output", { class: "value", "data-testid": "concurrency-value" });
  private maxInput = h("input", { type: "number", min: 1, max: 4096, step: 1, class: "exact", "aria-label": "output tokens per request", "data-testid": "max-tokens" }) as HTMLInputElement;
  private policySelect = h("select", { "aria-label": "scheduling policy", "data-testid": "policy" }, ...POLICIES.map((p) => h("option", { value: p }, p))) as HTMLSelectElement;
  private policyHelp = h("span", { class: "muted small" });
  private specSelect = h("select", { "aria-label": "speculative decoding", "data-testid": "spec" }, h("option", { value: "none" }, "off"), h("option", { value: "lookup" }, "prompt lookup"), h("option", { value: "draft" }, "draft model")) as HTMLSelectElement;
  private specHelp = h("span", { class: "muted small" });
  private specFixed = h("input", { type: "checkbox", "data-testid": "spec-fixed" }) as HTMLInputElement;
  private specShared = h("input", { type: "checkbox", "data-testid": "spec-shared" }) as HTMLInputElement;
  private kvSelect = h("select", { "aria-label": "KV cache type", "data-testid": "kv-type" }, ...KV_TYPES.map((t) => h("option", { value: t }, t))) as HTMLSelectElement;
  private kvHelp = h("span", { class: "muted small" });
  private chunkInput = h("input", { type: "number", min: 16, max: 8192, step: 16, class: "exact", "aria-label": "chunk tokens (chunked policy)" }) as HTMLInputElement;
  private threadsInput = h("input", { type: "number", min: 0, max: 512, step: 1, class: "exact", "data-testid": "threads", "aria-label": "compute threads, 0 for auto", "aria-describedby": "threads-help" }) as HTMLInputElement;
  // Why auto is not simply every core: the window's repaints would stall the backend's
  // threads, which wait for each other (see lx_machine::hardware::threads_beside_a_window).
  private threadsHelp = h("span", { class: "muted small", id: "threads-help" }, "auto: this machine's tuned choice (Tune this machine); untuned, the physical cores, less one for this window when there are no spare hyper-threads");
  private list: BackendAvailability[] = [];
  private servers = new Set<string>();
  private serverUrl = h("input", { type: "url", placeholder: "http://127.0.0.1:8080/v1", "aria-label": "server address, up to /v1", "data-testid": "server-url" }) as HTMLInputElement;
  private serverName = h("input", { type: "text", placeholder: "name (optional)", "aria-label": "server name, optional", "data-testid": "server-name" }) as HTMLInputElement;
  private serverModel = h("input", { type: "text", placeholder: "model (default: the first it lists)", "aria-label": "model to ask the server for, optional", "data-testid": "server-model" }) as HTMLInputElement;
  private serverChat = h("input", { type: "checkbox", "aria-label": "use the chat completions API", "data-testid": "server-chat" }) as HTMLInputElement;
  private serverAdd = h("button", { type: "submit", class: "small", "data-testid": "server-add" }, "Add server") as HTMLButtonElement;
  private serverStatus = h("span", { class: "muted small", role: "status", "data-testid": "server-status" });
  private fitNote = h("p", { class: "fit-note small muted", "data-testid": "fit-note", "aria-live": "polite" });
  private fitTimer: number | null = null;
  private fitAsked = 0;
  private fitFor = "";
  private timer: number | null = null;
  private lastSent = 0;

  constructor(
    private onChange: (s: LiveSettings) => void,
    private serverHooks: ServerHooks,
    private fitCheck: (s: LiveSettings) => Promise<SettingsFit[] | null>,
  ) {
    this.promptSlider.addEventListener("input", () => this.setPrompt(tokensAt(Number(this.promptSlider.value), this.maxPrompt()), "slider"));
    this.promptInput.addEventListener("change", () => this.setPrompt(clampTokens(Number(this.promptInput.value), this.maxPrompt()), "input"));
    this.concSlider.addEventListener("input", () => {
      this.settings.concurrency = Number(this.concSlider.value);
      this.sync();
      this.changed();
    });
    this.maxInput.addEventListener("change", () => {
      const max = Math.max(1, Math.min(4096, this.context - 1, Math.round(Number(this.maxInput.value) || 1)));
      this.settings.max_tokens = max;
      this.settings.prompt_tokens = Math.min(this.settings.prompt_tokens, this.maxPrompt());
      this.sync();
      this.changed(true);
    });
    this.policySelect.addEventListener("change", () => {
      this.settings.policy = this.policySelect.value as Policy;
      this.sync();
      this.changed(true);
    });
    this.specSelect.addEventListener("change", () => {
      this.settings.spec = { ...this.settings.spec, drafter: this.specSelect.value as Drafter };
      this.sync();
      this.changed(true);
    });
    this.specFixed.addEventListener("change", () => {
      this.settings.spec = { ...this.settings.spec, adaptive: !this.specFixed.checked };
      this.sync();
      this.changed(true);
    });
    this.specShared.addEventListener("change", () => {
      this.settings.spec = { ...this.settings.spec, shared_cache: this.specShared.checked };
      this.sync();
      this.changed(true);
    });
    this.kvSelect.addEventListener("change", () => {
      const t = this.kvSelect.value as KvType;
      this.settings.kv = { k: t, v: t };
      this.sync();
      this.changed(true);
    });
    this.chunkInput.addEventListener("change", () => {
      this.settings.chunk_tokens = Math.max(1, Math.round(Number(this.chunkInput.value) || 256));
      this.sync();
      this.changed(true);
    });
    this.threadsInput.addEventListener("change", () => {
      this.settings.threads = Math.max(0, Math.round(Number(this.threadsInput.value) || 0));
      this.sync();
      this.changed(true);
    });
    const field = (label: string, ...rest: (Node | string)[]) => h("div", { class: "field" }, h("label", { class: "field-label" }, label), ...rest);
    this.el = h(
      "section",
      { class: "controls", "aria-label": "live mode settings" },
      field("Backends", this.backendBox, this.serverForm()),
      field("Prompt length", h("div", { class: "row" }, this.promptSlider, this.promptInput), this.promptRange),
      field("Concurrent clients", h("div", { class: "row" }, this.concSlider, this.concValue), this.fitNote),
      field("Output tokens per request", this.maxInput),
      field("Scheduling policy", this.policySelect, this.policyHelp),
      field(
        "Speculative decoding",
        this.specSelect,
        this.specHelp,
        h("label", { class: "sweep-check" }, this.specFixed, " draft the most every pass, as llama.cpp's tools do (else: as much as pays here)"),
        h("label", { class: "sweep-check" }, this.specShared, " prompt lookup matches earlier requests too (flatters repeated prompts)"),
      ),
      field("KV cache", this.kvSelect, this.kvHelp),
      field("Prefill chunk (chunked)", this.chunkInput),
      field("Threads (0 = auto)", this.threadsInput, this.threadsHelp),
    );
    this.sync();
  }

  /** "Add a server": an OpenAI-compatible server measured like a backend. */
  private serverForm(): HTMLElement {
    const form = h(
      "form",
      // The app checks the address and says what is wrong with it; the browser's own check
      // of type="url" would silently refuse to submit.
      { class: "server-form", novalidate: "" },
      this.serverUrl,
      this.serverName,
      this.serverModel,
      h("label", { class: "sweep-check" }, this.serverChat, " chat API (/v1/chat/completions)"),
      h("div", { class: "row" }, this.serverAdd, this.serverStatus),
      h("span", { class: "muted small" }, "An API key, if it needs one, comes from LX_API_KEY in the app's environment. The server schedules its own requests: the policy and threads below do not apply to it."),
    ) as HTMLFormElement;
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const url = this.serverUrl.value.trim();
      if (!url) {
        setText(this.serverStatus, "type the server's address, up to /v1");
        return;
      }
      this.serverAdd.disabled = true;
      setText(this.serverStatus, "reaching the server…");
      try {
        const name = await this.serverHooks.add({ url, name: this.serverName.value.trim() || null, model: this.serverModel.value.trim() || null, chat: this.serverChat.checked });
        // Selected at once: adding a server is asking to measure it.
        if (!this.settings.backends.includes(name)) this.settings.backends = [...this.settings.backends, name];
        this.setBackends(this.list);
        this.serverUrl.value = this.serverName.value = this.serverModel.value = "";
        setText(this.serverStatus, `added ${name}`);
        this.sync();
        this.changed(true);
      } catch (e) {
        setText(this.serverStatus, toAppError(e).message);
      } finally {
        this.serverAdd.disabled = false;
      }
    });
    return h("details", { class: "sweep-more add-server", "data-testid": "add-server" }, h("summary", {}, "Add a server (OpenAI-compatible)…"), form);
  }

  private maxPrompt(): number {
    return Math.max(MIN_PROMPT, this.context - this.settings.max_tokens);
  }

  private setPrompt(tokens: number, from: "slider" | "input") {
    this.settings.prompt_tokens = tokens;
    this.sync(from === "slider");
    this.changed(from === "input");
  }

  /** A lesson moves the controls to the setting it measures next, where the audience can
   *  see them move (they flash); the change is reported like the user's own. */
  moveTo(to: { promptTokens: number; concurrency: number; maxTokens: number; policy: Policy }): void {
    const s = this.settings;
    const moved = [
      [s.prompt_tokens !== to.promptTokens, this.promptSlider],
      [s.concurrency !== to.concurrency, this.concSlider],
      [s.policy !== to.policy, this.policySelect],
    ] as const;
    s.max_tokens = Math.min(to.maxTokens, this.context - 1);
    s.prompt_tokens = Math.min(to.promptTokens, this.maxPrompt());
    s.concurrency = to.concurrency;
    s.policy = to.policy;
    this.sync();
    for (const [changed, el] of moved) {
      if (!changed) continue;
      el.classList.remove("moved");
      void el.offsetWidth; // restart the flash
      el.classList.add("moved");
    }
    this.changed(true);
  }

  /** A model was opened: the prompt slider ends at its context. */
  setContext(context: number): void {
    this.context = Math.max(32, context);
    this.settings.max_tokens = Math.min(this.settings.max_tokens, this.context - 1);
    this.settings.prompt_tokens = Math.min(this.settings.prompt_tokens, this.maxPrompt());
    this.sync();
    this.refreshFit(true);
  }

  setBackends(list: BackendAvailability[]): void {
    this.list = list;
    this.servers = new Set(list.filter((b) => b.server).map((b) => b.name));
    const selected = new Set(this.settings.backends.filter((b) => list.some((x) => x.name === b && x.available)));
    if (selected.size === 0) {
      const first = list.find((b) => b.available);
      if (first) selected.add(first.name);
    }
    this.settings.backends = list.filter((b) => selected.has(b.name)).map((b) => b.name);
    this.backendBox.replaceChildren(
      ...list.map((b) => {
        const box = h("input", { type: "checkbox", value: b.name, "data-testid": `backend-${b.name}`, disabled: !b.available, checked: selected.has(b.name) }) as HTMLInputElement;
        box.addEventListener("change", () => {
          const on = new Set(this.settings.backends);
          if (box.checked) on.add(b.name);
          else on.delete(b.name);
          if (on.size === 0) {
            box.checked = true; // at least one backend stays selected
            return;
          }
          this.settings.backends = list.filter((x) => on.has(x.name)).map((x) => x.name);
          this.changed(true);
        });
        const dot = h("span", { class: "dot" });
        dot.style.background = backendColor(b.name);
        const device = b.available ? b.devices.join("; ") || "ready" : (b.reason ?? "not available");
        const row = h("label", { class: `backend${b.available ? "" : " unavailable"}`, title: device }, box, dot, h("span", { class: "backend-name" }, b.label), h("span", { class: "backend-device" }, device));
        if (b.server) {
          const remove = h("button", { type: "button", class: "small ghost remove", "aria-label": `forget the server ${b.label}`, "data-testid": `server-remove-${b.name}` }, "×") as HTMLButtonElement;
          remove.addEventListener("click", async (ev) => {
            ev.preventDefault();
            remove.disabled = true;
            try {
              await this.serverHooks.remove(b.name);
            } catch (e) {
              setText(this.serverStatus, toAppError(e).message);
              remove.disabled = false;
            }
          });
          row.append(remove);
        }
        return row;
      }),
    );
    this.sync();
    this.refreshFit(true);
  }

  private sync(fromSlider = false) {
    const s = this.settings;
    if (!fromSlider) this.promptSlider.value = String(positionOf(s.prompt_tokens, this.maxPrompt()));
    this.promptInput.max = String(this.maxPrompt());
    if (document.activeElement !== this.promptInput || fromSlider) this.promptInput.value = String(s.prompt_tokens);
    setText(this.promptRange, `${MIN_PROMPT} to ${this.maxPrompt()} tokens (context ${this.context} − output)`);
    this.concSlider.value = String(s.concurrency);
    setText(this.concValue, String(s.concurrency));
    this.maxInput.value = String(s.max_tokens);
    // A server schedules requests itself: our policy, chunk and threads apply only to the
    // embedded backends, so with nothing but servers selected they are greyed out.
    const onlyServers = s.backends.length > 0 && s.backends.every((b) => this.servers.has(b));
    const someServers = s.backends.some((b) => this.servers.has(b));
    this.policySelect.value = s.policy;
    this.policySelect.disabled = onlyServers;
    setText(this.policyHelp, onlyServers ? "scheduled by the server" : someServers ? `${POLICY_HELP[s.policy]} (servers schedule their own)` : POLICY_HELP[s.policy]);
    this.specSelect.value = s.spec.drafter;
    this.specSelect.disabled = onlyServers;
    setText(this.specHelp, SPEC_HELP[s.spec.drafter]);
    this.specFixed.checked = !s.spec.adaptive;
    this.specFixed.disabled = onlyServers || s.spec.drafter === "none";
    this.specShared.checked = s.spec.shared_cache ?? false;
    this.specShared.disabled = onlyServers || s.spec.drafter !== "lookup";
    // Quantized caches are llama.cpp's: any other backend or a server takes f16 only.
    const kvChosen = s.backends.every(choosesKv);
    if (!kvChosen) s.kv = { k: "f16", v: "f16" };
    this.kvSelect.value = s.kv.k === s.kv.v ? s.kv.k : "f16";
    this.kvSelect.disabled = !kvChosen;
    setText(this.kvHelp, kvChosen ? KV_HELP[this.kvSelect.value as KvType] : kvOnlyNote());
    this.chunkInput.value = String(s.chunk_tokens);
    this.chunkInput.disabled = onlyServers || s.policy !== "chunked";
    this.threadsInput.value = String(s.threads);
    this.threadsInput.disabled = onlyServers;
  }

  /** Whether the settings fit in memory, on each selected backend: asked a moment after the
   *  controls stop moving, so a load that would be refused shows before it is asked for;
   *  only when what sizes the load changed (the prediction takes CPU time from a live
   *  measurement). `force`: the model or the backends' list changed. */
  private refreshFit(force = false) {
    const s = this.settings;
    const sizing = JSON.stringify([s.backends, s.prompt_tokens, s.max_tokens, s.concurrency, s.kv, s.policy === "disaggregated", this.context]);
    if (sizing === this.fitFor && !force) return;
    this.fitFor = sizing;
    if (this.fitTimer !== null) window.clearTimeout(this.fitTimer);
    this.fitTimer = window.setTimeout(async () => {
      this.fitTimer = null;
      const asked = ++this.fitAsked;
      let fits: SettingsFit[] | null;
      try {
        fits = await this.fitCheck({ ...this.settings, backends: [...this.settings.backends] });
      } catch (e) {
        fits = null;
        setText(this.fitNote, `memory not predicted: ${toAppError(e).message}`);
      }
      if (asked !== this.fitAsked || fits === null) return;
      this.showFit(fits);
    }, 150);
  }

  private showFit(fits: SettingsFit[]) {
    const gib = (b: number) => bytes(b, true);
    const label = (name: string) => this.list.find((b) => b.name === name)?.label ?? name;
    const total = (f: SettingsFit) => f.needs.weights + f.needs.kv_cache + f.needs.scratch + f.needs.runtime;
    this.fitNote.classList.toggle("warn", fits.some((f) => !f.fits));
    this.fitNote.classList.toggle("muted", fits.every((f) => f.fits));
    if (fits.length === 0) {
      setText(this.fitNote, "");
      return;
    }
    // The tightest backend bounds what the selection can run.
    const least = (v: (number | null)[]) => (v.some((x) => x === null) ? null : Math.min(...(v as number[])));
    const prompt = least(fits.map((f) => f.longest_prompt));
    const clients = least(fits.map((f) => f.most_clients));
    const limits = [
      prompt === null ? "no prompt fits at these clients" : `prompts up to ${num(Math.min(prompt, this.maxPrompt()))} tokens at ${this.settings.concurrency} client${this.settings.concurrency === 1 ? "" : "s"}`,
      clients === null ? "not one client at this prompt" : `up to ${num(Math.min(clients, Number(this.concSlider.max)))} clients at this prompt`,
    ].join("; ");
    const needs = fits.map((f) => `${label(f.backend)} ${gib(total(f))}`).join(", ");
    const over = fits.filter((f) => !f.fits);
    const head = over.length
      ? `Does not fit: ${over.map((f) => `${label(f.backend)} needs ${gib(total(f))}`).join(", ")} of the ${gib(fits[0].memory_bytes)} available, so its load would be refused.`
      : `Memory: ${needs} of the ${gib(fits[0].memory_bytes)} available.`;
    this.fitNote.title = fits.map((f) => `${label(f.backend)}: ${gib(f.needs.weights)} weights, ${gib(f.needs.kv_cache)} KV cache, ${gib(f.needs.scratch)} buffers, ${gib(f.needs.runtime)} process`).join("\n");
    setText(this.fitNote, `${head} Fits: ${limits}.`);
  }

  /** Tell the app, at most every 100 ms while a control moves, and always at the end. */
  private changed(now = false) {
    this.refreshFit();
    const send = () => {
      this.timer = null;
      this.lastSent = performance.now();
      this.onChange({ ...this.settings, backends: [...this.settings.backends] });
    };
    if (this.timer !== null) window.clearTimeout(this.timer);
    const wait = now ? 0 : Math.max(0, 100 - (performance.now() - this.lastSent));
    this.timer = window.setTimeout(send, wait);
  }
}
