// Runs catalog tools for a caller by calling the same domain functions the REST and
// Connect edges call (work, fleet, events, docs) — no tool has logic of its own beyond
// mapping its snake_case arguments to the request. Every domain function authorizes the
// caller, so a tool can do exactly what its caller could do through the API.
import {
  ClaimPolicySchema,
  RuntimeSchema,
  TaskKind,
  TaskKindSchema,
  TaskStatusSchema,
  type ClaimPolicy,
  type Runtime,
  type TaskStatus,
} from "../../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../../common/vocab.js";
import { create, type DescMessage, type JsonObject, type MessageShape } from "@bufbuild/protobuf";
import { restJson } from "../../../common/rest-json.js";
import { EpError } from "../../../common/errors.js";
import * as evpb from "../../../gen/ep/tower/v1/events_pb.js";
import * as fleetpb from "../../../gen/ep/tower/v1/fleet_pb.js";
import * as resourcespb from "../../../gen/ep/tower/v1/resources_pb.js";
import * as workpb from "../../../gen/ep/tower/v1/work_pb.js";
import type { AiSettings } from "../ai/types.js";
import type { Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { eventMsg } from "../convert.js";
import { eventQuery } from "../events/index.js";
import { type FleetService, createNodeStateReads } from "../fleet/index.js";
import type { WorkService } from "../work/index.js";
import { validateToolArgs } from "./catalog.js";
import { authorizeTool } from "../door-roles.js";
import { createDocsService, docJson, type DocsService } from "./executor-docs.js";
import { listOwnActions } from "./actions-list.js";
import type { AiActionStatus } from "../../store/ai-store.js";
import { durationFromMs } from "@bufbuild/protobuf/wkt";

type Args = Record<string, unknown>;

export interface ToolExecutorDeps {
  deps: Deps;
  work: WorkService;
  fleet: FleetService;
  docs?: DocsService;
}

export interface ToolExecutor {
  /**
   * Checks the caller's role, validates the arguments against the catalog, then runs the tool; returns its JSON result.
   */
  run(caller: Caller, tool: string, args: unknown): Promise<unknown>;
}

/** Proto message to the REST API's snake_case JSON (what tools return). */
function json<D extends DescMessage>(schema: D, msg: MessageShape<D>): JsonObject {
  return restJson(schema, msg) as JsonObject;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const int = (v: unknown): number => (typeof v === "number" ? v : 0);

/** A pending action as tools and view_specs show it. */
export function actionJson(a: {
  id: string;
  sessionId: string;
  tool: string;
  arguments: Args;
  summary: string;
  status: string;
  result: unknown;
  error: string;
  decidedBy: string;
  decidedAt: string;
  createdAt: string;
}): JsonObject {
  return {
    id: a.id,
    session_id: a.sessionId,
    tool: a.tool,
    arguments: a.arguments as JsonObject,
    summary: a.summary,
    status: a.status,
    result: (a.result ?? null) as JsonObject | null,
    error: a.error,
    decided_by: a.decidedBy,
    decided_at: a.decidedAt,
    created_at: a.createdAt,
  };
}

/**
 * Work created from an AI session runs on EP_CENTRAL_RUNTIME_DEFAULT unless the turn named a
 * runtime, and vendorA_code work carries the EP_CLAUDE_* settings in `input.claude`.
 */
export function withSessionDefaults(tool: string, args: Args, settings: AiSettings): Args {
  if (tool !== "submit_mesh_task") return args;
  const out: Args = { ...args };
  if (!out.runtime && settings.centralRuntimeDefault) out.runtime = settings.centralRuntimeDefault;
  if (out.runtime === "vendorA_code" && Object.keys(settings.claude).length > 0) {
    const input = (out.input && typeof out.input === "object" ? out.input : {}) as Args;
    if (input.claude === undefined) out.input = { ...input, claude: { ...settings.claude } };
  }
  return out;
}

/**
 * Who a node is acting for on /mcp/call. A node (epd) calls with its own JWT on behalf of
 * the agents it runs: naming one of its agents turns the call into that agent's, scoped to the
 * agent's domain; naming a domain scopes the node to it. Other callers are unchanged.
 */
export async function actingCaller(
  deps: Deps,
  caller: Caller,
  scope: { agentId?: string; domainId?: string },
): Promise<Caller> {
  if (caller.role !== "node" || (!scope.agentId && !scope.domainId)) return caller;
  if (scope.agentId) {
    const agent = await deps.store.getAgent(scope.agentId);
    if (!agent) throw new EpError("agent_not_found", `agent ${scope.agentId} does not exist`, { field: "agent_id" });
    if (agent.nodeId !== caller.nodeId)
      throw new EpError("forbidden", `agent ${agent.id} runs on another node`, { field: "agent_id" });
    if (scope.domainId && scope.domainId !== agent.domainId) {
      throw new EpError(
        "forbidden",
        `agent ${agent.id} is enrolled in domain ${agent.domainId}, not ${scope.domainId}`,
        { field: "domain_id" },
      );
    }
    return { subject: agent.id, role: "agent", via: "node", domainId: agent.domainId, nodeId: caller.nodeId };
  }
  // a domain only narrows what the node may do (`ep run <tool> --domain <id>`)
  if (!(await deps.store.getDomain(scope.domainId!)))
    throw new EpError("domain_not_found", `domain ${scope.domainId} does not exist`, { field: "domain_id" });
  // narrows, never widens: only into a domain the node serves (its registered set, or "*")
  if (caller.nodeServes && !caller.nodeServes.includes("*") && !caller.nodeServes.includes(scope.domainId!)) {
    throw new EpError(
      "forbidden",
      `node ${caller.nodeId} serves only ${caller.nodeServes.join(", ")}, not domain ${scope.domainId}`,
      { field: "domain_id" },
    );
  }
  return {
    subject: `${caller.subject}@${scope.domainId}`,
    role: "agent",
    via: "node",
    domainId: scope.domainId,
    nodeId: caller.nodeId,
  };
}

export function createToolExecutor(x: ToolExecutorDeps): ToolExecutor {
  const handlers = toolHandlers(x);
  return {
    async run(caller, tool, rawArgs) {
      // a role that may never run the tool is refused before its arguments are looked at
      authorizeTool(caller, tool);
      const args = validateToolArgs(tool, rawArgs);
      const handler = handlers[tool];
      if (!handler) throw new EpError("tool_not_found", `the tower cannot run ${tool}`, { tool });
      return handler(caller, args);
    },
  };
}

/** What each tool does, by name (a declarative table over the domain services). */
function toolHandlers(x: ToolExecutorDeps): Record<string, (caller: Caller, a: Args) => Promise<unknown>> {
  const { deps, work, fleet } = x;
  const docs = x.docs ?? createDocsService(deps);

  const supervise = async (caller: Caller, a: Args, op: string) =>
    json(
      fleetpb.SuperviseAgentResponseSchema,
      await fleet.superviseAgent(caller, create(fleetpb.SuperviseAgentRequestSchema, { agentId: str(a.agent_id), op })),
    );

  const nodeState = createNodeStateReads(deps, fleet);

  return {
    // ---- reads
    list_domains: async (c) =>
      json(workpb.ListDomainsResponseSchema, await work.listDomains(c, create(workpb.ListDomainsRequestSchema))),
    list_missions: async (c, a) =>
      json(
        workpb.ListMissionsResponseSchema,
        await work.listMissions(c, create(workpb.ListMissionsRequestSchema, { domainId: str(a.domain_id) })),
      ),
    get_mission: async (c, a) => {
      const res = json(
        workpb.GetMissionResponseSchema,
        await work.getMission(c, create(workpb.GetMissionRequestSchema, { missionId: str(a.mission_id) })),
      );
      const docList = await docs.listDocs(c, str(a.mission_id));
      return { ...res, docs: docList.map(docJson) };
    },
    list_tasks: async (c, a) =>
      json(
        workpb.ListTasksResponseSchema,
        await work.listTasks(
          c,
          create(workpb.ListTasksRequestSchema, {
            missionId: str(a.mission_id),
            domainId: str(a.domain_id),
            kind: enumOf<TaskKind>(TaskKindSchema, str(a.kind), "kind"),
            status: enumOf<TaskStatus>(TaskStatusSchema, str(a.status), "status"),
            limit: int(a.limit),
          }),
        ),
      ),
    get_task: async (c, a) => {
      const res = json(
        workpb.GetTaskResponseSchema,
        await work.getTask(c, create(workpb.GetTaskRequestSchema, { taskId: str(a.task_id) })),
      );
      const artifacts = await deps.store.listArtifacts(str(a.task_id));
      return artifacts.length ? { ...res, artifacts: artifacts.map(docJson) } : res;
    },
    get_parent_results: async (c, a) => {
      const { task } = await work.getTask(c, create(workpb.GetTaskRequestSchema, { taskId: str(a.task_id) }));
      const parents = [];
      for (const id of task!.dependsOn)
        parents.push((await work.getTask(c, create(workpb.GetTaskRequestSchema, { taskId: id }))).task!);
      const listed = json(workpb.ListTasksResponseSchema, create(workpb.ListTasksResponseSchema, { tasks: parents }));
      return { task_id: task!.id, parents: listed.tasks ?? [] };
    },
    list_agents: async (c, a) =>
      json(
        fleetpb.ListAgentsResponseSchema,
        await fleet.listAgents(
          c,
          create(fleetpb.ListAgentsRequestSchema, { domainId: str(a.domain_id), nodeId: str(a.node_id) }),
        ),
      ),
    get_agent: async (c, a) =>
      json(
        fleetpb.GetAgentResponseSchema,
        await fleet.getAgent(c, create(fleetpb.GetAgentRequestSchema, { agentId: str(a.agent_id) })),
      ),
    list_nodes: async (c) =>
      json(fleetpb.ListNodesResponseSchema, await fleet.listNodes(c, create(fleetpb.ListNodesRequestSchema))),
    list_pending_actions: async (c, a) => ({
      actions: (
        await listOwnActions(deps, c, {
          sessionId: str(a.session_id),
          status: (str(a.status) || "pending") as AiActionStatus,
        })
      ).map(actionJson),
    }),
    list_events: async (c, a) => {
      const limit = int(a.limit) || 50;
      const filter = create(evpb.EventFilterSchema, {
        types: (a.types as string[] | undefined) ?? [],
        domainId: str(a.domain_id),
        missionId: str(a.mission_id),
        agentId: str(a.agent_id),
        sessionId: str(a.session_id),
      });
      const asJson = (rows: Awaited<ReturnType<typeof deps.store.listEvents>>) =>
        rows.map((e) => json(resourcespb.EventSchema, eventMsg(e)));
      if (a.after_id !== undefined)
        return {
          events: asJson(await deps.store.listEvents(eventQuery(c, int(a.after_id), filter, Math.min(limit, 10_000)))),
        };
      // "recent events": the last `limit` of a recent window
      const last = await deps.store.lastEventId();
      const rows = await deps.store.listEvents(eventQuery(c, Math.max(0, last - 10_000), filter, 10_000));
      return { events: asJson(rows.slice(-limit)) };
    },
    // cron and supervision live on the nodes; each node reports them (NodeService.ReportNodeState)
    // on change and periodically, and the tower answers with the latest report per node
    list_cron_jobs: (c, a) => nodeState.listCronJobs(c, str(a.node_id)),
    get_supervision: (c, a) => nodeState.getSupervision(c, { agentId: str(a.agent_id), nodeId: str(a.node_id) }),

    // ---- writes
    create_domain: async (c, a) =>
      json(
        workpb.CreateDomainResponseSchema,
        await work.createDomain(c, create(workpb.CreateDomainRequestSchema, { name: str(a.name) })),
      ),
    create_mission: async (c, a) =>
      json(
        workpb.CreateMissionResponseSchema,
        await work.createMission(
          c,
          create(workpb.CreateMissionRequestSchema, {
            domainId: str(a.domain_id),
            title: str(a.title),
            description: str(a.description),
          }),
        ),
      ),
    run_pipeline: async (c, a) =>
      json(
        workpb.RunPipelineResponseSchema,
        await work.runPipeline(
          c,
          create(workpb.RunPipelineRequestSchema, {
            domainId: str(a.domain_id),
            source: str(a.source),
            title: str(a.title),
            missionId: str(a.mission_id),
          }),
        ),
      ),
    put_doc: async (c, a) => ({
      doc: docJson(
        await docs.putDoc(c, {
          mission_id: str(a.mission_id),
          name: str(a.name),
          content: str(a.content),
          content_type: str(a.content_type),
        }),
      ),
    }),
    submit_mesh_task: async (c, a) =>
      json(
        workpb.CreateTaskResponseSchema,
        await work.createTask(
          c,
          create(workpb.CreateTaskRequestSchema, {
            missionId: str(a.mission_id),
            kind: TaskKind.CLAIMABLE,
            title: str(a.title),
            description: str(a.description),
            claimPolicy: enumOf<ClaimPolicy>(ClaimPolicySchema, str(a.claim_policy), "claim_policy"),
            priority: int(a.priority),
            capabilities: (a.capabilities as string[] | undefined) ?? [],
            assigneeAgentId: str(a.assignee_agent_id),
            maxAttempts: int(a.max_attempts),
            runtime: enumOf<Runtime>(RuntimeSchema, str(a.runtime), "runtime"),
            input: a.input as JsonObject | undefined,
            dependsOn: (a.depends_on as string[] | undefined) ?? [],
          }),
        ),
      ),
    claim_mesh_task: async (c, a) =>
      json(
        workpb.ClaimTaskResponseSchema,
        await work.claimTask(
          c,
          create(workpb.ClaimTaskRequestSchema, { agentId: str(a.agent_id), wait: durationFromMs(int(a.wait_ms)) }),
        ),
      ),
    retry_mesh_task: async (c, a) =>
      json(
        workpb.RetryTaskResponseSchema,
        await work.retryTask(c, create(workpb.RetryTaskRequestSchema, { taskId: str(a.task_id) })),
      ),
    cancel_task: async (c, a) =>
      json(
        workpb.CancelTaskResponseSchema,
        await work.cancelTask(
          c,
          create(workpb.CancelTaskRequestSchema, { taskId: str(a.task_id), reason: str(a.reason) }),
        ),
      ),
    put_artifact: async (c, a) => ({
      artifact: docJson(
        await docs.putArtifact(c, {
          task_id: str(a.task_id),
          name: str(a.name),
          content: str(a.content),
          content_type: str(a.content_type),
        }),
      ),
    }),
    signal_agent: async (c, a) => {
      const res = await fleet.signalAgent(
        c,
        create(fleetpb.SignalAgentRequestSchema, { agentId: str(a.agent_id), prompt: str(a.prompt) }),
      );
      return { delivered: true, agent_id: str(a.agent_id), event_id: Number(res.eventId) };
    },
    restart_agent: (c, a) => supervise(c, a, "restart"),
    pause_agent: (c, a) => supervise(c, a, "pause"),
    resume_agent: (c, a) => supervise(c, a, "resume"),
  };
}
