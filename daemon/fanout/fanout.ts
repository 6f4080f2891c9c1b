// The daemon's local fan-out: one upstream subscription to the tower's /events/stream,
// replayed to any number of local consumers on loopback as SSE and WebSocket (GET /events),
// with the seed's client rules: resume from the last id, back off 1 s doubling to 30 s,
// `matrix-down` once per outage (and `matrix-up` on recovery), hold retransmission while
// the tower says `rate_limit.remaining` is 0 until `reset_at` plus a small buffer, and
// optionally MQTT messages re-emitted on the same stream.
import { backoffDelay } from "../../common/backoff.js";
import { request as httpRequest, createServer, type IncomingMessage, type Server, type ServerResponse, type ClientRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { systemClock, iso, type Clock, type ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import { createLogger, type Logger } from "../../common/log.js";
import { createSseStream } from "../../common/sse.js";
import { createMqttSource } from "./mqtt.js";
import { createLocalFeed, type LocalClient } from "./feed.js";

export interface FanoutOptions {
  /** the tower's base URL (…/events/stream is appended) or the full stream URL */
  upstreamUrl: string;
  /** Bearer token for the tower (the node's JWT or a service token) */
  token: string;
  /** loopback host:port to serve GET /events on (port 0 picks one) */
  listen: string;
  mqtt?: { url: string; topics: readonly string[] };
  clock?: Clock;
  log?: Logger;
  /** events kept for local replay with Last-Event-ID (default 10,000) */
  ringSize?: number;
  /** a local client more than this many bytes behind is cut off (default 1 MiB) */
  maxBufferedBytes?: number;
  /** added to reset_at before retransmission resumes (default 250 ms) */
  resumeBufferMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  keepAliveMs?: number;
}

export interface FanoutStats {
  upstream: "connecting" | "connected" | "down" | "closed";
  upstreamUrl: string;
  lastEventId: number;
  reconnects: number;
  /** ISO times of the most recent reconnect attempts (newest last, at most 20) */
  reconnectTimes: string[];
  /** when the current rate-limit pause began, or null when not throttled */
  throttledSince: string | null;
  throttledUntil: string | null;
  throttleEpisodes: number;
  downSince: string | null;
  clients: number;
  mqtt: { url: string; connected: boolean; topics: readonly string[]; messages: number } | null;
}

export interface Fanout {
  /** Binds the local server and starts following the tower. */
  start(): Promise<{ url: string }>;
  readonly url: string;
  stats(): FanoutStats;
  close(): Promise<void>;
}


function streamUrlOf(base: string): URL {
  const u = new URL(base);
  if (u.pathname === "/" || u.pathname === "") u.pathname = "/events/stream";
  return u;
}

export function parseLoopbackListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen.trim());
  if (!m) throw new EpError("config_invalid", `EP_FANOUT_LISTEN must be host:port on loopback (got ${JSON.stringify(listen)})`, { field: "EP_FANOUT_LISTEN" });
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port > 65535) throw new EpError("config_invalid", `EP_FANOUT_LISTEN port must be at most 65535 (got ${port})`, { field: "EP_FANOUT_LISTEN" });
  if (!(host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host))) {
    throw new EpError("config_invalid", `EP_FANOUT_LISTEN must be a loopback address (got ${host}); the fan-out has no authentication of its own`, { field: "EP_FANOUT_LISTEN" });
  }
  return { host, port };
}

/** Reads the fan-out settings from the daemon's environment; undefined when EP_FANOUT_LISTEN is unset (off). */
export function fanoutEnv(env: NodeJS.ProcessEnv): { listen: string; mqtt?: { url: string; topics: string[] } } | undefined {
  if (!env.EP_FANOUT_LISTEN) return undefined;
  parseLoopbackListen(env.EP_FANOUT_LISTEN);
  const topics = (env.EP_MQTT_TOPICS ?? "").split(",").map((t) => t.trim()).filter(Boolean);
  if (env.EP_MQTT_URL && !topics.length) throw new EpError("config_invalid", "EP_MQTT_TOPICS must list at least one topic when EP_MQTT_URL is set", { field: "EP_MQTT_TOPICS" });
  return { listen: env.EP_FANOUT_LISTEN, mqtt: env.EP_MQTT_URL ? { url: env.EP_MQTT_URL, topics } : undefined };
}

