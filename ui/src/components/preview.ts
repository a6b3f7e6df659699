/**
 * The streamed preview pane: one live request's text as it arrives, a "reader" marker moving
 * through it at a human reading pace, and a gauge of the stream's tok/s against the 4-5
 * tok/s reading band. Queue and prefill waits are shown as such, so a pause never looks like
 * a hang. Text updates are batched per animation frame.
 */
import { withAlpha } from "../lib/colors";
import { h, setData, setText } from "../lib/dom";
import { ms as fmtMs, tps as fmtTps } from "../lib/format";
import { DEFAULT_PACE, Reader, READING_BAND } from "../lib/reader";
import { WindowRate } from "../lib/smoothing";
import type { LiveStore, PreviewState } from "../lib/store";
import { backendLabel } from "./charts";

const GAUGE_MAX = 1000; // tok/s at the right end of the (log) gauge
const HAND_OVER_AFTER_MS = 20_000; // next preview at the latest this long after the stream ends

function gaugePos(v: number): number {
  const x = Math.log10(Math.max(1, Math.min(GAUGE_MAX, v))) / Math.log10(GAUGE_MAX);
  return Math.max(0, Math.min(100, x * 100));
}

export class PreviewPane {
  readonly el: HTMLElement;
  private title = h("span", { class: "preview-meta muted" });
  private badge = h("span", { class: "badge", "data-testid": "preview-state" }, "idle");
  private stats = h("span", { class: "preview-stats" });
  private text = h("div", { class: "preview-text", "data-testid": "preview-text", tabindex: "0", "aria-live": "off", "aria-label": "streamed text of one request" });
  private tail = h("span", { class: "prompt-tail" });
  private caret = h("span", { class: "reader-caret", "aria-hidden": "true" });
  private outMark = h("span", { class: "out-mark", title: "the prompt ends here; the model's output follows" }, "output");
  private needle = h("div", { class: "gauge-needle off" });
  private gaugeValue = h("span", { class: "gauge-value" }, "—");
  private gaugeNote = h("span", { class: "gauge-note" });
  private readerNote = h("span", { class: "reader-note", "data-testid": "reader-note" });
  private paceValue = h("output", { class: "pace-value" }, `${DEFAULT_PACE.toFixed(1)} tok/s`);
  private spans: HTMLSpanElement[] = [];
  private shownId: number | null = null;
  private readPos = 0;
  private marked = -1;
  private gaugeAt = 0;
  private gaugeDone = false;
  private gaugeRate: number | null = null;
  private reader = new Reader(DEFAULT_PACE);
  private rate = new WindowRate(1000);
  private rateCount = 0;
  private askedNext = false;

  constructor(
    private store: LiveStore,
    private requestNext: () => void,
  ) {
    const pace = h("input", { type: "range", min: READING_BAND[0], max: READING_BAND[1], step: "0.1", value: DEFAULT_PACE, "aria-label": "reading pace in tokens per second", "data-testid": "reading-pace" }) as HTMLInputElement;
    pace.addEventListener("input", () => {
      this.reader.setPace(Number(pace.value));
      setText(this.paceValue, `${Number(pace.value).toFixed(1)} tok/s`);
    });
    const skip = h("button", { class: "small", type: "button", title: "Stream the next request now" }, "Next request");
    skip.addEventListener("click", () => this.askNext(true));
    const band = h("div", { class: "gauge-band", title: "human reading pace: 4-5 tok/s" });
    band.style.left = `${gaugePos(READING_BAND[0])}%`;
    band.style.width = `${gaugePos(READING_BAND[1]) - gaugePos(READING_BAND[0])}%`;
    band.style.background = withAlpha("#4ade80", 0.35);
    const ticks = h("div", { class: "gauge-ticks" }, ...[1, 10, 100, 1000].map((v) => {
      const t = h("span", {}, String(v));
      t.style.left = `${gaugePos(v)}%`;
      return t;
    }));
    this.el = h(
      "section",
      { class: "card preview", "data-testid": "preview", "aria-label": "streamed preview" },
      h("header", { class: "card-head" }, h("span", {}, "Streamed preview"), this.badge, h("span", { class: "spacer" }), this.stats),
      this.title,
      h(
        "div",
        { class: "gauge", role: "img", "aria-label": "stream speed against reading pace" },
        h("div", { class: "gauge-track" }, band, this.needle),
        ticks,
        h("div", { class: "gauge-legend" }, h("span", {}, "stream "), this.gaugeValue, this.gaugeNote),
      ),
      this.text,
      h("footer", { class: "preview-foot" }, h("label", {}, "Reader pace ", pace, this.paceValue), this.readerNote, skip),
    );
    this.text.append(this.tail, this.outMark, this.caret);
  }

  private askNext(force = false) {
    if (this.askedNext && !force) return;
    this.askedNext = true;
    this.requestNext();
  }

