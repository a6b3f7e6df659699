/**
 * What the fidelity chart draws, from a run's candidates: one point per candidate with a
 * decode speed and a divergence, its KL on a log axis whose floor stands for "identical"
 * (a KL of exactly 0 has no place on a log scale), its size by peak memory. Pure, so it is
 * tested without a page.
 */
import type { Candidate, Drafter, KvType } from "../ipc/types";
import { choosesKv } from "./backends";

export interface FidelityPoint {
  backend: string;
  setting: string;
  /** Decode tok/s: the x axis. */
  tps: number;
  /** Mean KL as measured (nats), 0 included. */
  kl: number;
  /** Where it is drawn on the log axis: `kl`, or the floor for a KL of 0. */
  y: number;
  /** Compared with the same backend decoding without drafts, not with the reference. */
  againstPlain: boolean;
  peakMib: number | null;
  /** Point diameter, px. */
  size: number;
}

export interface FidelityPoints {
  points: FidelityPoint[];
  /** The log axis's lowest value: where a KL of 0 is drawn, labelled "0 (identical)". */
  floor: number;
  /** The axis's top: the largest KL drawn, rounded up to a power of ten. */
  top: number;
  /** Candidates measured but not drawn, with why (no decode speed of their own, an error). */
  left: { candidate: Candidate; why: string }[];
}

/** Point diameters, px: the smallest memory footprint drawn and the largest. */
export const SIZE_MIN = 9;
export const SIZE_MAX = 24;

/** Decades below the smallest non-zero KL where the "identical" floor sits. */
const FLOOR_DECADES = 1;

const pow10floor = (v: number) => 10 ** Math.floor(Math.log10(v));
const pow10ceil = (v: number) => 10 ** Math.ceil(Math.log10(v));

/** The axis's floor for these KLs: a decade below the smallest above 0 (1e-6 when all are 0). */
export function klFloor(kls: number[]): number {
  const positive = kls.filter((k) => k > 0 && Number.isFinite(k));
  if (positive.length === 0) return 1e-6;
  return pow10floor(Math.min(...positive)) / 10 ** FLOOR_DECADES;
}

/** Where a KL is drawn: itself, or the floor for 0 (or a rounding just under it). */
export function klOnAxis(kl: number, floor: number): number {
  return kl > floor ? kl : floor;
}

/** Diameter for a peak memory: the area grows with memory, between SIZE_MIN and SIZE_MAX. */
export function pointSize(mib: number | null, largest: number): number {
  if (mib === null || !(mib > 0) || !(largest > 0)) return SIZE_MIN;
  return SIZE_MIN + (SIZE_MAX - SIZE_MIN) * Math.sqrt(Math.min(mib, largest) / largest);
}

/** Why a candidate has no point, or null when it has one. */
function notDrawn(c: Candidate): string | null {
  if (c.error) return `not measured: ${c.error}`;
  if (!c.fidelity) return "no divergence measured";
  if (c.decode_tok_s === undefined || c.decode_tok_s === null || !Number.isFinite(c.decode_tok_s)) return "no decode speed of its own (its tokens are scored, not generated)";
  if (!Number.isFinite(c.fidelity.mean_kl)) return "its divergence is not a number";
  return null;
}

/** The chart's points for `candidates`, in order of decode speed (uPlot's x must ascend). */
export function fidelityPoints(candidates: Candidate[]): FidelityPoints {
  const left: FidelityPoints["left"] = [];
  const drawn: Candidate[] = [];
  for (const c of candidates) {
    const why = notDrawn(c);
    if (why) left.push({ candidate: c, why });
    else drawn.push(c);
  }
  const floor = klFloor(drawn.map((c) => c.fidelity!.mean_kl));
  const largest = Math.max(0, ...drawn.map((c) => c.peak_rss_mib ?? 0));
  const points = drawn
    .map((c) => {
      const kl = Math.max(0, c.fidelity!.mean_kl);
      const mib = c.peak_rss_mib ?? null;
      return { backend: c.backend, setting: c.setting, tps: c.decode_tok_s!, kl, y: klOnAxis(kl, floor), againstPlain: c.against === "plain", peakMib: mib, size: pointSize(mib, largest) };
    })
    .sort((a, b) => a.tps - b.tps);
  const top = Math.max(floor * 100, pow10ceil(Math.max(floor, ...points.map((p) => p.y)) * 1.0001));
  return { points, floor, top, left };
}

/** A KL as the table and axis say it: "0", "3.1e-4", "0.021", "1.52". */
export function klText(kl: number | null | undefined): string {
  if (kl === null || kl === undefined || !Number.isFinite(kl)) return "—";
  if (kl === 0) return "0";
  if (kl >= 0.01) return String(+kl.toPrecision(3));
  const [m, e] = kl.toExponential(1).split("e");
  return `${m}e${Number(e)}`;
}

/** A log axis tick: the floor reads "0 (identical)", the others as KLs. */
export function klTick(v: number, floor: number): string {
  if (v <= floor * 1.0001) return "0 (identical)";
  const decade = Math.round(Math.log10(v));
  const isDecade = Math.abs(Math.log10(v) - decade) < 1e-9;
  if (isDecade) return v >= 0.01 ? String(+v.toPrecision(1)) : `1e${decade}`;
  return klText(v);
}

/** What live mode runs a backend with, as far as fidelity tells settings apart. */
export interface LiveSetting {
  /** llama.cpp's KV cache type (keys and values alike), null when they differ. */
  kv: KvType | null;
  drafter: Drafter;
  /** The backend's own settings as it loaded (`BackendInfo.settings`: candle's `weights`). */
  settings: Record<string, string>;
}

const DRAFTS: Record<Exclude<Drafter, "none">, string> = { lookup: "prompt lookup", draft: "a draft model" };

/**
 * The candidate of a fidelity run that measured what live mode runs on `backend`: llama.cpp
 * by its KV cache type, the others by their weights; with drafts, the drafting candidate of
 * that setting (compared with the same setting without drafts). Null when the run has none.
 */
export function liveCandidate(candidates: Candidate[], backend: string, live: LiveSetting): Candidate | null {
  const plain = candidates.find((c) => {
    if (c.backend !== backend || c.against !== "reference" || c.setting.includes(" as a model")) return false;
    if (choosesKv(backend)) return live.kv !== null && c.setting === `KV ${live.kv}`;
    const weights = c.settings?.weights;
    return weights !== undefined && weights === live.settings.weights;
  });
  const drafter = live.drafter;
  if (!plain || drafter === "none") return plain ?? null;
  return candidates.find((c) => c.backend === backend && c.setting === `${plain.setting}, drafts: ${DRAFTS[drafter]}`) ?? null;
}
