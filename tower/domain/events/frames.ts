// An event as every subscriber gets it, serialized once: the chunk JSON, the SSE message, and
// the ring of the newest frames the feed serves from memory.
import type { EventRow } from "../../store/store.js";
import type { RateLimitInfo } from "./limiter.js";

/** One event, serialized once for every subscriber. */
export interface StreamFrame {
  readonly id: number;
  readonly row: EventRow;
  /** the chunk as JSON (snake_case fields, `id` included, no `rate_limit`) */
  readonly json: string;
  /** the SSE message: `id: N\ndata: <json>\n\n` */
  readonly sse: Buffer;
  /** `sse` framed as one HTTP/1.1 chunk; built by the SSE transport on first use, then shared */
  chunked?: Buffer;
}

/** Several events going out together to every subscriber that takes them all unchanged. */
export interface FrameBatch {
  readonly frames: readonly StreamFrame[];
  /** their SSE messages concatenated */
  readonly sse: Buffer;
  /** `sse` framed as one HTTP/1.1 chunk; built by the SSE transport on first use, then shared */
  chunked?: Buffer;
}

/** The chunk a client sees: the seed's fields in snake_case plus id, name, task/session and time. */
export function chunkOf(row: EventRow): Record<string, unknown> {
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    domain_id: row.domainId,
    mission_id: row.missionId,
    agent_id: row.agentId,
    task_id: row.taskId,
    session_id: row.sessionId,
    status: row.status,
    payload: row.payload,
    created_at: row.createdAt,
  };
}

/**
 * The frame of a committed event. Its JSON and SSE bytes are made on first use, once: the feed
 * keeps a frame of every event in its ring, and most events (a claim path writes several per
 * task) are never sent to anyone.
 */
export function frameOf(row: EventRow): StreamFrame {
  return new Frame(row);
}

class Frame implements StreamFrame {
  private jsonText?: string;
  private sseBytes?: Buffer;
  chunked?: Buffer;
  constructor(readonly row: EventRow) {}
  get id(): number {
    return this.row.id;
  }
  get json(): string {
    return (this.jsonText ??= JSON.stringify(chunkOf(this.row)));
  }
  get sse(): Buffer {
    return (this.sseBytes ??= Buffer.from(`id: ${this.row.id}\ndata: ${this.json}\n\n`));
  }
}

/** The chunk JSON with the throttling block added (only for throttled callers, so the shared JSON stays shared). */
export function withRateLimit(json: string, rateLimit: RateLimitInfo): string {
  return `${json.slice(0, -1)},"rate_limit":${JSON.stringify(rateLimit)}}`;
}

/** Fixed-capacity ring of frames in id order. */
export class FrameRing {
  private readonly buf: (StreamFrame | undefined)[];
  private start = 0;
  length = 0;
  constructor(readonly capacity: number) {
    this.buf = new Array<StreamFrame | undefined>(capacity);
  }
  at(i: number): StreamFrame {
    return this.buf[(this.start + i) % this.capacity]!;
  }
  /** Appends; returns the evicted frame when full. */
  push(f: StreamFrame): StreamFrame | undefined {
    if (this.length < this.capacity) {
      this.buf[(this.start + this.length++) % this.capacity] = f;
      return undefined;
    }
    const old = this.buf[this.start]!;
    this.buf[this.start] = f;
    this.start = (this.start + 1) % this.capacity;
    return old;
  }
  /** Index of the first frame with id > cursor (length when none). */
  indexAfter(cursor: number): number {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.at(mid).id <= cursor) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
