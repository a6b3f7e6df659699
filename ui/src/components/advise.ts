/**
 * "Advise": `lx advise` in the app. Pick a workload preset and a budget; the advisor measures
 * what the decision needs on the backends selected on the left (a capacity search each, or a
 * deadline plan for batch presets), then shows its recommendation, what it optimised, the
 * evidence table it rests on, what would change the answer and whether a fresh run confirmed it.
 */
import { h, setText } from "../lib/dom";
import type { Advice, AdviseEvent, DeadlineRecord, PresetRecord, SearchRecord, Trial } from "../ipc/types";
import { backendLabel } from "./charts";
import { TaskControl } from "./task";

export interface AdviseDeps {
  presets: () => Promise<PresetRecord[]>;
  backends: () => string[];
  start: (preset: string, backends: string[], budgetS: number, onEvent: (e: AdviseEvent) => void) => Promise<string>;
  cancel: () => Promise<void>;
  /** Called before measuring starts (live mode is stopped: the two would compete). */
  beforeStart: () => Promise<void>;
  /** Advising started or ended: other controls may change state. */
  changed: () => void;
  error: (e: unknown) => void;
}

const LOG_LINES = 10;

/** `0.5 req/s`, `6 clients`. */
function setting(axis: "rate" | "concurrency", v: number): string {
  return axis === "rate" ? `${Number(v.toPrecision(3))} req/s` : `${v} clients`;
}

/** `llama.cpp (continuous)`, or a server's name. */
function candidate(backend: string, policy: string | undefined): string {
  return policy && policy !== "server" ? `${backendLabel(backend)} (${policy})` : backendLabel(backend);
}

function pct(x: number): string {
  return `${Math.round(x * 100)}%`;
}

function verdictText(t: Trial): string {
  return [t.verdict, t.saturated ? "saturated" : "", t.ended_early ? "ended early" : ""].filter(Boolean).join(", ");
}

export class AdvisePanel {
  readonly el: HTMLElement;
  private presetList: PresetRecord[] = [];
  private preset = h("select", { "data-testid": "advise-preset", "aria-label": "workload preset" }) as HTMLSelectElement;
  private budget = h(
    "select",
    { "data-testid": "advise-budget", "aria-label": "advice budget" },
    h("option", { value: "60" }, "1 minute"),
    h("option", { value: "120" }, "2 minutes"),
    h("option", { value: "300", selected: "" }, "5 minutes"),
    h("option", { value: "600" }, "10 minutes"),
  ) as HTMLSelectElement;
  private about = h("p", { class: "muted small", "data-testid": "advise-objectives" });
  private result = h("div", { class: "advise-result", "data-testid": "advise-result" });
  private task: TaskControl;

  constructor(private deps: AdviseDeps) {
    this.task = new TaskControl({
      idle: "Advise",
      busy: "Cancel",
      buttonId: "advise-start",
      logId: "advise-log",
      title: "Measure what the decision needs on the backends selected on the left, then recommend",
      progressLabel: "advice progress",
      logLines: LOG_LINES,
      inputs: () => [this.preset, this.budget],
      start: () => this.start(),
      cancel: deps.cancel,
      changed: deps.changed,
      error: deps.error,
    });
    this.preset.addEventListener("change", () => this.describe());
    this.el = h(
      "section",
      { class: "card advise", "data-testid": "advise", "aria-label": "advise" },
      h("header", { class: "card-head" }, h("span", {}, "Advise"), h("span", { class: "muted small" }, "from a workload to a choice, measured here: lx advise; uses the backends selected on the left")),
      h("div", { class: "check-bar" }, h("label", { class: "small" }, "Workload ", this.preset), h("label", { class: "small" }, "Budget ", this.budget), this.task.btn, this.task.bar),
      this.about,
      this.task.log,
      this.result,
    );
  }

  get running(): boolean {
    return this.task.running;
  }

  /** Fill the preset picker (once the app is up). */
  async load(): Promise<void> {
    try {
      this.presetList = await this.deps.presets();
      this.preset.replaceChildren(...this.presetList.map((p) => h("option", { value: p.name, selected: p.name === "chat" ? "" : false }, `${p.name} (${p.bound}-bound)`)));
      this.describe();
    } catch (e) {
      this.deps.error(e);
    }
  }

  private describe(): void {
    const p = this.presetList.find((x) => x.name === this.preset.value);
    if (!p) return setText(this.about, "");
    const o = p.objectives;
    const each = [o.ttft_ms != null ? `TTFT ≤ ${o.ttft_ms} ms` : "", o.decode_tps != null ? `decode ≥ ${o.decode_tps} tok/s` : ""].filter(Boolean);
    const judged = p.bound === "throughput" ? "judged by whether its job finishes before the deadline" : `judged by ${each.join(" and ")} for ${pct(o.attainment)} of requests${p.bound === "mixed" ? " (goodput)" : ""}`;
    setText(this.about, `${p.summary}; ${judged}.`);
  }

