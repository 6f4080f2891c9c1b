// Probes for the authorization matrix (tests/authz-matrix.test.ts): one call per door, made
// with a valid request against domain A's resources, classified as allow (the call got past
// authorization: any answer but 401/403), deny (401/403, unauthenticated/forbidden) or invalid
// (the probe itself was malformed: the test fails so the probe gets fixed, never counted).
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../gen/ep/errors/v1/errors_pb.js";
import { enumOf } from "../common/vocab.js";
import { RoleSchema, Role as TokenRole } from "../gen/ep/tower/v1/resources_pb.js";
import { AgentState } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import WebSocket from "ws";
import { toEpError } from "../common/errors.js";
import { AiService } from "../gen/ep/tower/v1/ai_pb.js";
import { ApprovalService, PermissionOptionKind } from "../gen/ep/tower/v1/approvals_pb.js";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { WebhookService } from "../gen/ep/tower/v1/webhooks_pb.js";
import { ToolService } from "../gen/ep/tower/v1/tools_pb.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService, FrameKind } from "../gen/ep/tower/v1/work_pb.js";
import type { TestTower } from "./harness.js";
import { doorOf, ROLES, type Outcome, type Role } from "./authz-table.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

export const SERVICES: DescService[] = [
  WorkService,
  NodeService,
  AgentService,
  AuthService,
  EventService,
  AiService,
  SecretService,
  ToolService,
  ApprovalService,
  WebhookService,
];

const PROBE_OPTIONS = [
  { optionId: "allow", name: "Allow", kind: PermissionOptionKind.ALLOW_ONCE },
  { optionId: "reject", name: "Reject", kind: PermissionOptionKind.REJECT_ONCE },
];

export interface Fixture {
  t: TestTower;
  tokens: Record<Role, string>;
  domainA: string;
  /** a domain the node does not serve */
  domainB: string;
  missionA: string;
  agentA: string;
  nodeA: string;
  sessionA: string;
  /** the caller of the probe being built (REST probes that log in with their own token) */
  role?: Role;
  /** a fresh queued task in domain A (each probe may change the task it is given) */
  task(): Promise<string>;
  /** a fresh Kanban (assigned) task in mission A */
  kanbanTask(): Promise<string>;
  /** a fresh token to revoke */
  spareToken(): Promise<string>;
  /** a fresh pending permission approval for a task agent A holds */
  approval(): Promise<string>;
  /** a webhook of domain A (to a closed loopback port) */
  webhookA: string;
  /** a fresh webhook of domain A (each probe may delete the one it is given) */
  webhook(): Promise<string>;
}

export async function makeFixture(t: TestTower): Promise<Fixture> {
  const work = t.client(WorkService);
  const auth = t.client(AuthService);
  const domainA = (await work.createDomain({ name: "authz-a" })).domain!.id;
  const domainB = (await work.createDomain({ name: "authz-b" })).domain!.id;
  const missionA = (await work.createMission({ domainId: domainA, title: "authz" })).mission!.id;
  const token = async (role: string, domainId = "") =>
    (
      await auth.createToken({
        name: `authz-${role}-${domainId}`,
        role: enumOf<TokenRole>(RoleSchema, role, "role"),
        domainId,
      })
    ).secret;
  const node = await t.client(NodeService).registerNode({ hostname: "authz-node", domainIds: [domainA] });
  const agentA = (
    await t
      .client(AgentService, node.token)
      .enrollAgent({ domainId: domainA, runtime: Runtime.SHELL, name: "authz-agent" })
  ).agent!.id;
  await t.client(SecretService).setSecret({ name: "AUTHZ_SECRET", value: "v", domainId: domainA });
  await t.client(SecretService).grantSecret({ name: "AUTHZ_SECRET", domainId: domainA });
  const sessionA = (await t.client(AiService).createSession({ title: "authz" })).session!.id;
  // port 9 (discard) on loopback: nothing listens, so a test delivery fails at once
  const webhook = async () =>
    (
      await t
        .client(WebhookService)
        .createWebhook({ domainId: domainA, url: "http://127.0.0.1:9/authz", events: ["node.offline"] })
    ).webhook!.id;
  const webhookA = await webhook();
  const tokens: Record<Role, string> = {
    admin: t.adminToken,
    operator: await token("operator"),
    viewer: await token("viewer"),
    node: node.token,
    agent: await token("agent", domainA),
    agent_foreign: await token("agent", domainB),
  };
  return {
    t,
    tokens,
    domainA,
    domainB,
    missionA,
    agentA,
    nodeA: node.node!.id,
    sessionA,
    webhookA,
    webhook,
    task: async () =>
      (
        await work.createTask({
          missionId: missionA,
          title: "probe",
          runtime: Runtime.SHELL,
          input: { command: "true" },
        })
      ).task!.id,
    kanbanTask: async () =>
      (await t.api("POST", `/domains/${domainA}/m/${missionA}/t`, { title: "card" })).body.task.id as string,
    spareToken: async () => (await auth.createToken({ name: "authz-spare", role: TokenRole.VIEWER })).token!.id,
    approval: async () => {
      await work.createTask({ missionId: missionA, title: "asks", runtime: Runtime.SHELL, input: { command: "true" } });
      const held = (await t.client(WorkService, node.token).claimTask({ agentId: agentA })).task!;
      const asked = await t
        .client(ApprovalService, node.token)
        .requestPermission({ taskId: held.id, agentId: agentA, tool: "Bash", options: PROBE_OPTIONS });
      return asked.approval!.id;
    },
  };
}

