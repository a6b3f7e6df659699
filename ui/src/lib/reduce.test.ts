import { describe, expect, it } from "vitest";
import { align, carryForward, reduceMinMax } from "./reduce";

describe("reduceMinMax", () => {
  it("leaves short series alone", () => {
    const r = reduceMinMax([1, 2, 3], [5, null, 7], 100);
    expect(r).toEqual({ x: [1, 2, 3], y: [5, null, 7] });
  });

  it("bounds the point count and keeps the extremes", () => {
    const n = 100_000;
    const x = Array.from({ length: n }, (_, i) => i);
    const y = x.map((i) => Math.sin(i / 1000));
    y[54_321] = 50; // one spike
    y[12_345] = -50; // one dip
    const r = reduceMinMax(x, y, 500);
    expect(r.x.length).toBeLessThanOrEqual(500 * 4);
    expect(r.x.length).toBeGreaterThan(500);
    expect(Math.max(...(r.y as number[]))).toBe(50);
    expect(Math.min(...(r.y as number[]))).toBe(-50);
    expect(r.x[0]).toBe(0);
    expect(r.x[r.x.length - 1]).toBe(n - 1);
    // x stays sorted.
    for (let i = 1; i < r.x.length; i++) expect(r.x[i]).toBeGreaterThanOrEqual(r.x[i - 1]);
  });

  it("skips nulls and empty buckets", () => {
    const x = Array.from({ length: 1000 }, (_, i) => i);
    const y = x.map((i) => (i < 500 ? null : i));
    const r = reduceMinMax(x, y, 10);
    expect(r.y.every((v) => v !== null)).toBe(true);
    expect(r.x[0]).toBe(500);
  });

  it("refuses mismatched arrays", () => {
    expect(() => reduceMinMax([1, 2], [1], 10)).toThrow(RangeError);
  });
});

describe("align", () => {
  it("merges x values and fills gaps with null", () => {
    const [x, a, b] = align([
      { x: [1, 3], y: [10, 30] },
      { x: [2, 3], y: [20, 31] },
    ]);
    expect(x).toEqual([1, 2, 3]);
    expect(a).toEqual([10, null, 30]);
    expect(b).toEqual([null, 20, 31]);
  });
});

describe("carryForward", () => {
  it("holds each sample until the next", () => {
    const v = carryForward([0, 1, 2, 3, 4], [
      { t: 1, v: 10 },
      { t: 3, v: 30 },
    ]);
    expect(v).toEqual([null, 10, 10, 30, 30]);
  });
});
