import { describe, expect, it } from "vitest";
import { guardLocale, usableLocale } from "./locale-guard";

describe("locale guard", () => {
  it("knows what Intl accepts", () => {
    expect(usableLocale("en-US")).toBe(true);
    expect(usableLocale("C")).toBe(false);
    expect(usableLocale("")).toBe(false);
    expect(usableLocale(undefined)).toBe(false);
  });

  it("replaces WebKitGTK's 'C' so Intl (and uPlot) can start", () => {
    const nav = { language: "C", languages: ["C"] as readonly string[] };
    expect(() => new Intl.NumberFormat(nav.language)).toThrow(RangeError);
    expect(guardLocale(nav)).toBe("en-US");
    expect(nav.language).toBe("en-US");
    expect(nav.languages).toEqual(["en-US"]);
    expect(() => new Intl.NumberFormat(nav.language).format(1234.5)).not.toThrow();
  });

  it("prefers another usable language of the list", () => {
    const nav = { language: "C", languages: ["C", "de-DE"] as readonly string[] };
    expect(guardLocale(nav)).toBe("de-DE");
    expect(nav.languages).toEqual(["de-DE"]);
  });

  it("leaves a usable language alone", () => {
    const nav = { language: "fr-FR", languages: ["fr-FR", "en"] as readonly string[] };
    expect(guardLocale(nav)).toBe("fr-FR");
    expect(nav.languages).toEqual(["fr-FR", "en"]);
  });
});
