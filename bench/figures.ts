// What the benchmarks measure with: percentiles of a sample and a process's CPU time so far.
import { readFileSync } from "node:fs";

/** The p-th percentile of xs (nearest rank), to two decimals. */
export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(2);
}

/** User + system CPU time of a process (or this one) so far, in ms, from /proc (clock ticks of 10 ms). */
export function procCpuMs(pid: number | "self"): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

/**
 * epd's CPU with its spawn helper's (daemon/runtimes/spawner.ts), which forks the runs: the work
 * epd did itself before the helper, so the figures stay comparable.
 */
export function epdCpuMs(pid: number): number {
  let ms = procCpuMs(pid);
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter(Boolean);
  } catch {
    // epd gone
  }
  for (const child of children) {
    try {
      if (readFileSync(`/proc/${child}/cmdline`, "utf8").includes("spawn.sock")) ms += procCpuMs(Number(child));
    } catch {
      // exited meanwhile
    }
  }
  return ms;
}
