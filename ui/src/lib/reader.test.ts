import { describe, expect, it } from "vitest";
import { Reader, readerPositionAt } from "./reader";

/** Drive a Reader frame by frame (16 ms) over arrival times; return its position at `end`. */
function simulate(arrivals: number[], pace: number, end: number): number {
  const r = new Reader(pace);
  for (let t = 0; t <= end; t += 16) {
    const available = arrivals.filter((a) => a <= t).length;
    r.advance(t, available);
  }
  return r.position;
}

describe("Reader", () => {
  it("reads at its pace when tokens come faster", () => {
    // 40 tok/s for 64 tokens: all there by 1.6 s; the reader at 4.5 tok/s is far behind.
    const arrivals = Array.from({ length: 64 }, (_, i) => 100 + i * 25);
    const pos = simulate(arrivals, 4.5, 2100);
    expect(pos).toBeCloseTo(2 * 4.5, 0); // two seconds after the first token
    expect(pos).toBeCloseTo(readerPositionAt(arrivals, 4.5, 2100), 0);
  });

  it("waits for tokens when they come slower than it reads", () => {
    // 2 tok/s: the reader can never be more than the tokens that have arrived.
    const arrivals = Array.from({ length: 10 }, (_, i) => i * 500);
    const r = new Reader(4.5);
    let waited = false;
    for (let t = 0; t <= 5000; t += 16) {
      const available = arrivals.filter((a) => a <= t).length;
      r.advance(t, available);
      expect(r.position).toBeLessThanOrEqual(available);
      if (r.waiting(available)) waited = true;
    }
    expect(waited).toBe(true);
    expect(r.position).toBeCloseTo(10, 5);
  });

  it("keeps its place when the pace changes", () => {
    const r = new Reader(4);
    r.advance(0, 100);
    r.advance(1000, 100);
    expect(r.position).toBeCloseTo(4, 5);
    r.setPace(5);
    r.advance(2000, 100);
    expect(r.position).toBeCloseTo(9, 5);
    expect(r.secondsLeft(100)).toBeCloseTo(91 / 5, 5);
  });

  it("does not start before the first token", () => {
    const r = new Reader();
    r.advance(0, 0);
    r.advance(5000, 0);
    expect(r.position).toBe(0);
    r.advance(5000, 1);
    r.advance(5100, 1);
    expect(r.position).toBeCloseTo(0.45, 5);
  });

  it("refuses a pace that is not a rate", () => {
    expect(() => new Reader(0)).toThrow(RangeError);
    expect(() => new Reader(NaN)).toThrow(RangeError);
  });
});

describe("readerPositionAt", () => {
  it("matches the frame-by-frame reader when tokens are sparse", () => {
    const arrivals = [0, 100, 1500, 1600, 3000];
    for (const t of [50, 400, 1550, 2000, 3100, 4000]) {
      // Within one 16 ms frame's worth of reading (0.07 tokens).
      expect(Math.abs(readerPositionAt(arrivals, 4.5, t) - simulate(arrivals, 4.5, t))).toBeLessThan(0.1);
    }
  });

  it("is 0 before the first token and n after the last is read", () => {
    expect(readerPositionAt([1000], 4.5, 500)).toBe(0);
    expect(readerPositionAt([0, 10], 5, 10_000)).toBe(2);
  });
});
