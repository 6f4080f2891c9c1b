import { describe, expect, it } from "vitest";
import { createSseParser, createSseStream } from "./sse.js";

describe("the SSE parser", () => {
  it("parses messages split anywhere, with CR, LF or CRLF line ends, dropping comments", () => {
    const p = createSseParser();
    expect(p.push(": keep-alive\n\nid: 7\nda")).toEqual([]);
    expect(p.push('ta: {"type":"matrix"}\n\nid: 8\r\nevent: matrix-down\r\ndata: a\r\ndata: b\r\n\r\n')).toEqual([
      { id: "7", data: '{"type":"matrix"}' },
      { id: "8", event: "matrix-down", data: "a\nb" },
    ]);
    // a lone CR ends a line too (the old CLI parser waited forever here)
    expect(p.push("id: 9\rdata: x\r\rdata: w")).toEqual([{ id: "9", data: "x" }]);
    expect(p.push("\n\n")).toEqual([{ data: "w" }]);
    // a CR at the end of a chunk may be half of a CRLF
    expect(p.push("id: 10\r")).toEqual([]);
    expect(p.push("\ndata: y\r\n\r\n")).toEqual([{ id: "10", data: "y" }]);
  });

  it("reports comments and retry", () => {
    const seen: string[] = [];
    const s = createSseStream({
      message: (m) => seen.push(`m:${m.data}`),
      comment: (c) => seen.push(`c:${c}`),
      retry: (ms) => seen.push(`r:${ms}`),
    });
    s.push(":  hello\nretry: 1500\n\ndata: z\n\n");
    expect(seen).toEqual(["c:hello", "r:1500", "m:z"]);
  });
});
