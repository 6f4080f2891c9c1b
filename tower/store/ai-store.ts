// AI sessions, turns, pending actions, mission docs and task artifacts: the rows, the
// store methods, and one dialect-neutral implementation over a single query function,
// so SQLite and PostgreSQL run the same SQL (the common subset: RETURNING, ON CONFLICT).
import type { JsonObject } from "./json-types.js";

export interface AiSessionRow {
  id: string;
  /** caller.subject of the creator; nobody else sees the session */
  owner: string;
  title: string;
  /** active | closed */
  status: string;
  createdAt: string;
  updatedAt: string;
}

export interface AiTurnRow {
  id: string;
  sessionId: string;
  /** 1, 2, … within the session */
  seq: number;
  role: "user" | "assistant";
  content: string;
  toolCalls: JsonObject[];
  viewSpecs: JsonObject[];
  error: string;
  createdAt: string;
}

export type AiActionStatus = "pending" | "approved" | "rejected";

export interface AiActionRow {
  id: string;
  sessionId: string;
  turnId: string;
  tool: string;
  arguments: JsonObject;
  summary: string;
  status: AiActionStatus;
  /** the tool's result once executed (approved actions only) */
  result: unknown;
  error: string;
  decidedBy: string;
  decidedAt: string;
  /** set once, when the execution outcome is recorded */
  executedAt: string;
  createdAt: string;
}

export interface AiActionQuery {
  sessionId?: string;
  /** only actions of sessions this subject owns */
  owner?: string;
  status?: AiActionStatus;
  /** only approved actions with no outcome recorded yet, decided before this time (ISO 8601) */
  unexecutedBefore?: string;
  limit?: number;
}

export interface DocRow {
  id: string;
  domainId: string;
  missionId: string;
  name: string;
  content: string;
  contentType: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface ArtifactRow extends DocRow {
  taskId: string;
}

export interface AiStore {
  insertAiSession(row: AiSessionRow): Promise<void>;
  getAiSession(id: string): Promise<AiSessionRow | undefined>;
  /** The owner's sessions, newest first. */
  listAiSessions(owner: string): Promise<AiSessionRow[]>;
  updateAiSession(
    id: string,
    patch: Partial<Pick<AiSessionRow, "title" | "status" | "updatedAt">>,
  ): Promise<AiSessionRow | undefined>;

  insertAiTurn(row: AiTurnRow): Promise<void>;
  /** The session's turns in order (seq). */
  listAiTurns(sessionId: string): Promise<AiTurnRow[]>;

  insertAiAction(row: AiActionRow): Promise<void>;
  getAiAction(id: string): Promise<AiActionRow | undefined>;
  /** Oldest first. */
  listAiActions(query: AiActionQuery): Promise<AiActionRow[]>;
  /**
   * The one decision: moves a `pending` action to `approved` or `rejected` in a single
   * conditional UPDATE and returns it; undefined when it was not pending any more
   * (someone else decided first).
   */
  decideAiAction(
    id: string,
    decision: { status: "approved" | "rejected"; decidedBy: string; decidedAt: string },
  ): Promise<AiActionRow | undefined>;
  /** Records an approved action's outcome once; undefined when one was recorded already. */
  recordAiActionOutcome(
    id: string,
    outcome: { result: unknown; error: string; executedAt: string },
  ): Promise<AiActionRow | undefined>;

