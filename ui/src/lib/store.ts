/**
 * Live data as the UI keeps it: bounded ring buffers fed by the engine's event batches.
 * Nothing here measures; it files what the engine measured so the views can draw it.
 */
import { RingBuffer } from "./ring";
import type {
  BackendStatus,
  LiveEvent,
  Limits,
  LiveSettings,
  OpenedRun,
  PointFigures,
  PrefillSpan,
  SettingKey,
  SensorReading,
  SensorsOpened,
  SettingSummary,
  Tick,
  TransferSpan,
} from "../ipc/types";

/** One completed (or failed) request, as the time charts plot it. Times in seconds. */
export interface DonePoint {
  id: number;
  backend: string;
  policy: string;
  promptTokens: number;
  concurrency: number;
  maxTokens: number;
  /** When its first token arrived (s since the session started). */
  firstAt: number | null;
  /** When it ended (s). */
  doneAt: number;
  ttftMs: number | null;
  decodeTps: number | null;
  settled: boolean;
  error: string | null;
}

/** One request in the timeline. Times in ms since the session started. */
export interface TimelineRow {
  id: number;
  backend: string;
  promptTokens: number;
  submit: number;
  admit: number | null;
  prefill: PrefillSpan[];
  first: number | null;
  last: number | null;
  done: boolean;
  error: string | null;
  preview: boolean;
  /** Receipt of each verify pass that accepted drafted tokens (speculative decoding). */
  verified: number[];
  /** Its state's move from the prefill worker to the decode worker (disaggregated). */
  transfer: TransferSpan | null;
}

/** The request streamed in the preview pane. */
export interface PreviewState {
  id: number;
  backend: string;
  promptTokens: number;
  maxTokens: number;
  promptTail: string;
  startedAt: number;
  admittedAt: number | null;
  pieces: string[];
  /** Per token: it came from a draft the target accepted (speculative decoding). */
  drafted: boolean[];
  /** Receipt time of each token (ms since the session started). */
  times: number[];
  done: boolean;
  ttftMs: number | null;
  decodeTps: number | null;
  error: string | null;
  /** performance.now() when it ended (for the hand-over to the next preview). */
  doneWall: number | null;
}

/** A problem to show, with what the user can do about it. */
export interface Problem {
  kind: "crash" | "load" | "paused" | "rejected" | "command" | "notice";
  backend?: string;
  message: string;
  /** Retry restarts failed workers. */
  retry: boolean;
}

/** A sweep point with the setting it measured (its key as the engine made it). */
export interface KeyedPoint {
  key: SettingKey;
  point: PointFigures;
}

export const CAPACITY = { done: 20_000, ticks: 10_000, timeline: 40, sensors: 10_000 };

export class LiveStore {
  /** Bumped on every change: views redraw only when it moved. */
  version = 0;
  /** Bumped when a summary or sweep point changed (the curves). */
  summaryVersion = 0;
  running = false;
  settings: LiveSettings | null = null;
  done = new RingBuffer<DonePoint>(CAPACITY.done);
  ticks = new RingBuffer<Tick>(CAPACITY.ticks);
  /** The machine's sensor readings (clock, power), and what they can read here. */
  sensors = new RingBuffer<SensorReading>(CAPACITY.sensors);
  sensorsOpened: SensorsOpened | null = null;
  /** Latest summary per setting (kept across sessions: the curves build up). */
  summaries = new Map<string, SettingSummary>();
  /** Sweep points, for the curves, by their key's id (as summaries are). */
  sweepPoints = new Map<string, KeyedPoint>();
  /** The key id of each backend's figures under the settings in force (from the engine:
   * the UI never builds a key itself). */
  private currentKeys: Record<string, string> = {};
  /** Saved runs opened to compare with (kept across sessions), in the order opened. */
  overlays: OpenedRun[] = [];
  /** One request alone on each model swept in this app (the model-size chart). */
  sizePoints = new Map<string, SizePoint>();
  /** This app's sweep points by setting and depth (the depth chart). */
  depthPoints = new Map<string, DepthPoint>();
  /** The measured limits of each device this app's sweeps ran on (the model-size chart's
   * ceilings), by device. */
  limits = new Map<string, Limits>();
  backends = new Map<string, BackendStatus>();
  inFlight = new Map<number, TimelineRow>();
  finished = new RingBuffer<TimelineRow>(CAPACITY.timeline);
  preview: PreviewState | null = null;
  problems: Problem[] = [];
  lastTick: Tick | null = null;
  /** performance.now() − session ms, estimated from arrivals (smallest seen = least delayed). */
  private offset: number | null = null;

