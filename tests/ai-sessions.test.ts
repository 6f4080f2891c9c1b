// AI sessions over real HTTP: turns, pending actions and approvals, ownership, the session
// stream with resume, and the Connect AiService — with the local heuristic planner.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AiService, ActionStatus } from "../gen/ep/tower/v1/ai_pb.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { titleFromTurn } from "../tower/domain/ai/sessions.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let other: string;

beforeAll(async () => {
  t = await startTower({
    env: {
      EP_CENTRAL_RUNTIME_DEFAULT: "vendorA_code",
      EP_CLAUDE_MODEL: "claude-test-model",
      EP_CLAUDE_MAX_TOKENS: "2048",
      EP_CLAUDE_TIMEOUT_SECONDS: "90",
    },
  });
  other = (await t.client(AuthService).createToken({ name: "other-operator", role: Role.OPERATOR })).secret;
});
afterAll(async () => {
  await t?.close();
});

async function session(title = "ops", token?: string): Promise<string> {
  const res = await t.api("POST", "/ai/sessions", { title }, token);
  expect(res.status).toBe(201);
  expect(res.body.session).toMatchObject({ title, status: "active" });
  return res.body.session.id;
}

async function turn(sessionId: string, content: string, token?: string) {
  const res = await t.api("POST", `/ai/sessions/${sessionId}/turns`, { content }, token);
  expect(res.status).toBe(201);
  return res.body as { turn: any; reply: any; actions: any[] };
}

async function domainNames(): Promise<string[]> {
  return (await t.api("GET", "/domains")).body.domains.map((d: { name: string }) => d.name);
}

