// Lessons, end to end: the real app on the real default model under Xvfb, driven as a
// teacher would. It checks that
//   - a first start offers the first lesson, and the app lists every demo `lx demo --list` has;
//   - the prompt-length lesson runs through its four steps (a screenshot of each), the
//     controls on the left and the lesson's own meters move to each setting it measures, the
//     output streams, and the answer's ratios are the ones the engine computes from the run
//     file (`lx show RUN --table demo`); presentation mode is large, thick and high-contrast,
//     and its handout opens in a real browser with the measured charts;
//   - the batching lesson runs by keyboard alone (→, Tab, Enter, P, Esc), and Tab reaches every
//     control of each step;
//   - a lesson stopped halfway keeps what it measured, and the app goes live afterwards;
//   - the hardware panel says what runs where and how fast the machine can go (its limits,
//     measured there), and each lesson's answer puts its points against those ceilings.
//
// Environment: LX_APP and LX_BIN (required), LX_E2E_ARTIFACTS (screenshots), LX_E2E_PORT
// (4444: this test takes the ports 6 to 8 above it).

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openApp, openInBrowser, pollPage, screenshot, sleep } from "./driver.mjs";

const APP = process.env.LX_APP;
const LX = process.env.LX_BIN;
const ARTIFACTS = process.env.LX_E2E_ARTIFACTS ?? path.join(import.meta.dirname, "artifacts");
const PORT = Number(process.env.LX_E2E_PORT ?? 4444) + 6;

let driver;
let browser;

const until = (what, f, ok, timeoutMs = 60_000, args = []) =>
  pollPage(browser, what, f, ok, { timeoutMs, args, everyMs: 200, onTimeout: () => shot(`timeout-${what.replace(/\W+/g, "-")}`) });

async function shot(name, b = browser) {
  // WebKitWebDriver's snapshot waits for the page's next rendering update, which a page at
  // rest may not have for a minute: a one-pixel animation gives it one, and goes when the
  // picture is taken (repaints cost the backend a share of the cores).
  const app = b === browser;
  if (app) {
    await b.execute(() => {
      const dot = document.createElement("div");
      dot.id = "lx-repaint";
      dot.style.cssText = "position:fixed;right:0;bottom:0;width:1px;height:1px;animation:moved 0.5s infinite alternate";
      document.body.append(dot);
      setTimeout(() => dot.remove(), 5000);
    });
  }
  await screenshot(b, path.join(ARTIFACTS, `${name}.png`));
  if (app) await b.execute(() => document.getElementById("lx-repaint")?.remove());
}

const click = (testid) => browser.execute((id) => document.querySelector(`[data-testid="${id}"]`).click(), testid);
const step = () => browser.execute(() => document.querySelector('[data-testid="lesson-body"]').dataset.step);
const key = async (k) => {
  await browser.keys([k]);
  await sleep(150);
};

/** The checks of a run file as `lx show --table demo` prints them: [what, measured]. */
function engineChecks(run) {
  const shown = spawnSync(LX, ["show", run, "--table", "demo"], { encoding: "utf8" });
  assert.equal(shown.status, 0, shown.stderr);
  return shown.stdout
    .split("\n")
    .filter((l) => l.startsWith("| `"))
    .map((l) => l.split("|").map((c) => c.trim()))
    .map((cells) => [cells[2], cells[3]]);
}

/** The answer's checks as the app shows them: [what, measured]. */
const shownChecks = () =>
  browser.execute(() =>
    [...document.querySelectorAll('[data-testid="lesson-checks"] li')].map((li) => [li.textContent.replace(/^[✓✗]/, "").split(": ")[0], li.querySelector(".check-value").textContent]),
  );

/** Every control of the lesson view Tab can reach, and whether Tab reached each of them. */
async function tabReachesEveryControl(where) {
  const want = await browser.execute(() => {
    const root = document.querySelector('[data-testid="lessons"]');
    return [...root.querySelectorAll("button, select, input, [tabindex]")]
      .filter((el) => !el.disabled && el.tabIndex >= 0 && el.getClientRects().length > 0)
      .map((el, i) => (el.dataset.lxTab = String(i)));
  });
  await browser.execute(() => document.querySelector('[data-lx-tab="0"]').focus());
  const reached = new Set(["0"]);
  for (let i = 0; i < want.length + 60 && reached.size < want.length; i++) {
    await browser.keys(["Tab"]);
    const tab = await browser.execute(() => document.activeElement?.dataset?.lxTab ?? null);
    if (tab !== null) reached.add(tab);
  }
  assert.deepEqual([...reached].sort(), [...want].sort(), `${where}: Tab reached ${reached.size} of ${want.length} controls`);
}

