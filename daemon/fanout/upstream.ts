// The fan-out's one upstream subscription to the tower's /events/stream: resume from the last id,
// back off 1 s doubling to 30 s (the seed's exact schedule, no jitter: one fan-out per node),
// `matrix-down` once per outage and `matrix-up` on recovery, rate-limit notices handed to the feed.
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { backoffDelay } from "../../common/backoff.js";
import { iso, type Clock, type ClockTimer } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import { createSseStream } from "../../common/sse.js";
import type { LocalFeed } from "./feed.js";

export interface UpstreamDeps {
  streamUrl: URL;
  token: string;
  clock: Clock;
  log: Logger;
  backoff: { initialMs: number; maxMs: number };
  feed: LocalFeed;
}

export class Upstream {
  state: "connecting" | "connected" | "down" | "closed" = "connecting";
  lastId = 0;
  reconnects = 0;
  /** ISO times of the most recent reconnect attempts (newest last, at most 20) */
  readonly reconnectTimes: string[] = [];
  downSince: number | null = null;
  private down = false;
  private attempt = 0;
  private closed = false;
  private current: ClientRequest | undefined;
  private reconnectTimer: ClockTimer | undefined;

  constructor(private readonly deps: UpstreamDeps) {}

  connect(): void {
    if (this.closed) return;
    const { streamUrl, token } = this.deps;
    this.state = this.down ? "down" : "connecting";
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: "text/event-stream" };
    if (this.lastId > 0) headers["last-event-id"] = String(this.lastId);
    const req = (streamUrl.protocol === "https:" ? httpsRequest : httpRequest)(streamUrl, { headers });
    this.current = req;
    let settled = false;
    const retry = () => {
      if (settled) return;
      settled = true;
      if (this.current === req) this.current = undefined;
      this.scheduleReconnect();
    };
    req.on("response", (res: IncomingMessage) => this.answered(res, retry));
    req.on("error", (err: Error) => {
      if (this.closed) return;
      this.markDown(0, err.message);
      retry();
    });
    req.end();
  }

  close(): void {
    this.closed = true;
    this.state = "closed";
    if (this.reconnectTimer) this.deps.clock.clearTimeout(this.reconnectTimer);
    this.current?.destroy();
  }

  private answered(res: IncomingMessage, retry: () => void): void {
    res.setEncoding("utf8");
    if (res.statusCode !== 200) {
      let body = "";
      res.on("data", (d: string) => {
        if (body.length < 2048) body += d;
      });
      res.on("end", () => {
        this.markDown(res.statusCode ?? 0, body.slice(0, 500));
        this.resumeFromTowerHead(body);
        retry();
      });
      res.on("error", () => retry());
      return;
    }
    this.markUp();
    const parser = createSseStream({ message: (m) => this.message(m) });
    res.on("data", (d: string) => parser.push(d));
    res.on("end", retry);
    res.on("close", retry);
    res.on("error", retry);
  }

  /**
   * The tower refuses a resume point past its newest event (its log was replaced): resume from
   * where its log ends instead of asking again for ids that will never come.
   */
  private resumeFromTowerHead(body: string): void {
    try {
      const last = (JSON.parse(body) as { error?: { details?: { last_event_id?: unknown } } }).error?.details
        ?.last_event_id;
      if (typeof last === "number" && Number.isSafeInteger(last) && last < this.lastId) {
        this.deps.log.warn("the tower's event log ends before our resume point; resuming from its newest event", {
          ours: this.lastId,
          tower: last,
        });
        this.lastId = last;
      }
    } catch {
      // not EP's JSON error (a proxy's page): nothing to learn from it
    }
  }

  private markDown(status: number, detail: string): void {
    this.state = "down";
    if (this.down) return;
    this.down = true;
    this.downSince = this.deps.clock.now();
    this.deps.log.warn("upstream event stream is down", { status, detail });
    this.deps.feed.emitLocal("matrix-down", {
      type: "matrix",
      name: "matrix-down",
      status: "down",
      payload: { http_status: status, detail, upstream: this.deps.streamUrl.origin },
    });
  }

  private markUp(): void {
    this.state = "connected";
    this.attempt = 0;
    if (!this.down) return;
    this.down = false;
    const since = this.downSince;
    this.downSince = null;
    this.deps.log.info("upstream event stream is back", {});
    this.deps.feed.emitLocal("matrix-up", {
      type: "matrix",
      name: "matrix-up",
      status: "up",
      payload: { upstream: this.deps.streamUrl.origin, down_since: since === null ? "" : iso(since) },
    });
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const { clock, log } = this.deps;
    const delay = backoffDelay(this.attempt, { ...this.deps.backoff, jitter: 0 });
    this.attempt++;
    this.reconnectTimer = clock.setTimeout(() => {
      this.reconnectTimer = undefined;
      this.reconnects++;
      const at = iso(clock.now());
      this.reconnectTimes.push(at);
      if (this.reconnectTimes.length > 20) this.reconnectTimes.shift();
      log.info("reconnecting to the tower's event stream", { at, attempt: this.attempt, last_event_id: this.lastId });
      this.connect();
    }, delay);
  }

  private message(m: { id?: string; event?: string; data: string }): void {
    const { feed, log } = this.deps;
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
    if (!Number.isSafeInteger(id) || id <= this.lastId) return;
    this.lastId = id;
    // hold first, then store: the chunk that says "remaining 0" is itself held
    if (chunk.rate_limit) feed.applyRateLimit(chunk.rate_limit);
    feed.push(String(id), id, undefined, m.data);
  }
}
