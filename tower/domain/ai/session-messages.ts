// What an AI session looks like outside the service: its contract messages, its events (with
// the text and JSON bounded), its title, and the planner deadline.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { EpError } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/ai_pb.js";
import type { AiActionRow, AiSessionRow, AiTurnRow } from "../../store/ai-store.js";
import type { NewEvent } from "../../store/store.js";
import type { Deps } from "../deps.js";
import { timestampOf } from "../../../common/vocab.js";
import { valueOf } from "../convert.js";
import { ToolKindSchema, type ToolKind } from "../../../gen/ep/tower/v1/resources_pb.js";

/** Event payloads carry at most this much of a turn's text or an action's result. */
const EVENT_TEXT = 4_000;
const EVENT_JSON = 64 * 1024;

export const NEW_SESSION = "New session";
/** Titles that say nothing: the session takes its first question's words instead. */
export const UNTITLED = new Set([NEW_SESSION, "ep ai chat", ""]);

/** A session title from a first question: its first line, whitespace folded, cut at a word near 60 characters. */
export function titleFromTurn(content: string): string {
  const line =
    content
      .split("\n")
      .find((l) => l.trim())
      ?.replace(/\s+/g, " ")
      .trim() ?? NEW_SESSION;
  if (line.length <= 60) return line;
  const cut = line.slice(0, 60);
  const space = cut.lastIndexOf(" ");
  return `${(space > 30 ? cut.slice(0, space) : cut).replace(/[\s,.;:!?-]+$/, "")}…`;
}

// ---- contract messages

export function sessionMsg(s: AiSessionRow): pb.Session {
  return create(pb.SessionSchema, {
    id: s.id,
    title: s.title,
    owner: s.owner,
    status: valueOf<pb.SessionStatus>(pb.SessionStatusSchema, s.status),
    createdAt: timestampOf(s.createdAt),
    updatedAt: timestampOf(s.updatedAt),
  });
}

/** Struct fields hold objects; anything else is wrapped as {value}. */
export function asStruct(v: unknown): JsonObject | undefined {
  if (v === undefined || v === null) return undefined;
  return (typeof v === "object" && !Array.isArray(v) ? v : { value: v }) as JsonObject;
}

export function turnMsg(t: AiTurnRow): pb.Turn {
  return create(pb.TurnSchema, {
    id: t.id,
    sessionId: t.sessionId,
    role: valueOf<pb.TurnRole>(pb.TurnRoleSchema, t.role),
    content: t.content,
    toolCalls: t.toolCalls.map((c) =>
      create(pb.ToolCallSchema, {
        tool: String(c.tool ?? ""),
        arguments: asStruct(c.arguments),
        kind: valueOf<ToolKind>(ToolKindSchema, String(c.kind ?? "")),
        result: asStruct(c.result),
        error: String(c.error ?? ""),
        actionId: String(c.action_id ?? ""),
      }),
    ),
    viewSpecs: t.viewSpecs as JsonObject[],
    error: t.error,
    createdAt: timestampOf(t.createdAt),
  });
}

export function actionMsg(a: AiActionRow): pb.PendingAction {
  return create(pb.PendingActionSchema, {
    id: a.id,
    sessionId: a.sessionId,
    tool: a.tool,
    arguments: a.arguments as JsonObject,
    status: valueOf<pb.ActionStatus>(pb.ActionStatusSchema, a.status),
    result: asStruct(a.result),
    error: a.error,
    decidedBy: a.decidedBy,
    decidedAt: timestampOf(a.decidedAt),
    createdAt: timestampOf(a.createdAt),
    summary: a.summary,
  });
}

export function clip(text: string, max = EVENT_TEXT): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The value itself when its JSON is small enough for an event, else a marker. */
export function small(v: unknown): unknown {
  if (v === undefined) return undefined;
  const s = JSON.stringify(v);
  return s.length <= EVENT_JSON ? v : { truncated: true, bytes: s.length };
}

export function turnEvent(t: AiTurnRow): NewEvent {
  return {
    type: "matrix",
    name: "ai.turn",
    sessionId: t.sessionId,
    payload: {
      session_id: t.sessionId,
      turn_id: t.id,
      seq: t.seq,
      role: t.role,
      content: clip(t.content),
      ...(t.error ? { error: t.error } : {}),
      ...(t.toolCalls.length
        ? {
            tool_calls: t.toolCalls.map((c) => ({
              tool: c.tool,
              kind: c.kind,
              ...(c.action_id ? { action_id: c.action_id } : {}),
              ...(c.error ? { error: c.error } : {}),
            })),
          }
        : {}),
      ...(t.viewSpecs.length ? { view_specs: small(t.viewSpecs) } : {}),
    },
  };
}

export function actionEvent(a: AiActionRow, name: string, extra: Record<string, unknown> = {}): NewEvent {
  return {
    type: "approval",
    name,
    sessionId: a.sessionId,
    status: a.status,
    payload: {
      session_id: a.sessionId,
      action_id: a.id,
      tool: a.tool,
      summary: a.summary,
      status: a.status,
      ...(name === "action.pending" ? { arguments: small(a.arguments) } : {}),
      ...(a.decidedBy ? { decided_by: a.decidedBy } : {}),
      ...extra,
    },
  };
}

/** Rejects after ms (on the injected clock) unless the promise settles first. */
export function withDeadline<T>(deps: Deps, p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = deps.clock.setTimeout(
      () => reject(new EpError("unavailable", `${what} did not answer within ${Math.round(ms / 1000)}s`)),
      ms,
    );
    p.then(
      (v) => {
        deps.clock.clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        deps.clock.clearTimeout(timer);
        reject(err);
      },
    );
  });
}