  private reset(p: PreviewState) {
    this.shownId = p.id;
    this.spans = [];
    this.readPos = 0;
    this.marked = -1;
    this.reader.reset();
    this.rate.reset();
    this.rateCount = 0;
    this.gaugeRate = null;
    this.gaugeAt = 0;
    this.askedNext = false;
    this.text.replaceChildren(this.tail, this.outMark, this.caret);
    setText(this.tail, p.promptTail ? `…${p.promptTail}` : "");
    setText(this.title, `request #${p.id} · ${backendLabel(p.backend)} · ${p.promptTokens}-token prompt, ${p.maxTokens} output tokens · the reader moves at your reading pace`);
  }

  /** Called every animation frame. */
  frame(wallNow: number): void {
    const p = this.store.preview;
    if (!p) {
      setText(this.badge, this.store.running ? "waiting for a request" : "idle");
      setData(this.badge, "state", "idle");
      return;
    }
    if (p.id !== this.shownId) this.reset(p);
    const now = this.store.sessionNow(wallNow) ?? 0;

    // New text: append spans for pieces not shown yet.
    for (let i = this.spans.length; i < p.pieces.length; i++) {
      // A token the target accepted from a draft is marked as it arrives.
      const s = h("span", { class: p.drafted[i] ? "tok drafted" : "tok" }, p.pieces[i] ?? "");
      this.spans.push(s);
      this.text.insertBefore(s, this.caret);
    }
    for (let i = this.rateCount; i < p.times.length; i++) if (p.times[i] !== undefined) this.rate.push(p.times[i]);
    this.rateCount = p.times.length;

    // The reader.
    const n = p.pieces.length;
    const pos = this.reader.advance(wallNow, n);
    const whole = Math.floor(pos);
    for (let i = this.readPos; i < Math.min(whole, n); i++) {
      this.spans[i].classList.remove("reading");
      this.spans[i].classList.add("read");
    }
    if (whole > this.readPos) this.readPos = Math.min(whole, n);
    if (whole !== this.marked) {
      if (this.marked >= 0 && this.marked < this.spans.length) this.spans[this.marked].classList.remove("reading");
      if (whole < n) this.spans[whole].classList.add("reading");
      this.marked = whole < n ? whole : -1;
    }
    const waiting = this.reader.waiting(n) && !p.done;
    if (this.caret.classList.contains("waiting") !== waiting) this.caret.classList.toggle("waiting", waiting);
    setData(this.text, "tokens", String(n));
    setData(this.text, "reader", pos.toFixed(2));

    // State.
    let state: string;
    let label: string;
    if (p.error) {
      state = "error";
      label = "failed";
    } else if (n === 0 && p.admittedAt === null) {
      state = "queued";
      label = `queued ${fmtMs(now - p.startedAt)}`;
    } else if (n === 0) {
      state = "prefilling";
      label = `prefilling ${p.promptTokens} tokens · ${fmtMs(now - (p.admittedAt ?? p.startedAt))}`;
    } else if (!p.done) {
      state = "streaming";
      label = `streaming ${n}/${p.maxTokens}`;
    } else {
      state = "done";
      label = `done · ${n} tokens`;
    }
    setText(this.badge, label);
    setData(this.badge, "state", state);
    setData(this.el, "state", state);
    const ttft = p.ttftMs ?? (n === 0 ? null : p.times[0] - p.startedAt);
    setText(this.stats, [ttft === null ? `TTFT ${fmtMs(now - p.startedAt)}…` : `TTFT ${fmtMs(ttft)}`, p.decodeTps ? `decode ${fmtTps(p.decodeTps)}` : ""].filter(Boolean).join(" · "));

    // Gauge: the stream's rate over the last second (the request's own figure once done).
    // Read twice a second: a needle that twitches every frame is noise (and repaints).
    if (wallNow - this.gaugeAt >= 500 || p.done !== this.gaugeDone) {
      this.gaugeAt = wallNow;
      this.gaugeDone = p.done;
      this.gaugeRate = p.done ? p.decodeTps : n > 1 ? this.rate.rate(now) : null;
    }
    const r = this.gaugeRate;
    const left = `${r ? gaugePos(r).toFixed(1) : 0}%`;
    if (this.needle.style.left !== left) this.needle.style.left = left;
    if (this.needle.classList.contains("off") !== !r) this.needle.classList.toggle("off", !r);
    setText(this.gaugeValue, r ? fmtTps(r) : state === "queued" || state === "prefilling" ? "waiting for the first token" : "—");
    const ratio = r ? r / this.reader.pace : 0;
    setText(this.gaugeNote, !r ? "" : ratio >= 1.5 ? ` · ${ratio.toFixed(ratio < 10 ? 1 : 0)}× faster than you read` : ratio >= 0.9 ? " · about reading pace" : ` · slower than you read: the reader waits`);

    // Reader note and the hand-over to the next preview.
    const secs = this.reader.secondsLeft(n);
    setText(
      this.readerNote,
      n === 0 ? "reader waits for the first token" : waiting ? `reader caught up: waiting for tokens (token ${whole}/${n})` : `reader at token ${whole} of ${n}${secs > 0.5 ? ` · ${secs.toFixed(0)} s of reading left` : ""}`,
    );
    if (p.done && !this.askedNext && this.store.running) {
      const since = p.doneWall === null ? 0 : wallNow - p.doneWall;
      if (pos >= n || since > HAND_OVER_AFTER_MS) this.askNext();
    }
  }
}
