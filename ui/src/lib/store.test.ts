import { describe, expect, it } from "vitest";
import { LiveStore } from "./store";
import type { LiveEvent, LiveSettings, OpenedRun, PointFigures, SettingKey, SettingSummary } from "../ipc/types";

const settings: LiveSettings = {
  backends: ["llama"],
  prompt_tokens: 64,
  concurrency: 2,
  max_tokens: 8,
  policy: "continuous",
  chunk_tokens: 256,
  threads: 0,
  kv: { k: "f16", v: "f16" },
  gpu_layers: null,
  rotate_after_s: 8,
  batch_ms: 100,
  hang_timeout_s: 300,
  spec: { drafter: "none", ngram_max: 4, ngram_min: 2, draft_max: 8, adaptive: true },
};

const started = (id: number, atMs: number, preview = false): LiveEvent => ({
  type: "requestStarted", id, backend: "llama", prompt_tokens: 64, max_tokens: 8, policy: "continuous", concurrency: 2, at_ms: atMs, preview, prompt_tail: preview ? "once upon" : null,
});

const done = (id: number, submit: number, first: number, last: number, extra: Partial<Extract<LiveEvent, { type: "requestDone" }>> = {}): LiveEvent => ({
  type: "requestDone", id, backend: "llama", policy: "continuous", prompt_tokens: 64, max_tokens: 8, concurrency: 2, submit_at_ms: submit, admit_at_ms: submit + 1,
  prefill: [{ tokens: 64, start_ms: submit + 1, end_ms: first - 1 }], first_token_at_ms: first, last_token_at_ms: last, verified_at_ms: [], transfer: null, output_tokens: 8, ttft_ms: first - submit,
  queue_ms: 1, decode_tps: 7000 / (last - first), prefill_tps: 1000, e2e_ms: last - submit, settled: true, finish: "length", error: null, ...extra,
});

describe("LiveStore", () => {
  it("keeps a disaggregated request's transfer between its workers, in flight and done", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    s.apply([started(1, 10)], 1000);
    const transfer = { bytes: 14_000_000, start_ms: 40, end_ms: 55 };
    s.apply([{ type: "requestTransferred", id: 1, transfer }], 1050);
    expect(s.inFlight.get(1)?.transfer).toEqual(transfer);
    s.apply([done(1, 10, 60, 200, { transfer })], 1300);
    expect(s.finished.last()?.transfer).toEqual(transfer);
    // A request that moved nothing has no transfer.
    s.apply([started(2, 11), done(2, 11, 60, 200)], 1400);
    expect(s.finished.last()?.transfer).toBeNull();
  });

  it("files requests for the charts, the timeline and the preview", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    s.apply([started(1, 10, true), started(2, 11)], 1000);
    s.apply([{ type: "requestAdmitted", id: 1, at_ms: 12, queue_ms: 2 }, { type: "previewTokens", id: 1, first_index: 0, pieces: [" there", " lived"], at_ms: [60, 80], drafted: [false, true] }], 1100);
    expect(s.preview?.pieces.join("")).toBe(" there lived");
    expect(s.preview?.drafted).toEqual([false, true]);
    expect(s.preview?.ttftMs).toBe(50);
    expect(s.inFlight.size).toBe(2);
    // The timeline marks the verify pass that brought an accepted draft, while in flight and done.
    expect(s.inFlight.get(1)?.verified).toEqual([80]);
    s.apply([done(1, 10, 60, 200, { verified_at_ms: [80, 150] })], 1300);
    expect(s.inFlight.size).toBe(1);
    expect(s.finished.size).toBe(1);
    expect(s.finished.last()?.verified).toEqual([80, 150]);
    expect(s.done.size).toBe(1);
    expect(s.done.last()?.ttftMs).toBe(50);
    expect(s.done.last()?.doneAt).toBeCloseTo(0.2);
    expect(s.preview?.done).toBe(true);
  });

  it("does not plot cancelled requests", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    s.apply([started(1, 0), done(1, 0, 10, 20, { finish: "cancelled", settled: false })]);
    expect(s.done.size).toBe(0);
    expect(s.finished.size).toBe(1);
  });

  it("shows a crash with retry and clears it when the backend is back", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    s.apply([{ type: "workerCrashed", backend: "llama", reason: "exited on signal 9", pid: 42, at_ms: 5 }]);
    expect(s.problems).toHaveLength(1);
    expect(s.problems[0].retry).toBe(true);
    expect(s.problems[0].message).toContain("pid 42");
    s.apply([{ type: "backendStatus", backend: "llama", state: "measuring", info: null, load_ms: null, pid: 43, capacity: null, message: null, at_ms: 9 }]);
    expect(s.problems).toHaveLength(0);
  });

  it("estimates the session clock from the least delayed event", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    s.apply([started(1, 100)], 5100); // arrived 5000 ms after the session's zero... or later
    s.apply([started(2, 200)], 5150); // ...this one says 4950
    expect(s.sessionNow(6000)).toBe(1050);
  });

  it("keeps the live time series bounded", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    for (let i = 0; i < 25_000; i++) s.apply([done(i, i, i + 5, i + 10)]);
    expect(s.done.size).toBe(20_000);
    expect(s.finished.size).toBe(40);
  });
});

