import { describe, expect, it } from "vitest";
import type { Candidate } from "../ipc/types";
import { fidelityPoints, klFloor, liveCandidate, klOnAxis, klText, klTick, pointSize, SIZE_MAX, SIZE_MIN } from "./fidelity";

function candidate(setting: string, meanKl: number | null, tps: number | null, mib: number | null, extra: Partial<Candidate> = {}): Candidate {
  return {
    backend: "llama",
    setting,
    device: "CPU",
    against: "reference",
    fidelity: meanKl === null ? undefined : { mean_kl: meanKl, p99_kl: meanKl * 5, max_kl: meanKl * 9, top1_agreement: 0.99, perplexity: 20, positions: 254 },
    decode_tok_s: tps ?? undefined,
    peak_rss_mib: mib ?? undefined,
    ...extra,
  } as Candidate;
}

describe("klFloor and klOnAxis", () => {
  it("puts the floor a decade below the smallest KL above 0", () => {
    expect(klFloor([0, 3e-4, 0.02])).toBeCloseTo(1e-5, 12);
    expect(klFloor([0.5])).toBeCloseTo(0.01, 12);
  });
  it("has a floor when every KL is 0", () => {
    expect(klFloor([0, 0])).toBe(1e-6);
    expect(klFloor([])).toBe(1e-6);
  });
  it("draws 0 (and a rounding under 0) at the floor, the rest where they are", () => {
    expect(klOnAxis(0, 1e-5)).toBe(1e-5);
    expect(klOnAxis(-1e-12, 1e-5)).toBe(1e-5);
    expect(klOnAxis(3e-4, 1e-5)).toBe(3e-4);
  });
});

describe("pointSize", () => {
  it("grows with memory by area, within its bounds", () => {
    expect(pointSize(400, 400)).toBe(SIZE_MAX);
    expect(pointSize(100, 400)).toBeCloseTo(SIZE_MIN + (SIZE_MAX - SIZE_MIN) / 2);
    expect(pointSize(null, 400)).toBe(SIZE_MIN);
    expect(pointSize(100, 0)).toBe(SIZE_MIN);
  });
});

describe("fidelityPoints", () => {
  it("maps each candidate with a speed and a divergence to a point, in order of speed", () => {
    const run = fidelityPoints([
      candidate("KV f16", 0, 40, 300),
      candidate("KV q8_0", 2e-4, 42, 290),
      candidate("KV q4_0", 3e-3, 45, 280),
      candidate("KV f16, drafts: prompt lookup", 0.01, 60, 310, { against: "plain" }),
    ]);
    expect(run.points.map((p) => p.setting)).toEqual(["KV f16", "KV q8_0", "KV q4_0", "KV f16, drafts: prompt lookup"]);
    expect(run.floor).toBeCloseTo(1e-5, 12);
    expect(run.points[0]).toMatchObject({ kl: 0, y: run.floor, againstPlain: false, size: pointSize(300, 310) });
    expect(run.points[3].againstPlain).toBe(true);
    expect(run.top).toBeCloseTo(0.1, 12);
    expect(run.left).toEqual([]);
  });
  it("leaves out, with why, what has no speed of its own or failed", () => {
    const onePass = candidate("KV f16, scored in one pass", 1e-6, null, null, { against: "plain" });
    const failed = candidate("weights f16", null, null, null, { backend: "candle", error: "the worker crashed" });
    const run = fidelityPoints([candidate("KV f16", 0, 40, 300), onePass, failed]);
    expect(run.points).toHaveLength(1);
    expect(run.left.map((l) => l.why)).toEqual(["no decode speed of its own (its tokens are scored, not generated)", "not measured: the worker crashed"]);
  });
});

describe("klText and klTick", () => {
  it("writes KLs short and exact at 0", () => {
    expect(klText(0)).toBe("0");
    expect(klText(3.14e-4)).toBe("3.1e-4");
    expect(klText(0.02134)).toBe("0.0213");
    expect(klText(1.523)).toBe("1.52");
    expect(klText(undefined)).toBe("—");
  });
  it("labels the floor as identical", () => {
    expect(klTick(1e-5, 1e-5)).toBe("0 (identical)");
    expect(klTick(1e-3, 1e-5)).toBe("1e-3");
    expect(klTick(0.1, 1e-5)).toBe("0.1");
    expect(klTick(3e-4, 1e-5)).toBe("3.0e-4");
  });
});

describe("liveCandidate", () => {
  const run = [
    candidate("KV f16", 0, 40, 300),
    candidate("KV q8_0", 2e-4, 42, 290),
    candidate("KV f16, scored in one pass", 1e-6, null, null, { against: "plain" }),
    candidate("KV f16, drafts: prompt lookup", 0.01, 60, 310, { against: "plain" }),
    candidate("weights f16", 1e-3, 20, 600, { backend: "candle", settings: { weights: "f16" } }),
    candidate("weights q8_0", 4e-3, 30, 400, { backend: "candle", settings: { weights: "q8_0" } }),
  ];
  it("finds llama.cpp's setting by its KV cache type", () => {
    expect(liveCandidate(run, "llama", { kv: "q8_0", drafter: "none", settings: {} })?.setting).toBe("KV q8_0");
    expect(liveCandidate(run, "llama", { kv: null, drafter: "none", settings: {} })).toBeNull();
  });
  it("finds a drafting setting beside its setting without drafts", () => {
    expect(liveCandidate(run, "llama", { kv: "f16", drafter: "lookup", settings: {} })?.setting).toBe("KV f16, drafts: prompt lookup");
    expect(liveCandidate(run, "llama", { kv: "q8_0", drafter: "lookup", settings: {} })).toBeNull();
  });
  it("finds the others by their weights", () => {
    expect(liveCandidate(run, "candle", { kv: "f16", drafter: "none", settings: { weights: "q8_0" } })?.setting).toBe("weights q8_0");
    expect(liveCandidate(run, "candle", { kv: "f16", drafter: "none", settings: {} })).toBeNull();
    expect(liveCandidate(run, "mlx", { kv: "f16", drafter: "none", settings: { weights: "q4" } })).toBeNull();
  });
});
