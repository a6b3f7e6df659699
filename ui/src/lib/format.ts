/**
 * Number formatting without `Intl` (its locale handling is what breaks under LANG=C; see
 * locale-guard.ts): fixed, predictable output for the readouts and axes.
 */

function group(int: string): string {
  return int.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** 1234567 → "1,234,567"; 12.345 → "12.3" (digits after the point as given). */
export function num(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  const s = Math.abs(v).toFixed(digits);
  const [i, f] = s.split(".");
  return (v < 0 ? "-" : "") + group(i) + (f ? "." + f : "");
}

/** A duration given in ms: "85 ms", "1.24 s", "2 min 05 s". */
export function ms(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  if (v < 10) return `${v.toFixed(1)} ms`;
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(v < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(v / 60_000);
  const s = Math.round((v % 60_000) / 1000);
  return `${m} min ${String(s).padStart(2, "0")} s`;
}

/** A rate: "38.2 tok/s", "1,204 tok/s". */
export function tps(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  return `${num(v, v < 100 ? 1 : 0)} tok/s`;
}

/** Bytes: "253.1 MB", "23.4 GiB" (binary for memory, decimal for files). */
export function bytes(v: number | null | undefined, binary = false): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  const base = binary ? 1024 : 1000;
  const units = binary ? ["B", "KiB", "MiB", "GiB", "TiB"] : ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  let x = v;
  while (x >= base && i < units.length - 1) {
    x /= base;
    i++;
  }
  return `${x.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** A count of parameters: 268,098,176 → "268M". */
export function params(v: number): string {
  if (v >= 1e9) return `${(v / 1e9).toFixed(v >= 1e10 ? 0 : 1)}B`;
  if (v >= 1e6) return `${Math.round(v / 1e6)}M`;
  if (v >= 1e3) return `${Math.round(v / 1e3)}K`;
  return String(v);
}

/** Seconds on a time axis: "45 s", "2:05", "1:02:03". */
export function clock(s: number): string {
  if (!Number.isFinite(s)) return "";
  const t = Math.max(0, Math.round(s));
  if (t < 60) return `${t} s`;
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

/** A compact axis value: 1500 → "1.5k", 0.25 → "0.25". */
export function axis(v: number): string {
  if (!Number.isFinite(v)) return "";
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 1 || a === 0) return String(+v.toFixed(1));
  return String(+v.toPrecision(2));
}
