// One claim, one run (docs/daemon.md): the tower pushes a task to an idle agent, and the daemon's
// own claim (every claim resumes with pushed work) takes that same task up before the push arrives;
// the run fails at once, and the push that arrives after it must not run the task a second time.
// The order is made, not hoped for: a TCP proxy between epd and the tower holds back what the tower
// sends on the link (and only there) for 1.5 s, while epd polls every 100 ms. A real tower, a real
// epd, a real runtime whose executable is missing (the run ends within milliseconds).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Runtime, TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd } from "./epd-harness.js";
import { startTower, tempHome, useCleanups, waitFor } from "./harness.js";
import { countCalls, tcpProxy } from "./tcp-proxy.js";

const cleanup = useCleanups();
const LINK_DELAY_MS = 1500;

/** A proxy that delays, by `delayMs` and in order, what the tower sends on connections carrying `path`. */
function delayingProxy(targetPort: number, path: string, delayMs: number) {
  return tcpProxy(targetPort, ({ client, upstream }) => {
    let slow: boolean | undefined;
    client.on("data", (chunk: Buffer) => {
      slow ??= chunk.includes(path);
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (slow) setTimeout(() => client.destroyed || client.write(chunk), delayMs);
      else client.write(chunk);
    });
  });
}

describe("a pushed task that a resumed claim took up first", () => {
  it("runs once: its push, arriving after the run ended, is not run again", async () => {
    const h = tempHome("ep-one-run-");
    cleanup(() => h.cleanup());
    const t = await startTower({ home: join(h.dir, "tower-home") });
    cleanup(() => t.close());
    const calls = countCalls(t.tower.app.server);
    const nodeFile = join(h.dir, "node.json");
    await registerNode(t.url, t.adminToken, nodeFile);
    const work = t.client(WorkService);
    const domainId = (await work.createDomain({ name: "one-run" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    const proxy = await delayingProxy(Number(new URL(t.url).port), "NodeService/Link", LINK_DELAY_MS);
    cleanup(() => proxy.close());
    // the shell runtime points at a missing executable: every run fails at once, without a fork
    const home = join(h.dir, "epd-home");
    mkdirSync(join(home, "epd"), { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "epd", "runtimes.toml"), '[shell]\ncommand = "/nonexistent/ep-one-run"\n');
    const epd = await spawnEpd({ home, nodeFile, backendUrl: proxy.url, env: { EP_POLL_MS: "100" } });
    cleanup(() => epd.stop());
    await epd.call("agent.enroll", { domainId, runtime: "shell" });
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);

    const task = (await work.createTask({ missionId, kind: TaskKind.CLAIMABLE, title: "t", runtime: Runtime.SHELL, input: { command: "echo never" }, maxAttempts: 1 })).task!;
    await waitFor(async () => (await work.getTask({ taskId: task.id })).task!.status === TaskStatus.FAILED, 20_000);
    // the push reaches epd after the run: it either says why it does not run it, or runs it again
    const runs = () => epd.logs.filter((l) => l.msg === "run finished" && l.task_id === task.id);
    const skipped = () => epd.logs.some((l) => l.msg === "a pushed task already ran here; not run again" && l.task_id === task.id);
    await waitFor(() => skipped() || runs().length > 1, 20_000);
    expect(runs()).toHaveLength(1);
    expect(skipped()).toBe(true);
    expect(epd.logs.filter((l) => l.msg === "outcome refused by the tower")).toEqual([]);
    expect(calls.get("FailTask")).toBe(1);
    const done = (await work.getTask({ taskId: task.id })).task!;
    expect(done.attempts).toBe(1);
    expect(done.result?.error).toMatch(/not found/);
  }, 60_000);
});
