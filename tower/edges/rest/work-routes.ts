// The seed's REST paths for work, as thin shims over the WorkService domain functions.
import { TaskKind } from "../../../gen/ep/tower/v1/resources_pb.js";
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { EpError } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import type { Caller } from "../../domain/caller.js";
import type { WorkService, TaskMerge } from "../../domain/work/index.js";
import { checkIdempotencyKey } from "../../domain/idempotency.js";
import { decodeRequest, encodeResponse } from "./codec.js";

type Params = Record<string, string>;

/** The page parameters of a list route (docs/api.md, "Pages"). */
export const PAGE = ["page_size", "page_token"];

export interface RestRoute<I extends DescMessage = DescMessage, O extends DescMessage = DescMessage> {
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  url: string;
  input: I;
  output: O;
  status?: number;
  /** fixed request fields (e.g. kind) merged under the body */
  fixed?: Record<string, string>;
  /** query parameters copied into the request */
  query?: string[];
  /** a create: takes the Idempotency-Key header into the request's request_id (docs/api.md) */
  idempotent?: boolean;
  /** checks, before the call, path parameters that the request message does not carry */
  guard?: (caller: Caller, params: Params) => Promise<void>;
  call: (caller: Caller, req: MessageShape<I>) => Promise<MessageShape<O>>;
}

export function route<I extends DescMessage, O extends DescMessage>(r: RestRoute<I, O>): RestRoute<I, O> {
  return r;
}

export function registerRestRoutes(app: FastifyInstance, routes: RestRoute<DescMessage, DescMessage>[]): void {
  for (const r of routes) {
    app.route({
      method: r.method,
      url: r.url,
      handler: async (request: FastifyRequest, reply) => {
        const params = { ...(request.params as Params) };
        const pathFields: Params = {};
        for (const [k, v] of Object.entries(params)) if (r.input.fields.some((f) => f.name === k)) pathFields[k] = v;
        const fromQuery = queryFields(r, request.query as Record<string, string | string[]>);
        const body = r.method === "GET" || r.method === "DELETE" ? fromQuery : { ...fromQuery, ...bodyObject(request) };
        const req = decodeRequest(r.input, { ...r.fixed, ...body }, pathFields);
        if (r.idempotent)
          withIdempotencyKey(req as unknown as { requestId: string }, request.headers[IDEMPOTENCY_HEADER]);
        await r.guard?.(request.caller!, params);
        const res = await r.call(request.caller!, req);
        reply.code(r.status ?? 200);
        return encodeResponse(r.output, res);
      },
    });
  }
}

export const IDEMPOTENCY_HEADER = "idempotency-key";

/** The Idempotency-Key header into request_id: checked here so the error names the header. */
function withIdempotencyKey(req: { requestId: string }, header: string | string[] | undefined): void {
  if (header === undefined) return;
  if (Array.isArray(header))
    throw new EpError("invalid_argument", "Idempotency-Key header: is given more than once; give it once", {
      field: "Idempotency-Key",
    });
  checkIdempotencyKey(header, "Idempotency-Key", "Idempotency-Key header");
  if (req.requestId && req.requestId !== header) {
    throw new EpError(
      "invalid_argument",
      "Idempotency-Key header: disagrees with the body's request_id; send one of them",
      { field: "Idempotency-Key" },
    );
  }
  req.requestId = header;
}

/**
 * The route's query parameters as request fields: an unknown one is an error naming it (a typo
 * must not widen a list), a number must be an integer, a parameter given twice is refused.
 */
