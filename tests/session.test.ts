// NodeService.Session against a real tower over HTTP/2 (gRPC, connect-node's client, as epd
// dials it): the link's commands down, outcomes up and acknowledged by seq; outcomes sent together
// are committed each as CompleteTask/FailTask would commit it, a refused one leaving the others
// committed; malformed sessions are refused naming what was wrong; only a node may open one.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import {
  AgentService,
  NodeService,
  type LinkResponse,
  type SessionRequestSchema,
} from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime, TaskStatus, type Task } from "../gen/ep/tower/v1/resources_pb.js";
import { FrameKind, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { ErrorDetailSchema } from "../gen/ep/errors/v1/errors_pb.js";
import { startTower, waitFor, type TestTower } from "./harness.js";
import { freshSchema, requirePg, skipPg } from "./replicas-harness.js";

requirePg("session (PostgreSQL case)");

type Up = MessageInitShape<typeof SessionRequestSchema>;

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** A session a test drives by hand: push() sends up, got holds what came down. */
function openSession(url: string, token: string, first: Up) {
  const sessions = createClient(
    NodeService,
    createGrpcTransport({
      baseUrl: url,
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
    }),
  );
  const queue: Up[] = [first];
  let wake: (() => void) | undefined;
  let ended = false;
  async function* up(): AsyncGenerator<Up> {
    for (;;) {
      const m = queue.shift();
      if (m) yield m;
      else if (ended) return;
      else await new Promise<void>((r) => (wake = r));
    }
  }
  const ac = new AbortController();
  const got: LinkResponse[] = [];
  let error: unknown;
  let done = false;
  const reading = (async () => {
    try {
      for await (const m of sessions.session(up(), { signal: ac.signal })) got.push(m);
    } catch (err) {
      error = err;
    } finally {
      done = true;
    }
  })();
  closers.push(async () => {
    ended = true;
    wake?.();
    ac.abort();
    await reading;
  });
  return {
    got,
    push(...ms: Up[]) {
      queue.push(...ms);
      wake?.();
    },
    end() {
      ended = true;
      wake?.();
    },
    error: () => error,
    done: () => done,
    assigned: () => got.flatMap((m) => (m.command.case === "assign" ? [m.command.value.task!] : [])),
    acks: () => got.flatMap((m) => (m.command.case === "ack" ? [m.command.value] : [])),
  };
}

async function fleet(t: TestTower, agents: number) {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: `s${Math.random().toString(36).slice(2, 8)}` })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  const node = await t.client(NodeService).registerNode({ hostname: "sess", domainIds: [domainId] });
  const ids: string[] = [];
  for (let i = 0; i < agents; i++)
    ids.push(
      (await t.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: `a${i}` })).agent!
        .id,
    );
  const submit = async (n: number) => {
    const out: string[] = [];
    for (let i = 0; i < n; i++)
      out.push(
        (await work.createTask({ missionId, title: `t${i}`, runtime: Runtime.SHELL, input: { command: "true" } })).task!
          .id,
      );
    return out;
  };
  const open: Up = {
    message: {
      case: "open",
      value: { attachSecret: "s".repeat(32), version: "test", agents: ids.map((agentId) => ({ agentId, idle: true })) },
    },
  };
  return { work, token: node.token, ids, submit, open };
}

const complete = (seq: bigint, task: Task, agentIdle = false, leaseId = task.leaseId): Up => ({
  message: {
    case: "outcome",
    value: {
      seq,
      outcome: {
        case: "complete",
        value: { taskId: task.id, agentId: task.claimedBy, leaseId, agentIdle, result: { output: `done ${task.id}` } },
      },
    },
  },
});

/** A tower on SQLite, or on a fresh PostgreSQL schema (the other dialect's group commit). */
async function towerOn(dialect: "sqlite" | "postgres"): Promise<TestTower> {
  if (dialect === "sqlite") return startTower();
  const schema = await freshSchema();
  closers.push(() => schema.drop());
  return startTower({ env: { EP_DATABASE_URL: schema.url } });
}

