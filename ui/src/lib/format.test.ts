import { describe, expect, it } from "vitest";
import { axis, bytes, clock, ms, num, params, tps } from "./format";
import { clampTokens, positionOf, STEPS, tokensAt } from "./scale";

describe("format", () => {
  it("formats numbers without Intl", () => {
    expect(num(1234567)).toBe("1,234,567");
    expect(num(-1234.5, 1)).toBe("-1,234.5");
    expect(num(null)).toBe("—");
    expect(ms(4.25)).toBe("4.3 ms");
    expect(ms(420)).toBe("420 ms");
    expect(ms(1240)).toBe("1.24 s");
    expect(ms(125_000)).toBe("2 min 05 s");
    expect(tps(38.24)).toBe("38.2 tok/s");
    expect(tps(1204.4)).toBe("1,204 tok/s");
    expect(bytes(253_113_024)).toBe("253.1 MB");
    expect(bytes(24 * 1024 ** 3, true)).toBe("24.0 GiB");
    expect(params(268_098_176)).toBe("268M");
    expect(clock(125)).toBe("2:05");
    expect(clock(42)).toBe("42 s");
    expect(axis(1500)).toBe("1.5k");
    expect(axis(0.25)).toBe("0.25");
  });
});

describe("log prompt slider", () => {
  it("spans 16 to the maximum and round-trips", () => {
    expect(tokensAt(0, 32704)).toBe(16);
    expect(tokensAt(STEPS, 32704)).toBe(32704);
    for (const t of [16, 64, 256, 1000, 4096, 32704]) {
      const back = tokensAt(positionOf(t, 32704), 32704);
      expect(Math.abs(back - t) / t).toBeLessThan(0.01);
    }
  });

  it("is monotonic", () => {
    let prev = 0;
    for (let p = 0; p <= STEPS; p++) {
      const t = tokensAt(p, 8192);
      expect(t).toBeGreaterThanOrEqual(prev);
      prev = t;
    }
  });

  it("clamps typed values", () => {
    expect(clampTokens(0, 100)).toBe(1);
    expect(clampTokens(1e9, 100)).toBe(100);
    expect(clampTokens(NaN, 100)).toBe(1);
    expect(clampTokens(12.6, 100)).toBe(13);
  });
});
