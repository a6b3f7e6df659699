/** What the UI knows of each backend, all of it from Rust (lx_engine::kind, generated into
 *  defaults.ts): no component compares a backend's name with a string of its own. A name
 *  that is not a backend is a server's. */
import { BACKENDS } from "../ipc/generated/defaults";
import type { KvType } from "../ipc/types";

/** The name people read: `llama.cpp` for `llama`; a server's own name. */
export const backendLabel = (name: string): string => BACKENDS[name]?.label ?? name;

/** The KV cache types a backend's load takes (a server sets its own: f16 as far as we ask). */
export const kvTypesOf = (name: string): KvType[] => BACKENDS[name]?.kv_types ?? ["f16"];

/** Whether a backend's cache type is a setting of ours (llama.cpp: f16, q8_0, q4_0). */
export const choosesKv = (name: string): boolean => kvTypesOf(name).length > 1;

/** "llama.cpp only: candle and MLX keep f32 caches, servers set theirs when started". */
export function kvOnlyNote(): string {
  const all = Object.values(BACKENDS);
  const takers = all.filter((b) => b.kv_types.length > 1).map((b) => b.label);
  const kept = all.filter((b) => b.kv_kept_as).map((b) => b.label);
  const keptAs = [...new Set(all.flatMap((b) => (b.kv_kept_as ? [b.kv_kept_as] : [])))].join("/");
  return `${takers.join(" and ")} only: ${kept.join(" and ")} keep ${keptAs} caches, servers set theirs when started`;
}
