// epd's lean server stream (the node link) against a real tower and against servers that misbehave:
// messages as the tower sends them, the tower's refusals with their codes, an end-stream error,
// envelopes split across and packed into chunks, a stream cut short, a cancelled call.
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { LinkResponseSchema, NodeService, type LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import { startTower, type TestTower } from "./harness.js";
import { createUnaryTransport } from "../daemon/link/unary-transport.js";

const linkClient = (baseUrl: string, token: string) =>
  createClient(
    NodeService,
    createUnaryTransport({
      baseUrl,
      headers: { authorization: `Bearer ${token}` },
      streams: createConnectTransport({ baseUrl, httpVersion: "1.1" }),
    }),
  );

const envelope = (bytes: Uint8Array, flags = 0) => {
  const out = Buffer.alloc(5 + bytes.byteLength);
  out[0] = flags;
  out.writeUInt32BE(bytes.byteLength, 1);
  out.set(bytes, 5);
  return out;
};
/** A typed link command as the tower enveloped it: assign and cancel name a task. */
const message = (kind: "hello" | "ping" | "assign" | "cancel", taskId = "") => {
  const command =
    kind === "assign"
      ? { case: kind, value: { agentId: "agt_1", task: { id: taskId } } }
      : kind === "cancel"
        ? { case: kind, value: { taskId, agentId: "agt_1" } }
        : { case: kind, value: {} };
  return envelope(toBinary(LinkResponseSchema, create(LinkResponseSchema, { command } as never)));
};
/** A link command as the tests name it: its case, and the task it names. */
const label = (m: LinkResponse): string => {
  const c = m.command;
  const taskId = c.case === "assign" ? c.value.task?.id : c.case === "cancel" ? c.value.taskId : "";
  return taskId ? `${c.case}:${taskId}` : String(c.case);
};
const endStream = (json: unknown) => envelope(Buffer.from(JSON.stringify(json)), 2);

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectError);
  return err as ConnectError;
}

async function collect(it: AsyncIterable<LinkResponse>, max = 100): Promise<string[]> {
  const got: string[] = [];
  for await (const m of it) {
    got.push(label(m));
    if (got.length >= max) break;
  }
  return got;
}

describe("epd's server stream (the link)", () => {
  let t: TestTower;
  let fake: Server;
  let fakeUrl: string;
  /** what the fake server does with the next request */
  let respond: (req: IncomingMessage, res: ServerResponse) => void = () => {};
  beforeAll(async () => {
    t = await startTower();
    fake = createServer((req, res) => {
      req.resume();
      respond(req, res);
    });
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
    fakeUrl = `http://127.0.0.1:${(fake.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    fake.closeAllConnections();
    await new Promise((r) => fake?.close(r));
    await t?.close();
  });

  it("reads the tower's link: hello, then what the tower sends", async () => {
    const reg = await t.client(NodeService).registerNode({ hostname: "lean-link" });
    const ac = new AbortController();
    const got: string[] = [];
    const reading = (async () => {
      for await (const m of linkClient(t.url, reg.token).link(
        { attachSecret: "s".repeat(32), version: "test" },
        { signal: ac.signal },
      )) {
        got.push(label(m));
        if (m.command.case === "hello")
          t.tower.services.fleet.send(reg.node!.id, {
            command: { case: "cancel", value: { taskId: "tsk_x", agentId: "agt_x", reason: "test" } },
          });
        if (m.command.case === "cancel") ac.abort();
      }
    })();
    const err = await failure(reading);
    expect(got).toEqual(["hello", "cancel:tsk_x"]);
    expect(err.code).toBe(Code.Canceled);
  });

  it("reads the tower's refusal with its code", async () => {
    const err = await failure(collect(linkClient(t.url, "ept_not-a-token").link({ attachSecret: "s" })));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(toEpError(err).code).toBe("unauthenticated");
  });

  it("takes envelopes split across chunks and packed together, and ends at the end-stream message", async () => {
    respond = (_req, res) => {
      res.writeHead(200, { "content-type": "application/connect+proto" });
      const a = message("assign", "tsk_1");
      res.write(a.subarray(0, 3));
      setTimeout(() => {
        res.write(Buffer.concat([a.subarray(3), message("cancel", "tsk_2"), message("ping").subarray(0, 6)]));
        setTimeout(() => res.end(Buffer.concat([message("ping").subarray(6), endStream({})])), 10);
      }, 10);
    };
    expect(await collect(linkClient(fakeUrl, "x").link({}))).toEqual(["assign:tsk_1", "cancel:tsk_2", "ping"]);
  });

  it("throws the error an end-stream message carries", async () => {
    respond = (_req, res) => {
      res.writeHead(200, { "content-type": "application/connect+proto" });
      res.end(
        Buffer.concat([
          message("hello"),
          endStream({ error: { code: "resource_exhausted", message: "too many links" } }),
        ]),
      );
    };
    const got: string[] = [];
    const err = await failure(
      (async () => {
        for await (const m of linkClient(fakeUrl, "x").link({})) got.push(label(m));
      })(),
    );
    expect(got).toEqual(["hello"]);
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toBe("too many links");
  });

  it("a stream cut short, a proxy's error page and a compressed message are the transport's failures", async () => {
    respond = (_req, res) => {
      res.writeHead(200, { "content-type": "application/connect+proto" });
      res.end(message("hello"));
    };
    expect((await failure(collect(linkClient(fakeUrl, "x").link({})))).code).toBe(Code.Unavailable);
    respond = (_req, res) => {
      res.writeHead(200, { "content-type": "application/connect+proto" });
      res.end(message("hello").subarray(0, 4));
    };
    expect((await failure(collect(linkClient(fakeUrl, "x").link({})))).code).toBe(Code.DataLoss);
    respond = (_req, res) => res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad Gateway</html>");
    const proxied = await failure(collect(linkClient(fakeUrl, "x").link({})));
    expect(proxied.code).toBe(Code.Unavailable);
    respond = (_req, res) => {
      res.writeHead(200, { "content-type": "application/connect+proto" });
      res.end(envelope(Buffer.from([1, 2, 3]), 1));
    };
    expect((await failure(collect(linkClient(fakeUrl, "x").link({})))).code).toBe(Code.Internal);
  });

  it("sends the request as one enveloped message with the node's headers", async () => {
    let seen: { path?: string; type?: string; auth?: string; body?: Buffer } = {};
    respond = (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen = {
          path: req.url,
          type: req.headers["content-type"],
          auth: req.headers.authorization,
          body: Buffer.concat(chunks),
        };
        res.writeHead(200, { "content-type": "application/connect+proto" });
        res.end(endStream({}));
      });
    };
    expect(await collect(linkClient(fakeUrl, "tok").link({ attachSecret: "abc" }))).toEqual([]);
    expect(seen.path).toBe("/ep.tower.v1.NodeService/Link");
    expect(seen.type).toBe("application/connect+proto");
    expect(seen.auth).toBe("Bearer tok");
    expect(seen.body![0]).toBe(0);
    expect(seen.body!.readUInt32BE(1)).toBe(seen.body!.length - 5);
  });
});
