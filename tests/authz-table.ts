// The authorization matrix: who may pass each door of the tower. One row per REST route (as
// fastify registers it), Connect method and MCP tool; one column per caller. "agent" is an agent
// token of domain A, whose resources every probe targets; "agent_foreign" one of domain B; "node"
// a node registered for domain A with an agent there. A door may have a second row with what it
// targets in parentheses ("(domain B)": the same call aimed at domain B). allow = past
// authorization (the call may still fail for other reasons); deny = 401/403. tests/authz-matrix.test.ts walks every
// door with every caller against this table, and fails on a door missing from it;
// scripts/authz-doc.ts prints it into docs/security.md.
export const ROLES = ["admin", "operator", "viewer", "node", "agent", "agent_foreign"] as const;
export type Role = (typeof ROLES)[number];
export type Outcome = "allow" | "deny";

/** One letter per role, in ROLES order: A = allow, - = deny. */
type Row = string;

export const MATRIX: { rest: Record<string, Row>; connect: Record<string, Row>; mcp: Record<string, Row> } = {
  rest: {
    "GET /domains": "AAAAAA",
    "POST /domains": "AA----",
    "GET /domains/:domain_id": "AAAAA-",
    "GET /domains/:domain_id/m": "AAAAA-",
    "POST /domains/:domain_id/m": "AA-AA-",
    "GET /domains/:domain_id/m/:mission_id": "AAAAA-",
    "GET /domains/:domain_id/m/:mission_id/t": "AAAAA-",
    "POST /domains/:domain_id/m/:mission_id/t": "AA-AA-",
    "GET /domains/:domain_id/m/:mission_id/t/:task_id": "AAAAA-",
    "PATCH /domains/:domain_id/m/:mission_id/t/:task_id": "AA-AA-",
    "DELETE /domains/:domain_id/m/:mission_id/t/:task_id": "AA-AA-",
    "GET /work/missions/:mission_id/tasks": "AAAAA-",
    "POST /work/missions/:mission_id/tasks": "AA-AA-",
    "GET /work/tasks/:task_id": "AAAAA-",
    "POST /work/tasks/:task_id/retry": "AA-AA-",
    "POST /work/tasks/:task_id/cancel": "AA-AA-",
    "POST /work/tasks/:task_id/merge": "AA----",
    "POST /domains/:domain_id/pipelines": "AA-AA-",
    "GET /work/missions/:mission_id/pipeline": "AAAAA-",
    "POST /work/tasks/:task_id/start": "AA-AA-",
    "POST /work/tasks/:task_id/heartbeat": "AA-AA-",
    "POST /work/tasks/:task_id/complete": "AA-AA-",
    "POST /work/tasks/:task_id/fail": "AA-AA-",
    "POST /work/agents/:agent_id/claim": "AA-AA-",
    "GET /ai/sessions": "AAAAAA",
    "POST /ai/sessions": "AA--AA",
    "GET /ai/sessions/:session_id": "A-----",
    "POST /ai/sessions/:session_id/turns": "A-----",
    "POST /ai/sessions/:session_id/actions/:action_id/approve": "A-----",
    "POST /ai/sessions/:session_id/actions/:action_id/reject": "A-----",
    "GET /ai/sessions/:session_id/stream": "A-----",
    "GET /events/stream": "AAAAA-",
    "GET /events/ws": "AAAAA-",
    "GET /api/attach-ws": "AAA---",
    "GET /api/attach-dial": "---A--",
    "GET /mcp/tools": "AAAAAA",
    "POST /mcp": "AAAAAA",
    "GET /mcp": "AAAAAA",
    "DELETE /mcp": "AAAAAA",
    "GET /auth/session": "AAAAAA",
    "POST /auth/session": "AAA-AA",
    "DELETE /auth/session": "AAAAAA",
    "GET /auth/oidc": "AAAAAA",
    "GET /auth/oidc/start": "AAAAAA",
    "GET /auth/oidc/callback": "AAAAAA",
    "GET /healthz": "AAAAAA",
    "GET /readyz": "AAAAAA",
    "GET /metrics": "AAA---",
    "GET /.well-known/jwks.json": "AAAAAA",
    "GET /openapi.json": "AAAAAA",
    "GET /ui": "AAAAAA",
    "GET /ui/*": "AAAAAA",
    "POST /mcp/call": "AAAAA-",
    "GET /domains/:domain_id/webhooks": "AAA---",
    "POST /domains/:domain_id/webhooks": "AA----",
    "DELETE /domains/:domain_id/webhooks/:webhook_id": "AA----",
    "POST /domains/:domain_id/webhooks/:webhook_id/test": "AA----",
    "GET /domains/:domain_id/webhooks/:webhook_id/deliveries": "AAA---",
  },
  connect: {
    "WorkService/CreateDomain": "AA----",
    "WorkService/ListDomains": "AAAAAA",
    "WorkService/GetDomain": "AAAAA-",
    "WorkService/CreateMission": "AA-AA-",
    "WorkService/ListMissions": "AAAAA-",
    "WorkService/GetMission": "AAAAA-",
    "WorkService/CreateTask": "AA-AA-",
    "WorkService/ListTasks": "AAAAA-",
    "WorkService/GetTask": "AAAAA-",
    "WorkService/UpdateTask": "AA-AA-",
    "WorkService/DeleteTask": "AA-AA-",
    "WorkService/ClaimTask": "AA-AA-",
    "WorkService/StartTask": "AA-AA-",
    "WorkService/HeartbeatTask": "AA-AA-",
    "WorkService/ReportProgress": "AA-AA-",
    "WorkService/CompleteTask": "AA-AA-",
    "WorkService/FailTask": "AA-AA-",
    "WorkService/RetryTask": "AA-AA-",
    "WorkService/CancelTask": "AA-AA-",
    "WorkService/MergeTask": "AA----",
    "WorkService/RunPipeline": "AA-AA-",
    "WorkService/GetPipeline": "AAAAA-",
    "NodeService/RegisterNode": "A-----",
    "NodeService/ListNodes": "AAAAAA",
    "NodeService/GetNode": "AAAAA-",
    "NodeService/PublishEvents": "---A--",
    "NodeService/PublishEvents (domain B)": "------",
    "NodeService/ReportNodeState": "---A--",
    "NodeService/ReloadNodeConfig": "A-----",
    "NodeService/SetNodeDomains": "A-----",
    "AgentService/EnrollAgent": "A--A--",
    "AgentService/ListAgents": "AAAAA-",
    "AgentService/GetAgent": "AAAAA-",
    "AgentService/UpdateAgentState": "---A--",
    "AgentService/SignalAgent": "AA-AA-",
    "AgentService/SuperviseAgent": "AA-AA-",
    "AuthService/CreateToken": "A-----",
    "AuthService/ListTokens": "A-----",
    "AuthService/RevokeToken": "A-----",
    "AuthService/WhoAmI": "AAAAAA",
    "AuthService/CreateTicket": "AAAAAA",
    "EventService/ListEvents": "AAAAA-",
    "AiService/CreateSession": "AA--AA",
    "AiService/ListSessions": "AAAAAA",
    "AiService/GetSession": "A-----",
    "AiService/SubmitTurn": "A-----",
    "AiService/ApproveAction": "A-----",
    "AiService/RejectAction": "A-----",
    "ToolService/ListTools": "AAAAAA",
    "ToolService/CallTool": "AAAAA-",
    "SecretService/SetSecret": "A-----",
    "SecretService/ListSecrets": "A-----",
    "SecretService/DeleteSecret": "A-----",
    "SecretService/GrantSecret": "A-----",
    "SecretService/RevokeSecret": "A-----",
    "SecretService/ResolveSecret": "---A--",
    "ApprovalService/RequestPermission": "AA-AA-",
    "ApprovalService/WaitApproval": "AA-AA-",
    "ApprovalService/ListApprovals": "AAAAAA",
    "ApprovalService/GetApproval": "AAAAA-",
    "ApprovalService/Approve": "AA----",
    "ApprovalService/Reject": "AA----",
    "WebhookService/CreateWebhook": "AA----",
    "WebhookService/ListWebhooks": "AAA---",
    "WebhookService/DeleteWebhook": "AA----",
    "WebhookService/TestWebhook": "AA----",
    "WebhookService/ListWebhookDeliveries": "AAA---",
    "EventService/StreamEvents": "AAAAA-",
    "AiService/StreamSession": "A-----",
    "NodeService/Link": "---A--",
    "NodeService/Session": "---A--",
  },
  mcp: {
    list_domains: "AAAAAA",
    list_missions: "AAAAA-",
    get_mission: "AAAAA-",
    list_tasks: "AAAAA-",
    get_task: "AAAAA-",
    get_parent_results: "AAAAA-",
    run_pipeline: "AA-AA-",
    list_agents: "AAAAA-",
    get_agent: "AAAAA-",
    list_nodes: "AAAAAA",
    list_pending_actions: "AAAAAA",
    list_events: "AAAAA-",
    list_cron_jobs: "AAAAAA",
    get_supervision: "AAAAAA",
    create_domain: "AA----",
    create_mission: "AA-AA-",
    put_doc: "AA-AA-",
    submit_mesh_task: "AA-AA-",
    claim_mesh_task: "AA-AA-",
    retry_mesh_task: "AA-AA-",
    cancel_task: "AA-AA-",
    put_artifact: "AA-AA-",
    signal_agent: "AA-AA-",
    restart_agent: "AA-AA-",
    pause_agent: "AA-AA-",
    resume_agent: "AA-AA-",
  },
};

