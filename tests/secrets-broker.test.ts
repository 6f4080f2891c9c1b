// The secrets broker end to end: the built ep-tower and the built epd as child processes, a real
// `shell` agent subprocess reading a secret with `epd get-secret` and with a raw line on
// $EP_SECRETS_SOCKET, every refusal the broker must give (and keep serving after), revocation and
// session end, and a search of everything the run left behind for the secret's bytes.
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import Database from "better-sqlite3";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import type { Event } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { createMgmtTransport, jsonRpcCall } from "../daemon/mgmt/client.js";
import { SecretsService } from "../gen/ep/secrets/v1/secrets_pb.js";
import { buildBinaries, FIXTURES, registerNode, stopChild } from "./epd-harness.js";
import { freePort, tempHome, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const VALUE = `S3cr3t-${randomBytes(12).toString("hex")}`;
const OTHER_VALUE = `Other-${randomBytes(12).toString("hex")}`;

interface Proc {
  child: ChildProcess;
  out(): string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return { child, out: () => out };
}

/** One raw request line on the socket; resolves to the answer line, or "" plus closed=true when the broker hung up. */
function rawLine(socketPath: string, line: string | Buffer): Promise<{ reply: any; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    let buf = "";
    s.on("connect", () => s.write(typeof line === "string" ? line + "\n" : line));
    s.on("data", (d) => {
      buf += d.toString();
      const nl = buf.indexOf("\n");
      if (nl >= 0) {
        s.destroy();
        resolve({ reply: JSON.parse(buf.slice(0, nl)), closed: false });
      }
    });
    s.on("end", () => resolve({ reply: buf ? JSON.parse(buf.split("\n")[0]) : undefined, closed: true }));
    s.on("error", (err: NodeJS.ErrnoException) =>
      err.code === "EPIPE" || err.code === "ECONNRESET"
        ? resolve({ reply: buf ? JSON.parse(buf.split("\n")[0]) : undefined, closed: true })
        : reject(err),
    );
  });
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) out.push(...filesUnder(p));
    else if (st.isFile()) out.push(p);
  }
  return out;
}

