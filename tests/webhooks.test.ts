// Outgoing webhooks on a real tower with a real HTTP receiver (docs/webhooks.md): task.failed and
// permission.requested arrive signed and verify; a receiver that is down gets retries with
// backoff and the delivery log shows each attempt; a pending delivery survives a tower restart;
// the Slack body; who may manage and who may only list; malformed input refused by field; the
// secret never stored in the clear.
import { existsSync, readFileSync } from "node:fs";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ApprovalService, PermissionOptionKind } from "../gen/ep/tower/v1/approvals_pb.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Role, Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WebhookDeliveryStatus, WebhookFormat, WebhookService } from "../gen/ep/tower/v1/webhooks_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { freePort, startTower, tempHome, useCleanups, waitFor, type TestTower } from "./harness.js";
import { startReceiver, verifySignature, type Receiver } from "./webhook-receiver.js";

const cleanup = useCleanups();
/** short retries, so a test sees several attempts in milliseconds */
const FAST = {
  EP_SECRET_KEY: "hooks",
  EP_WEBHOOK_BACKOFF_MS: "20",
  EP_WEBHOOK_BACKOFF_MAX_MS: "40",
  EP_WEBHOOK_POLL_MS: "20",
  EP_WEBHOOK_MAX_ATTEMPTS: "3",
  EP_WEBHOOK_TIMEOUT_MS: "2000",
};

async function tower(env: Record<string, string> = {}, home?: string): Promise<TestTower> {
  const t = await startTower({ env: { ...FAST, ...env }, home });
  cleanup(() => t.close());
  return t;
}

async function receiver(answer?: (n: number) => number): Promise<Receiver> {
  const r = await startReceiver(answer);
  cleanup(() => r.close());
  return r;
}

/** A domain with a node and a shell agent that claims, so a test can fail tasks and ask for approvals. */
async function workplace(t: TestTower, name = "hooks") {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  const node = await t.client(NodeService).registerNode({ hostname: `${name}-node`, domainIds: [domainId] });
  const agentId = (
    await t.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: `${name}-agent` })
  ).agent!.id;
  const nodeWork = t.client(WorkService, node.token);
  const held = async (title: string) => {
    await work.createTask({ missionId, title, runtime: Runtime.SHELL, input: { command: "false" } });
    return (await nodeWork.claimTask({ agentId })).task!;
  };
  const failTask = async (title: string) => {
    const task = await held(title);
    await nodeWork.failTask({ taskId: task.id, agentId, result: { error: "exit 1", output: "" } });
    return task;
  };
  const ask = async (taskId: string) =>
    (
      await t.client(ApprovalService, node.token).requestPermission({
        taskId,
        agentId,
        tool: "Bash",
        title: "rm -rf build",
        options: [{ optionId: "once", name: "Allow once", kind: PermissionOptionKind.ALLOW_ONCE }],
      })
    ).approval!;
  return { domainId, missionId, agentId, node, held, failTask, ask };
}

const failure = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
    return "ok";
  } catch (err) {
    const e = ConnectError.from(err);
    return `${Code[e.code]}: ${e.rawMessage}`;
  }
};

const deliveries = async (t: TestTower, domainId: string, webhookId: string) =>
  (await t.client(WebhookService).listWebhookDeliveries({ domainId, webhookId })).deliveries;

