/**
 * The live charts: TTFT over time, tokens/s over time, and the two curves that build up as
 * the user explores (TTFT against prompt length, tok/s against concurrency). All data comes
 * from the store; nothing is computed here but what the chart shows where.
 */
import type uPlot from "uplot";
import { backendColor, POLICY_DASH, THEME, withAlpha } from "../lib/colors";
import { clock, ms as fmtMs } from "../lib/format";
import { READING_BAND } from "../lib/reader";
import { align, carryForward, reduceMinMax } from "../lib/reduce";
import type { DonePoint, LiveStore } from "../lib/store";
import { curvePoint } from "../lib/store";
import type { Distribution, PointCeiling, PointFigures, Policy, SettingSummary } from "../ipc/types";
import { axes, Chart, dots, line } from "./chart";

import { backendLabel } from "../lib/backends";

export { backendLabel };

/** The setting the curves are drawn at. */
export interface CurrentSetting {
  prompt_tokens: number;
  concurrency: number;
  max_tokens: number;
  chunk_tokens: number;
}

/** What a chart drew, for end-to-end tests: one entry per point of the request series. */
export interface DrawnPoint {
  backend: string;
  x: number;
  y: number;
  promptTokens: number;
  concurrency: number;
  settled: boolean;
}

function byBackend(points: DonePoint[], y: (p: DonePoint) => number | null, x: (p: DonePoint) => number | null) {
  const groups = new Map<string, { x: number[]; y: number[]; pts: DrawnPoint[] }>();
  for (const p of points) {
    const yv = y(p);
    const xv = x(p);
    if (yv === null || xv === null || !(yv > 0) || p.error) continue;
    let g = groups.get(p.backend);
    if (!g) groups.set(p.backend, (g = { x: [], y: [], pts: [] }));
    g.x.push(xv);
    g.y.push(yv);
    g.pts.push({ backend: p.backend, x: xv, y: yv, promptTokens: p.promptTokens, concurrency: p.concurrency, settled: p.settled });
  }
  // Completion order is almost time order; sort to be sure (uPlot needs ascending x).
  for (const g of groups.values()) {
    const idx = g.x.map((_, i) => i).sort((a, b) => g.x[a] - g.x[b]);
    g.x = idx.map((i) => g.x[i]);
    g.y = idx.map((i) => g.y[i]);
    g.pts = idx.map((i) => g.pts[i]);
  }
  return groups;
}

const sigOf = (names: string[]) => names.join(",");

/** A time chart's request dots: each backend's series, reduced to about one bucket per 2 px
 * of the chart's width, and what was drawn (for end-to-end tests). */
function requestDots(chart: Chart, points: DonePoint[], y: (p: DonePoint) => number | null, x: (p: DonePoint) => number | null) {
  const groups = byBackend(points, y, x);
  const names = [...groups.keys()].sort();
  const buckets = Math.max(100, Math.floor(chart.host.clientWidth / 2));
  const series = names.map((n) => reduceMinMax(groups.get(n)!.x, groups.get(n)!.y, buckets));
  return { names, buckets, series, drawn: names.flatMap((n) => groups.get(n)!.pts) };
}

/** What every chart here shares: a log scale up (latencies and rates span decades) and
 * across either seconds since Go live (zoom by drag) or a setting on a log-2 scale (prompt
 * tokens, clients: they grow in doublings). */
function frame(width: number, height: number, across: "time" | "log2", xLabel: string, yLabel: string, yValue?: (v: number) => string): Pick<uPlot.Options, "width" | "height" | "scales" | "axes" | "legend" | "cursor"> {
  const time = across === "time";
  return {
    width,
    height,
    scales: { x: time ? { time: false } : { time: false, distr: 3, log: 2 }, y: { distr: 3, log: 10 } },
    axes: axes(xLabel, yLabel, time ? clock : undefined, yValue),
    legend: { live: false },
    ...(time ? { cursor: { drag: { x: true, y: false } } } : {}),
  };
}

/** Shade the horizontal band lo..hi (y units) across the plot. */
function shadeBand(u: uPlot, lo: number, hi: number, fill: string) {
  const top = u.valToPos(hi, "y", true);
  const bottom = u.valToPos(lo, "y", true);
  if (!Number.isFinite(top) || !Number.isFinite(bottom)) return;
  const { left, width, top: plotTop, height } = u.bbox;
  const y0 = Math.max(plotTop, Math.min(top, bottom));
  const y1 = Math.min(plotTop + height, Math.max(top, bottom));
  if (y1 <= y0) return;
  u.ctx.save();
  u.ctx.fillStyle = fill;
  u.ctx.fillRect(left, y0, width, y1 - y0);
  u.ctx.restore();
}