describe("secrets broker (real ep-tower + epd + shell agent)", () => {
  const h = tempHome("ep-secrets-");
  const home = h.dir;
  const nodeFile = join(home, "etc", "node.json");
  const stopFile = join(home, "stop-agent");
  let tower: Proc;
  let epd: Proc;
  let url: string;
  let admin: string;
  let work: Client<typeof WorkService>;
  let secrets: Client<typeof SecretService>;
  let events: Client<typeof EventService>;
  let socketPath: string;
  let agentId: string;
  let domainId: string;
  let missionId: string;

  beforeAll(async () => {
    const bins = await buildBinaries();
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    // no EP_SECRET_KEY: the tower creates its key file at first start
    tower = run(process.execPath, [bins.tower, "--listen", `127.0.0.1:${port}`], {
      EP_HOME: home,
      EP_LOG_LEVEL: "debug",
      EP_SECRET_KEY: "",
    });
    await waitFor(async () => {
      if (tower.child.exitCode !== null) throw new Error(`ep-tower exited: ${tower.out()}`);
      return (await fetch(url + "/healthz").catch(() => undefined))?.ok === true;
    }, 20_000);
    admin = readFileSync(join(home, "tower", "admin.token"), "utf8").trim();
    const transport = createConnectTransport({
      baseUrl: url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${admin}`), next(req))],
    });
    work = createClient(WorkService, transport);
    secrets = createClient(SecretService, transport);
    events = createClient(EventService, transport);
    await registerNode(url, admin, nodeFile);
    domainId = (await work.createDomain({ name: "sec" })).domain!.id;
    missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;

    epd = run(process.execPath, [bins.epd, "run", "--backend-url", url], {
      EP_HOME: home,
      EP_NODE_FILE: nodeFile,
      EP_LOG_LEVEL: "debug",
      PATH: `${FIXTURES}:${process.env.PATH}`,
    });
    const mgmt = join(home, "epd", "mgmt.sock");
    socketPath = join(home, "epd", "secrets.sock");
    await waitFor(async () => {
      if (epd.child.exitCode !== null) throw new Error(`epd exited: ${epd.out()}`);
      if (!existsSync(mgmt)) return false;
      const s = await jsonRpcCall<{ link: string }>(mgmt, "daemon.status", {}, { timeoutMs: 5000 }).catch(
        () => undefined,
      );
      return s?.link === "connected";
    }, 20_000);
    agentId = (
      await jsonRpcCall<{ agent: { id: string } }>(mgmt, "agent.enroll", { domainId, runtime: "shell", name: "sh" })
    ).agent.id;
  }, 90_000);

  afterAll(async () => {
    writeFileSync(stopFile, "");
    if (epd) await stopChild(epd.child, "SIGTERM");
    if (tower) await stopChild(tower.child, "SIGTERM");
    h.cleanup();
  });

  async function allEvents(): Promise<Event[]> {
    const out: Event[] = [];
    for (;;) {
      const page = (await events.listEvents({ afterId: BigInt(out.at(-1)?.id ?? 0), limit: 1000 })).events;
      out.push(...page);
      if (page.length < 1000) return out;
    }
  }
  const framesOf = async (taskId: string) =>
    (await allEvents())
      .filter((e) => e.type === "progress" && e.taskId === taskId)
      .map((e) => String((e.payload as { text?: string } | undefined)?.text ?? JSON.stringify(e.payload)));

  it(
    "the key file is created 0600 at first start; the store refuses " +
      "nothing once it exists; values never come back from listings",
    async () => {
      const keyFile = join(home, "tower", "secret.key");
      expect(statSync(keyFile).mode & 0o777).toBe(0o600);
      await secrets.setSecret({ name: "DB_PASSWORD", value: VALUE });
      await secrets.setSecret({ name: "OTHER", value: OTHER_VALUE });
      await secrets.grantSecret({ name: "DB_PASSWORD", agentId });
      const list = await secrets.listSecrets({});
      expect(list.secrets.map((s) => s.name)).toEqual(["DB_PASSWORD", "OTHER"]);
      expect(list.secrets[0].grantedAgents).toEqual([agentId]);
      expect(JSON.stringify(list.secrets, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(VALUE);
      // REST-free admin cannot resolve: that is the node's call only
      await expect(secrets.resolveSecret({ name: "DB_PASSWORD", agentId })).rejects.toThrow(
        /role admin may not call SecretService\/ResolveSecret \(node may\)/,
      );
    },
  );

  it("an agent reads its secret with epd get-secret and a raw line; every refusal " +
    "has its code; revoke and session end fail the next get; output is redacted", async () => {
    const raw =
      `node -e 'const s=require("net").connect(process.env.EP_SECRETS_SOCKET);` +
      `s.on("connect",()=>s.write(JSON.stringify({op:"get",session:process.env.EP_SECRETS_SESSION,` +
      `name:process.argv[1]})+"\\n"));let b="";s.on("data",d=>{b+=d;` +
      `if(b.includes("\\n")){process.stdout.write("raw "+b);s.end()}})' DB_PASSWORD`;
    const command = [
      'echo "session=$EP_SECRETS_SESSION"',
      'echo "epd=$(command -v epd)"',
      'v=$(epd get-secret DB_PASSWORD); echo "cli rc=$? value=$v"',
      raw,
      'echo "on stderr: $v" >&2',
      'epd get-secret OTHER; echo "rc_other=$?"',
      'epd get-secret NOPE; echo "rc_nope=$?"',
      'EP_SECRETS_SESSION=ses_forged epd get-secret DB_PASSWORD; echo "rc_forged=$?"',
      'EP_SECRETS_SOCKET=/nonexistent/secrets.sock epd get-secret DB_PASSWORD; echo "rc_unreachable=$?"',
      "echo ready",
      `while [ ! -e '${stopFile}' ]; do sleep 0.05; done`,
      'epd get-secret DB_PASSWORD >/dev/null; echo "rc_after_revoke=$?"',
      'echo "final value $v"',
    ].join("\n");
    const task = (
      await work.createTask({ missionId, title: "uses a secret", runtime: Runtime.SHELL, input: { command } })
    ).task!;
    let frames: string[] = [];
    await waitFor(async () => (frames = await framesOf(task.id)).includes("ready"), 20_000);
    const session = frames.find((f) => f.startsWith("session="))!.slice("session=".length);
    expect(session).toMatch(/^ses_/);
    expect(frames.find((f) => f.startsWith("epd="))).toBe(`epd=${join(home, "epd", "bin", "epd")}`);
    expect(frames).toContain("cli rc=0 value=[redacted:DB_PASSWORD]");
    expect(frames).toContain('raw {"ok":true,"value":"[redacted:DB_PASSWORD]"}');
    expect(frames).toContain("on stderr: [redacted:DB_PASSWORD]");
    expect(frames).toContain("rc_other=3");
    expect(frames).toContain("rc_nope=4");
    expect(frames).toContain("rc_forged=3");
    expect(frames).toContain("rc_unreachable=7");
    expect(frames.some((f) => f.includes("not granted to agent"))).toBe(true);

    // the socket: 0600, owned by the daemon's user
    const st = statSync(socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.uid).toBe(process.getuid!());

    // from outside the run, on its live session: each bad request gets its error and the broker keeps serving
    const get = (name: string, s = session) => rawLine(socketPath, JSON.stringify({ op: "get", session: s, name }));
    expect((await get("DB_PASSWORD")).reply).toEqual({ ok: true, value: VALUE });
    expect((await get("DB_PASSWORD", `ses_${randomBytes(18).toString("base64url")}`)).reply.error.code).toBe(
      "forbidden",
    );
    expect((await get("OTHER")).reply.error.code).toBe("forbidden");
    expect((await get("NOPE")).reply.error.code).toBe("secret_not_found");
    expect((await rawLine(socketPath, "{not json")).reply.error.code).toBe("invalid_json");
    const unknownOp = await rawLine(socketPath, JSON.stringify({ op: "put", session, name: "DB_PASSWORD" }));
    expect(unknownOp.reply).toMatchObject({ ok: false, error: { code: "invalid_argument" } });
    expect(unknownOp.reply.error.message).toContain("op");
    const huge = await rawLine(
      socketPath,
      Buffer.from(`{"op":"get","session":"${session}","name":"${"A".repeat(1024 * 1024)}"}\n`),
    );
    expect(huge.reply.error.code).toBe("payload_too_large");
    expect((await get("DB_PASSWORD")).reply).toEqual({ ok: true, value: VALUE });
    // Connect on the same socket decides the same way
    const overConnect = createClient(SecretsService, createMgmtTransport(socketPath));
    expect((await overConnect.getSecret({ session, name: "DB_PASSWORD" })).value).toBe(VALUE);
    await expect(overConnect.getSecret({ session, name: "OTHER" })).rejects.toThrow(/not granted/);

    // revoking the grant makes the very next get fail
    await secrets.revokeSecret({ name: "DB_PASSWORD", agentId });
    expect((await get("DB_PASSWORD")).reply.error.code).toBe("forbidden");
    writeFileSync(stopFile, "");
    const done = await waitFor(
      async () => ["succeeded", "failed"].includes(statusWord((await work.getTask({ taskId: task.id })).task!.status)),
      20_000,
    ).then(() => work.getTask({ taskId: task.id }));
    const finished = done.task!;
    expect(statusWord(finished.status)).toBe("succeeded");
    expect(finished.result!.output).toContain("rc_after_revoke=3");
    expect(finished.result!.output).toContain("final value [redacted:DB_PASSWORD]");
    expect(finished.result!.output).not.toContain(VALUE);

    // the run is over: its session is dead even with the grant back
    await secrets.grantSecret({ name: "DB_PASSWORD", agentId });
    expect((await get("DB_PASSWORD")).reply.error.code).toBe("forbidden");
    expect(epd.child.exitCode).toBe(null);
  }, 60_000);

  it("a failing run's error and output are redacted too", async () => {
    const command = 'v=$(epd get-secret DB_PASSWORD); echo "out $v"; echo "boom $v" >&2; exit 3';
    const task = (
      await work.createTask({ missionId, title: "fails with a secret", runtime: Runtime.SHELL, input: { command } })
    ).task!;
    await waitFor(async () => (await work.getTask({ taskId: task.id })).task!.status === TaskStatus.FAILED, 20_000);
    const t = (await work.getTask({ taskId: task.id })).task!;
    expect(JSON.stringify(t.result)).toContain("[redacted:DB_PASSWORD]");
    expect(JSON.stringify(t.result)).not.toContain(VALUE);
  }, 30_000);

  it("after the runs, the secret's bytes are nowhere: tower " +
    "database (with WAL), homes, logs, events, task results", async () => {
    const needle = Buffer.from(VALUE);
    const evs = await allEvents();
    const evText = JSON.stringify(evs, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    expect(evText).toContain("[redacted:DB_PASSWORD]");
    expect(evText).toContain("secret.resolved");
    expect(evText).not.toContain(VALUE);
    const tasks = await work.listTasks({ missionId });
    expect(JSON.stringify(tasks, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(VALUE);

    // while the tower runs (WAL not yet checkpointed), then after both stopped
    const scan = () => {
      const hits: string[] = [];
      for (const f of filesUnder(home)) if (readFileSync(f).includes(needle)) hits.push(f);
      return hits;
    };
    const dbFiles = readdirSync(join(home, "tower")).filter((f) => f.startsWith("ep.db"));
    expect(dbFiles).toContain("ep.db-wal");
    expect(scan()).toEqual([]);
    await stopChild(epd.child, "SIGTERM");
    await stopChild(tower.child, "SIGTERM");
    expect(scan()).toEqual([]);
    expect(tower.out()).not.toContain(VALUE);
    expect(epd.out()).not.toContain(VALUE);
    expect(epd.out()).toContain("secret handed out");

    // the encrypted column is there and holds no plaintext
    const db = new Database(join(home, "tower", "ep.db"), { readonly: true });
    try {
      const rows = db.prepare("SELECT name, ciphertext, iv, tag, key_id FROM secrets ORDER BY name").all() as Record<
        string,
        string
      >[];
      expect(rows.map((r) => r.name)).toEqual(["DB_PASSWORD", "OTHER"]);
      for (const r of rows) {
        expect(r.ciphertext.length).toBeGreaterThan(0);
        expect(r.ciphertext).not.toContain(VALUE);
        expect(Buffer.from(r.ciphertext, "base64").includes(needle)).toBe(false);
        expect(r.key_id).toMatch(/^k[0-9a-f]{16}$/);
      }
    } finally {
      db.close();
    }
  }, 30_000);
});
