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
