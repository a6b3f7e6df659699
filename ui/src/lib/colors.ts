/** Colours: one per backend, readable on the dark background (WCAG AA for text). */
export const BACKEND_COLORS: Record<string, string> = {
  llama: "#38bdf8",
  candle: "#fb923c",
  mlx: "#c084fc",
};
const EXTRA = ["#4ade80", "#f472b6", "#facc15", "#2dd4bf"];

export function backendColor(name: string): string {
  if (BACKEND_COLORS[name]) return BACKEND_COLORS[name];
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return EXTRA[h % EXTRA.length];
}

/** Line dash per policy, so backend (colour) and policy (dash) read independently. */
export const POLICY_DASH: Record<string, number[]> = {
  serial: [2, 4],
  static: [8, 4],
  continuous: [],
  chunked: [12, 3, 3, 3],
  disaggregated: [2, 2, 8, 2],
};

export const THEME = {
  grid: "rgba(148, 163, 184, 0.12)",
  axis: "#94a3b8",
  text: "#e2e8f0",
  instant: "#fbbf24",
  reading: "rgba(74, 222, 128, 0.16)",
  readingLine: "rgba(74, 222, 128, 0.55)",
  p50: "#e2e8f0",
  p95Band: "rgba(226, 232, 240, 0.10)",
  throughput: "#f8fafc",
  queue: "#64748b",
  prefill: "#f59e0b",
  decode: "#38bdf8",
  transfer: "#e879f9",
  ceiling: "#f87171",
  clock: "#a5b4fc",
  power: "#fbbf24",
  bg: "#0f172a",
};

export function withAlpha(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}