  /** A new session starts: its clock restarts at 0, so the time series start over. */
  beginSession(settings: LiveSettings): void {
    this.running = true;
    this.settings = settings;
    this.currentKeys = {};
    this.done.clear();
    this.ticks.clear();
    this.sensors.clear();
    this.sensorsOpened = null;
    this.inFlight.clear();
    this.finished.clear();
    this.preview = null;
    this.problems = [];
    this.lastTick = null;
    this.offset = null;
    this.version++;
  }

  /** Session ms now, on the engine's clock (null before the first event). */
  sessionNow(wallNow: number = performance.now()): number | null {
    return this.offset === null ? null : wallNow - this.offset;
  }

  private seen(atMs: number, wallNow: number) {
    const o = wallNow - atMs;
    if (this.offset === null || o < this.offset) this.offset = o;
  }

  apply(batch: LiveEvent[], wallNow: number = performance.now()): void {
    for (const e of batch) this.applyOne(e, wallNow);
    this.version++;
  }

  private applyOne(e: LiveEvent, wallNow: number): void {
    switch (e.type) {
      case "settingsApplied":
        this.settings = e.settings;
        this.currentKeys = e.key_ids;
        this.seen(e.at_ms, wallNow);
        break;
      case "backendStatus":
        this.seen(e.at_ms, wallNow);
        {
          const prev = this.backends.get(e.backend);
          // Keep what we knew about a loaded worker when a later status omits it.
          this.backends.set(e.backend, {
            ...e,
            info: e.info ?? (e.state === "stopped" || e.state === "error" ? null : (prev?.info ?? null)),
            capacity: e.capacity ?? (e.state === "stopped" || e.state === "error" ? null : (prev?.capacity ?? null)),
          });
        }
        // A crash was reported already (with its reason); a failed load is reported here.
        if (e.state === "error" && e.message && !this.problems.some((p) => p.backend === e.backend && p.kind === "crash")) {
          this.addProblem({ kind: "load", backend: e.backend, message: `Cannot load ${e.backend}: ${e.message}`, retry: true });
        }
        if (e.state === "measuring" || e.state === "ready") this.clearProblems(e.backend);
        break;
      case "requestStarted": {
        this.seen(e.at_ms, wallNow);
        this.inFlight.set(e.id, {
          id: e.id,
          backend: e.backend,
          promptTokens: e.prompt_tokens,
          submit: e.at_ms,
          admit: null,
          prefill: [],
          first: null,
          last: null,
          done: false,
          error: null,
          preview: e.preview,
          verified: [],
          transfer: null,
        });
        if (e.preview) {
          this.preview = {
            id: e.id,
            backend: e.backend,
            promptTokens: e.prompt_tokens,
            maxTokens: e.max_tokens,
            promptTail: e.prompt_tail ?? "",
            startedAt: e.at_ms,
            admittedAt: null,
            pieces: [],
            drafted: [],
            times: [],
            done: false,
            ttftMs: null,
            decodeTps: null,
            error: null,
            doneWall: null,
          };
        }
        break;
      }
      case "requestAdmitted": {
        const r = this.inFlight.get(e.id);
        if (r) r.admit = e.at_ms;
        if (this.preview?.id === e.id) this.preview.admittedAt = e.at_ms;
        break;
      }
      case "requestPrefill": {
        const r = this.inFlight.get(e.id);
        if (r) r.prefill.push({ tokens: e.tokens, start_ms: e.start_ms, end_ms: e.end_ms });
        break;
      }
      case "requestTransferred": {
        const r = this.inFlight.get(e.id);
        if (r) r.transfer = e.transfer;
        break;
      }
      case "previewTokens": {
        const p = this.preview;
        if (p && p.id === e.id) {
          for (let i = 0; i < e.pieces.length; i++) {
            p.pieces[e.first_index + i] = e.pieces[i];
            p.drafted[e.first_index + i] = e.drafted[i] ?? false;
            p.times[e.first_index + i] = e.at_ms[i];
          }
          if (p.ttftMs === null && p.times.length > 0) p.ttftMs = p.times[0] - p.startedAt;
        }
        const r = this.inFlight.get(e.id);
        if (r && e.at_ms.length > 0) {
          r.first ??= e.at_ms[0];
          r.last = e.at_ms[e.at_ms.length - 1];
          e.at_ms.forEach((t, i) => {
            if (e.drafted[i] && r.verified[r.verified.length - 1] !== t) r.verified.push(t);
          });
        }
        break;
      }
      case "requestDone": {
        this.seen(e.last_token_at_ms ?? e.submit_at_ms, wallNow);
        const row = this.inFlight.get(e.id);
        this.inFlight.delete(e.id);
        const finished: TimelineRow = {
          id: e.id,
          backend: e.backend,
          promptTokens: e.prompt_tokens,
          submit: e.submit_at_ms,
          admit: e.admit_at_ms,
          prefill: e.prefill.length > 0 ? e.prefill : (row?.prefill ?? []),
          first: e.first_token_at_ms,
          last: e.last_token_at_ms,
          done: true,
          error: e.error,
          preview: row?.preview ?? false,
          verified: e.verified_at_ms,
          transfer: e.transfer ?? row?.transfer ?? null,
        };
        this.finished.push(finished);
        if (e.finish !== "cancelled") {
          this.done.push({
            id: e.id,
            backend: e.backend,
            policy: e.policy,
            promptTokens: e.prompt_tokens,
            concurrency: e.concurrency,
            maxTokens: e.max_tokens,
            firstAt: e.first_token_at_ms === null ? null : e.first_token_at_ms / 1000,
            doneAt: (e.last_token_at_ms ?? e.submit_at_ms) / 1000,
            ttftMs: e.ttft_ms,
            decodeTps: e.decode_tps,
            settled: e.settled,
            error: e.error,
          });
        }
        if (this.preview?.id === e.id) {
          this.preview.done = true;
          this.preview.doneWall = wallNow;
          this.preview.decodeTps = e.decode_tps;
          this.preview.ttftMs = e.ttft_ms;
          this.preview.error = e.error;
        }
        break;
      }
      case "summary":
        this.summaries.set(e.key_id, e.summary);
        this.summaryVersion++;
        break;
      case "tick":
        this.seen(e.at_ms, wallNow);
        this.ticks.push(e);
        this.lastTick = e;
        break;
      case "sensorsOpened":
        this.sensorsOpened = e;
        break;
      case "sensors":
        this.seen(e.at_ms, wallNow);
        this.sensors.push(e);
        break;
      case "workerCrashed":
        this.lastTick = null; // its in-flight counts are gone with it
        this.addProblem({ kind: "crash", backend: e.backend, message: `The ${e.backend} worker${e.pid ? ` (pid ${e.pid})` : ""} crashed: ${e.reason}`, retry: true });
        break;
      case "paused":
        this.addProblem({ kind: "paused", message: `Live mode is paused: no backend can run (${e.reason}).`, retry: true });
        break;
      case "rejected":
        this.addProblem({ kind: "rejected", message: e.message, retry: false });
        break;
      case "stopped":
        this.running = false;
        for (const r of this.inFlight.values()) this.finished.push({ ...r, done: true });
        this.inFlight.clear();
        break;
    }
  }

