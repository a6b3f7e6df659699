/**
 * "Fidelity: is the faster setting computing the same model?": `lx fidelity` in the app. Each
 * backend and setting of the build scores a fixed text against llama.cpp with an f16 KV
 * cache; the chart puts each one's divergence against its decode speed, so a setting that is
 * faster because it computes something else shows as high as it is far right.
 */
import type uPlot from "uplot";
import { h, setText } from "../lib/dom";
import { num, tps as fmtTps } from "../lib/format";
import { backendColor, THEME, withAlpha } from "../lib/colors";
import { fidelityPoints, klText, klTick, type FidelityPoint, type FidelityPoints } from "../lib/fidelity";
import type { Candidate, FidelityEvent, FidelityRun } from "../ipc/types";
import { axes, Chart } from "./chart";
import { backendLabel } from "./charts";
import { TaskControl } from "./task";

export interface FidelityDeps {
  /** Backends of this build to measure (servers left out: they cannot score a text). */
  backends: () => string[];
  start: (backends: string[], chunks: number, onEvent: (e: FidelityEvent) => void) => Promise<string>;
  cancel: () => Promise<void>;
  /** Called before the run starts (live mode is stopped: it would share the cores). */
  beforeStart: () => Promise<void>;
  /** A candidate was measured: the readout may show it beside the setting that runs. */
  measured: (candidates: Candidate[]) => void;
  changed: () => void;
  error: (e: unknown) => void;
}

const COLUMNS = ["backend", "setting", "against", "mean KL", "p99 KL", "top-1 agreement", "perplexity", "decode", "peak MiB"];
const CHART_HEIGHT = 340;
/** Gap between a point's edge and its label, and between stacked labels (CSS px). */
const LABEL_GAP = 5;
const LABEL_LINE = 15;
/** The y axis starts this factor under the "identical" floor (a third of a decade). */
const FLOOR_MARGIN = 2;

export class FidelityPanel {
  readonly el: HTMLElement;
  readonly chart: Chart;
  /** What the chart drew last (for tests). */
  drawn: FidelityPoints | null = null;
  candidates: Candidate[] = [];
  private chunks = h(
    "select",
    { "data-testid": "fidelity-chunks", "aria-label": "text scored" },
    h("option", { value: "1" }, "1 chunk (about 250 positions)"),
    h("option", { value: "2", selected: "" }, "2 chunks (about 500)"),
    h("option", { value: "8" }, "8 chunks (about 2,000)"),
  ) as HTMLSelectElement;
  private status = h("p", { class: "small", "data-testid": "fidelity-status", "aria-live": "polite" });
  private empty = h("div", { class: "chart-empty" }, "No candidates yet: press Measure fidelity.");
  private leftOut = h("ul", { class: "muted small fidelity-left", "data-testid": "fidelity-left-out" });
  private sizes = h("p", { class: "muted small" });
  private reference = h("p", { class: "muted small", "data-testid": "fidelity-reference" });
  private rows = h("tbody", { "data-testid": "fidelity-rows" });
  private task: TaskControl;

