// GET /events/stream: the event log as Server-Sent Events. The edge only parses the
// request, writes bytes and reports backpressure; the feed lives in domain/events/stream.ts.
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ServerResponse } from "node:http";
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import {
  parseStreamParams,
  withRateLimit,
  type EventStream,
  type StreamEnd,
  type StreamSink,
} from "../../domain/events/index.js";
import { resetSocket, SLOW_CONSUMER_GRACE_MS } from "../ws/events-ws.js";

/** How long a stream that ended with data still queued may take to flush before it is torn down. */
const FLUSH_GRACE_MS = 30_000;

/** A 429 with Retry-After and the catalog's JSON body; other errors go to the tower's error handler. */
export function sendRateLimited(reply: FastifyReply, err: EpError): FastifyReply {
  const retry = Number(err.details?.retry_after_s ?? 1);
  return reply.code(429).header("retry-after", String(retry)).type("application/json").send(err.toJSON());
}

const CRLF = Buffer.from("\r\n");

/** `data` as one HTTP/1.1 chunk: hex length, CRLF, the bytes, CRLF (what res.write would send). */
export function httpChunk(data: Buffer): Buffer {
  const head = `${data.length.toString(16)}\r\n`;
  const out = Buffer.allocUnsafe(head.length + data.length + 2);
  out.write(head, 0, "latin1");
  data.copy(out, head.length);
  CRLF.copy(out, head.length + data.length);
  return out;
}

/**
 * The SSE transport for one subscriber, writing straight to the socket's response. Events go
 * out pre-framed: the HTTP chunk of each event (or batch) is built once, on first use, and
 * written to every subscriber's socket as it is, which is what res.write would produce for
 * each of them (a chunk-size line, the data, CRLF, three buffers and a writev per socket).
 */
export function createSseSink(res: ServerResponse, clock: Clock): StreamSink {
  let corked = false;
  let ended = false;
  const uncork = () => {
    corked = false;
    res.uncork();
  };
  const cork = () => {
    // events produced in one tick leave in one write
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
  };
  const write = (chunk: Buffer | string) => {
    if (ended || res.destroyed) return;
    cork();
    res.write(chunk);
  };
  /**
   * Writes an event's bytes: as a ready chunk on the socket when the response is chunked and
   * has nothing of its own queued (so order is kept), else through res.write.
   */
  const writeEvent = (holder: { readonly sse: Buffer; chunked?: Buffer }) => {
    if (ended || res.destroyed) return;
    const sock = res.socket;
    if (sock && res.chunkedEncoding && res.headersSent && res.writableLength === sock.writableLength) {
      cork();
      sock.write((holder.chunked ??= httpChunk(holder.sse)));
    } else write(holder.sse);
  };
  const needDrain = () => res.writableNeedDrain || !!res.socket?.writableNeedDrain;
  return {
    send(frame, rateLimit) {
      if (rateLimit) write(`id: ${frame.id}\ndata: ${withRateLimit(frame.json, rateLimit)}\n\n`);
      else writeEvent(frame);
    },
    sendBatch(batch) {
      writeEvent(batch);
    },
    buffered: () => res.writableLength,
    drained: () =>
      new Promise<void>((resolve) => {
        if (ended || res.destroyed || !needDrain()) return resolve();
        // events written to the socket directly leave the response's own drain flag unset
        const sock = res.socket!;
        const done = () => {
          res.off("drain", done);
          res.off("close", done);
          sock.off("drain", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
        sock.on("drain", done);
      }),
    keepAlive() {
      write(": keep-alive\n\n");
    },
    rateLimited(info) {
      write(`event: rate_limit\ndata: ${JSON.stringify({ rate_limit: info })}\n\n`);
    },
    end(why: StreamEnd | undefined) {
      if (ended) return;
      if (why) write(`event: error\ndata: ${JSON.stringify({ error: why })}\n\n`);
      ended = true;
      if (res.destroyed) return;
      res.end();
      // a client that stopped reading never takes the rest: drop the socket after a grace, at once
      // (a reset: the buffered bytes are freed) when it was cut for not reading
      if (res.writableLength > 0 || why?.code === "slow_consumer") {
        const slow = why?.code === "slow_consumer";
        const socket = res.socket;
        let timer: ClockTimer | undefined = clock.setTimeout(
          () => (slow ? resetSocket(socket) : res.destroy()),
          slow ? SLOW_CONSUMER_GRACE_MS : FLUSH_GRACE_MS,
        );
        res.once("close", () => {
          if (timer) clock.clearTimeout(timer);
          timer = undefined;
        });
      }
    },
  };
}

export function registerEventStreamRoute(app: FastifyInstance, stream: EventStream, clock: Clock): void {
  app.get("/events/stream", async (req, reply) => {
    const params = parseStreamParams(req.query as Record<string, unknown>, req.headers["last-event-id"]);
    let admission;
    try {
      admission = await stream.admit(req.caller!, params);
    } catch (err) {
      if (err instanceof EpError && err.code === "rate_limited") return sendRateLimited(reply, err);
      throw err;
    }
    reply.hijack();
    const res = reply.raw;
    const headers: Record<string, string> = {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
      // a stream is never followed by another request on its connection: closing it when the
      // stream ends frees the socket at once (and lets a slow reader see the end after the reason)
      connection: "close",
      "x-ratelimit-limit": String(admission.rateLimit.limit),
      "x-ratelimit-remaining": String(admission.rateLimit.remaining),
    };
    res.writeHead(200, headers);
    res.setTimeout(0);
    res.socket?.setNoDelay(true);
    // reconnect after 1 s (the platform's first backoff step), then the client's own backoff
    res.write("retry: 1000\n: ep event stream\n\n");
    const sub = stream.attach(admission, createSseSink(res, clock));
    res.on("close", () => sub.close());
    // an SSE client never half-closes on purpose: its FIN means it is gone (the HTTP server
    // would otherwise keep the socket until the next write fails)
    res.socket?.once("end", () => res.destroy());
    if (res.destroyed) sub.close();
  });
}
