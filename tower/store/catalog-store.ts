// The catalog's tables: domains, missions, nodes and agents. One dialect-neutral implementation
// over a query function, bound by SqlStore (sql-store.ts), so SQLite and PostgreSQL run the same SQL.
import { nodeDomainsText, toAgent, toDomain, toMission, toNode, type Row } from "./rows.js";
import type { AgentRow, DomainRow, MissionRow, NodeRow, Store } from "./store.js";

type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

/** SET clauses for the defined keys of a patch: `a = ?, b = ?` and their values, in order. */
function setClause(
  patch: object,
  columns: Record<string, string>,
  value: (key: string, v: unknown) => unknown = (_k, v) => v,
): { sql: string; args: unknown[] } {
  const sets = Object.entries(patch).filter(([k, v]) => v !== undefined && columns[k]);
  return { sql: sets.map(([k]) => `${columns[k]} = ?`).join(", "), args: sets.map(([k, v]) => value(k, v)) };
}

const MISSION_COLUMNS: Record<string, string> = {
  title: "title",
  description: "description",
  status: "status",
  updatedAt: "updated_at",
};
const NODE_COLUMNS: Record<string, string> = {
  hostname: "hostname",
  status: "status",
  lastSeenAt: "last_seen_at",
  domains: "domains",
};
const AGENT_COLUMNS: Record<string, string> = {
  state: "state",
  lastSeenAt: "last_seen_at",
  name: "name",
  capabilities: "capabilities",
  runtime: "runtime",
  supervised: "supervised",
};

export type CatalogStore = Pick<
  Store,
  | "insertDomain"
  | "getDomain"
  | "getDomainByName"
  | "listDomains"
  | "insertMission"
  | "getMission"
  | "listMissions"
  | "updateMission"
  | "insertNode"
  | "getNode"
  | "listNodes"
  | "updateNode"
  | "insertAgent"
  | "getAgent"
  | "listAgents"
  | "nodeAgentDomains"
  | "updateAgent"
  | "moveAgentState"
>;