describe("turns and pending actions", () => {
  it("a write chosen in a turn mutates nothing until it is approved, then runs once", async () => {
    const s = await session();
    const r = await turn(s, 'create a domain called "alpha-approve"');
    expect(r.turn).toMatchObject({ role: "user", content: 'create a domain called "alpha-approve"' });
    expect(r.actions).toHaveLength(1);
    const action = r.actions[0];
    expect(action).toMatchObject({ tool: "create_domain", status: "pending", arguments: { name: "alpha-approve" } });
    expect(r.reply.tool_calls[0]).toMatchObject({ tool: "create_domain", kind: "write", action_id: action.id });
    expect(
      r.reply.view_specs.some(
        (v: any) => v.type === "action_bar" && v.actions.some((a: any) => a.action_id === action.id),
      ),
    ).toBe(true);
    expect(await domainNames()).not.toContain("alpha-approve");

    // a new message never approves anything
    const yes = await turn(s, "approve all");
    expect(yes.actions).toHaveLength(0);
    expect(yes.reply.tool_calls).toHaveLength(0);
    expect(await domainNames()).not.toContain("alpha-approve");

    const approved = await t.api("POST", `/ai/sessions/${s}/actions/${action.id}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.body.action).toMatchObject({ status: "approved", error: "" });
    expect(approved.body.action.result.domain.name).toBe("alpha-approve");
    expect(await domainNames()).toContain("alpha-approve");

    // approving again is idempotent and does not run it again; rejecting now is a conflict
    const again = await t.api("POST", `/ai/sessions/${s}/actions/${action.id}/approve`);
    expect(again.status).toBe(200);
    expect((await domainNames()).filter((n) => n === "alpha-approve")).toHaveLength(1);
    const reject = await t.api("POST", `/ai/sessions/${s}/actions/${action.id}/reject`);
    expect(reject.status).toBe(409);
    expect(reject.body.error.code).toBe("action_decided");

    const got = await t.api("GET", `/ai/sessions/${s}`);
    expect(got.body.turns.map((x: any) => x.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(got.body.actions).toHaveLength(1);
    const approvals = got.body.events
      .filter((e: any) => e.type === "approval")
      .map((e: any) => `${e.name}:${e.status}`);
    expect(approvals).toEqual(["action.pending:pending", "action.approved:approved", "action.executed:approved"]);
  });

  it("reject discards the action", async () => {
    const s = await session();
    const r = await turn(s, 'create domain "never-made"');
    const id = r.actions[0].id;
    const rejected = await t.api("POST", `/ai/sessions/${s}/actions/${id}/reject`);
    expect(rejected.status).toBe(200);
    expect(rejected.body.action).toMatchObject({ status: "rejected", decided_by: expect.any(String) });
    expect(rejected.body.action.result ?? null).toBeNull();
    expect((await t.api("POST", `/ai/sessions/${s}/actions/${id}/reject`)).status).toBe(200);
    const approve = await t.api("POST", `/ai/sessions/${s}/actions/${id}/approve`);
    expect(approve.status).toBe(409);
    expect(approve.body.error.code).toBe("action_decided");
    expect(await domainNames()).not.toContain("never-made");
  });

  it("an action whose execution fails records the error", async () => {
    const s = await session();
    await t.api("POST", "/domains", { name: "taken-name" });
    const r = await turn(s, 'create domain "taken-name"');
    const res = await t.api("POST", `/ai/sessions/${s}/actions/${r.actions[0].id}/approve`);
    expect(res.status).toBe(200);
    expect(res.body.action.status).toBe("approved");
    expect(res.body.action.error).toMatch(/^already_exists:/);
  });

  it("an approved action the tower never finished (stopped mid-run) is marked interrupted by the sweep", async () => {
    const s = await session();
    const r = await turn(s, 'create domain "half-done"');
    const id = r.actions[0].id;
    // the decision committed, then the tower stopped before the run recorded an outcome
    const decidedAt = new Date(Date.now() - 11 * 60_000).toISOString();
    expect(
      await t.tower.deps.store.decideAiAction(id, { status: "approved", decidedBy: "tok_admin", decidedAt }),
    ).toBeDefined();
    const ai = t.tower.services.ai;
    expect(await ai.sweepInterruptedActions()).toBe(1);
    expect(await ai.sweepInterruptedActions()).toBe(0); // once
    const got = await t.tower.deps.store.getAiAction(id);
    expect(got).toMatchObject({
      status: "approved",
      error: expect.stringMatching(
        /^interrupted: the tower stopped while running this action .* may or may not have taken effect/,
      ),
    });
    expect(got!.executedAt).not.toBe("");
    expect(await domainNames()).not.toContain("half-done"); // the sweep never runs the tool
    const failed = (await t.tower.deps.store.listEvents({ types: ["approval"], limit: 10_000 })).filter(
      (e) => e.name === "action.failed" && e.payload.action_id === id,
    );
    expect(failed).toHaveLength(1);
    // a fresh approval is left alone
    const fresh = (await turn(s, 'create domain "fresh-one"')).actions[0].id;
    await t.tower.deps.store.decideAiAction(fresh, {
      status: "approved",
      decidedBy: "tok_admin",
      decidedAt: new Date().toISOString(),
    });
    expect(await ai.sweepInterruptedActions()).toBe(0);
  });

  it("20 concurrent approve/reject calls on one action: one decision, at most one execution", async () => {
    const s = await session();
    const r = await turn(s, 'create domain "race-domain"');
    const id = r.actions[0].id;
    const calls = Array.from({ length: 20 }, (_, i) =>
      t.api("POST", `/ai/sessions/${s}/actions/${id}/${i % 2 ? "reject" : "approve"}`),
    );
    const results = await Promise.all(calls);
    const final = (await t.api("GET", `/ai/sessions/${s}`)).body.actions[0];
    expect(["approved", "rejected"]).toContain(final.status);
    const winner = final.status === "approved" ? "approve" : "reject";
    results.forEach((res, i) => {
      const verb = i % 2 ? "reject" : "approve";
      if (verb === winner) expect(res.status).toBe(200);
      else expect(res.status, JSON.stringify(res.body)).toBe(409);
    });
    const created = (await domainNames()).filter((n) => n === "race-domain");
    expect(created).toHaveLength(final.status === "approved" ? 1 : 0);
    const events = (await t.api("GET", `/ai/sessions/${s}`)).body.events.filter((e: any) => e.type === "approval");
    expect(
      events.filter((e: any) => e.status !== "pending" && e.name !== "action.executed" && e.name !== "action.failed"),
    ).toHaveLength(1);
    expect(
      events.filter((e: any) => e.name === "action.executed" || e.name === "action.failed").length,
    ).toBeLessThanOrEqual(1);
  });

  it("read tools run at once and come back as view_specs", async () => {
    const d = await t.api("POST", "/domains", { name: "reads" });
    await t.api("POST", `/domains/${d.body.domain.id}/m`, { title: "Launch prep" });
    const s = await session();
    const r = await turn(s, "list missions");
    expect(r.actions).toHaveLength(0);
    expect(r.reply.tool_calls[0]).toMatchObject({ tool: "list_missions", kind: "read" });
    const table = r.reply.view_specs.find((v: any) => v.type === "table");
    expect(table.rows.some((row: unknown[]) => row.includes("Launch prep"))).toBe(true);
  });

  it("work created from a session gets the central runtime default and the vendorA_code settings", async () => {
    const d = await t.api("POST", "/domains", { name: "runtime-dom" });
    const m = await t.api("POST", `/domains/${d.body.domain.id}/m`, { title: "Runtime mission" });
    const s = await session();
    const r = await turn(s, 'submit task "Write release notes" to mission "Runtime mission" with prompt "draft them"');
    expect(r.actions).toHaveLength(1);
    expect(r.actions[0].arguments).toMatchObject({
      runtime: "vendorA_code",
      input: { prompt: "draft them", claude: { model: "claude-test-model", max_tokens: 2048, timeout_seconds: 90 } },
    });
    expect((await t.api("GET", `/work/missions/${m.body.mission.id}/tasks`)).body.tasks).toHaveLength(0);
    const ok = await t.api("POST", `/ai/sessions/${s}/actions/${r.actions[0].id}/approve`);
    expect(ok.body.action.error).toBe("");
    const tasks = (await t.api("GET", `/work/missions/${m.body.mission.id}/tasks`)).body.tasks;
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ runtime: "vendorA_code", input: { claude: { model: "claude-test-model" } } });

    const shell = await turn(s, 'submit task "Lint" to mission "Runtime mission" with command "npm run lint"');
    expect(shell.actions[0].arguments.runtime).toBe("shell");
    expect(shell.actions[0].arguments.input.claude).toBeUndefined();
  });

  it("bad input is a clear error naming the field", async () => {
    const s = await session();
    const empty = await t.api("POST", `/ai/sessions/${s}/turns`, { content: "  " });
    expect(empty.status).toBe(400);
    expect(empty.body.error.details.field).toBe("content");
    const unknown = await t.api("POST", `/ai/sessions/${s}/turns`, { content: "hi", approve: true });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.details.field).toBe("approve");
    const missing = await t.api("POST", `/ai/sessions/${s}/actions/act_0000000000000000000000/approve`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("action_not_found");
  });
});

describe("ownership", () => {
  it("another user's session is 404 everywhere, and lists show only one's own", async () => {
    const mine = await session("mine");
    const r = await turn(mine, 'create domain "owned-by-admin"');
    const theirs = await session("theirs", other);
    const listed = await t.api("GET", "/ai/sessions", undefined, other);
    expect(listed.body.sessions.map((x: { id: string }) => x.id)).toEqual([theirs]);
    for (const [method, path, body] of [
      ["GET", `/ai/sessions/${mine}`],
      ["POST", `/ai/sessions/${mine}/turns`, { content: "list domains" }],
      ["POST", `/ai/sessions/${mine}/actions/${r.actions[0].id}/approve`],
      ["POST", `/ai/sessions/${mine}/actions/${r.actions[0].id}/reject`],
      ["GET", `/ai/sessions/${mine}/stream`],
    ] as const) {
      const res = await t.api(method, path, body, other);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe("session_not_found");
    }
    // the owner's action is untouched
    expect((await t.api("GET", `/ai/sessions/${mine}`)).body.actions[0].status).toBe("pending");
  });
});

/** Reads SSE events from the session stream until `count` arrived, then disconnects. */
async function readStream(
  sessionId: string,
  count: number,
  lastEventId?: number,
): Promise<{ id: number; data: any }[]> {
  return (await openStream(sessionId, lastEventId))(count);
}

/**
 * Opens a session's stream (resolves once the tower answered with the stream's headers); the function reads `count`
 * events.
 */
async function openStream(
  sessionId: string,
  lastEventId?: number,
): Promise<(count: number) => Promise<{ id: number; data: any }[]>> {
  const ac = new AbortController();
  const headers: Record<string, string> = { authorization: `Bearer ${t.adminToken}`, accept: "text/event-stream" };
  if (lastEventId !== undefined) headers["last-event-id"] = String(lastEventId);
  const res = await fetch(`${t.url}/ai/sessions/${sessionId}/stream`, { headers, signal: ac.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  return async (count) => {
    const out: { id: number; data: any }[] = [];
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    while (out.length < count) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const id = /^id: (\d+)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (id && data) out.push({ id: Number(id), data: JSON.parse(data) });
      }
    }
    ac.abort();
    return out;
  };
}

describe("session stream", () => {
  it("replays a session's events after a reconnect with Last-Event-ID, with no gap and no duplicate", async () => {
    const s = await session("streamed");
    await turn(s, 'create domain "stream-a"'); // session.created + 2 turns + 1 pending = 4 events
    const first = await readStream(s, 4);
    expect(first.map((e) => e.data.session_id)).toEqual([s, s, s, s]);
    expect(first[0].data).toMatchObject({ type: "matrix", name: "ai.session.created" });
    expect(first[3].data).toMatchObject({ type: "approval", status: "pending" });

    // while disconnected: another turn and an approval
    const r = await turn(s, 'create domain "stream-b"');
    await t.api("POST", `/ai/sessions/${s}/actions/${r.actions[0].id}/approve`);
    const all = (await t.api("GET", `/ai/sessions/${s}`)).body.events.map((e: any) => Number(e.id));
    const resumed = await readStream(s, all.length - 4, first[3].id);
    expect(resumed.map((e) => e.id)).toEqual(all.slice(4));
    expect(resumed.at(-1)!.data).toMatchObject({ type: "approval", name: "action.executed", status: "approved" });

    // a live event reaches an open stream
    const live = await openStream(s, all.at(-1));
    await turn(s, "list domains");
    const [next] = await live(1);
    expect(next.data).toMatchObject({
      name: "ai.turn",
      session_id: s,
      payload: { role: "user", content: "list domains" },
    });
  });
});

describe("session titles", () => {
  it("an untitled session is named after its first question; a given title stays", async () => {
    const ai = t.client(AiService);
    const { session: plain } = await ai.createSession({ title: "" });
    expect(plain!.title).toBe("New session");
    await ai.submitTurn({ sessionId: plain!.id, content: "  list   domains\nand more on a second line" });
    await ai.submitTurn({ sessionId: plain!.id, content: "list missions" });
    expect((await ai.getSession({ sessionId: plain!.id })).session!.title).toBe("list domains");
    const events = (await ai.getSession({ sessionId: plain!.id })).events.filter(
      (e) => e.name === "ai.session.updated",
    );
    expect(events).toHaveLength(1);

    const { session: named } = await ai.createSession({ title: "release triage" });
    await ai.submitTurn({ sessionId: named!.id, content: "list domains" });
    expect((await ai.getSession({ sessionId: named!.id })).session!.title).toBe("release triage");
  });

  it("a long first question is cut at a word", () => {
    const title = titleFromTurn(
      "please list every mission in the research domain that has a failed task and also show me their agents",
    );
    expect(title.length).toBeLessThanOrEqual(61);
    expect(title).toBe("please list every mission in the research domain that has a…");
  });
});

describe("Connect AiService", () => {
  it("serves the same sessions, turns and approvals", async () => {
    const ai = t.client(AiService);
    const { session: s } = await ai.createSession({ title: "connect" });
    const r = await ai.submitTurn({ sessionId: s!.id, content: 'create domain "via-connect"' });
    expect(r.actions[0].status).toBe(ActionStatus.PENDING);
    const a = await ai.approveAction({ sessionId: s!.id, actionId: r.actions[0].id });
    expect(a.action!.status).toBe(ActionStatus.APPROVED);
    expect(await domainNames()).toContain("via-connect");
    const got = await ai.getSession({ sessionId: s!.id });
    expect(got.turns).toHaveLength(2);
    const listed = await ai.listSessions({});
    expect(listed.sessions.some((x) => x.id === s!.id)).toBe(true);
  });
});
