import { describe, expect, it } from "vitest";
import { RingBuffer } from "./ring";

describe("RingBuffer", () => {
  it("keeps items in order until full", () => {
    const r = new RingBuffer<number>(3);
    r.push(1);
    r.push(2);
    expect(r.toArray()).toEqual([1, 2]);
    expect(r.size).toBe(2);
    expect(r.last()).toBe(2);
  });

  it("drops the oldest when full and stays bounded", () => {
    const r = new RingBuffer<number>(3);
    for (let i = 1; i <= 10; i++) r.push(i);
    expect(r.toArray()).toEqual([8, 9, 10]);
    expect(r.size).toBe(3);
    expect(r.total).toBe(10);
    expect(r.at(0)).toBe(8);
    expect(r.at(3)).toBeUndefined();
  });

  it("gives the newest n items", () => {
    const r = new RingBuffer<string>(4);
    ["a", "b", "c", "d", "e"].forEach((x) => r.push(x));
    expect(r.tail(2)).toEqual(["d", "e"]);
    expect(r.tail(10)).toEqual(["b", "c", "d", "e"]);
    expect(r.tail(0)).toEqual([]);
  });

  it("clears", () => {
    const r = new RingBuffer<number>(2);
    r.push(1);
    r.clear();
    expect(r.size).toBe(0);
    expect(r.toArray()).toEqual([]);
    r.push(5);
    expect(r.toArray()).toEqual([5]);
  });

  it("refuses a useless capacity", () => {
    expect(() => new RingBuffer(0)).toThrow(RangeError);
    expect(() => new RingBuffer(1.5)).toThrow(RangeError);
  });
});