  /** Inserts or replaces (same mission and name: content replaced, version + 1, id kept). */
  putDoc(row: DocRow): Promise<DocRow>;
  getDoc(missionId: string, name: string): Promise<DocRow | undefined>;
  listDocs(missionId: string): Promise<DocRow[]>;
  /** Inserts or replaces (same task and name). */
  putArtifact(row: ArtifactRow): Promise<ArtifactRow>;
  listArtifacts(taskId: string): Promise<ArtifactRow[]>;
}

type Row = Record<string, unknown>;

/** Runs one statement with `?` placeholders and returns its rows (none for plain writes). */
export type AiQuery = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

const json = (v: unknown): string => JSON.stringify(v);
const parse = <T>(v: unknown, fallback: T): T => (v == null ? fallback : (JSON.parse(v as string) as T));

const toSession = (r: Row): AiSessionRow => ({
  id: r.id as string,
  owner: r.owner as string,
  title: r.title as string,
  status: r.status as string,
  createdAt: r.created_at as string,
  updatedAt: r.updated_at as string,
});

const toTurn = (r: Row): AiTurnRow => ({
  id: r.id as string,
  sessionId: r.session_id as string,
  seq: Number(r.seq),
  role: r.role as AiTurnRow["role"],
  content: r.content as string,
  toolCalls: parse(r.tool_calls, []),
  viewSpecs: parse(r.view_specs, []),
  error: r.error as string,
  createdAt: r.created_at as string,
});

const toAction = (r: Row): AiActionRow => ({
  id: r.id as string,
  sessionId: r.session_id as string,
  turnId: r.turn_id as string,
  tool: r.tool as string,
  arguments: parse(r.arguments, {}),
  summary: r.summary as string,
  status: r.status as AiActionStatus,
  result: parse(r.result, null),
  error: r.error as string,
  decidedBy: r.decided_by as string,
  decidedAt: r.decided_at as string,
  executedAt: r.executed_at as string,
  createdAt: r.created_at as string,
});

const toDoc = (r: Row): DocRow => ({
  id: r.id as string,
  domainId: r.domain_id as string,
  missionId: r.mission_id as string,
  name: r.name as string,
  content: r.content as string,
  contentType: r.content_type as string,
  version: Number(r.version),
  createdAt: r.created_at as string,
  updatedAt: r.updated_at as string,
});

const toArtifact = (r: Row): ArtifactRow => ({ ...toDoc(r), taskId: r.task_id as string });

/** The AiStore methods over one query function; a store class mixes them in with `aiStoreMethods`. */
export function createAiStore(q: AiQuery): AiStore {
  const one = async <T>(sql: string, args: readonly unknown[], map: (r: Row) => T): Promise<T | undefined> => {
    const rows = await q(sql, args);
    return rows.length ? map(rows[0]) : undefined;
  };
  return {
    async insertAiSession(s) {
      await q("INSERT INTO ai_sessions (id, owner, title, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)", [
        s.id,
        s.owner,
        s.title,
        s.status,
        s.createdAt,
        s.updatedAt,
      ]);
    },
    getAiSession: (id) => one("SELECT * FROM ai_sessions WHERE id = ?", [id], toSession),
    async listAiSessions(owner) {
      return (await q("SELECT * FROM ai_sessions WHERE owner = ? ORDER BY created_at DESC, id DESC", [owner])).map(
        toSession,
      );
    },
    async updateAiSession(id, patch) {
      const cols: Record<string, string> = { title: "title", status: "status", updatedAt: "updated_at" };
      const sets = Object.entries(patch).filter(([, v]) => v !== undefined);
      if (!sets.length) return one("SELECT * FROM ai_sessions WHERE id = ?", [id], toSession);
      return one(
        `UPDATE ai_sessions SET ${sets.map(([k]) => `${cols[k]} = ?`).join(", ")} WHERE id = ? RETURNING *`,
        [...sets.map(([, v]) => v), id],
        toSession,
      );
    },

    async insertAiTurn(t) {
      await q(
        "INSERT INTO ai_turns (id, session_id, seq, role, content, tool_calls, " +
          "view_specs, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [t.id, t.sessionId, t.seq, t.role, t.content, json(t.toolCalls), json(t.viewSpecs), t.error, t.createdAt],
      );
    },
    async listAiTurns(sessionId) {
      return (await q("SELECT * FROM ai_turns WHERE session_id = ? ORDER BY seq", [sessionId])).map(toTurn);
    },

    async insertAiAction(a) {
      await q(
        `INSERT INTO ai_actions (id, session_id, turn_id, tool, arguments, summary, status, result, error,
           decided_by, decided_at, executed_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          a.id,
          a.sessionId,
          a.turnId,
          a.tool,
          json(a.arguments),
          a.summary,
          a.status,
          a.result == null ? null : json(a.result),
          a.error,
          a.decidedBy,
          a.decidedAt,
          a.executedAt,
          a.createdAt,
        ],
      );
    },
    getAiAction: (id) => one("SELECT * FROM ai_actions WHERE id = ?", [id], toAction),
    async listAiActions(query) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (query.sessionId) {
        where.push("a.session_id = ?");
        args.push(query.sessionId);
      }
      if (query.owner !== undefined) {
        where.push("s.owner = ?");
        args.push(query.owner);
      }
      if (query.status) {
        where.push("a.status = ?");
        args.push(query.status);
      }
      if (query.unexecutedBefore !== undefined) {
        where.push("a.status = 'approved' AND a.executed_at = '' AND a.decided_at < ?");
        args.push(query.unexecutedBefore);
      }
      const limit = query.limit && query.limit > 0 ? query.limit : 1000;
      const sql = `SELECT a.* FROM ai_actions a JOIN ai_sessions s ON s.id = a.session_id
        ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY a.created_at, a.id LIMIT ?`;
      return (await q(sql, [...args, limit])).map(toAction);
    },
    decideAiAction: (id, d) =>
      one(
        "UPDATE ai_actions SET status = ?, decided_by = ?, decided_at " +
          "= ? WHERE id = ? AND status = 'pending' RETURNING *",
        [d.status, d.decidedBy, d.decidedAt, id],
        toAction,
      ),
    recordAiActionOutcome: (id, o) =>
      one(
        "UPDATE ai_actions SET result = ?, error = ?, executed_at = ? WHERE " +
          "id = ? AND status = 'approved' AND executed_at = '' RETURNING *",
        [o.result == null ? null : json(o.result), o.error, o.executedAt, id],
        toAction,
      ),
    ...createDocStore(q, one),
  };
}

type One = <T>(sql: string, args: readonly unknown[], map: (r: Row) => T) => Promise<T | undefined>;

/** Mission documents and task artifacts: versioned by name, replaced in place. */
function createDocStore(
  q: AiQuery,
  one: One,
): Pick<AiStore, "putDoc" | "getDoc" | "listDocs" | "putArtifact" | "listArtifacts"> {
  return {
    async putDoc(d) {
      const rows = await q(
        `INSERT INTO docs (id, domain_id, mission_id, name, content, content_type, version, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
         ON CONFLICT (mission_id, name) DO UPDATE SET content = excluded.content, content_type = excluded.content_type,
           version = docs.version + 1, updated_at = excluded.updated_at
         RETURNING *`,
        [d.id, d.domainId, d.missionId, d.name, d.content, d.contentType, d.createdAt, d.updatedAt],
      );
      return toDoc(rows[0]);
    },
    getDoc: (missionId, name) => one("SELECT * FROM docs WHERE mission_id = ? AND name = ?", [missionId, name], toDoc),
    async listDocs(missionId) {
      return (await q("SELECT * FROM docs WHERE mission_id = ? ORDER BY name", [missionId])).map(toDoc);
    },
    async putArtifact(a) {
      const rows = await q(
        `INSERT INTO artifacts (id, domain_id, mission_id, task_id, name, content, content_type, version,
           created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
         ON CONFLICT (task_id, name) DO UPDATE SET content = excluded.content, content_type = excluded.content_type,
           version = artifacts.version + 1, updated_at = excluded.updated_at
         RETURNING *`,
        [a.id, a.domainId, a.missionId, a.taskId, a.name, a.content, a.contentType, a.createdAt, a.updatedAt],
      );
      return toArtifact(rows[0]);
    },
    async listArtifacts(taskId) {
      return (await q("SELECT * FROM artifacts WHERE task_id = ? ORDER BY name", [taskId])).map(toArtifact);
    },
  };
}
