/**
 * A lesson's drawings, as SVG: the shapes an audience can predict (a sketch per figure) and
 * the measured figures beside them, in the same frame so the two read alike. Drawn from
 * zero, so a flat line means "the same" and a rise's height is the ratio. Line widths and
 * text sizes come from CSS, so presentation mode can thicken them.
 */
import type { Trend } from "../ipc/types";

const NS = "http://www.w3.org/2000/svg";
const W = 320;
const H = 160;
const PAD = { left: 16, right: 16, top: 26, bottom: 30 };
/** How far in from the plot's edges the first and last points sit (room for their labels). */
const INSET = 52;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, ...children: (Node | string)[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

/** Where a sketch's line starts and ends, as a share of the plot's height. */
const TREND_Y: Record<Trend, [number, number]> = { up: [0.25, 0.85], flat: [0.55, 0.55], down: [0.85, 0.25] };

export const TREND_WORDS: Record<Trend, string> = { up: "rises", flat: "stays level", down: "falls" };

/** One measured figure: its name, unit and the value at each of its points (null: not yet). */
export interface Drawn {
  label: string;
  unit: string;
  points: { name: string; value: number | null }[];
}

/** A panel: its title as HTML (it wraps, and grows with the page's type) over the drawing. */
function frame(title: string, kind: string): [HTMLElement, SVGSVGElement] {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: `lesson-svg ${kind}`, role: "img", "aria-label": title });
  root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "axis" }));
  const fig = document.createElement("figure");
  fig.className = `lesson-fig ${kind}`;
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  fig.append(caption, root);
  return [fig, root];
}

const xAt = (i: number, n: number) => PAD.left + INSET + (n <= 1 ? 0 : (i * (W - PAD.left - PAD.right - 2 * INSET)) / (n - 1));
const yAt = (share: number) => H - PAD.bottom - share * (H - PAD.top - PAD.bottom);

/** A predicted shape: one small panel per figure, the figure's name above its line. */
export function sketch(trends: Trend[], figures: string[]): HTMLElement[] {
  return trends.map((t, i) => {
    const [fig, root] = frame(`${figures[i] ?? ""} ${TREND_WORDS[t]}`, "sketch");
    const [a, b] = TREND_Y[t];
    root.append(svg("polyline", { points: `${xAt(0, 2)},${yAt(a)} ${xAt(1, 2)},${yAt(b)}`, class: "line" }));
    for (const [j, s] of [a, b].entries()) root.append(svg("circle", { cx: xAt(j, 2), cy: yAt(s), r: 5, class: "dot" }));
    return fig;
  });
}

function short(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** Measured figures, one panel each: a dot and its value at every settled point. */
export function measured(figures: Drawn[]): HTMLElement[] {
  return figures.map((f) => {
    const [fig, root] = frame(`${f.label} (${f.unit})`, "measured");
    const n = f.points.length;
    const top = Math.max(0, ...f.points.map((p) => p.value ?? 0)) * 1.15 || 1;
    const at = f.points.map((p, i) => (p.value === null ? null : ([xAt(i, n), yAt(p.value / top)] as const)));
    const known = at.filter((p): p is readonly [number, number] => p !== null);
    if (known.length > 1) root.append(svg("polyline", { points: known.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "), class: "line" }));
    f.points.forEach((p, i) => {
      const x = xAt(i, n);
      root.append(svg("text", { x, y: H - PAD.bottom + 18, class: "tick", "text-anchor": "middle" }, p.name));
      const xy = at[i];
      if (!xy || p.value === null) {
        root.append(svg("text", { x, y: yAt(0.1), class: "pending", "text-anchor": "middle" }, "…"));
        return;
      }
      root.append(svg("circle", { cx: xy[0], cy: xy[1], r: 6, class: "dot" }, svg("title", {}, `${p.name}: ${short(p.value)} ${f.unit}`)));
      root.append(svg("text", { x: xy[0], y: xy[1] - 12, class: "value", "text-anchor": "middle" }, short(p.value)));
    });
    return fig;
  });
}