/**
 * Malformed bodies (issue 39): a role that may not call a door is refused (403) before the tower
 * reads the body, so a malformed one gets the same 403 as a valid one. The roles that get past
 * authorization and then the 400 are the door's row, with two differences: agent_foreign is an
 * agent (its refusal is about domain B, which a malformed body cannot name), and the doors listed
 * here, whose refusals in their row are about the probe's target (the admin's AI session), not
 * the role (an operator or agent may use its own session).
 */
export const MALFORMED_OWN: Record<string, Row> = {
  "AiService/GetSession": "AA--AA",
  "AiService/SubmitTurn": "AA--AA",
  "AiService/ApproveAction": "AA--AA",
  "AiService/RejectAction": "AA--AA",
  "POST /ai/sessions/:session_id/turns": "AA--AA",
  "POST /ai/sessions/:session_id/actions/:action_id/approve": "AA--AA",
  "POST /ai/sessions/:session_id/actions/:action_id/reject": "AA--AA",
};

/** Who gets past authorization with a malformed body on `door` (of `rows`), in ROLES order. */
export function malformedRow(rows: Record<string, Row>, door: string): Row {
  if (MALFORMED_OWN[door]) return MALFORMED_OWN[door];
  const row = rows[door];
  const agent = ROLES.indexOf("agent");
  return [...row].map((c, i) => (ROLES[i] === "agent_foreign" ? row[agent] : c)).join("");
}

