// Must come first: fixes navigator.language before uPlot (imported below) reads it.
import "./lib/locale-guard";
import "uplot/dist/uPlot.min.css";
import "./styles.css";

import * as api from "./ipc/api";
import { inApp, toAppError } from "./ipc/core";
import type { AppError, BackendAvailability, CatalogModel, FetchEvent, HardwareReport, LiveSettings, ModelInfo } from "./ipc/types";
import { Banner } from "./components/banner";
import { backendLabel, TpsChart, TpsCurve, TtftChart, TtftCurve } from "./components/charts";
import { Overlays } from "./components/overlays";
import { SensorsStrip } from "./components/sensors";
import { SizeChart } from "./components/sizes";
import { DepthChart } from "./components/depths";
import type { Chart } from "./components/chart";
import { Controls } from "./components/controls";
import { HardwarePanel } from "./components/hardware";
import { PreviewPane } from "./components/preview";
import { Readout } from "./components/readout";
import { SweepPanel } from "./components/sweep";
import { Timeline } from "./components/timeline";
import { TunePanel } from "./components/tune";
import { AdvisePanel } from "./components/advise";
import { FidelityPanel } from "./components/fidelity";
import { LessonsView } from "./components/lessons";
import { GalleryPanel } from "./components/gallery";
import { SustainedPanel } from "./components/sustained";
import { h, setText } from "./lib/dom";
import { bytes } from "./lib/format";
import { LiveStore } from "./lib/store";
import { CONTEXT_FALLBACK_TOKENS } from "./ipc/generated/defaults";

const store = new LiveStore();
let model: ModelInfo | null = null;
let backends: BackendAvailability[] = [];
let machine: HardwareReport | null = null;
let starting = false;

// ---------------------------------------------------------------- problems

function problem(e: unknown, kind: "command" | "load" = "command") {
  const err: AppError = toAppError(e);
  store.addProblem({ kind, message: err.message, retry: false });
}

const banner = new Banner(
  () => {
    store.clearProblems();
    if (store.running) void api.liveRetry().catch((e) => problem(e));
    else if (!model) void openModel(modelSelect.value || "default");
    else void goLive();
  },
  (p) => {
    store.problems = store.problems.filter((q) => q !== p);
    store.version++;
  },
);

// ---------------------------------------------------------------- header: model and actions

const modelSelect = h("select", { "aria-label": "model", "data-testid": "model-select" }) as HTMLSelectElement;
const modelStatus = h("span", { class: "model-status", "data-testid": "model-status" }, "starting…");
const modelBar = h("progress", { class: "model-progress", max: 1, hidden: true }) as HTMLProgressElement;
const liveBtn = h("button", { type: "button", class: "primary", "data-testid": "go-live", disabled: true }, "Go live");
const saveBtn = h("button", { type: "button", disabled: true, title: "Save what live mode measured as a run file" }, "Save run");
const csvBtn = h("button", { type: "button", disabled: true, title: "Export live results as CSV" }, "Export CSV");

function setModelList(list: CatalogModel[], current: string | null) {
  const option = (m: CatalogModel) =>
    h(
      "option",
      { value: m.name, selected: m.name === current, title: `${m.description} · ${m.parameters ?? ""} ${m.quantization} · ${bytes(m.size)} · ${m.license}` },
      m.synthetic ? `${m.name.replace(/^synth:/, "")} · ${m.parameters ?? ""}${m.present ? "" : ` · writes ${bytes(m.size)}`}` : `${m.name}${m.is_default ? " (default)" : ""}${m.present ? "" : ` · download ${bytes(m.size)}`}`,
    );
  const synthetic = list.filter((m) => m.synthetic);
  modelSelect.replaceChildren(
    ...list.filter((m) => !m.synthetic).map(option),
    // Shape-only models: the sizes people run, for timing only (their text is noise).
    ...(synthetic.length ? [h("optgroup", { label: "Synthetic: timings only, text is noise" }, ...synthetic.map(option))] : []),
    h("option", { value: "__file__" }, "Open a .gguf file…"),
  );
  if (current && !list.some((m) => m.name === current)) {
    modelSelect.prepend(h("option", { value: current, selected: true }, current));
  }
}

