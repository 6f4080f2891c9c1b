// The latest state report of each node (cron jobs, supervised agents, config errors), one row
// per node replaced by every report. One dialect-neutral implementation over a query function,
// bound by SqlStore (sql-store.ts), so SQLite and PostgreSQL run the same SQL.
// The lists are kept as JSON text: the tower only stores and shows them.

export interface NodeStateRow {
  nodeId: string;
  /** snake_case JSON objects, as the tools return them */
  cronJobs: Record<string, unknown>[];
  supervised: Record<string, unknown>[];
  configErrors: Record<string, unknown>[];
  /** the tower's time of the report */
  reportedAt: string;
}

export interface NodeStateStore {
  /** Inserts or replaces the node's report; not_found when the node does not exist. */
  putNodeState(row: NodeStateRow): Promise<void>;
  /** The latest report of one node, or of every node (ordered by node id). */
  listNodeStates(nodeId?: string): Promise<NodeStateRow[]>;
}

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

const list = (v: unknown): Record<string, unknown>[] => {
  try {
    const parsed: unknown = JSON.parse(String(v));
    return Array.isArray(parsed) ? (parsed as Record<string, unknown>[]) : [];
  } catch {
    return [];
  }
};

const toRow = (r: Row): NodeStateRow => ({
  nodeId: r.node_id as string,
  cronJobs: list(r.cron_jobs),
  supervised: list(r.supervised),
  configErrors: list(r.config_errors),
  reportedAt: r.reported_at as string,
});

export function createNodeStateStore(q: Query): NodeStateStore {
  return {
    async putNodeState(s) {
      await q(
        `INSERT INTO node_state (node_id, cron_jobs, supervised, config_errors, reported_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (node_id) DO UPDATE SET cron_jobs = excluded.cron_jobs, supervised = excluded.supervised,
           config_errors = excluded.config_errors, reported_at = excluded.reported_at`,
        [
          s.nodeId,
          JSON.stringify(s.cronJobs),
          JSON.stringify(s.supervised),
          JSON.stringify(s.configErrors),
          s.reportedAt,
        ],
      );
    },
    async listNodeStates(nodeId) {
      const rows =
        nodeId === undefined
          ? await q("SELECT * FROM node_state ORDER BY node_id", [])
          : await q("SELECT * FROM node_state WHERE node_id = ?", [nodeId]);
      return rows.map(toRow);
    },
  };
}
