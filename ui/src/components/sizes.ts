/**
 * Decode against model size: one request alone on each model swept in this app (pick a
 * model, run a sweep: the chart builds up) and in each saved run opened, against the
 * weight bytes one decode step reads, with the memory ceiling (bandwidth ÷ bytes per
 * token) of each device they ran on dashed through them. A shape-only model is marked
 * synthetic.
 */
import type uPlot from "uplot";
import { backendColor, THEME, withAlpha } from "../lib/colors";
import { num } from "../lib/format";
import { h, setText } from "../lib/dom";
import { align } from "../lib/reduce";
import type { LiveStore, SizePoint } from "../lib/store";
import { axes, Chart, line } from "./chart";
import { backendLabel } from "./charts";

export class SizeChart {
  readonly chart: Chart;
  readonly caption: HTMLElement;

  constructor(host: HTMLElement, private store: LiveStore) {
    this.chart = new Chart(host, 210);
    this.caption = h("p", { class: "muted small", "data-testid": "sizes-models" });
  }

  /** Redraw; the number of points drawn. */
  update(): number {
    const pts = this.store.allSizePoints();
    const groups = new Map<string, SizePoint[]>();
    for (const p of pts) {
      const key = `${p.saved}|${p.backend}|${p.policy}`;
      groups.set(key, [...(groups.get(key) ?? []), p]);
    }
    const names = [...groups.keys()].sort();
    const mb = (p: SizePoint) => p.weightBytes / 1e6;
    const series = names.map((n) => {
      const g = groups.get(n)!.sort((a, b) => a.weightBytes - b.weightBytes);
      return { x: g.map(mb), y: g.map((p) => p.decodeTps) };
    });
    const limits = [...this.store.limits.values()].sort((a, b) => a.device.localeCompare(b.device));
    const xs = [...new Set(pts.map(mb))].sort((a, b) => a - b);
    const ceilings = limits.map((l) => ({ x: xs, y: xs.map((x) => l.memory_bytes_per_s / (x * 1e6)) }));
    const [x, ...ys] = align([...series, ...ceilings]);
    const models = new Map(pts.map((p) => [p.model, p]));
    setText(this.caption, models.size ? `Models: ${[...models.values()].sort((a, b) => a.weightBytes - b.weightBytes).map((p) => `${p.model}${p.synthetic ? " (synthetic: timings only)" : ""} ${num(mb(p))} MB a token`).join(" · ")}` : "");
    this.chart.render({
      sig: [...names, ...limits.map((l) => `ceiling ${l.device}`)].join(","),
      data: [x, ...ys] as uPlot.AlignedData,
      options: (width, height) => ({
        width,
        height,
        scales: { x: { time: false, distr: 3, log: 10 }, y: { distr: 3, log: 10 } },
        axes: axes("weight bytes read per token (MB)", "decode tok/s (1 client)"),
        legend: { live: false },
        series: [
          {},
          ...names.map((n) => {
            const [saved, backend, policy] = n.split("|");
            const label = `${saved ? `${saved} · ` : ""}${backendLabel(backend)} · ${policy}`;
            return line(label, saved ? withAlpha(backendColor(backend), 0.5) : backendColor(backend), { width: saved ? 1.2 : 2, points: { show: true, size: 7 } });
          }),
          ...limits.map((l, i) => line(`memory ceiling · ${l.device}`, THEME.ceiling, { dash: i ? [1, 3] : [4, 4], width: 1.5 })),
        ],
      }),
    });
    return pts.length;
  }
}
