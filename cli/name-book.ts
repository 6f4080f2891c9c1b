// Names for the ids the tower answers with, so tables and event lines show what people call
// things (domain "demo", agent "shell-1", mission "first mission", session "release chat")
// rather than dom_…/agt_…/msn_…/ses_…. --json keeps the ids; --wide adds them as columns.
import { AiService } from "../gen/ep/tower/v1/ai_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import type { Context } from "./context.js";
import { tower } from "./tower.js";

export type NameKind = "domain" | "mission" | "agent" | "node" | "session";

export interface NameBook {
  /** loads the names of these kinds (once each; again after `forget`) */
  load(...kinds: NameKind[]): Promise<void>;
  /** the name of an id, or the id itself when it has none or is not known */
  name(id: unknown): string;
  /** the name of an id, undefined when it has none */
  lookup(id: unknown): string | undefined;
  /** drops what was loaded for these kinds, so the next load asks again (new agents, domains) */
  forget(...kinds: NameKind[]): void;
}

const KIND_OF: Record<string, NameKind> = {
  dom_: "domain",
  msn_: "mission",
  agt_: "agent",
  nod_: "node",
  ses_: "session",
};

/** The kind of an id by its prefix (dom_ → domain), undefined for ids that have no name. */
export function kindOf(id: string): NameKind | undefined {
  return KIND_OF[id.slice(0, 4)];
}

type Loader = () => Promise<[string, string][]>;

/** A name book over any loaders: the CLI's reads the tower, the TUI's its own clients. */
export function createNameBook(loaders: Partial<Record<NameKind, Loader>>): NameBook {
  const names = new Map<string, string>();
  const loaded = new Map<NameKind, Promise<void>>();
  const book: NameBook = {
    async load(...kinds) {
      await Promise.all(
        kinds.map((k) => {
          const loader = loaders[k];
          if (!loader) return undefined;
          let p = loaded.get(k);
          if (!p) {
            p = loader().then(
              (pairs) => void pairs.forEach(([id, name]) => name && names.set(id, name)),
              // names are for reading: a caller who may not list this kind (a viewer and the
              // nodes) or a tower that does not answer still gets its table, with ids in it
              () => undefined,
            );
            loaded.set(k, p);
          }
          return p;
        }),
      );
    },
    lookup: (id) => (typeof id === "string" ? names.get(id) : undefined),
    name: (id) => (typeof id === "string" ? (names.get(id) ?? id) : String(id ?? "")),
    forget(...kinds) {
      for (const k of kinds) loaded.delete(k);
    },
  };
  return book;
}

/** The CLI's name book: the tower the command talks to. */
export function towerNameBook(ctx: Context): NameBook {
  return createNameBook({
    domain: async () => (await tower(ctx, WorkService).listDomains({})).domains.map((d) => [d.id, d.name]),
    mission: async () => {
      const work = tower(ctx, WorkService);
      const out: [string, string][] = [];
      for (const d of (await work.listDomains({})).domains)
        for (const m of (await work.listMissions({ domainId: d.id })).missions) out.push([m.id, m.title]);
      return out;
    },
    agent: async () => (await tower(ctx, AgentService).listAgents({})).agents.map((a) => [a.id, a.name]),
    node: async () => (await tower(ctx, NodeService).listNodes({})).nodes.map((n) => [n.id, n.hostname]),
    session: async () => (await tower(ctx, AiService).listSessions({})).sessions.map((s) => [s.id, s.title]),
  });
}

/**
 * Rows with the names of the ids in `fields` added (`domain_id` → `domain`, `claimed_by` → `agent`); arrays name each
 * id, `*` stays.
 */
export async function withNames<R extends Record<string, unknown>>(
  ctx: Context,
  rows: R[],
  fields: Record<string, [NameKind, string]>,
): Promise<Record<string, unknown>[]> {
  const book = towerNameBook(ctx);
  await book.load(...new Set(Object.values(fields).map(([k]) => k)));
  return rows.map((r) => {
    const out: Record<string, unknown> = { ...r };
    for (const [from, [, to]] of Object.entries(fields)) {
      const v = r[from];
      out[to] = Array.isArray(v) ? v.map((x) => (x === "*" ? x : book.name(x))) : v ? book.name(v) : v;
    }
    return out;
  });
}
