/** Problems the user should see (a crashed worker, a failed load or fetch, a refused
 * setting), each with what can be done about it. */
import { h } from "../lib/dom";
import type { Problem } from "../lib/store";

export class Banner {
  readonly el = h("section", { class: "banner", role: "status", "aria-live": "polite", "data-testid": "problems" });
  private sig = "";

  constructor(
    private onRetry: () => void,
    private onDismiss: (p: Problem) => void,
  ) {}

  update(problems: Problem[]): void {
    const sig = JSON.stringify(problems);
    if (sig === this.sig) return;
    this.sig = sig;
    this.el.hidden = problems.length === 0;
    this.el.replaceChildren(
      ...problems.map((p) => {
        const retry = p.retry ? h("button", { type: "button", class: "primary small", "data-testid": "retry" }, "Retry") : null;
        retry?.addEventListener("click", () => this.onRetry());
        const dismiss = h("button", { type: "button", class: "small", "aria-label": "dismiss" }, "Dismiss");
        dismiss.addEventListener("click", () => this.onDismiss(p));
        return h("div", { class: `problem ${p.kind}`, "data-kind": p.kind }, h("span", { class: "problem-text" }, p.message), retry, dismiss);
      }),
    );
  }
}
