// Who may call each door at all, by role alone: the half of authorization that needs nothing
// from the request. The edges check it before they read a body, so a caller whose role may never
// use a door gets 403 whatever it sent (a viewer's malformed create is refused, not corrected).
// The domain functions then check the other half as before: the domain scope, the node's
// agents, who owns an AI session. A role listed here may still be refused there.
import { EpError } from "../../common/errors.js";
import type { Caller, Role } from "./caller.js";

/** read: every role; work: the roles that operate on work (a node only where its agents are). */
const READ: readonly Role[] = ["admin", "operator", "viewer", "node", "agent"];
const WORK: readonly Role[] = ["admin", "operator", "node", "agent"];
/** the people's roles: decisions a program (node, agent) never makes */
const PEOPLE: readonly Role[] = ["admin", "operator"];
const ADMIN: readonly Role[] = ["admin"];
/** people reading: a viewer sees what admins and operators manage (webhooks: URLs cut to their origin) */
const PEOPLE_READ: readonly Role[] = ["admin", "operator", "viewer"];
const NODE: readonly Role[] = ["node"];
/** AI sessions: the roles that may open one, and so own one */
const SESSION: readonly Role[] = ["admin", "operator", "agent"];

/**
 * Every RPC of the tower's services, as `<Service>/<Method>` (tower/domain/door-roles.test.ts checks the list is
 * whole).
 */
export const RPC_ROLES: Readonly<Record<string, readonly Role[]>> = {
  "WorkService/CreateDomain": PEOPLE,
  "WorkService/ListDomains": READ,
  "WorkService/GetDomain": READ,
  "WorkService/CreateMission": WORK,
  "WorkService/ListMissions": READ,
  "WorkService/GetMission": READ,
  "WorkService/CreateTask": WORK,
  "WorkService/ListTasks": READ,
  "WorkService/GetTask": READ,
  "WorkService/UpdateTask": WORK,
  "WorkService/DeleteTask": WORK,
  "WorkService/ClaimTask": WORK,
  "WorkService/StartTask": WORK,
  "WorkService/HeartbeatTask": WORK,
  "WorkService/ReportProgress": WORK,
  "WorkService/CompleteTask": WORK,
  "WorkService/FailTask": WORK,
  "WorkService/RetryTask": WORK,
  "WorkService/CancelTask": WORK,
  "WorkService/MergeTask": PEOPLE,
  "WorkService/RunPipeline": WORK,
  "WorkService/GetPipeline": READ,
  "NodeService/RegisterNode": ADMIN,
  "NodeService/ListNodes": READ,
  "NodeService/GetNode": READ,
  "NodeService/PublishEvents": NODE,
  "NodeService/ReportNodeState": NODE,
  "NodeService/ReloadNodeConfig": ADMIN,
  "NodeService/SetNodeDomains": ADMIN,
  "NodeService/Link": NODE,
  "NodeService/Session": NODE,
  "AgentService/EnrollAgent": ["admin", "node"],
  "AgentService/ListAgents": READ,
  "AgentService/GetAgent": READ,
  "AgentService/UpdateAgentState": NODE,
  "AgentService/SignalAgent": WORK,
  "AgentService/SuperviseAgent": WORK,
  "AuthService/CreateToken": ADMIN,
  "AuthService/ListTokens": ADMIN,
  "AuthService/RevokeToken": ADMIN,
  "AuthService/WhoAmI": READ,
  "AuthService/CreateTicket": READ,
  "EventService/ListEvents": READ,
  "EventService/StreamEvents": READ,
  "AiService/CreateSession": SESSION,
  "AiService/ListSessions": READ,
  "AiService/GetSession": SESSION,
  "AiService/SubmitTurn": SESSION,
  "AiService/ApproveAction": SESSION,
  "AiService/RejectAction": SESSION,
  "AiService/StreamSession": SESSION,
  "ToolService/ListTools": READ,
  // each tool has its own roles (TOOL_ROLES), checked when it runs
  "ToolService/CallTool": READ,
  "SecretService/SetSecret": ADMIN,
  "SecretService/ListSecrets": ADMIN,
  "SecretService/DeleteSecret": ADMIN,
  "SecretService/GrantSecret": ADMIN,
  "SecretService/RevokeSecret": ADMIN,
  "SecretService/ResolveSecret": NODE,
  "ApprovalService/RequestPermission": WORK,
  "ApprovalService/WaitApproval": WORK,
  "ApprovalService/ListApprovals": READ,
  "ApprovalService/GetApproval": READ,
  "ApprovalService/Approve": PEOPLE,
  "ApprovalService/Reject": PEOPLE,
  "WebhookService/CreateWebhook": PEOPLE,
  "WebhookService/ListWebhooks": PEOPLE_READ,
  "WebhookService/DeleteWebhook": PEOPLE,
  "WebhookService/TestWebhook": PEOPLE,
  "WebhookService/ListWebhookDeliveries": PEOPLE_READ,
};

/** HTTP routes that are no RPC and no tool, checked by their handler (`<METHOD> <path>`). */
export const ROUTE_ROLES: Readonly<Record<string, readonly Role[]>> = {
  // aggregate counts of every domain: the people's roles, not a node's or an agent's (scoped) token
  "GET /metrics": ["admin", "operator", "viewer"],
};

/** Every catalog tool (the same roles as the RPC it calls; checked against the catalog in the test). */
export const TOOL_ROLES: Readonly<Record<string, readonly Role[]>> = {
  list_domains: READ,
  list_missions: READ,
  get_mission: READ,
  list_tasks: READ,
  get_task: READ,
  get_parent_results: READ,
  list_agents: READ,
  get_agent: READ,
  list_nodes: READ,
  list_pending_actions: READ,
  list_events: READ,
  list_cron_jobs: READ,
  get_supervision: READ,
  create_domain: PEOPLE,
  create_mission: WORK,
  run_pipeline: WORK,
  put_doc: WORK,
  submit_mesh_task: WORK,
  claim_mesh_task: WORK,
  retry_mesh_task: WORK,
  cancel_task: WORK,
  put_artifact: WORK,
  signal_agent: WORK,
  restart_agent: WORK,
  pause_agent: WORK,
  resume_agent: WORK,
};

function refuse(caller: Caller, roles: readonly Role[], what: string): never {
  throw new EpError("forbidden", `role ${caller.role} may not call ${what} (${roles.join(", ")} may)`, {
    role: caller.role,
    door: what,
  });
}

/**
 * Refuses a caller whose role may never call the RPC `door` (`<Service>/<Method>`); a door not listed is left to its
 * handler.
 */
export function authorizeRpc(caller: Caller, door: string): void {
  const roles = RPC_ROLES[door];
  if (roles && !roles.includes(caller.role)) refuse(caller, roles, door);
}

/** Refuses a caller whose role may not use the HTTP route `door` (ROUTE_ROLES). */
export function authorizeRoute(caller: Caller, door: keyof typeof ROUTE_ROLES): void {
  const roles = ROUTE_ROLES[door];
  if (!roles.includes(caller.role)) refuse(caller, roles, door);
}

/** Refuses a caller whose role may never run `tool`; an unknown tool is left to the catalog (tool_not_found). */
export function authorizeTool(caller: Caller, tool: string): void {
  const roles = TOOL_ROLES[tool];
  if (roles && !roles.includes(caller.role)) refuse(caller, roles, `the tool ${tool}`);
}