  private onEvent(e: AdviseEvent): void {
    switch (e.type) {
      case "started":
                this.task.line(`measuring for ${e.preset.name}; the run file: ${e.path}`);
        break;
      case "loading":
        this.task.line(`${backendLabel(e.backend)}: loading…`);
        break;
      case "trial":
        this.task.progress(e.elapsed_s, e.budget_s);
        if (e.stopped) this.task.line(`${backendLabel(e.backend)} · ${e.test}: stopped by the user (not counted)`, "warn");
        else this.task.line(`${backendLabel(e.backend)} · ${e.test}: ${e.slo_met == null ? "nothing completed" : `${pct(e.slo_met)} met the objectives`}${e.errors ? ` · ${e.errors} unfinished` : ""}`);
        break;
      case "finished":
        this.show(e.advice, e.searches, e.deadlines, e.lines, e.stopped);
        this.task.done();
        break;
      case "failed":
        this.task.line(e.message, "warn");
        this.task.done();
        break;
    }
  }

  private show(advice: Advice, searches: SearchRecord[], deadlines: DeadlineRecord[], lines: string[], stopped: boolean): void {
    const [head, ...rest] = lines;
    const confirmed = advice.confirmed;
    this.result.replaceChildren(
      h("h4", { "data-testid": "advise-recommendation", class: confirmed === false ? "warn" : "" }, head + (stopped ? " (stopped: from what was measured)" : "")),
      h("ul", { class: "advise-lines small" }, ...rest.map((l) => h("li", {}, l))),
      ...searches.map((s) => this.searchTable(s)),
      ...deadlines.map((d) => this.deadlineTable(d)),
    );
  }

  private searchTable(s: SearchRecord): HTMLElement {
    const rows = [...s.trials].sort((a, b) => a.value - b.value);
    const cap = s.capacity;
    return h(
      "div",
      { class: "table-scroll", "data-testid": "advise-evidence" },
      h(
        "table",
        { class: "points" },
        h("caption", {}, `${candidate(s.backend, s.policy)}: capacity search by ${s.axis === "rate" ? "arrival rate" : "clients"} (${s.ended})`),
        h("thead", {}, h("tr", {}, ...[s.axis === "rate" ? "req/s" : "clients", "requests", "met", "attainment (90% interval)", "goodput req/min", "TTFT p95 ms", "verdict"].map((c) => h("th", {}, c)))),
        h(
          "tbody",
          {},
          ...rows.map((t) =>
            h(
              "tr",
              { class: t.value === cap ? "advise-capacity" : "" },
              h("td", {}, setting(s.axis, t.value)),
              h("td", {}, String(t.requests)),
              h("td", {}, String(t.met)),
              h("td", {}, `${pct(t.requests ? t.met / t.requests : 0)} (${pct(t.attainment_low)}–${pct(t.attainment_high)})`),
              h("td", {}, t.goodput_rpm.toFixed(1)),
              h("td", {}, t.ttft_p95_ms.toFixed(0)),
              h("td", { class: t.verdict === "holds" ? "" : "warn" }, verdictText(t)),
            ),
          ),
        ),
      ),
    );
  }

  private deadlineTable(d: DeadlineRecord): HTMLElement {
    const finish = (rps: number) => (rps > 0 ? d.requests / rps : Infinity);
    const hms = (s: number) => (!Number.isFinite(s) ? "never" : s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${s.toFixed(1)} s`);
    return h(
      "div",
      { class: "table-scroll", "data-testid": "advise-evidence" },
      h(
        "table",
        { class: "points" },
        h("caption", {}, `${candidate(d.backend, d.policy)}: ${d.requests} requests within ${hms(d.deadline_s)} (${d.ended})`),
        h("thead", {}, h("tr", {}, ...["clients", "requests", "throughput req/s", "tok/s", "finish of the job", "meets"].map((c) => h("th", {}, c)))),
        h(
          "tbody",
          {},
          ...d.trials.map((t) =>
            h(
              "tr",
              { class: t.value === d.concurrency ? "advise-capacity" : "" },
              h("td", {}, String(t.value)),
              h("td", {}, String(t.requests)),
              h("td", {}, t.throughput_rps.toFixed(3)),
              h("td", {}, t.throughput_tps.toFixed(1)),
              h("td", {}, hms(finish(t.throughput_rps))),
              h("td", {}, finish(t.throughput_rps) <= d.deadline_s ? "yes" : "no"),
            ),
          ),
        ),
      ),
    );
  }

  private async start(): Promise<void> {
    const backends = this.deps.backends();
    if (backends.length === 0) throw new Error("select at least one backend on the left to advise on");
    await this.deps.beforeStart();
    this.result.replaceChildren();
    await this.deps.start(this.preset.value, backends, Number(this.budget.value), (e) => this.onEvent(e));
  }
}
