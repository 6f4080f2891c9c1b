// The console's feed follower: backoff 1 s doubling to 30 s, resume from the last id, recovery.
import { describe, expect, it } from "vitest";
import { backoffDelay, createLiveStream, withLastEventId, type StreamEvent, type StreamState } from "./live-stream.js";

/** Stands in for the browser's EventSource (a platform API, not our code). */
class FakeEventSource {
  static all: FakeEventSource[] = [];
  onopen: ((ev: Event) => unknown) | null = null;
  onmessage: ((ev: MessageEvent) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  closed = false;
  constructor(
    readonly url: string,
    readonly init?: EventSourceInit,
  ) {
    FakeEventSource.all.push(this);
  }
  close() {
    this.closed = true;
  }
  open() {
    this.onopen?.(new Event("open"));
  }
  send(data: string, lastEventId = "") {
    this.onmessage?.({ data, lastEventId } as MessageEvent);
  }
  fail() {
    this.onerror?.(new Event("error"));
  }
}

function setup() {
  FakeEventSource.all = [];
  const timers: { fn: () => void; ms: number; cancelled: boolean }[] = [];
  const events: StreamEvent[] = [];
  const states: StreamState[] = [];
  let recovered = 0;
  const live = createLiveStream({
    url: "/events/stream",
    onEvent: (e) => events.push(e),
    onState: (s) => states.push(s),
    onRecover: () => recovered++,
    EventSource: FakeEventSource as never,
    setTimeout: (fn, ms) => {
      const t = { fn, ms, cancelled: false };
      timers.push(t);
      return t;
    },
    clearTimeout: (h) => ((h as { cancelled: boolean }).cancelled = true),
  });
  const fire = () => {
    const t = timers.shift()!;
    if (!t.cancelled) t.fn();
    return t.ms;
  };
  return {
    live,
    timers,
    events,
    states,
    fire,
    recovered: () => recovered,
    current: () => FakeEventSource.all[FakeEventSource.all.length - 1],
  };
}

describe("live stream", () => {
  it("backs off 1 s, 2 s, 4 s … up to 30 s", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map(backoffDelay)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it("sends the cookie and resumes after the last event id it saw", () => {
    const s = setup();
    expect(s.current().init).toEqual({ withCredentials: true });
    expect(s.current().url).toBe("/events/stream");
    s.current().open();
    s.current().send(JSON.stringify({ id: 41, type: "matrix", name: "task.created" }), "41");
    s.current().send(JSON.stringify({ id: 42, type: "approval", status: "pending" }), "42");
    expect(s.events.map((e) => e.id)).toEqual([41, 42]);
    s.current().fail();
    expect(s.states.at(-1)).toEqual({ status: "down", failures: 1, retryInMs: 1000 });
    expect(s.fire()).toBe(1000);
    expect(s.current().url).toBe("/events/stream?last_event_id=42");
    expect(s.live.lastEventId).toBe("42");
  });

  it("reports the outage until the feed opens again, doubling the delay, then resets", () => {
    const s = setup();
    s.current().open();
    s.current().fail();
    expect(s.fire()).toBe(1000);
    s.current().fail();
    expect(s.fire()).toBe(2000);
    s.current().fail();
    expect(s.states.at(-1)?.status).toBe("down");
    expect(s.fire()).toBe(4000);
    expect(s.recovered()).toBe(0);
    s.current().open();
    expect(s.states.at(-1)).toEqual({ status: "open", failures: 0 });
    expect(s.recovered()).toBe(1);
    s.current().fail();
    expect(s.fire()).toBe(1000);
  });

  it("ignores chunks that are not JSON and stops for good on close", () => {
    const s = setup();
    s.current().open();
    s.current().send("not json");
    expect(s.events).toEqual([]);
    s.current().fail();
    s.live.close();
    const before = FakeEventSource.all.length;
    s.fire();
    expect(FakeEventSource.all.length).toBe(before);
  });

  it("appends last_event_id to a URL that has a query already", () => {
    expect(withLastEventId("/events/stream?types=matrix", "7")).toBe("/events/stream?types=matrix&last_event_id=7");
    expect(withLastEventId("/x", undefined)).toBe("/x");
  });
});
