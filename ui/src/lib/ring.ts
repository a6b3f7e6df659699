/**
 * A bounded ring buffer: the newest `capacity` items, oldest first. Live data is kept in
 * these so memory stays flat however long a session runs.
 */
export class RingBuffer<T> {
  private items: (T | undefined)[];
  private start = 0;
  private count = 0;
  /** Items ever pushed (including those since overwritten). */
  total = 0;

  constructor(readonly capacity: number) {
    if (!(capacity >= 1) || !Number.isInteger(capacity)) throw new RangeError("capacity must be a positive integer");
    this.items = new Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  push(item: T): void {
    const end = (this.start + this.count) % this.capacity;
    this.items[end] = item;
    if (this.count < this.capacity) this.count++;
    else this.start = (this.start + 1) % this.capacity;
    this.total++;
  }

  /** The i-th item, oldest first (0 ≤ i < size). */
  at(i: number): T | undefined {
    if (i < 0 || i >= this.count) return undefined;
    return this.items[(this.start + i) % this.capacity];
  }

  last(): T | undefined {
    return this.at(this.count - 1);
  }

  forEach(f: (item: T, i: number) => void): void {
    for (let i = 0; i < this.count; i++) f(this.items[(this.start + i) % this.capacity] as T, i);
  }

  toArray(): T[] {
    const out: T[] = new Array(this.count);
    this.forEach((x, i) => (out[i] = x));
    return out;
  }

  /** The newest `n` items, oldest first. */
  tail(n: number): T[] {
    const k = Math.max(0, Math.min(n, this.count));
    const out: T[] = new Array(k);
    for (let i = 0; i < k; i++) out[i] = this.at(this.count - k + i) as T;
    return out;
  }

  clear(): void {
    this.items = new Array(this.capacity);
    this.start = 0;
    this.count = 0;
  }
}
