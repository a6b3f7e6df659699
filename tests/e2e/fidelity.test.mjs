// Fidelity, end to end: the real app on the real default model under Xvfb. It opens the
// fidelity panel, starts a tiny run by keyboard (llama.cpp only, one chunk of the text),
// waits until the chart and the table show llama.cpp's three KV cache types with numbers,
// checks that the f16 cache (the reference's own setting) reads a KL of exactly 0, takes a
// screenshot, cancels the run (what was measured is kept) and reads the run file it wrote.
//
// Environment: LX_APP (required), LX_E2E_ARTIFACTS (screenshots), LX_E2E_PORT (4444: this
// test takes the ports 10 and 11 above it).

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openApp, pollPage, screenshot, sleep } from "./driver.mjs";

const APP = process.env.LX_APP;
const ARTIFACTS = process.env.LX_E2E_ARTIFACTS ?? path.join(import.meta.dirname, "artifacts");
const PORT = Number(process.env.LX_E2E_PORT ?? 4444) + 10;
const KV = ["KV f16", "KV q8_0", "KV q4_0"];

let driver;
let browser;

const until = (what, f, ok, timeoutMs = 60_000, args = []) =>
  pollPage(browser, what, f, ok, { timeoutMs, args, everyMs: 500, onTimeout: () => shot(`timeout-${what.replace(/\W+/g, "-")}`) });

async function shot(name) {
  // WebKitWebDriver's snapshot waits for the page's next rendering update, which a page at
  // rest may not have for a minute: a one-pixel animation gives it one.
  await browser.execute(() => {
    const dot = document.createElement("div");
    dot.id = "lx-repaint";
    dot.style.cssText = "position:fixed;right:0;bottom:0;width:1px;height:1px;animation:moved 0.5s infinite alternate";
    document.body.append(dot);
    setTimeout(() => dot.remove(), 5000);
  });
  await screenshot(browser, path.join(ARTIFACTS, `${name}.png`));
  await browser.execute(() => document.getElementById("lx-repaint")?.remove());
}

/** The table's rows: setting → the text of each cell by column name (or the error). */
const tableRows = () =>
  browser.execute(() =>
    Object.fromEntries(
      [...document.querySelectorAll('[data-testid="fidelity-rows"] tr')].map((tr) => [
        tr.dataset.setting,
        Object.fromEntries([...tr.querySelectorAll("td[data-col]")].map((td) => [td.dataset.col, td.textContent])),
      ]),
    ),
  );

