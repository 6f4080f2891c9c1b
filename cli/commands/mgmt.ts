// Commands that talk to the local daemon over mgmt.sock: enroll, run, signal, cron, supervise.
import { UsageError, type Context } from "../context.js";
import { mgmtCall } from "../mgmt-client.js";
import { mgmtJson } from "../mgmt-json.js";
import { json, kv, table, type Row } from "../output.js";

const agentColumns = (wide: boolean) => ({
  ...(wide ? { id: "id" } : {}),
  name: "name",
  domain: "domain",
  ...(wide ? { domain_id: "domainId" } : {}),
  runtime: "runtime",
  state: "state",
  supervised: "supervised",
  paused: "paused",
  restarts: "restarts",
  pid: "pid",
});

/** Prints a daemon answer with --json (snake_case proto JSON of the method's response); false otherwise. */
async function printJson(ctx: Context, method: string, res: unknown): Promise<boolean> {
  if (ctx.json) ctx.out(json(mgmtJson(method, res)));
  return ctx.json;
}

async function printAgent(ctx: Context, method: string, res: { agent?: Row }): Promise<void> {
  if (await printJson(ctx, method, res)) return;
  let agent: Row = res.agent ?? {};
  // its domain by name (from the tower, when it answers); --wide keeps the id
  if (agent.domainId) {
    const { withNames } = await import("../name-book.js");
    [agent] = await withNames(ctx, [agent], { domainId: ["domain", "domain"] });
  }
  // a process that is not running has no pid: leave the row out rather than print "pid 0"
  const keys = [
    "id",
    "name",
    "domain",
    ...(ctx.opts.wide === true ? ["domainId"] : []),
    "runtime",
    "capabilities",
    "state",
    "supervised",
    "paused",
    "pid",
    "session",
    "restarts",
    "lastRestartAt",
    "detail",
  ];
  ctx.out(
    kv(
      agent,
      keys.filter((k) => k !== "pid" || Number(agent.pid ?? 0) > 0),
    ),
  );
}

