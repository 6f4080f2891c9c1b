// Pipelines (docs/pipelines.md): a file of steps run as one mission's tasks, created in one
// transaction — parents before children, each step's depends_on names turned into task ids —
// so a file that is wrong anywhere creates nothing. A pipeline is not a record of its own: its
// steps are the mission's tasks that carry a step name, and its state is what theirs add up to.
import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { EpError } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import type { MissionRow, Store, TaskRow } from "../../store/store.js";
import { authorize, type Caller } from "../caller.js";
import { claimPolicyOf, missionMsg, runtimeOf, taskMsg, taskStatusOf } from "../convert.js";
import type { Emit } from "../event-hub.js";
import { createIdempotency } from "../idempotency.js";
import { parsePipelineFile, pipelineRefused, stepRef, type PipelineStep } from "./pipeline-file.js";
import { waitingOn } from "./dependencies.js";
import type { WorkContext } from "./context.js";
import { checkNewTask, insertNewTask, withWaitingOn } from "./tasks.js";
import { text } from "./support.js";

/** The largest pipeline file read (its steps' prompts included). */
const MAX_SOURCE = 512 * 1024;

export function createWorkPipelines(ctx: WorkContext) {
  const { deps, store, clock, now, mustDomain, mustMission } = ctx;
  const idempotent = createIdempotency(deps);
  return {
    async runPipeline(caller: Caller, req: pb.RunPipelineRequest): Promise<pb.RunPipelineResponse> {
      const domainId = req.missionId
        ? (await mustMission(store, req.missionId)).domainId
        : (await mustDomain(store, req.domainId)).id;
      authorize(caller, "operate", { domainId });
      if (req.domainId && req.domainId !== domainId)
        throw new EpError(
          "invalid_argument",
          `mission ${req.missionId} is in domain ${domainId}, not ${req.domainId}`,
          { field: "domain_id" },
        );
      const fileName = text("file_name", req.fileName, { max: 200 }) || "pipeline.toml";
      if (!req.source.trim())
        throw new EpError("pipeline_invalid", `${fileName}: the file is empty; a pipeline has [[step]] tables`, {
          field: "source",
        });
      if (req.source.length > MAX_SOURCE)
        throw new EpError("pipeline_invalid", `${fileName}: larger than ${MAX_SOURCE / 1024} KiB`, { field: "source" });
      const file = parsePipelineFile(req.source, fileName);
      const title = text("title", req.title) || file.name || fileName;
      const call = {
        caller,
        method: "WorkService.RunPipeline",
        input: pb.RunPipelineRequestSchema,
        request: req,
        output: pb.RunPipelineResponseSchema,
      };
      return idempotent(call, async (tx, emit) => {
        const mission = req.missionId
          ? await mustMission(tx, req.missionId)
          : await newMission(tx, emit, domainId, title, file.description);
        if (req.missionId) await refuseTakenNames(tx, mission.id, file.steps, fileName);
        const agents = await tx.listAgents({ domainId });
        const ids = new Map<string, string>();
        const made: TaskRow[] = [];
        for (const s of file.steps) {
          const assignee = s.agent ? agents.find((a) => a.id === s.agent || a.name === s.agent) : undefined;
          if (s.agent && !assignee)
            throw pipelineRefused(fileName, [
              {
                line: s.lines.agent ?? s.line,
                step: s.name,
                field: "agent",
                message: `no agent "${s.agent}" is enrolled in domain ${domainId} (ep agent ls)`,
              },
            ]);
          const request = stepRequest(s, mission.id, ids, assignee?.id ?? "");
          try {
            const { task } = await insertNewTask(ctx, tx, emit, mission, request, checkNewTask(request), {
              step: s.name,
            });
            ids.set(s.name, task.id);
            made.push(task);
          } catch (err) {
            if (!(err instanceof EpError) || err.errorClass === "internal" || err.errorClass === "unavailable")
              throw err;
            const field =
              String(err.details?.field ?? "")
                .replace(/\[\d+\]$/, "")
                .replace(/^input\./, "") || undefined;
            const line = (field && s.lines[field]) || s.line;
            throw pipelineRefused(fileName, [{ line, step: s.name, field, message: err.message }]);
          }
        }
        // in the file's order, as the operator wrote them
        const order = new Map(file.steps.map((s) => [s.name, s.line]));
        made.sort((a, b) => order.get(a.step)! - order.get(b.step)!);
        return create(pb.RunPipelineResponseSchema, { mission: missionMsg(mission), steps: made.map(taskMsg) });
      });

      async function newMission(tx: Store, emit: Emit, d: string, t: string, description: string): Promise<MissionRow> {
        const ts = now();
        const row = {
          id: newId("msn", clock.now()),
          domainId: d,
          title: t,
          description,
          status: "open",
          createdAt: ts,
          updatedAt: ts,
        };
        await tx.insertMission(row);
        emit({
          type: "matrix",
          name: "mission.created",
          domainId: d,
          missionId: row.id,
          status: "open",
          payload: { mission_id: row.id, title: t, pipeline: true },
        });
        return row;
      }
    },

    async getPipeline(caller: Caller, req: pb.GetPipelineRequest): Promise<pb.GetPipelineResponse> {
      const mission = await mustMission(store, req.missionId);
      authorize(caller, "read", { domainId: mission.domainId });
      const steps = (await store.listTasks({ missionId: mission.id })).filter((t) => t.step);
      const waits = await waitingOn(store, steps);
      return create(pb.GetPipelineResponseSchema, {
        mission: missionMsg(mission),
        steps: steps.map((t) => withWaitingOn(taskMsg(t), waits)),
        state: taskStatusOf(pipelineState(steps)),
      });
    },
  };
}

