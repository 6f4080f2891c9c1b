// The fan-out's local feed: the ring of the newest entries (upstream events and local ones such as
// matrix-down or mqtt), the local clients moving along it, and the pause while the upstream
// throttles this token (retransmission held until its reset time).
import type { Clock, ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";

export interface Entry {
  seq: number;
  /** the SSE id: the tower's event id, or `<last tower id>.<n>` for local events */
  id: string;
  upstreamId: number;
  json: string;
  sse: Buffer;
}

export interface LocalClient {
  cursor: number;
  send(e: Entry): void;
  buffered(): number;
  keepAlive(): void;
  end(reason?: { code: string; message: string }): void;
}

export interface FeedOptions {
  clock: Clock;
  log: Logger;
  ringSize: number;
  maxBuffered: number;
  resumeBufferMs: number;
  /** the last upstream event id (local entries are numbered after it) */
  upstreamId(): number;
}

export function createLocalFeed(o: FeedOptions) {
  const { clock, log, ringSize, maxBuffered, resumeBufferMs } = o;
  const ring: Entry[] = [];
  const idIndex = new Map<string, number>();
  const clients = new Set<LocalClient>();
  let seq = 0;
  let localN = 0;
  let pausedUntil = 0;
  let throttledSince: number | null = null;
  let throttleEpisodes = 0;
  let resumeTimer: ClockTimer | undefined;

  function pushEntry(id: string, upstreamId: number, event: string | undefined, json: string): void {
    const e: Entry = {
      seq: ++seq,
      id,
      upstreamId,
      json,
      sse: Buffer.from(`id: ${id}\n${event ? `event: ${event}\n` : ""}data: ${json}\n\n`),
    };
    ring.push(e);
    idIndex.set(id, e.seq);
    if (ring.length > ringSize) idIndex.delete(ring.shift()!.id);
    flush();
  }

  function emitLocal(event: string, body: Record<string, unknown>): void {
    const id = `${o.upstreamId()}.${++localN}`;
    pushEntry(id, o.upstreamId(), event, JSON.stringify({ id, ...body, created_at: iso(clock.now()) }));
  }

  function paused(): boolean {
    return pausedUntil > 0 && clock.now() < pausedUntil;
  }

  function deliver(c: LocalClient): void {
    if (!ring.length) return;
    const first = ring[0].seq;
    for (let i = Math.max(0, c.cursor - first + 1); i < ring.length; i++) {
      c.send(ring[i]);
      c.cursor = ring[i].seq;
    }
    if (c.buffered() > maxBuffered) {
      clients.delete(c);
      c.end({
        code: "slow_consumer",
        message: `the client fell more than ${maxBuffered} bytes behind; reconnect with Last-Event-ID to resume`,
      });
    }
  }

  function flush(): void {
    if (paused()) return;
    for (const c of clients) deliver(c);
  }

  /** Where a local client starts: after the entry it names, or live. */
  function cursorFor(lastId: string | undefined): number {
    if (lastId === undefined || lastId === "") return seq;
    const known = idIndex.get(lastId);
    if (known !== undefined) return known;
    if (/^\d+$/.test(lastId)) {
      const n = Number(lastId);
      const at = ring.findIndex((e) => e.upstreamId > n && !e.id.includes("."));
      return at < 0 ? seq : ring[at].seq - 1;
    }
    return seq;
  }

  function applyRateLimit(rl: unknown): void {
    const r = rl as { remaining?: unknown; reset_at?: unknown } | undefined;
    if (!r || r.remaining !== 0 || typeof r.reset_at !== "string") return;
    const resetMs = Date.parse(r.reset_at);
    if (!Number.isFinite(resetMs)) return;
    const until = resetMs + resumeBufferMs;
    if (until <= pausedUntil) return;
    if (!paused()) {
      throttledSince = clock.now();
      throttleEpisodes++;
      log.warn("upstream is throttling this token: holding retransmission", {
        reset_at: r.reset_at,
        resume_at: iso(until),
      });
    }
    pausedUntil = until;
    if (resumeTimer) clock.clearTimeout(resumeTimer);
    resumeTimer = clock.setTimeout(
      () => {
        resumeTimer = undefined;
        if (clock.now() < pausedUntil) return;
        pausedUntil = 0;
        throttledSince = null;
        log.info("rate-limit pause over: retransmitting", {});
        flush();
      },
      Math.max(0, until - clock.now()),
    );
  }

  return {
    clients,
    push: pushEntry,
    emitLocal,
    paused,
    deliver,
    flush,
    cursorFor,
    applyRateLimit,
    pauseStats: () => ({
      throttledSince: throttledSince === null ? null : iso(throttledSince),
      throttledUntil: paused() ? iso(pausedUntil) : null,
      throttleEpisodes,
    }),
    close() {
      if (resumeTimer) clock.clearTimeout(resumeTimer);
    },
  };
}
export type LocalFeed = ReturnType<typeof createLocalFeed>;
