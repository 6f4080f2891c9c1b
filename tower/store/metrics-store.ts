// What the tower's /metrics reads from the database at scrape time (docs/metrics.md): counts the
// work path never computes. Every statement reads an index or a small table, never the whole
// task history: live tasks through the partial indexes of the queue and of held leases, agents,
// nodes and domains (one row each), pending approvals through their (status, created_at) index.
// One dialect-neutral implementation over a query function, bound by SqlStore (sql-store.ts).

export interface MetricCounts {
  /** claimable tasks waiting in each domain's queue, and held (claimed, running) tasks by state */
  tasks: { domainId: string; status: string; count: number }[];
  agents: { state: string; count: number }[];
  nodes: { status: string; count: number }[];
  domains: { id: string; name: string }[];
  approvalsPending: number;
}

export interface MetricsStore {
  metricCounts(): Promise<MetricCounts>;
}

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

// the WHERE clauses repeat the partial indexes' predicates word for word, so both planners use them
const QUEUED =
  "SELECT domain_id, 'queued' AS status, COUNT(*) AS n FROM tasks " +
  "WHERE status = 'queued' AND kind = 'claimable' GROUP BY domain_id";
const HELD =
  "SELECT domain_id, status, COUNT(*) AS n FROM tasks WHERE " +
  "status IN ('claimed', 'running') GROUP BY domain_id, status";

export function createMetricsStore(query: Query): MetricsStore {
  return {
    async metricCounts() {
      const [queued, held, agents, nodes, domains, approvals] = await Promise.all([
        query(QUEUED, []),
        query(HELD, []),
        query("SELECT state, COUNT(*) AS n FROM agents GROUP BY state", []),
        query("SELECT status, COUNT(*) AS n FROM nodes GROUP BY status", []),
        query("SELECT id, name FROM domains", []),
        query("SELECT COUNT(*) AS n FROM approvals WHERE status = 'pending'", []),
      ]);
      return {
        tasks: [...queued, ...held].map((r) => ({
          domainId: String(r.domain_id),
          status: String(r.status),
          count: Number(r.n),
        })),
        agents: agents.map((r) => ({ state: String(r.state), count: Number(r.n) })),
        nodes: nodes.map((r) => ({ status: String(r.status), count: Number(r.n) })),
        domains: domains.map((r) => ({ id: String(r.id), name: String(r.name) })),
        approvalsPending: Number(approvals[0]?.n ?? 0),
      };
    },
  };
}