  addProblem(p: Problem): void {
    // One entry per kind and backend: the latest message wins.
    this.problems = this.problems.filter((q) => !(q.kind === p.kind && q.backend === p.backend));
    this.problems.push(p);
    this.version++;
  }

  clearProblems(backend?: string): void {
    const before = this.problems.length;
    this.problems = backend === undefined ? [] : this.problems.filter((p) => p.backend !== backend && p.kind !== "paused");
    if (this.problems.length !== before) this.version++;
  }

  /** The summary of the setting in force on `backend` (the live readout). */
  currentSummary(backend: string | undefined): SettingSummary | undefined {
    const id = backend === undefined ? undefined : this.currentKeys[backend];
    return id === undefined ? undefined : this.summaries.get(id);
  }

  /** The backend being measured now. */
  activeBackend(): string | undefined {
    for (const [name, st] of this.backends) if (st.state === "measuring") return name;
    return this.lastTick?.backend;
  }

  /** Open `run` beside this session's figures (again: it replaces the earlier copy). */
  addOverlay(run: OpenedRun): void {
    const others = this.overlays.filter((o) => o.path !== run.path);
    // Curves are told apart by label: two runs of one machine in the same minute (a sweep
    // and its repetition, say) are told apart by their files' names.
    const file = run.path.split(/[\\/]/).pop() ?? run.path;
    const label = others.some((o) => o.label === run.label) ? `${run.label} · ${file}` : run.label;
    this.overlays = [...others, { ...run, label }];
    this.summaryVersion++;
    this.version++;
  }

  removeOverlay(path: string): void {
    this.overlays = this.overlays.filter((o) => o.path !== path);
    this.summaryVersion++;
    this.version++;
  }

  /** The saved runs' points at `s` (any backend), for the time charts' reference lines. */
  overlayPointsAt(s: Pick<LiveSettings, "policy" | "prompt_tokens" | "concurrency" | "max_tokens">): { run: OpenedRun; point: PointFigures }[] {
    return this.overlays.flatMap((run) =>
      run.points.filter((p) => p.requests > 0 && curvePoint(p) && p.policy === s.policy && p.prompt_tokens === s.prompt_tokens && p.concurrency === s.concurrency && p.max_tokens === s.max_tokens).map((point) => ({ run, point })),
    );
  }

