import { describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import { createFrameBatcher } from "./frame-batcher.js";

describe("progress frame batcher", () => {
  it(
    "while the tower does not take frames, what waits stays " +
      "bounded; the dropped ones are counted in one status frame",
    async () => {
      const clock = new FakeClock();
      const sent: ProgressFrame[][] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const b = createFrameBatcher({
        clock,
        windowMs: 50,
        maxQueuedChars: 10_000,
        send: async (frames) => {
          sent.push(frames);
          await gate;
        },
      });
      for (let i = 0; i < 100_000; i++) b.push({ kind: "text", text: `line ${i}` });
      clock.advance(50);
      const done = b.flush();
      release();
      await done;
      const frames = sent.flat();
      // the first batch went, the rest waited within the bound; the note says how many were dropped
      expect(frames.length).toBeLessThan(100);
      const note = frames.at(-1)!;
      expect(note.kind).toBe("status");
      expect(Number(note.data!.dropped) + frames.length - 1).toBe(100_000);
      expect(frames.slice(0, -1).map((f) => f.text)).toEqual(frames.slice(0, -1).map((_, i) => `line ${i}`));
    },
  );

  it("keeps order and cuts batches by count and by size", async () => {
    const clock = new FakeClock();
    const sent: ProgressFrame[][] = [];
    const b = createFrameBatcher({
      clock,
      windowMs: 50,
      maxBatch: 10,
      maxBatchChars: 3000,
      send: async (frames) => void sent.push(frames),
    });
    for (let i = 0; i < 25; i++) b.push({ kind: "text", text: String(i) });
    b.push({ kind: "text", text: "x".repeat(2000) });
    b.push({ kind: "text", text: "y".repeat(2000) });
    await b.flush();
    expect(sent.flat().map((f) => f.text.slice(0, 2))).toEqual([
      ...Array.from({ length: 25 }, (_, i) => String(i)),
      "xx",
      "yy",
    ]);
    expect(sent.every((batch) => batch.length <= 10 && batch.reduce((n, f) => n + f.text.length, 0) <= 3000)).toBe(
      true,
    );
  });
});
