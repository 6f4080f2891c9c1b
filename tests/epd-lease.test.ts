// The daemon keeps what it holds: lease heartbeats during a long run, and completion reports
// retried until the tower acknowledges them (across a tower outage and across a daemon restart).
// The built ep-tower and epd as child processes.
import { readJournal } from "../daemon/worker/journal.js";
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, spawnTowerProcess, epdFor, towerWithMission, type TowerSetup } from "./epd-harness.js";
import { useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { isoOf } from "../common/vocab.js";

const cleanup = useCleanups();

beforeAll(async () => {
  await buildBinaries();
}, 60_000);

function clients(url: string, token: string) {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  return { work: createClient(WorkService, transport), events: createClient(EventService, transport) };
}

type Setup = TowerSetup;
const setup = (towerEnv: Record<string, string> = {}) => towerWithMission("ep-lease-", cleanup, towerEnv);
const startEpd = (s: Setup, env: Record<string, string> = {}) => epdFor(s, cleanup, env);

async function waitStatus(work: Client<typeof WorkService>, taskId: string, statuses: string[], timeoutMs = 15_000) {
  let last = "";
  await waitFor(async () => {
    last = statusWord((await work.getTask({ taskId })).task!.status);
    return statuses.includes(last);
  }, timeoutMs).catch(() => {
    throw new Error(`task ${taskId} stayed ${last}, wanted ${statuses.join("|")}`);
  });
  return (await work.getTask({ taskId })).task!;
}

async function taskEventNames(events: Client<typeof EventService>, taskId: string): Promise<string[]> {
  const res = await events.listEvents({ types: ["task"], limit: 1000 } as never);
  return res.events.filter((e) => e.taskId === taskId).map((e) => e.name);
}

/** The entries of the daemon's journal ($EP_HOME/epd/inflight.json and the log of changes since). */
function journal(home: string): { taskId: string; state: string; outcome?: { ok: boolean; output: string } }[] {
  return readJournal(join(home, "epd")) as never[];
}

describe("epd lease heartbeats", () => {
  it("a 5 s run under a 1.5 s lease stays running on its first attempt and succeeds; nothing is requeued", async () => {
    const s = await setup({ EP_LEASE_MS: "1500", EP_SWEEP_MS: "100" });
    const epd = await startEpd(s);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "long",
        runtime: Runtime.SHELL,
        input: { command: "echo begin; sleep 5; echo end" },
      })
    ).task!;
    await waitStatus(s.work, t.id, ["running"]);
    const seen = new Set<string>();
    let maxAttempts = 0;
    const leases = new Set<string>();
    // sample the task every 100 ms until the run is over: a missed heartbeat would let the
    // sweeper (every 100 ms) requeue it
    await waitFor(
      async () => {
        const task = (await s.work.getTask({ taskId: t.id })).task!;
        seen.add(statusWord(task.status));
        maxAttempts = Math.max(maxAttempts, task.attempts);
        if (task.status !== TaskStatus.RUNNING) return true;
        leases.add(isoOf(task.leaseExpiresAt));
        return false;
      },
      30_000,
      100,
    );
    const done = await waitStatus(s.work, t.id, ["succeeded", "failed", "queued"]);
    expect(statusWord(done.status), JSON.stringify(done.result)).toBe("succeeded");
    expect(done.attempts).toBe(1);
    expect(maxAttempts).toBe(1);
    expect([...seen].filter((st) => st !== "running" && st !== "succeeded")).toEqual([]);
    expect(done.result!.output).toMatch(/begin\s+end/);
    // the lease moved forward several times (every lease/3 = 500 ms over 5 s)
    expect(leases.size).toBeGreaterThanOrEqual(4);
    const names = await taskEventNames(s.events, t.id);
    expect(names).not.toContain("task.requeued");
    expect(names.filter((n) => n === "task.claimed")).toHaveLength(1);
    expect(epd.logs.some((l) => l.msg === "lease lost; stopping the run")).toBe(false);
  }, 60_000);
});