function queryFields(
  r: RestRoute<DescMessage, DescMessage>,
  query: Record<string, string | string[]>,
): Record<string, unknown> {
  const allowed = r.query ?? [];
  const out: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries(query)) {
    if (!allowed.includes(name)) {
      throw new EpError(
        "invalid_argument",
        `unknown query parameter "${name}"; ${r.method} ${r.url} takes ${allowed.length ? allowed.join(", ") : "none"}`,
        { field: name },
      );
    }
    if (Array.isArray(raw))
      throw new EpError("invalid_argument", `query parameter "${name}" is given ${raw.length} times; give it once`, {
        field: name,
      });
    const field = r.input.fields.find((f) => f.name === name);
    if (field?.fieldKind === "scalar" && field.scalar !== 9 /* string */) {
      if (!/^-?\d+$/.test(raw))
        throw new EpError(
          "invalid_argument",
          `query parameter "${name}" must be an integer (got ${JSON.stringify(raw)})`,
          { field: name },
        );
      out[name] = Number(raw);
    } else out[name] = raw;
  }
  return out;
}

/**
 * The JSON body of a POST/PATCH/PUT: absent, or an object; an array, null, a string or another media type is an error.
 */
function bodyObject(request: FastifyRequest): object | undefined {
  const body = request.body;
  if (body === undefined) return undefined;
  if (body !== null && typeof body === "object" && !Array.isArray(body)) return body;
  const type = String(request.headers["content-type"] ?? "")
    .split(";")[0]
    .trim();
  const got =
    typeof body === "string"
      ? `a ${type || "text"} body`
      : body === null
        ? "null"
        : Array.isArray(body)
          ? "an array"
          : `a JSON ${typeof body}`;
  throw new EpError(
    "invalid_argument",
    `the body must be a JSON object sent as Content-Type: application/json (got ${got})`,
    { field: "body" },
  );
}

