// The feed's live delivery: a committed batch reaches an unfiltered subscriber as one shared
// buffer, a filtered or throttled one frame by frame, and every subscriber sees the same bytes
// it would have seen one event at a time.
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../test-support/fake-clock.js";
import { waitFor } from "../../../test-support/wait.js";
import { silentLogger } from "../../../common/log.js";
import { openStore } from "../../store/open-store.js";
import type { Store } from "../../store/store.js";
import type { Caller } from "../caller.js";
import { commit, createEventHub } from "../event-hub.js";
import { createEventStream, type EventStream, type StreamFrame, type StreamSink } from "./stream.js";

const admin: Caller = { subject: "tok_admin", role: "admin", via: "token" };

interface Recorder {
  sink: StreamSink;
  bytes: () => string;
  sends: number;
  batches: number;
}

function recorder(withBatch: boolean): Recorder {
  const parts: string[] = [];
  const r: Recorder = {
    sends: 0,
    batches: 0,
    bytes: () => parts.join(""),
    sink: {
      send(frame: StreamFrame, rateLimit) {
        r.sends++;
        parts.push(rateLimit ? `RL:${frame.id}\n` : frame.sse.toString());
      },
      buffered: () => 0,
      drained: async () => undefined,
      keepAlive: () => undefined,
      rateLimited: () => undefined,
      end: () => undefined,
    },
  };
  if (withBatch)
    r.sink.sendBatch = ({ frames, sse }) => {
      r.batches++;
      expect(sse.equals(Buffer.concat(frames.map((f) => f.sse)))).toBe(true);
      parts.push(sse.toString());
    };
  return r;
}

describe("event stream live delivery", () => {
  let store: Store;
  let stream: EventStream;
  afterEach(async () => {
    await stream?.close();
    await store?.close();
  });

  it("sends a batch as one shared buffer to unfiltered subscribers and frame by frame to the rest", async () => {
    store = await openStore(":memory:");
    const clock = new FakeClock();
    const hub = createEventHub();
    stream = createEventStream({ store, hub, clock, log: silentLogger }, { rateLimit: 1000 });
    await stream.ready;
    const plain = recorder(true);
    const noBatch = recorder(false);
    const filtered = recorder(true);
    stream.attach(await stream.admit(admin, { filter: {} }), plain.sink);
    stream.attach(await stream.admit(admin, { filter: {} }), noBatch.sink);
    stream.attach(await stream.admit(admin, { filter: { types: ["inbox"] } }), filtered.sink);
    await waitFor(() => stream.stats().live === 3); // the subscribers go live

    const deps = { store, hub, clock };
    await commit(deps, async (_tx, emit) => {
      for (let i = 0; i < 5; i++) emit({ type: i % 2 ? "inbox" : "matrix", name: "t.tick", payload: { i } });
    });
    await commit(deps, async (_tx, emit) => emit({ type: "inbox", name: "t.one", payload: {} }));

    // the unfiltered subscriber: one buffer for the batch of five, a frame for the single event
    expect(plain.batches).toBe(1);
    expect(plain.sends).toBe(1);
    expect(noBatch.batches).toBe(0);
    expect(noBatch.sends).toBe(6);
    expect(plain.bytes()).toBe(noBatch.bytes());
    expect([...plain.bytes().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([1, 2, 3, 4, 5, 6]);
    // the filtered one: only its events, one at a time
    expect(filtered.batches).toBe(0);
    expect([...filtered.bytes().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([2, 4, 6]);
  });

  it("a throttled subscriber gets each chunk with its rate_limit block, not the shared batch", async () => {
    store = await openStore(":memory:");
    const clock = new FakeClock();
    const hub = createEventHub();
    stream = createEventStream({ store, hub, clock, log: silentLogger }, { rateLimit: 2 });
    await stream.ready;
    const first = recorder(true);
    stream.attach(await stream.admit(admin, { filter: {} }), first.sink);
    const second = recorder(true);
    stream.attach(await stream.admit(admin, { filter: {} }), second.sink); // takes the last token: throttled
    await waitFor(() => stream.stats().live === 2);
    await commit({ store, hub, clock }, async (_tx, emit) => {
      for (let i = 0; i < 3; i++) emit({ type: "matrix", name: "t.tick", payload: { i } });
    });
    for (const r of [first, second]) {
      expect(r.batches).toBe(0);
      expect(r.bytes()).toBe("RL:1\nRL:2\nRL:3\n");
    }
  });

  it(
    "on PostgreSQL, holds events that committed before a lower " +
      "id until it arrives, or until the store settles the gap",
    async () => {
      const inner = await openStore(":memory:");
      // a PostgreSQL-like store: ids above `final` are still being written as far as readers go
      let final = 0;
      let answers = 0; // how many times the stream asked the store for events (and had its answer)
      store = new Proxy(inner, {
        get(target, key) {
          if (key === "dialect") return "postgres";
          if (key === "listEvents")
            return async (q: Parameters<Store["listEvents"]>[0]) =>
              (answers++, await target.listEvents(q)).filter((e) => e.id <= final);
          if (key === "lastEventId") return async () => Math.min(final, await target.lastEventId());
          const v = Reflect.get(target, key) as unknown;
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
      const clock = new FakeClock();
      const hub = createEventHub();
      stream = createEventStream({ store, hub, clock, log: silentLogger }, { rateLimit: 1000, gapWaitMs: 20 });
      await stream.ready;
      const sub = recorder(true);
      stream.attach(await stream.admit(admin, { filter: {} }), sub.sink);
      await waitFor(() => stream.stats().live === 1);
      const ids = () => [...sub.bytes().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      const rows = await inner.appendEvents(
        Array.from({ length: 5 }, (_, i) => ({ type: "matrix" as const, name: "t.tick", payload: { i } })),
        new Date(clock.now()).toISOString(),
      );

      // 2 and 3 commit before 1: they wait for it, then all three go out in order
      hub.publish([rows[1]]);
      hub.publish([rows[2]]);
      expect(ids()).toEqual([]);
      hub.publish([rows[0]]);
      expect(ids()).toEqual([1, 2, 3]);

      // 5 commits here, 4 is still being written (elsewhere): nothing, even after the store is asked
      final = 3;
      hub.publish([rows[4]]);
      const asked = answers;
      clock.advance(20);
      await waitFor(() => answers > asked);
      await new Promise((r) => setImmediate(r)); // the stream has handled the answer
      expect(ids()).toEqual([1, 2, 3]);
      // 4 committed on another replica (never published here): the next look at the store settles it
      final = 5;
      clock.advance(40);
      await waitFor(() => ids().length === 5);
      expect(ids()).toEqual([1, 2, 3, 4, 5]);
      expect(stream.head).toBe(5);
    },
  );
});