describe("epd completion reports", () => {
  it("a run that ends while the tower is down is reported once the tower is back (same home and port)", async () => {
    const s = await setup();
    const epd = await startEpd(s, { EP_LOG_LEVEL: "debug" });
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "outage",
        runtime: Runtime.SHELL,
        input: { command: "echo start; sleep 1.5; echo finished-while-down" },
      })
    ).task!;
    await waitStatus(s.work, t.id, ["running"]);
    await s.tower.stop();
    // the run ends with the tower away: the outcome waits in the journal and is retried with backoff
    await waitFor(
      () => epd.logs.some((l) => l.msg === "outcome not acknowledged; retrying" && l.task_id === t.id),
      15_000,
    );
    expect(journal(s.home)).toEqual([
      expect.objectContaining({ taskId: t.id, state: "reporting", outcome: expect.objectContaining({ ok: true }) }),
    ]);
    // another failed attempt, backing off, before the tower comes back
    await waitFor(
      () => epd.logs.filter((l) => l.msg === "outcome not acknowledged; retrying" && l.task_id === t.id).length >= 2,
      15_000,
    );
    const again = await spawnTowerProcess(s.home, {}, s.tower.port);
    cleanup(() => again.stop());
    const w = clients(again.url, again.adminToken).work;
    const done = await waitStatus(w, t.id, ["succeeded", "failed", "queued"], 40_000);
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.attempts).toBe(1);
    expect(done.result!.output).toMatch(/start\s+finished-while-down/);
    expect(done.result!.exitCode).toBe(0);
    await waitFor(() => journal(s.home).length === 0);
    const retries = epd.logs
      .filter((l) => l.msg === "outcome not acknowledged; retrying" && l.task_id === t.id)
      .map((l) => Number(l.in_ms));
    expect(retries.length).toBeGreaterThanOrEqual(2);
    // the delays back off: each at least the one before
    expect(retries.every((d, i) => i === 0 || d >= retries[i - 1])).toBe(true);
    expect(retries[1]).toBeGreaterThan(retries[0]);
  }, 90_000);

  it("an outcome still pending when epd stops is reported by the next epd from its journal", async () => {
    const s = await setup();
    let epd = await startEpd(s, { EP_SHUTDOWN_GRACE_MS: "1000" });
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "journal",
        runtime: Runtime.SHELL,
        input: { command: "echo from-the-journal; sleep 1; exit 0" },
      })
    ).task!;
    await waitStatus(s.work, t.id, ["running"]);
    await s.tower.stop();
    await waitFor(() => journal(s.home).some((e) => e.taskId === t.id && e.state === "reporting"), 15_000);
    await epd.stop();
    expect(epd.child.exitCode).toBe(0);
    // the outcome survived the daemon
    const left = journal(s.home);
    expect(left).toEqual([
      expect.objectContaining({
        taskId: t.id,
        state: "reporting",
        outcome: expect.objectContaining({ ok: true, output: expect.stringContaining("from-the-journal") }),
      }),
    ]);

    const again = await spawnTowerProcess(s.home, {}, s.tower.port);
    cleanup(() => again.stop());
    const w = clients(again.url, again.adminToken).work;
    // the tower still thinks the task is running: nobody told it otherwise
    expect(statusWord((await w.getTask({ taskId: t.id })).task!.status)).toBe("running");
    epd = await startEpd({ ...s, tower: again });
    const done = await waitStatus(w, t.id, ["succeeded", "failed", "queued"]);
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.attempts).toBe(1);
    expect(done.result!.output).toMatch(/from-the-journal/);
    expect(
      epd.logs.some((l) => l.msg === "resending an outcome the tower did not acknowledge" && l.task_id === t.id),
    ).toBe(true);
    await waitFor(() => journal(s.home).length === 0);
  }, 90_000);
});

describe("a task handed over and lost with the link", () => {
  it("a task claimed and started for its agent that the daemon never heard of " +
    "goes back uncounted when its link opens, and runs on its first attempt", async () => {
    const s = await setup();
    let epd = await startEpd(s, { EP_POLL_MS: "600000" });
    const agentId = (
      await epd.call<{ agent: { id: string } }>("agent.enroll", { domainId: s.domainId, runtime: "shell" })
    ).agent.id;
    await epd.stop();
    // claimed and started for the agent with the node's own credential, as the tower does for a
    // push; the daemon never hears of it
    const node = clients(s.tower.url, JSON.parse(readFileSync(s.nodeFile, "utf8")).token as string).work;
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "lost",
        runtime: Runtime.SHELL,
        input: { command: "echo taken-up" },
      })
    ).task!;
    const held = (await node.claimTask({ agentId, start: true })).task!;
    expect(held).toMatchObject({ id: t.id, status: TaskStatus.RUNNING, claimedBy: agentId });
    epd = await startEpd(s, { EP_POLL_MS: "600000" });
    // the link opens naming no lease for the agent: the task goes back (the attempt not counted)
    // and is handed straight to the idle agent; without this it would wait for its lease (60 s)
    const done = await waitStatus(s.work, t.id, ["succeeded", "failed"], 20_000);
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.result!.output.trim()).toBe("taken-up");
    expect(done.attempts).toBe(1);
    expect((await taskEventNames(s.events, t.id)).filter((n) => n !== "task.progress")).toEqual([
      "task.created",
      "task.claimed",
      "task.running",
      "task.requeued",
      "task.claimed",
      "task.running",
      "task.succeeded",
    ]);
  }, 60_000);
});