function fetchText(e: FetchEvent): [string, number | null] {
  switch (e.type) {
    case "downloading":
      return [`downloading ${e.name} (${e.part}/${e.parts})…`, null];
    case "transferring":
      return [`downloading ${bytes(e.bytes_done)}${e.bytes_total ? ` of ${bytes(e.bytes_total)}` : ""}`, e.bytes_total ? e.bytes_done / e.bytes_total : null];
    case "extracting":
      return [`extracting part ${e.part}/${e.parts}…`, e.part / e.parts];
    case "verifying":
      return [`verifying sha256 ${bytes(e.bytes_done)} of ${bytes(e.bytes_total)}`, e.bytes_total ? e.bytes_done / e.bytes_total : null];
    case "generating":
      return [`writing a synthetic model: ${bytes(e.bytes_done)} of ${bytes(e.bytes_total)}`, e.bytes_total ? e.bytes_done / e.bytes_total : null];
    case "done":
      return [e.already_present ? "reading the model…" : "fetched and verified; reading the model…", 1];
  }
}

async function openModel(spec: string) {
  if (store.running) await stopLive();
  liveBtn.disabled = true;
  modelSelect.disabled = true;
  setText(modelStatus, `opening ${spec}…`);
  modelBar.hidden = false;
  modelBar.removeAttribute("value");
  try {
    const info = await api.openModel(spec, (e) => {
      const [text, frac] = fetchText(e);
      setText(modelStatus, text);
      if (frac === null) modelBar.removeAttribute("value");
      else modelBar.value = frac;
    });
    setModel(info);
    store.clearProblems();
    // What the cache holds changed (a download, a synthetic model written): say so in the list.
    api.models().then((list) => setModelList(list, info.spec), (e) => problem(e));
  } catch (e) {
    setText(modelStatus, "no model open");
    store.addProblem({ kind: "load", message: `Cannot open the model: ${toAppError(e).message}`, retry: true });
  } finally {
    modelBar.hidden = true;
    modelSelect.disabled = false;
    updateButtons();
  }
}

function setModel(info: ModelInfo) {
  model = info;
  const f = info.facts;
  setText(modelStatus, `${f.synthetic ? "SYNTHETIC: timings only, text is noise · " : ""}${f.name ?? info.name} · ${f.architecture} · ${f.quantization.name} · ${bytes(f.file_size)} · context ${info.context_length}`);
  modelStatus.classList.toggle("synthetic", Boolean(f.synthetic));
  modelStatus.title = info.path;
  controls.setContext(info.context_length);
  hardware.setModel(info);
  // A backend whose model code lacks this architecture is greyed out, with the reason.
  refreshBackends().catch((e) => problem(e));
  void tune.refresh();
  if (![...modelSelect.options].some((o) => o.value === info.spec)) modelSelect.prepend(h("option", { value: info.spec }, info.name));
  modelSelect.value = info.spec;
  store.version++;
}

modelSelect.addEventListener("change", async () => {
  const v = modelSelect.value;
  if (v === "__file__") {
    try {
      const path = await api.pickModelFile();
      if (path) await openModel(path);
      else if (model) modelSelect.value = model.spec;
    } catch (e) {
      problem(e);
    }
    return;
  }
  await openModel(v);
});

// ---------------------------------------------------------------- live mode

function updateButtons() {
  const canRun = model !== null && controls.settings.backends.length > 0 && !sweep.running && !tune.running && !advise.running && !fidelity.running && !lessons.running;
  liveBtn.disabled = !store.running && (!canRun || starting);
  setText(liveBtn, store.running ? "Stop" : starting ? "Starting…" : "Go live");
  liveBtn.classList.toggle("danger", store.running);
  liveBtn.dataset.state = store.running ? "live" : "idle";
  saveBtn.disabled = store.summaries.size === 0;
  csvBtn.disabled = store.summaries.size === 0;
}

async function goLive() {
  if (!model || starting) return;
  starting = true;
  settingsWhileStarting = null;
  updateButtons();
  const settings = { ...controls.settings };
  store.beginSession(settings);
  try {
    await api.liveStart(settings, (batch) => store.apply(batch));
    // Settings changed while the session was starting go to it now that it runs.
    const changed = settingsWhileStarting;
    settingsWhileStarting = null;
    if (changed) await api.liveUpdate(changed);
  } catch (e) {
    store.running = false;
    problem(e);
  } finally {
    starting = false;
    updateButtons();
  }
}