describe("figures by setting", () => {
  const summary = (keyId: string, requests: number): LiveEvent => ({ type: "summary", key_id: keyId, summary: { requests } as SettingSummary });

  it("are kept by the key the engine sent, and the readout shows the one the settings in force name", () => {
    const s = new LiveStore();
    s.beginSession(settings);
    expect(s.currentSummary("llama")).toBeUndefined();
    s.apply([{ type: "settingsApplied", settings, key_ids: { llama: "a" }, at_ms: 0 }, summary("a", 3), summary("b", 5)]);
    expect(s.currentSummary("llama")?.requests).toBe(3);
    s.apply([{ type: "settingsApplied", settings, key_ids: { llama: "b" }, at_ms: 1 }, summary("b", 6)]);
    expect(s.currentSummary("llama")?.requests).toBe(6);
    expect(s.currentSummary("candle")).toBeUndefined();
  });

  it("keep one sweep point per key, with the key it was measured at", () => {
    const s = new LiveStore();
    const key = { backend: "llama", policy: "chunked", prompt_tokens: 64, concurrency: 2, max_tokens: 8, chunk_tokens: 128, drafter: "none", spec_fixed: false, shared_cache: false, kv: { k: "f16", v: "f16" } } as SettingKey;
    const point = { backend: "llama", policy: "chunked", prompt_tokens: 64, concurrency: 2, max_tokens: 8, requests: 4, prompt_tokens_from: null, max_tokens_from: null, rate: null, repetition: null, depth: 0 } as PointFigures;
    s.addSweepPoint({ point, key, key_id: "k" });
    s.addSweepPoint({ point: { ...point, requests: 5 }, key, key_id: "k" });
    expect([...s.sweepPoints.values()].map((p) => [p.key.chunk_tokens, p.point.requests])).toEqual([[128, 5]]);
  });
});

