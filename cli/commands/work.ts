// Domains, missions, tasks, and the tower's view of agents and nodes.
import {
  ClaimPolicySchema,
  RuntimeSchema,
  TaskKind,
  TaskKindSchema,
  TaskStatusSchema,
  type ClaimPolicy,
  type Runtime,
  TaskStatus,
} from "../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../common/vocab.js";
import {
  GetMissionResponseSchema,
  GetTaskResponseSchema,
  ListDomainsResponseSchema,
  WorkService,
  ListMissionsResponseSchema,
  ListTasksResponseSchema,
  CreateDomainResponseSchema,
  CreateMissionResponseSchema,
  CreateTaskResponseSchema,
  RetryTaskResponseSchema,
  CancelTaskResponseSchema,
  GetPipelineResponseSchema,
} from "../../gen/ep/tower/v1/work_pb.js";
import {
  AgentService,
  GetAgentResponseSchema,
  ListAgentsResponseSchema,
  ListNodesResponseSchema,
  NodeService,
} from "../../gen/ep/tower/v1/fleet_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { UsageError, type Context } from "../context.js";
import { json, kv, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";
import { denialLines, statusWithDenials, type DenialJson } from "../denials.js";
import { withNames } from "../name-book.js";

// tables show names (the domain, the agent, the node); --wide adds the ids they stand for
const missionCols = (wide: boolean) => ({
  ...(wide ? { id: "id" } : {}),
  title: "title",
  domain: "domain",
  ...(wide ? { domain_id: "domain_id" } : {}),
  status: "status",
  created: "created_at",
});
const taskCols = (wide: boolean) => ({
  id: "id",
  title: "title",
  status: "status",
  policy: "claim_policy",
  priority: "priority",
  attempts: "attempts",
  claimed_by: "agent",
  ...(wide ? { agent_id: "claimed_by" } : {}),
  runtime: "runtime",
});
const wideOf = (ctx: Context) => ctx.opts.wide === true;

function int32(ctx: Context, name: string): number | undefined {
  const raw = ctx.str(name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw.trim()) || n < -2147483648 || n > 2147483647)
    throw new UsageError(`--${name} must be a 32-bit integer (got ${JSON.stringify(raw)})`);
  return n;
}

async function printTask(ctx: Context, task: Row, runs: Row[] = [], wait?: Row): Promise<void> {
  const denials = ((task.result as Row | undefined)?.denials as DenialJson[] | undefined) ?? [];
  const waiting = wait ? { waiting: `${wait.reason}: ${wait.message}` } : {};
  const [shown] = await withNames(ctx, [task], {
    assignee_agent_id: ["agent", "assignee"],
    claimed_by: ["agent", "agent"],
    mission_id: ["mission", "mission"],
    domain_id: ["domain", "domain"],
  });
  // names for people; --wide keeps the ids beside them
  const ids = wideOf(ctx) ? ["assignee_agent_id", "claimed_by", "mission_id", "domain_id"] : [];
  ctx.out(
    kv({ ...shown, status: statusWithDenials(String(task.status), denials.length), ...waiting }, [
      "id",
      "title",
      "kind",
      "step",
      "status",
      "waiting",
      "depends_on",
      "claim_policy",
      "priority",
      "capabilities",
      "assignee",
      "runtime",
      "attempts",
      "max_attempts",
      "agent",
      "lease_expires_at",
      "mission",
      "domain",
      "created_at",
      "updated_at",
      ...ids,
    ]),
  );
  const result = task.result as Row | undefined;
  if (result && (result.output || result.error || result.exit_code !== undefined)) {
    ctx.out(`result:\n${kv(result, ["exit_code", "error", "output"])}`);
  }
  if (result?.usage) ctx.out(`usage:\n${usageText(result.usage as Row)}`);
  if (denials.length) ctx.out(`refused:\n${denialLines(denials).join("\n")}`);
  if (runs.length)
    ctx.out(`runs:\n${table(await withNames(ctx, runs, { claimed_by: ["agent", "agent"] }), taskCols(wideOf(ctx)))}`);
}

/** Tokens and cost as people read them. */
function usageText(u: Row): string {
  const n = (v: unknown) => Number(v ?? 0).toLocaleString("en-US");
  const lines = [`  tokens  ${n(u.input_tokens)} in (${n(u.cached_input_tokens)} cached), ${n(u.output_tokens)} out`];
  if (u.cost_usd) lines.push(`  cost    $${Number(u.cost_usd).toFixed(4)}`);
  if (u.model) lines.push(`  model   ${u.model}`);
  return lines.join("\n");
}

