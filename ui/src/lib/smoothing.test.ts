import { describe, expect, it } from "vitest";
import { Smoothed, WindowRate } from "./smoothing";

describe("WindowRate", () => {
  it("reads a steady stream's rate", () => {
    const r = new WindowRate(1000);
    // 40 events a second for 3 s.
    for (let t = 0; t < 3000; t += 25) r.push(t);
    expect(r.rate(2990)).toBeCloseTo(40, 0);
  });

  it("does not spike on the first events of a stream", () => {
    const r = new WindowRate(1000);
    r.push(0);
    r.push(1);
    // Two events 1 ms apart are not 2000/s: the span is at least 500 ms.
    expect(r.rate(1)).toBe(4);
  });

  it("forgets what left the window", () => {
    const r = new WindowRate(1000);
    for (let t = 0; t < 1000; t += 10) r.push(t);
    expect(r.rate(999)).toBeCloseTo(100, 0);
    expect(r.rate(5000)).toBe(0);
  });

  it("counts batched events", () => {
    const r = new WindowRate(500);
    r.push(0, 10);
    r.push(250, 10);
    expect(r.rate(500)).toBe(20); // 10 at t=250 within (0, 500]; t=0 is out
  });

  it("refuses windows under 500 ms", () => {
    expect(() => new WindowRate(100)).toThrow(RangeError);
  });

  it("is null before any event", () => {
    expect(new WindowRate().rate(10)).toBeNull();
  });
});

describe("Smoothed", () => {
  it("moves toward new values with its time constant", () => {
    const s = new Smoothed(500);
    expect(s.update(0, 10)).toBe(10);
    const v = s.update(500, 20); // one time constant: 63% of the way
    expect(v).toBeCloseTo(10 + 10 * (1 - Math.exp(-1)), 5);
    expect(s.update(500, 20)).toBeCloseTo(v, 10); // no time passed, no change
  });
});
