/**
 * The request timeline: for the last few dozen requests, queue wait, each prefill pass and
 * the decode span (with a tick at each verify pass that accepted drafted tokens), on one
 * time axis, so prefill and decode can be pointed at. Under the disaggregated policy a row
 * has two lanes, the prefill worker's above and the decode worker's below, and the state's
 * transfer is a band slanting from one to the other. SVG (a diagram of spans, not a chart),
 * redrawn a few times a second.
 */
import { backendColor, THEME } from "../lib/colors";
import { h, setText } from "../lib/dom";
import { ms as fmtMs } from "../lib/format";
import type { LiveStore, TimelineRow } from "../lib/store";

const NS = "http://www.w3.org/2000/svg";
const ROWS = 24;
const ROW_H = 12;
const LABEL_W = 86;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export class Timeline {
  readonly el: HTMLElement;
  private svgEl: SVGSVGElement;
  private axisNote = h("span", { class: "muted" });
  rows = 0;

  constructor(private store: LiveStore) {
    this.svgEl = svg("svg", { class: "timeline-svg", role: "img", "aria-label": "per-request timeline: queue, prefill, decode" });
    const legend = h(
      "div",
      { class: "legend" },
      h("span", { class: "swatch queue" }),
      "queue wait ",
      h("span", { class: "swatch prefill" }),
      "prefill (each pass) ",
      h("span", { class: "swatch decode" }),
      "decode ",
      h("span", { class: "swatch verify", title: "a verify pass that accepted drafted tokens (speculative decoding)" }),
      "verify pass ",
      h("span", { class: "swatch transfer", title: "disaggregated: the prefilled state moving from the prefill worker (upper lane) to the decode worker (lower lane)" }),
      "transfer",
    );
    this.el = h("section", { class: "card timeline", "data-testid": "timeline" }, h("header", { class: "card-head" }, h("span", {}, "Request timeline"), legend, this.axisNote), this.svgEl);
  }

  update(wallNow: number): void {
    const now = this.store.sessionNow(wallNow);
    const rows: TimelineRow[] = [...this.store.finished.tail(ROWS), ...this.store.inFlight.values()].sort((a, b) => a.submit - b.submit).slice(-ROWS);
    this.rows = rows.length;
    const width = Math.max(300, this.svgEl.clientWidth || 600);
    const height = ROWS * ROW_H + 18;
    if (rows.length === 0 || now === null) {
      if (this.svgEl.childNodes.length > 0) this.svgEl.replaceChildren();
      setText(this.axisNote, "");
      return;
    }
    const box = `0 0 ${width} ${height}`;
    if (this.svgEl.getAttribute("viewBox") !== box) {
      this.svgEl.setAttribute("viewBox", box);
      this.svgEl.setAttribute("height", String(height));
    }
    this.svgEl.replaceChildren();
    const t0 = rows[0].submit;
    const t1 = Math.max(now, ...rows.map((r) => r.last ?? r.submit));
    const span = Math.max(1, t1 - t0);
    const plotW = width - LABEL_W - 8;
    const X = (t: number) => LABEL_W + ((t - t0) / span) * plotW;
    const titled = <E extends SVGElement>(el: E, title: string) => {
      const t = svg("title", {});
      t.textContent = title;
      el.append(t);
      this.svgEl.append(el);
    };
    // A lane: the whole row, or (two workers) its upper or lower half.
    type Lane = "row" | "prefill" | "decode";
    const laneY = (y: number, lane: Lane): [number, number] => (lane === "row" ? [y + 2, ROW_H - 4] : lane === "prefill" ? [y + 1, ROW_H / 2 - 1] : [y + ROW_H / 2, ROW_H / 2 - 1]);
    const rect = (y: number, a: number, b: number, fill: string, title: string, lane: Lane = "row") => {
      const [top, height] = laneY(y, lane);
      titled(svg("rect", { x: X(a), y: top, width: Math.max(1, X(b) - X(a)), height, fill, rx: 1 }), title);
    };
    let split = false;
    rows.forEach((r, i) => {
      const y = i * ROW_H;
      const label = svg("text", { x: 4, y: y + ROW_H - 2, fill: r.error ? "#f87171" : THEME.axis, "font-size": 10 });
      label.textContent = `#${r.id} ${r.promptTokens}t${r.preview ? " ◆" : ""}`;
      this.svgEl.append(label);
      const end = (t: number | null) => t ?? (r.done ? r.submit : now);
      const admitted = r.admit;
      rect(y, r.submit, admitted ?? end(r.prefill[0]?.start_ms ?? null), THEME.queue, `queue ${fmtMs((admitted ?? now) - r.submit)}`);
      const t = r.transfer;
      split ||= t !== null;
      for (const p of r.prefill) rect(y, p.start_ms, p.end_ms, THEME.prefill, `prefill ${p.tokens} tokens in ${fmtMs(p.end_ms - p.start_ms)}${t ? " (prefill worker)" : ""}`, t ? "prefill" : "row");
      if (t) {
        // At least 3 px wide: a transfer of milliseconds in a minute of timeline stays visible (its title has the figures).
        const [x0, x1] = [X(t.start_ms), Math.max(X(t.end_ms), X(t.start_ms) + 3)];
        const band = svg("polygon", { points: `${x0},${y + 1} ${x1},${y + ROW_H / 2} ${x1},${y + ROW_H - 1} ${x0},${y + ROW_H / 2}`, fill: THEME.transfer, "data-transfer": "" });
        titled(band, `transfer ${(t.bytes / 1e6).toFixed(1)} MB in ${fmtMs(t.end_ms - t.start_ms)}, prefill worker → decode worker`);
      }
      if (r.first !== null) rect(y, r.first, end(r.last), backendColor(r.backend), `decode ${fmtMs(end(r.last) - r.first)}${t ? " (decode worker)" : ""}`, t ? "decode" : "row");
      for (const t of r.verified) {
        const tick = svg("rect", { x: X(t) - 0.75, y, width: 1.5, height: ROW_H, fill: THEME.throughput, "data-verify": "" });
        const title = svg("title", {});
        title.textContent = "verify pass: drafted tokens accepted";
        tick.append(title);
        this.svgEl.append(tick);
      }
    });
    const axis = svg("line", { x1: LABEL_W, x2: width - 8, y1: ROWS * ROW_H + 2, y2: ROWS * ROW_H + 2, stroke: THEME.grid });
    this.svgEl.append(axis);
    setText(this.axisNote, `last ${fmtMs(span)} · ${rows.length} requests${split ? " · two workers: prefill above, decode below" : ""}`);
  }
}
