// A run's end outlives epd (docs/daemon.md, "Restart safety"): the run's wrapper writes its exit
// status beside its output spool, so a run whose process exited while epd could not see it is
// reported by the next epd, once, and not run again. The moment is made, not hoped for: epd is
// stopped (SIGSTOP) while the task runs, the task's process exits (its exit file appears), then
// epd is killed -9 before it ever saw the exit. What the run wrote to its pipe meanwhile is lost
// with epd (output reaches the disk only through epd, redacted); the spool holds what came before. A real tower, a real
// epd, a real shell run.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../daemon/worker/journal.js";
import { Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { buildBinaries, epdFor, towerWithMission, type TowerSetup } from "./epd-harness.js";
import { useCleanups, waitFor } from "./harness.js";

const cleanup = useCleanups();

beforeAll(async () => {
  await buildBinaries();
}, 60_000);

const lines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : []);

async function waitDone(s: TowerSetup, taskId: string, timeoutMs = 30_000) {
  await waitFor(
    async () => [TaskStatus.SUCCEEDED, TaskStatus.FAILED].includes((await s.work.getTask({ taskId })).task!.status),
    timeoutMs,
  );
  return (await s.work.getTask({ taskId })).task!;
}

async function taskEvents(s: TowerSetup, taskId: string): Promise<string[]> {
  const res = await s.events.listEvents({ types: ["task"], limit: 1000 } as never);
  return res.events.filter((e) => e.taskId === taskId).map((e) => e.name);
}

describe("a run that ended while epd was down", () => {
  it("is reported by the next epd from the run's exit " +
    "file: succeeded once, attempts 1, its side effect once", async () => {
    const s = await towerWithMission("ep-finished-", cleanup);
    const epd = await epdFor(s, cleanup);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const marker = join(s.home, "marker");
    const command = `echo before-the-stop; echo side >> ${marker}; sleep 1; echo unread`;
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "side effect",
        runtime: Runtime.SHELL,
        input: { command },
      })
    ).task!;
    // epd has spooled the first line (redacted, on disk): it is what the next epd reports
    const spool = join(s.home, "epd", "runs", `${t.id}.out`);
    await waitFor(() => lines(marker).length === 1 && lines(spool).length === 1, 20_000);
    process.kill(epd.child.pid!, "SIGSTOP");
    // the run's process exits while epd cannot watch: its wrapper writes the status
    const exitFile = join(s.home, "epd", "runs", `${t.id}.exit`);
    await waitFor(() => existsSync(exitFile) && readFileSync(exitFile, "utf8") === "0\n", 20_000);
    await epd.kill9();
    expect(readJournal(join(s.home, "epd"))).toEqual([expect.objectContaining({ taskId: t.id, state: "running" })]);
    expect((await s.work.getTask({ taskId: t.id })).task!.status).toBe(TaskStatus.RUNNING);

    const next = await epdFor(s, cleanup);
    const done = await waitDone(s, t.id);
    expect(done.status, JSON.stringify(done.result)).toBe(TaskStatus.SUCCEEDED);
    expect(done.attempts).toBe(1);
    // what the run printed while epd was stopped died in the pipe with it; the spool has the rest
    expect(done.result!.output).toBe("before-the-stop\n");
    expect(done.result!.exitCode).toBe(0);
    expect(
      next.logs.some((l) => l.msg === "a run that ended while epd was down is reported" && l.task_id === t.id),
    ).toBe(true);
    // nothing runs it again: the next epd neither started it nor may the tower hand it out
    const names = await taskEvents(s, t.id);
    expect(names.filter((n) => n === "task.claimed")).toHaveLength(1);
    expect(names).not.toContain("task.requeued");
    expect(next.logs.filter((l) => l.msg === "run finished")).toEqual([]);
    expect(lines(marker)).toEqual(["side"]);
    await waitFor(() => readJournal(join(s.home, "epd")).length === 0);
  }, 90_000);

  it("a run still going when epd died is ended and failed retryably, as before: it runs again", async () => {
    const s = await towerWithMission("ep-unfinished-", cleanup);
    const epd = await epdFor(s, cleanup);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const marker = join(s.home, "marker");
    // the first attempt would sleep for a minute; the second ends at once
    const command = `echo side >> ${marker}; [ "$(wc -l < ${marker})" -ge 2 ] || sleep 60; echo attempt`;
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "cut short",
        runtime: Runtime.SHELL,
        input: { command },
      })
    ).task!;
    await waitFor(() => lines(marker).length === 1, 20_000);
    await epd.kill9();

    const next = await epdFor(s, cleanup);
    const done = await waitDone(s, t.id);
    expect(done.status, JSON.stringify(done.result)).toBe(TaskStatus.SUCCEEDED);
    expect(done.attempts).toBe(2);
    const held = next.logs.find(
      (l) => l.msg === "task held by a previous daemon; failing it so it can run again" && l.task_id === t.id,
    );
    expect(held?.orphans_killed).toBeGreaterThanOrEqual(1);
    expect(lines(marker)).toEqual(["side", "side"]);
  }, 90_000);
});