/**
 * Every probe names resources that exist (the fixture's), except where it says "missing" on
 * purpose: a not-found for one of these kinds is the resource hidden from the caller, a deny.
 */
const HIDDEN = new Set([
  "domain_not_found",
  "mission_not_found",
  "task_not_found",
  "agent_not_found",
  "node_not_found",
  "session_not_found",
  "approval_not_found",
]);

function classifyStatus(status: number, code?: string): Outcome | "invalid" {
  if (status === 401 || status === 403) return "deny";
  if (status === 404 && code && HIDDEN.has(code)) return "deny";
  if (status === 400) return "invalid";
  return "allow";
}

async function classifyResponse(res: Response): Promise<Outcome | "invalid"> {
  let code: string | undefined;
  if (res.status === 404) {
    const body = (await res.json().catch(() => undefined)) as { error?: { code?: string } } | undefined;
    code = body?.error?.code;
  }
  return classifyStatus(res.status, code);
}

function classifyError(err: unknown): Outcome | "invalid" {
  const e = toEpError(err);
  if (e.errorClass === "unauthenticated" || e.errorClass === "forbidden" || HIDDEN.has(e.code)) return "deny";
  if (e.errorClass === "invalid") return "invalid";
  return "allow";
}

type Init = Record<string, unknown>;
/** A pipeline of one shell step: what RunPipeline's probes send. */
const PROBE_PIPELINE = '[[step]]\nname = "probe"\ncommand = "true"\n';
/** The request for each Connect method, against domain A. */
const CONNECT: Record<string, (f: Fixture) => Promise<Init> | Init> = {
  "WorkService/CreateDomain": () => ({ name: `d-${Math.random().toString(36).slice(2, 9)}` }),
  "WorkService/ListDomains": () => ({}),
  "WorkService/GetDomain": (f) => ({ domainId: f.domainA }),
  "WorkService/CreateMission": (f) => ({ domainId: f.domainA, title: "m" }),
  "WorkService/ListMissions": (f) => ({ domainId: f.domainA }),
  "WorkService/GetMission": (f) => ({ missionId: f.missionA }),
  "WorkService/CreateTask": (f) => ({
    missionId: f.missionA,
    title: "t",
    runtime: Runtime.SHELL,
    input: { command: "true" },
  }),
  "WorkService/ListTasks": (f) => ({ missionId: f.missionA }),
  "WorkService/GetTask": async (f) => ({ taskId: await f.task() }),
  "WorkService/UpdateTask": async (f) => ({ taskId: await f.task(), priority: 2 }),
  "WorkService/DeleteTask": async (f) => ({ taskId: await f.task() }),
  "WorkService/ClaimTask": (f) => ({ agentId: f.agentA }),
  "WorkService/StartTask": async (f) => ({ taskId: await f.task(), agentId: f.agentA }),
  "WorkService/HeartbeatTask": async (f) => ({ taskId: await f.task(), agentId: f.agentA }),
  "WorkService/ReportProgress": async (f) => ({
    taskId: await f.task(),
    agentId: f.agentA,
    frames: [{ kind: FrameKind.TEXT, text: "x" }],
  }),
  "WorkService/CompleteTask": async (f) => ({ taskId: await f.task(), agentId: f.agentA, result: { output: "x" } }),
  "WorkService/FailTask": async (f) => ({ taskId: await f.task(), agentId: f.agentA, result: { error: "x" } }),
  "WorkService/RetryTask": async (f) => ({ taskId: await f.task() }),
  "WorkService/CancelTask": async (f) => ({ taskId: await f.task() }),
  "WorkService/MergeTask": async (f) => ({ taskId: await f.task() }),
  "WorkService/RunPipeline": (f) => ({ domainId: f.domainA, source: PROBE_PIPELINE }),
  "WorkService/GetPipeline": (f) => ({ missionId: f.missionA }),
  "NodeService/RegisterNode": () => ({ hostname: "probe-node" }),
  "NodeService/ListNodes": () => ({}),
  "NodeService/GetNode": (f) => ({ nodeId: f.nodeA }),
  "NodeService/PublishEvents": (f) => ({ events: [{ type: "inbox", name: "probe", domainId: f.domainA }] }),
  // the node serves domain A only: an event stamped with domain B is refused (issue 35)
  "NodeService/PublishEvents (domain B)": (f) => ({ events: [{ type: "inbox", name: "probe", domainId: f.domainB }] }),
  "NodeService/ReportNodeState": () => ({}),
  "NodeService/ReloadNodeConfig": (f) => ({ nodeId: f.nodeA }),
  "NodeService/SetNodeDomains": (f) => ({ nodeId: f.nodeA, domainIds: [f.domainA] }),
  "AgentService/EnrollAgent": (f) => ({ domainId: f.domainA, nodeId: f.nodeA, runtime: Runtime.SHELL, name: "probe" }),
  "AgentService/ListAgents": (f) => ({ domainId: f.domainA }),
  "AgentService/GetAgent": (f) => ({ agentId: f.agentA }),
  "AgentService/UpdateAgentState": (f) => ({ agentId: f.agentA, state: AgentState.IDLE }),
  "AgentService/SignalAgent": (f) => ({ agentId: f.agentA, prompt: "hello" }),
  "AgentService/SuperviseAgent": (f) => ({ agentId: f.agentA, op: "pause" }),
  "AuthService/CreateToken": () => ({ name: "probe", role: TokenRole.VIEWER }),
  "AuthService/ListTokens": () => ({}),
  "AuthService/RevokeToken": async (f) => ({ tokenId: await f.spareToken() }),
  "AuthService/WhoAmI": () => ({}),
  "AuthService/CreateTicket": () => ({ purpose: "events" }),
  "EventService/ListEvents": (f) => ({ filter: { domainId: f.domainA }, limit: 5 }),
  "AiService/CreateSession": () => ({ title: "probe" }),
  "AiService/ListSessions": () => ({}),
  "AiService/GetSession": (f) => ({ sessionId: f.sessionA }),
  "AiService/SubmitTurn": (f) => ({ sessionId: f.sessionA, content: "list domains" }),
  "AiService/ApproveAction": (f) => ({ sessionId: f.sessionA, actionId: "act_missing" }),
  "AiService/RejectAction": (f) => ({ sessionId: f.sessionA, actionId: "act_missing" }),
  "ApprovalService/RequestPermission": async (f) => ({ taskId: await f.task(), agentId: f.agentA, tool: "Bash" }),
  "ApprovalService/WaitApproval": async (f) => ({
    approvalId: await f.approval(),
    wait: { seconds: 0n, nanos: 1_000_000 },
  }),
  "ApprovalService/ListApprovals": () => ({}),
  "ApprovalService/GetApproval": async (f) => ({ approvalId: await f.approval() }),
  "ApprovalService/Approve": async (f) => ({ approvalId: await f.approval() }),
  "ApprovalService/Reject": async (f) => ({ approvalId: await f.approval() }),
  "ToolService/ListTools": () => ({}),
  "ToolService/CallTool": (f) => ({ tool: "list_missions", arguments: { domain_id: f.domainA } }),
  "SecretService/SetSecret": (f) => ({ name: "AUTHZ_PROBE", value: "v", domainId: f.domainA }),
  "SecretService/ListSecrets": () => ({}),
  "SecretService/DeleteSecret": () => ({ name: "AUTHZ_MISSING" }),
  "SecretService/GrantSecret": (f) => ({ name: "AUTHZ_SECRET", domainId: f.domainA }),
  "SecretService/RevokeSecret": (f) => ({ name: "AUTHZ_SECRET", agentId: f.agentA }),
  "SecretService/ResolveSecret": (f) => ({ name: "AUTHZ_SECRET", agentId: f.agentA }),
  "WebhookService/CreateWebhook": (f) => ({
    domainId: f.domainA,
    url: "http://127.0.0.1:9/probe",
    events: ["task.failed"],
  }),
  "WebhookService/ListWebhooks": (f) => ({ domainId: f.domainA }),
  "WebhookService/DeleteWebhook": async (f) => ({ domainId: f.domainA, webhookId: await f.webhook() }),
  "WebhookService/TestWebhook": (f) => ({ domainId: f.domainA, webhookId: f.webhookA }),
  "WebhookService/ListWebhookDeliveries": (f) => ({ domainId: f.domainA, webhookId: f.webhookA }),
};

