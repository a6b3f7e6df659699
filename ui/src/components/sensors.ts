/**
 * Under the tokens/s chart: the machine's clock and power over the same time, from the
 * engine's sensor readings, with throttling marked where it happened (red dots on the
 * clock) and said while it lasts. A figure this machine cannot read is said to be not
 * available here, never drawn as zero.
 */
import type uPlot from "uplot";
import { THEME } from "../lib/colors";
import { clock, num } from "../lib/format";
import { h, setText } from "../lib/dom";
import { align, reduceMinMax } from "../lib/reduce";
import { describeSensors } from "../lib/sensors";
import type { LiveStore } from "../lib/store";
import { axes, Chart, dots, line } from "./chart";

const fromZero = (_u: uPlot, _min: number | null, max: number | null): uPlot.Range.MinMax => [0, max && max > 0 ? max * 1.15 : 1];

export class SensorsStrip {
  readonly el: HTMLElement;
  readonly chart: Chart;
  private caption: HTMLElement;
  private alert: HTMLElement;

  constructor(private store: LiveStore) {
    const host = h("div", { class: "chart-host" });
    this.caption = h("p", { class: "muted small sensors-caption", "data-testid": "sensors-caption" });
    this.alert = h("p", { class: "sensors-throttle small", role: "status", "data-testid": "sensors-throttle" });
    this.alert.hidden = true;
    this.el = h("div", { class: "sensors", "data-testid": "sensors" }, this.caption, this.alert, host);
    this.chart = new Chart(host, 140);
  }

  /** Redraw; the number of readings drawn. */
  update(): number {
    const readings = this.store.sensors.toArray();
    const words = describeSensors(this.store.sensorsOpened, readings[readings.length - 1]);
    setText(this.caption, words.caption);
    this.caption.title = words.missing.join("\n");
    this.alert.hidden = words.throttling.length === 0;
    setText(this.alert, words.throttling.length ? `Throttling: ${words.throttling.join("; ")}` : "");
    if (readings.length === 0) return 0;
    const buckets = Math.max(100, Math.floor(this.chart.host.clientWidth / 2));
    const t = readings.map((r) => r.at_ms / 1000);
    const mhz = readings.map((r) => r.gpu_mhz ?? r.cpu_mhz);
    const which = readings.some((r) => r.gpu_mhz != null) ? "GPU" : "CPU";
    const throttled = readings.map((r, i) => (r.throttling.length ? mhz[i] : null));
    const watts = readings.map((r) => r.power_w);
    const hasPower = watts.some((w) => w != null);
    const series = [reduceMinMax(t, mhz, buckets), { x: t, y: throttled }, ...(hasPower ? [reduceMinMax(t, watts, buckets)] : [])];
    const [x, ...ys] = align(series);
    this.chart.render({
      sig: `${which}|${hasPower}`,
      data: [x, ...ys] as uPlot.AlignedData,
      options: (width, height) => {
        const [xAxis, yAxis] = axes("time since Go live", "MHz", clock, (v) => num(v));
        return {
          width,
          height,
          // From zero, so a fall reads in proportion (a flat clock is a flat line, not noise).
          scales: { x: { time: false }, mhz: { range: fromZero }, w: { range: fromZero } },
          // The same time axis as the chart above, without its label again.
          axes: [{ ...xAxis, label: undefined, labelSize: 0 }, { ...yAxis, scale: "mhz" }, ...(hasPower ? [{ ...yAxis, scale: "w", side: 1, label: "W", grid: { show: false } }] : [])],
          legend: { live: false },
          cursor: { drag: { x: true, y: false } },
          series: [
            {},
            { ...line(`${which} clock`, THEME.clock, { width: 1.5 }), scale: "mhz" },
            { ...dots("throttling", THEME.ceiling, 6), scale: "mhz" },
            ...(hasPower ? [{ ...line("power", THEME.power, { width: 1.5 }), scale: "w" }] : []),
          ],
        };
      },
    });
    return readings.length;
  }
}
