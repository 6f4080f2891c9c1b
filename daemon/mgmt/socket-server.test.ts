import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConnectRouter } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EpError } from "../../common/errors.js";
import { silentLogger } from "../../common/log.js";
import { CronService, DaemonService } from "../../gen/ep/daemon/v1/mgmt_pb.js";
import { epErrorOfConnectJson } from "../../test-support/rpc-errors.js";
import { createMgmtTransport, jsonRpcCall } from "./client.js";
import { createJsonRpcHandler } from "./json-rpc.js";
import { openRawClient } from "./line-client.test-util.js";
import type { UnixSocketServer } from "./socket-server.js";
import { serveUnixSocket } from "./socket-server.js";

let calls = 0;
const routes = (router: ConnectRouter) => {
  router.service(DaemonService, { status: () => ({ nodeId: "nod_1", runningTasks: ++calls }) });
  router.service(CronService, { gcNow: () => ({ removed: 1 }) });
};

let dir: string;
let path: string;
const open: UnixSocketServer[] = [];

async function serve(opts: { mode?: number } = {}): Promise<UnixSocketServer> {
  const server = await serveUnixSocket({
    path,
    routes,
    jsonRpc: createJsonRpcHandler({ routes }),
    log: silentLogger,
    ...opts,
  });
  open.push(server);
  return server;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "ep-sock-"));
  path = join(dir, "mgmt.sock");
  calls = 0;
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

describe("serveUnixSocket", () => {
  it("answers a malformed binary protobuf body with invalid_argument, no parser text, and keeps serving", async () => {
    await serve();
    const post = (body: Buffer) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request(
          {
            socketPath: path,
            method: "POST",
            path: "/ep.daemon.v1.DaemonService/Status",
            headers: { "content-type": "application/proto", "content-length": body.length },
          },
          (res) => {
            let text = "";
            res.on("data", (d) => (text += d));
            res.on("end", () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const bad = await post(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    expect(bad.status).toBe(400);
    const json = JSON.parse(bad.text);
    expect(json).toMatchObject({
      code: "invalid_argument",
      message: "the request body is not a valid binary ep.daemon.v1.DaemonServiceStatusRequest message",
    });
    expect(epErrorOfConnectJson(json)?.code).toBe("invalid_argument");
    expect((await post(Buffer.alloc(0))).status).toBe(200);
  });

  it("refuses a Connect JSON body with a field the method does not know, like the JSON-RPC face", async () => {
    await serve();
    const post = (body: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request(
          {
            socketPath: path,
            method: "POST",
            path: "/ep.daemon.v1.DaemonService/Status",
            headers: { "content-type": "application/json" },
          },
          (res) => {
            let text = "";
            res.on("data", (d) => (text += d));
            res.on("end", () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const bad = await post('{"bogus": 1}');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).code).toBe("invalid_argument");
    expect(JSON.parse(bad.text).message).toContain("bogus");
    expect((await post("{}")).status).toBe(200);
  });

  it("creates the socket with mode 0600 by default, or the mode asked for", async () => {
    const server = await serve();
    expect(statSync(path).isSocket()).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await server.close();
    await serve({ mode: 0o660 });
    expect(statSync(path).mode & 0o777).toBe(0o660);
  });

  it("replaces a stale socket file left by a dead daemon", async () => {
    // A daemon killed with SIGKILL leaves its socket file behind, with nobody listening.
    const child = spawn(process.execPath, [
      "-e",
      `require("node:net").createServer().listen(${JSON.stringify(path)}, () => console.log("up"))`,
    ]);
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(statSync(path).isSocket()).toBe(true);
    await expect(
      new Promise((resolve, reject) => net.connect(path).on("connect", resolve).on("error", reject)),
    ).rejects.toThrow();

    await serve();
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 1 });
  });

  it("refuses to start while another daemon answers on the path", async () => {
    await serve();
    const second = serveUnixSocket({ path, routes, log: silentLogger });
    await expect(second).rejects.toBeInstanceOf(EpError);
    await expect(second).rejects.toMatchObject({ code: "already_exists", details: { path } });
    // The first one is untouched.
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 1 });
  });

  it("refuses to replace a file that is not a socket, and a path too long for a socket", async () => {
    writeFileSync(path, "precious");
    await expect(serve()).rejects.toMatchObject({ code: "invalid_argument", details: { field: "path" } });
    const long = join(dir, "x".repeat(120) + ".sock");
    await expect(serveUnixSocket({ path: long, routes, log: silentLogger })).rejects.toMatchObject({
      details: { field: "path" },
    });
  });

  it("close() drops open connections and removes the socket file", async () => {
    const server = await serve();
    const raw = await openRawClient(path);
    await server.close();
    await raw.closed;
    expect(existsSync(path)).toBe(false);
    await server.close();
  });

  it("serves Connect over HTTP/1.1 with keep-alive, sequential and concurrent calls", async () => {
    await serve();
    const client = createClient(DaemonService, createMgmtTransport(path));
    for (let i = 1; i <= 5; i++) expect((await client.status({})).runningTasks).toBe(i);
    const many = await Promise.all(Array.from({ length: 20 }, () => client.status({})));
    expect(new Set(many.map((r) => r.runningTasks)).size).toBe(20);
  });

  it("answers plain HTTP that is no Connect route with 404 and keeps serving lines", async () => {
    await serve();
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get({ socketPath: path, path: "/nothing/here", agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on("error", reject);
    });
    expect(status).toBe(404);
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 1 });
  });

  it("an HTTP request larger than 1 MiB is refused", async () => {
    await serve();
    const body = JSON.stringify({ pad: "x".repeat(1024 * 1024 + 10) });
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: path,
          method: "POST",
          path: "/ep.daemon.v1.DaemonService/Status",
          headers: { "content-type": "application/json" },
          agent: false,
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    expect(status).toBeGreaterThanOrEqual(400);
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 1 });
  });

  it("a socket without a line protocol tells a line client it speaks only HTTP", async () => {
    const server = await serveUnixSocket({ path, routes, log: silentLogger });
    open.push(server);
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(path, () => socket.write('{"jsonrpc":"2.0"}\n'));
      let got = "";
      socket.setEncoding("utf8");
      socket.on("data", (d: string) => (got += d));
      socket.on("end", () => resolve(got));
      socket.on("error", reject);
    });
    expect(text).toContain("only HTTP/1.1");
  });
});
