// Does drawing live perturb the measurement? Measures one setting three times on the default
// model with llama.cpp: headless with `lx sweep`, live in the app (drawing charts, the
// preview and the timeline), and headless again; then compares the app's figures with the
// mean of the two headless runs. Run by scripts/app-bench under Xvfb.
//
// Environment: LX_APP and LX_CLI (binaries, required); BENCH_PROMPT (256), BENCH_CONC (1),
// BENCH_MAX (64), BENCH_REQUESTS (24), BENCH_THREADS (0: all physical cores),
// BENCH_TOLERANCE (0.05), TAURI_DRIVER.

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { openApp, sleep } from "./driver.mjs";

const APP = process.env.LX_APP;
const CLI = process.env.LX_CLI;
const P = Number(process.env.BENCH_PROMPT ?? 256);
const C = Number(process.env.BENCH_CONC ?? 1);
const M = Number(process.env.BENCH_MAX ?? 64);
const R = Number(process.env.BENCH_REQUESTS ?? 24);
const T = Number(process.env.BENCH_THREADS ?? 0);
const TOL = Number(process.env.BENCH_TOLERANCE ?? 0.05);

for (const [name, file] of [["LX_APP", APP], ["LX_CLI", CLI]]) {
  if (!file || !existsSync(file)) {
    console.error(`${name} must name a built binary (got ${file})`);
    process.exit(2);
  }
}

function headless(label) {
  const out = path.join(mkdtempSync(path.join(tmpdir(), "lx-bench-")), "run.json");
  const args = ["sweep", "--backend", "llama", "--policy", "continuous", "--prompt-tokens", P, "--concurrency", C, "--max-tokens", M, "--requests", R, "--warmup", Math.max(C, 2), ...(T > 0 ? ["--threads", T] : []), "--format", "csv", "--out", out].map(String);
  console.error(`${label}: ${CLI} ${args.join(" ")}`);
  const r = spawnSync(CLI, args, { stdio: ["ignore", "ignore", "inherit"] });
  if (r.status !== 0) throw new Error(`lx sweep failed with status ${r.status}`);
  const p = JSON.parse(readFileSync(out, "utf8")).points[0];
  return { ttft: p.ttft_ms.p50, decode: p.decode_tps.p50, throughput: p.throughput_tps, requests: p.requests };
}

async function live() {
  const { driver, browser: b } = await openApp(APP, 4444);
  try {
    for (let i = 0; !(await b.execute(() => window.__lx?.model() != null)); i++) {
      if (i > 600) throw new Error("the model did not open");
      await sleep(500);
    }
    await b.execute((p, c, m, t) => {
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
      set('[data-testid="threads"]', t, "change");
    }, P, C, M, T);
    await sleep(500);
    await b.execute(() => document.querySelector('[data-testid="go-live"]').click());
    const start = Date.now();
    let s = null;
    while (!s || s.requests < R) {
      if (Date.now() - start > 30 * 60_000) throw new Error("live mode did not settle enough requests in 30 minutes");
      await sleep(1000);
      s = await b.execute((p, c, m) => {
        const v = [...window.__lx.store.summaries.values()].find((x) => x.key.backend === "llama" && x.key.promptTokens === p && x.key.concurrency === c && x.key.maxTokens === m && x.key.policy === "continuous");
        return v ? { ttft: v.ttftMs.p50, decode: v.decodeTps.p50, throughput: v.throughputTps, requests: v.requests } : null;
      }, P, C, M);
    }
    await b.execute(() => document.querySelector('[data-testid="go-live"]').click());
    await sleep(2000);
    return s;
  } finally {
    await b.deleteSession().catch(() => undefined);
    driver.kill();
    // WebKitWebDriver does not always close the app (nor its worker, the same binary).
    spawnSync("pkill", ["-f", APP]);
  }
}

const a = headless("headless (before)");
const app = await live();
const z = headless("headless (after)");
const rows = ["ttft", "decode", "throughput"].map((k) => {
  const base = (a[k] + z[k]) / 2;
  return { figure: k, before: a[k], app: app[k], after: z[k], deviation: (app[k] - base) / base, noise: Math.abs(a[k] - z[k]) / base };
});
const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2));
console.log(`\nsetting: llama.cpp, continuous, ${P}-token prompts, ${C} client(s), ${M} output tokens, ${T > 0 ? T : "all physical cores'"} threads, ${R} requests per measurement`);
console.log("| figure | lx sweep before | app, drawing live | lx sweep after | app vs headless mean | headless before vs after |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
const unit = { ttft: "TTFT p50 (ms)", decode: "decode p50 (tok/s)", throughput: "throughput (tok/s)" };
for (const r of rows) console.log(`| ${unit[r.figure]} | ${fmt(r.before)} | ${fmt(r.app)} | ${fmt(r.after)} | ${(r.deviation * 100).toFixed(1)}% | ${(r.noise * 100).toFixed(1)}% |`);
const worst = Math.max(...rows.map((r) => Math.abs(r.deviation)));
const noise = Math.max(...rows.map((r) => r.noise));
console.log(`\nworst deviation ${(worst * 100).toFixed(1)}% (tolerance ${(TOL * 100).toFixed(0)}%); headless noise ${(noise * 100).toFixed(1)}%; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
if (worst <= TOL) process.exit(0);
// When the two headless runs disagree by more than the tolerance, the machine itself moved
// (other processes: llama.cpp's threads spin-wait, so any neighbour shows), and the app's
// deviation says nothing about the app. Say so, with its own exit status, instead of
// blaming the app.
if (noise > TOL) {
  console.log("inconclusive: the machine's own noise exceeds the tolerance; rerun it on an idle machine");
  process.exit(3);
}
process.exit(1);
