// The seed's AI session paths as thin shims over the AiService domain functions, and the
// session's SSE stream (id:/data: lines, Last-Event-ID resume, keep-alive comments).
import type { FastifyInstance } from "fastify";
import { EpError, toEpError } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/ai_pb.js";
import type { AiService } from "../../domain/ai/index.js";
import { PAGE, registerRestRoutes, route } from "../rest/work-routes.js";

export function aiRoutes(ai: AiService): Parameters<typeof registerRestRoutes>[1] {
  return [
    route({
      method: "POST",
      url: "/ai/sessions",
      input: pb.CreateSessionRequestSchema,
      output: pb.CreateSessionResponseSchema,
      status: 201,
      call: ai.createSession,
    }),
    route({
      method: "GET",
      url: "/ai/sessions",
      input: pb.ListSessionsRequestSchema,
      output: pb.ListSessionsResponseSchema,
      query: PAGE,
      call: ai.listSessions,
    }),
    route({
      method: "GET",
      url: "/ai/sessions/:session_id",
      input: pb.GetSessionRequestSchema,
      output: pb.GetSessionResponseSchema,
      call: ai.getSession,
    }),
    route({
      method: "POST",
      url: "/ai/sessions/:session_id/turns",
      input: pb.SubmitTurnRequestSchema,
      output: pb.SubmitTurnResponseSchema,
      status: 201,
      call: ai.submitTurn,
    }),
    route({
      method: "POST",
      url: "/ai/sessions/:session_id/actions/:action_id/approve",
      input: pb.ApproveActionRequestSchema,
      output: pb.ApproveActionResponseSchema,
      call: ai.approveAction,
    }),
    route({
      method: "POST",
      url: "/ai/sessions/:session_id/actions/:action_id/reject",
      input: pb.RejectActionRequestSchema,
      output: pb.RejectActionResponseSchema,
      call: ai.rejectAction,
    }),
  ] as unknown as Parameters<typeof registerRestRoutes>[1];
}

/** One SSE chunk: the seed's stream-event fields in snake_case. */
/** An event of a session's stream, as the AI domain yields it. */
type SessionEvent = Awaited<ReturnType<AiService["openSessionEvents"]>> extends AsyncIterable<infer E> ? E : never;

export function sseChunk(e: SessionEvent): string {
  const data = {
    id: e.id,
    type: e.type,
    name: e.name,
    domain_id: e.domainId,
    mission_id: e.missionId,
    agent_id: e.agentId,
    task_id: e.taskId,
    session_id: e.sessionId,
    status: e.status,
    payload: e.payload,
    created_at: e.createdAt,
  };
  return `id: ${e.id}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Last-Event-ID header, else ?last_event_id=; 0 replays the whole session. */
export function resumeId(header: string | string[] | undefined, query: unknown): number {
  const raw =
    (Array.isArray(header) ? header[0] : header) ?? (query as Record<string, string> | undefined)?.last_event_id ?? "0";
  if (!/^\d{1,15}$/.test(raw.trim()))
    throw new EpError("invalid_argument", "Last-Event-ID must be a non-negative event id", { field: "last_event_id" });
  return Number(raw.trim());
}

export function registerAiRoutes(app: FastifyInstance, ai: AiService, opts: { keepAliveMs?: number } = {}): void {
  registerRestRoutes(app, aiRoutes(ai));

  app.get("/ai/sessions/:session_id/stream", async (req, reply) => {
    const { session_id: sessionId } = req.params as { session_id: string };
    const after = resumeId(req.headers["last-event-id"], req.query);
    const abort = new AbortController();
    // ownership is checked before the stream opens, so a wrong session is a plain 404
    const events = await ai.openSessionEvents(req.caller!, sessionId, after, abort.signal);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    res.write(": session stream\n\n");
    const keepAlive = setInterval(() => res.write(": keep-alive\n\n"), opts.keepAliveMs ?? 15_000);
    keepAlive.unref();
    const stop = () => abort.abort();
    req.raw.on("close", stop);
    res.on("close", stop);
    try {
      for await (const e of events) {
        if (!res.write(sseChunk(e))) await new Promise<void>((r) => res.once("drain", r).once("close", r));
      }
    } catch (err) {
      const ep = toEpError(err);
      if (!res.writableEnded) res.write(`event: error\ndata: ${JSON.stringify(ep.toJSON())}\n\n`);
    } finally {
      clearInterval(keepAlive);
      req.raw.off("close", stop);
      if (!res.writableEnded) res.end();
    }
  });
}
