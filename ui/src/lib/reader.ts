import { READING_PACE_TPS } from "../ipc/generated/defaults";

/** Human reading pace, tokens per second: the band the UI shades. */
export const READING_BAND: [number, number] = [4, 5];
/** Default reader pace: the engine's reading pace. */
export const DEFAULT_PACE = READING_PACE_TPS;

/**
 * The "reader" of the preview pane: a marker that moves through the streamed tokens at a
 * human reading pace. It starts when the first token arrives, advances at `pace` tokens a
 * second, and can never pass the tokens that have arrived: when it catches up it waits, as
 * a person would. The pace can change at any time; the marker keeps its place.
 */
export class Reader {
  /** Tokens read so far (fractional: 2.5 = halfway through the third token). */
  position = 0;
  private lastT: number | null = null;

  constructor(public pace = DEFAULT_PACE) {
    Reader.check(pace);
  }

  static check(pace: number): void {
    if (!(pace > 0 && pace < 1000)) throw new RangeError("the reading pace must be a positive number of tokens per second");
  }

  setPace(pace: number): void {
    Reader.check(pace);
    this.pace = pace;
  }

  /**
   * Move to time `now` (ms) with `available` tokens arrived so far. Returns the position.
   * Call it often (every frame); calls with no tokens yet leave the reader waiting to start.
   */
  advance(now: number, available: number): number {
    if (available <= 0) {
      this.lastT = null;
      return this.position;
    }
    if (this.lastT === null) {
      this.lastT = now;
      return this.position;
    }
    const dt = Math.max(0, now - this.lastT) / 1000;
    this.lastT = now;
    this.position = Math.min(available, this.position + dt * this.pace);
    return this.position;
  }

  /** The reader has read everything that arrived and waits for more. */
  waiting(available: number): boolean {
    return available > 0 && this.position >= available;
  }

  /** Seconds until the reader finishes `available` tokens at the current pace. */
  secondsLeft(available: number): number {
    return Math.max(0, available - this.position) / this.pace;
  }

  reset(): void {
    this.position = 0;
    this.lastT = null;
  }
}

/**
 * Where the reader would be at `t` given token arrival times (ms, non-decreasing), in closed
 * form: token i is finished at r_i = max(a_i, r_{i-1}) + 1/pace, starting from r_{-1} = a_0.
 * The same model as {@link Reader}; used to check it and for what-if views.
 */
export function readerPositionAt(arrivals: number[], pace: number, t: number): number {
  Reader.check(pace);
  if (arrivals.length === 0 || t <= arrivals[0]) return 0;
  const per = 1000 / pace;
  let prevEnd = arrivals[0];
  for (let i = 0; i < arrivals.length; i++) {
    const start = Math.max(arrivals[i], prevEnd);
    if (t < start) return i; // waiting for token i to arrive
    const end = start + per;
    if (t < end) return i + (t - start) / per;
    prevEnd = end;
  }
  return arrivals.length;
}
