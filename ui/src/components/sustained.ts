/**
 * A sustained run in live mode: switched on, the setting measured longest is read as
 * `lx bench --sustained` reads its load (the engine cuts its requests into trials by when
 * they ended and judges the fall), and its decode rate is drawn over time with the line a
 * trial must stay above not to count as fallen. Asked for every 10 s while on and live, so
 * it costs the measurement nothing the rest of the time.
 */
import type uPlot from "uplot";
import type { Sustained } from "../ipc/types";
import { backendColor, THEME } from "../lib/colors";
import { clock, num } from "../lib/format";
import { h, setText } from "../lib/dom";
import { axes, Chart, line } from "./chart";

const POLL_MS = 10_000;

export class SustainedPanel {
  readonly el: HTMLElement;
  readonly chart: Chart;
  readonly toggle = h("input", { type: "checkbox", "data-testid": "sustained-toggle" }) as HTMLInputElement;
  private verdict = h("p", { class: "small", "data-testid": "sustained-verdict", "aria-live": "polite" });
  private body: HTMLElement;
  private timer: number | null = null;
  /** What was drawn last, for tests. */
  last: Sustained | null = null;

  constructor(
    private fetch: () => Promise<Sustained | null>,
    private running: () => boolean,
  ) {
    const host = h("div", { class: "chart-host" });
    this.chart = new Chart(host, 180);
    this.body = h("div", { class: "sustained-body", hidden: true }, this.verdict, host);
    this.toggle.addEventListener("change", () => this.switched());
    this.el = h(
      "section",
      { class: "card sustained", "data-testid": "sustained" },
      h(
        "header",
        { class: "card-head" },
        h("label", { class: "sustained-switch" }, this.toggle, " Sustained run"),
        h("span", { class: "muted small" }, "keep the load on for minutes: does the decode rate hold, or fall as the machine heats?"),
      ),
      this.body,
    );
  }

  private switched() {
    this.body.hidden = !this.toggle.checked;
    if (this.timer !== null) window.clearInterval(this.timer);
    this.timer = null;
    if (!this.toggle.checked) return;
    setText(this.verdict, "waiting for the first trial to end…");
    void this.refresh();
    this.timer = window.setInterval(() => {
      if (this.running()) void this.refresh();
    }, POLL_MS);
  }

  /** Ask for the sustained view now and draw it. */
  async refresh(): Promise<Sustained | null> {
    let s: Sustained | null;
    try {
      s = await this.fetch();
    } catch {
      s = null;
    }
    if (!s) return null;
    this.last = s;
    setText(this.verdict, `${s.backend}, ${s.shape.name}: ${s.verdict}.`);
    const x = s.trials.map((t) => t.end_s);
    const rate = s.trials.map((t) => t.decode_tps);
    const floor = s.trials.map(() => s.fallen_below_tps);
    const colour = backendColor(s.backend);
    const under = s.fallen_below_tps !== null && s.first_minute_tps ? `first minute less ${num((1 - s.fallen_below_tps / s.first_minute_tps) * 100)}%` : "first minute";
    this.chart.render({
      sig: s.backend,
      data: [x, rate, floor] as uPlot.AlignedData,
      options: (width, height) => ({
        width,
        height,
        scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, max && max > 0 ? max * 1.15 : 1] } },
        axes: axes("time since the setting began", "decode tok/s", clock, (v) => num(v, 0)),
        legend: { live: false },
        series: [{}, { ...line(`${s.backend} decode, each ${num(s.trial_s)} s trial`, colour), points: { show: true, size: 5 } }, line(under, THEME.ceiling, { dash: [6, 4], width: 1.5 })],
      }),
    });
    return s;
  }
}