/** The door a row is about: its key without a "(target)" suffix. */
export const doorOf = (key: string): string => key.replace(/ \(.*\)$/, "");

export function expected(row: Row): Record<Role, Outcome> {
  return Object.fromEntries(ROLES.map((r, i) => [r, row[i] === "A" ? "allow" : "deny"])) as Record<Role, Outcome>;
}

export function rowOf(outcomes: Record<Role, Outcome>): Row {
  return ROLES.map((r) => (outcomes[r] === "allow" ? "A" : "-")).join("");
}

const LEGEND = [
  "| caller | credential |",
  "|---|---|",
  "| admin | the bootstrap admin token |",
  "| operator | an operator token |",
  "| viewer | a viewer token |",
  "| node | a node JWT, the node registered for domain A with an agent there |",
  "| agent | an agent token of domain A (the probes' domain) |",
  "| agent_foreign | an agent token of domain B |",
];

/** The matrix as Markdown, for docs/security.md (scripts/authz-doc.ts; checked by the matrix test). */
export function renderMatrix(): string {
  const out = [
    "<!-- authz matrix: generated from tests/authz-table.ts by scripts/authz-doc.ts; do not edit by hand -->",
    "",
    "Every probe targets domain A's resources with a valid request, except a row that names another target " +
      "in parentheses. ✓ = past authorization (the call may still fail for other reasons, e.g. a conflict); " +
      "✗ = refused (401/403, or the resource hidden as not found). AI sessions are private to the " +
      "account that made them (the admin's here), so every other caller is refused on a session's own doors.",
    "",
    ...LEGEND,
  ];
  for (const [title, rows] of [
    ["REST, streams, WebSockets and MCP endpoints", MATRIX.rest],
    ["Connect / gRPC-Web methods (`/ep.tower.v1.<Service>/<Method>`)", MATRIX.connect],
    ["MCP tools (`POST /mcp/call`, `/mcp`, ToolService)", MATRIX.mcp],
  ] as const) {
    out.push("", `#### ${title}`, "", `| door | ${ROLES.join(" | ")} |`, `|---|${ROLES.map(() => ":-:").join("|")}|`);
    for (const [door, row] of Object.entries(rows))
      out.push(`| \`${door}\` | ${[...row].map((c) => (c === "A" ? "✓" : "✗")).join(" | ")} |`);
  }
  out.push(
    "",
    "#### Malformed bodies",
    "",
    "A caller whose role may never use a door is refused (403) before the body is read, " +
      "so a malformed body gets the same ✗ as a valid one; the ✓ callers get the 400. " +
      "agent_foreign is ✓ wherever agent is (its refusal is about domain B, which a malformed " +
      "body cannot name), and an operator's or agent's own AI session is theirs to use:",
    "",
    `| door | ${ROLES.join(" | ")} |`,
    `|---|${ROLES.map(() => ":-:").join("|")}|`,
  );
  for (const [door, row] of Object.entries(MALFORMED_OWN))
    out.push(`| \`${door}\` (malformed) | ${[...row].map((c) => (c === "A" ? "✓" : "✗")).join(" | ")} |`);
  out.push("", "<!-- end of authz matrix -->");
  return out.join("\n");
}