/** Wait for the lesson to finish measuring; returns the point labels seen moving the controls. */
async function measureWatchingControls(name) {
  const seen = new Map();
  const end = Date.now() + 600_000;
  for (;;) {
    const now = await browser.execute(() => ({
      controls: window.__lx.settings().prompt_tokens + "|" + window.__lx.settings().concurrency + "|" + window.__lx.settings().policy,
      meter: document.querySelector('[data-testid="lesson-prompt-value"]').textContent + "|" + document.querySelector('[data-testid="lesson-clients-value"]').textContent,
      preview: document.querySelector('[data-testid="lesson-preview"]').textContent.length,
      running: window.__lx.lessons.running,
      next: !document.querySelector('[data-testid="lesson-next"]').disabled,
    }));
    seen.set(now.controls, now);
    if (now.preview > 0) seen.set("preview", now);
    if (!now.running && now.next) break;
    if (Date.now() > end) throw new Error(`${name}: the lesson did not finish`);
    if (seen.size === 2 && !seen.has("shot")) {
      await shot(`lesson-${name}-3-measuring`);
      seen.set("shot", true);
    }
    // Not faster: every look runs script in the page, which shares the machine it measures.
    await sleep(300);
  }
  seen.delete("shot");
  return seen;
}

describe("Lessons", { timeout: 30 * 60_000 }, () => {
  before(async () => {
    assert.ok(APP && existsSync(APP), `LX_APP must name the built app binary (got ${APP})`);
    assert.ok(LX && existsSync(LX), `LX_BIN must name the built lx (got ${LX})`);
    ({ driver, browser } = await openApp(APP, PORT));
    await browser.setWindowSize(1600, 1000).catch(() => {});
    await until("the default model to open", () => window.__lx?.model()?.context_length ?? null, (v) => v > 0, 300_000);
    await until("the backends to be listed", () => window.__lx.backends().map((b) => `${b.name}:${b.available}`), (v) => v.includes("llama:true"));
    // Only llama.cpp on the left: the lessons' default backend.
    await browser.execute(() => {
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

  test("a first start offers the first lesson, and every engine demo is a lesson", async () => {
    // A first start is one whose web view has no memory of a welcome.
    await browser.execute(() => {
      localStorage.removeItem("lx.welcomed");
      location.reload();
    });
    await until("the page again", () => window.__lx?.model() != null && document.querySelector('[data-testid="welcome"]') !== null, (v) => v === true, 60_000);
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="welcome"]').hidden), false, "the welcome is offered");
    await shot("lesson-welcome");
    await click("welcome-start");
    await until("lesson 1's question", () => document.querySelector('[data-testid="lesson-question"]')?.textContent ?? "", (t) => t.endsWith("?"));
    assert.equal(await step(), "question");

    const listed = spawnSync(LX, ["demo", "--list"], { encoding: "utf8" });
    const demos = listed.stdout.trim().split("\n").map((l) => l.split(/\s+/)[0]);
    assert.ok(demos.length >= 8, listed.stdout);
    await key("Escape");
    await click("lessons-open");
    await key("ArrowLeft"); // from lesson 1's question back to the list
    const lessons = await until("the lesson list", () => [...document.querySelectorAll('[data-testid^="lesson-open-"]')].map((b) => b.dataset.testid.replace("lesson-open-", "")), (v) => v.length > 0);
    assert.deepEqual(lessons, demos, "the app's lessons are lx demo --list's demos, in order");
    await shot("lesson-list");
    await tabReachesEveryControl("the lesson list");
  });

  test("the hardware panel says what runs where and how fast this machine can go", async () => {
    // From the lesson list: the dashboard again, then the lessons again after.
    await key("Escape");
    await click("measure-speed");
    await until("the measuring to end", () => document.querySelector('[data-testid="measure-speed"]').disabled, (v) => v === false, 180_000);
    const said = await until(
      "the machine's speed",
      () => document.querySelector('[data-testid="hw-summary"]').textContent,
      (t) => /reads memory at [\d,]+ GB\/s and multiplies at [\d,]+ GFLOP\/s: for .* at most \d+ tokens\/s for one reader/.test(t),
      180_000,
    );
    assert.match(said, /^Runs here: llama\.cpp on /);
    const panel = await browser.execute(() => document.querySelector('[data-testid="hardware"]').textContent);
    assert.doesNotMatch(panel, /built in CI|tested in CI/, "the project's CI record is in docs/PLATFORMS.md, not the panel");
    await browser.execute(() => document.querySelector('[data-testid="hardware"]').scrollIntoView());
    await shot("hardware-summary");
    await click("lessons-open");
    await until("the lesson list", () => document.querySelector('[data-testid="lesson-list"]') !== null, (v) => v === true);
  });

  test("prompt length: four steps, the controls move, the answer is the engine's, presented and handed out", async () => {
    await click("lesson-open-prompt-length");
    assert.equal(await step(), "question");
    await browser.execute(() => {
      const s = document.querySelector('[data-testid="lesson-backend"]');
      s.value = "llama";
      s.dispatchEvent(new Event("change", { bubbles: true }));
    });
    await shot("lesson-prompt-length-1-question");
    await click("lesson-next");
    assert.equal(await step(), "predict");
    await click("lesson-choice-1");
    await shot("lesson-prompt-length-2-predict");
    const before = await browser.execute(() => window.__lx.settings().prompt_tokens);
    await click("lesson-next");
    assert.equal(await step(), "measure");
    const seen = await measureWatchingControls("prompt-length");
    await shot("lesson-prompt-length-3-measured");
    // The controls on the left went to the short prompt, then to the long one, one client.
    const prompts = [...seen.keys()].filter((k) => k !== "preview").map((k) => Number(k.split("|")[0]));
    const long = Number((await browser.execute(() => document.querySelector('[data-testid="lesson-points"] li:last-child .point-label').textContent)).replace("prompt ", ""));
    assert.ok(long >= 1024, `the long prompt: ${long} tokens`);
    assert.ok(prompts.includes(64) && prompts.includes(long), `the prompt control moved through ${prompts} (from ${before})`);
    assert.ok([...seen.values()].some((v) => v.meter?.startsWith("64 tokens|1")), "the lesson's own meter showed 64 tokens, 1 client");
    assert.ok(seen.has("preview"), "the output streamed into the preview");

    await key("ArrowRight");
    assert.equal(await step(), "answer");
    const run = await browser.execute(() => document.querySelector('[data-testid="lessons"]').dataset.run);
    assert.ok(run && existsSync(run), `the lesson's run file (${run})`);
    const verdict = await browser.execute(() => document.querySelector('[data-testid="lesson-verdict"]').textContent);
    assert.deepEqual(await shownChecks(), engineChecks(run), "the answer's checks are the engine's, to the digit");
    console.log(`prompt-length: ${verdict} ${JSON.stringify(await shownChecks())}`);
    const drawn = await browser.execute(() => document.querySelectorAll('[data-testid^="lesson-measured-"] circle').length);
    assert.equal(drawn, 4, "two figures, two measured points each");
    // The hardware test measured this machine's limits: each point against its ceilings.
    const ceilings = await browser.execute(() => document.querySelector('[data-testid="lesson-ceilings"]').textContent);
    assert.match(ceilings, /^In this machine's numbers: prompt 64: decode \d+ tok\/s per request, \d+% of the \d+ its memory allows; first token \d+ ms, against \d+ ms at the least/);
    await shot("lesson-prompt-length-4-answer");

    // Presentation: P fills the window in large type, thick lines, black on white.
    await browser.execute(() => document.activeElement?.blur());
    await key("p");
    const look = await browser.execute(() => {
      const root = document.querySelector('[data-testid="lessons"]');
      const box = root.getBoundingClientRect();
      const line = document.querySelector('[data-testid="lesson-measured-0"] .line');
      return {
        presenting: document.body.classList.contains("presenting"),
        covers: box.width >= window.innerWidth - 1 && box.height >= window.innerHeight - 1,
        fontPx: parseFloat(getComputedStyle(root).fontSize),
        linePx: parseFloat(getComputedStyle(line).strokeWidth),
        text: getComputedStyle(root).color,
        background: getComputedStyle(root).backgroundColor,
        sidebar: document.querySelector(".sidebar").getClientRects().length,
      };
    });
    assert.ok(look.presenting && look.covers && look.sidebar === 0, JSON.stringify(look));
    assert.ok(look.fontPx >= 24 && look.linePx >= 6, `type ${look.fontPx}px, lines ${look.linePx}px`);
    assert.equal(look.text, "rgb(0, 0, 0)");
    assert.equal(look.background, "rgb(255, 255, 255)");
    await shot("lesson-prompt-length-4-answer-presented");
    await key("ArrowLeft");
    await shot("lesson-prompt-length-3-measure-presented");
    await key("ArrowLeft");
    await shot("lesson-prompt-length-2-predict-presented");
    await key("ArrowRight");
    assert.equal(await step(), "measure", "→ from the prediction goes to the measurement already made");
    await key("ArrowRight");
    await key("Escape");
    assert.equal(await browser.execute(() => document.body.classList.contains("presenting")), false, "Esc leaves presentation");

    // The handout: a page of its own, opened in a real browser.
    await click("lesson-handout");
    const page = await until("the handout", () => document.querySelector('[data-testid="lessons"]').dataset.handout ?? null, (v) => v !== null);
    assert.ok(existsSync(page), page);
    const { driver: pageDriver, browser: pageBrowser } = await openInBrowser(page, PORT + 2);
    try {
      const read = await pageBrowser.execute(() => ({
        question: document.querySelector("h1").textContent,
        charts: [...document.querySelectorAll("svg.chart")].map((s) => s.querySelectorAll("circle").length),
        checks: [...document.querySelectorAll("table.checks tbody tr")].map((tr) => tr.children[1].textContent),
        scripts: document.scripts.length,
        fetched: performance.getEntriesByType("resource").length,
      }));
      assert.equal(read.question, "Does a longer prompt slow down every token, or only the first?");
      assert.deepEqual(read.charts, [2, 2], "a chart per figure, a point per measured setting");
      assert.deepEqual(read.checks, engineChecks(run).map((c) => c[1]));
      assert.equal(read.scripts + read.fetched, 0, "self-contained");
      await shot("lesson-handout", pageBrowser);
    } finally {
      await pageBrowser.deleteSession().catch(() => {});
      pageDriver.kill();
    }
  });

  test("batching by keyboard alone; Tab reaches every control of every step", async () => {
    // From the answer of the last lesson: its "next lesson" button, by keyboard.
    await browser.execute(() => document.querySelector('[data-testid="lesson-next-lesson"]').focus());
    await key("Enter");
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="lesson-title"]').textContent), "Lesson 2: batching");
    await shot("lesson-batching-1-question");
    await tabReachesEveryControl("the question");
    await browser.execute(() => document.activeElement?.blur());
    await key("ArrowRight");
    assert.equal(await step(), "predict");
    await tabReachesEveryControl("the prediction");
    // The first choice takes the focus when the step opens; Enter picks it.
    await browser.execute(() => document.querySelector('[data-testid="lesson-choice-0"]').focus());
    await key("Enter");
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="lesson-choice-0"]').getAttribute("aria-pressed")), "true");
    await shot("lesson-batching-2-predict");
    await key("p");
    await key("ArrowRight");
    assert.equal(await step(), "measure");
    await tabReachesEveryControl("the measurement, running");
    // Space holds the screen still while the measurement goes on, and lets it go again.
    await browser.execute(() => document.activeElement?.blur());
    await key(" ");
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="lesson-paused"]').hidden), false, "Space holds the screen");
    await shot("lesson-batching-3-held-presented");
    await key(" ");
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="lesson-paused"]').hidden), true, "Space lets it go");
    const seen = await measureWatchingControls("batching");
    await shot("lesson-batching-3-measured-presented");
    const clients = [...seen.keys()].filter((k) => k !== "preview").map((k) => k.split("|").slice(1).join("|"));
    assert.ok(clients.includes("1|continuous") && clients.includes("4|continuous") && clients.includes("4|static"), `the controls moved through ${clients}`);
    await browser.execute(() => document.activeElement?.blur());
    await key("ArrowRight");
    assert.equal(await step(), "answer");
    const run = await browser.execute(() => document.querySelector('[data-testid="lessons"]').dataset.run);
    assert.deepEqual(await shownChecks(), engineChecks(run));
    await shot("lesson-batching-4-answer-presented");
    await tabReachesEveryControl("the answer");
    await key("Escape");
    await shot("lesson-batching-4-answer");
  });

  test("a lesson stopped halfway keeps what it measured, and the app goes live afterwards", async () => {
    await click("lesson-again");
    await until("the first point to settle", () => document.querySelectorAll('[data-testid="lesson-points"] li[data-state="done"]').length, (n) => n >= 1, 300_000);
    await click("lesson-cancel");
    await until("the lesson to stop", () => window.__lx.lessons.running, (v) => v === false, 120_000);
    await key("ArrowRight");
    const verdict = await browser.execute(() => document.querySelector('[data-testid="lesson-verdict"]').textContent);
    assert.match(verdict, /^Stopped before every point was measured/);
    const sentence = await browser.execute(() => document.querySelector('[data-testid="lesson-sentence"]').textContent);
    assert.match(sentence, /^Stopped after [12] of 3 points: the checks need every point/);
    await shot("lesson-stopped");
    await key("Escape");
    assert.equal(await browser.execute(() => document.querySelector('[data-testid="lessons"]').hidden), true, "Esc leaves the lessons");
    await until("Go live to be ready", () => document.querySelector('[data-testid="go-live"]').disabled, (v) => v === false);
    await click("go-live");
    await until("a settled live request", () => window.__lx.ttftPoints().filter((x) => x.settled).length, (n) => n >= 1, 300_000);
    await click("go-live");
    await until("live mode to stop", () => window.__lx.store.running, (v) => v === false, 60_000);
  });
});
