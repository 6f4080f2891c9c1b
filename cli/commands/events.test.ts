import { describe, expect, it } from "vitest";
import { createBackoff, streamUrl } from "./events.js";

describe("events tail pieces", () => {
  it("backs off 1 s doubling to 30 s, and starts over after a good connection", () => {
    const b = createBackoff();
    expect(Array.from({ length: 7 }, () => b.next())).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    b.reset();
    expect(b.next()).toBe(1000);
  });

  it("puts the filters in the query", () => {
    expect(streamUrl("http://t", { types: ["approval", "matrix"], domain: "dom_1" })).toBe(
      "http://t/events/stream?type=approval%2Cmatrix&domain_id=dom_1",
    );
    expect(streamUrl("http://t", { types: [] })).toBe("http://t/events/stream");
  });
});
