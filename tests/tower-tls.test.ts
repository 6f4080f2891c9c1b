// The built ep-tower on a non-loopback address: plain HTTP is refused unless EP_ALLOW_INSECURE=1
// says a TLS proxy sits in front; with EP_TLS_CERT/EP_TLS_KEY it serves HTTPS.
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import { request } from "node:https";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { beforeAll, describe, expect, it } from "vitest";
import { writeNodeIdentity } from "../common/node-identity.js";
import { buildBinaries, ROOT, spawnEpd, stopChild } from "./epd-harness.js";
import { freePort, tempHome, useCleanups, waitFor } from "./harness.js";

const cleanup = useCleanups();

let towerBin: string;
beforeAll(async () => {
  towerBin = (await buildBinaries()).tower;
}, 60_000);

function env(home: string, extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !/^EP_(TLS_|ALLOW_INSECURE|LISTEN)/.test(k)) out[k] = v;
  return { ...out, EP_HOME: home, EP_LOG_LEVEL: "warn", EP_SECRET_KEY: "test", ...extra };
}

function spawnOn(home: string, port: number, extra: Record<string, string>): { child: ChildProcess; stderr(): string } {
  const child = spawn(process.execPath, [towerBin, "--listen", `0.0.0.0:${port}`], {
    env: env(home, extra),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout!.resume();
  cleanup(() => stopChild(child, "SIGTERM"));
  return { child, stderr: () => stderr };
}

function httpsGet(port: number, path: string, ca: Buffer): Promise<{ status: number; body: string; protocol: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", servername: "localhost", port, path, ca, method: "GET", agent: false, timeout: 5000 },
      (res) => {
        const protocol = (res.socket as { getProtocol?(): string | null }).getProtocol?.() ?? "";
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, protocol }));
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.end();
  });
}

/** A Connect JSON call over HTTPS trusting `ca` (the test process does not trust the tower's certificate). */
function rpc<T>(port: number, ca: Buffer, token: string, procedure: string, body: object): Promise<T> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const headers = {
      "content-type": "application/json",
      authorization: `Bearer ${token}`,
      "content-length": Buffer.byteLength(payload),
    };
    const req = request(
      {
        host: "127.0.0.1",
        servername: "localhost",
        port,
        path: `/${procedure}`,
        ca,
        method: "POST",
        agent: false,
        headers,
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () =>
          res.statusCode === 200
            ? resolve(JSON.parse(text) as T)
            : reject(new Error(`${procedure}: ${res.statusCode} ${text}`)),
        );
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

function h2Get(port: number, path: string, ca: Buffer): Promise<{ alpn: string; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, { ca, servername: "localhost" });
    session.on("error", reject);
    const req = session.request({ ":path": path });
    let status = 0;
    let body = "";
    req.on("response", (h) => (status = Number(h[":status"])));
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      resolve({ alpn: session.alpnProtocol ?? "", status, body });
      session.close();
    });
    req.on("error", reject);
  });
}

