import { describe, expect, it } from "vitest";
import { parseList } from "./sweep";

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
