// Live mode in the app for a long session: does anything grow? Drives the real app under
// Xvfb on the default model with llama.cpp until SOAK_REQUESTS requests have settled, and
// samples the resident memory (RSS) of every process involved: the app, its WebKit web
// and network processes (where the page's charts and tables live) and the worker. Prints
// each process's memory after the warm-up and writes every sample to SOAK_OUT, with the
// page's element count beside it (a leak of DOM nodes shows there directly, whatever the
// garbage collector does). The warm-up lasts until the page's buffers are full (it keeps
// the last 20,000 settled requests for its charts: memory grows until then by design) and
// at least a tenth of the session.
//
// The verdict compares floors, not end points: a garbage-collected heap is a sawtooth, so the
// last sample says more about when the collector last ran than about growth. The time after the
// warm-up is cut into four equal windows and a process fails when the lowest sample of the last
// window is more than SOAK_TOLERANCE above the lowest of the first. Exit status 1 on a failure.
// Run by scripts/app-soak.
//
// Environment: LX_APP (required unless SOAK_JUDGE), SOAK_REQUESTS (40000), SOAK_PROMPT (16), SOAK_MAX (8),
// SOAK_CONC (4), SOAK_EVERY_S (10), SOAK_TOLERANCE (0.05), SOAK_OUT, SOAK_JUDGE (a
// file SOAK_OUT wrote: judge it again, measure nothing), TAURI_DRIVER.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { goLiveOnLlama, openApp, sleep } from "./driver.mjs";
import { appProcesses, perRole } from "./processes.mjs";

const APP = process.env.LX_APP;
const N = Number(process.env.SOAK_REQUESTS ?? 40000);
const P = Number(process.env.SOAK_PROMPT ?? 16);
const M = Number(process.env.SOAK_MAX ?? 8);
const C = Number(process.env.SOAK_CONC ?? 4);
const EVERY = Number(process.env.SOAK_EVERY_S ?? 10) * 1000;
const TOL = Number(process.env.SOAK_TOLERANCE ?? 0.05);
const OUT = process.env.SOAK_OUT;
const JUDGE = process.env.SOAK_JUDGE;
if (!JUDGE && (!APP || !existsSync(APP))) {
  console.error(`LX_APP must name the built app (got ${APP})`);
  process.exit(2);
}

/** The app's resident memory per role, or none when it is gone. */
function sample() {
  const found = appProcesses(APP);
  return found ? perRole(found, "rssBytes") : null;
}

const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** Drive the app live until N requests settled, sampling every EVERY ms. */
async function measure() {
  const { driver, browser: b } = await openApp(APP, Number(process.env.LX_E2E_PORT ?? 4444));
  const samples = [];
  try {
    await goLiveOnLlama(b, { prompt: P, concurrency: C, maxTokens: M });
    const start = Date.now();
    let settled = 0;
    while (settled < N) {
      if (Date.now() - start > 3 * 3600_000) throw new Error(`only ${settled} requests settled in 3 hours`);
      await sleep(EVERY);
      const page = await b.execute(() => ({
        settled: [...window.__lx.store.summaries.values()].reduce((n, s) => n + s.requests, 0),
        elements: document.getElementsByTagName("*").length,
        full: window.__lx.store.done.size === window.__lx.store.done.capacity,
      }));
      settled = page.settled;
      const rss = sample();
      if (!rss) throw new Error("the app is gone");
      const at = (Date.now() - start) / 1000;
      samples.push({ at_s: at, requests: settled, page_elements: page.elements, buffers_full: page.full, rss_bytes: rss });
      console.error(`${at.toFixed(0).padStart(6)} s  ${String(settled).padStart(6)} requests  ${page.elements} elements  ${Object.entries(rss).map(([k, v]) => `${k} ${mib(v)}`).join(", ")}`);
    }
    await b.execute(() => document.querySelector('[data-testid="go-live"]').click());
    await sleep(2000);
  } finally {
    await b.deleteSession().catch(() => undefined);
    driver.kill();
    // WebKitWebDriver does not always close the app (nor its worker, the same binary).
    spawnSync("pkill", ["-f", APP]);
  }
  return samples;
}

// SOAK_JUDGE=FILE judges a session written earlier (SOAK_OUT) instead of measuring one; in
// files from before buffers_full was sampled, the buffer is full from CAPACITY_DONE requests.
const CAPACITY_DONE = 20_000;
const saved = JUDGE ? JSON.parse(readFileSync(JUDGE, "utf8")) : null;
const samples = saved ? saved.memory.map((s) => ({ buffers_full: s.requests >= CAPACITY_DONE, ...s })) : await measure();
const run = saved?.settings ?? { prompt_tokens: P, max_tokens: M, concurrency: C };
let verdict = 0;
const last = samples.at(-1);
const full = samples.find((s) => s.buffers_full);
if (!full) {
  console.error("the page's buffers never filled: run longer (SOAK_REQUESTS) for a verdict");
  process.exit(2);
}
const after = Math.max(last.at_s / 10, full.at_s);
const steady = samples.filter((s) => s.at_s >= after);
/** The lowest value in each quarter of a series (each quarter holds at least one value). */
function floors(values) {
  const bound = (q) => Math.floor((q * values.length) / 4);
  return [0, 1, 2, 3].map((q) => Math.min(...values.slice(bound(q), Math.max(bound(q + 1), bound(q) + 1))));
}
console.log(`\n${last.requests} requests settled in ${(last.at_s / 60).toFixed(1)} min (llama.cpp, continuous, ${run.prompt_tokens}-token prompts, ${run.max_tokens} output tokens, ${run.concurrency} clients); resident memory after the warm-up (from ${after.toFixed(0)} s: the page's buffers full, and a tenth of the session), with the lowest sample of each quarter of that time:\n`);
console.log("| process | first | last | highest | floor, 1st quarter | 2nd | 3rd | 4th | floor change |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const name of Object.keys(last.rss_bytes)) {
  const seen = steady.filter((s) => s.rss_bytes[name] != null).map((s) => s.rss_bytes[name]);
  if (seen.length < 4) continue;
  const f = floors(seen);
  const change = (f[3] - f[0]) / f[0];
  console.log(`| ${name} | ${mib(seen[0])} | ${mib(seen.at(-1))} | ${mib(Math.max(...seen))} | ${f.map(mib).join(" | ")} | ${(change * 100).toFixed(1)}% |`);
  if (change > TOL) verdict = 1;
}
const elements = steady.map((s) => s.page_elements);
if (elements.length >= 4) console.log(`\npage elements: ${elements[0]} after the warm-up, ${elements.at(-1)} at the end, ${Math.max(...elements)} at most`);
if (OUT && !saved) {
  writeFileSync(`${OUT}.tmp`, JSON.stringify({ settings: { prompt_tokens: P, max_tokens: M, concurrency: C, backend: "llama", policy: "continuous" }, memory: samples }, null, 2));
  renameSync(`${OUT}.tmp`, OUT);
  console.log(`\nsamples written to ${OUT}`);
}
process.exit(verdict);
