// `lx report` in a real browser: the page made from a checked-in run (the ceilings sweep in
// docs/results) is opened from disk in WebKitGTK's MiniBrowser through WebKitWebDriver, and
// checked as a reader would see it: every chart drawn at a readable size with a point per
// measurement and its ceiling, every point in the table, nothing fetched from anywhere.
//
// Environment: LX_BIN (the lx binary, required), LX_E2E_ARTIFACTS (screenshots),
// LX_E2E_PORT (4444: this test takes the port 3 above it).

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { remote } from "webdriverio";
import { waitForPort } from "./driver.mjs";

const LX = process.env.LX_BIN;
const ARTIFACTS = process.env.LX_E2E_ARTIFACTS ?? path.join(import.meta.dirname, "artifacts");
const PORT = Number(process.env.LX_E2E_PORT ?? 4444) + 3;
const RUN = path.join(import.meta.dirname, "../../docs/results/ceilings-llama-candle-pp64-512-c1-16.json");

/** WebKitGTK's own small browser, where Debian and Ubuntu put it. */
function miniBrowser() {
  for (const dir of ["/usr/lib", "/usr/libexec"]) {
    if (!existsSync(dir)) continue;
    for (const arch of readdirSync(dir)) {
      const p = path.join(dir, arch, "webkit2gtk-4.1/MiniBrowser");
      if (existsSync(p)) return p;
    }
  }
  throw new Error("MiniBrowser not found (Debian/Ubuntu: it comes with libwebkit2gtk-4.1-0)");
}

let driver;
let browser;
let page;

describe("lx report", () => {
  before(async () => {
    assert.ok(LX && existsSync(LX), `LX_BIN must name the built lx (got ${LX})`);
    page = path.join(mkdtempSync(path.join(tmpdir(), "lx-report-")), "report.html");
    const made = spawnSync(LX, ["report", RUN, "-o", page], { encoding: "utf8" });
    assert.equal(made.status, 0, made.stderr);
    // Without compositing: under Xvfb, WebKit's accelerated compositing leaves screenshots blank.
    const env = { ...process.env, WEBKIT_DISABLE_COMPOSITING_MODE: "1" };
    driver = spawn("/usr/bin/WebKitWebDriver", [`--port=${PORT}`], { stdio: ["ignore", "inherit", "inherit"], env });
    await waitForPort(PORT, 20_000);
    browser = await remote({
      hostname: "127.0.0.1",
      port: PORT,
      logLevel: "warn",
      connectionRetryTimeout: 120_000,
      capabilities: { "webkitgtk:browserOptions": { binary: miniBrowser(), args: ["--automation"] } },
    });
    await browser.setWindowSize(1400, 1000).catch(() => {});
    await browser.url(`file://${page}`);
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
