// A task's output does not live in epd's memory: a shell task printing 50 MB leaves epd's peak
// RSS within 64 MB of its idle RSS, its result holds the output's tail, and the whole output is
// in the run's spool on disk. A real tower and a real epd (docs/perf-history.md, "Output of a run").
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { buildBinaries, epdFor, towerWithMission } from "./epd-harness.js";
import { useCleanups, waitFor } from "./harness.js";

const cleanup = useCleanups();
const MB = 1024 * 1024;

beforeAll(async () => {
  await buildBinaries();
}, 60_000);

/** A field of /proc/<pid>/status in bytes (VmRSS, VmHWM). */
function procKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

const cases = [
  // one 50 MB line without a newline, and 50 MB of short lines (progress frames by the million)
  {
    name: "one 50 MB line",
    command: "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo the-end",
    tail: /a{1000}\nthe-end\n$/,
    bytes: 50_000_009,
  },
  {
    name: "50 MB of short lines",
    command: "yes 0123456789abcdef | head -c 50000000; echo the-end",
    tail: /abcdef\n01234567the-end\n$/,
    bytes: 50_000_008,
  },
];

describe("a task printing 50 MB", () => {
  for (const c of cases) {
    it(`${c.name}: epd's peak RSS stays within 64 MB of ` +
      `idle; the result holds the tail, the spool the whole`, async () => {
      const s = await towerWithMission("ep-output-", cleanup);
      const epd = await epdFor(s, cleanup, { EP_LOG_LEVEL: "info" });
      const pid = epd.child.pid!;
      await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
      // idle: a warm-up task ran (the code paths of a run are loaded), then the highest of a few samples
      const warm = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "warm",
          runtime: Runtime.SHELL,
          input: { command: "echo warm" },
        })
      ).task!;
      await waitFor(
        async () => (await s.work.getTask({ taskId: warm.id })).task!.status === TaskStatus.SUCCEEDED,
        20_000,
      );
      let idle = 0;
      for (let i = 0; i < 5; i++) {
        idle = Math.max(idle, procKb(pid, "VmRSS"));
        await new Promise((r) => setTimeout(r, 100));
      }
      const hwmBefore = procKb(pid, "VmHWM");
      const t = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "big",
          runtime: Runtime.SHELL,
          input: { command: c.command },
        })
      ).task!;
      let peak = 0;
      await waitFor(async () => {
        peak = Math.max(peak, procKb(pid, "VmRSS"));
        const st = (await s.work.getTask({ taskId: t.id })).task!.status;
        return st === TaskStatus.SUCCEEDED || st === TaskStatus.FAILED;
      }, 120_000);
      // VmHWM is the kernel's peak; it also covers the start of epd, so it counts only if it moved during the run
      const hwm = procKb(pid, "VmHWM");
      if (hwm > hwmBefore) peak = Math.max(peak, hwm);
      const done = (await s.work.getTask({ taskId: t.id })).task!;
      console.log(
        `${c.name}: epd idle RSS ${(idle / MB).toFixed(1)} MB, peak ` +
          `${(peak / MB).toFixed(1)} MB (+${((peak - idle) / MB).toFixed(1)} MB)`,
      );
      expect(done.status, JSON.stringify(done.result)).toBe(TaskStatus.SUCCEEDED);
      expect(done.result!.output.length).toBeLessThanOrEqual(64 * 1024);
      expect(done.result!.output).toMatch(c.tail);
      expect(peak - idle).toBeLessThanOrEqual(64 * MB);
      // the whole output is on disk, in the run's spool
      expect(statSync(join(s.home, "epd", "runs", `${t.id}.out`)).size).toBe(c.bytes);
    }, 180_000);
  }
});
