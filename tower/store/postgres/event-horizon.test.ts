import { describe, expect, it } from "vitest";
import { EventHorizon, endedBefore, fullXid, parseSnapshot, withRunning } from "./event-horizon.js";

/** A snapshot whose second look found no writer above its xmax (withRunning). */
const snap = (text: string) => {
  const s = parseSnapshot(text);
  return { ...s, unlistedTo: s.xmax };
};
/** A snapshot whose second look found writers running unlisted, up to xid `to` (exclusive). */
const unlisted = (text: string, to: bigint) => ({ ...parseSnapshot(text), unlistedTo: to });

describe("parseSnapshot / endedBefore", () => {
  it("reads xmin:xmax:xip and says which transactions had ended", () => {
    const s = parseSnapshot("100:105:101,103");
    expect(s).toEqual({ xmin: 100n, xmax: 105n, xip: [101n, 103n] });
    expect(endedBefore(99n, s)).toBe(true);
    expect(endedBefore(101n, s)).toBe(false); // running
    expect(endedBefore(102n, s)).toBe(true);
    expect(endedBefore(105n, s)).toBe(false); // not started yet when it was taken
    expect(snap("7:7:").xip).toEqual([]);
  });

  it("refuses text that is not a snapshot, naming it", () => {
    expect(() => parseSnapshot("1:2")).toThrow(/not a PostgreSQL snapshot: "1:2"/);
    expect(() => parseSnapshot("a:b:c")).toThrow(/not a PostgreSQL snapshot/);
  });
});

describe("EventHorizon", () => {
  it("moves over contiguous ids", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 2, 3], snap("10:12:11"))).toBe(3);
    expect(h.advance(3, [4], snap("10:12:11"))).toBe(4);
  });

  it("stops below an id that may still be written, and goes on once its writer has ended", () => {
    const h = new EventHorizon();
    // 2 is missing while xid 11 runs: 3 and 4 wait
    expect(h.advance(0, [1, 3, 4], snap("10:13:11,12"))).toBe(1);
    // still running in a later snapshot: still waiting
    expect(h.advance(1, [3, 4, 5], snap("11:14:11,13"))).toBe(1);
    // 11 committed it: contiguous again
    expect(h.advance(1, [2, 3, 4, 5], snap("12:14:12,13"))).toBe(5);
  });

  it("goes past an id whose writer rolled back, once every writer running at the gap has ended", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 3], snap("10:13:11,12"))).toBe(1);
    // new writers keep the running list busy, but 11 and 12 ended: 2 is gone for good
    expect(h.advance(1, [3, 4, 6], snap("13:16:13,15"))).toBe(4);
    expect(h.oldestGap()).toEqual({ since: expect.any(Number), waitingFor: [13n, 15n] });
    expect(h.advance(4, [6], snap("13:16:13,15"))).toBe(4);
    // 5 was rolled back too; its possible writers 13 and 15 have ended
    expect(h.advance(4, [6, 7], snap("16:17:"))).toBe(7);
    expect(h.oldestGap()).toBeUndefined();
  });

  it("crosses a gap at once when nothing is running", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 5, 6], snap("20:20:"))).toBe(6);
  });

  it("never moves back, and refuses a read that starts above it", () => {
    const h = new EventHorizon();
    h.advance(0, [1, 2], snap("5:5:"));
    expect(h.advance(0, [1], snap("5:5:"))).toBe(2);
    expect(() => h.advance(3, [4], snap("5:5:"))).toThrow(/at or below 2/);
  });

  it("settles gaps one after another as their writers end", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 3], snap("10:12:10,11"))).toBe(1); // 2 waits for 10, 11
    expect(h.advance(1, [3, 5], snap("10:14:10,13"))).toBe(1); // 2 and 4 wait for 10, 13
    // 10 committed 2, 13 still runs: 4 may still come
    expect(h.advance(1, [2, 3, 5], snap("13:15:13,14"))).toBe(3);
    // 13 rolled back: 4 is gone, 5 follows
    expect(h.advance(3, [5, 6], snap("14:16:14"))).toBe(6);
  });

  it("starts at the newest id when nothing runs, or once everything running then has ended", () => {
    const quiet = new EventHorizon();
    quiet.start(500, snap("90:90:"));
    expect(quiet.final).toBe(500);
    const busy = new EventHorizon();
    busy.start(500, snap("90:95:91,93"), snap("92:96:93,95")); // 93 still runs
    expect(busy.final).toBe(0); // found by reading instead
    expect(busy.started).toBe(true);
    const settled = new EventHorizon();
    settled.start(500, snap("90:95:91,93"), snap("95:97:96"));
    expect(settled.final).toBe(500);
  });
});

describe("writers a snapshot does not list", () => {
  // A snapshot's xmax is the newest completed xid + 1: a writer that took xid 9 after xid 8 (the
  // last to complete) runs unlisted in "9:9:". Found by a stress run: id 3102 (xid 34544) was
  // drawn before 3103 (xid 34543) committed, and a reader's "34544:34544:" crossed it.
  it("does not cross a gap while a writer above xmax may run, and does once it has ended", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 3], unlisted("9:9:", 10n))).toBe(1);
    expect(h.oldestGap()).toEqual({ since: expect.any(Number), waitingFor: [], andFrom: [9n, 10n] });
    expect(h.advance(1, [3, 4], snap("9:11:9"))).toBe(1); // 9 still runs
    expect(h.advance(1, [3, 4], snap("12:12:"))).toBe(4); // 9 ended: 2 is gone (or would be visible)
  });

  it("counts a writer that is listed later but was running then", () => {
    const h = new EventHorizon();
    expect(h.advance(0, [1, 3], unlisted("9:9:", 12n))).toBe(1);
    expect(h.advance(1, [3], snap("9:12:11"))).toBe(1); // 11 is in the unlisted range and still runs
    expect(h.advance(1, [3], snap("11:13:11"))).toBe(1);
    expect(h.advance(1, [3], snap("13:13:"))).toBe(3);
  });

  it("refuses to judge a gap without the second look", () => {
    const h = new EventHorizon();
    expect(() => h.advance(0, [1, 3], parseSnapshot("9:9:"))).toThrow(/withRunning/);
    expect(h.advance(0, [1, 2], parseSnapshot("9:9:"))).toBe(2); // no gap: nothing to judge
    expect(() => new EventHorizon().start(5, parseSnapshot("9:9:"))).toThrow(/withRunning/);
  });

  it("bounds the unlisted writers by the later snapshot and the backends' xids", () => {
    const s = parseSnapshot("100:105:101");
    expect(withRunning(s, parseSnapshot("100:108:101"), []).unlistedTo).toBe(108n);
    expect(withRunning(s, parseSnapshot("100:106:101"), ["101", "111"]).unlistedTo).toBe(112n);
    expect(withRunning(s, parseSnapshot("100:105:101"), []).unlistedTo).toBe(105n); // nothing above xmax
    const h = new EventHorizon();
    h.start(50, withRunning(s, parseSnapshot("100:105:101"), []), parseSnapshot("102:105:"));
    expect(h.final).toBe(50);
  });

  it("reads 32-bit backend xids into the snapshot's epoch, across a wraparound", () => {
    const epoch = 1n << 32n;
    expect(fullXid(7n, 3n * epoch + 5n)).toBe(3n * epoch + 7n);
    expect(fullXid(0xfffffff0n, 3n * epoch + 5n)).toBe(2n * epoch + 0xfffffff0n); // just before the wrap
    expect(fullXid(3n, 3n * epoch + 0xfffffff0n)).toBe(4n * epoch + 3n); // just after it
  });
});
