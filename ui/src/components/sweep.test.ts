import { describe, expect, it } from "vitest";
import { parseLengths, parseList, parseNumbers } from "./sweep";

describe("parseList", () => {
  it("reads comma or space separated whole numbers, once each", () => {
    expect(parseList("64, 256 1024,64", 1, 4096)).toEqual([64, 256, 1024]);
  });
  it("says what is wrong", () => {
    expect(parseList("", 1, 10)).toBe("give at least one value");
    expect(parseList("5, x", 1, 10)).toContain("'x'");
    expect(parseList("0", 1, 10)).toContain("from 1 to 10");
  });
});

describe("parseLengths", () => {
  it("reads fixed lengths and ranges as lx sweep writes them", () => {
    expect(parseLengths("64..512, 512 64..512", 1, 2048)).toEqual(["64..512", "512"]);
  });
  it("says what is wrong", () => {
    expect(parseLengths("", 1, 10)).toBe("give at least one value");
    expect(parseLengths("5..x", 1, 10)).toContain("'5..x'");
    expect(parseLengths("8..2", 1, 10)).toContain("low end comes first");
    expect(parseLengths("1..20", 1, 10)).toContain("from 1 to 10");
    expect(parseLengths("3..", 1, 10)).toContain("'3..'");
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