export async function run(ctx: Context): Promise<number> {
  const work = () => tower(ctx, WorkService);
  switch (ctx.spec.path.join(" ")) {
    case "domain ls": {
      const res = protoJson(ListDomainsResponseSchema, await work().listDomains({}));
      ctx.out(
        ctx.json
          ? json(res)
          : table(res.domains as Row[], { ...(wideOf(ctx) ? { id: "id" } : {}), name: "name", created: "created_at" }),
      );
      return 0;
    }
    case "domain create": {
      const res = protoJson(CreateDomainResponseSchema, await work().createDomain({ name: ctx.args[0] }));
      ctx.out(ctx.json ? json(res) : `created domain ${(res.domain as Row).id} (${ctx.args[0]})`);
      return 0;
    }
    case "mission get":
      return missionGet(ctx);
    case "mission ls": {
      const domain = ctx.str("domain");
      let missions: Row[];
      if (domain)
        missions = protoJson(ListMissionsResponseSchema, await work().listMissions({ domainId: domain }))
          .missions as Row[];
      else {
        missions = [];
        for (const d of (await work().listDomains({})).domains) {
          missions.push(
            ...(protoJson(ListMissionsResponseSchema, await work().listMissions({ domainId: d.id })).missions as Row[]),
          );
        }
      }
      ctx.out(
        ctx.json
          ? json({ missions })
          : table(await withNames(ctx, missions, { domain_id: ["domain", "domain"] }), missionCols(wideOf(ctx))),
      );
      return 0;
    }
    case "mission create": {
      const res = protoJson(
        CreateMissionResponseSchema,
        await work().createMission({
          domainId: ctx.required("domain"),
          title: ctx.args.join(" "),
          description: ctx.str("description") ?? "",
        }),
      );
      ctx.out(ctx.json ? json(res) : `created mission ${(res.mission as Row).id}: ${ctx.args.join(" ")}`);
      return 0;
    }
    case "task ls": {
      const res = protoJson(
        ListTasksResponseSchema,
        await work().listTasks({
          missionId: ctx.required("mission"),
          status: enumOf<TaskStatus>(TaskStatusSchema, ctx.str("status") ?? "", "--status"),
          kind: enumOf<TaskKind>(TaskKindSchema, ctx.str("kind") ?? "", "--kind"),
        }),
      );
      ctx.out(
        ctx.json
          ? json(res)
          : table(await withNames(ctx, res.tasks as Row[], { claimed_by: ["agent", "agent"] }), taskCols(wideOf(ctx))),
      );
      return 0;
    }
    case "task submit":
      return taskSubmit(ctx);
    case "task get": {
      const res = protoJson(GetTaskResponseSchema, await work().getTask({ taskId: ctx.args[0] }));
      // runs belong to broadcast tasks; an empty list on any other task reads as "it never ran"
      if ((res.task as Row).claim_policy !== "broadcast") delete res.runs;
      if (ctx.json) ctx.out(json(res));
      else await printTask(ctx, res.task as Row, res.runs as Row[], res.wait as Row | undefined);
      return 0;
    }
    case "task retry": {
      const res = protoJson(RetryTaskResponseSchema, await work().retryTask({ taskId: ctx.args[0] }));
      ctx.out(
        ctx.json
          ? json(res)
          : `task ${ctx.args[0]} is ${(res.task as Row).status} again; its ` +
              `attempts start over (at most ${(res.task as Row).max_attempts ?? "?"})`,
      );
      return 0;
    }
    case "task cancel": {
      const res = protoJson(
        CancelTaskResponseSchema,
        await work().cancelTask({ taskId: ctx.args[0], reason: ctx.str("reason") ?? "" }),
      );
      ctx.out(ctx.json ? json(res) : `task ${ctx.args[0]} is ${(res.task as Row).status}`);
      return 0;
    }
    case "agent ls": {
      const res = protoJson(
        ListAgentsResponseSchema,
        await tower(ctx, AgentService).listAgents({ domainId: ctx.str("domain") ?? "" }),
      );
      if (ctx.json) ctx.out(json(res));
      else {
        // an agent enrolled before the tower named every agent has no name: its id stands in
        const rows = (
          await withNames(ctx, res.agents as Row[], { domain_id: ["domain", "domain"], node_id: ["node", "node"] })
        ).map((a) => ({ ...a, name: a.name || a.id }));
        const wide = wideOf(ctx);
        ctx.out(
          table(rows, {
            ...(wide ? { id: "id" } : {}),
            name: "name",
            domain: "domain",
            node: "node",
            ...(wide ? { node_id: "node_id" } : {}),
            runtime: "runtime",
            state: "state",
            capabilities: "capabilities",
          }),
        );
      }
      return 0;
    }
    case "task watch": {
      const { watchTask } = await import("./watch.js");
      return watchTask(ctx, ctx.args[0]!);
    }
    case "agent get": {
      const { resolveRef } = await import("../names.js");
      const agentId = await resolveRef(ctx, "agent", ctx.args[0]!, ctx.str("domain")).catch(() => ctx.args[0]!);
      const res = protoJson(GetAgentResponseSchema, await tower(ctx, AgentService).getAgent({ agentId }));
      if (ctx.json) ctx.out(json(res));
      else {
        const [agent] = await withNames(ctx, [res.agent as Row], {
          domain_id: ["domain", "domain"],
          node_id: ["node", "node"],
        });
        ctx.out(
          kv(agent, [
            "id",
            "name",
            "domain",
            "node",
            "runtime",
            "state",
            "capabilities",
            "last_seen_at",
            ...(wideOf(ctx) ? ["domain_id", "node_id"] : []),
          ]),
        );
        const u = res.usage as Row | undefined;
        ctx.out(u ? `usage (sum of the tasks it ran):\n${usageText(u)}` : "usage: none reported yet");
      }
      return 0;
    }
    case "node ls": {
      const res = protoJson(ListNodesResponseSchema, await tower(ctx, NodeService).listNodes({}));
      if (ctx.json) ctx.out(json(res));
      else {
        const rows = (await withNames(ctx, res.nodes as Row[], { domains: ["domain", "names"] })).map((n) => ({
          ...n,
          serves: Array.isArray(n.names) && n.names.length && !n.names.includes("*") ? n.names.join(",") : "*",
        }));
        ctx.out(
          table(rows, {
            id: "id",
            hostname: "hostname",
            status: "status",
            domains: "serves",
            ...(wideOf(ctx) ? { domain_ids: "domains" } : {}),
            last_seen: "last_seen_at",
          }),
        );
      }
      return 0;
    }
    default:
      throw new UsageError(`no handler for ${ctx.spec.path.join(" ")}`);
  }
}

