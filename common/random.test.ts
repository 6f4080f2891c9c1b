import { describe, expect, it } from "vitest";
import { randomBytesPooled } from "./random.js";

describe("pooled random bytes", () => {
  it("hands out fresh, distinct buffers of the size asked, across pool refills", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const b = randomBytesPooled(18);
      expect(b.length).toBe(18);
      seen.add(b.toString("hex"));
    }
    expect(seen.size).toBe(2000);
    expect(randomBytesPooled(1000).length).toBe(1000); // larger than a pool share: straight from node:crypto
  });

  it("gives the caller its own copy (changing it changes nothing handed out later)", () => {
    const a = randomBytesPooled(16);
    a.fill(0);
    const b = randomBytesPooled(16);
    expect(b.equals(Buffer.alloc(16))).toBe(false);
  });
});