const STREAMS: Record<string, (f: Fixture) => Init> = {
  "EventService/StreamEvents": (f) => ({ filter: { domainId: f.domainA } }),
  "AiService/StreamSession": (f) => ({ sessionId: f.sessionA }),
  "NodeService/Link": () => ({ attachSecret: "s".repeat(32), version: "probe" }),
  // bidi over HTTP/2 (gRPC, as epd dials it): the request stream holds the open message
  "NodeService/Session": () => ({
    message: { case: "open", value: { attachSecret: "s".repeat(32), version: "probe" } },
  }),
};
const BIDI = new Set(["NodeService/Session"]);

export const CONNECT_METHODS = [...Object.keys(CONNECT), ...Object.keys(STREAMS)];

function client(f: Fixture, service: DescService, role: Role, http2 = false): Client<DescService> {
  const token = f.tokens[role];
  const interceptors = [
    ((next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))) as Interceptor,
  ];
  const transport = http2
    ? createGrpcTransport({ baseUrl: f.t.url, interceptors })
    : createConnectTransport({ baseUrl: f.t.url, httpVersion: "1.1", interceptors });
  return createClient(service, transport);
}

export async function probeConnect(f: Fixture, method: string, role: Role): Promise<Outcome | "invalid"> {
  const [svc, name] = doorOf(method).split("/");
  const service = SERVICES.find((s) => s.typeName === `ep.tower.v1.${svc}`)!;
  const local = name[0].toLowerCase() + name.slice(1);
  const c = client(f, service, role, BIDI.has(method)) as unknown as Record<
    string,
    (req: unknown, opts?: { signal: AbortSignal }) => unknown
  >;
  if (STREAMS[method]) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 300);
    const first = STREAMS[method](f);
    // a bidi call's requests: the first message, then held open until the probe ends
    const req = BIDI.has(method)
      ? (async function* () {
          yield first;
          await new Promise((r) => ac.signal.addEventListener("abort", r, { once: true }));
        })()
      : first;
    try {
      for await (const _ of c[local](req, { signal: ac.signal }) as AsyncIterable<unknown>) break;
      return "allow";
    } catch (err) {
      return ac.signal.aborted ? "allow" : classifyError(err);
    } finally {
      clearTimeout(timer);
      ac.abort();
    }
  }
  try {
    await c[local](await CONNECT[method](f));
    return "allow";
  } catch (err) {
    // an error that is not the tower's answer (every tower error carries EP's detail) means the
    // probe never reached the door (e.g. it could not be serialized): not an "allow"
    if (!(err instanceof ConnectError) || !err.findDetails(ErrorDetailSchema).length) return "invalid";
    return classifyError(err);
  }
}