describe("ep-tower on a non-loopback address", () => {
  it("refuses plain HTTP with exit 2, naming EP_TLS_CERT and EP_ALLOW_INSECURE", async () => {
    const h = tempHome("ep-tls-");
    cleanup(() => h.cleanup());
    const port = await freePort();
    const r = spawnSync(process.execPath, [towerBin, "--listen", `0.0.0.0:${port}`], {
      env: env(h.dir, {}),
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^ep-tower: refusing plain HTTP on non-loopback address 0\.0\.0\.0/);
    expect(r.stderr).toContain("EP_TLS_CERT");
    expect(r.stderr).toContain("EP_ALLOW_INSECURE=1");
    // nothing listens there
    expect(
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => "up",
        () => "down",
      ),
    ).toBe("down");

    // half a TLS setup is refused too
    const half = spawnSync(process.execPath, [towerBin, "--listen", `0.0.0.0:${port}`], {
      env: env(h.dir, { EP_TLS_CERT: "/nope" }),
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(half.status).toBe(2);
    expect(half.stderr).toMatch(/EP_TLS_CERT and EP_TLS_KEY must be set together/);
  }, 30_000);

  it("serves plain HTTP there with EP_ALLOW_INSECURE=1 (behind a TLS proxy)", async () => {
    const h = tempHome("ep-tls-");
    cleanup(() => h.cleanup());
    const port = await freePort();
    const t = spawnOn(h.dir, port, { EP_ALLOW_INSECURE: "1" });
    await waitFor(async () => {
      if (t.child.exitCode !== null) throw new Error(`ep-tower exited ${t.child.exitCode}: ${t.stderr()}`);
      return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true;
    }, 15_000);
    const token = readFileSync(join(h.dir, "tower", "admin.token"), "utf8").trim();
    const res = await fetch(`http://127.0.0.1:${port}/domains`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ domains: [] });
  }, 30_000);

  it("serves HTTPS with EP_TLS_CERT and EP_TLS_KEY, and no plain HTTP", async () => {
    const h = tempHome("ep-tls-");
    cleanup(() => h.cleanup());
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "k",
        "-out",
        "c",
      ],
      {
        cwd: h.dir,
        stdio: "ignore",
      },
    );
    const ca = readFileSync(join(h.dir, "c"));
    const port = await freePort();
    const t = spawnOn(h.dir, port, { EP_TLS_CERT: join(h.dir, "c"), EP_TLS_KEY: join(h.dir, "k") });
    let health: Awaited<ReturnType<typeof httpsGet>> | undefined;
    await waitFor(async () => {
      if (t.child.exitCode !== null) throw new Error(`ep-tower exited ${t.child.exitCode}: ${t.stderr()}`);
      health = await httpsGet(port, "/healthz", ca).catch(() => undefined);
      return health?.status === 200;
    }, 15_000);
    expect(health!.protocol).toMatch(/^TLSv1\.[23]$/);
    // HTTP/2 on the same port, chosen by ALPN (what gRPC clients over TLS ask for)
    expect(await h2Get(port, "/healthz", ca)).toEqual({ alpn: "h2", status: 200, body: '{"status":"ok"}' });
    // and a stock gRPC client over TLS calls the API with a bearer token
    const token = readFileSync(join(h.dir, "tower", "admin.token"), "utf8").trim();
    const def = protoLoader.loadSync(["ep/tower/v1/work.proto"], {
      includeDirs: [join(ROOT, "proto")],
      defaults: true,
    });
    const { WorkService } = (
      grpc.loadPackageDefinition(def) as unknown as {
        ep: { tower: { v1: Record<string, grpc.ServiceClientConstructor> } };
      }
    ).ep.tower.v1;
    const work = new WorkService(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca), {
      "grpc.ssl_target_name_override": "localhost",
    });
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${token}`);
    const listed = await new Promise<{ domains: unknown[] }>((resolve, reject) =>
      (
        work as unknown as {
          listDomains(r: object, m: grpc.Metadata, cb: (e: Error | null, r: { domains: unknown[] }) => void): void;
        }
      ).listDomains({}, md, (e, r) => (e ? reject(e) : resolve(r))),
    );
    expect(listed.domains).toEqual([]);
    work.close();
    // a client that does not trust the certificate is refused
    await expect(httpsGet(port, "/healthz", Buffer.from(""))).rejects.toThrow(
      /self[- ]signed|unable to verify|certificate/i,
    );
    // and plain HTTP on the same port gets no answer a client could mistake for the API
    const plain = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(3000) }).then(
      (r) => r.status,
      () => 0,
    );
    expect(plain === 0 || plain === 400).toBe(true);
  }, 30_000);

  it("epd works against a tower on HTTPS it trusts through " +
    "NODE_EXTRA_CA_CERTS: the link, enrolment and a task", async () => {
    const h = tempHome("ep-tls-epd-");
    cleanup(() => h.cleanup());
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout",
        "k",
        "-out",
        "c",
      ],
      {
        cwd: h.dir,
        stdio: "ignore",
      },
    );
    const ca = readFileSync(join(h.dir, "c"));
    const port = await freePort();
    const t = spawnOn(join(h.dir, "t"), port, { EP_TLS_CERT: join(h.dir, "c"), EP_TLS_KEY: join(h.dir, "k") });
    await waitFor(async () => {
      if (t.child.exitCode !== null) throw new Error(`ep-tower exited ${t.child.exitCode}: ${t.stderr()}`);
      return (await httpsGet(port, "/healthz", ca).catch(() => undefined))?.status === 200;
    }, 15_000);
    const admin = readFileSync(join(h.dir, "t", "tower", "admin.token"), "utf8").trim();
    const url = `https://127.0.0.1:${port}`;
    const domainId = (
      await rpc<{ domain: { id: string } }>(port, ca, admin, "ep.tower.v1.WorkService/CreateDomain", { name: "tls" })
    ).domain.id;
    const missionId = (
      await rpc<{ mission: { id: string } }>(port, ca, admin, "ep.tower.v1.WorkService/CreateMission", {
        domainId,
        title: "m",
      })
    ).mission.id;
    const reg = await rpc<{ node: { id: string }; token: string }>(
      port,
      ca,
      admin,
      "ep.tower.v1.NodeService/RegisterNode",
      { hostname: "tls-node" },
    );
    const nodeFile = join(h.dir, "node.json");
    await writeNodeIdentity({ node_id: reg.node.id, hostname: "tls-node", token: reg.token, tower_url: url }, nodeFile);
    // without the CA, neither the link nor a unary call gets through (the certificate is checked)
    const untrusting = await spawnEpd({ home: join(h.dir, "u"), nodeFile, backendUrl: url, waitLink: false });
    cleanup(() => untrusting.stop());
    await expect(untrusting.call("agent.enroll", { domainId, runtime: "shell", name: "nope" })).rejects.toThrow(
      /self[- ]signed|certificate|unable to verify/i,
    );
    expect((await untrusting.call<{ link: string }>("daemon.status")).link).not.toBe("connected");
    await untrusting.stop();
    // the link (a stream) is up once spawnEpd returns; enrolment and the task's calls are unary
    const epd = await spawnEpd({
      home: join(h.dir, "n"),
      nodeFile,
      backendUrl: url,
      env: { NODE_EXTRA_CA_CERTS: join(h.dir, "c") },
    });
    cleanup(() => epd.stop());
    await epd.call("agent.enroll", { domainId, runtime: "shell", name: "tls-agent" });
    const taskId = (
      await rpc<{ task: { id: string } }>(port, ca, admin, "ep.tower.v1.WorkService/CreateTask", {
        missionId,
        title: "t",
        runtime: "RUNTIME_SHELL",
        input: { command: "echo over-tls" },
      })
    ).task.id;
    let task: { status?: string; result?: { output?: string } } = {};
    await waitFor(async () => {
      task = (await rpc<{ task: typeof task }>(port, ca, admin, "ep.tower.v1.WorkService/GetTask", { taskId })).task;
      return task.status === "TASK_STATUS_SUCCEEDED" || task.status === "TASK_STATUS_FAILED";
    }, 20_000);
    expect(task.status).toBe("TASK_STATUS_SUCCEEDED");
    expect(task.result?.output).toContain("over-tls");
  }, 60_000);
});
