// What the e2e test and the perturbation benchmark share: starting tauri-driver (which starts
// WebKitWebDriver, which starts the app) and opening a WebDriver session on the app.

import { connect } from "node:net";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { remote } from "webdriverio";

const cargoDriver = path.join(homedir(), ".cargo/bin/tauri-driver");
/** tauri-driver: $TAURI_DRIVER, else the one `cargo install` put in ~/.cargo/bin, else PATH. */
export const DRIVER = process.env.TAURI_DRIVER ?? (existsSync(cargoDriver) ? cargoDriver : "tauri-driver");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wait until something listens on `port` (tauri-driver), without asking it anything yet. */
export async function waitForPort(port, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const up = await new Promise((res) => {
      const s = connect(port, "127.0.0.1", () => {
        s.end();
        res(true);
      });
      s.on("error", () => res(false));
    });
    if (up) return;
    if (Date.now() > end) throw new Error(`nothing listens on port ${port}`);
    await sleep(200);
  }
}

/** Start tauri-driver on `port` (and WebKitWebDriver on `port` + 1) and open a session on the app binary `app`. */
export async function openApp(app, port) {
  // The native driver's port follows ours, so two runs on one machine (LX_E2E_PORT) do not meet.
  const args = ["--port", String(port), "--native-port", String(port + 1), "--native-driver", "/usr/bin/WebKitWebDriver"];
  const driver = spawn(DRIVER, args, { stdio: ["ignore", "inherit", "inherit"] });
  driver.on("error", (e) => console.error(`tauri-driver: ${e}`));
  return { driver, browser: await session(driver, port, { "tauri:options": { application: app } }) };
}

/** A WebDriver session through `driver` (just started) on `port`; the driver is stopped
 *  when none opens. */
async function session(driver, port, capabilities) {
  try {
    await waitForPort(port, 20_000);
    return await remote({ hostname: "127.0.0.1", port, logLevel: "warn", connectionRetryTimeout: 120_000, capabilities });
  } catch (e) {
    driver.kill();
    throw e;
  }
}

/**
 * Poll `f` (run in the page) until `ok(value)`, every `everyMs`; on timeout, call
 * `onTimeout` (a screenshot, say) and fail with `what` and the last value.
 */
export async function pollPage(browser, what, f, ok, { timeoutMs = 60_000, args = [], everyMs = 250, onTimeout = async () => {} } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await browser.execute(f, ...args);
      if (ok(last)) return last;
    } catch (e) {
      last = String(e);
    }
    await sleep(everyMs);
  }
  await onTimeout();
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)?.slice(0, 2000)}`);
}

/** Save `browser`'s page as the PNG `file`. A picture is evidence, not a test: on a starved
 *  machine WebKitWebDriver's snapshot can hang for minutes (and be retried), so it gives up
 *  after a minute and says so. */
export async function screenshot(browser, file) {
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    let timer;
    const giveUp = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("took over 60 s")), 60_000)));
    await Promise.race([browser.saveScreenshot(file), giveUp]).finally(() => clearTimeout(timer));
    console.log(`screenshot: ${file}`);
  } catch (e) {
    console.log(`no screenshot ${file} (${e})`);
  }
}

/**
 * Wait for the app to open its model, set live mode to one llama.cpp setting (`threads`
 * left at the app's auto when absent) and go live.
 */
export async function goLiveOnLlama(browser, { prompt, concurrency, maxTokens, threads }) {
  for (let i = 0; !(await browser.execute(() => window.__lx?.model() != null)); i++) {
    if (i > 600) throw new Error("the model did not open");
    await sleep(500);
  }
  await browser.execute(
    (p, c, m, t) => {
      const set = (sel, v, ev) => {
        const el = document.querySelector(sel);
        el.value = String(v);
        el.dispatchEvent(new Event(ev, { bubbles: true }));
      };
      for (const box of document.querySelectorAll('.backend-list input[type="checkbox"]')) if (box.checked !== (box.value === "llama")) box.click();
      set('[data-testid="max-tokens"]', m, "change");
      set('[data-testid="prompt-tokens"]', p, "change");
      set('[data-testid="concurrency-slider"]', c, "input");
      set('[data-testid="policy"]', "continuous", "change");
      if (t != null) set('[data-testid="threads"]', t, "change");
    },
    prompt,
    concurrency,
    maxTokens,
    threads ?? null,
  );
  await sleep(500);
  await browser.execute(() => document.querySelector('[data-testid="go-live"]').click());
}

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

/**
 * Open the page `file` from disk in WebKitGTK's MiniBrowser through WebKitWebDriver on
 * `port`: a real browser, as a reader of a page the app or `lx` wrote would see it.
 */
export async function openInBrowser(file, port) {
  // Without compositing: under Xvfb, WebKit's accelerated compositing leaves screenshots blank.
  const env = { ...process.env, WEBKIT_DISABLE_COMPOSITING_MODE: "1" };
  const driver = spawn("/usr/bin/WebKitWebDriver", [`--port=${port}`], { stdio: ["ignore", "inherit", "inherit"], env });
  const browser = await session(driver, port, { "webkitgtk:browserOptions": { binary: miniBrowser(), args: ["--automation"] } });
  await browser.setWindowSize(1400, 1000).catch(() => {});
  await browser.url(`file://${file}`);
  return { driver, browser };
}