/** REST, SSE, WebSocket and MCP doors, by "METHOD /path" as fastify registered them. */
const REST: Record<
  string,
  (
    f: Fixture,
  ) => Promise<{ path: string; body?: unknown; ws?: boolean }> | { path: string; body?: unknown; ws?: boolean }
> = {
  "GET /domains": () => ({ path: "/domains" }),
  "POST /domains": () => ({ path: "/domains", body: { name: `r-${Math.random().toString(36).slice(2, 9)}` } }),
  "GET /domains/:domain_id": (f) => ({ path: `/domains/${f.domainA}` }),
  "GET /domains/:domain_id/m": (f) => ({ path: `/domains/${f.domainA}/m` }),
  "POST /domains/:domain_id/m": (f) => ({ path: `/domains/${f.domainA}/m`, body: { title: "m" } }),
  "GET /domains/:domain_id/m/:mission_id": (f) => ({ path: `/domains/${f.domainA}/m/${f.missionA}` }),
  "GET /domains/:domain_id/m/:mission_id/t": (f) => ({ path: `/domains/${f.domainA}/m/${f.missionA}/t` }),
  "POST /domains/:domain_id/m/:mission_id/t": (f) => ({
    path: `/domains/${f.domainA}/m/${f.missionA}/t`,
    body: { title: "kanban card" },
  }),
  "GET /domains/:domain_id/m/:mission_id/t/:task_id": async (f) => ({
    path: `/domains/${f.domainA}/m/${f.missionA}/t/${await f.kanbanTask()}`,
  }),
  "PATCH /domains/:domain_id/m/:mission_id/t/:task_id": async (f) => ({
    path: `/domains/${f.domainA}/m/${f.missionA}/t/${await f.kanbanTask()}`,
    body: { priority: 3 },
  }),
  "DELETE /domains/:domain_id/m/:mission_id/t/:task_id": async (f) => ({
    path: `/domains/${f.domainA}/m/${f.missionA}/t/${await f.kanbanTask()}`,
  }),
  "GET /work/missions/:mission_id/tasks": (f) => ({ path: `/work/missions/${f.missionA}/tasks` }),
  "POST /work/missions/:mission_id/tasks": (f) => ({
    path: `/work/missions/${f.missionA}/tasks`,
    body: { title: "t", runtime: "shell", input: { command: "true" } },
  }),
  "GET /work/tasks/:task_id": async (f) => ({ path: `/work/tasks/${await f.task()}` }),
  "POST /work/tasks/:task_id/retry": async (f) => ({ path: `/work/tasks/${await f.task()}/retry`, body: {} }),
  "POST /work/tasks/:task_id/cancel": async (f) => ({ path: `/work/tasks/${await f.task()}/cancel`, body: {} }),
  "POST /work/tasks/:task_id/merge": async (f) => ({ path: `/work/tasks/${await f.task()}/merge`, body: {} }),
  "POST /domains/:domain_id/pipelines": (f) => ({
    path: `/domains/${f.domainA}/pipelines`,
    body: { source: PROBE_PIPELINE },
  }),
  "GET /work/missions/:mission_id/pipeline": (f) => ({ path: `/work/missions/${f.missionA}/pipeline` }),
  "POST /work/tasks/:task_id/start": async (f) => ({
    path: `/work/tasks/${await f.task()}/start`,
    body: { agent_id: f.agentA },
  }),
  "POST /work/tasks/:task_id/heartbeat": async (f) => ({
    path: `/work/tasks/${await f.task()}/heartbeat`,
    body: { agent_id: f.agentA },
  }),
  "POST /work/tasks/:task_id/complete": async (f) => ({
    path: `/work/tasks/${await f.task()}/complete`,
    body: { agent_id: f.agentA, result: { output: "x" } },
  }),
  "POST /work/tasks/:task_id/fail": async (f) => ({
    path: `/work/tasks/${await f.task()}/fail`,
    body: { agent_id: f.agentA, result: { error: "x" } },
  }),
  "POST /work/agents/:agent_id/claim": (f) => ({ path: `/work/agents/${f.agentA}/claim`, body: { wait_ms: 0 } }),
  "GET /ai/sessions": () => ({ path: "/ai/sessions" }),
  "POST /ai/sessions": () => ({ path: "/ai/sessions", body: { title: "probe" } }),
  "GET /ai/sessions/:session_id": (f) => ({ path: `/ai/sessions/${f.sessionA}` }),
  "POST /ai/sessions/:session_id/turns": (f) => ({
    path: `/ai/sessions/${f.sessionA}/turns`,
    body: { content: "list domains" },
  }),
  "POST /ai/sessions/:session_id/actions/:action_id/approve": (f) => ({
    path: `/ai/sessions/${f.sessionA}/actions/act_missing/approve`,
    body: {},
  }),
  "POST /ai/sessions/:session_id/actions/:action_id/reject": (f) => ({
    path: `/ai/sessions/${f.sessionA}/actions/act_missing/reject`,
    body: {},
  }),
  "GET /ai/sessions/:session_id/stream": (f) => ({ path: `/ai/sessions/${f.sessionA}/stream` }),
  "GET /events/stream": (f) => ({ path: `/events/stream?domain_id=${f.domainA}` }),
  "GET /events/ws": (f) => ({ path: `/events/ws?domain_id=${f.domainA}`, ws: true }),
  "GET /api/attach-ws": (f) => ({ path: `/api/attach-ws?agent_id=${f.agentA}`, ws: true }),
  "GET /api/attach-dial": () => ({ path: "/api/attach-dial?attach_id=att_missing", ws: true }),
  "GET /mcp/tools": () => ({ path: "/mcp/tools" }),
  "POST /mcp": () => ({ path: "/mcp", body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} } }),
  "GET /mcp": () => ({ path: "/mcp" }),
  "DELETE /mcp": () => ({ path: "/mcp" }),
  "GET /auth/session": () => ({ path: "/auth/session" }),
  "POST /auth/session": (f) => ({ path: "/auth/session", body: { token: f.tokens[f.role!] } }),
  "DELETE /auth/session": () => ({ path: "/auth/session" }),
  // public doors of the sign-in through an identity provider (not configured here: they answer with a page)
  "GET /auth/oidc": () => ({ path: "/auth/oidc" }),
  "GET /auth/oidc/start": () => ({ path: "/auth/oidc/start" }),
  "GET /auth/oidc/callback": () => ({ path: "/auth/oidc/callback?code=x&state=y" }),
  "GET /healthz": () => ({ path: "/healthz" }),
  "GET /readyz": () => ({ path: "/readyz" }),
  "GET /metrics": () => ({ path: "/metrics" }),
  "GET /.well-known/jwks.json": () => ({ path: "/.well-known/jwks.json" }),
  "GET /openapi.json": () => ({ path: "/openapi.json" }),
  "GET /ui": () => ({ path: "/ui" }),
  "GET /ui/*": () => ({ path: "/ui/missions" }),
  "POST /mcp/call": (f) => ({
    path: "/mcp/call",
    body: { tool: "list_missions", arguments: { domain_id: f.domainA } },
  }),
  "GET /domains/:domain_id/webhooks": (f) => ({ path: `/domains/${f.domainA}/webhooks` }),
  "POST /domains/:domain_id/webhooks": (f) => ({
    path: `/domains/${f.domainA}/webhooks`,
    body: { url: "http://127.0.0.1:9/probe", events: ["task.failed"] },
  }),
  "DELETE /domains/:domain_id/webhooks/:webhook_id": async (f) => ({
    path: `/domains/${f.domainA}/webhooks/${await f.webhook()}`,
  }),
  "POST /domains/:domain_id/webhooks/:webhook_id/test": (f) => ({
    path: `/domains/${f.domainA}/webhooks/${f.webhookA}/test`,
    body: {},
  }),
  "GET /domains/:domain_id/webhooks/:webhook_id/deliveries": (f) => ({
    path: `/domains/${f.domainA}/webhooks/${f.webhookA}/deliveries`,
  }),
};

