/**
 * Chart data reduction: a chart `width` pixels wide cannot show more than a few points per
 * pixel, so long series are cut into buckets along x and each bucket keeps its first, its
 * lowest, its highest and its last point. Spikes (a slow request, a stall) survive; the
 * shape is the same at any zoom; uPlot draws a few thousand points instead of 100,000.
 */
export interface Reduced {
  x: number[];
  y: (number | null)[];
}

/**
 * Reduce `(x, y)` (x non-decreasing) to at most ~4 points per bucket, `buckets` buckets.
 * Series already short enough come back unchanged (copied). Null y values are skipped.
 */
export function reduceMinMax(x: ArrayLike<number>, y: ArrayLike<number | null>, buckets: number): Reduced {
  const n = x.length;
  if (n !== y.length) throw new RangeError("x and y must have the same length");
  if (n <= buckets * 4 || buckets < 1) {
    return { x: Array.from(x), y: Array.from(y) };
  }
  const x0 = x[0];
  const x1 = x[n - 1];
  const span = x1 - x0 || 1;
  const out: Reduced = { x: [], y: [] };
  let i = 0;
  for (let b = 0; b < buckets && i < n; b++) {
    const end = b === buckets - 1 ? Infinity : x0 + ((b + 1) * span) / buckets;
    let first = -1;
    let last = -1;
    let lo = -1;
    let hi = -1;
    for (; i < n && x[i] < end; i++) {
      const v = y[i];
      if (v === null || Number.isNaN(v)) continue;
      if (first < 0) first = i;
      last = i;
      if (lo < 0 || v < (y[lo] as number)) lo = i;
      if (hi < 0 || v > (y[hi] as number)) hi = i;
    }
    if (first < 0) continue;
    const keep = Array.from(new Set([first, lo, hi, last])).sort((a, b) => a - b);
    for (const k of keep) {
      out.x.push(x[k]);
      out.y.push(y[k]);
    }
  }
  return out;
}

/**
 * Merge several series with their own x values into uPlot's aligned form: one sorted x array
 * and, per series, y values at those x (null where the series has no point).
 */
export function align(series: { x: ArrayLike<number>; y: ArrayLike<number | null> }[]): [number[], ...(number | null)[][]] {
  const xs = new Set<number>();
  for (const s of series) for (let i = 0; i < s.x.length; i++) xs.add(s.x[i]);
  const x = Array.from(xs).sort((a, b) => a - b);
  const index = new Map<number, number>();
  x.forEach((v, i) => index.set(v, i));
  const ys = series.map((s) => {
    const col: (number | null)[] = new Array(x.length).fill(null);
    for (let i = 0; i < s.x.length; i++) col[index.get(s.x[i])!] = s.y[i];
    return col;
  });
  return [x, ...ys];
}

/**
 * A step series sampled at `at`: for each x, the value of the last (t, v) sample with
 * t ≤ x (null before the first). For lines that hold their value until the next reading.
 */
export function carryForward(at: ArrayLike<number>, samples: { t: number; v: number | null }[]): (number | null)[] {
  const out: (number | null)[] = new Array(at.length).fill(null);
  let j = -1;
  for (let i = 0; i < at.length; i++) {
    while (j + 1 < samples.length && samples[j + 1].t <= at[i]) j++;
    out[i] = j >= 0 ? samples[j].v : null;
  }
  return out;
}
