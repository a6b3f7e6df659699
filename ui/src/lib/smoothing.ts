import { RingBuffer } from "./ring";

/** The shortest window live rates are smoothed over (ms): shorter ones flicker. */
export const MIN_WINDOW_MS = 500;

/**
 * Events per second over a trailing window: `count in (now − window, now] ÷ window`.
 * Until a whole window has passed since the first event, the time since the first event
 * is used instead (but never less than {@link MIN_WINDOW_MS}), so a new stream reads its
 * true rate quickly without spiking on its first events.
 */
export class WindowRate {
  private times: RingBuffer<[number, number]>;
  private first: number | null = null;

  constructor(readonly windowMs = 1000, capacity = 4096) {
    if (windowMs < MIN_WINDOW_MS) throw new RangeError(`a rate window must be at least ${MIN_WINDOW_MS} ms`);
    this.times = new RingBuffer(capacity);
  }

  /** `n` events at time `t` (ms; non-decreasing). */
  push(t: number, n = 1): void {
    if (this.first === null) this.first = t;
    this.times.push([t, n]);
  }

  /** Events per second at `now`; `null` before any event. */
  rate(now: number): number | null {
    if (this.first === null) return null;
    const from = now - this.windowMs;
    let n = 0;
    for (let i = this.times.size - 1; i >= 0; i--) {
      const [t, k] = this.times.at(i)!;
      if (t <= from) break;
      if (t <= now) n += k;
    }
    const span = Math.max(MIN_WINDOW_MS, Math.min(this.windowMs, now - this.first));
    return (n / span) * 1000;
  }

  reset(): void {
    this.times.clear();
    this.first = null;
  }
}

/** Exponential smoothing with a time constant, for display values sampled at uneven times. */
export class Smoothed {
  private value: number | null = null;
  private t: number | null = null;

  constructor(readonly tauMs = MIN_WINDOW_MS) {}

  update(t: number, x: number): number {
    if (this.value === null || this.t === null) {
      this.value = x;
    } else {
      const a = 1 - Math.exp(-Math.max(0, t - this.t) / this.tauMs);
      this.value += a * (x - this.value);
    }
    this.t = t;
    return this.value;
  }

  get current(): number | null {
    return this.value;
  }

  reset(): void {
    this.value = null;
    this.t = null;
  }
}
