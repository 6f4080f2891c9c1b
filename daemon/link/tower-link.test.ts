import { describe, expect, it } from "vitest";
import { createBackoff } from "./backoff.js";

describe("link backoff", () => {
  it("starts at 1 s, doubles to 30 s and resets after a success", () => {
    const b = createBackoff();
    expect([b.next(), b.next(), b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    b.reset();
    expect(b.next()).toBe(1000);
  });
});
