// `lx gallery` in a real browser: the page made from the bench files this project measured
// (docs/results/bench: two machines' builds, two suites) is opened from disk in WebKitGTK's
// MiniBrowser through WebKitWebDriver and read as a reader would: a bar per machine and
// backend with its score's interval, a table row each, the filters working, this machine
// marked, nothing fetched from anywhere.
//
// Environment: LX_BIN (the lx binary, required), LX_E2E_ARTIFACTS (screenshots),
// LX_E2E_PORT (4444: this test takes the port 13 above it).

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openInBrowser } from "./driver.mjs";

const LX = process.env.LX_BIN;
const ARTIFACTS = process.env.LX_E2E_ARTIFACTS ?? path.join(import.meta.dirname, "artifacts");
const PORT = Number(process.env.LX_E2E_PORT ?? 4444) + 13;
const DIR = path.join(import.meta.dirname, "../../docs/results/bench");

let driver;
let browser;

describe("lx gallery", () => {
  before(async () => {
    assert.ok(LX && existsSync(LX), `LX_BIN must name the built lx (got ${LX})`);
    const page = path.join(mkdtempSync(path.join(tmpdir(), "lx-gallery-")), "gallery.html");
    const made = spawnSync(LX, ["gallery", DIR, "-o", page], { encoding: "utf8" });
    assert.equal(made.status, 0, made.stderr);
    ({ driver, browser } = await openInBrowser(page, PORT));
  });

  after(async () => {
    await browser?.deleteSession().catch(() => {});
    driver?.kill();
  });

  test("each machine and backend has its bar and row, the filters hide the others, nothing is fetched", async () => {
    const files = readdirSync(DIR).filter((n) => n.endsWith(".json") && !n.startsWith("reference-")).map((n) => JSON.parse(readFileSync(path.join(DIR, n), "utf8")));
    const backends = files.reduce((n, f) => n + f.backends.length, 0);
    const builds = new Set(files.map((f) => `${f.machine.fingerprint} ${f.build.features.join("+")}`));
    assert.ok(builds.size >= 2, "two machines or two builds");
    const seen = await browser.execute(() => ({
      groups: document.querySelectorAll('[data-testid="gallery-group"]').length,
      bars: [...document.querySelectorAll('[data-testid="score-bars"] g')].map((g) => ({ text: g.textContent, rects: g.querySelectorAll("rect").length, whiskers: g.querySelectorAll("line.whisker").length })),
      rows: document.querySelectorAll('[data-testid="gallery-table"] tbody tr').length,
      charts: [...document.querySelectorAll("figure svg.chart")].map((s) => s.getBoundingClientRect().width),
      cpus: [...document.querySelectorAll("#cpu option")].map((o) => o.value),
      fetched: performance.getEntriesByType("resource").length,
      external: document.querySelectorAll("script[src], link[href], img[src]").length,
    }));
    assert.equal(seen.groups, new Set(files.map((f) => `${f.suite.name} ${f.model.sha256}`)).size, "one section per suite and model");
    assert.equal(seen.rows, backends);
    assert.equal(seen.bars.length, backends);
    const scored = files.flatMap((f) => f.backends.filter((b) => b.score?.low !== undefined));
    assert.equal(seen.bars.filter((b) => b.rects === 1 && b.whiskers === 3).length, scored.length, "a bar with its interval per score");
    assert.ok(seen.bars.some((b) => b.text.includes("no score")), "a backend without a score says why");
    assert.ok(seen.charts.every((w) => w >= 300), `charts drawn at a readable size: ${seen.charts}`);
    assert.equal(seen.fetched, 0, "the page fetched something");
    assert.equal(seen.external, 0);
    mkdirSync(ARTIFACTS, { recursive: true });
    await browser.saveScreenshot(path.join(ARTIFACTS, "gallery-page.png"));
    // The filter runs (its script is the page's own): a CPU kind keeps its own rows only.
    const shown = await browser.execute((cpu) => {
      const s = document.getElementById("cpu");
      s.value = cpu;
      s.dispatchEvent(new Event("change"));
      return [...document.querySelectorAll("[data-cpu]")].filter((e) => e.style.display !== "none").map((e) => e.dataset.cpu);
    }, seen.cpus[1]);
    assert.ok(shown.length > 0 && shown.every((c) => c === seen.cpus[1]), JSON.stringify(shown));
  });
});
