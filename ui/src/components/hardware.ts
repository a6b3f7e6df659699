/** The hardware panel: machine, model file, and each backend's worker and device. */
import { h, setText } from "../lib/dom";
import { bytes, ms as fmtMs, num, params } from "../lib/format";
import type { BackendAvailability, CheckRow, HardwareReport, MachineSpeed, MemoryFit, ModelInfo } from "../ipc/types";
import type { LiveStore } from "../lib/store";
import { backendLabel } from "./charts";

function rows(pairs: [string, string][]): HTMLElement {
  return h("dl", { class: "facts" }, ...pairs.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export class HardwarePanel {
  readonly el: HTMLElement;
  private machine = h("div", {}, h("p", { class: "muted" }, "probing…"));
  private model = h("div", {}, h("p", { class: "muted" }, "no model open"));
  private workers = h("div", {});
  private lastWorkers = "";
  private checkBtn = h("button", { type: "button", class: "small", "data-testid": "check-backends", title: "Load a tiny generated model on every backend and device of this build and run a few tokens" }, "Check backends");
  private checkStatus = h("div", { class: "muted small", "data-testid": "check-status", "aria-live": "polite" });
  private checkRows = h("tbody", {});

  private summary = h("div", { class: "hw-summary", "data-testid": "hw-summary" });
  private speedBtn = h("button", { type: "button", class: "small", "data-testid": "measure-speed", title: "Measure this machine's memory bandwidth and matrix-product rate (a few seconds, in a child process)" }, "Measure how fast it can go") as HTMLButtonElement;
  private speed: MachineSpeed | null = null;
  private speedNote = "";
  private fitStatus = h("p", { class: "muted small", "data-testid": "fit-status", "aria-live": "polite" }, "no model open");
  private fitHead = h("tr", {});
  private fitRows = h("tbody", {});

  /** `check` runs the backend check, calling `onRow` with each row as it finishes;
   *  `measureSpeed` reads this machine's limits (measuring them when asked). */
  constructor(
    private store: LiveStore,
    private check: (onRow: (row: CheckRow) => void) => Promise<CheckRow[]>,
    private measureSpeed: (measure: boolean) => Promise<MachineSpeed | null>,
    private planFit: () => Promise<MemoryFit | null>,
  ) {
    this.checkBtn.addEventListener("click", () => void this.runCheck());
    this.speedBtn.addEventListener("click", () => void this.loadSpeed(true));
    const checkTable = h(
      "table",
      { class: "points check", "data-testid": "check-table" },
      h("thead", {}, h("tr", {}, ...["Backend", "Asked for", "Ran on", "Result", "Load", "Run"].map((c) => h("th", {}, c)))),
      this.checkRows,
    );
    this.el = h(
      "section",
      { class: "card hardware", "data-testid": "hardware", "aria-label": "hardware" },
      h("header", { class: "card-head" }, h("span", {}, "Hardware and model")),
      this.summary,
      h("div", { class: "hw-grid" }, h("div", {}, h("h3", {}, "Machine"), this.machine), h("div", {}, h("h3", {}, "Model file"), this.model), h("div", {}, h("h3", {}, "Backends"), this.workers)),
      h("h3", {}, "What fits in memory"),
      this.fitStatus,
      h("div", { class: "table-scroll" }, h("table", { class: "points fit", "data-testid": "fit-table" }, h("thead", {}, this.fitHead), this.fitRows)),
      h("div", { class: "check-bar" }, this.checkBtn, this.checkStatus),
      checkTable,
    );
  }

  /** `lx fit` for the open model: per backend and KV cache type, the longest context that
   *  fits the memory available now at a few concurrencies, before anything loads. */
  private async loadFit(): Promise<void> {
    setText(this.fitStatus, "planning…");
    this.fitRows.replaceChildren();
    let fit: MemoryFit | null;
    try {
      fit = await this.planFit();
    } catch (e) {
      setText(this.fitStatus, `not planned: ${(e as { message?: string }).message ?? String(e)}`);
      return;
    }
    if (!fit) {
      setText(this.fitStatus, "no model open");
      this.fitHead.replaceChildren();
      return;
    }
    const full = num(fit.full_context);
    const seqs = fit.plans[0]?.longest.map((l) => l.sequences) ?? [];
    const heads: [string, string][] = [
      ["Backend", ""],
      ["KV", "how the KV cache stores keys and values"],
      ...seqs.map((n): [string, string] => [`${n} seq${n === 1 ? "" : "s"}`, `the longest context per sequence that fits with ${n} sequence${n === 1 ? "" : "s"}`]),
      [`× ${full}`, `the most sequences of the full ${full}-token context that fit`],
      [`1 × ${full}`, `what one sequence of the full context needs (hover a cell for the split)`],
    ];
    this.fitHead.replaceChildren(...heads.map(([c, title]) => h("th", title ? { title } : {}, c)));
    const gib = (b: number) => bytes(b, true);
    for (const p of fit.plans) {
      const longest = p.longest.map((l) => (l.context === null ? "none" : l.context >= fit.full_context ? "all" : num(l.context)));
      const f = p.one_at_full;
      const need = h("td", { title: `${gib(f.weights)} weights, ${gib(f.kv_cache)} KV cache, ${gib(f.scratch)} buffers, ${gib(f.runtime)} process` }, gib(f.weights + f.kv_cache + f.scratch + f.runtime));
      const cells = [backendLabel(p.backend), p.kv, ...longest, num(p.most_at_full)].map((c) => h("td", {}, c));
      this.fitRows.append(h("tr", { "data-backend": p.backend }, ...cells, need));
    }
    setText(this.fitStatus, `The longest context that fits the ${gib(fit.memory_bytes)} available now, by sequences at once; predicted from the model file as each backend holds it (weights and KV cache counted, buffers estimated, the worker process measured). A load that cannot fit is refused before it starts.`);
  }

  /** The backend check: proof that each backend runs here, on each device it can use. */
  private async runCheck(): Promise<void> {
    this.checkBtn.disabled = true;
    this.checkRows.replaceChildren();
    setText(this.checkStatus, "checking: a tiny model on each backend and device…");
    const add = (r: CheckRow) => {
      const result = r.error ? `failed: ${r.error}` : `ok (${r.tokens} tokens)${r.cpu_fallback ? ` · ${r.cpu_fallback}` : ""}`;
      const cells = [backendLabel(r.backend), r.requested, r.device || "—", result, fmtMs(r.load_ms), fmtMs(r.run_ms)];
      this.checkRows.append(h("tr", { class: r.ok ? "" : "has-errors" }, ...cells.map((c) => h("td", {}, c))));
    };
    try {
      const rows = await this.check(add);
      const ok = rows.filter((r) => r.ok).length;
      setText(this.checkStatus, `${ok} of ${rows.length} checks passed`);
    } catch (e) {
      setText(this.checkStatus, `the check could not run: ${(e as { message?: string }).message ?? String(e)}`);
    } finally {
      this.checkBtn.disabled = false;
    }
  }

  /** This machine's limits as last measured (or measured now), in the summary. */
  async loadSpeed(measure: boolean): Promise<void> {
    this.speedBtn.disabled = true;
    if (measure) this.speedNote = "measuring memory and compute…";
    this.describe();
    try {
      this.speed = await this.measureSpeed(measure);
      this.speedNote = "";
    } catch (e) {
      this.speedNote = `not measured: ${(e as { message?: string }).message ?? String(e)}`;
    } finally {
      this.speedBtn.disabled = false;
      this.describe();
    }
  }

  /** What runs where on this machine, and how fast it can go, in sentences. */
  private describe(): void {
    const usable = this.available.filter((b) => b.available && !b.server);
    const where = usable.length ? `Runs here: ${usable.map((b) => `${backendLabel(b.name)} on ${b.devices.join(" or ") || "the CPU"}`).join("; ")}.` : "No backend of this build runs here.";
    const model = this.modelName ? ` ${this.modelName}` : " a model";
    const speed = this.speed?.devices.map((d) => {
      const l = d.limits;
      const c = d.ceiling;
      const limits = `${l.device} reads memory at ${num(Math.round(l.memory_bytes_per_s / 1e9))} GB/s and multiplies at ${num(Math.round(l.compute_flops_per_s / 1e9))} GFLOP/s`;
      return c ? `${limits}: for${model} that allows at most ${c.decode_tps.toFixed(0)} tokens/s for one reader (bound by ${c.decode_bound}) and a 1024-token prompt in no less than ${fmtMs(c.least_ttft_ms)}.` : `${limits}.`;
    });
    const when = this.speed ? ` (measured ${new Date(this.speed.measured_unix_ms).toLocaleString()}${this.speed.busy ? `; ${this.speed.busy}` : ""})` : "";
    this.summary.replaceChildren(
      h("p", {}, where),
      speed?.length && !this.speedNote
        ? h("p", { "data-testid": "hw-speed" }, `How fast it can go: ${speed.join(" ")}${when} Sweeps and lessons hold their numbers against these ceilings.`)
        : h("p", { class: "muted", "data-testid": "hw-speed" }, this.speedNote || "How fast it can go: not measured on this build yet."),
      this.speedBtn,
    );
    setText(this.speedBtn, this.speed ? "Measure again" : "Measure how fast it can go");
  }

  private modelName = "";

  setHardware(hw: HardwareReport): void {
    this.machine.replaceChildren(
      rows([
        ["CPU", hw.cpu],
        ["Cores", `${hw.physical_cores} physical, ${hw.logical_cores} logical`],
        ["Memory", bytes(hw.memory_bytes, true)],
        ["OS", `${hw.os} (${hw.arch})`],
        ["Features", hw.cpu_features.join(" ") || "—"],
        ["GPUs", hw.gpus?.length ? hw.gpus.join("; ") : "none found"],
        ["This build", hw.build_features?.length ? `compiled with ${hw.build_features.join(", ")}` : "CPU only (no GPU features)"],
      ]),
    );
  }

  setModel(m: ModelInfo | null): void {
    this.modelName = m ? (m.facts.name ?? m.name) : "";
    if (this.speed) void this.loadSpeed(false);
    void this.loadFit();
    if (!m) {
      this.model.replaceChildren(h("p", { class: "muted" }, "no model open"));
      return;
    }
    const f = m.facts;
    this.model.replaceChildren(
      rows([
        ["Name", f.name ? `${f.name} (${m.name})` : m.name],
        ...(f.synthetic ? [["Synthetic", `${f.synthetic}: shapes and types of the real model, made-up weights; timings only, text is noise`] as [string, string]] : []),
        ["Architecture", f.architecture],
        ["Parameters", `${params(f.parameter_count)} (${num(f.parameter_count)})`],
        ["Quantization", f.quantization.name],
        ["File size", bytes(f.file_size)],
        ["Context", `${num(m.context_length)} tokens`],
        ["Layers / heads", `${f.block_count ?? "?"} / ${f.head_count ?? "?"} (${f.head_count_kv ?? "?"} KV)`],
        ["Vocabulary", f.vocab_size ? num(f.vocab_size) : "—"],
        ["sha256", m.sha256 ? `${m.sha256.slice(0, 16)}… (verified)` : "not checked (local file)"],
      ]),
    );
  }

  private available: BackendAvailability[] = [];
  setBackends(list: BackendAvailability[]): void {
    this.available = list;
    this.lastWorkers = "";
    this.describe();
    this.update();
  }

  /** Redraw the backend rows when a worker's state changed. */
  update(): void {
    const sig = JSON.stringify([...this.store.backends.values()].map((b) => [b.backend, b.state, b.pid]));
    if (sig === this.lastWorkers) return;
    this.lastWorkers = sig;
    const items = this.available.map((b) => {
      const st = this.store.backends.get(b.name);
      const info = st?.info;
      const lines: [string, string][] = [["Available", b.available ? "yes" : (b.reason ?? "no")]];
      if (b.devices.length) lines.push(["Devices", b.devices.join("; ")]);
      if (st) lines.push(["Worker", `${st.state}${st.pid ? ` · pid ${st.pid}` : ""}${st.load_ms ? ` · loaded in ${fmtMs(st.load_ms)}` : ""}`]);
      if (info) lines.push(["Running on", `${info.device} · ${info.version}`]);
      if (info?.cpu_fallback) lines.push(["Warning", info.cpu_fallback]);
      if (info?.draft) lines.push(["Draft model", info.draft]);
      if (info) {
        const settings = Object.entries({ threads: String(info.threads), ...(info.settings ?? {}) }).map(([k, v]) => `${k}=${v}`).join(" ");
        lines.push(["Settings", `${settings}${info.settings_from ? ` · ${info.settings_from}` : ""}`]);
      }
      if (st?.capacity) {
        const c = st.capacity;
        const kv = c.kv_cache_bytes != null ? ` · KV cache ${bytes(c.kv_cache_bytes, true)}${c.kv.k === c.kv.v ? ` ${c.kv.k}` : ` K ${c.kv.k}, V ${c.kv.v}`}` : "";
        lines.push(["Loaded for", `${c.slots} sequences × ${num(c.ctx_per_slot)} tokens${kv}${c.draft ? " · with its draft model" : ""}`]);
      }
      if (st?.state === "error" && st.message) lines.push(["Error", st.message]);
      const head = h("h4", {}, backendLabel(b.name));
      const el = h("div", { class: "backend-facts", "data-backend": b.name, "data-state": st?.state ?? "none", "data-pid": st?.pid ?? "" }, head, rows(lines));
      return el;
    });
    this.workers.replaceChildren(...items);
  }
}
