/**
 * Speed against context depth: a setting's prefill and decode rates with more and more tokens
 * already in each request's context, per backend, from this app's sweeps with several depths
 * (More options: Depths) and from each saved run opened. Attention reads every cached token,
 * so both fall as the context fills; how fast they fall is each backend's attention.
 */
import type uPlot from "uplot";
import { backendColor, withAlpha } from "../lib/colors";
import { h, setText } from "../lib/dom";
import { align } from "../lib/reduce";
import { depthCurve, type DepthPoint, type LiveStore } from "../lib/store";
import { axes, Chart, line } from "./chart";
import { backendLabel } from "./charts";

export class DepthChart {
  readonly chart: Chart;
  readonly caption: HTMLElement;

  constructor(host: HTMLElement, private store: LiveStore) {
    this.chart = new Chart(host, 210);
    this.caption = h("p", { class: "muted small", "data-testid": "depth-settings" });
  }

  /** Redraw; the number of points drawn (a setting swept at two depths or more). */
  update(): number {
    const curves = new Map<string, DepthPoint[]>();
    for (const p of this.store.allDepthPoints()) curves.set(depthCurve(p), [...(curves.get(depthCurve(p)) ?? []), p]);
    const names = [...curves.keys()].filter((n) => new Set(curves.get(n)!.map((p) => p.depth)).size >= 2).sort();
    const drawn = names.map((n) => curves.get(n)!.sort((a, b) => a.depth - b.depth));
    const series = drawn.flatMap((g) => [
      { x: g.map((p) => p.depth), y: g.map((p) => p.decodeTps) },
      { x: g.map((p) => p.depth), y: g.map((p) => p.prefillTps) },
    ]);
    const settings = new Set(drawn.map((g) => `pp${g[0].promptTokens}+tg${g[0].maxTokens} @ ${g[0].concurrency} client${g[0].concurrency === 1 ? "" : "s"}`));
    setText(this.caption, settings.size ? `Each request's own prompt and output after the depth: ${[...settings].join(" · ")}` : "");
    const [x, ...ys] = align(series);
    this.chart.render({
      sig: names.join(","),
      data: [x, ...ys] as uPlot.AlignedData,
      options: (width, height) => ({
        width,
        height,
        scales: { x: { time: false }, y: { distr: 3, log: 10 } },
        axes: axes("tokens already in the context (depth)", "tok/s (p50)"),
        legend: { live: false },
        series: [
          {},
          ...drawn.flatMap((g) => {
            const { saved, backend, policy } = g[0];
            const setting = settings.size > 1 ? ` · pp${g[0].promptTokens} c${g[0].concurrency}` : "";
            const label = `${saved ? `${saved} · ` : ""}${backendLabel(backend)} · ${policy}${setting}`;
            const color = saved ? withAlpha(backendColor(backend), 0.5) : backendColor(backend);
            return [
              line(`${label} · decode`, color, { width: saved ? 1.2 : 2, points: { show: true, size: 6 } }),
              line(`${label} · prefill`, color, { width: saved ? 1.2 : 2, dash: [6, 4], points: { show: true, size: 6 } }),
            ];
          }),
        ],
      }),
    });
    return drawn.reduce((n, g) => n + g.length, 0);
  }
}