async function stopLive() {
  try {
    await api.liveStop();
  } catch (e) {
    problem(e);
  }
  store.running = false;
  store.version++;
  updateButtons();
}

liveBtn.addEventListener("click", () => void (store.running ? stopLive() : goLive()));
saveBtn.addEventListener("click", async () => {
  try {
    const path = await api.liveSave();
    store.addProblem({ kind: "notice", message: `Live results saved to ${path}`, retry: false });
  } catch (e) {
    problem(e);
  }
});
csvBtn.addEventListener("click", async () => {
  try {
    const path = await api.exportCsv("live");
    if (path) store.addProblem({ kind: "notice", message: `Exported to ${path}`, retry: false });
  } catch (e) {
    problem(e);
  }
});

/** The latest settings changed while Go live was starting its session (sent once it runs). */
let settingsWhileStarting: LiveSettings | null = null;
function onSettings(s: LiveSettings) {
  store.version++;
  updateButtons();
  if (starting) settingsWhileStarting = s;
  else if (store.running) void api.liveUpdate(s).catch((e) => problem(e));
}

const controls = new Controls(onSettings, {
  add: async (spec) => {
    const added = await api.serverAdd(spec);
    await refreshBackends();
    return added.name;
  },
  remove: async (name) => {
    await api.serverRemove(name);
    await refreshBackends();
    onSettings(controls.settings);
  },
}, api.settingsFit);
const current = () => controls.settings;

// ---------------------------------------------------------------- views

function chartCard(title: string, subtitle: string, testid: string, fileName: string, chart: () => Chart) {
  const host = h("div", { class: "chart-host" });
  const empty = h("div", { class: "chart-empty" }, "No requests yet: press Go live.");
  const png = h("button", { type: "button", class: "small ghost", title: "Save this chart as a PNG" }, "PNG");
  png.addEventListener("click", async () => {
    try {
      const bytesPng = await chart().png(title);
      await api.exportPng(fileName, bytesPng);
    } catch (e) {
      problem(e);
    }
  });
  const card = h("section", { class: "card chart", "data-testid": testid }, h("header", { class: "card-head" }, h("span", {}, title), h("span", { class: "muted small" }, subtitle), png), h("div", { class: "chart-body" }, host, empty));
  return { card, host, empty };
}

const ttftCard = chartCard("Time to first token", "each dot a request · line p50, band to p95 · dashed: 1 s feels instant", "chart-ttft", "ttft-over-time.png", () => ttftChart.chart);
const tpsCard = chartCard("Tokens per second", "dots: each request's decode rate · line: all clients together · green: human reading pace", "chart-tps", "tokens-per-second.png", () => tpsChart.chart);
const curveTtftCard = chartCard("TTFT against prompt length", "p50 per setting explored · one line per backend and policy · red dashes: least possible TTFT on this machine (after a sweep)", "curve-ttft", "ttft-vs-prompt.png", () => ttftCurve.chart);
const curveTpsCard = chartCard("Tokens/s against concurrency", "thick: throughput of all clients · thin: each client's decode rate (p50) · red dashes: the machine's throughput ceiling (after a sweep)", "curve-tps", "tps-vs-concurrency.png", () => tpsCurve.chart);

