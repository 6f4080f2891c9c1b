import { describe, expect, it } from "vitest";
import { hasPrefix, newId } from "./ids.js";

const SHAPE = /^tsk_[0-9a-hjkmnp-tv-z]{22}$/;

describe("ids", () => {
  it("are <prefix>_ then 10 base32 digits of the time and 12 of randomness", () => {
    const id = newId("tsk", 1_764_000_000_000);
    expect(id).toMatch(SHAPE);
    // the time part is the millisecond in Crockford base32, most significant digit first
    const digits = [...id.slice(4, 14)].map((c) => "0123456789abcdefghjkmnpqrstvwxyz".indexOf(c));
    expect(digits.reduce((ms, d) => ms * 32 + d, 0)).toBe(1_764_000_000_000);
    expect(hasPrefix(id, "tsk")).toBe(true);
    expect(hasPrefix(id, "msn")).toBe(false);
  });

  it("sort in creation order within one millisecond, across milliseconds and when the clock steps back", () => {
    const at = 1_900_000_000_000;
    const ids = [
      ...Array.from({ length: 500 }, () => newId("tsk", at)),
      newId("tsk", at + 1),
      newId("tsk", at - 5_000), // a clock stepping back keeps the last time: still after
      ...Array.from({ length: 50 }, (_, i) => newId("tsk", at + 2 + i)),
    ];
    for (const id of ids) expect(id).toMatch(SHAPE);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("are random across milliseconds (no two runs of a process share one)", () => {
    const tails = new Set(Array.from({ length: 200 }, (_, i) => newId("tsk", 2_000_000_000_000 + i).slice(14)));
    expect(tails.size).toBe(200);
  });
});
