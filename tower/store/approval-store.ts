// What agents ask a person to allow (ApprovalService): one row per tool-permission request. One
// dialect-neutral implementation over a query function, bound by SqlStore (sql-store.ts), so
// SQLite and PostgreSQL run the same SQL. Arguments, paths and options are kept as JSON text.

export type ApprovalState = "pending" | "approved" | "rejected" | "expired";

export interface ApprovalOptionRow {
  optionId: string;
  name: string;
  kind: string;
}

export interface ApprovalRow {
  id: string;
  kind: "permission";
  domainId: string;
  missionId: string;
  taskId: string;
  agentId: string;
  nodeId: string;
  tool: string;
  title: string;
  arguments: Record<string, unknown>;
  paths: string[];
  options: ApprovalOptionRow[];
  status: ApprovalState;
  optionId: string;
  decidedBy: string;
  decidedAt: string;
  reason: string;
  createdAt: string;
  expiresAt: string;
}

export interface ApprovalQuery {
  status?: ApprovalState;
  /** only these domains (a caller confined to some) */
  domainIds?: readonly string[];
  taskId?: string;
  /** ids after this one (pages), in id (= creation) order */
  afterId?: string;
  limit?: number;
}

export interface ApprovalDecision {
  status: Exclude<ApprovalState, "pending">;
  optionId: string;
  decidedBy: string;
  decidedAt: string;
  reason: string;
}

export interface ApprovalStore {
  insertApproval(row: ApprovalRow): Promise<void>;
  getApproval(id: string): Promise<ApprovalRow | undefined>;
  listApprovals(q: ApprovalQuery): Promise<ApprovalRow[]>;
  /** Decides a pending approval; undefined when it was not pending (someone decided first). */
  decideApproval(id: string, d: ApprovalDecision): Promise<ApprovalRow | undefined>;
}

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

function parse<T>(v: unknown, fallback: T): T {
  try {
    return (JSON.parse(String(v)) as T) ?? fallback;
  } catch {
    return fallback;
  }
}

const toRow = (r: Row): ApprovalRow => ({
  id: r.id as string,
  kind: "permission",
  domainId: r.domain_id as string,
  missionId: r.mission_id as string,
  taskId: r.task_id as string,
  agentId: r.agent_id as string,
  nodeId: r.node_id as string,
  tool: r.tool as string,
  title: r.title as string,
  arguments: parse(r.arguments, {}),
  paths: parse(r.paths, []),
  options: parse(r.options, []),
  status: r.status as ApprovalState,
  optionId: r.option_id as string,
  decidedBy: r.decided_by as string,
  decidedAt: r.decided_at as string,
  reason: r.reason as string,
  createdAt: r.created_at as string,
  expiresAt: r.expires_at as string,
});

export function createApprovalStore(q: Query): ApprovalStore {
  return {
    async insertApproval(a) {
      await q(
        `INSERT INTO approvals (id, kind, domain_id, mission_id, task_id, agent_id, node_id, tool, title,
           arguments, paths, options, status, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          a.id,
          a.kind,
          a.domainId,
          a.missionId,
          a.taskId,
          a.agentId,
          a.nodeId,
          a.tool,
          a.title,
          JSON.stringify(a.arguments),
          JSON.stringify(a.paths),
          JSON.stringify(a.options),
          a.status,
          a.createdAt,
          a.expiresAt,
        ],
      );
    },
    async getApproval(id) {
      const [r] = await q("SELECT * FROM approvals WHERE id = ?", [id]);
      return r && toRow(r);
    },
    async listApprovals(query) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (query.status) where.push("status = ?"), args.push(query.status);
      if (query.taskId) where.push("task_id = ?"), args.push(query.taskId);
      if (query.afterId) where.push("id > ?"), args.push(query.afterId);
      if (query.domainIds) {
        if (!query.domainIds.length) return [];
        where.push(`domain_id IN (${query.domainIds.map(() => "?").join(", ")})`);
        args.push(...query.domainIds);
      }
      args.push(query.limit ?? 1000);
      const rows = await q(
        `SELECT * FROM approvals${where.length ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY id LIMIT ?`,
        args,
      );
      return rows.map(toRow);
    },
    async decideApproval(id, d) {
      const [r] = await q(
        "UPDATE approvals SET status = ?, option_id = ?, decided_by = ?, " +
          "decided_at = ?, reason = ? WHERE id = ? AND status = 'pending' RETURNING *",
        [d.status, d.optionId, d.decidedBy, d.decidedAt, d.reason, id],
      );
      return r && toRow(r);
    },
  };
}