/** `--arg k=v` values: JSON when they parse as JSON (numbers, true, objects), strings otherwise. */
export function toolArguments(pairs: string[], argsJson: string | undefined): Record<string, unknown> {
  let out: Record<string, unknown> = {};
  if (argsJson !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(argsJson);
    } catch (err) {
      throw new UsageError(`--args-json is not valid JSON: ${(err as Error).message}`);
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new UsageError("--args-json must be a JSON object");
    out = parsed as Record<string, unknown>;
  }
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--arg must be key=value (got ${JSON.stringify(pair)})`);
    const key = pair.slice(0, eq);
    const raw = pair.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // a plain string
    }
    out[key] = value;
  }
  return out;
}

export async function run(ctx: Context): Promise<number> {
  const cmd = ctx.spec.path.join(" ");
  const call = <T = Row>(method: string, params: Record<string, unknown> = {}) =>
    mgmtCall<T>(method, params, { env: ctx.env });
  switch (cmd) {
    case "daemon agent enroll": {
      const res = await call<{ agent?: Row }>("agent.enroll", {
        domainId: ctx.required("domain"),
        runtime: ctx.required("runtime"),
        capabilities: ctx.list("capability"),
        name: ctx.str("name") ?? "",
      });
      await printAgent(ctx, "agent.enroll", res);
      return 0;
    }
    case "run": {
      const res = await call<{ result?: unknown; shortCircuited?: boolean }>("tool.run", {
        tool: ctx.args[0],
        domainId: ctx.required("domain"),
        arguments: toolArguments(ctx.list("arg"), ctx.str("args-json")),
      });
      if (!(await printJson(ctx, "tool.run", res)))
        ctx.out(
          typeof res.result === "string"
            ? res.result
            : json(res.result ?? null) +
                (res.shortCircuited ? "(answered by the booster; the tower was not called)\n" : ""),
        );
      return 0;
    }
    case "agent signal": {
      const res = await call<{ deliveredVia?: string }>("agent.signal", {
        target: ctx.args[0],
        prompt: ctx.args.slice(1).join(" "),
      });
      if (!(await printJson(ctx, "agent.signal", res)))
        ctx.out(`delivered to ${ctx.args[0]} via ${res.deliveredVia || "the daemon"}`);
      return 0;
    }
    case "agent cron list": {
      const res = await call<{ jobs?: Row[]; problems?: Row[] }>("cron.list");
      if (!(await printJson(ctx, "cron.list", res))) {
        const problems = res.problems ?? [];
        const errors = problems.filter((p) => p.level === "error");
        if (errors.length)
          ctx.out(
            `cron.toml has errors, so no cron jobs run until it is fixed ('ep agent cron reload' after the fix):`,
          );
        for (const p of problems)
          ctx.out(
            `  ${p.level === "error" ? "error" : "warning"}: line ` +
              `${p.line}${p.job ? `, job "${p.job}"` : ""}${p.field ? `, field ${p.field}` : ""}: ${p.message}`,
          );
        if (!errors.length || (res.jobs ?? []).length)
          ctx.out(
            table(
              (res.jobs ?? []).map((j) => ({ ...j, last: (j.lastFire as Row | undefined)?.status })),
              {
                name: "name",
                schedule: "schedule",
                dispatch: "dispatch",
                session: "session",
                next: "nextFireAt",
                last: "last",
              },
            ),
          );
      }
      return 0;
    }
    case "agent cron describe": {
      const res = await call<{ job?: Row }>("cron.describe", { name: ctx.args[0] });
      if (!(await printJson(ctx, "cron.describe", res))) {
        const job = res.job ?? {};
        ctx.out(
          kv(job, ["name", "schedule", "kind", "interval", "dispatch", "session", "prompt", "missed", "nextFireAt"]),
        );
        const last = job.lastFire as Row | undefined;
        ctx.out(
          last && last.firedAt
            ? `last fire:\n${kv(last, ["slot", "firedAt", "status", "exitCode", "error", "output"])}`
            : "last fire: never",
        );
      }
      return 0;
    }
    case "agent cron history": {
      const limitRaw = ctx.str("limit");
      const limit = limitRaw === undefined ? 0 : Number(limitRaw);
      if (!Number.isInteger(limit) || limit < 0)
        throw new UsageError(`--limit must be a non-negative integer (got ${JSON.stringify(limitRaw)})`);
      const res = await call<{ fires?: Row[] }>("cron.history", { name: ctx.args[0], limit });
      if (!(await printJson(ctx, "cron.history", res)))
        ctx.out(
          table(res.fires ?? [], {
            slot: "slot",
            fired: "firedAt",
            status: "status",
            exit: "exitCode",
            error: "error",
          }),
        );
      return 0;
    }
    case "agent cron reload": {
      const res = await call<{ jobs?: number }>("cron.reload");
      if (!(await printJson(ctx, "cron.reload", res))) ctx.out(`cron.toml reloaded: ${res.jobs ?? 0} job(s)`);
      return 0;
    }
    case "agent cron gc-now": {
      const res = await call<{ removed?: number }>("cron.gcNow");
      if (!(await printJson(ctx, "cron.gcNow", res)))
        ctx.out(`removed ${res.removed ?? 0} stale dedup entr${res.removed === 1 ? "y" : "ies"}`);
      return 0;
    }
    case "agent supervise list": {
      const res = await call<{ agents?: Row[] }>("supervise.list");
      if (!(await printJson(ctx, "supervise.list", res))) {
        // the daemon knows domain ids; their names come from the tower when it answers
        const agents = res.agents ?? [];
        const { withNames } = await import("../name-book.js");
        const rows = agents.some((a) => a.domainId)
          ? await withNames(ctx, agents, { domainId: ["domain", "domain"] })
          : agents;
        ctx.out(
          table(
            rows.map((a) => ({ ...a, name: a.name || a.id })),
            agentColumns(ctx.opts.wide === true),
          ),
        );
      }
      return 0;
    }
    case "agent supervise status":
    case "agent supervise restart":
    case "agent supervise pause":
    case "agent supervise resume": {
      const op = ctx.spec.path[2];
      const res = await call<{ agent?: Row }>(`supervise.${op}`, { id: ctx.args[0] });
      await printAgent(ctx, `supervise.${op}`, res);
      return 0;
    }
    default:
      throw new UsageError(`no handler for ${cmd}`);
  }
}