/** `query` names a constraint error after the statement's table; `orderBy` orders by bytes in both dialects. */
export function createCatalogStore(query: Query, orderBy: (...cols: string[]) => string): CatalogStore {
  const first = async <T>(sql: string, args: readonly unknown[], map: (r: Row) => T): Promise<T | undefined> => {
    const [r] = await query(sql, args);
    return r && map(r);
  };
  const self: CatalogStore = {
    // ---- domains

    async insertDomain(row: DomainRow): Promise<void> {
      await query("INSERT INTO domains (id, name, created_at) VALUES (?, ?, ?)", [row.id, row.name, row.createdAt]);
    },

    getDomain(id: string): Promise<DomainRow | undefined> {
      return first("SELECT * FROM domains WHERE id = ?", [id], toDomain);
    },

    getDomainByName(name: string): Promise<DomainRow | undefined> {
      return first("SELECT * FROM domains WHERE name = ?", [name], toDomain);
    },

    async listDomains(): Promise<DomainRow[]> {
      return (await query(`SELECT * FROM domains ${orderBy("created_at", "id")}`, [])).map(toDomain);
    },

    // ---- missions

    async insertMission(row: MissionRow): Promise<void> {
      await query(
        "INSERT INTO missions (id, domain_id, title, description, " +
          "status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [row.id, row.domainId, row.title, row.description, row.status, row.createdAt, row.updatedAt],
      );
    },

    getMission(id: string): Promise<MissionRow | undefined> {
      return first("SELECT * FROM missions WHERE id = ?", [id], toMission);
    },

    async listMissions(domainId?: string): Promise<MissionRow[]> {
      const rows = domainId
        ? await query(`SELECT * FROM missions WHERE domain_id = ? ${orderBy("created_at", "id")}`, [domainId])
        : await query(`SELECT * FROM missions ${orderBy("created_at", "id")}`, []);
      return rows.map(toMission);
    },

    async updateMission(
      id: string,
      patch: Partial<Pick<MissionRow, "title" | "description" | "status" | "updatedAt">>,
    ): Promise<MissionRow | undefined> {
      const set = setClause(patch, MISSION_COLUMNS);
      if (!set.args.length) return self.getMission(id);
      return first(`UPDATE missions SET ${set.sql} WHERE id = ? RETURNING *`, [...set.args, id], toMission);
    },

    // ---- nodes

    async insertNode(row: NodeRow): Promise<void> {
      await query(
        "INSERT INTO nodes (id, hostname, status, last_seen_at, created_at, domains) VALUES (?, ?, ?, ?, ?, ?)",
        [row.id, row.hostname, row.status, row.lastSeenAt, row.createdAt, nodeDomainsText(row.domains)],
      );
    },

    getNode(id: string): Promise<NodeRow | undefined> {
      return first("SELECT * FROM nodes WHERE id = ?", [id], toNode);
    },

    async listNodes(): Promise<NodeRow[]> {
      return (await query(`SELECT * FROM nodes ${orderBy("created_at", "id")}`, [])).map(toNode);
    },

    async updateNode(
      id: string,
      patch: Partial<Pick<NodeRow, "hostname" | "status" | "lastSeenAt" | "domains">>,
    ): Promise<NodeRow | undefined> {
      const set = setClause(patch, NODE_COLUMNS, (k, v) => (k === "domains" ? nodeDomainsText(v as string[]) : v));
      if (!set.args.length) return self.getNode(id);
      return first(`UPDATE nodes SET ${set.sql} WHERE id = ? RETURNING *`, [...set.args, id], toNode);
    },

    // ---- agents

    async insertAgent(row: AgentRow): Promise<void> {
      await query(
        "INSERT INTO agents (id, domain_id, node_id, name, runtime, capabilities, state, " +
          "last_seen_at, created_at, supervised) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
          row.id,
          row.domainId,
          row.nodeId,
          row.name,
          row.runtime,
          JSON.stringify(row.capabilities),
          row.state,
          row.lastSeenAt,
          row.createdAt,
          row.supervised,
        ],
      );
    },

    getAgent(id: string): Promise<AgentRow | undefined> {
      return first("SELECT * FROM agents WHERE id = ?", [id], toAgent);
    },

    async listAgents(q: { domainId?: string; nodeId?: string }): Promise<AgentRow[]> {
      const where: string[] = [];
      const args: unknown[] = [];
      if (q.domainId) {
        where.push("domain_id = ?");
        args.push(q.domainId);
      }
      if (q.nodeId) {
        where.push("node_id = ?");
        args.push(q.nodeId);
      }
      return (
        await query(
          `SELECT * FROM agents ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ` +
            `${orderBy("created_at", "id")}`,
          args,
        )
      ).map(toAgent);
    },

    async nodeAgentDomains(nodeId: string): Promise<string[]> {
      return (await query("SELECT DISTINCT domain_id FROM agents WHERE node_id = ? ORDER BY domain_id", [nodeId])).map(
        (r) => String(r.domain_id),
      );
    },

    async updateAgent(
      id: string,
      patch: Partial<Pick<AgentRow, "state" | "lastSeenAt" | "name" | "capabilities" | "runtime" | "supervised">>,
    ): Promise<AgentRow | undefined> {
      const set = setClause(patch, AGENT_COLUMNS, (k, v) => (k === "capabilities" ? JSON.stringify(v) : v));
      if (!set.args.length) return self.getAgent(id);
      return first(`UPDATE agents SET ${set.sql} WHERE id = ? RETURNING *`, [...set.args, id], toAgent);
    },

    moveAgentState(id: string, from: string, to: string, at: string): Promise<AgentRow | undefined> {
      return first(
        "UPDATE agents SET state = ?, last_seen_at = ? WHERE id = ? AND state = ? RETURNING *",
        [to, at, id, from],
        toAgent,
      );
    },
  };
  return self;
}
