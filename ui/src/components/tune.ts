/**
 * "Tune this machine": runs `lx tune`'s trials in the app and says whether the backends run
 * with this machine's tuned settings or their own defaults.
 */
import { h, setText } from "../lib/dom";
import type { TuneEvent, TuneStatus } from "../ipc/types";
import { backendLabel } from "./charts";
import { TaskControl } from "./task";

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
  private statusEl = h("div", { class: "tune-status", "data-testid": "tune-status", "aria-live": "polite" });
  private budget = h(
    "select",
    { "data-testid": "tune-budget", "aria-label": "tuning budget" },
    h("option", { value: "60" }, "1 minute"),
    h("option", { value: "120" }, "2 minutes"),
    h("option", { value: "300", selected: "" }, "5 minutes"),
  ) as HTMLSelectElement;
  private task: TaskControl;
  private current: HTMLElement | null = null;

  constructor(private deps: TuneDeps) {
    this.task = new TaskControl({
      idle: "Tune this machine",
      busy: "Cancel tuning",
      buttonId: "tune-start",
      logId: "tune-log",
      title: "Measure each backend's settings on this machine and keep the best for every later run",
      progressLabel: "tuning progress",
      logLines: LOG_LINES,
      inputs: () => [this.budget],
      start: async () => {
        await deps.beforeStart();
        await deps.start(Number(this.budget.value), (e) => this.onEvent(e));
      },
      cancel: deps.cancel,
      changed: deps.changed,
      error: deps.error,
    });
    this.el = h(
      "div",
      { class: "tune", "data-testid": "tune" },
      h("h3", {}, "Tuning"),
      this.statusEl,
      h("div", { class: "check-bar" }, this.task.btn, h("label", { class: "small" }, "Budget ", this.budget), this.task.bar),
      this.task.log,
    );
  }

  get running(): boolean {
    return this.task.running;
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

  private onEvent(e: TuneEvent): void {
    switch (e.type) {
      case "trial":
        this.task.progress(e.elapsed_s, e.budget_s);
        this.current = this.task.line(`${backendLabel(e.backend)} · ${e.settings}${e.contended ? " · competing load" : ""}: measuring…`);
        break;
      case "measured":
        if (this.current) setText(this.current, this.current.textContent!.replace("measuring…", e.text));
        this.current = null;
        break;
      case "note":
        this.task.line(`${backendLabel(e.backend)}: ${e.note}`, "warn");
        break;
      case "finished":
        this.task.line("saved: later sweeps and live mode use it");
        this.show(e.status);
        this.task.done();
        break;
      case "failed":
        this.task.line(e.message, "warn");
        this.task.done();
        break;
    }
  }
}