describe("Fidelity", { timeout: 30 * 60_000 }, () => {
  before(async () => {
    assert.ok(APP && existsSync(APP), `LX_APP must name the built app binary (got ${APP})`);
    ({ driver, browser } = await openApp(APP, PORT));
    await browser.setWindowSize(1600, 1000).catch(() => {});
    await until("the default model to open", () => window.__lx?.model()?.context_length ?? null, (v) => v > 0, 300_000);
    await until("the backends to be listed", () => window.__lx.backends().map((b) => `${b.name}:${b.available}`), (v) => v.includes("llama:true"));
    // Only llama.cpp on the left: the panel measures the backends selected there.
    await browser.execute(() => {
      localStorage.setItem("lx.welcomed", "1");
      document.querySelector('[data-testid="welcome"]')?.setAttribute("hidden", "");
      for (const box of document.querySelectorAll('.backend-list input[type="checkbox"]')) if (box.checked !== (box.value === "llama")) box.click();
    });
  });

  after(async () => {
    try {
      await Promise.race([browser?.deleteSession(), sleep(20_000)]);
    } finally {
      driver?.kill();
      spawnSync("pkill", ["-f", APP]);
    }
  });

  test("a tiny run draws llama.cpp's KV cache types against speed; f16 reads 0", async () => {
    await browser.execute(() => {
      const chunks = document.querySelector('[data-testid="fidelity-chunks"]');
      chunks.value = "1";
      chunks.dispatchEvent(new Event("change", { bubbles: true }));
      document.querySelector('[data-testid="fidelity"]').scrollIntoView({ block: "start" });
    });
    const label = await browser.execute(() => {
      const b = document.querySelector('[data-testid="fidelity-start"]');
      b.focus();
      return { text: b.textContent, focused: document.activeElement === b, type: b.type };
    });
    assert.deepEqual(label, { text: "Measure fidelity", focused: true, type: "button" });
    // By keyboard: Enter on the focused button.
    await browser.keys(["Enter"]);
    await until("the run to start", () => document.querySelector('[data-testid="fidelity-start"]').textContent, (t) => t === "Cancel");
    const status = await until("a status line", () => document.querySelector('[data-testid="fidelity-status"]').textContent, (t) => t.startsWith("Measuring "));
    assert.match(status, /^Measuring .+ \(\d+ of \d+\)…$/, status);

    // Every figure of the three KV types, on a 2-core machine shared with other work: minutes.
    const rows = await until(
      "llama.cpp's three KV types in the table with numbers",
      () =>
        Object.fromEntries(
          [...document.querySelectorAll('[data-testid="fidelity-rows"] tr')].map((tr) => [tr.dataset.setting, [...tr.querySelectorAll("td[data-col]")].map((td) => td.textContent)]),
        ),
      (v) => ["KV f16", "KV q8_0", "KV q4_0"].every((s) => v[s]?.length === 6 && v[s].every((cell) => cell !== "—")),
      15 * 60_000,
    );
    console.log(JSON.stringify(rows));
    const cells = await tableRows();
    assert.equal(cells["KV f16"]["mean KL"], "0", "the reference's own setting in a worker of its own computes the same distributions");
    assert.equal(cells["KV f16"]["top-1 agreement"], "100.00%");
    for (const s of ["KV q8_0", "KV q4_0"]) {
      assert.match(cells[s]["mean KL"], /^\d/, `${s}: ${cells[s]["mean KL"]}`);
      assert.match(cells[s].decode, / tok\/s$/, `${s}: ${cells[s].decode}`);
    }

    // The chart: one point per KV type, f16's at the floor labelled as identical.
    const chart = await browser.execute(() => window.__lx.fidelity());
    const points = Object.fromEntries(chart.drawn.points.map((p) => [p.setting, p]));
    for (const s of KV) assert.ok(points[s] && points[s].tps > 0, `${s} on the chart: ${JSON.stringify(chart.drawn.points)}`);
    assert.equal(points["KV f16"].kl, 0);
    assert.equal(points["KV f16"].y, chart.drawn.floor);
    assert.ok(points["KV q4_0"].y > chart.drawn.floor);
    for (const s of KV) assert.ok(chart.series.some((x) => x.label === s), `legend names ${s}: ${chart.series.map((x) => x.label)}`);

    await browser.execute(() => document.querySelector('[data-testid="fidelity"]').scrollIntoView({ block: "start" }));
    await sleep(500);
    await shot("fidelity");

    // Cancel: the candidate in flight stops, what was measured is kept in the run file.
    await browser.execute(() => document.querySelector('[data-testid="fidelity-start"]').click());
    const ended = await until("the run to end", () => document.querySelector('[data-testid="fidelity-status"]').textContent, (t) => /^(Cancelled|Done)/.test(t), 180_000);
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="fidelity-start"]').textContent), "Measure fidelity");
    const file = ended.match(/Saved to (.*\.json)$/)?.[1];
    assert.ok(file && existsSync(file), ended);
    const run = JSON.parse(readFileSync(file, "utf8"));
    assert.equal(run.kind, "fidelity");
    assert.equal(run.text.chunks, 1);
    for (const s of KV) assert.ok(run.candidates.some((c) => c.setting === s && c.fidelity), `${s} in ${file}`);
    assert.equal(run.candidates.find((c) => c.setting === "KV f16").fidelity.mean_kl, 0);
    await shot("fidelity-ended");

    // Live on llama.cpp with the f16 cache: the readout says what runs and its KL from this run.
    await browser.execute(() => document.querySelector('[data-testid="go-live"]').click());
    const line = await until("the readout's fidelity line", () => document.querySelector('[data-testid="readout-fidelity"]').textContent, (t) => t.includes("fidelity (last run)"), 180_000);
    assert.match(line, /^Runs with KV f16\b.* · fidelity \(last run\): mean KL 0, top-1 agreement 100\.0% against llama\.cpp with an f16 cache$/, line);
    await browser.execute(() => document.querySelector('[data-testid="go-live"][data-state="live"]')?.click());
    await until("live mode to stop", () => document.querySelector('[data-testid="go-live"]').dataset.state, (v) => v === "idle", 60_000);
  });
});