/** What saved runs measured at the controls' setting (the live one while live), as flat
 * reference lines on a time chart: one per run and backend that has a point there. */
function savedAtSetting(store: LiveStore, s: CurrentSetting & { policy: Policy }, value: (p: PointFigures) => number) {
  return store.overlayPointsAt(s).map(({ run, point }) => ({ label: `saved: ${run.label} · ${backendLabel(point.backend)}`, backend: point.backend, value: value(point) }));
}

const savedLine = (label: string, backend: string) => line(label, withAlpha(backendColor(backend), 0.6), { dash: [10, 4, 2, 4], width: 1.5 });

/** TTFT over time: a dot per request (colour = backend), the p50 line and p95 band of the
 * setting in force, and the dashed 1 s "feels instant" line. */
export class TtftChart {
  readonly chart: Chart;
  drawn: DrawnPoint[] = [];

  constructor(
    host: HTMLElement,
    private store: LiveStore,
    private current: () => CurrentSetting & { policy: Policy },
  ) {
    this.chart = new Chart(host, 230);
  }

  update(): number {
    const { names, series, drawn } = requestDots(this.chart, this.store.done.toArray(), (p) => p.ttftMs, (p) => p.firstAt);
    // Ticks without a p50 (a new setting with nothing settled yet) break the line: the
    // previous setting's percentiles must not be drawn as if they were this one's.
    const ticks = this.store.ticks.toArray();
    const tickX = ticks.map((t) => t.at_ms / 1000);
    const [x, ...cols] = align([...series, { x: tickX, y: tickX.map(() => null) }]);
    const p50 = carryForward(x, ticks.map((t) => ({ t: t.at_ms / 1000, v: t.ttft_p50_ms })));
    const p95 = carryForward(x, ticks.map((t) => ({ t: t.at_ms / 1000, v: t.ttft_p95_ms })));
    const instant = x.map(() => 1000);
    const saved = savedAtSetting(this.store, this.current(), (p) => p.ttft_ms.p50);
    const data = [x, ...cols.slice(0, names.length), p50, p95, instant, ...saved.map((r) => x.map(() => r.value))] as uPlot.AlignedData;
    this.drawn = drawn;
    const k = names.length;
    this.chart.render({
      sig: sigOf([...names, ...saved.map((r) => r.label)]),
      data,
      options: (width, height) => ({
        ...frame(width, height, "time", "time since Go live", "TTFT", (v) => fmtMs(v)),
        series: [
          {},
          ...names.map((n) => dots(backendLabel(n), backendColor(n), 5)),
          line("p50 (this setting)", THEME.p50, { width: 1.5, spanGaps: false }),
          line("p95", withAlpha("#e2e8f0", 0.35), { width: 1, spanGaps: false }),
          line("1 s: feels instant", THEME.instant, { dash: [6, 5], width: 1.5 }),
          ...saved.map((r) => savedLine(`${r.label} p50`, r.backend)),
        ],
        bands: [{ series: [k + 2, k + 1], fill: THEME.p95Band }],
      }),
    });
    return this.drawn.length;
  }
}

/** Tokens/s over time: per-request decode tok/s (dots), aggregate throughput (line), and the
 * 4-5 tok/s human reading band. */
export class TpsChart {
  readonly chart: Chart;
  drawn: DrawnPoint[] = [];

  constructor(
    host: HTMLElement,
    private store: LiveStore,
    private current: () => CurrentSetting & { policy: Policy },
  ) {
    this.chart = new Chart(host, 230);
  }

