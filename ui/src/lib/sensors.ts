/**
 * What the sensor strip says in words: the newest clock, power and temperature, what this
 * machine cannot read (never shown as zero), and throttling while it lasts.
 */
import type { SensorReading, SensorsOpened } from "../ipc/types";
import { num } from "./format";

export interface SensorWords {
  /** "CPU clock 2,596 MHz · power 45.2 W", or why there is nothing. */
  caption: string;
  /** Each figure this machine cannot give, and why (the caption's tooltip). */
  missing: string[];
  /** The newest reading's throttling, one sentence each; empty when none. */
  throttling: string[];
}

/** The words for the newest reading `r` of a session whose sensors opened as `opened`. */
export function describeSensors(opened: SensorsOpened | null, r: SensorReading | undefined): SensorWords {
  const missing = opened?.not_available ?? [];
  if (!opened) return { caption: "Sensors: waiting for Go live.", missing, throttling: [] };
  const parts: string[] = [];
  if (r?.gpu_mhz != null) parts.push(`GPU clock ${num(r.gpu_mhz)} MHz`);
  if (r?.cpu_mhz != null) parts.push(`CPU clock ${num(r.cpu_mhz)} MHz`);
  else if (missing.some((m) => m.startsWith("CPU clock"))) parts.push("CPU clock: not available here");
  if (r?.temp_c != null) parts.push(`${num(r.temp_c)} °C`);
  const powerMissing = !opened.sources.some((s) => s.startsWith("CPU package energy") || s.startsWith("NVIDIA"));
  if (powerMissing) parts.push("power: not available here");
  else if (r?.power_w != null) parts.push(`power ${num(r.power_w, 1)} W`);
  return { caption: parts.join(" · ") || "Sensors: no reading yet.", missing, throttling: r?.throttling ?? [] };
}
