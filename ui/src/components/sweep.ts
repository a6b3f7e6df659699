/**
 * Sweeps: the same engine sweep as `lx sweep`, with a progress bar and cancel. Points appear
 * in the table (and on the curves) as they finish; the run file is the CLI's format.
 */
import { h, setText } from "../lib/dom";
import { ms as fmtMs, num, tps as fmtTps } from "../lib/format";
import type { AppError, Policy, SweepEvent, SweepRequest } from "../ipc/types";
import { POLICIES } from "../ipc/types";
import { backendLabel } from "./charts";

export function parseList(text: string, min: number, max: number): number[] | string {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0) return "give at least one value";
  const out: number[] = [];
  for (const p of parts) {
    const v = Number(p);
    if (!Number.isInteger(v) || v < min || v > max) return `'${p}' is not a whole number from ${min} to ${max}`;
    if (!out.includes(v)) out.push(v);
  }
  return out;
}

export interface SweepHooks {
  backends: () => string[];
  context: () => number;
  start: (req: SweepRequest, onEvent: (e: SweepEvent) => void) => Promise<string>;
  cancel: () => Promise<void>;
  exportCsv: () => Promise<void>;
  onPoint: (e: Extract<SweepEvent, { type: "pointDone" }>) => void;
  error: (e: AppError) => void;
}

export class SweepPanel {
  readonly el: HTMLElement;
  private prompts = h("input", { type: "text", value: "64, 256, 1024", "aria-label": "prompt lengths, comma-separated" }) as HTMLInputElement;
  private conc = h("input", { type: "text", value: "1, 4", "aria-label": "concurrencies, comma-separated" }) as HTMLInputElement;
  private maxTok = h("input", { type: "text", value: "64", "aria-label": "output tokens, comma-separated" }) as HTMLInputElement;
  private requests = h("input", { type: "number", min: 1, max: 10000, value: 8, "aria-label": "measured requests per point" }) as HTMLInputElement;
  private policyBoxes = POLICIES.map((p) => h("input", { type: "checkbox", value: p, checked: p === "continuous" }) as HTMLInputElement);
  private startBtn = h("button", { type: "button", class: "primary", "data-testid": "sweep-start" }, "Run sweep");
  private cancelBtn = h("button", { type: "button", disabled: true, "data-testid": "sweep-cancel" }, "Cancel");
  private csvBtn = h("button", { type: "button", disabled: true }, "Export CSV");
  private bar = h("progress", { max: 1, value: 0, "aria-label": "sweep progress", "data-testid": "sweep-progress" }) as HTMLProgressElement;
  private status = h("div", { class: "muted small", "data-testid": "sweep-status" });
  private table = h("tbody", {});
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
      this.formError,
      h("div", { class: "sweep-actions" }, this.startBtn, this.cancelBtn, this.csvBtn, this.bar),
      this.status,
      h(
        "table",
        { class: "points" },
        h("thead", {}, h("tr", {}, ...["backend", "policy", "prompt", "clients", "out", "TTFT p50", "TTFT p95", "decode p50", "throughput", "errors"].map((c) => h("th", {}, c)))),
        this.table,
      ),
    );
  }

  private async start() {
    const ctx = this.hooks.context();
    const prompts = parseList(this.prompts.value, 1, ctx);
    const conc = parseList(this.conc.value, 1, 256);
    const maxTok = parseList(this.maxTok.value, 1, 4096);
    const policies = this.policyBoxes.filter((b) => b.checked).map((b) => b.value as Policy);
    const requests = Math.round(Number(this.requests.value));
    const problem =
      typeof prompts === "string" ? `Prompt tokens: ${prompts}` : typeof conc === "string" ? `Clients: ${conc}` : typeof maxTok === "string" ? `Output tokens: ${maxTok}` : policies.length === 0 ? "Choose at least one policy" : !(requests >= 1) ? "Requests per point: at least 1" : "";
    setText(this.formError, problem);
    if (problem) return;
    const req: SweepRequest = { backends: this.hooks.backends(), policies, promptTokens: prompts as number[], concurrency: conc as number[], maxTokens: maxTok as number[], requests };
    this.table.replaceChildren();
    this.bar.value = 0;
    this.setRunning(true);
    setText(this.status, "starting…");
    try {
      const path = await this.hooks.start(req, (e) => this.event(e));
      this.el.dataset.runFile = path;
    } catch (e) {
      this.setRunning(false);
      setText(this.status, "");
      this.hooks.error(e as AppError);
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
        setText(this.status, `${e.totalPoints} points, ${num(e.totalRequests)} measured requests · writing ${e.path}`);
        break;
      case "loading":
        setText(this.status, `loading ${backendLabel(e.backend)}…`);
        break;
      case "loaded":
        setText(this.status, `${backendLabel(e.backend)} loaded on ${e.info.device} in ${fmtMs(e.loadMs)}${e.info.cpu_fallback ? ` · warning: ${e.info.cpu_fallback}` : ""}`);
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
            { class: p.errors > 0 ? "has-errors" : "", title: p.errorMessages.join("\n") },
            ...[backendLabel(p.backend), p.policy, String(p.promptTokens), String(p.concurrency), String(p.maxTokens), ok ? fmtMs(p.ttftMs.p50) : "—", ok ? fmtMs(p.ttftMs.p95) : "—", ok ? fmtTps(p.decodeTps.p50) : "—", ok ? fmtTps(p.throughputTps) : "—", String(p.errors)].map((c) => h("td", {}, c)),
          ),
        );
        this.hooks.onPoint(e);
        break;
      }
      case "finished":
        this.setRunning(false);
        this.bar.value = e.stopped ? this.bar.value : 1;
        this.csvBtn.disabled = false;
        setText(this.status, `${e.stopped ? "Cancelled" : "Done"}${e.failedPoints ? ` · ${e.failedPoints} point(s) had errors (hover a row)` : ""} · run file ${e.path}`);
        break;
      case "failed":
        this.setRunning(false);
        setText(this.status, "");
        this.hooks.error({ kind: "sweep", message: e.message });
        break;
    }
  }
}