  update(): number {
    const { names, buckets, series, drawn } = requestDots(this.chart, this.store.done.toArray(), (p) => p.decodeTps, (p) => p.doneAt);
    const ticks = this.store.ticks.toArray().filter((t) => t.throughput_tps !== null && t.throughput_tps > 0);
    const thr = reduceMinMax(ticks.map((t) => t.at_ms / 1000), ticks.map((t) => t.throughput_tps), buckets);
    const [x, ...cols] = align([...series, thr]);
    const pace = x.map(() => (READING_BAND[0] + READING_BAND[1]) / 2);
    const saved = savedAtSetting(this.store, this.current(), (p) => p.throughput_tps);
    const data = [x, ...cols, pace, ...saved.map((r) => x.map(() => r.value))] as uPlot.AlignedData;
    this.drawn = drawn;
    this.chart.render({
      sig: sigOf([...names, ...saved.map((r) => r.label)]),
      data,
      options: (width, height) => ({
        ...frame(width, height, "time", "time since Go live", "tokens/s"),
        series: [
          {},
          ...names.map((n) => dots(`${backendLabel(n)} decode (per request)`, backendColor(n), 4)),
          line("throughput (all clients)", THEME.throughput, { width: 2 }),
          line("human reading pace (band 4-5 tok/s)", THEME.readingLine, { width: 1, dash: [3, 3] }),
          ...saved.map((r) => savedLine(`${r.label} throughput`, r.backend)),
        ],
        // The 4-5 tok/s band is shaded under everything else.
        hooks: { drawClear: [(u: uPlot) => shadeBand(u, READING_BAND[0], READING_BAND[1], THEME.reading)] },
      }),
    });
    return this.drawn.length;
  }
}

interface CurvePoint {
  x: number;
  dist: Distribution;
  throughput: number;
  /** The machine's ceiling at this setting (sweep points measured with a probe). */
  ceiling: PointCeiling | null;
}

/** The settings a curve is drawn at; `chunkTokens` is null for a saved run's point (its
 * file keeps the chunk size per run, not per point). */
type CurveKey = { prompt_tokens: number; concurrency: number; max_tokens: number; chunk_tokens: number | null; policy: Policy };

/** Summaries, sweep points and saved runs' points by backend+policy (and saved run), at the
 * settings the curve holds fixed. */
function curves(store: LiveStore, keep: (k: CurveKey) => boolean, xOf: (k: { prompt_tokens: number; concurrency: number }) => number, yDist: "ttft_ms" | "decode_tps") {
  const groups = new Map<string, Map<number, CurvePoint>>();
  const add = (backend: string, policy: Policy, x: number, dist: Distribution, throughput: number, ceiling: PointCeiling | null, saved = "") => {
    const g = `${backend}|${policy}|${saved}`;
    let m = groups.get(g);
    if (!m) groups.set(g, (m = new Map()));
    m.set(x, { x, dist, throughput, ceiling: ceiling ?? m.get(x)?.ceiling ?? null });
  };
  for (const { key, point: p } of store.sweepPoints.values()) {
    if (p.requests > 0 && keep(key)) add(p.backend, p.policy, xOf(p), p[yDist], p.throughput_tps, p.ceiling);
  }
  // Live summaries win over sweep points of the same setting (they are newer).
  for (const s of store.summaries.values() as Iterable<SettingSummary>) {
    if (s.requests > 0 && keep({ ...s.key })) add(s.key.backend, s.key.policy, xOf(s.key), s[yDist], s.throughput_tps, null);
  }
  // Saved runs: their own curves, labelled by machine. Their ceilings are their machine's,
  // not this one's: no ceiling line from them.
  for (const run of store.overlays) {
    for (const p of run.points) {
      if (p.requests > 0 && curvePoint(p) && keep({ ...p, chunk_tokens: null })) add(p.backend, p.policy, xOf(p), p[yDist], p.throughput_tps, null, run.label);
    }
  }
  const names = [...groups.keys()].sort();
  return names.map((n) => {
    const pts = [...groups.get(n)!.values()].sort((a, b) => a.x - b.x);
    const [backend, policy, saved] = n.split("|");
    return { name: n, backend, policy, saved, pts };
  });
}

/** A curve's legend label and style: this session's in its backend's colour, a saved run's
 * fainter and thinner, named by its machine. */
function curveStyle(s: { backend: string; policy: string; saved: string }, what: string, width: number): uPlot.Series {
  const label = `${s.saved ? `${s.saved} · ` : ""}${backendLabel(s.backend)} · ${s.policy}${what}`;
  const color = s.saved ? withAlpha(backendColor(s.backend), 0.5) : backendColor(s.backend);
  return line(label, color, { dash: POLICY_DASH[s.policy] ?? [], width: s.saved ? width * 0.6 : width, points: { show: true, size: s.saved ? 4 : 6 } });
}

/** One line per device whose ceiling the curves' points carry, through their x values: the
 * same setting on the same device has one ceiling, whichever backend measured it. */
