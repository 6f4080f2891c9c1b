// The SSE sink writes events as ready HTTP chunks straight to the socket and everything else
// through the response: the bytes must stay in call order and parse as a normal chunked body.
import { createServer, get, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../common/clock.js";
import type { EventRow } from "../../store/store.js";
import { frameOf } from "../../domain/events/stream.js";
import { createSseSink, httpChunk } from "./events-sse.js";

const row = (id: number): EventRow => ({
  id,
  type: "matrix",
  name: "t.tick",
  domainId: "",
  missionId: "",
  agentId: "",
  taskId: "",
  sessionId: "",
  status: "ok",
  payload: { n: id, text: "é✓" },
  createdAt: "2026-01-01T00:00:00.000Z",
});

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? (server.closeAllConnections(), server.close(() => r())) : r()));
  server = undefined;
});

describe("SSE sink", () => {
  it("frames a chunk as res.write would", () => {
    const data = Buffer.from('id: 1\ndata: {"a":"é"}\n\n');
    expect(httpChunk(data).toString()).toBe(`${data.length.toString(16)}\r\n${data.toString()}\r\n`);
  });

  it("keeps events, batches and comments in call order in a valid chunked body", async () => {
    const frames = [1, 2, 3, 4, 5].map((id) => frameOf(row(id)));
    server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("retry: 1000\n\n");
      const sink = createSseSink(res, systemClock);
      sink.send(frames[0], undefined);
      sink.keepAlive();
      sink.sendBatch!({ frames: frames.slice(1, 3), sse: Buffer.concat(frames.slice(1, 3).map((f) => f.sse)) });
      sink.send(frames[3], { limit: 1, remaining: 0, reset_at: "2026-01-01T00:01:00.000Z" });
      setImmediate(() => {
        sink.send(frames[4], undefined);
        sink.end({ code: "internal", message: "bye", last_event_id: 5 });
      });
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const body = await new Promise<string>((resolve, reject) => {
      get(`http://127.0.0.1:${(server!.address() as { port: number }).port}/`, (res) => {
        expect(res.headers["transfer-encoding"]).toBe("chunked");
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve(text));
      }).on("error", reject);
    });
    const sse = (i: number) => frames[i].sse.toString();
    expect(body).toBe(
      "retry: 1000\n\n" +
        sse(0) +
        ": keep-alive\n\n" +
        sse(1) +
        sse(2) +
        (`id: 4\ndata: ${frames[3].json.slice(0, -1)},"rate_limit":{"limit":1,` +
          `"remaining":0,"reset_at":"2026-01-01T00:01:00.000Z"}}\n\n`) +
        sse(4) +
        `event: error\ndata: {"error":{"code":"internal","message":"bye","last_event_id":5}}\n\n`,
    );
  });
});
