// Names wherever an id is taken: --domain demo, --mission "Ship v2", --assignee reviewer. A
// value that is not an id (dom_…, msn_…, agt_…) is looked up by name at the tower: one match is
// used, several are an error listing them; with none the value is passed on as given.
import { EpError } from "../common/errors.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { UsageError, type Context } from "./context.js";
import { tower } from "./tower.js";

type Kind = "domain" | "mission" | "agent";
const PREFIX: Record<Kind, string> = { domain: "dom_", mission: "msn_", agent: "agt_" };
const OPTIONS: [string, Kind][] = [
  ["domain", "domain"],
  ["mission", "mission"],
  ["assignee", "agent"],
  ["agent", "agent"],
];

async function candidates(
  ctx: Context,
  kind: Kind,
  domainId: string | undefined,
): Promise<{ id: string; name: string }[]> {
  if (kind === "domain")
    return (await tower(ctx, WorkService).listDomains({})).domains.map((d) => ({ id: d.id, name: d.name }));
  if (kind === "mission")
    return (await tower(ctx, WorkService).listMissions({ domainId: domainId ?? "" })).missions.map((m) => ({
      id: m.id,
      name: m.title,
    }));
  return (await tower(ctx, AgentService).listAgents({ domainId: domainId ?? "" })).agents.map((a) => ({
    id: a.id,
    name: a.name,
  }));
}

export async function resolveRef(ctx: Context, kind: Kind, ref: string, domainId?: string): Promise<string> {
  if (ref.startsWith(PREFIX[kind])) return ref;
  const all = await candidates(ctx, kind, domainId);
  const hits = all.filter((c) => c.name === ref);
  if (hits.length === 1) return hits[0].id;
  if (hits.length > 1)
    throw new UsageError(
      `${kind} ${JSON.stringify(ref)} is ambiguous: ${hits.map((h) => h.id).join(", ")} are all named so; give the id`,
    );
  const lister = kind === "domain" ? "ep domain ls" : kind === "mission" ? "ep mission ls" : "ep agent ls";
  throw new EpError(
    `${kind}_not_found` as never,
    `${kind} ${ref} does not exist (no ${kind} has this id or name; '${lister}' lists them)`,
  );
}

/** Replaces names by ids in the options that take one (in place, before the command runs). */
export async function resolveNames(ctx: Context): Promise<void> {
  for (const [opt, kind] of OPTIONS) {
    const v = ctx.opts[opt];
    if (typeof v !== "string" || v === "" || v === "*" || v.startsWith(PREFIX[kind])) continue;
    const domain =
      typeof ctx.opts.domain === "string" && ctx.opts.domain.startsWith("dom_") ? ctx.opts.domain : undefined;
    try {
      ctx.opts[opt] = await resolveRef(ctx, kind, v, kind === "domain" ? undefined : domain);
    } catch (err) {
      // ambiguous names are the caller's to fix; for no match (or no tower) the value goes on as
      // given, and the command's own checks or the tower say what is wrong with it
      if (err instanceof UsageError) throw err;
    }
  }
}
