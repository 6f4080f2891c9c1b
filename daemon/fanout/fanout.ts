// The daemon's local fan-out: one upstream subscription to the tower's /events/stream,
// replayed to any number of local consumers on loopback as SSE and WebSocket (GET /events),
// with the seed's client rules: resume from the last id, back off 1 s doubling to 30 s,
// `matrix-down` once per outage (and `matrix-up` on recovery), hold retransmission while
// the tower says `rate_limit.remaining` is 0 until `reset_at` plus a small buffer, and
// optionally MQTT messages re-emitted on the same stream.
import { systemClock, iso, type Clock, type ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import { createLogger, type Logger } from "../../common/log.js";
import { createMqttSource } from "./mqtt.js";
import { createLocalFeed } from "./feed.js";
import { createLocalServer } from "./local-server.js";
import { Upstream } from "./upstream.js";

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
  if (!m)
    throw new EpError(
      "config_invalid",
      `EP_FANOUT_LISTEN must be host:port on loopback (got ${JSON.stringify(listen)})`,
      { field: "EP_FANOUT_LISTEN" },
    );
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port > 65535)
    throw new EpError("config_invalid", `EP_FANOUT_LISTEN port must be at most 65535 (got ${port})`, {
      field: "EP_FANOUT_LISTEN",
    });
  if (!(host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host))) {
    throw new EpError(
      "config_invalid",
      `EP_FANOUT_LISTEN must be a loopback address (got ${host}); the fan-out has no authentication of its own`,
      { field: "EP_FANOUT_LISTEN" },
    );
  }
  return { host, port };
}

/** Reads the fan-out settings from the daemon's environment; undefined when EP_FANOUT_LISTEN is unset (off). */
export function fanoutEnv(
  env: NodeJS.ProcessEnv,
): { listen: string; mqtt?: { url: string; topics: string[] } } | undefined {
  if (!env.EP_FANOUT_LISTEN) return undefined;
  parseLoopbackListen(env.EP_FANOUT_LISTEN);
  const topics = (env.EP_MQTT_TOPICS ?? "")
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
  if (env.EP_MQTT_URL && !topics.length)
    throw new EpError("config_invalid", "EP_MQTT_TOPICS must list at least one topic when EP_MQTT_URL is set", {
      field: "EP_MQTT_TOPICS",
    });
  return { listen: env.EP_FANOUT_LISTEN, mqtt: env.EP_MQTT_URL ? { url: env.EP_MQTT_URL, topics } : undefined };
}

export function createFanout(opts: FanoutOptions): Fanout {
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger("fanout");
  const { host, port } = parseLoopbackListen(opts.listen);
  const streamUrl = streamUrlOf(opts.upstreamUrl);
  const keepAliveMs = opts.keepAliveMs ?? 15_000;
  let closed = false;
  let url = "";

  // the local ring, its clients and the rate-limit pause (feed.ts)
  const feed = createLocalFeed({
    clock,
    log,
    ringSize: opts.ringSize ?? 10_000,
    maxBuffered: opts.maxBufferedBytes ?? 1024 * 1024,
    resumeBufferMs: opts.resumeBufferMs ?? 250,
    upstreamId: () => upstream.lastId,
  });
  const upstream = new Upstream({
    streamUrl,
    token: opts.token,
    clock,
    log,
    backoff: opts.backoff ?? { initialMs: 1000, maxMs: 30_000 },
    feed,
  });
  // MQTT (mqtt.ts): broker messages join the local feed
  const mqtt = opts.mqtt ? createMqttSource(opts.mqtt, log, (body) => feed.emitLocal("mqtt", body)) : undefined;
  const server = createLocalServer(feed, () => api.stats());

  let keepAliveTimer: ClockTimer | undefined;
  function keepAliveTick(): void {
    for (const c of feed.clients) c.keepAlive();
    keepAliveTimer = clock.setTimeout(keepAliveTick, keepAliveMs);
  }

  const api: Fanout = {
    get url() {
      return url;
    },
    async start() {
      const bound = await server.listen(port, host);
      url = `http://${host.includes(":") ? `[${host}]` : host}:${bound}`;
      keepAliveTimer = clock.setTimeout(keepAliveTick, keepAliveMs);
      upstream.connect();
      await mqtt?.start();
      log.info("local event fan-out listening", {
        url: `${url}/events`,
        upstream: streamUrl.href,
        mqtt: opts.mqtt?.url ?? "",
      });
      return { url };
    },
    stats() {
      return {
        upstream: closed ? "closed" : upstream.state,
        upstreamUrl: streamUrl.href,
        lastEventId: upstream.lastId,
        reconnects: upstream.reconnects,
        reconnectTimes: [...upstream.reconnectTimes],
        ...feed.pauseStats(),
        downSince: upstream.downSince === null ? null : iso(upstream.downSince),
        clients: feed.clients.size,
        mqtt: mqtt?.stats() ?? null,
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      upstream.close();
      feed.close();
      if (keepAliveTimer) clock.clearTimeout(keepAliveTimer);
      for (const c of feed.clients) c.end();
      feed.clients.clear();
      await mqtt?.close();
      await server.close();
    },
  };
  return api;
}