  constructor(private deps: FidelityDeps) {
    this.task = new TaskControl({
      idle: "Measure fidelity",
      busy: "Cancel",
      buttonId: "fidelity-start",
      logId: "fidelity-log",
      title: "Score a fixed text with every backend and setting of this build against llama.cpp with an f16 KV cache, beside each one's decode speed",
      progressLabel: "fidelity progress",
      logLines: 4,
      inputs: () => [this.chunks],
      start: async () => {
        await deps.beforeStart();
        this.candidates = [];
        this.redraw();
        setText(this.reference, "");
        setText(this.status, "starting…");
        await deps.start(deps.backends(), Number(this.chunks.value), (e) => this.onEvent(e));
      },
      cancel: deps.cancel,
      changed: deps.changed,
      error: (e) => {
        setText(this.status, "");
        deps.error(e);
      },
    });
    const host = h("div", { class: "chart-host" });
    this.chart = new Chart(host, CHART_HEIGHT);
    this.el = h(
      "section",
      { class: "card fidelity", "data-testid": "fidelity", "aria-label": "fidelity" },
      h(
        "header",
        { class: "card-head" },
        h("span", {}, "Fidelity: is the faster setting computing the same model?"),
        h("span", { class: "muted small" }, "lx fidelity on the open model, for the backends selected on the left: each setting scores the same text as llama.cpp with an f16 KV cache"),
      ),
      h("div", { class: "check-bar" }, this.task.btn, h("label", { class: "small" }, "Text scored ", this.chunks), this.task.bar),
      this.status,
      h(
        "div",
        { class: "chart fidelity-chart", "data-testid": "fidelity-chart", role: "img", "aria-label": "decode speed against mean KL divergence, one point per backend and setting" },
        h("div", { class: "chart-body" }, host, this.empty),
      ),
      h(
        "p",
        { class: "muted small" },
        "Right is faster; up is further from the reference (mean KL divergence per token, log scale; the bottom line is 0: identical). Filled: against the reference. Hollow: speculative decoding, against the same backend without drafts.",
      ),
      this.sizes,
      this.leftOut,
      h("div", { class: "table-scroll" }, h("table", { class: "points fidelity-table" }, h("thead", {}, h("tr", {}, ...COLUMNS.map((c) => h("th", { scope: "col" }, c)))), this.rows)),
      this.reference,
    );
  }

  get running(): boolean {
    return this.task.running;
  }

  private onEvent(e: FidelityEvent): void {
    switch (e.type) {
      case "status":
        this.task.progress(e.done, e.of);
        setText(this.status, `Measuring ${e.what} (${e.done + 1} of ${e.of})…`);
        break;
      case "measured":
        this.candidates.push(e.candidate);
        this.redraw();
        this.deps.measured(this.candidates);
        break;
      case "finished":
        this.candidates = e.run.candidates;
        this.redraw();
        this.deps.measured(this.candidates);
        this.showReference(e.run);
        setText(this.status, `${e.run.stopped ? "Cancelled: what was measured is kept" : "Done"}. Saved to ${e.path}`);
        this.task.done();
        break;
      case "failed":
        setText(this.status, `Not measured: ${e.message}`);
        this.task.done();
        break;
    }
  }

  private showReference(run: FidelityRun): void {
    const r = run.reference;
    const t = run.text;
    setText(
      this.reference,
      `Reference: ${backendLabel(r.backend)} ${r.version}, f16 KV cache, on ${r.device} · ${r.model.name} · text "${t.name}": ${t.chunks} chunk${t.chunks === 1 ? "" : "s"} of ${run.context} tokens, ${num(t.positions)} positions scored · perplexity ${num(r.perplexity, 3)}`,
    );
  }

  private redraw(): void {
    const drawn = fidelityPoints(this.candidates);
    this.drawn = drawn;
    this.empty.hidden = drawn.points.length > 0;
    if (drawn.points.length > 0) this.chart.render(chartSpec(drawn));
    const mibs = drawn.points.map((p) => p.peakMib).filter((m): m is number => m !== null);
    setText(this.sizes, mibs.length ? `Point size: peak memory of the worker while it decoded, ${num(Math.min(...mibs))} to ${num(Math.max(...mibs))} MiB.` : "");
    this.leftOut.replaceChildren(...drawn.left.map((l) => h("li", {}, `Not on the chart: ${backendLabel(l.candidate.backend)} · ${l.candidate.setting}: ${l.why}`)));
    this.rows.replaceChildren(...this.candidates.map(row));
  }
}

function row(c: Candidate): HTMLTableRowElement {
  const against = c.against === "plain" ? "same backend, no drafts" : "reference";
  const head = [h("td", {}, backendLabel(c.backend)), h("td", {}, c.setting), h("td", {}, against)];
  const f = c.fidelity;
  if (c.error || !f) {
    return h("tr", { class: "has-errors", "data-setting": c.setting }, ...head, h("td", { colspan: COLUMNS.length - head.length, class: "fidelity-error" }, `not measured: ${c.error ?? "no divergence came back"}`));
  }
  const cells = [klText(f.mean_kl), klText(f.p99_kl), `${num(100 * f.top1_agreement, 2)}%`, num(f.perplexity, 3), fmtTps(c.decode_tok_s), num(c.peak_rss_mib)];
  return h("tr", { "data-setting": c.setting }, ...head, ...cells.map((v, i) => h("td", { "data-col": COLUMNS[i + head.length] }, v)));
}

