/**
 * The prompt-length slider is logarithmic: equal slider steps multiply the length, so 16,
 * 256 and 32,768 tokens are all easy to reach. Positions run 0..STEPS.
 */
export const STEPS = 1000;
export const MIN_PROMPT = 16;

/** Token count at slider position `pos` for a slider ending at `max` tokens. */
export function tokensAt(pos: number, max: number, min = MIN_PROMPT): number {
  if (max <= min) return Math.max(1, Math.round(max));
  const p = Math.min(STEPS, Math.max(0, pos)) / STEPS;
  return Math.round(min * Math.pow(max / min, p));
}

/** Slider position showing `tokens` (the nearest one). */
export function positionOf(tokens: number, max: number, min = MIN_PROMPT): number {
  if (max <= min) return STEPS;
  const t = Math.min(max, Math.max(min, tokens));
  return Math.round((Math.log(t / min) / Math.log(max / min)) * STEPS);
}

/** Clamp an exact token count typed by the user. */
export function clampTokens(v: number, max: number, min = 1): number {
  if (!Number.isFinite(v)) return min;
  return Math.min(max, Math.max(min, Math.round(v)));
}
