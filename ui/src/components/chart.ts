/**
 * A uPlot chart that owns its element: sized by its container, rebuilt only when its set of
 * series changes, otherwise fed new data. Every chart can be saved as a PNG.
 */
import uPlot from "uplot";
import { THEME } from "../lib/colors";
import { axis as fmtAxis } from "../lib/format";

export interface ChartSpec {
  /** Identifies the series set: a change rebuilds the chart. */
  sig: string;
  options: (width: number, height: number) => uPlot.Options;
  data: uPlot.AlignedData;
}

export class Chart {
  private u: uPlot | null = null;
  private sig = "";
  private resize: ResizeObserver;
  private last: ChartSpec | null = null;

  constructor(
    readonly host: HTMLElement,
    readonly height: number,
  ) {
    this.resize = new ResizeObserver(() => {
      if (this.u) this.u.setSize({ width: this.width(), height: this.height });
    });
    this.resize.observe(host);
  }

  private width(): number {
    return Math.max(240, Math.floor(this.host.clientWidth));
  }

  render(spec: ChartSpec): void {
    this.last = spec;
    if (!this.u || spec.sig !== this.sig) {
      this.u?.destroy();
      this.u = new uPlot(spec.options(this.width(), this.height), spec.data, this.host);
      this.sig = spec.sig;
    } else {
      this.u.setData(spec.data);
    }
  }

  /** The data drawn last (for tests and exports). */
  data(): uPlot.AlignedData | null {
    return this.last?.data ?? null;
  }

  /** Each series drawn last: its legend label and values (for tests). */
  series(): { label: string; values: (number | null)[] }[] {
    if (!this.u || !this.last) return [];
    return this.u.series.slice(1).map((s, i) => ({ label: String(s.label ?? ""), values: Array.from((this.last!.data[i + 1] ?? []) as ArrayLike<number | null>) }));
  }

  /** The chart as a PNG (plot and axes on the app's background, with a title). */
  async png(title: string): Promise<Uint8Array> {
    if (!this.u) throw new Error("nothing drawn yet");
    const src = this.u.ctx.canvas;
    const pad = 36;
    const out = document.createElement("canvas");
    out.width = src.width;
    out.height = src.height + pad;
    const ctx = out.getContext("2d")!;
    ctx.fillStyle = THEME.bg;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.fillStyle = THEME.text;
    ctx.font = `${Math.round(14 * (window.devicePixelRatio || 1))}px sans-serif`;
    ctx.fillText(title, 12, pad * 0.65);
    ctx.drawImage(src, 0, pad);
    const blob: Blob = await new Promise((res, rej) => out.toBlob((b) => (b ? res(b) : rej(new Error("cannot encode PNG"))), "image/png"));
    return new Uint8Array(await blob.arrayBuffer());
  }
}

/** Axis styling shared by every chart. */
export function axes(xLabel: string, yLabel: string, xValues?: (v: number) => string, yValues?: (v: number) => string): uPlot.Axis[] {
  const common = {
    stroke: THEME.axis,
    grid: { stroke: THEME.grid, width: 1 },
    ticks: { stroke: THEME.grid, width: 1 },
    font: "12px system-ui, sans-serif",
    labelFont: "12px system-ui, sans-serif",
  };
  return [
    { ...common, label: xLabel, values: (_u, vals) => vals.map((v) => (v === null ? "" : (xValues ?? fmtAxis)(v))) },
    { ...common, label: yLabel, size: 56, values: (_u, vals) => vals.map((v) => (v === null ? "" : (yValues ?? fmtAxis)(v))) },
  ];
}

/** A series drawn as dots only. */
export function dots(label: string, color: string, size = 5): uPlot.Series {
  return {
    label,
    stroke: color,
    fill: color,
    paths: () => null,
    points: { show: true, size, stroke: color, fill: color, width: 0 },
  };
}

/** A line series. */
export function line(label: string, color: string, opts: Partial<uPlot.Series> = {}): uPlot.Series {
  return { label, stroke: color, width: 2, spanGaps: true, points: { show: false }, ...opts };
}
