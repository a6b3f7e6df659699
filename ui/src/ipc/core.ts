import { Channel, invoke, type InvokeArgs, type InvokeOptions } from "@tauri-apps/api/core";
import type { AppError } from "./types";

/** Whether the page runs inside the app (not a plain browser, e.g. `vite` alone). */
export const inApp = typeof window !== "undefined" && "__TAURI_INTERNALS__" in window;

/** Turn whatever a command threw into an {@link AppError}. */
export function toAppError(e: unknown): AppError {
  if (e && typeof e === "object" && "kind" in e) {
    const k = e as { kind: AppError["kind"]; message?: string };
    return { kind: k.kind, message: k.message ?? (k.kind === "noModel" ? "No model is open: choose one first." : k.kind) };
  }
  return { kind: "ipc", message: e instanceof Error ? e.message : String(e) };
}

/** Call a command; rejects with an {@link AppError}. */
export async function call<T>(cmd: string, args?: InvokeArgs, options?: InvokeOptions): Promise<T> {
  if (!inApp) throw { kind: "ipc", message: "not running inside the Latency Explorer app" } satisfies AppError;
  try {
    return await invoke<T>(cmd, args, options);
  } catch (e) {
    throw toAppError(e);
  }
}

/** A channel whose messages go to `onMessage`. */
export function channel<T>(onMessage: (m: T) => void): Channel<T> {
  const ch = new Channel<T>();
  ch.onmessage = onMessage;
  return ch;
}