describe("NodeService.Session", () => {
  it.each(["sqlite", "postgres"] as const)(
    "hands work down and takes outcomes up: several at once each committed and " +
      "acked by seq, a refused one alone refused, the next task handed over (%s)",
    async (dialect) => {
      if (dialect === "postgres" && skipPg) return;
      const t = await towerOn(dialect);
      closers.push(() => t.close());
      const f = await fleet(t, 3);
      await f.submit(4);
      const s = openSession(t.url, f.token, f.open);
      await waitFor(() => s.assigned().length === 3);
      const [a, b, c] = s.assigned();
      // three outcomes in one go; b's under a lease it does not hold
      s.push(complete(1n, a, true), complete(2n, b, false, "ls_AAAAAAAAAAAAAAAA"), complete(3n, c));
      await waitFor(() => s.acks().length === 3);
      const acks = new Map(s.acks().map((k) => [k.seq, k]));
      expect(acks.get(1n)!.error).toBeUndefined();
      expect(acks.get(3n)!.error).toBeUndefined();
      expect(acks.get(2n)!.error?.code).toBe("lease_not_held");
      expect(acks.get(2n)!.message).toMatch(b.id);
      const status = async (id: string) => (await f.work.getTask({ taskId: id })).task!;
      expect((await status(a.id)).status).toBe(TaskStatus.SUCCEEDED);
      expect((await status(a.id)).result!.output).toBe(`done ${a.id}`);
      expect((await status(b.id)).status).toBe(TaskStatus.RUNNING);
      expect((await status(c.id)).status).toBe(TaskStatus.SUCCEEDED);
      // a said it is idle: the fourth task is handed to it, on the same session
      await waitFor(() => s.assigned().length === 4);
      expect(s.assigned()[3].claimedBy).toBe(a.claimedBy);
      // the session is still up: b's outcome under its own lease goes through
      s.push(complete(4n, b));
      await waitFor(() => s.acks().length === 4);
      expect(s.acks()[3].seq).toBe(4n);
      expect(s.acks()[3].error).toBeUndefined();
      expect((await status(b.id)).status).toBe(TaskStatus.SUCCEEDED);
      // one task.succeeded per task, as with the unary calls
      const events = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter(
        (e) => e.name === "task.succeeded",
      );
      expect(events.map((e) => e.taskId).sort()).toEqual([a.id, b.id, c.id].sort());
      // the daemon closes its side: the session ends, and the node goes offline
      s.end();
      await waitFor(() => s.done());
      expect(s.error()).toBeUndefined();
    },
  );

  it(
    "takes a run's progress up the session: acked, its frames in the task's " +
      "events; under a lease not held or without its report, refused alone",
    async () => {
      const t = await startTower();
      closers.push(() => t.close());
      const f = await fleet(t, 1);
      await f.submit(1);
      const s = openSession(t.url, f.token, f.open);
      await waitFor(() => s.assigned().length === 1);
      const [task] = s.assigned();
      const progress = (seq: bigint, leaseId: string, text: string): Up => ({
        message: {
          case: "progress",
          value: {
            seq,
            report: { taskId: task.id, agentId: task.claimedBy, leaseId, frames: [{ kind: FrameKind.TEXT, text }] },
          },
        },
      });
      s.push(
        progress(1n, task.leaseId, "first line"),
        progress(2n, "ls_AAAAAAAAAAAAAAAA", "not mine"),
        { message: { case: "progress", value: { seq: 3n } } },
        progress(4n, task.leaseId, "second line"),
      );
      await waitFor(() => s.acks().length === 4);
      const acks = new Map(s.acks().map((k) => [k.seq, k]));
      expect([acks.get(1n)!.error, acks.get(4n)!.error]).toEqual([undefined, undefined]);
      expect(acks.get(2n)!.error?.code).toBe("lease_not_held");
      expect(acks.get(3n)!.error?.code).toBe("invalid_argument");
      expect(acks.get(3n)!.message).toMatch(/report/);
      const frames = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter(
        (e) => e.name === "task.progress" && e.taskId === task.id,
      );
      expect(frames.map((e) => e.payload.text)).toEqual(["first line", "second line"]);
    },
  );

  it(
    "refuses a session that does not open first, one that opens " +
      "twice, and an outcome that is neither complete nor fail",
    async () => {
      const t = await startTower();
      closers.push(() => t.close());
      const f = await fleet(t, 1);
      const [task] = await f.submit(1);
      const noOpen = openSession(t.url, f.token, {
        message: {
          case: "outcome",
          value: { seq: 1n, outcome: { case: "complete", value: { taskId: task, agentId: f.ids[0] } } },
        },
      });
      await waitFor(() => noOpen.done());
      expect(ConnectError.from(noOpen.error()).code).toBe(Code.InvalidArgument);
      expect(ConnectError.from(noOpen.error()).findDetails(ErrorDetailSchema)[0]).toMatchObject({
        code: "invalid_argument",
      });
      expect(ConnectError.from(noOpen.error()).rawMessage).toMatch(/first message is open/);
      // nothing was taken from the queue for it
      expect((await f.work.getTask({ taskId: task })).task!.status).toBe(TaskStatus.QUEUED);

      const s = openSession(t.url, f.token, f.open);
      await waitFor(() => s.assigned().length === 1);
      s.push({ message: { case: "outcome", value: { seq: 7n, outcome: { case: undefined } } } });
      await waitFor(() => s.acks().length === 1);
      expect(s.acks()[0]).toMatchObject({ seq: 7n, error: { code: "invalid_argument" } });
      expect(s.acks()[0].message).toMatch(/complete or fail/);
      s.push(f.open);
      await waitFor(() => s.done());
      expect(ConnectError.from(s.error()).rawMessage).toMatch(/opens once/);
      // the task it held is still its agent's: no outcome was taken for it
      expect((await f.work.getTask({ taskId: task })).task!.status).toBe(TaskStatus.RUNNING);
    },
  );

  it("is a node's door only", async () => {
    const t = await startTower();
    closers.push(() => t.close());
    const f = await fleet(t, 1);
    const s = openSession(t.url, t.adminToken, f.open);
    await waitFor(() => s.done());
    expect(ConnectError.from(s.error()).code).toBe(Code.PermissionDenied);
    expect(ConnectError.from(s.error()).rawMessage).toMatch(/may not call NodeService\/Session/);
    const anon = openSession(t.url, "", f.open);
    await waitFor(() => anon.done());
    expect(ConnectError.from(anon.error()).code).toBe(Code.Unauthenticated);
  });
});