export function createFanout(opts: FanoutOptions): Fanout {
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger("fanout");
  const { host, port } = parseLoopbackListen(opts.listen);
  const streamUrl = streamUrlOf(opts.upstreamUrl);
  const ringSize = opts.ringSize ?? 10_000;
  const maxBuffered = opts.maxBufferedBytes ?? 1024 * 1024;
  const resumeBufferMs = opts.resumeBufferMs ?? 250;
  const backoff = opts.backoff ?? { initialMs: 1000, maxMs: 30_000 };
  const keepAliveMs = opts.keepAliveMs ?? 15_000;

  let lastUpstreamId = 0;
  let closed = false;
  let url = "";

  let upstreamState: FanoutStats["upstream"] = "connecting";
  let down = false;
  let downSince: number | null = null;
  let attempt = 0;
  let reconnects = 0;
  const reconnectTimes: string[] = [];
  let currentReq: ClientRequest | undefined;
  let reconnectTimer: ClockTimer | undefined;


  // ---- the local ring, its clients and the rate-limit pause (feed.ts)
  const feed = createLocalFeed({ clock, log, ringSize, maxBuffered, resumeBufferMs, upstreamId: () => lastUpstreamId });
  const { clients } = feed;
  const emitLocal = feed.emitLocal;

  // ---- upstream ---------------------------------------------------------------------------

  function markDown(status: number, detail: string): void {
    upstreamState = "down";
    if (down) return;
    down = true;
    downSince = clock.now();
    log.warn("upstream event stream is down", { status, detail });
    emitLocal("matrix-down", { type: "matrix", name: "matrix-down", status: "down", payload: { http_status: status, detail, upstream: streamUrl.origin } });
  }

  function markUp(): void {
    upstreamState = "connected";
    attempt = 0;
    if (!down) return;
    down = false;
    const since = downSince;
    downSince = null;
    log.info("upstream event stream is back", {});
    emitLocal("matrix-up", { type: "matrix", name: "matrix-up", status: "up", payload: { upstream: streamUrl.origin, down_since: since === null ? "" : iso(since) } });
  }

  function scheduleReconnect(): void {
    if (closed || reconnectTimer) return;
    // the seed's exact schedule: one fan-out per node, nothing to spread
    const delay = backoffDelay(attempt, { ...backoff, jitter: 0 });
    attempt++;
    reconnectTimer = clock.setTimeout(() => {
      reconnectTimer = undefined;
      reconnects++;
      const at = iso(clock.now());
      reconnectTimes.push(at);
      if (reconnectTimes.length > 20) reconnectTimes.shift();
      log.info("reconnecting to the tower's event stream", { at, attempt, last_event_id: lastUpstreamId });
      connect();
    }, delay);
  }

  function onUpstreamMessage(m: { id?: string; event?: string; data: string }): void {
    if (m.event === "rate_limit") {
      try {
        feed.applyRateLimit((JSON.parse(m.data) as { rate_limit?: unknown }).rate_limit);
      } catch {
        // a malformed notice is ignored: the chunks carry the same block
      }
      return;
    }
    if (m.event === "error") {
      log.warn("the tower ended the event stream", { data: m.data.slice(0, 500) });
      return;
    }
    if (m.event && m.event !== "message") return;
    let chunk: { id?: unknown; rate_limit?: unknown };
    try {
      chunk = JSON.parse(m.data) as typeof chunk;
    } catch {
      log.warn("ignoring a malformed upstream chunk", { data: m.data.slice(0, 200) });
      return;
    }
    const id = Number(m.id ?? chunk.id);
    if (!Number.isSafeInteger(id) || id <= lastUpstreamId) return;
    lastUpstreamId = id;
    // hold first, then store: the chunk that says "remaining 0" is itself held
    if (chunk.rate_limit) feed.applyRateLimit(chunk.rate_limit);
    feed.push(String(id), id, undefined, m.data);
  }

  function connect(): void {
    if (closed) return;
    upstreamState = down ? "down" : "connecting";
    const headers: Record<string, string> = { authorization: `Bearer ${opts.token}`, accept: "text/event-stream" };
    if (lastUpstreamId > 0) headers["last-event-id"] = String(lastUpstreamId);
    const req = (streamUrl.protocol === "https:" ? httpsRequest : httpRequest)(streamUrl, { headers });
    currentReq = req;
    let settled = false;
    const retry = () => {
      if (settled) return;
      settled = true;
      if (currentReq === req) currentReq = undefined;
      scheduleReconnect();
    };
    req.on("response", (res: IncomingMessage) => {
      if (res.statusCode !== 200) {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          if (body.length < 2048) body += d;
        });
        res.on("end", () => {
          markDown(res.statusCode ?? 0, body.slice(0, 500));
          retry();
        });
        res.on("error", () => retry());
        return;
      }
      markUp();
      const parser = createSseStream({ message: onUpstreamMessage });
      res.setEncoding("utf8");
      res.on("data", (d: string) => parser.push(d));
      res.on("end", retry);
      res.on("close", retry);
      res.on("error", retry);
    });
    req.on("error", (err: Error) => {
      if (closed) return;
      markDown(0, err.message);
      retry();
    });
    req.end();
  }

  // ---- MQTT (mqtt.ts): broker messages join the local feed
  const mqtt = opts.mqtt ? createMqttSource(opts.mqtt, log, (body) => emitLocal("mqtt", body)) : undefined;

  // ---- local server ------------------------------------------------------------------------

  function sseClient(res: ServerResponse, cursor: number): LocalClient {
    let ended = false;
    return {
      cursor,
      send(e) {
        if (!ended) res.write(e.sse);
      },
      buffered: () => res.writableLength,
      keepAlive() {
        if (!ended) res.write(": keep-alive\n\n");
      },
      end(reason) {
        if (ended) return;
        ended = true;
        if (reason) res.write(`event: error\ndata: ${JSON.stringify({ error: reason })}\n\n`);
        res.end();
      },
    };
  }

  function wsClient(ws: WebSocket, cursor: number): LocalClient {
    let ended = false;
    return {
      cursor,
      send(e) {
        // tower chunks go as they came; local events carry their name (matrix-down, mqtt.message…)
        if (!ended) ws.send(e.json);
      },
      buffered: () => ws.bufferedAmount,
      keepAlive() {
        if (!ended && ws.readyState === ws.OPEN) ws.ping();
      },
      end(reason) {
        if (ended) return;
        ended = true;
        if (ws.readyState !== ws.OPEN) return;
        if (reason) ws.send(JSON.stringify({ error: reason }));
        ws.close(reason ? 4008 : 1001, reason?.code ?? "going away");
      },
    };
  }

  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://fanout");
    if (req.method === "GET" && u.pathname === "/stats") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(api.stats()));
      return;
    }
    if (req.method !== "GET" || u.pathname !== "/events") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify(new EpError("route_not_found", `no route ${req.method} ${u.pathname}; use GET /events`).toJSON()));
      return;
    }
    const lastId = (req.headers["last-event-id"] as string | undefined) || u.searchParams.get("last_event_id") || undefined;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "close" });
    res.write("retry: 1000\n: ep local fan-out\n\n");
    const c = sseClient(res, feed.cursorFor(lastId));
    clients.add(c);
    res.on("close", () => clients.delete(c));
    res.socket?.once("end", () => res.destroy());
    if (!feed.paused()) feed.deliver(c);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const u = new URL(req.url ?? "/", "http://fanout");
    if (u.pathname !== "/events") {
      socket.end("HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const lastId = (req.headers["last-event-id"] as string | undefined) || u.searchParams.get("last_event_id") || undefined;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = wsClient(ws, feed.cursorFor(lastId));
      clients.add(c);
      ws.on("close", () => clients.delete(c));
      ws.on("error", () => clients.delete(c));
      if (!feed.paused()) feed.deliver(c);
    });
  });

  let keepAliveTimer: ClockTimer | undefined;
  function keepAliveTick(): void {
    for (const c of clients) c.keepAlive();
    keepAliveTimer = clock.setTimeout(keepAliveTick, keepAliveMs);
  }

  const api: Fanout = {
    get url() {
      return url;
    },
    async start() {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve();
        });
      });
      const addr = server.address() as { port: number };
      url = `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`;
      keepAliveTimer = clock.setTimeout(keepAliveTick, keepAliveMs);
      connect();
      await mqtt?.start();
      log.info("local event fan-out listening", { url: `${url}/events`, upstream: streamUrl.href, mqtt: opts.mqtt?.url ?? "" });
      return { url };
    },
    stats() {
      return {
        upstream: closed ? "closed" : upstreamState,
        upstreamUrl: streamUrl.href,
        lastEventId: lastUpstreamId,
        reconnects,
        reconnectTimes: [...reconnectTimes],
        ...feed.pauseStats(),
        downSince: downSince === null ? null : iso(downSince),
        clients: clients.size,
        mqtt: mqtt?.stats() ?? null,
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      if (reconnectTimer) clock.clearTimeout(reconnectTimer);
      feed.close();
      if (keepAliveTimer) clock.clearTimeout(keepAliveTimer);
      currentReq?.destroy();
      for (const c of clients) c.end();
      clients.clear();
      for (const ws of wss.clients) ws.terminate();
      await mqtt?.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
  return api;
}
