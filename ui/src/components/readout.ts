/** The live readout: the current setting's p50/p95 TTFT, decode tok/s and throughput. */
import { h, setText } from "../lib/dom";
import { ms as fmtMs, num, tps as fmtTps } from "../lib/format";
import type { Candidate, PointCeiling } from "../ipc/types";
import { choosesKv } from "../lib/backends";
import { klText, liveCandidate } from "../lib/fidelity";
import type { LiveStore } from "../lib/store";
import { backendLabel } from "./charts";
import { ofCeiling } from "./sweep";

function tile(label: string, testid: string, hint: string) {
  const value = h("div", { class: "tile-value", "data-testid": testid }, "—");
  const sub = h("div", { class: "tile-sub" });
  const ceiling = h("div", { class: "tile-sub", "data-testid": `${testid}-ceiling` });
  const el = h("div", { class: "tile", title: hint }, h("div", { class: "tile-label" }, label), value, sub, ceiling);
  return { el, value, sub, ceiling };
}

/** "of ceiling: 34% memory (270 tok/s)": a figure against the most this machine allows. */
function ceilingLine(value: number, most: number, bound: string): string {
  return `of ceiling: ${ofCeiling(value, most, bound)} (${fmtTps(most)})`;
}

export class Readout {
  readonly el: HTMLElement;
  private p50 = tile("TTFT p50", "readout-ttft-p50", "first token received − submit (queue wait + prefill + first step + transport)");
  private p95 = tile("TTFT p95", "readout-ttft-p95", "95% of requests got their first token within this");
  private decode = tile("Decode, per request", "readout-decode", "(output tokens − 1) ÷ (last token − first token), p50 over requests");
  private thr = tile("Throughput, all clients", "readout-throughput", "all output tokens ÷ wall time of the measured window");
  private flight = tile("In flight", "readout-inflight", "requests submitted and not yet finished");
  private caption = h("div", { class: "readout-caption muted" });
  /** Which setting runs, and what the last fidelity run measured of it. */
  private fidelityLine = h("div", { class: "readout-caption muted small", "data-testid": "readout-fidelity" });
  /** The candidates of the last fidelity run in this session of the app. */
  fidelity: Candidate[] = [];
  /** The most this machine allows at the live setting on the active backend's device
   *  (`live_ceiling`); null without a probe, for a server, or before a backend loads. */
  ceiling: PointCeiling | null = null;

  constructor(private store: LiveStore) {
    this.el = h("section", { class: "readout", "aria-label": "live readout" }, this.p50.el, this.p95.el, this.decode.el, this.thr.el, this.flight.el, this.caption, this.fidelityLine);
  }

  update(): void {
    const backend = this.store.activeBackend();
    const s = this.store.currentSummary(backend);
    const has = s !== undefined && s.requests > 0;
    setText(this.p50.value, has ? fmtMs(s.ttft_ms.p50) : "—");
    setText(this.p95.value, has ? fmtMs(s.ttft_ms.p95) : "—");
    this.p50.el.classList.toggle("instant", has && s.ttft_ms.p50 < 1000);
    setText(this.decode.value, has ? fmtTps(s.decode_tps.p50) : "—");
    // Planned drafting may send none: on a machine where a drafted position costs most of a
    // pass, drafts that rarely hold (or a draft model as slow as the model) never pay.
    const drafting = this.store.settings?.spec.drafter !== undefined && this.store.settings.spec.drafter !== "none";
    const drafts = !has ? "" : s.drafted > 0 ? ` · drafts: ${((100 * s.accepted) / s.drafted).toFixed(0)}% of ${num(s.drafted)} accepted` : drafting ? " · drafts: none yet, none has been worth its cost here" : "";
    setText(this.decode.sub, has ? `p95 of slowest: ${fmtTps(s.decode_tps.min)} min${drafts}` : "");
    const c = has ? this.ceiling : null;
    setText(this.decode.ceiling, c && has ? ceilingLine(s.decode_tps.p50, c.decode_tps, c.decode_bound) : "");
    this.decode.ceiling.title = c ? "Decode reads every weight once per token, so one request is bound by memory bandwidth; requests decoding together share that read." : "";
    setText(this.thr.ceiling, c && has && s.throughput_tps > 0 ? ceilingLine(s.throughput_tps, c.throughput_tps, c.decode_bound) : "");
    setText(this.thr.value, has && s.throughput_tps > 0 ? fmtTps(s.throughput_tps) : "—");
    const t = this.store.lastTick;
    setText(this.thr.sub, t?.throughput_tps ? `now ${fmtTps(t.throughput_tps)} (1 s window)` : "");
    setText(this.flight.value, t ? String(t.in_flight) : "—");
    setText(this.flight.sub, t ? `${t.queued} queued · ${t.prefilling} prefilling` : "");
    const set = this.store.settings;
    setText(
      this.caption,
      !this.store.running && !has
        ? "Press Go live to start measuring."
        : set && backend
          ? `${backendLabel(backend)} · ${set.policy} · ${set.prompt_tokens}-token prompts · ${set.concurrency} client${set.concurrency === 1 ? "" : "s"} · ${set.max_tokens} output tokens — ${has ? `${num(s.requests)} settled request${s.requests === 1 ? "" : "s"}` : "measuring…"}`
          : "starting…",
    );
    setText(this.fidelityLine, backend ? this.fidelityText(backend) : "");
  }

  /** "Runs with weights f16 · fidelity (last run): mean KL 3.1e-4 …", or "" before it loads. */
  private fidelityText(backend: string): string {
    const set = this.store.settings;
    const info = this.store.backends.get(backend)?.info;
    if (!set || !info) return "";
    const kv = set.kv.k === set.kv.v ? set.kv.k : null;
    const own = Object.entries(info.settings ?? {}).map(([k, v]) => `${k} ${v}`);
    const runs = [choosesKv(backend) ? `KV ${kv ?? `${set.kv.k}/${set.kv.v}`}` : null, ...own, set.spec.drafter !== "none" ? `drafts: ${set.spec.drafter}` : null].filter(Boolean).join(", ");
    const c = this.fidelity.length ? liveCandidate(this.fidelity, backend, { kv, drafter: set.spec.drafter, settings: info.settings ?? {} }) : null;
    const measured = c?.fidelity
      ? ` · fidelity (last run): mean KL ${klText(c.fidelity.mean_kl)}, top-1 agreement ${num(100 * c.fidelity.top1_agreement, 1)}% against ${c.against === "plain" ? "the same setting without drafts" : "llama.cpp with an f16 cache"}`
      : this.fidelity.length
        ? " · not in the last fidelity run"
        : "";
    return `Runs with ${runs || "its defaults"}${measured}`;
  }
}