  /** A sweep point of `model` (reading `weightBytes` per decode step) for the model-size
   * chart: one client, closed loop, fixed lengths; the shortest prompt per model, backend
   * and policy. */
  addSizePoint(p: PointFigures, model: string, synthetic: boolean, weightBytes: number): void {
    if (!sizePoint(p)) return;
    const key = `${model}|${p.backend}|${p.policy}`;
    const had = this.sizePoints.get(key);
    if (had && had.promptTokens < p.prompt_tokens) return;
    this.sizePoints.set(key, { model, synthetic, weightBytes, backend: p.backend, policy: p.policy, promptTokens: p.prompt_tokens, decodeTps: p.decode_tps.p50, saved: "" });
    this.summaryVersion++;
    this.version++;
  }

  /** The model-size chart's points: this app's sweeps, then each saved run's. */
  allSizePoints(): SizePoint[] {
    const saved = this.overlays.flatMap((run) => {
      const bytes = run.weight_bytes_per_step;
      if (bytes == null) return [];
      const best = new Map<string, SizePoint>();
      for (const p of run.points) {
        if (!sizePoint(p)) continue;
        const key = `${p.backend}|${p.policy}`;
        const had = best.get(key);
        if (!had || p.prompt_tokens < had.promptTokens) best.set(key, { model: run.model, synthetic: run.synthetic, weightBytes: bytes, backend: p.backend, policy: p.policy, promptTokens: p.prompt_tokens, decodeTps: p.decode_tps.p50, saved: run.label });
      }
      return [...best.values()];
    });
    return [...this.sizePoints.values(), ...saved];
  }

  /** A sweep point for the depth chart: any depth, closed loop, fixed lengths. */
  addDepthPoint(p: PointFigures): void {
    const d = depthPointOf(p, "");
    if (!d) return;
    this.depthPoints.set(`${depthCurve(d)}|${d.depth}`, d);
    this.summaryVersion++;
    this.version++;
  }

  /** The depth chart's points: this app's sweeps, then each saved run's. */
  allDepthPoints(): DepthPoint[] {
    const saved = this.overlays.flatMap((run) => run.points.flatMap((p) => depthPointOf(p, run.label) ?? []));
    return [...this.depthPoints.values(), ...saved];
  }

  addSweepPoint(e: { point: PointFigures; key: SettingKey; key_id: string }): void {
    if (!curvePoint(e.point)) return;
    this.sweepPoints.set(e.key_id, { key: e.key, point: e.point });
    this.summaryVersion++;
    this.version++;
  }
}

/** A point of the depth chart: a setting's prefill and decode rates (p50) with `depth`
 *  tokens already in each request's context. */
export interface DepthPoint {
  backend: string;
  policy: string;
  /** The request's own prompt tokens, after the depth. */
  promptTokens: number;
  maxTokens: number;
  concurrency: number;
  depth: number;
  prefillTps: number;
  decodeTps: number;
  /** The saved run's label; "" for this app's sweeps. */
  saved: string;
}

function depthPointOf(p: PointFigures, saved: string): DepthPoint | null {
  if (!closedLoopAtFixedLengths(p) || p.requests === 0 || p.prefill_tps.count === 0 || p.decode_tps.count === 0) return null;
  return { backend: p.backend, policy: p.policy, promptTokens: p.prompt_tokens - p.depth, maxTokens: p.max_tokens, concurrency: p.concurrency, depth: p.depth, prefillTps: p.prefill_tps.p50, decodeTps: p.decode_tps.p50, saved };
}

/** The curve a depth point belongs to: the same run (or this app), backend and setting. */
export function depthCurve(p: DepthPoint): string {
  return `${p.saved}|${p.backend}|${p.policy}|${p.promptTokens}|${p.maxTokens}|${p.concurrency}`;
}

/** A point of the model-size chart: one request alone, decoding. */
export interface SizePoint {
  model: string;
  synthetic: boolean;
  /** Weight bytes per decode step. */
  weightBytes: number;
  backend: string;
  policy: string;
  promptTokens: number;
  /** Decode tok/s p50. */
  decodeTps: number;
  /** The saved run's label; "" for this app's sweeps. */
  saved: string;
}

/** One client alone at a fixed setting, measured: decode as the model's size sets it. */
function sizePoint(p: PointFigures): boolean {
  return p.concurrency === 1 && p.requests > 0 && p.decode_tps.count > 0 && curvePoint(p);
}

/** The curves are closed-loop points at fixed lengths in an empty context; drawn lengths,
 * arrival rates, depths and repetitions stay in a sweep's table and run file. */
export function curvePoint(p: PointFigures): boolean {
  return closedLoopAtFixedLengths(p) && p.depth === 0;
}

/** No drawn lengths, no arrival rate, not one of a point's repetitions. */
function closedLoopAtFixedLengths(p: PointFigures): boolean {
  return p.prompt_tokens_from == null && p.max_tokens_from == null && p.rate == null && p.repetition == null;
}