/** One series per candidate, so that the legend names each; x ascends with decode speed. */
function chartSpec(d: FidelityPoints): { sig: string; options: (w: number, hgt: number) => uPlot.Options; data: uPlot.AlignedData } {
  const xs = d.points.map((p) => p.tps);
  const data: uPlot.AlignedData = [xs, ...d.points.map((_, i) => xs.map((_, j) => (i === j ? d.points[i].y : null)))];
  const several = new Set(d.points.map((p) => p.backend)).size > 1;
  const name = (p: FidelityPoint) => (several ? `${backendLabel(p.backend)} · ${p.setting}` : p.setting);
  const decades: number[] = [];
  for (let v = d.floor; v <= d.top * 1.0001; v *= 10) decades.push(v);
  const [yAxisX, yAxisY] = axes("decode tok/s (one sequence)", "mean KL (nats)", undefined, (v) => klTick(v, d.floor));
  return {
    sig: `${d.points.map((p) => `${p.backend}/${p.setting}/${p.size.toFixed(1)}`).join("|")}|${d.floor}|${d.top}`,
    data,
    options: (width, height) => ({
      width,
      height,
      scales: {
        x: {
          time: false,
          range: (_u, mn, mx) => {
            const pad = Math.max((mx - mn) * 0.15, mx * 0.08, 0.5);
            return [Math.max(0, mn - pad), mx + pad];
          },
        },
        // Half a decade under the floor, so that a point of KL 0 is drawn whole above the axis.
        y: { distr: 3, range: () => [d.floor / FLOOR_MARGIN, d.top] },
      },
      axes: [yAxisX, { ...yAxisY, size: 96, splits: () => decades }],
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      series: [
        {},
        ...d.points.map((p) => {
          const color = backendColor(p.backend);
          return {
            label: `${name(p)}${p.againstPlain ? " (vs no drafts)" : ""}`,
            stroke: color,
            fill: p.againstPlain ? undefined : withAlpha(color, 0.25),
            paths: () => null,
            points: { show: true, size: p.size, stroke: color, fill: p.againstPlain ? THEME.bg : withAlpha(color, 0.85), width: p.againstPlain ? 2.5 : 1 },
          } satisfies uPlot.Series;
        }),
      ],
      hooks: { draw: [(u: uPlot) => drawLabels(u, d.points, name)] },
    }),
  };
}

/** Each point's name beside it, moved up or down where it would cover another's. */
function drawLabels(u: uPlot, points: FidelityPoint[], name: (p: FidelityPoint) => string): void {
  const dpr = window.devicePixelRatio || 1;
  const ctx = u.ctx;
  ctx.save();
  ctx.font = `${Math.round(12 * dpr)}px system-ui, sans-serif`;
  // uPlot leaves the context as its axes last set it (right-aligned): labels start at x0.
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  const placed: { x0: number; x1: number; y0: number; y1: number }[] = [];
  const right = u.bbox.left + u.bbox.width;
  for (const p of points) {
    const cx = u.valToPos(p.tps, "x", true);
    const cy = u.valToPos(p.y, "y", true);
    const text = `${name(p)} · ${klText(p.kl)}`;
    const w = ctx.measureText(text).width;
    const off = (p.size / 2 + LABEL_GAP) * dpr;
    const leftSide = cx + off + w > right;
    const x0 = leftSide ? cx - off - w : cx + off;
    const line = LABEL_LINE * dpr;
    let y = cy;
    for (let k = 1; k < 12 && placed.some((r) => x0 < r.x1 && x0 + w > r.x0 && y - line / 2 < r.y1 && y + line / 2 > r.y0); k++) {
      y = cy + (k % 2 === 1 ? -1 : 1) * Math.ceil(k / 2) * line;
    }
    placed.push({ x0, x1: x0 + w, y0: y - line / 2, y1: y + line / 2 });
    ctx.fillStyle = THEME.text;
    ctx.fillText(text, x0, y);
  }
  ctx.restore();
}