const sizesCard = chartCard("Decode against model size", "one client alone on each model swept (and each saved run) · red dashes: this machine's memory ceiling, bandwidth ÷ bytes a token", "chart-sizes", "decode-vs-model-size.png", () => sizeChart.chart);
const depthsCard = chartCard("Speed against context depth", "prefill (dashed) and decode (solid) p50 with more tokens already in the context · sweeps with several depths (and saved runs)", "chart-depths", "speed-vs-depth.png", () => depthChart.chart);
const ttftChart = new TtftChart(ttftCard.host, store, current);
const tpsChart = new TpsChart(tpsCard.host, store, current);
const sensorsStrip = new SensorsStrip(store);
const overlays = new Overlays(store, (e) => problem(e));
tpsCard.card.append(sensorsStrip.el);
const ttftCurve = new TtftCurve(curveTtftCard.host, store, current);
const tpsCurve = new TpsCurve(curveTpsCard.host, store, current);
const sizeChart = new SizeChart(sizesCard.host, store);
sizesCard.card.append(sizeChart.caption);
const depthChart = new DepthChart(depthsCard.host, store);
depthsCard.card.append(depthChart.caption);
const readout = new Readout(store);
const preview = new PreviewPane(store, () => void api.livePreviewNext().catch(() => undefined));
const timeline = new Timeline(store);
const hardware = new HardwarePanel(store, (onRow) => api.checkBackends(onRow), api.machineSpeed, api.memoryFit);
const tune = new TunePanel({
  status: api.tuneStatus,
  start: api.tuneStart,
  cancel: api.tuneCancel,
  beforeStart: async () => {
    if (store.running) await stopLive();
  },
  changed: () => updateButtons(),
  error: (e) => problem(e),
});
hardware.el.append(tune.el);
const advise = new AdvisePanel({
  presets: api.advisePresets,
  backends: () => controls.settings.backends,
  start: api.adviseStart,
  cancel: api.adviseCancel,
  beforeStart: async () => {
    if (store.running) await stopLive();
  },
  changed: () => updateButtons(),
  error: (e) => problem(e),
});
const fidelity = new FidelityPanel({
  // The backends of this build selected on the left (servers cannot score a text); every
  // backend of the build when none is.
  backends: () => controls.settings.backends.filter((name) => backends.some((b) => b.name === name && !b.server && b.available)),
  start: api.fidelityStart,
  cancel: api.fidelityCancel,
  beforeStart: async () => {
    if (store.running) await stopLive();
  },
  measured: (candidates) => {
    readout.fidelity = candidates;
    readout.update();
  },
  changed: () => updateButtons(),
  error: (e) => problem(e),
});
const gallery = new GalleryPanel(api.galleryAdd, api.pickBenchFiles, (e) => problem(e));
const sustained = new SustainedPanel(api.liveSustained, () => store.running);
const lessons = new LessonsView({
  lessons: api.lessons,
  backends: () => backends,
  preferred: () => controls.settings.backends[0],
  start: api.lessonStart,
  cancel: api.lessonCancel,
  handout: api.lessonHandout,
  pickRun: api.pickRunFile,
  beforeStart: async () => {
    if (store.running) await stopLive();
  },
  moveControls: (to) => controls.moveTo(to),
  machine: () => (machine ? `${machine.cpu}, ${machine.physical_cores} cores${machine.gpus?.length ? `, ${machine.gpus.join("; ")}` : ""}` : "this machine"),
  changed: () => updateButtons(),
  error: (e) => problem(e),
  notice: (message) => store.addProblem({ kind: "notice", message, retry: false }),
});

// A first start offers the first lesson; the dashboard stays one click away.
const WELCOMED = "lx.welcomed";
const welcome = h(
  "section",
  { class: "card welcome", "data-testid": "welcome", "aria-label": "welcome", hidden: localStorage.getItem(WELCOMED) !== null },
  h("div", {}, h("strong", {}, "New here? "), "Start with a lesson: the app asks a question about speed, you predict, it measures the answer on this machine."),
);
{
  const startFirst = h("button", { type: "button", class: "primary", "data-testid": "welcome-start" }, "Start the first lesson");
  const dismiss = h("button", { type: "button", class: "ghost", "data-testid": "welcome-dismiss" }, "Show me the dashboard");
  const done = () => {
    localStorage.setItem(WELCOMED, "1");
    welcome.hidden = true;
  };
  startFirst.addEventListener("click", () => {
    done();
    void lessons.openFirst();
  });
  dismiss.addEventListener("click", done);
  welcome.append(h("div", { class: "welcome-actions" }, startFirst, dismiss));
}

