// Follows one of the tower's SSE feeds (`/events/stream`, `/ai/sessions/{id}/stream`) with the
// platform's client rules: on loss, retry after 1 s doubling to 30 s, and resume from the last
// event id seen (`?last_event_id=`, since a new EventSource cannot set Last-Event-ID itself),
// so every event arrives exactly once. The browser's own auto-retry is not used: it neither
// backs off nor reports the outage, and the console shows a banner while the feed is down.
import { backoffDelay as commonBackoffDelay } from "@common/backoff.js";

/** One SSE chunk, snake_case as the tower sends it. */
export interface StreamEvent {
  id: number | string;
  type: string;
  name?: string;
  domain_id?: string;
  mission_id?: string;
  agent_id?: string;
  task_id?: string;
  session_id?: string;
  status?: string;
  payload?: Record<string, unknown>;
  created_at?: string;
}

export type StreamStatus = "connecting" | "open" | "down";

export interface StreamState {
  status: StreamStatus;
  /** failures since the feed was last open */
  failures: number;
  /** when down: the delay before the next attempt */
  retryInMs?: number;
}

export const BACKOFF_START_MS = 1_000;
export const BACKOFF_MAX_MS = 30_000;

/**
 * The delay before reconnect attempt `failures` (1-based): 1 s, 2 s, 4 s, … capped at 30 s (common/backoff.ts, exact).
 */
export function backoffDelay(failures: number): number {
  return commonBackoffDelay(Math.max(0, failures - 1), {
    initialMs: BACKOFF_START_MS,
    maxMs: BACKOFF_MAX_MS,
    jitter: 0,
  });
}

interface EventSourceLike {
  onopen: ((this: EventSourceLike, ev: Event) => unknown) | null;
  onmessage: ((this: EventSourceLike, ev: MessageEvent) => unknown) | null;
  onerror: ((this: EventSourceLike, ev: Event) => unknown) | null;
  close(): void;
}

export interface LiveStreamOptions {
  url: string;
  onEvent(event: StreamEvent): void;
  onState?(state: StreamState): void;
  /** called when the feed opens again after an outage: callers refresh what they show */
  onRecover?(): void;
  lastEventId?: string;
  /** seams for tests */
  EventSource?: new (
    url: string,
    init?: EventSourceInit,
  ) => EventSourceLike;
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: unknown) => void;
}

export interface LiveStream {
  readonly state: StreamState;
  readonly lastEventId: string | undefined;
  close(): void;
}

export function withLastEventId(url: string, lastEventId: string | undefined): string {
  if (!lastEventId) return url;
  const sep = url.includes("?") ? "&" : "?";
  return `${url}${sep}last_event_id=${encodeURIComponent(lastEventId)}`;
}

export function createLiveStream(opts: LiveStreamOptions): LiveStream {
  const ES =
    opts.EventSource ??
    (globalThis.EventSource as unknown as new (
      url: string,
      init?: EventSourceInit,
    ) => EventSourceLike);
  const later = opts.setTimeout ?? ((fn: () => void, ms: number) => globalThis.setTimeout(fn, ms));
  const cancel = opts.clearTimeout ?? ((h: unknown) => globalThis.clearTimeout(h as number));
  let lastEventId = opts.lastEventId;
  let state: StreamState = { status: "connecting", failures: 0 };
  let source: EventSourceLike | undefined;
  let timer: unknown;
  let closed = false;

  const setState = (next: StreamState) => {
    state = next;
    opts.onState?.(next);
  };

  const connect = () => {
    timer = undefined;
    if (closed) return;
    const es = new ES(withLastEventId(opts.url, lastEventId), { withCredentials: true });
    source = es;
    es.onopen = () => {
      if (source !== es) return;
      const recovered = state.failures > 0;
      setState({ status: "open", failures: 0 });
      if (recovered) opts.onRecover?.();
    };
    es.onmessage = (msg) => {
      if (source !== es) return;
      if (msg.lastEventId) lastEventId = msg.lastEventId;
      let event: StreamEvent;
      try {
        event = JSON.parse(String(msg.data)) as StreamEvent;
      } catch {
        return; // not an event chunk; the feed only sends JSON on data: lines
      }
      if (event.id !== undefined && event.id !== null && event.id !== "") lastEventId = String(event.id);
      opts.onEvent(event);
    };
    es.onerror = () => {
      if (source !== es) return;
      es.close();
      source = undefined;
      if (closed) return;
      const failures = state.failures + 1;
      const retryInMs = backoffDelay(failures);
      setState({ status: "down", failures, retryInMs });
      timer = later(connect, retryInMs);
    };
  };

  connect();
  return {
    get state() {
      return state;
    },
    get lastEventId() {
      return lastEventId;
    },
    close() {
      closed = true;
      if (timer !== undefined) cancel(timer);
      source?.close();
      source = undefined;
    },
  };
}
