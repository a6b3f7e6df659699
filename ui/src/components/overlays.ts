/**
 * Saved runs to compare with: "Open run…" reads a run file (from this machine or another)
 * through the app, and each one opened is listed with its machine, backends and model, and
 * a button that takes it off the charts. The charts draw them (see charts.ts); a file that
 * cannot be read is refused with the reason.
 */
import * as api from "../ipc/api";
import { h } from "../lib/dom";
import type { LiveStore } from "../lib/store";

export class Overlays {
  readonly openBtn: HTMLButtonElement;
  readonly el: HTMLElement;
  private list: HTMLElement;
  private drawn = "";

  constructor(
    private store: LiveStore,
    private problem: (e: unknown) => void,
  ) {
    this.openBtn = h("button", { type: "button", title: "Overlay a saved run (this machine's or another's) on the charts", "data-testid": "open-run" }, "Open run…");
    this.openBtn.addEventListener("click", () => void this.pick());
    this.list = h("ul", { class: "overlay-list", "aria-label": "saved runs on the charts" });
    this.el = h("section", { class: "overlays", "data-testid": "overlays", hidden: true }, h("span", { class: "muted small" }, "Compared with saved runs (faint lines on the charts):"), this.list);
  }

  private async pick() {
    try {
      const path = await api.pickRunFile();
      if (path) await this.openAt(path);
    } catch (e) {
      this.problem(e);
    }
  }

  /** Open the run file at `path` (what the dialog's choice leads to). */
  async openAt(path: string): Promise<void> {
    const run = await api.runOpen(path);
    this.store.addOverlay(run);
    this.update();
  }

  update(): void {
    const sig = this.store.overlays.map((o) => o.path).join("\n");
    if (sig === this.drawn) return;
    this.drawn = sig;
    this.el.hidden = this.store.overlays.length === 0;
    this.list.replaceChildren(
      ...this.store.overlays.map((o) => {
        const close = h("button", { type: "button", class: "small ghost", "aria-label": `take ${o.label} off the charts`, title: o.path }, "×");
        close.addEventListener("click", () => {
          this.store.removeOverlay(o.path);
          this.update();
        });
        return h("li", { class: "overlay", title: o.path }, h("strong", {}, o.label), ` · ${o.backends.join("; ")} · ${o.model} · ${o.points.length} points `, close);
      }),
    );
  }
}