const sweep = new SweepPanel({
  backends: () => controls.settings.backends,
  parseLengths: api.parseLengths,
  context: () => model?.context_length ?? CONTEXT_FALLBACK_TOKENS,
  start: async (plan, options, onEvent) => {
    if (store.running) await stopLive();
    updateButtons();
    const path = await api.sweepStart(plan, options, (e) => {
      onEvent(e);
      if (e.type === "finished" || e.type === "failed") updateButtons();
    });
    updateButtons();
    return path;
  },
  cancel: () => api.sweepCancel().catch((e) => problem(e)),
  exportCsv: () => api.exportCsv("sweep").then(() => undefined).catch((e) => problem(e)),
  onPoint: (e, weightBytes) => {
    store.addSweepPoint(e);
    store.addDepthPoint(e.point);
    if (model && weightBytes) store.addSizePoint(e.point, model.facts.name ?? model.name, !!model.facts.synthetic, weightBytes);
  },
  onLimits: (limits) => {
    store.limits.set(limits.device, limits);
    store.summaryVersion++;
  },
  error: (e) => problem(e),
});

// ---------------------------------------------------------------- layout

const app = document.getElementById("app")!;
app.replaceChildren(
  h(
    "header",
    { class: "topbar" },
    h("div", { class: "brand" }, h("span", { class: "logo", "aria-hidden": "true" }), "Latency Explorer"),
    h("div", { class: "model" }, h("label", { class: "muted small" }, "Model"), modelSelect, h("div", { class: "model-info" }, modelStatus, modelBar)),
    h("div", { class: "actions" }, lessons.openBtn, liveBtn, saveBtn, csvBtn, overlays.openBtn),
  ),
  h(
    "div",
    { class: "layout" },
    h("aside", { class: "sidebar" }, controls.el, h("p", { class: "muted small note" }, "With several backends selected they are measured in turn, never at the same time (", h("abbr", { title: "each is measured for 8 s, then hands over after its requests finish" }, "8 s each"), ").")),
    h(
      "main",
      { class: "main" },
      lessons.el,
      banner.el,
      welcome,
      readout.el,
      h("div", { class: "grid2" }, ttftCard.card, tpsCard.card),
      h("div", { class: "grid2" }, preview.el, timeline.el),
      sustained.el,
      overlays.el,
      h("div", { class: "grid2" }, curveTtftCard.card, curveTpsCard.card),
      h("div", { class: "grid2" }, sizesCard.card, depthsCard.card),
      h("div", { class: "grid2 wide-right" }, hardware.el, sweep.el),
      advise.el,
      fidelity.el,
      gallery.el,
    ),
  ),
);
app.removeAttribute("aria-busy");

// ---------------------------------------------------------------- the update loop

// The UI must not perturb the measurement: it shares the machine with the model, and on a
// small machine every repaint is taken from a backend thread (llama.cpp's threads wait for
// each other, so a stolen slice stalls all of them). Measured under Xvfb on 2 cores, live:
// the web view used 7% of a core drawing at 5 Hz (2 Hz for the charts), 2% with nothing
// drawn, whatever part was hidden; it is the number of repaints that costs, not their
// size. So it redraws rarely: the preview 4 times a second (the reader marker moves about a
// token per frame at 4.5 tok/s), the time charts, readout and timeline once a second and
// only when something changed, the curves only when a summary changed. Even that cost 8% of
// llama.cpp's decode with its threads on every core, so "auto" threads leave the window a
// core where there are no spare hyper-threads (src-tauri's app_threads; docs/APP.md).
/** The readout's ceiling follows the setting and the backend measured: asked for again only
 *  when either changed (or the backend finished loading). */
let ceilingFor = "";
function refreshCeiling() {
  const backend = store.activeBackend();
  const s = store.settings;
  const key = store.running && backend && s ? `${backend}|${store.backends.get(backend)?.info?.device}|${s.prompt_tokens}|${s.max_tokens}|${s.concurrency}` : "";
  if (key === ceilingFor) return;
  ceilingFor = key;
  if (!key || !backend) return void (readout.ceiling = null);
  api.liveCeiling(backend).then(
    (c) => {
      if (ceilingFor === key) readout.ceiling = c;
    },
    () => {
      if (ceilingFor === key) readout.ceiling = null;
    },
  );
}

