import { describe, expect, it } from "vitest";
import type { PointFigures } from "../ipc/types";
import { explainCeilings, ofCeiling, parseList, parseNumbers, sensorNotes } from "./sweep";

describe("parseList", () => {
  it("reads comma or space separated whole numbers, once each", () => {
    expect(parseList("64, 256 1024,64", 1, 4096)).toEqual([64, 256, 1024]);
  });
  it("says what is wrong", () => {
    expect(parseList("", 1, 10)).toBe("give at least one value");
    expect(parseList("5, x", 1, 10)).toContain("'x'");
    expect(parseList("0", 1, 10)).toContain("from 1 to 10");
    expect(parseList("0", 1)).toContain("of at least 1");
  });
});

describe("parseNumbers", () => {
  it("reads positive numbers; an empty field is none", () => {
    expect(parseNumbers("1.5, 3 1.5")).toEqual([1.5, 3]);
    expect(parseNumbers("  ")).toEqual([]);
    expect(parseNumbers("0")).toContain("'0'");
    expect(parseNumbers("fast")).toContain("'fast'");
  });
});

describe("ceilings", () => {
  it("gives a median as a share of its ceiling, with the limit behind it", () => {
    expect(ofCeiling(91.78, 272.0, "memory")).toBe("34% memory");
    expect(ofCeiling(10, undefined, undefined)).toBe("—");
  });
  const cpu = { device: "CPU (2 threads)", memory_bytes_per_s: 67.5e9, compute_flops_per_s: 800e9, compute_method: "ggml Q4_K" };
  const gpu = { device: "Vulkan0", memory_bytes_per_s: 0.9e9, compute_flops_per_s: 3.6e9, compute_method: "ggml Q4_K on Vulkan0" };
  it("explains them in the machine's numbers", () => {
    const text = explainCeilings([{ backend: "llama", device: "CPU", limits: cpu }, { backend: "candle", device: "cpu", limits: cpu }], 246.6e6);
    expect(text).toContain("llama.cpp, candle: ceilings from CPU (2 threads): memory read 67.5 GB/s, compute 800 GFLOP/s");
    expect(text).toContain("one request decodes at most 274 tok/s there (67.5 GB/s ÷ 247 MB).");
    expect(text).toContain("Decode reads every weight once per token (247 MB for this model): memory-bound.");
    expect(text).toContain("Prefill computes all the prompt's tokens in one pass");
  });
  it("say why once, and each device's own bound, when backends ran on two devices", () => {
    const text = explainCeilings(
      [
        { backend: "llama", device: "Vulkan0 llvmpipe: all 19 layers", limits: gpu },
        { backend: "candle", device: "cpu", limits: cpu },
      ],
      246.6e6,
    );
    expect(text).toMatch(/^llama\.cpp: ceilings from Vulkan0: .*at most 4 tok\/s there \(0\.9 GB\/s ÷ 247 MB\)\. candle: ceilings from CPU \(2 threads\): .*at most 274 tok\/s there/);
    expect(text.match(/Decode reads every weight/g)).toHaveLength(1);
    expect(text.match(/Prefill computes/g)).toHaveLength(1);
  });
  it("give each backend the limits of the device it ran on, and say where there are none", () => {
    const text = explainCeilings(
      [
        { backend: "llama", device: "Vulkan0 llvmpipe: all 19 layers", limits: gpu },
        { backend: "candle", device: "cuda:0", limits: null },
      ],
      246.6e6,
    );
    expect(text).toContain("llama.cpp: ceilings from Vulkan0: memory read 0.9 GB/s, compute 4 GFLOP/s");
    expect(text).toContain("at most 4 tok/s there");
    expect(text.match(/Decode reads every weight/g)).toHaveLength(1);
    expect(text).toContain("candle on cuda:0: no ceilings (the probe did not measure that device).");
    expect(text).not.toContain("CPU");
    expect(explainCeilings([{ backend: "candle", device: "cuda:0", limits: null }], 246.6e6)).toBe("candle on cuda:0: no ceilings (the probe did not measure that device).");
  });
});

describe("sensor notes", () => {
  const point = (p: Partial<PointFigures>) => ({ backend: "llama", prompt_tokens: 512, concurrency: 4, throttling: [], sensors_not_available: [], ...p }) as PointFigures;
  it("say once what cannot be read here, and every point that throttled", () => {
    const missing = ["CPU package power: no powercap/RAPL here", "GPU power and clocks: no NVIDIA driver library here"];
    const notes = sensorNotes([point({ sensors_not_available: missing }), point({ sensors_not_available: missing, concurrency: 16, throttling: ["CPU clock fell from 3400 to 2800 MHz (-18%) while the load was steady"] })]);
    expect(notes).toBe(
      "Not available here: CPU package power: no powercap/RAPL here. Not available here: GPU power and clocks: no NVIDIA driver library here. " +
        "Throttling: llama.cpp 512-token prompts at 16 clients: CPU clock fell from 3400 to 2800 MHz (-18%) while the load was steady.",
    );
    expect(sensorNotes([point({})])).toBe("");
  });
});
