/**
 * "Tune this machine": runs `lx tune`'s trials in the app and says whether the backends run
 * with this machine's tuned settings or their own defaults.
 */
import { h, setText } from "../lib/dom";
import type { TuneEvent, TuneStatus } from "../ipc/types";
import { backendLabel } from "./charts";

export interface TuneDeps {
  status: () => Promise<TuneStatus>;
  start: (budgetS: number, onEvent: (e: TuneEvent) => void) => Promise<void>;
  cancel: () => Promise<void>;
  /** Called before tuning starts (live mode is stopped: the two would compete). */
  beforeStart: () => Promise<void>;
  /** Tuning started or ended: other controls may change state. */
  changed: () => void;
  error: (e: unknown) => void;
}

/** Lines of the trial log kept on screen. */
const LOG_LINES = 14;

export class TunePanel {
  readonly el: HTMLElement;
  running = false;
  private statusEl = h("div", { class: "tune-status", "data-testid": "tune-status", "aria-live": "polite" });
  private budget = h(
    "select",
    { "data-testid": "tune-budget", "aria-label": "tuning budget" },
    h("option", { value: "60" }, "1 minute"),
    h("option", { value: "120" }, "2 minutes"),
    h("option", { value: "300", selected: "" }, "5 minutes"),
  ) as HTMLSelectElement;
  private btn = h("button", { type: "button", class: "small", "data-testid": "tune-start", title: "Measure each backend's settings on this machine and keep the best for every later run" }, "Tune this machine");
  private bar = h("progress", { max: 1, value: 0, hidden: "", "aria-label": "tuning progress" }) as HTMLProgressElement;
  private log = h("ol", { class: "tune-log muted small", "data-testid": "tune-log" });
  private current: HTMLElement | null = null;

  constructor(private deps: TuneDeps) {
    this.btn.addEventListener("click", () => void (this.running ? this.stop() : this.run()));
    this.el = h(
      "div",
      { class: "tune", "data-testid": "tune" },
      h("h3", {}, "Tuning"),
      this.statusEl,
      h("div", { class: "check-bar" }, this.btn, h("label", { class: "small" }, "Budget ", this.budget), this.bar),
      this.log,
    );
  }

  /** Ask whether the open model is tuned here, and say so. */
  async refresh(): Promise<void> {
    try {
      this.show(await this.deps.status());
    } catch (e) {
      setText(this.statusEl, "");
      this.deps.error(e);
    }
  }

  private show(s: TuneStatus): void {
    this.statusEl.dataset.tuned = String(s.tuned);
    if (!s.tuned) {
      this.statusEl.replaceChildren(h("p", { class: "warn" }, `Untuned: ${s.why ?? "no profile"}.`));
      return;
    }
    this.statusEl.replaceChildren(h("p", {}, "Tuned on this machine for this model. Sweeps use the idle choice; live mode the one measured under a competing load:"), h("ul", {}, ...s.backends.map((b) => h("li", {}, b))));
  }

  private line(text: string, cls = ""): HTMLElement {
    const li = h("li", { class: cls }, text);
    this.log.append(li);
    while (this.log.children.length > LOG_LINES) this.log.firstElementChild?.remove();
    return li;
  }

  private onEvent(e: TuneEvent): void {
    switch (e.type) {
      case "trial":
        this.bar.max = e.budgetS;
        this.bar.value = Math.min(e.elapsedS, e.budgetS);
        this.current = this.line(`${backendLabel(e.backend)} · ${e.settings}${e.contended ? " · competing load" : ""}: measuring…`);
        break;
      case "measured":
        if (this.current) setText(this.current, this.current.textContent!.replace("measuring…", e.text));
        this.current = null;
        break;
      case "note":
        this.line(`${backendLabel(e.backend)}: ${e.note}`, "warn");
        break;
      case "finished":
        this.line("saved: later sweeps and live mode use it");
        this.show(e.status);
        this.done();
        break;
      case "failed":
        this.line(e.message, "warn");
        this.done();
        break;
    }
  }

  private async run(): Promise<void> {
    await this.deps.beforeStart();
    this.log.replaceChildren();
    this.running = true;
    this.btn.textContent = "Cancel tuning";
    this.btn.classList.add("danger");
    this.budget.disabled = true;
    this.bar.hidden = false;
    this.bar.value = 0;
    this.deps.changed();
    try {
      await this.deps.start(Number(this.budget.value), (e) => this.onEvent(e));
    } catch (e) {
      this.deps.error(e);
      this.done();
    }
  }

  private async stop(): Promise<void> {
    this.btn.disabled = true;
    try {
      await this.deps.cancel();
    } catch (e) {
      this.deps.error(e);
    } finally {
      this.btn.disabled = false;
    }
  }

  private done(): void {
    this.running = false;
    this.btn.textContent = "Tune this machine";
    this.btn.classList.remove("danger");
    this.budget.disabled = false;
    this.bar.hidden = true;
    this.deps.changed();
  }
}