function ceilingLines(cs: { pts: CurvePoint[] }[], value: (c: PointCeiling) => number) {
  const byDevice = new Map<string, Map<number, number>>();
  for (const s of cs) {
    for (const p of s.pts) {
      if (!p.ceiling) continue;
      let m = byDevice.get(p.ceiling.device);
      if (!m) byDevice.set(p.ceiling.device, (m = new Map()));
      m.set(p.x, value(p.ceiling));
    }
  }
  return [...byDevice.entries()].map(([device, m]) => {
    const x = [...m.keys()].sort((a, b) => a - b);
    return { device, x, y: x.map((v) => m.get(v)!) };
  });
}

const ceilingLine = (label: string) => line(label, THEME.ceiling, { dash: [4, 4], width: 1.5, points: { show: true, size: 4 } });

/** TTFT (p50) against prompt length, one line per backend and policy, at the current
 * concurrency and output length. */
export class TtftCurve {
  readonly chart: Chart;

  constructor(host: HTMLElement, private store: LiveStore, private current: () => CurrentSetting) {
    this.chart = new Chart(host, 210);
  }

  update(): number {
    const c = this.current();
    const cs = curves(this.store, (k) => k.concurrency === c.concurrency && k.max_tokens === c.max_tokens && (k.policy !== "chunked" || k.chunk_tokens === null || k.chunk_tokens === c.chunk_tokens), (k) => k.prompt_tokens, "ttft_ms");
    const floors = ceilingLines(cs, (c) => c.least_ttft_ms);
    const [x, ...ys] = align([...cs.map((s) => ({ x: s.pts.map((p) => p.x), y: s.pts.map((p) => p.dist.p50) })), ...floors]);
    this.chart.render({
      sig: sigOf([...cs.map((s) => s.name), ...floors.map((f) => `floor ${f.device}`)]),
      data: [x, ...ys] as uPlot.AlignedData,
      options: (width, height) => ({
        ...frame(width, height, "log2", `prompt tokens (at ${c.concurrency} client${c.concurrency === 1 ? "" : "s"}, ${c.max_tokens} output tokens)`, "TTFT p50", (v) => fmtMs(v)),
        series: [{}, ...cs.map((s) => curveStyle(s, "", 2)), ...floors.map((f) => ceilingLine(`least possible TTFT · ${f.device}`))],
      }),
    });
    return x.length;
  }
}

/** Aggregate throughput (solid) and per-request decode tok/s p50 (thin) against
 * concurrency, per backend and policy, at the current prompt and output lengths. */
export class TpsCurve {
  readonly chart: Chart;

  constructor(host: HTMLElement, private store: LiveStore, private current: () => CurrentSetting) {
    this.chart = new Chart(host, 210);
  }

  update(): number {
    const c = this.current();
    const cs = curves(this.store, (k) => k.prompt_tokens === c.prompt_tokens && k.max_tokens === c.max_tokens && (k.policy !== "chunked" || k.chunk_tokens === null || k.chunk_tokens === c.chunk_tokens), (k) => k.concurrency, "decode_tps");
    const series = cs.flatMap((s) => [
      { x: s.pts.map((p) => p.x), y: s.pts.map((p) => p.throughput) },
      { x: s.pts.map((p) => p.x), y: s.pts.map((p) => p.dist.p50) },
    ]);
    const ceilings = ceilingLines(cs, (c) => c.throughput_tps);
    const [x, ...ys] = align([...series, ...ceilings]);
    this.chart.render({
      sig: sigOf([...cs.map((s) => s.name), ...ceilings.map((c) => `ceiling ${c.device}`)]),
      data: [x, ...ys] as uPlot.AlignedData,
      options: (width, height) => ({
        ...frame(width, height, "log2", `concurrent clients (at ${c.prompt_tokens}-token prompts)`, "tokens/s"),
        series: [
          {},
          ...cs.flatMap((s) => [
            curveStyle(s, ": throughput", 2.5),
            line(`per request`, withAlpha(backendColor(s.backend), s.saved ? 0.35 : 0.6), { dash: POLICY_DASH[s.policy] ?? [], width: 1, points: { show: true, size: 4 } }),
          ]),
          ...ceilings.map((c) => ceilingLine(`throughput ceiling · ${c.device}`)),
        ],
      }),
    });
    return x.length;
  }
}