/** What a pipeline's steps add up to (docs/pipelines.md, "State"). */
export function pipelineState(steps: readonly Pick<TaskRow, "status">[]): string {
  if (!steps.length) return "";
  const has = (s: string) => steps.some((t) => t.status === s);
  const active = has("claimed") || has("running") || has("queued");
  if (steps.every((t) => t.status === "succeeded")) return "succeeded";
  if (has("failed") && !active) return "failed";
  if (has("cancelled") && !active && !has("waiting")) return "cancelled";
  if (has("claimed") || has("running") || has("succeeded") || has("failed")) return "running";
  return has("queued") ? "queued" : "waiting";
}

/** The CreateTask request a step stands for, its depends_on and `task:<step>` ref as task ids. */
function stepRequest(
  s: PipelineStep,
  missionId: string,
  ids: ReadonlyMap<string, string>,
  assignee: string,
): pb.CreateTaskRequest {
  const input: JsonObject = { ...s.input };
  const ref = stepRef(s);
  const dependsOn = s.dependsOn.map((d) => ids.get(d) ?? d);
  if (ref !== undefined && ids.has(ref)) {
    input.workspace = { ...(input.workspace as JsonObject), ref: `task:${ids.get(ref)}` };
    // an ancestor's branch (test after review, on implement's branch): that ancestor becomes a
    // parent too, so the run is given its result; it has succeeded before the step runs anyway
    if (!dependsOn.includes(ids.get(ref)!)) dependsOn.push(ids.get(ref)!);
  } else if (ref?.startsWith("tsk_") && !dependsOn.includes(ref)) dependsOn.push(ref);
  return create(pb.CreateTaskRequestSchema, {
    missionId,
    title: s.title,
    description: s.description,
    runtime: runtimeOf(s.runtime),
    claimPolicy: claimPolicyOf(s.claimPolicy),
    assigneeAgentId: assignee,
    capabilities: s.capabilities,
    priority: s.priority,
    maxAttempts: s.maxAttempts,
    input,
    dependsOn,
  });
}

/** A mission that has steps already keeps its step names unique. */
async function refuseTakenNames(tx: Store, missionId: string, steps: PipelineStep[], fileName: string): Promise<void> {
  const taken = new Set((await tx.listTasks({ missionId })).map((t) => t.step).filter(Boolean));
  const clash = steps.filter((s) => taken.has(s.name));
  if (clash.length) {
    throw pipelineRefused(
      fileName,
      clash.map((s) => ({
        line: s.lines.name ?? s.line,
        step: s.name,
        field: "name",
        message:
          `mission ${missionId} has a step "${s.name}" already; ` +
          `rename the step or run the pipeline as a new mission`,
      })),
    );
  }
}
