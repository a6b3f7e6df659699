/**
 * Lessons: every teaching demo of the engine (`lx demo --list`) as four steps a teacher can
 * project: the question, a prediction (a shape to pick), the measurement run live on this
 * machine (the controls move to each setting, the output streams, the figures settle), and
 * the answer: the measured shape beside the predicted one, the demo's own checks and
 * sentence, and why. Keyboard: → and ← step, Space holds the screen still, P presents, Esc
 * leaves.
 */
import { h, setText } from "../lib/dom";
import { positionOf, STEPS } from "../lib/scale";
import type { BackendAvailability, Lesson, LessonEvent, PointFigures, Policy, Report } from "../ipc/types";
import { backendLabel } from "./charts";
import { measured, sketch, type Drawn } from "./lesson-svg";

export interface LessonDeps {
  lessons: () => Promise<Lesson[]>;
  /** Backends of this build and servers the user added. */
  backends: () => BackendAvailability[];
  /** The backend selected on the left (the first), the lesson's default. */
  preferred: () => string | undefined;
  start: (name: string, backend: string, onEvent: (e: LessonEvent) => void) => Promise<string>;
  cancel: () => Promise<void>;
  handout: (runs: string[]) => Promise<string>;
  pickRun: () => Promise<string | null>;
  /** Called before measuring (live mode is stopped: the two would compete). */
  beforeStart: () => Promise<void>;
  /** The lesson moves the app's controls to the setting it measures next. */
  moveControls: (to: { promptTokens: number; concurrency: number; maxTokens: number; policy: Policy }) => void;
  /** This machine in a line (CPU, cores). */
  machine: () => string;
  /** A lesson started or ended: other controls may change state. */
  changed: () => void;
  error: (e: unknown) => void;
  notice: (message: string) => void;
}

const STEP_NAMES = ["Question", "Predict", "Measure", "Answer"] as const;
const PREVIEW_CHARS = 700;
const CHART_CLIENTS = 16;

interface PointState {
  label: string;
  values: (number | null)[];
  /** The point's figures once it settled. */
  figures: PointFigures | null;
  done: number;
  total: number;
  state: "waiting" | "running" | "done";
}

/** One measurement of one lesson. */
interface Measurement {
  backend: string;
  running: boolean;
  path: string | null;
  points: PointState[];
  device: string;
  text: string;
  report: Report | null;
  stopped: boolean;
  failed: string | null;
  status: string;
  /** How the backend loaded (empty until it has). */
  loaded: string;
}

function fmt(v: number): string {
  // A divergence of 1e-4 is not 0.00.
  return v !== 0 && Math.abs(v) < 0.01 ? v.toExponential(1) : v.toFixed(2);
}

const OPS: Record<string, string> = { ">=": "≥", "<=": "≤", ">": ">", "<": "<" };

export class LessonsView {
  readonly el: HTMLElement;
  readonly openBtn = h("button", { type: "button", "data-testid": "lessons-open", title: "Guided lessons: each teaching demo as a question, a prediction, a live measurement and its answer" }, "Lessons") as HTMLButtonElement;
  private list: Lesson[] = [];
  private lesson: Lesson | null = null;
  private step = 0;
  private choice: number | null = null;
  private m: Measurement | null = null;
  private paused = false;
  private held: LessonEvent[] = [];
  private extraRuns: string[] = [];

  private presentBtn = h("button", { type: "button", class: "small", "data-testid": "lesson-present", "aria-pressed": "false", title: "Full screen, large type, for a projector (P)" }, "Present");
  private closeBtn = h("button", { type: "button", class: "small ghost", "data-testid": "lessons-close", title: "Back to the dashboard (Esc)" }, "Close");
  private title = h("h2", { class: "lesson-title", "data-testid": "lesson-title" }, "Lessons");
  private stepper = h("nav", { class: "lesson-steps", "aria-label": "lesson steps" });
  private body = h("div", { class: "lesson-body", "data-testid": "lesson-body" });
  private backBtn = h("button", { type: "button", "data-testid": "lesson-back" }, "← Back") as HTMLButtonElement;
  private nextBtn = h("button", { type: "button", class: "primary", "data-testid": "lesson-next" }, "Next →") as HTMLButtonElement;
  private pauseNote = h("span", { class: "lesson-paused", "data-testid": "lesson-paused", hidden: true, role: "status" }, "Paused: the measurement goes on, the screen holds still (Space resumes)");
  private foot = h("footer", { class: "lesson-foot" }, this.backBtn, this.nextBtn, this.pauseNote, h("span", { class: "muted small lesson-keys" }, "→ next · ← back · Space hold the screen · P present · Esc leave"));