/** `ep mission get`: the mission, its usage, and who spent it. */
async function missionGet(ctx: Context): Promise<number> {
  const { resolveRef } = await import("../names.js");
  const missionId = await resolveRef(ctx, "mission", ctx.args[0]!).catch(() => ctx.args[0]!);
  const res = protoJson(GetMissionResponseSchema, await tower(ctx, WorkService).getMission({ missionId }));
  // its pipeline's steps, or else the tasks that wait for others: what holds the mission up
  const pipeline = protoJson(GetPipelineResponseSchema, await tower(ctx, WorkService).getPipeline({ missionId }));
  const steps = (pipeline.steps as Row[] | undefined) ?? [];
  const waiting = steps.length
    ? []
    : ((protoJson(
        ListTasksResponseSchema,
        await tower(ctx, WorkService).listTasks({ missionId, status: TaskStatus.WAITING }),
      ).tasks as Row[] | undefined) ?? []);
  if (ctx.json)
    ctx.out(
      json({
        ...res,
        ...(steps.length ? { pipeline: { state: pipeline.state, steps } } : {}),
        ...(waiting.length ? { waiting } : {}),
      }),
    );
  else {
    const [mission] = await withNames(ctx, [res.mission as Row], { domain_id: ["domain", "domain"] });
    ctx.out(
      kv(mission, [
        "id",
        "title",
        "status",
        "domain",
        "description",
        "created_at",
        "updated_at",
        ...(wideOf(ctx) ? ["domain_id"] : []),
      ]),
    );
    const u = res.usage as Row | undefined;
    ctx.out(u ? `usage (sum of its tasks):\n${usageText(u)}` : "usage: none reported yet");
    const byAgent = (res.usage_by_agent as Row[] | undefined) ?? [];
    if (byAgent.length) {
      const names = new Map(
        (await tower(ctx, AgentService).listAgents({ domainId: String((res.mission as Row).domain_id) })).agents.map(
          (a) => [a.id, a.name],
        ),
      );
      ctx.out("by agent:");
      for (const a of byAgent) {
        const au = a.usage as Row;
        const who = names.get(String(a.agent_id)) || String(a.agent_id);
        ctx.out(
          `  ${who}  ${Number(au.input_tokens ?? 0).toLocaleString("en-US")} ` +
            `in, ${Number(au.output_tokens ?? 0).toLocaleString("en-US")} ` +
            `out${au.cost_usd ? `, $${Number(au.cost_usd).toFixed(4)}` : ""}`,
        );
      }
    }
    const { stepsTable } = await import("./pipeline.js");
    if (steps.length) ctx.out(`pipeline: ${pipeline.state}\n${stepsTable(steps)}`);
    const waitsOn = (t: Row) => ((t.waiting_on as string[] | undefined) ?? []).join(", ");
    if (waiting.length)
      ctx.out(`waiting:\n${waiting.map((t) => `  ${t.id} ${t.title} — waits on ${waitsOn(t)}`).join("\n")}`);
  }
  return 0;
}