describe("webhooks", () => {
  it("a receiver gets task.failed and permission.requested signed, and the signature verifies", async () => {
    const t = await tower();
    const r = await receiver();
    const w = await workplace(t);
    const created = await t.client(WebhookService).createWebhook({
      domainId: w.domainId,
      url: r.url,
      events: ["task.failed", "permission.requested"],
      description: "pager",
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const hook = created.webhook!;
    expect(hook).toMatchObject({
      domainId: w.domainId,
      url: r.url,
      events: ["task.failed", "permission.requested"],
      format: WebhookFormat.EP,
      description: "pager",
    });

    const failed = await w.failTask("will fail");
    const asking = await w.held("will ask");
    const approval = await w.ask(asking.id);
    await waitFor(() => r.received.length >= 2);

    const byEvent = new Map(r.received.map((x) => [x.headers["ep-event"], x]));
    const f = byEvent.get("task.failed")!;
    expect(f.json.event).toMatchObject({
      name: "task.failed",
      type: "matrix",
      domain_id: w.domainId,
      task_id: failed.id,
      status: "failed",
    });
    expect(f.json.webhook_id).toBe(hook.id);
    expect(f.headers["ep-delivery"]).toBe(f.json.delivery_id);
    expect(f.headers["content-type"]).toBe("application/json");
    const p = byEvent.get("permission.requested")!;
    expect(p.json.event).toMatchObject({
      name: "permission.requested",
      type: "approval",
      task_id: asking.id,
      payload: { approval_id: approval.id, tool: "Bash" },
    });
    for (const x of [f, p]) {
      expect(verifySignature(created.secret, x.headers["ep-signature"] as string, x.body)).toBe(true);
      // a body changed on the way, another secret, or an old timestamp does not verify
      expect(verifySignature(created.secret, x.headers["ep-signature"] as string, x.body.replace("}", " }"))).toBe(
        false,
      );
      expect(verifySignature("whsec_other", x.headers["ep-signature"] as string, x.body)).toBe(false);
      expect(verifySignature(created.secret, x.headers["ep-signature"] as string, x.body, Date.now() + 600_000)).toBe(
        false,
      );
    }
    // only the chosen events: the task's created/claimed/running never came
    expect(r.received.map((x) => x.headers["ep-event"]).sort()).toEqual(["permission.requested", "task.failed"]);
    const log = await deliveries(t, w.domainId, hook.id);
    expect(log.map((d) => [d.eventName, d.status, d.attempts, d.statusCode])).toEqual(
      expect.arrayContaining([
        ["task.failed", WebhookDeliveryStatus.SUCCEEDED, 1, 200],
        ["permission.requested", WebhookDeliveryStatus.SUCCEEDED, 1, 200],
      ]),
    );

    // the secret is shown once: never listed, never in the database file or the event log in the clear
    const listed = await t.api("GET", `/domains/${w.domainId}/webhooks`);
    expect(listed.body.webhooks).toHaveLength(1);
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
    // the database and its write-ahead log hold the event log too
    for (const file of ["ep.db", "ep.db-wal"].map((f) => join(t.home, "tower", f)).filter((f) => existsSync(f))) {
      expect(readFileSync(file).includes(Buffer.from(created.secret))).toBe(false);
    }
  });

  it("a receiver that is down gets retries with backoff, and the delivery log shows each attempt", async () => {
    const t = await tower();
    const w = await workplace(t);
    const deadPort = await freePort();
    const hooks = t.client(WebhookService);
    const dead = (
      await hooks.createWebhook({
        domainId: w.domainId,
        url: `http://127.0.0.1:${deadPort}/down`,
        events: ["task.failed"],
      })
    ).webhook!;
    // answers 503 twice, then takes it
    const flaky = await receiver((n) => (n < 2 ? 503 : 204));
    const later = (await hooks.createWebhook({ domainId: w.domainId, url: flaky.url, events: ["task.failed"] }))
      .webhook!;
    await w.failTask("nobody hears");

    await waitFor(async () => (await deliveries(t, w.domainId, dead.id))[0]?.status === WebhookDeliveryStatus.FAILED);
    const [gaveUp] = await deliveries(t, w.domainId, dead.id);
    expect(gaveUp.attempts).toBe(3);
    expect(gaveUp.attemptLog).toHaveLength(3);
    for (const a of gaveUp.attemptLog)
      expect(a).toMatchObject({ statusCode: 0, error: expect.stringMatching(/ECONNREFUSED/) });
    const times = gaveUp.attemptLog.map((a) => timestampMs(a.time!));
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(10); // the first backoff (20 ms, jitter at most 20 %)

    await waitFor(
      async () => (await deliveries(t, w.domainId, later.id))[0]?.status === WebhookDeliveryStatus.SUCCEEDED,
    );
    const [ok] = await deliveries(t, w.domainId, later.id);
    expect(ok.attemptLog.map((a) => a.statusCode)).toEqual([503, 503, 204]);
    expect(ok.attemptLog.map((a) => a.error)).toEqual(["HTTP 503", "HTTP 503", ""]);
    expect(flaky.received.map((x) => x.headers["ep-attempt"])).toEqual(["1", "2", "3"]);
    // the same delivery each time, each attempt signed anew
    expect(new Set(flaky.received.map((x) => x.headers["ep-delivery"])).size).toBe(1);

    // the log can be narrowed to one status over REST too
    const failedOnly = await t.api("GET", `/domains/${w.domainId}/webhooks/${dead.id}/deliveries?status=failed`);
    expect(failedOnly.status).toBe(200);
    expect(failedOnly.body.deliveries).toHaveLength(1);
    expect(failedOnly.body.deliveries[0]).toMatchObject({ status: "failed", attempts: 3, event_name: "task.failed" });
  });

  it("a pending delivery is stored: a tower restarted on the same database sends it", async () => {
    const home = tempHome("ep-hooks-restart-");
    cleanup(() => home.cleanup());
    let up = false;
    const r = await receiver(() => (up ? 200 : 503));
    const env = { EP_WEBHOOK_MAX_ATTEMPTS: "50" };
    const first = await tower(env, home.dir);
    const w = await workplace(first);
    const hook = (
      await first.client(WebhookService).createWebhook({ domainId: w.domainId, url: r.url, events: ["task.failed"] })
    ).webhook!;
    await w.failTask("before the restart");
    // the 503 recorded before the stop (a stop cutting an attempt off leaves it uncounted)
    await waitFor(async () => ((await deliveries(first, w.domainId, hook.id))[0]?.attemptLog.length ?? 0) >= 1);
    await first.close();
    const before = r.received.length;
    up = true;
    const second = await tower(env, home.dir);
    await waitFor(
      async () => (await deliveries(second, w.domainId, hook.id))[0]?.status === WebhookDeliveryStatus.SUCCEEDED,
    );
    const [d] = await deliveries(second, w.domainId, hook.id);
    // an attempt the stop cut off reached the receiver but is not counted
    expect(d.attempts).toBeGreaterThanOrEqual(2);
    expect(d.attempts).toBeLessThanOrEqual(r.received.length);
    expect(r.received.length).toBeGreaterThan(before);
    expect(d.attemptLog.at(-1)!.statusCode).toBe(200);
    expect(d.attemptLog[0].statusCode).toBe(503);
    expect(new Set(r.received.map((x) => x.headers["ep-delivery"]))).toEqual(new Set([d.id]));
  });

  it("an attempt cut off by the tower stopping is not counted: the next start sends it at once", async () => {
    const home = tempHome("ep-hooks-stop-");
    cleanup(() => home.cleanup());
    // the first request is never answered (the receiver holds it); later ones get 200
    const held: import("node:http").ServerResponse[] = [];
    const { createServer } = await import("node:http");
    let n = 0;
    const server = createServer((req, res) => {
      req.resume();
      if (n++ === 0) held.push(res);
      else res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanup(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/held`;
    // a long attempt limit: the stop, not the timeout, ends the first attempt
    const env = { EP_WEBHOOK_TIMEOUT_MS: "60000" };
    const first = await tower(env, home.dir);
    const w = await workplace(first);
    const hook = (
      await first.client(WebhookService).createWebhook({ domainId: w.domainId, url, events: ["task.failed"] })
    ).webhook!;
    await w.failTask("cut off");
    await waitFor(() => held.length === 1);
    await first.close();
    const second = await tower(env, home.dir);
    await waitFor(
      async () => (await deliveries(second, w.domainId, hook.id))[0]?.status === WebhookDeliveryStatus.SUCCEEDED,
    );
    const [d] = await deliveries(second, w.domainId, hook.id);
    expect(d.attempts).toBe(1);
    expect(d.attemptLog.map((a) => a.statusCode)).toEqual([200]);
  });

  it(
    "the Slack format sends text and blocks; ep webhook " + "test's delivery arrives whatever events were chosen",
    async () => {
      const t = await tower();
      const r = await receiver();
      const w = await workplace(t);
      const hooks = t.client(WebhookService);
      const hook = (
        await hooks.createWebhook({
          domainId: w.domainId,
          url: r.url,
          events: ["task.failed"],
          format: WebhookFormat.SLACK,
        })
      ).webhook!;
      const tested = await hooks.testWebhook({ domainId: w.domainId, webhookId: hook.id });
      expect(tested.delivery!.eventName).toBe("webhook.test");
      await waitFor(() => r.received.length >= 1);
      expect(r.received[0].json).toMatchObject({
        text: "Test delivery from EP: this webhook works",
        blocks: [{ type: "section" }, { type: "context" }],
      });
      await w.failTask("<b>tag</b> & more");
      await waitFor(() => r.received.length >= 2);
      const slack = r.received[1].json;
      expect(slack.text).toBe('Task "<b>tag</b> & more" failed: exit 1');
      expect(slack.blocks[0]).toEqual({
        type: "section",
        text: { type: "mrkdwn", text: 'Task "&lt;b&gt;tag&lt;/b&gt; &amp; more" failed: exit 1' },
      });
      expect(JSON.stringify(slack.blocks[1])).toContain(w.domainId);
      const [done] = await deliveries(t, w.domainId, hook.id);
      expect(done.status).toBe(WebhookDeliveryStatus.SUCCEEDED);
    },
  );

  it(
    "admins and operators manage a domain's webhooks; viewers list " +
      "them with the URL cut to its origin; nodes and agents are refused",
    async () => {
      const t = await tower();
      const w = await workplace(t);
      const auth = t.client(AuthService);
      const token = async (role: Role) =>
        (await auth.createToken({ name: `hooks-${role}`, role, domainId: role === Role.AGENT ? w.domainId : "" }))
          .secret;
      const operator = await token(Role.OPERATOR);
      const viewer = await token(Role.VIEWER);
      const agent = await token(Role.AGENT);
      const url = "https://hooks.example.test/services/T000/B000/XXXXSECRET";
      const made = await t
        .client(WebhookService, operator)
        .createWebhook({ domainId: w.domainId, url, events: ["node.offline"] });
      expect(made.webhook!.createdBy).toBe(`hooks-${Role.OPERATOR}`);
      const seen = (await t.client(WebhookService, viewer).listWebhooks({ domainId: w.domainId })).webhooks;
      expect(seen.map((x) => x.url)).toEqual(["https://hooks.example.test/…"]);
      expect((await t.client(WebhookService, operator).listWebhooks({ domainId: w.domainId })).webhooks[0].url).toBe(
        url,
      );
      expect(
        await failure(
          t.client(WebhookService, viewer).createWebhook({ domainId: w.domainId, url, events: ["task.failed"] }),
        ),
      ).toMatch(/^PermissionDenied: role viewer may not call WebhookService\/CreateWebhook/);
      expect(
        await failure(
          t.client(WebhookService, viewer).deleteWebhook({ domainId: w.domainId, webhookId: made.webhook!.id }),
        ),
      ).toMatch(/role viewer may not call WebhookService\/DeleteWebhook/);
      expect(await failure(t.client(WebhookService, agent).listWebhooks({ domainId: w.domainId }))).toMatch(
        /role agent may not call/,
      );
      expect(await failure(t.client(WebhookService, w.node.token).listWebhooks({ domainId: w.domainId }))).toMatch(
        /role node may not call/,
      );
      // viewers read the delivery log
      expect(
        await failure(
          t.client(WebhookService, viewer).listWebhookDeliveries({ domainId: w.domainId, webhookId: made.webhook!.id }),
        ),
      ).toBe("ok");
      await t.client(WebhookService, operator).deleteWebhook({ domainId: w.domainId, webhookId: made.webhook!.id });
      expect((await t.client(WebhookService).listWebhooks({ domainId: w.domainId })).webhooks).toEqual([]);
    },
  );

  it("malformed input is refused naming what was wrong, and nothing is stored", async () => {
    const t = await tower();
    const w = await workplace(t);
    const other = await workplace(t, "other");
    const hooks = t.client(WebhookService);
    const make = (over: Record<string, unknown>) =>
      failure(
        hooks.createWebhook({ domainId: w.domainId, url: "https://example.test/h", events: ["task.failed"], ...over }),
      );
    expect(await make({ url: "" })).toMatch(/InvalidArgument: url: is required/);
    expect(await make({ url: "not a url" })).toMatch(/url: is not an absolute URL/);
    expect(await make({ url: "ftp://example.test/h" })).toMatch(/url: must use http or https \(got ftp\)/);
    expect(await make({ url: "file:///etc/passwd" })).toMatch(/url: must use http or https \(got file\)/);
    expect(await make({ url: "https://user:pw@example.test/h" })).toMatch(/url: must not carry a user or password/);
    expect(await make({ url: `https://example.test/${"x".repeat(2100)}` })).toMatch(/url: is longer than 2048/);
    expect(await make({ events: [] })).toMatch(/events: choose at least one of task.created/);
    expect(await make({ events: ["task.failed", "task.exploded"] })).toMatch(
      /events\[1\]: "task.exploded" is not an event a webhook can receive/,
    );
    expect(await make({ domainId: "" })).toMatch(/domain_id: is required/);
    expect(await make({ domainId: "dom_nope" })).toMatch(/NotFound: no domain dom_nope/);
    expect(await make({ description: "d".repeat(501) })).toMatch(/description: is longer than 500/);
    expect((await hooks.listWebhooks({ domainId: w.domainId })).webhooks).toEqual([]);

    // a webhook is addressed through its own domain only
    const hook = (
      await hooks.createWebhook({ domainId: w.domainId, url: "https://example.test/h", events: ["task.failed"] })
    ).webhook!;
    expect(await failure(hooks.deleteWebhook({ domainId: other.domainId, webhookId: hook.id }))).toMatch(
      /NotFound: no webhook .* in domain/,
    );
    expect(await failure(hooks.testWebhook({ domainId: w.domainId, webhookId: "whk_nope" }))).toMatch(
      /NotFound: no webhook whk_nope/,
    );
    expect(
      await failure(hooks.listWebhookDeliveries({ domainId: w.domainId, webhookId: hook.id, pageToken: "garbage" })),
    ).toMatch(/page_token: is not a token/);

    // REST: the same checks, the field named, unknown fields refused
    const rest = await t.api("POST", `/domains/${w.domainId}/webhooks`, { url: "gopher://x", events: ["task.failed"] });
    expect(rest.status).toBe(400);
    expect(rest.body.error).toMatchObject({ code: "invalid_argument", details: { field: "url" } });
    const unknown = await t.api("POST", `/domains/${w.domainId}/webhooks`, {
      url: "https://example.test/h",
      events: ["task.failed"],
      secret: "mine",
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toMatch(/secret/);
    const badFormat = await t.api("POST", `/domains/${w.domainId}/webhooks`, {
      url: "https://example.test/h",
      events: ["task.failed"],
      format: "teams",
    });
    expect(badFormat.status).toBe(400);
    const created = await t.api("POST", `/domains/${w.domainId}/webhooks`, {
      url: "https://example.test/h2",
      events: ["task.succeeded"],
      format: "slack",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      webhook: { format: "slack", events: ["task.succeeded"] },
      secret: expect.stringMatching(/^whsec_/),
    });
    expect((await t.api("DELETE", `/domains/${w.domainId}/webhooks/${created.body.webhook.id}`)).status).toBe(200);
    expect((await t.api("DELETE", `/domains/${w.domainId}/webhooks/${created.body.webhook.id}`)).status).toBe(404);
    expect((await hooks.listWebhooks({ domainId: w.domainId })).webhooks.map((x) => x.id)).toEqual([hook.id]);
  });

  it("a rotation of the secret-store key re-seals webhook secrets: after it the old key may go", async () => {
    const home = tempHome("ep-hooks-rotate-");
    cleanup(() => home.cleanup());
    const r = await receiver();
    const before = await tower({ EP_SECRET_KEY: "old key" }, home.dir);
    const w = await workplace(before);
    const made = await before
      .client(WebhookService)
      .createWebhook({ domainId: w.domainId, url: r.url, events: ["task.failed"] });
    await before.close();
    // rotated: the new key, the old one as previous, then the new key alone
    await (await tower({ EP_SECRET_KEY: "new key", EP_SECRET_KEY_PREVIOUS: "old key" }, home.dir)).close();
    const after = await tower({ EP_SECRET_KEY: "new key" }, home.dir);
    await after.client(WebhookService).testWebhook({ domainId: w.domainId, webhookId: made.webhook!.id });
    await waitFor(() => r.received.length >= 1);
    expect(verifySignature(made.secret, r.received[0].headers["ep-signature"] as string, r.received[0].body)).toBe(
      true,
    );
  });

  it("a bad setting is a startup error naming the variable", async () => {
    await expect(startTower({ env: { EP_SECRET_KEY: "x", EP_WEBHOOK_MAX_ATTEMPTS: "0" } })).rejects.toThrow(
      /EP_WEBHOOK_MAX_ATTEMPTS must be a whole number from 1 to 50 \(got "0"\)/,
    );
    await expect(
      startTower({ env: { EP_SECRET_KEY: "x", EP_WEBHOOK_BACKOFF_MS: "5000", EP_WEBHOOK_BACKOFF_MAX_MS: "10" } }),
    ).rejects.toThrow(/EP_WEBHOOK_BACKOFF_MAX_MS \(10\) must not be below/);
  });
});