const TICK_MS = 250;
const CHARTS_MS = 1000;
let drawnVersion = -1;
let drawnCurves = "";
let lastCharts = 0;
let lastTimeline = 0;
let timelineVersion = -1;
function update() {
  // A hidden (minimised) window draws nothing: the data keeps arriving into the store.
  if (document.hidden) return;
  const t = performance.now();
  try {
    preview.frame(t);
    if (store.version !== drawnVersion && t - lastCharts >= CHARTS_MS) {
      drawnVersion = store.version;
      lastCharts = t;
      ttftCard.empty.hidden = ttftChart.update() > 0;
      tpsCard.empty.hidden = tpsChart.update() > 0;
      sensorsStrip.update();
      const s = controls.settings;
      const curvesSig = `${store.summaryVersion}|${s.prompt_tokens}|${s.concurrency}|${s.max_tokens}|${s.chunk_tokens}`;
      if (curvesSig !== drawnCurves) {
        drawnCurves = curvesSig;
        curveTtftCard.empty.hidden = ttftCurve.update() > 0;
        curveTpsCard.empty.hidden = tpsCurve.update() > 0;
        sizesCard.empty.hidden = sizeChart.update() > 0;
        depthsCard.empty.hidden = depthChart.update() > 0;
      }
      refreshCeiling();
      readout.update();
      hardware.update();
      banner.update(store.problems);
      updateButtons();
    }
    const moving = store.inFlight.size > 0 && store.running;
    if ((moving && t - lastTimeline >= CHARTS_MS) || timelineVersion !== store.version) {
      if (t - lastTimeline >= CHARTS_MS) {
        lastTimeline = t;
        timelineVersion = store.version;
        timeline.update(t);
      }
    }
  } catch (e) {
    console.error(e);
  }
}
setInterval(update, TICK_MS);
curveTtftCard.empty.textContent = "Settled requests at two or more prompt lengths draw this curve.";
curveTpsCard.empty.textContent = "Settled requests at two or more concurrencies draw this curve.";
depthsCard.empty.textContent = "Sweep with several depths (More options: Depths, e.g. 0,4096,16384), or open a saved run that has them.";
sizesCard.empty.textContent = "Sweep a model with one client, then another (pick it above): each adds its decode rate here.";

// ---------------------------------------------------------------- start-up

/** The backends of this build and the servers added, into the controls and the panel. */
async function refreshBackends() {
  const list = await api.backends();
  backends = list;
  controls.setBackends(list);
  hardware.setBackends(list);
  updateButtons();
}

async function boot() {
  if (!inApp) {
    store.addProblem({ kind: "command", message: "This page is Latency Explorer's interface: start it with scripts/app-start, not in a browser.", retry: false });
    return;
  }
  refreshBackends().catch((e) => problem(e));
  void advise.load();
  api.hardware().then(
    (hw) => {
      machine = hw;
      hardware.setHardware(hw);
    },
    (e) => problem(e),
  );
  void lessons.load();
  void hardware.loadSpeed(false);
  try {
    const [list, open] = await Promise.all([api.models(), api.currentModel()]);
    setModelList(list, open?.spec ?? list.find((m) => m.is_default)?.name ?? null);
    if (open) setModel(open);
    else await openModel(list.find((m) => m.is_default)?.name ?? "default");
  } catch (e) {
    problem(e, "load");
  }
}
void boot();

// For end-to-end tests and debugging: what the views hold (read-only use).
declare global {
  interface Window {
    __lx?: unknown;
  }
}
window.__lx = {
  store,
  settings: () => controls.settings,
  ttftPoints: () => ttftChart.drawn,
  tpsPoints: () => tpsChart.drawn,
  sensorsSeries: () => sensorsStrip.chart.series(),
  openRun: (path: string) => overlays.openAt(path),
  sizesData: () => sizeChart.chart.data(),
  depthsData: () => depthChart.chart.data(),
  timeSeries: () => ({ ttft: ttftChart.chart.series().map((s) => s.label), tps: tpsChart.chart.series().map((s) => s.label) }),
  ttftChartData: () => ttftChart.chart.data(),
  curves: () => ({ ttft: ttftCurve.chart.series(), tps: tpsCurve.chart.series(), sizes: sizeChart.chart.series(), depths: depthChart.chart.series() }),
  backends: () => backends,
  model: () => model,
  label: backendLabel,
  lessons,
  fidelity: () => ({ drawn: fidelity.drawn, series: fidelity.chart.series(), running: fidelity.running }),
  gallery,
  sustained,
};
