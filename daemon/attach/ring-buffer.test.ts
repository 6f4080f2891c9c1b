import { describe, expect, it } from "vitest";
import { createRingBuffer } from "./ring-buffer.js";

describe("ring buffer", () => {
  it("returns what a viewer missed since its offset", () => {
    const r = createRingBuffer(8);
    r.push(Buffer.from("abc"));
    r.push(Buffer.from("de"));
    expect(r.since(0)).toEqual({ data: Buffer.from("abcde"), offset: 0, lost: false });
    expect(r.since(3).data.toString()).toBe("de");
    expect(r.since(5).data.length).toBe(0);
  });

  it("keeps only the newest bytes across the wrap and says when some were lost", () => {
    const r = createRingBuffer(8);
    r.push(Buffer.from("0123456"));
    r.push(Buffer.from("789ab"));
    expect(r.end()).toBe(12);
    expect(r.start()).toBe(4);
    expect(r.since(0)).toEqual({ data: Buffer.from("456789ab"), offset: 4, lost: true });
    expect(r.since(10).data.toString()).toBe("ab");
  });

  it("takes a chunk larger than itself", () => {
    const r = createRingBuffer(4);
    r.push(Buffer.from("x"));
    r.push(Buffer.from("abcdefgh"));
    expect(r.since(0)).toEqual({ data: Buffer.from("efgh"), offset: 5, lost: true });
    expect(r.end()).toBe(9);
  });

  it("never answers beyond its end", () => {
    const r = createRingBuffer(4);
    r.push(Buffer.from("ab"));
    expect(r.since(99)).toEqual({ data: Buffer.alloc(0), offset: 2, lost: false });
  });
});