/** `ep task submit`: a claimable task; with --wait, its outcome. */
/** input of `ep task submit`: the command, the prompt and the workspace, when given. */
function submitInput(ctx: Context, command: string | undefined): JsonObject | undefined {
  const prompt = ctx.str("prompt");
  const repo = ctx.str("workspace");
  if (!repo && (ctx.str("ref") !== undefined || ctx.str("branch") !== undefined))
    throw new UsageError("--ref and --branch go with --workspace <repo>");
  const workspace = repo
    ? {
        repo,
        ...(ctx.str("ref") ? { ref: ctx.str("ref")! } : {}),
        ...(ctx.str("branch") ? { branch: ctx.str("branch")! } : {}),
      }
    : undefined;
  if (command === undefined && prompt === undefined && !workspace) return undefined;
  return {
    ...(command !== undefined ? { command } : {}),
    ...(prompt !== undefined ? { prompt } : {}),
    ...(workspace ? { workspace } : {}),
  };
}

/**
 * The tasks --after names: a tsk_ id as given, else the mission's task whose step name or title it
 * is (one match; several are a usage error listing them, none an error saying where it looked).
 */
async function afterIds(ctx: Context, missionId: string): Promise<string[]> {
  const refs = ctx.list("after");
  if (!refs.some((r) => !r.startsWith("tsk_"))) return refs;
  const tasks = (await tower(ctx, WorkService).listTasks({ missionId })).tasks;
  return refs.map((ref) => {
    if (ref.startsWith("tsk_")) return ref;
    const byStep = tasks.filter((t) => t.step === ref);
    const hits = byStep.length ? byStep : tasks.filter((t) => t.title === ref);
    if (hits.length === 1) return hits[0].id;
    if (hits.length > 1)
      throw new UsageError(
        `--after ${JSON.stringify(ref)} is ambiguous: ${hits.map((h) => h.id).join(", ")} ` +
          `are all named so in mission ${missionId}; give the id`,
      );
    throw new UsageError(
      `--after ${JSON.stringify(ref)}: no task of mission ${missionId} has this ` +
        `id, step name or title ('ep task ls --mission ${missionId}' lists them)`,
    );
  });
}

async function taskSubmit(ctx: Context): Promise<number> {
  const command = ctx.str("command");
  const missionId = ctx.required("mission");
  const res = protoJson(
    CreateTaskResponseSchema,
    await tower(ctx, WorkService).createTask({
      missionId,
      kind: TaskKind.CLAIMABLE,
      title: ctx.args.join(" "),
      description: ctx.str("description") ?? "",
      claimPolicy: enumOf<ClaimPolicy>(ClaimPolicySchema, ctx.str("claim-policy") ?? "", "--claim-policy"),
      priority: int32(ctx, "priority") ?? 0,
      capabilities: ctx.list("capability"),
      assigneeAgentId: ctx.str("assignee") ?? "",
      maxAttempts: int32(ctx, "max-attempts") ?? 0,
      runtime: enumOf<Runtime>(
        RuntimeSchema,
        ctx.str("runtime") ?? (command !== undefined ? "shell" : ""),
        "--runtime",
      ),
      input: submitInput(ctx, command),
      dependsOn: await afterIds(ctx, missionId),
    }),
  );
  const task = res.task as Row;
  const runs = (res.runs as Row[]) ?? [];
  if (ctx.opts.wait !== true) {
    ctx.out(
      ctx.json
        ? json(res)
        : `submitted task ${task.id} (${task.status})${runs.length ? `, ${runs.length} broadcast run(s)` : ""}`,
    );
    return 0;
  }
  if (!ctx.json) ctx.out(`submitted task ${task.id}; waiting for it to end (Ctrl-C stops waiting, not the task)`);
  const { waitForTaskEnd } = await import("./task-wait.js");
  const done = await waitForTaskEnd(ctx, String(task.id));
  const r = (done.result ?? {}) as Row;
  if (ctx.json) ctx.out(json({ task: done }));
  else {
    const [who] = await withNames(ctx, [done], { claimed_by: ["agent", "agent"] });
    ctx.out(
      [
        `task ${done.id} ${done.status} after ${done.attempts} attempt(s)${who.agent ? ` on ${who.agent}` : ""}`,
        r.output ? String(r.output).trimEnd() : "",
        r.error ? `error: ${r.error}` : "",
      ]
        .filter(Boolean)
        .join("\n"),
    );
  }
  // refusals do not change the exit code (the status does); they are said on stderr, also with --json
  const denials = (r.denials as DenialJson[] | undefined) ?? [];
  if (denials.length)
    ctx.err(
      [
        `warning: task ${done.id} ${statusWithDenials(String(done.status), denials.length)}`,
        ...denialLines(denials),
      ].join("\n"),
    );
  return done.status === "succeeded" ? 0 : 1;
}
