// Moving subscribers along: live delivery of new frames (one shared buffer for the usual
// unfiltered subscriber), and a new subscriber's replay — from the store, then from the ring, then
// joining the live set in the same tick it took the ring's last frame, so no event is missed or
// sent twice. A subscriber too far behind is cut off (slow_consumer).
import type { Logger } from "../../../common/log.js";
import type { Store } from "../../store/store.js";
import type { EventFeed } from "./feed.js";
import { frameOf, type FrameBatch, type StreamFrame } from "./frames.js";
import type { StreamRateLimiter } from "./limiter.js";
import { matches } from "./params.js";
import type { EventStreamOptions, StreamEnd, Sub } from "./types.js";

export interface DeliveryContext {
  readonly feed: EventFeed;
  readonly store: Store;
  readonly limiter: StreamRateLimiter;
  readonly opts: EventStreamOptions;
  /** subscribers past their replay */
  readonly live: Set<Sub>;
  readonly log: Logger;
  finish(sub: Sub, why: StreamEnd | undefined): void;
  /** counts a subscriber cut off for falling behind */
  cutOff(): void;
}

export function deliverLive(ctx: DeliveryContext, frames: readonly StreamFrame[]): void {
  const { live, limiter, opts } = ctx;
  const first = frames[0].id;
  const last = frames[frames.length - 1].id;
  // several events for the usual unfiltered subscriber: one buffer, one write per socket
  let batch: FrameBatch | undefined;
  for (const sub of live) {
    const q = sub.admission.query;
    const rl = limiter.throttleInfo(sub.admission.bucket);
    if (frames.length > 1 && !rl && sub.sink.sendBatch && sub.cursor < first && sub.matchesAll) {
      batch ??= { frames, sse: Buffer.concat(frames.map((f) => f.sse)) };
      sub.sink.sendBatch(batch);
      sub.cursor = last;
    } else {
      for (const f of frames) {
        if (f.id <= sub.cursor) continue;
        if (matches(q, f.row)) sub.sink.send(f, rl);
        sub.cursor = f.id;
      }
    }
    if (sub.sink.buffered() > opts.maxBufferedBytes) {
      ctx.cutOff();
      ctx.finish(sub, {
        code: "slow_consumer",
        message:
          `the client fell more than ${opts.maxBufferedBytes} ` +
          `bytes behind; reconnect with Last-Event-ID to resume`,
        last_event_id: sub.cursor,
      });
    }
  }
}

/** Replays from the store, then from the ring, then joins the live set. */
export async function replay(ctx: DeliveryContext, sub: Sub): Promise<void> {
  const { feed, limiter, opts, store, live } = ctx;
  const q = sub.admission.query;
  try {
    await feed.ready;
    while (!sub.closed) {
      if (sub.cursor >= feed.ringBase) {
        const ring = feed.ring;
        let i = ring.indexAfter(sub.cursor);
        const rl = limiter.throttleInfo(sub.admission.bucket);
        while (i < ring.length && sub.sink.buffered() <= opts.maxBufferedBytes) {
          const f = ring.at(i++);
          if (matches(q, f.row)) sub.sink.send(f, rl);
          sub.cursor = f.id;
        }
        if (i >= ring.length) {
          sub.live = true;
          live.add(sub);
          return;
        }
        await sub.sink.drained();
        continue;
      }
      const headAtQuery = feed.head;
      const rows = await store.listEvents({ ...q, afterId: sub.cursor, limit: opts.replayPage });
      if (sub.closed) return;
      const rl = limiter.throttleInfo(sub.admission.bucket);
      for (const row of rows) sub.sink.send(frameOf(row), rl);
      // a short page holds every matching event committed up to the query, so the
      // cursor may move past the non-matching ones too
      const last = rows.length ? rows[rows.length - 1].id : sub.cursor;
      sub.cursor = rows.length === opts.replayPage ? last : Math.max(last, headAtQuery, sub.cursor);
      if (sub.sink.buffered() > opts.maxBufferedBytes / 2) await sub.sink.drained();
    }
  } catch (err) {
    ctx.log.warn("event stream replay failed", { error: (err as Error).message });
    ctx.finish(sub, {
      code: "internal",
      message: "the tower could not read the event log; reconnect to resume",
      last_event_id: sub.cursor,
    });
  }
}