describe("saved runs", () => {
  const point = (p: Partial<PointFigures>): PointFigures =>
    ({ backend: "llama", policy: "continuous", prompt_tokens: 64, concurrency: 2, max_tokens: 8, requests: 4, prompt_tokens_from: null, max_tokens_from: null, rate: null, repetition: null, depth: 0, ...p }) as PointFigures;
  const run = (path: string, points: PointFigures[]): OpenedRun => ({ path, label: `machine of ${path}`, model: "Gemma 3 270m", synthetic: false, weight_bytes_per_step: 246_600_000, backends: ["llama on CPU"], points });

  it("are kept in the order opened, once each, and taken off again", () => {
    const s = new LiveStore();
    const before = s.summaryVersion;
    s.addOverlay(run("a.json", [point({})]));
    s.addOverlay(run("b.json", [point({})]));
    s.addOverlay(run("a.json", [point({}), point({ concurrency: 4 })]));
    expect(s.overlays.map((o) => [o.path, o.points.length])).toEqual([["b.json", 1], ["a.json", 2]]);
    expect(s.summaryVersion).toBe(before + 3);
    s.removeOverlay("b.json");
    expect(s.overlays.map((o) => o.path)).toEqual(["a.json"]);
  });

  it("two runs of one machine in the same minute keep apart labels", () => {
    const s = new LiveStore();
    s.addOverlay({ ...run("/runs/a.json", [point({})]), label: "AMD EPYC, 2026-12-02 07:15 UTC" });
    s.addOverlay({ ...run("C:\\runs\\b.json", [point({})]), label: "AMD EPYC, 2026-12-02 07:15 UTC" });
    s.addOverlay({ ...run("/runs/c.json", [point({})]), label: "Apple M3, 2026-12-02 07:15 UTC" });
    expect(s.overlays.map((o) => o.label)).toEqual(["AMD EPYC, 2026-12-02 07:15 UTC", "AMD EPYC, 2026-12-02 07:15 UTC · b.json", "Apple M3, 2026-12-02 07:15 UTC"]);
  });

  it("give the time charts their points at the live setting only: closed loop, fixed lengths, measured", () => {
    const s = new LiveStore();
    const here = point({});
    s.addOverlay(run("a.json", [here, point({ concurrency: 4 }), point({ rate: 2 }), point({ depth: 512 }), point({ requests: 0 }), point({ policy: "serial" })]));
    expect(s.overlayPointsAt(settings).map((x) => x.point)).toEqual([here]);
  });
});

describe("the model-size chart's points", () => {
  const dist = (p50: number) => ({ count: 4, p50, p90: p50, p95: p50, p99: p50, mean: p50, min: p50, max: p50, stddev: 0 });
  const point = (p: Partial<PointFigures>): PointFigures =>
    ({ backend: "llama", policy: "continuous", prompt_tokens: 64, concurrency: 1, max_tokens: 32, requests: 4, prompt_tokens_from: null, max_tokens_from: null, rate: null, repetition: null, depth: 0, decode_tps: dist(90), ...p }) as PointFigures;

  it("keep one request alone per model, backend and policy, at its shortest prompt", () => {
    const s = new LiveStore();
    s.addSizePoint(point({ prompt_tokens: 512, decode_tps: dist(80) }), "Gemma 3 270m", false, 246_600_000);
    s.addSizePoint(point({ decode_tps: dist(90) }), "Gemma 3 270m", false, 246_600_000);
    s.addSizePoint(point({ prompt_tokens: 256, decode_tps: dist(85) }), "Gemma 3 270m", false, 246_600_000);
    s.addSizePoint(point({ concurrency: 4 }), "Gemma 3 270m", false, 246_600_000);
    s.addSizePoint(point({ rate: 2 }), "Gemma 3 270m", false, 246_600_000);
    s.addSizePoint(point({ decode_tps: dist(150) }), "SmolLM2 135M", true, 97_000_000);
    expect(s.allSizePoints().map((p) => [p.model, p.promptTokens, p.decodeTps, p.synthetic])).toEqual([
      ["Gemma 3 270m", 64, 90, false],
      ["SmolLM2 135M", 64, 150, true],
    ]);
  });

  it("take a saved run's from its file, labelled by it, when it knows its bytes per token", () => {
    const s = new LiveStore();
    const saved: OpenedRun = { path: "a.json", label: "AMD EPYC, 2026-12-01 23:44 UTC", model: "Gemma 3 270m", synthetic: false, weight_bytes_per_step: 246_600_000, backends: [], points: [point({ prompt_tokens: 512, decode_tps: dist(86) }), point({ decode_tps: dist(91.78) }), point({ backend: "candle", decode_tps: dist(63.39) })] };
    s.addOverlay(saved);
    s.addOverlay({ ...saved, path: "b.json", weight_bytes_per_step: null });
    expect(s.allSizePoints().map((p) => [p.saved, p.backend, p.decodeTps, p.weightBytes])).toEqual([
      [saved.label, "llama", 91.78, 246_600_000],
      [saved.label, "candle", 63.39, 246_600_000],
    ]);
  });
});