  // The measure step's parts, updated in place while it runs.
  private promptMeter = h("input", { type: "range", min: 0, max: STEPS, step: 1, disabled: true, "aria-label": "prompt tokens the lesson measures", "data-testid": "lesson-prompt" }) as HTMLInputElement;
  private promptValue = h("output", { class: "meter-value", "data-testid": "lesson-prompt-value" }, "–");
  private clientsMeter = h("input", { type: "range", min: 1, max: CHART_CLIENTS, step: 1, disabled: true, "aria-label": "clients the lesson measures", "data-testid": "lesson-clients" }) as HTMLInputElement;
  private clientsValue = h("output", { class: "meter-value", "data-testid": "lesson-clients-value" }, "–");
  private policyValue = h("output", { class: "meter-value", "data-testid": "lesson-policy" }, "–");
  private pointList = h("ol", { class: "lesson-points", "data-testid": "lesson-points" });
  private preview = h("div", { class: "lesson-preview", "data-testid": "lesson-preview", "aria-label": "the output being written" });
  private chart = h("div", { class: "lesson-chart", "data-testid": "lesson-chart" });
  private status = h("p", { class: "lesson-status", "data-testid": "lesson-status", role: "status" });
  private cancelBtn = h("button", { type: "button", class: "danger", "data-testid": "lesson-cancel" }, "Stop") as HTMLButtonElement;

  constructor(private deps: LessonDeps) {
    this.el = h(
      "section",
      { class: "lessons", "data-testid": "lessons", "aria-label": "lessons", hidden: true },
      h("header", { class: "lesson-head" }, this.title, this.stepper, h("span", { class: "grow" }), this.presentBtn, this.closeBtn),
      this.body,
      this.foot,
    );
    this.openBtn.addEventListener("click", () => this.open());
    this.closeBtn.addEventListener("click", () => this.close());
    this.presentBtn.addEventListener("click", () => this.present(!this.presenting));
    this.backBtn.addEventListener("click", () => this.back());
    this.nextBtn.addEventListener("click", () => this.next());
    this.cancelBtn.addEventListener("click", () => void this.stop());
    document.addEventListener("keydown", (e) => this.key(e));
    document.addEventListener("fullscreenchange", () => {
      if (!document.fullscreenElement && this.presenting) this.present(false);
    });
  }

  get isOpen(): boolean {
    return !this.el.hidden;
  }

  get running(): boolean {
    return this.m?.running ?? false;
  }

  get presenting(): boolean {
    return document.body.classList.contains("presenting");
  }

  async load(): Promise<void> {
    try {
      this.list = await this.deps.lessons();
    } catch (e) {
      this.deps.error(e);
    }
  }

  /** Open the list, or lesson `name` at its question. */
  async open(name?: string): Promise<void> {
    if (this.list.length === 0) await this.load();
    this.el.hidden = false;
    document.body.classList.add("lessons-open");
    if (name) this.begin(name);
    else if (!this.lesson) this.render();
    this.focusFirst();
  }

  /** The first lesson, at its question. */
  async openFirst(): Promise<void> {
    if (this.list.length === 0) await this.load();
    await this.open(this.list[0]?.name);
  }

  close(): void {
    this.present(false);
    this.el.hidden = true;
    document.body.classList.remove("lessons-open");
    this.openBtn.focus();
  }

  private present(on: boolean): void {
    document.body.classList.toggle("presenting", on);
    this.presentBtn.setAttribute("aria-pressed", String(on));
    setText(this.presentBtn, on ? "Leave presentation" : "Present");
    // The web view's own full screen where it allows it; the page covers the window either way.
    if (on && !document.fullscreenElement) void document.documentElement.requestFullscreen?.().catch(() => undefined);
    if (!on && document.fullscreenElement) void document.exitFullscreen().catch(() => undefined);
    if (this.chart.isConnected) this.drawChart();
  }