export function workRoutes(work: WorkService & TaskMerge): RestRoute<DescMessage, DescMessage>[] {
  const missionIn = async (caller: Caller, p: Params) => {
    const { mission } = await work.getMission(caller, create(pb.GetMissionRequestSchema, { missionId: p.mission_id }));
    if (mission?.domainId !== p.domain_id)
      throw new EpError("mission_not_found", `mission ${p.mission_id} is not in domain ${p.domain_id}`);
  };
  /** Kanban routes live under /domains/{domain_id}/m/{mission_id}/t and touch only kind=assigned tasks. */
  const kanbanTask = async (caller: Caller, p: Params) => {
    await missionIn(caller, p);
    const { task } = await work.getTask(caller, create(pb.GetTaskRequestSchema, { taskId: p.task_id }));
    if (!task || task.missionId !== p.mission_id || task.kind !== TaskKind.ASSIGNED) {
      throw new EpError("task_not_found", `no Kanban task ${p.task_id} in mission ${p.mission_id}`);
    }
  };
  const routes = [
    route({
      method: "GET",
      url: "/domains",
      input: pb.ListDomainsRequestSchema,
      output: pb.ListDomainsResponseSchema,
      query: PAGE,
      call: work.listDomains,
    }),
    route({
      method: "POST",
      url: "/domains",
      status: 201,
      idempotent: true,
      input: pb.CreateDomainRequestSchema,
      output: pb.CreateDomainResponseSchema,
      call: work.createDomain,
    }),
    route({
      method: "GET",
      url: "/domains/:domain_id",
      input: pb.GetDomainRequestSchema,
      output: pb.GetDomainResponseSchema,
      call: work.getDomain,
    }),
    route({
      method: "GET",
      url: "/domains/:domain_id/m",
      input: pb.ListMissionsRequestSchema,
      output: pb.ListMissionsResponseSchema,
      query: PAGE,
      call: work.listMissions,
    }),
    route({
      method: "POST",
      url: "/domains/:domain_id/m",
      status: 201,
      idempotent: true,
      input: pb.CreateMissionRequestSchema,
      output: pb.CreateMissionResponseSchema,
      call: work.createMission,
    }),
    route({
      method: "GET",
      url: "/domains/:domain_id/m/:mission_id",
      input: pb.GetMissionRequestSchema,
      output: pb.GetMissionResponseSchema,
      guard: missionIn,
      call: work.getMission,
    }),
    route({
      method: "GET",
      url: "/domains/:domain_id/m/:mission_id/t",
      input: pb.ListTasksRequestSchema,
      output: pb.ListTasksResponseSchema,
      fixed: { kind: "assigned" },
      query: ["status", "limit", "page_token"],
      guard: missionIn,
      call: work.listTasks,
    }),
    route({
      method: "POST",
      url: "/domains/:domain_id/m/:mission_id/t",
      status: 201,
      idempotent: true,
      input: pb.CreateTaskRequestSchema,
      output: pb.CreateTaskResponseSchema,
      fixed: { kind: "assigned" },
      guard: missionIn,
      call: work.createTask,
    }),
    route({
      method: "GET",
      url: "/domains/:domain_id/m/:mission_id/t/:task_id",
      input: pb.GetTaskRequestSchema,
      output: pb.GetTaskResponseSchema,
      guard: kanbanTask,
      call: work.getTask,
    }),
    route({
      method: "PATCH",
      url: "/domains/:domain_id/m/:mission_id/t/:task_id",
      input: pb.UpdateTaskRequestSchema,
      output: pb.UpdateTaskResponseSchema,
      guard: kanbanTask,
      call: work.updateTask,
    }),
    route({
      method: "DELETE",
      url: "/domains/:domain_id/m/:mission_id/t/:task_id",
      input: pb.DeleteTaskRequestSchema,
      output: pb.DeleteTaskResponseSchema,
      guard: kanbanTask,
      call: work.deleteTask,
    }),
    route({
      method: "POST",
      url: "/work/missions/:mission_id/tasks",
      status: 201,
      idempotent: true,
      input: pb.CreateTaskRequestSchema,
      output: pb.CreateTaskResponseSchema,
      fixed: { kind: "claimable" },
      call: work.createTask,
    }),
    route({
      method: "GET",
      url: "/work/missions/:mission_id/tasks",
      input: pb.ListTasksRequestSchema,
      output: pb.ListTasksResponseSchema,
      query: ["kind", "status", "limit", "page_token"],
      call: work.listTasks,
    }),
    route({
      method: "GET",
      url: "/work/tasks/:task_id",
      input: pb.GetTaskRequestSchema,
      output: pb.GetTaskResponseSchema,
      call: work.getTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/retry",
      input: pb.RetryTaskRequestSchema,
      output: pb.RetryTaskResponseSchema,
      call: work.retryTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/cancel",
      input: pb.CancelTaskRequestSchema,
      output: pb.CancelTaskResponseSchema,
      call: work.cancelTask,
    }),
    route({
      method: "POST",
      url: "/domains/:domain_id/pipelines",
      status: 201,
      idempotent: true,
      input: pb.RunPipelineRequestSchema,
      output: pb.RunPipelineResponseSchema,
      call: work.runPipeline,
    }),
    route({
      method: "GET",
      url: "/work/missions/:mission_id/pipeline",
      input: pb.GetPipelineRequestSchema,
      output: pb.GetPipelineResponseSchema,
      call: work.getPipeline,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/merge",
      input: pb.MergeTaskRequestSchema,
      output: pb.MergeTaskResponseSchema,
      call: work.mergeTask,
    }),
    route({
      method: "POST",
      url: "/work/agents/:agent_id/claim",
      input: pb.ClaimTaskRequestSchema,
      output: pb.ClaimTaskResponseSchema,
      call: work.claimTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/start",
      input: pb.StartTaskRequestSchema,
      output: pb.StartTaskResponseSchema,
      call: work.startTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/heartbeat",
      input: pb.HeartbeatTaskRequestSchema,
      output: pb.HeartbeatTaskResponseSchema,
      call: work.heartbeatTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/complete",
      input: pb.CompleteTaskRequestSchema,
      output: pb.CompleteTaskResponseSchema,
      call: work.completeTask,
    }),
    route({
      method: "POST",
      url: "/work/tasks/:task_id/fail",
      input: pb.FailTaskRequestSchema,
      output: pb.FailTaskResponseSchema,
      call: work.failTask,
    }),
  ];
  return routes as unknown as RestRoute<DescMessage, DescMessage>[];
}
