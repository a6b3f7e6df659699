/**
 * A long task the user starts and cancels with one button (tuning this machine, advice):
 * the button's two labels, a progress bar, a short log of what happened, and the inputs that
 * stay fixed while it runs. The panel that owns it says what starting and cancelling do.
 */
import { h } from "../lib/dom";

export interface TaskOptions {
  /** The button's label at rest and while the task runs. */
  idle: string;
  busy: string;
  /** Test ids of the button and the log; the progress bar's accessible name. */
  buttonId: string;
  logId: string;
  title: string;
  progressLabel: string;
  /** Lines of the log kept on screen. */
  logLines: number;
  /** Inputs disabled while the task runs. */
  inputs: () => (HTMLInputElement | HTMLSelectElement)[];
  /** Starts the task; resolves once it has started (its events end it with `done`). */
  start: () => Promise<void>;
  cancel: () => Promise<void>;
  /** The task started or ended: other controls may change state. */
  changed: () => void;
  error: (e: unknown) => void;
}

export class TaskControl {
  running = false;
  readonly btn: HTMLButtonElement;
  readonly bar = h("progress", { max: 1, value: 0, hidden: "" }) as HTMLProgressElement;
  readonly log: HTMLOListElement;

  constructor(private o: TaskOptions) {
    this.btn = h("button", { type: "button", class: "small", "data-testid": o.buttonId, title: o.title }, o.idle) as HTMLButtonElement;
    this.bar.setAttribute("aria-label", o.progressLabel);
    this.log = h("ol", { class: "tune-log muted small", "data-testid": o.logId, "aria-live": "polite" }) as HTMLOListElement;
    this.btn.addEventListener("click", () => void (this.running ? this.stop() : this.run()));
  }

  /** Adds a line to the log (the oldest go), and returns it. */
  line(text: string, cls = ""): HTMLElement {
    const li = h("li", { class: cls }, text);
    this.log.append(li);
    while (this.log.children.length > this.o.logLines) this.log.firstElementChild?.remove();
    return li;
  }

  /** The bar at `elapsed` of `total`. */
  progress(elapsed: number, total: number): void {
    this.bar.max = total;
    this.bar.value = Math.min(elapsed, total);
  }

  private async run(): Promise<void> {
    this.log.replaceChildren();
    this.running = true;
    this.btn.textContent = this.o.busy;
    this.btn.classList.add("danger");
    for (const i of this.o.inputs()) i.disabled = true;
    this.bar.hidden = false;
    this.bar.value = 0;
    this.o.changed();
    try {
      await this.o.start();
    } catch (e) {
      this.o.error(e);
      this.done();
    }
  }

  private async stop(): Promise<void> {
    this.btn.disabled = true;
    try {
      await this.o.cancel();
    } catch (e) {
      this.o.error(e);
    } finally {
      this.btn.disabled = false;
    }
  }

  /** The task ended (finished, failed or cancelled). */
  done(): void {
    this.running = false;
    this.btn.textContent = this.o.idle;
    this.btn.classList.remove("danger");
    for (const i of this.o.inputs()) i.disabled = false;
    this.bar.hidden = true;
    this.o.changed();
  }
}