  private begin(name: string): void {
    const lesson = this.list.find((l) => l.name === name);
    if (!lesson) return;
    if (this.m?.running && this.lesson?.name !== name) {
      this.deps.notice(`Lesson ${this.lesson?.name} is still measuring: stop it (or let it finish) before another.`);
      return;
    }
    if (this.lesson?.name !== name) {
      this.m = null;
      this.choice = null;
      this.extraRuns = [];
    }
    this.lesson = lesson;
    this.step = 0;
    this.render();
  }

  private back(): void {
    if (!this.lesson) return;
    if (this.step === 0) {
      this.lesson = null;
      this.render();
    } else {
      this.step -= 1;
      this.render();
    }
    this.focusFirst();
  }

  private next(): void {
    if (!this.lesson) return;
    if (this.step === 1 && !this.m?.running && !this.m?.report) {
      this.step = 2;
      this.render();
      void this.measure();
      return;
    }
    if (this.step === 2 && !this.canAnswer()) return;
    if (this.step < STEP_NAMES.length - 1) {
      this.step += 1;
      this.render();
      this.focusFirst();
    }
  }

  private canAnswer(): boolean {
    return this.m !== null && !this.m.running && (this.m.report !== null || this.m.failed !== null);
  }

  private key(e: KeyboardEvent): void {
    if (!this.isOpen || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target as HTMLElement | null;
    const typing = t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA");
    if (e.key === "Escape") {
      e.preventDefault();
      if (this.presenting) this.present(false);
      else this.close();
      return;
    }
    if (typing) return;
    if (e.key === "ArrowRight" || e.key === "PageDown") {
      e.preventDefault();
      this.next();
    } else if (e.key === "ArrowLeft" || e.key === "PageUp") {
      e.preventDefault();
      this.back();
    } else if (e.key === " " && t?.tagName !== "BUTTON") {
      e.preventDefault();
      this.pause(!this.paused);
    } else if (e.key === "p" || e.key === "P") {
      e.preventDefault();
      this.present(!this.presenting);
    }
  }

  /** Hold the screen still (the measurement goes on); on resume, show what came meanwhile. */
  private pause(on: boolean): void {
    this.paused = on;
    this.pauseNote.hidden = !on;
    if (!on) {
      const held = this.held;
      this.held = [];
      for (const e of held) this.apply(e);
    }
  }

  private focusFirst(): void {
    const target = this.body.querySelector<HTMLElement>("[data-autofocus]") ?? this.nextBtn;
    if (!target.hasAttribute("disabled")) target.focus();
  }

  // ------------------------------------------------------------ measuring

  private async measure(): Promise<void> {
    const lesson = this.lesson;
    const backend = this.backendChoice();
    if (!lesson || !backend) return;
    await this.deps.beforeStart();
    this.extraRuns = [];
    this.m = {
      backend,
      running: true,
      path: null,
      points: lesson.labels.map((label) => ({ label, values: lesson.figures.map(() => null), figures: null, done: 0, total: 0, state: "waiting" })),
      device: "",
      text: "",
      report: null,
      stopped: false,
      failed: null,
      status: `starting ${backendLabel(backend)}…`,
      loaded: "",
    };
    setText(this.preview, "");
    this.render();
    this.deps.changed();
    try {
      const path = await this.deps.start(lesson.name, backend, (e) => (this.paused && e.type !== "finished" && e.type !== "failed" ? this.held.push(e) : this.apply(e)));
      if (this.m) this.m.path = path;
    } catch (e) {
      if (this.m) {
        this.m.running = false;
        this.m.failed = (e as { message?: string }).message ?? String(e);
      }
      this.deps.error(e);
      this.refreshMeasure();
      this.deps.changed();
    }
  }

  private async stop(): Promise<void> {
    this.cancelBtn.disabled = true;
    setText(this.status, "stopping: the request in flight is cancelled…");
    try {
      await this.deps.cancel();
    } catch (e) {
      this.deps.error(e);
    }
  }

  private apply(e: LessonEvent): void {
    const m = this.m;
    if (!m) return;
    switch (e.type) {
      case "started":
        m.path = e.path;
        this.el.dataset.run = e.path;
        break;
      case "loading":
        m.loaded = `loading the model on ${backendLabel(e.backend)}…`;
        break;
      case "fidelity":
        m.status = `scoring a fixed text against llama.cpp's f16 cache: ${e.what}…`;
        break;
      case "loaded":
        m.device = `${backendLabel(e.backend)} on ${e.device}`;
        m.loaded = `${m.device}: loaded in ${(e.load_ms / 1000).toFixed(1)} s`;
        break;
      case "pointStarted": {
        const p = m.points[e.index];
        if (p) Object.assign(p, { label: e.label, state: "running", done: 0, total: e.requests });
        m.status = `measuring ${e.label}: ${e.prompt_tokens} prompt tokens, ${e.concurrency} client${e.concurrency === 1 ? "" : "s"}, ${e.policy}`;
        this.moveMeters(e.prompt_tokens, e.concurrency, e.policy);
        this.deps.moveControls({ promptTokens: e.prompt_tokens, concurrency: e.concurrency, maxTokens: e.max_tokens, policy: e.policy });
        break;
      }
      case "text":
        m.text = (e.fresh ? "" : m.text) + e.text;
        if (m.text.length > PREVIEW_CHARS) m.text = m.text.slice(m.text.length - PREVIEW_CHARS);
        setText(this.preview, m.text);
        return;
      case "progress": {
        const p = m.points.find((q) => q.state === "running");
        if (p) Object.assign(p, { done: e.done, total: e.total });
        break;
      }
      case "pointDone": {
        const p = m.points[e.index];
        if (p) Object.assign(p, { label: e.label, values: e.values, figures: e.point, state: "done" });
        if (e.point.errors > 0) m.status = `${e.label}: ${e.point.errors} request(s) failed: ${e.point.error_messages[0] ?? ""}`;
        break;
      }
      case "finished":
        m.running = false;
        m.report = e.report;
        m.stopped = e.stopped;
        m.path = e.path;
        e.report.rows.forEach((row, i) => {
          if (m.points[i] && row[0]) m.points[i].label = row[0];
        });
        m.status = e.stopped ? "stopped: what was measured is kept" : e.report.held ? "measured: → for the answer" : "measured, but the point did not show: → for why";
        this.deps.changed();
        if (this.paused) this.pause(false);
        break;
      case "failed":
        m.running = false;
        m.failed = e.message;
        m.status = `the lesson could not run: ${e.message}`;
        this.deps.changed();
        break;
    }
    this.refreshMeasure();
  }

  /** The lesson's own meters glide to the next setting, where a room can see them move. */
  private moveMeters(prompt: number, clients: number, policy: Policy): void {
    const glide = (el: HTMLInputElement, to: number) => {
      const from = Number(el.value);
      const t0 = performance.now();
      const tick = (t: number) => {
        const k = Math.min(1, (t - t0) / 400);
        el.value = String(Math.round(from + (to - from) * k));
        if (k < 1) requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    };
    glide(this.promptMeter, positionOf(prompt, 32_768));
    glide(this.clientsMeter, Math.min(clients, CHART_CLIENTS));
    setText(this.promptValue, `${prompt} tokens`);
    setText(this.clientsValue, `${clients}`);
    setText(this.policyValue, policy);
    for (const el of [this.promptValue, this.clientsValue, this.policyValue]) {
      el.classList.remove("moved");
      void el.offsetWidth;
      el.classList.add("moved");
    }
  }

  private refreshMeasure(): void {
    const m = this.m;
    if (!m || !this.lesson) return;
    setText(this.status, m.running && m.loaded ? `${m.status} · ${m.loaded}` : m.status);
    this.cancelBtn.hidden = !m.running;
    this.cancelBtn.disabled = false;
    this.pointList.replaceChildren(
      ...m.points.map((p) => {
        const state = p.state === "running" ? `measuring ${p.done}/${p.total || "?"}` : p.state === "done" ? "done" : "waiting";
        const bar = h("progress", { max: Math.max(1, p.total), value: p.state === "done" ? Math.max(1, p.total) : p.done, "aria-label": `${p.label} progress` });
        return h("li", { "data-state": p.state }, h("span", { class: "point-label" }, p.label), bar, h("span", { class: "muted small" }, state));
      }),
    );
    this.drawChart();
    this.nextBtn.disabled = this.step === 2 && !this.canAnswer();
    this.deps.changed();
  }

  /** The figures as measured so far. */
  private drawn(): Drawn[] {
    const lesson = this.lesson;
    const m = this.m;
    if (!lesson) return [];
    return lesson.figures.map((f, i) => ({
      label: f.label,
      unit: f.unit,
      points: f.points.map((p) => ({ name: m?.points[p]?.label ?? lesson.labels[p], value: m?.points[p]?.values[i] ?? null })),
    }));
  }

  private drawChart(): void {
    this.chart.replaceChildren(...measured(this.drawn()));
  }

  private backendChoice(): string | undefined {
    const select = this.body.querySelector<HTMLSelectElement>("[data-testid=lesson-backend]");
    return select?.value || this.defaultBackend();
  }

  private defaultBackend(): string | undefined {
    const usable = this.deps.backends().filter((b) => b.available && (!b.server || this.lesson?.on_a_server));
    const preferred = this.deps.preferred();
    return usable.find((b) => b.name === preferred)?.name ?? usable[0]?.name;
  }

  // ------------------------------------------------------------ drawing the steps

  private render(): void {
    const lesson = this.lesson;
    this.stepper.replaceChildren();
    if (!lesson) {
      setText(this.title, "Lessons");
      this.body.replaceChildren(this.listView());
      this.foot.hidden = true;
      return;
    }
    this.foot.hidden = false;
    setText(this.title, `Lesson ${this.list.indexOf(lesson) + 1}: ${lesson.name}`);
    this.stepper.replaceChildren(
      ...STEP_NAMES.map((name, i) => h("span", { class: "lesson-step", "aria-current": i === this.step ? "step" : null, "data-done": i < this.step ? "true" : null }, `${i + 1} ${name}`)),
    );
    const views = [() => this.questionView(lesson), () => this.predictView(lesson), () => this.measureView(), () => this.answerView(lesson)];
    this.body.replaceChildren(views[this.step]());
    this.body.dataset.step = STEP_NAMES[this.step].toLowerCase();
    this.backBtn.disabled = false;
    setText(this.backBtn, this.step === 0 ? "← All lessons" : "← Back");
    setText(this.nextBtn, this.step === 1 ? (this.m?.report ? "See the measurement →" : "Measure →") : "Next →");
    this.nextBtn.disabled = this.step === 2 && !this.canAnswer();
    // The answer's own buttons go on (the next lesson, again, the handout).
    this.nextBtn.hidden = this.step === 3;
    if (this.step === 2) this.refreshMeasure();
  }

  private listView(): HTMLElement {
    return h(
      "ol",
      { class: "lesson-list", "data-testid": "lesson-list" },
      ...this.list.map((l, i) => {
        const start = h("button", { type: "button", class: "primary", "data-testid": `lesson-open-${l.name}`, "aria-label": `start lesson ${i + 1}: ${l.question}` }, "Start") as HTMLButtonElement;
        start.addEventListener("click", () => {
          this.begin(l.name);
          this.focusFirst();
        });
        return h(
          "li",
          { class: "lesson-card" },
          h("span", { class: "lesson-number" }, String(i + 1)),
          h("div", {}, h("p", { class: "lesson-question" }, l.question), h("p", { class: "muted small" }, `${l.shows}${l.on_a_server ? " · runs on a server too" : ""}`)),
          start,
        );
      }),
    );
  }

  private questionView(lesson: Lesson): HTMLElement {
    const select = h("select", { "data-testid": "lesson-backend", "aria-label": "where the lesson measures" }) as HTMLSelectElement;
    for (const b of this.deps.backends()) {
      const refused = b.server && !lesson.on_a_server;
      const why = !b.available ? (b.reason ?? "not available") : refused ? "servers schedule their own requests: this lesson needs a backend of this app" : "";
      select.append(h("option", { value: b.name, disabled: Boolean(why), title: why }, `${b.label}${why ? ` (${refused ? "needs a backend of this app" : "not available"})` : ""}`));
    }
    select.value = this.m?.backend ?? this.defaultBackend() ?? "";
    return h(
      "div",
      { class: "lesson-question-step" },
      h("p", { class: "lesson-big", "data-testid": "lesson-question" }, lesson.question),
      h("p", { class: "muted" }, `The app will measure it here, live: ${lesson.labels.join(" · ")}.`),
      h("label", { class: "lesson-where" }, "Measured on ", select, h("span", { class: "muted small" }, ` · ${this.deps.machine()}`)),
    );
  }

  private predictView(lesson: Lesson): HTMLElement {
    const names = lesson.figures.map((f) => f.label);
    const buttons = lesson.choices.map((c, i) => {
      const b = h(
        "button",
        { type: "button", class: "lesson-choice", "data-testid": `lesson-choice-${i}`, "aria-pressed": String(this.choice === i), ...(i === 0 ? { "data-autofocus": "" } : {}) },
        h("span", { class: "choice-letter" }, String.fromCharCode(65 + i)),
        h("span", { class: "choice-text" }, c.label),
        h("span", { class: "choice-shapes" }, ...sketch(c.trends, names)),
      ) as HTMLButtonElement;
      b.addEventListener("click", () => {
        this.choice = i;
        for (const [j, other] of buttons.entries()) other.setAttribute("aria-pressed", String(j === i));
      });
      return b;
    });
    return h("div", { class: "lesson-predict" }, h("p", { class: "lesson-big" }, "What will the measurement show? Pick a shape, then measure."), h("div", { class: "lesson-choices", role: "group", "aria-label": "predictions" }, ...buttons));
  }

  private measureView(): HTMLElement {
    return h(
      "div",
      { class: "lesson-measure" },
      h(
        "div",
        { class: "lesson-meters" },
        h("label", {}, "Prompt", this.promptMeter, this.promptValue),
        h("label", {}, "Clients", this.clientsMeter, this.clientsValue),
        h("label", {}, "Policy", this.policyValue),
        this.cancelBtn,
      ),
      this.status,
      h("div", { class: "lesson-live" }, h("div", {}, this.pointList, h("h3", { class: "small muted" }, "Output, as it is written"), this.preview), this.chart),
    );
  }

  private answerView(lesson: Lesson): HTMLElement {
    const m = this.m;
    const report = m?.report;
    if (!m || (!report && m.failed)) {
      return h("div", { class: "lesson-answer" }, h("p", { class: "lesson-big" }, "Nothing to answer from: the measurement did not run."), h("p", { "data-testid": "lesson-sentence" }, m?.failed ?? ""));
    }
    if (!report) return h("div", {}, "…");
    const names = lesson.figures.map((f) => f.label);
    const claim = lesson.choices[lesson.answer];
    const picked = this.choice === null ? null : lesson.choices[this.choice];
    const verdict = m.stopped
      ? "Stopped before every point was measured: the checks below judge only what was."
      : !report.held
        ? "This run did not show it: the checks below say which part failed. Other programs (or this window's drawing) on a small machine can hide it: Measure again."
        : picked === null
          ? `Measured here: ${claim.label}.`
          : this.choice === lesson.answer
            ? `As you predicted. ${claim.label}.`
            : `Not what you predicted. ${claim.label}.`;
    const checks = report.checks.map((c, i) =>
      h(
        "li",
        { "data-testid": `lesson-check-${i}`, "data-value": String(c.value), "data-holds": String(c.holds), class: c.holds ? "holds" : "fails" },
        h("span", { class: "check-mark", "aria-hidden": "true" }, c.holds ? "✓" : "✗"),
        `${c.what}: `,
        h("strong", { class: "check-value" }, fmt(c.value)),
        ` (needs ${OPS[c.op] ?? c.op} ${c.threshold})`,
      ),
    );
    const handoutBtn = h("button", { type: "button", "data-testid": "lesson-handout", "data-autofocus": "", disabled: !m.path }, "Save the handout") as HTMLButtonElement;
    const addBtn = h("button", { type: "button", "data-testid": "lesson-handout-add", title: "Add another machine's run of this lesson to the handout", disabled: !m.path }, "Compare with another machine's run…") as HTMLButtonElement;
    const againBtn = h("button", { type: "button", "data-testid": "lesson-again" }, "Measure again") as HTMLButtonElement;
    const nextLesson = this.list[this.list.indexOf(lesson) + 1];
    const nextBtn = h("button", { type: "button", class: "primary", "data-testid": "lesson-next-lesson", hidden: !nextLesson }, nextLesson ? `Next lesson: ${nextLesson.name} →` : "") as HTMLButtonElement;
    handoutBtn.addEventListener("click", () => void this.saveHandout());
    addBtn.addEventListener("click", () => void this.addRun());
    againBtn.addEventListener("click", () => {
      this.step = 2;
      this.render();
      void this.measure();
    });
    nextBtn.addEventListener("click", () => {
      if (nextLesson) this.begin(nextLesson.name);
      this.focusFirst();
    });
    const table = h(
      "table",
      { class: "points lesson-table", "data-testid": "lesson-table" },
      h("thead", {}, h("tr", {}, ...report.header.map((c) => h("th", {}, c)))),
      h("tbody", {}, ...report.rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c))))),
    );
    return h(
      "div",
      { class: "lesson-answer" },
      h("p", { class: `lesson-big verdict ${report.held && !m.stopped ? "held" : "failed"}`, "data-testid": "lesson-verdict" }, verdict),
      h(
        "div",
        { class: "lesson-compare" },
        h("span", { class: "compare-head" }, picked ? `You predicted (${String.fromCharCode(65 + (this.choice ?? 0))})` : "The claim"),
        h("span", { class: "compare-head" }, "Measured on this machine"),
        ...lesson.figures.flatMap((_, i) => [
          h("div", { "data-testid": `lesson-predicted-${i}` }, sketch([(picked ?? claim).trends[i]], [names[i]])[0]),
          h("div", { "data-testid": `lesson-measured-${i}`, class: "lesson-measured" }, measured([this.drawn()[i]])[0]),
        ]),
      ),
      h("ul", { class: "lesson-checks", "data-testid": "lesson-checks" }, ...checks),
      h(
        "p",
        { class: "lesson-sentence", "data-testid": "lesson-sentence" },
        m.stopped ? `Stopped after ${m.points.filter((p) => p.state === "done" && (p.figures?.requests ?? 0) > 0).length} of ${m.points.length} points: the checks need every point. Measure again to see the answer.` : report.sentence,
      ),
      h("p", { class: "lesson-why", "data-testid": "lesson-why" }, h("strong", {}, "Why: "), lesson.why),
      this.againstCeilings(m),
      h("p", { class: "muted small", "data-testid": "lesson-machine" }, [this.deps.machine(), m.device, report.sizing].filter(Boolean).join(" · ")),
      table,
      h("div", { class: "lesson-actions" }, handoutBtn, addBtn, againBtn, nextBtn),
    );
  }

  /** Each point against what this machine allows it: decode against the memory's ceiling,
   *  the first token against the least time the prompt's arithmetic takes. */
  private againstCeilings(m: Measurement): HTMLElement {
    const rows = m.points
      .filter((p) => p.figures?.ceiling && p.figures.requests > 0)
      .map((p) => {
        const f = p.figures!;
        const c = f.ceiling!;
        const pct = (v: number, of: number) => `${Math.round((100 * v) / of)}%`;
        return h(
          "li",
          {},
          `${p.label}: decode ${f.decode_tps.p50.toFixed(0)} tok/s per request, ${pct(f.decode_tps.p50, c.decode_tps)} of the ${c.decode_tps.toFixed(0)} its ${c.decode_bound} allows; ` +
            `first token ${f.ttft_ms.p50.toFixed(0)} ms, against ${c.least_ttft_ms.toFixed(0)} ms at the least (${c.prefill_bound}).`,
        );
      });
    if (rows.length === 0) {
      return h("p", { class: "muted small", "data-testid": "lesson-ceilings" }, "Measure how fast this machine can go (the hardware panel) to see these numbers against its ceilings.");
    }
    return h("div", { "data-testid": "lesson-ceilings" }, h("strong", {}, "In this machine's numbers: "), h("ul", { class: "lesson-ceilings" }, ...rows));
  }

  private async saveHandout(): Promise<void> {
    if (!this.m?.path) return;
    try {
      const page = await this.deps.handout([this.m.path, ...this.extraRuns]);
      this.deps.notice(`Handout saved to ${page}: open it in any browser, print it, or send it.`);
      this.el.dataset.handout = page;
    } catch (e) {
      this.deps.error(e);
    }
  }

  private async addRun(): Promise<void> {
    try {
      const path = await this.deps.pickRun();
      if (!path) return;
      this.extraRuns.push(path);
      await this.saveHandout();
    } catch (e) {
      this.deps.error(e);
    }
  }
}