export const REST_ROUTES = Object.keys(REST);

export async function probeRest(f: Fixture, route: string, role: Role): Promise<Outcome | "invalid"> {
  const method = route.split(" ")[0];
  const p = await REST[route]({ ...f, role });
  const token = f.tokens[role];
  if (p.ws) {
    return new Promise((resolve) => {
      const ws = new WebSocket(`${f.t.url.replace("http", "ws")}${p.path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      ws.on("unexpected-response", (_req, res) => {
        resolve(classifyStatus(res.statusCode ?? 0));
        res.resume();
        ws.terminate();
      });
      ws.on("open", () => {
        resolve("allow");
        ws.terminate();
      });
      ws.on("error", () => undefined);
    });
  }
  const ac = new AbortController();
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    accept: "application/json, text/event-stream",
  };
  if (p.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${f.t.url}${p.path}`, {
    method,
    headers,
    body: p.body === undefined ? undefined : JSON.stringify(p.body),
    signal: ac.signal,
  });
  const outcome = await classifyResponse(res);
  ac.abort(); // streams (SSE) answer with headers first; the status is what counts
  return outcome;
}

/** MCP tools through POST /mcp/call, each with valid arguments against domain A. */
const TOOLS: Record<string, (f: Fixture) => Promise<Init> | Init> = {
  list_domains: () => ({}),
  list_missions: (f) => ({ domain_id: f.domainA }),
  get_mission: (f) => ({ mission_id: f.missionA }),
  list_tasks: (f) => ({ mission_id: f.missionA }),
  get_task: async (f) => ({ task_id: await f.task() }),
  get_parent_results: async (f) => ({ task_id: await f.task() }),
  run_pipeline: (f) => ({ domain_id: f.domainA, source: PROBE_PIPELINE }),
  list_agents: (f) => ({ domain_id: f.domainA }),
  get_agent: (f) => ({ agent_id: f.agentA }),
  list_nodes: () => ({}),
  list_pending_actions: () => ({}),
  list_events: (f) => ({ domain_id: f.domainA, limit: 5 }),
  list_cron_jobs: () => ({}),
  get_supervision: () => ({}),
  create_domain: () => ({ name: `tool-${Math.random().toString(36).slice(2, 9)}` }),
  create_mission: (f) => ({ domain_id: f.domainA, title: "m" }),
  put_doc: (f) => ({ mission_id: f.missionA, name: "probe.md", content: "x" }),
  submit_mesh_task: (f) => ({ mission_id: f.missionA, title: "t", runtime: "shell", input: { command: "true" } }),
  claim_mesh_task: (f) => ({ agent_id: f.agentA, wait_ms: 0 }),
  retry_mesh_task: async (f) => ({ task_id: await f.task() }),
  cancel_task: async (f) => ({ task_id: await f.task() }),
  put_artifact: async (f) => ({ task_id: await f.task(), name: "a.txt", content: "x" }),
  signal_agent: (f) => ({ agent_id: f.agentA, prompt: "hi" }),
  restart_agent: (f) => ({ agent_id: f.agentA }),
  pause_agent: (f) => ({ agent_id: f.agentA }),
  resume_agent: (f) => ({ agent_id: f.agentA }),
};

export const TOOL_NAMES = Object.keys(TOOLS);

export async function probeTool(f: Fixture, tool: string, role: Role): Promise<Outcome | "invalid"> {
  const res = await fetch(`${f.t.url}/mcp/call`, {
    method: "POST",
    headers: { authorization: `Bearer ${f.tokens[role]}`, "content-type": "application/json" },
    body: JSON.stringify({ tool, arguments: await TOOLS[tool](f) }),
  });
  return classifyResponse(res);
}

/**
 * Malformed bodies: the outcome of `door` (a unary Connect method, a REST route with a body, or a
 * tool) called by `role` with a body the tower cannot decode. deny = 403 (refused before the body
 * was read), allow = 400 (past authorization, refused as invalid); anything else is "invalid" (the
 * probe or the tower is wrong; the test fails).
 */
export async function probeMalformed(
  f: Fixture,
  kind: "rest" | "connect" | "mcp",
  door: string,
  role: Role,
): Promise<Outcome | "invalid"> {
  const headers = { authorization: `Bearer ${f.tokens[role]}`, "content-type": "application/json" };
  let res: Response;
  if (kind === "connect") res = await fetch(`${f.t.url}/ep.tower.v1.${door}`, { method: "POST", headers, body: "{" });
  else if (kind === "mcp")
    res = await fetch(`${f.t.url}/mcp/call`, {
      method: "POST",
      headers,
      body: JSON.stringify({ tool: door, arguments: { no_such_argument: 1 } }),
    });
  else {
    const [method, url] = door.split(" ");
    // the path parameters are domain A's; the body is not JSON
    const ids: Record<string, string> = {
      domain_id: f.domainA,
      mission_id: f.missionA,
      task_id: await f.task(),
      agent_id: f.agentA,
      session_id: f.sessionA,
      action_id: "act_none",
    };
    res = await fetch(`${f.t.url}${url.replace(/:(\w+)/g, (_, k: string) => ids[k])}`, { method, headers, body: "{" });
  }
  const body = (await res.json().catch(() => ({}))) as { code?: string; error?: { code?: string } };
  const code = body.error?.code ?? body.code;
  if (res.status === 403 && (code === "forbidden" || code === "permission_denied")) return "deny";
  if (res.status === 400) return "allow";
  return "invalid";
}

/**
 * The doors probed with a malformed body: unary Connect methods, REST routes that take a JSON body (not the public
 * login exchange or MCP's own protocol), every tool.
 */
export const MALFORMED_DOORS = {
  connect: [...new Set(Object.keys(CONNECT).map(doorOf))],
  rest: REST_ROUTES.filter(
    (r) => /^(POST|PATCH) /.test(r) && !["POST /auth/session", "POST /mcp", "POST /mcp/call"].includes(r),
  ),
  mcp: TOOL_NAMES,
};

export { ROLES };
