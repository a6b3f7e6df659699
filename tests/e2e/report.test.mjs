// `lx report` in a real browser: the page made from a checked-in run (the ceilings sweep in
// docs/results) is opened from disk in WebKitGTK's MiniBrowser through WebKitWebDriver, and
// checked as a reader would see it: every chart drawn at a readable size with a point per
// measurement and its ceiling, every point in the table, nothing fetched from anywhere.
//
// Environment: LX_BIN (the lx binary, required), LX_E2E_ARTIFACTS (screenshots),
// LX_E2E_PORT (4444: this test takes the port 3 above it).

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openInBrowser } from "./driver.mjs";

const LX = process.env.LX_BIN;
const ARTIFACTS = process.env.LX_E2E_ARTIFACTS ?? path.join(import.meta.dirname, "artifacts");
const PORT = Number(process.env.LX_E2E_PORT ?? 4444) + 3;
const RUN = path.join(import.meta.dirname, "../../docs/results/ceilings-llama-candle-pp64-512-c1-16.json");

let driver;
let browser;
let page;

describe("lx report", () => {
  before(async () => {
    assert.ok(LX && existsSync(LX), `LX_BIN must name the built lx (got ${LX})`);
    page = path.join(mkdtempSync(path.join(tmpdir(), "lx-report-")), "report.html");
    const made = spawnSync(LX, ["report", RUN, "-o", page], { encoding: "utf8" });
    assert.equal(made.status, 0, made.stderr);
    ({ driver, browser } = await openInBrowser(page, PORT));
  });

  after(async () => {
    await browser?.deleteSession().catch(() => {});
    driver?.kill();
  });

  test("every chart is drawn, with a point per measurement and its ceiling", async () => {
    const run = JSON.parse(readFileSync(RUN, "utf8"));
    const seen = await browser.execute(() => ({
      title: document.title,
      charts: [...document.querySelectorAll("svg.chart")].map((svg) => {
        const box = svg.getBoundingClientRect();
        return {
          width: box.width,
          height: box.height,
          points: svg.querySelectorAll("circle").length,
          ceilings: svg.querySelectorAll("polyline.ceiling").length,
          series: svg.querySelectorAll("polyline.series").length,
          tooltips: [...svg.querySelectorAll("circle")].filter((c) => c.querySelector("title")?.textContent).length,
        };
      }),
      rows: document.querySelectorAll("tbody tr").length,
      fetched: performance.getEntriesByType("resource").length,
      scripts: document.scripts.length,
    }));
    assert.match(seen.title, /on .* — llama, candle/);
    assert.equal(seen.charts.length, 4);
    for (const c of seen.charts) {
      assert.ok(c.width >= 300 && c.height >= 150, `a chart drawn ${c.width}×${c.height} px`);
      assert.equal(c.points, run.points.length, "a point per measurement");
      assert.equal(c.tooltips, c.points, "every point says its value");
      assert.equal(c.ceilings, c.series, "a ceiling beside every curve");
    }
    assert.equal(seen.rows, run.points.length);
    assert.equal(seen.fetched, 0, "the page fetched something");
    assert.equal(seen.scripts, 0);
    mkdirSync(ARTIFACTS, { recursive: true });
    await browser.saveScreenshot(path.join(ARTIFACTS, "report.png"));
    await browser.execute(() => document.querySelector(".charts").scrollIntoView());
    await browser.saveScreenshot(path.join(ARTIFACTS, "report-charts.png"));
  });
});
