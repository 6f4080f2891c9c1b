// `ep pipeline run <file>` and `ep pipeline get <mission>`: a file of steps run as one mission's
// tasks (WorkService.RunPipeline: the tower reads the file, so its errors name the file's lines),
// and the steps with their states and what each waits on (docs/pipelines.md).
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { EpError } from "../../common/errors.js";
import { GetPipelineResponseSchema, RunPipelineResponseSchema, WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { UsageError, type Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

/** The steps as a table: name, state, what it waits on, its task, attempts. */
export function stepsTable(steps: readonly Row[]): string {
  const byId = new Map(steps.map((s) => [String(s.id), String(s.step || s.id)]));
  const rows = steps.map((s) => {
    const waiting = ((s.waiting_on as string[] | undefined) ?? []).map((id) => byId.get(id) ?? id);
    const after = ((s.depends_on as string[] | undefined) ?? []).map((id) => byId.get(id) ?? id);
    const error = String((s.result as Row | undefined)?.error ?? "");
    return {
      step: s.step || s.title,
      status: s.status,
      after: after.join(", "),
      waiting_on: waiting.join(", "),
      task: s.id,
      attempts: s.attempts,
      note: s.status === "cancelled" || s.status === "failed" ? error : "",
    };
  });
  return table(rows, {
    step: "step",
    status: "status",
    after: "after",
    waiting_on: "waiting_on",
    task: "task",
    attempts: "attempts",
    note: "note",
  });
}

async function pipelineRun(ctx: Context): Promise<number> {
  const file = ctx.args[0]!;
  let source: string;
  try {
    source = file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const missionId = ctx.str("mission") ?? "";
  const domainId = ctx.str("domain") ?? "";
  if (!missionId && !domainId)
    throw new UsageError("ep pipeline run needs --domain <id|name> (or --mission to add the steps to one)");
  const res = protoJson(
    RunPipelineResponseSchema,
    await tower(ctx, WorkService).runPipeline({
      domainId,
      missionId,
      source,
      fileName: file === "-" ? "pipeline.toml" : basename(file),
      title: ctx.str("title") ?? "",
    }),
  );
  const mission = res.mission as Row;
  const steps = (res.steps as Row[]) ?? [];
  if (ctx.opts.wait !== true) {
    ctx.out(
      ctx.json
        ? json(res)
        : `pipeline ${mission.title}: mission ${mission.id}, ${steps.length} ` +
            `step(s)\n${stepsTable(steps)}\nfollow it: ep pipeline get ${mission.id}`,
    );
    return 0;
  }
  if (!ctx.json)
    ctx.out(
      `pipeline ${mission.title}: mission ${mission.id}, ${steps.length} ` +
        `step(s); waiting for it to end (Ctrl-C stops waiting, not the pipeline)`,
    );
  const done = await waitForEnd(ctx, String(mission.id));
  ctx.out(ctx.json ? json(done) : `pipeline ${done.state}\n${stepsTable((done.steps as Row[]) ?? [])}`);
  return done.state === "succeeded" ? 0 : 1;
}

/** Polls GetPipeline until nothing can move any more (every step final, or failed/cancelled with none active). */
async function waitForEnd(ctx: Context, missionId: string): Promise<Row> {
  const { setTimeout: sleep } = await import("node:timers/promises");
  for (let delay = 200; ; delay = Math.min(delay * 2, 2000)) {
    const res = protoJson(GetPipelineResponseSchema, await tower(ctx, WorkService).getPipeline({ missionId }));
    if (["succeeded", "failed", "cancelled"].includes(String(res.state))) return res;
    await sleep(delay);
  }
}

async function pipelineGet(ctx: Context): Promise<number> {
  const { resolveRef } = await import("../names.js");
  const missionId = await resolveRef(ctx, "mission", ctx.args[0]!);
  const res = protoJson(GetPipelineResponseSchema, await tower(ctx, WorkService).getPipeline({ missionId }));
  const steps = (res.steps as Row[]) ?? [];
  if (ctx.json) ctx.out(json(res));
  else if (!steps.length)
    throw new EpError(
      "not_found",
      `mission ${missionId} has no pipeline steps (its tasks were not made ` +
        `by ep pipeline run); see them with 'ep task ls --mission ${missionId}'`,
    );
  else ctx.out(`pipeline ${(res.mission as Row).title} (${missionId}): ${res.state}\n${stepsTable(steps)}`);
  return 0;
}

export async function run(ctx: Context): Promise<number> {
  return ctx.spec.path[1] === "run" ? pipelineRun(ctx) : pipelineGet(ctx);
}
