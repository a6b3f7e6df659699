// The app's processes by role, read from /proc: the soak test samples their memory, the
// perturbation benchmark their CPU time.

import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second, the unit of /proc/PID/stat's CPU times. */
export const TICKS_PER_S = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout) || 100;

/** Every process's parent, command line, resident memory and CPU time (user + system ticks). */
function processes() {
  const out = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command's closing parenthesis: state, ppid, ..., utime (12th), stime (13th).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      const rss = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
      out.push({ pid: Number(pid), ppid: Number(fields[1]), cmd, rssBytes: rss ? Number(rss[1]) * 1024 : 0, cpuTicks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // exited while we looked
    }
  }
  return out;
}

/**
 * The app `app` (its binary, not a worker) and everything it started, each with its role:
 * `app`, `worker llama` (by backend), or the program's name (WebKitWebProcess,
 * WebKitNetworkProcess). None when the app is not running.
 */
export function appProcesses(app) {
  const all = processes();
  const root = all.find((p) => p.cmd[0] === app && !p.cmd.includes("worker"));
  if (!root) return null;
  const name = (p) => (p.cmd.includes("worker") ? `worker ${p.cmd[p.cmd.indexOf("--backend") + 1] ?? ""}`.trim() : p.cmd[0].split("/").pop());
  const found = [{ ...root, role: "app" }];
  const below = (pid) => all.filter((p) => p.ppid === pid);
  for (const child of below(root.pid)) {
    found.push({ ...child, role: name(child) });
    // WebKit starts its web process through a helper on some versions.
    for (const grandchild of below(child.pid)) found.push({ ...grandchild, role: name(grandchild) });
  }
  return found;
}

/** `field` summed per role. */
export function perRole(found, field) {
  const out = {};
  for (const p of found) out[p.role] = (out[p.role] ?? 0) + p[field];
  return out;
}

/**
 * Each role's CPU use between two samples of appProcesses, in cores (1 = one core busy the
 * whole time), counting the processes alive at both.
 */
export function coresBetween(before, after, seconds) {
  const then = new Map(before.map((p) => [p.pid, p.cpuTicks]));
  const out = {};
  for (const p of after) {
    if (!then.has(p.pid)) continue;
    out[p.role] = (out[p.role] ?? 0) + (p.cpuTicks - then.get(p.pid)) / TICKS_PER_S / seconds;
  }
  return out;
}
