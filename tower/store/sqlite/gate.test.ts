// The SQLite store's gate: one transaction at a time, handed over in arrival order; wait() returns
// only when no one holds it.
import { describe, expect, it } from "vitest";
import { Gate } from "./sqlite-support.js";

describe("Gate", () => {
  it("runs holders one at a time in arrival order, and wait() resolves only when it is free", async () => {
    const gate = new Gate();
    const log: string[] = [];
    let inside = 0;
    const holder = (name: string) =>
      gate.hold(async () => {
        inside++;
        expect(inside).toBe(1);
        log.push(`${name} in`);
        await new Promise((r) => setImmediate(r));
        log.push(`${name} out`);
        inside--;
      });
    const all = [holder("a"), holder("b"), holder("c")];
    const waited = gate.wait().then(() => log.push(`waiter saw busy=${gate.busy}`));
    await Promise.all([...all, waited]);
    expect(log.slice(0, 6)).toEqual(["a in", "a out", "b in", "b out", "c in", "c out"]);
    expect(log).toContain("waiter saw busy=false");
    expect(gate.busy).toBe(false);
  });

  it("hands over to 200 queued holders in arrival order", async () => {
    // how many wake-ups a release costs is measured by bench/store-burst.ts (flat per transaction
    // as the queue grows), not here
    const gate = new Gate();
    let release!: () => void;
    const first = gate.hold(() => new Promise<void>((r) => (release = r)));
    const order: number[] = [];
    const queued = Array.from({ length: 200 }, (_, i) => gate.hold(async () => void order.push(i)));
    expect(gate.busy).toBe(true);
    release();
    await first;
    await Promise.all(queued);
    expect(order).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(gate.busy).toBe(false);
  });

  it("a holder that throws still hands the gate on", async () => {
    const gate = new Gate();
    const failing = gate.hold(async () => {
      throw new Error("boom");
    });
    const next = gate.hold(async () => "next ran");
    await expect(failing).rejects.toThrow("boom");
    await expect(next).resolves.toBe("next ran");
    expect(gate.busy).toBe(false);
  });
});
