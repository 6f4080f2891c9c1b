// GET /events/ws: the same feed as /events/stream over a WebSocket. Each text message is
// one chunk (JSON, with its id); the last message before a close the server chose is
// {"error": {code, message, last_event_id}}. Browsers cannot set headers on a WebSocket,
// so besides a Bearer header and the console's session cookie it accepts a one-time
// `?ticket=` from AuthService.CreateTicket (purpose "events" or "attach").
import { credentialOf as credentialFrom } from "../credential.js";
import type { FastifyInstance } from "fastify";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { Clock } from "../../../common/clock.js";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { Auth } from "../../domain/auth/index.js";
import type { Caller } from "../../domain/caller.js";
import {
  parseStreamParams,
  withRateLimit,
  type EventStream,
  type StreamEnd,
  type StreamSink,
} from "../../domain/events/index.js";

export const EVENTS_WS_PATH = "/events/ws";
const FLUSH_GRACE_MS = 30_000;
/**
 * A client cut for not reading (slow_consumer) is not taking its buffered bytes either: its socket
 * is reset this soon after the close frame is queued, so the buffers (the tower's and the
 * kernel's) are freed instead of waiting on a reader that does not come.
 */
export const SLOW_CONSUMER_GRACE_MS = 2_000;

/** Close codes: 1013 "try again later" for a client too far behind; 4000–4999 are the application's. */
export const WS_CLOSE = {
  slow_consumer: 1013,
  token_revoked: 4001,
  token_expired: 4001,
  unauthenticated: 4001,
  shutting_down: 1001,
  internal: 1011,
} as const;

function createWsSink(ws: WebSocket, socket: Duplex, clock: Clock): StreamSink {
  let ended = false;
  return {
    send(frame, rateLimit) {
      if (!ended) ws.send(rateLimit ? withRateLimit(frame.json, rateLimit) : frame.json);
    },
    buffered: () => ws.bufferedAmount,
    drained: () =>
      new Promise<void>((resolve) => {
        if (ended || ws.readyState !== ws.OPEN || !(socket as { writableNeedDrain?: boolean }).writableNeedDrain)
          return resolve();
        const done = () => {
          socket.off("drain", done);
          socket.off("close", done);
          resolve();
        };
        socket.on("drain", done);
        socket.on("close", done);
      }),
    keepAlive() {
      if (!ended && ws.readyState === ws.OPEN) ws.ping();
    },
    rateLimited(info) {
      if (!ended) ws.send(JSON.stringify({ rate_limit: info }));
    },
    end(why: StreamEnd | undefined) {
      if (ended) return;
      ended = true;
      if (ws.readyState !== ws.OPEN) return;
      if (why) ws.send(JSON.stringify({ error: why }));
      // the reason text says what happened (a close reason is at most 123 bytes)
      const said =
        why?.code === "slow_consumer" ? "the client fell too far behind; reconnect with Last-Event-ID" : why?.message;
      ws.close(why ? WS_CLOSE[why.code] : 1001, why ? `${why.code}: ${said}`.slice(0, 123) : "going away");
      const slow = why?.code === "slow_consumer";
      const timer = clock.setTimeout(
        () => (slow ? resetSocket(socket) : ws.terminate()),
        slow ? SLOW_CONSUMER_GRACE_MS : FLUSH_GRACE_MS,
      );
      ws.once("close", () => clock.clearTimeout(timer));
    },
  };
}

/** Drops a connection with a TCP reset: what is queued for it, in the process and in the kernel, is freed at once. */
export function resetSocket(socket: Duplex | null | undefined): void {
  if (!socket || socket.destroyed) return;
  const tcp = socket as Duplex & { resetAndDestroy?: () => void };
  if (tcp.resetAndDestroy) tcp.resetAndDestroy();
  else socket.destroy();
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  429: "Too Many Requests",
};

function refuse(socket: Duplex, err: EpError, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(err.toJSON());
  const status = err.httpStatus;
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}`,
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.once("finish", () => socket.destroy());
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
}

export interface EventsWsDeps {
  stream: EventStream;
  auth: Auth;
  clock: Clock;
  log: Logger;
}

/** Serves upgrades to /events/ws on the tower's HTTP server; other upgrade paths are left to their owners. */
export function attachEventsWebSocket(app: FastifyInstance, deps: EventsWsDeps): { close(): Promise<void> } {
  const { stream, auth, clock, log } = deps;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096, clientTracking: true });

  async function callerOf(req: IncomingMessage, ticket: string | undefined): Promise<Caller> {
    if (!req.headers.authorization && ticket) {
      return auth.redeemTicket(ticket, "events");
    }
    return auth.authenticate(credentialFrom(req.headers));
  }

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL): Promise<void> {
    const query: Record<string, string | string[]> = {};
    for (const [k, v] of url.searchParams) {
      const prev = query[k];
      query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    let admission;
    try {
      const ticket = typeof query.ticket === "string" ? query.ticket : undefined;
      const params = parseStreamParams(query, req.headers["last-event-id"], ["ticket"]);
      const caller = await callerOf(req, ticket);
      admission = await stream.admit(caller, params);
    } catch (err) {
      const ep = toEpError(err);
      refuse(socket, ep, ep.code === "rate_limited" ? { "retry-after": String(ep.details?.retry_after_s ?? 1) } : {});
      return;
    }
    const a = admission;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const sub = stream.attach(a, createWsSink(ws, socket, clock));
      ws.on("close", () => sub.close());
      ws.on("error", () => sub.close());
      // the feed is one way: anything the client sends is ignored
      ws.on("message", () => undefined);
    });
  }

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://tower");
    if (url.pathname !== EVENTS_WS_PATH) return;
    socket.on("error", () => undefined);
    upgrade(req, socket, head, url).catch((err: Error) => {
      log.warn("events websocket upgrade failed", { error: err.message });
      socket.destroy();
    });
  };
  app.server.on("upgrade", onUpgrade);

  // a plain GET (no Upgrade header) gets a clear answer instead of a hang
  app.get(EVENTS_WS_PATH, async (_req, reply) => {
    const err = new EpError(
      "invalid_argument",
      "GET /events/ws needs 'Connection: Upgrade' and 'Upgrade: websocket'; use /events/stream for SSE",
    );
    return reply.code(426).header("upgrade", "websocket").send(err.toJSON());
  });

  return {
    close: () =>
      new Promise<void>((resolve) => {
        app.server.off("upgrade", onUpgrade);
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => resolve());
      }),
  };
}
