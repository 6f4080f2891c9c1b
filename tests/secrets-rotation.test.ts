// Key handling of the secret store on the real ep-tower binary: the key file made at first start,
// refusal of a key file others can read, and rotation by restart (new EP_SECRET_KEY, old one in
// EP_SECRET_KEY_PREVIOUS → every value re-encrypted; afterwards the old key is not needed).
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import Database from "better-sqlite3";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, statSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, registerNode, stopChild } from "./epd-harness.js";
import { freePort, tempHome, useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const VALUE = `rotating-${randomBytes(10).toString("hex")}`;
const cleanup = useCleanups();
beforeAll(async () => {
  await buildBinaries();
}, 60_000);

async function startTower(
  home: string,
  port: number,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; out(): string; url: string; stop(): Promise<void> }> {
  const { tower } = await buildBinaries();
  const child = spawn(process.execPath, [tower, "--listen", `127.0.0.1:${port}`], {
    env: { ...process.env, EP_HOME: home, EP_LOG_LEVEL: "info", EP_SECRET_KEY: "", EP_SECRET_KEY_PREVIOUS: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`ep-tower exited: ${out}`);
    return (await fetch(url + "/healthz").catch(() => undefined))?.ok === true;
  }, 20_000);
  const stop = () => stopChild(child, "SIGTERM");
  cleanup(stop);
  return { child, out: () => out, url, stop };
}

const clientsOf = (url: string, token: string) => {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  return {
    secrets: createClient(SecretService, transport),
    work: createClient(WorkService, transport),
    agents: createClient(AgentService, transport),
  };
};

const keyIds = (home: string) => {
  const db = new Database(join(home, "tower", "ep.db"), { readonly: true });
  try {
    return (db.prepare("SELECT key_id FROM secrets ORDER BY name").all() as { key_id: string }[]).map((r) => r.key_id);
  } finally {
    db.close();
  }
};

describe("secret-store keys (real ep-tower)", () => {
  it("rotation by restart: old key in EP_SECRET_KEY_PREVIOUS " +
    "→ re-encrypted at start, readable with the new key alone", async () => {
    const h = tempHome("ep-secrot-");
    cleanup(() => h.cleanup());
    const port = await freePort();
    const KEY_A = "first passphrase, long enough";
    const KEY_B = randomBytes(32).toString("base64");

    let t = await startTower(h.dir, port, { EP_SECRET_KEY: KEY_A });
    const { readFileSync } = await import("node:fs");
    const admin = readFileSync(join(h.dir, "tower", "admin.token"), "utf8").trim();
    const node = await registerNode(t.url, admin, join(h.dir, "node.json"));
    let a = clientsOf(t.url, admin);
    let n = clientsOf(t.url, node.token);
    const domainId = (await a.work.createDomain({ name: "rot" })).domain!.id;
    const agentId = (await n.agents.enrollAgent({ domainId, runtime: Runtime.SHELL, name: "x" })).agent!.id;
    await a.secrets.setSecret({ name: "TOKEN", value: VALUE, domainId });
    await a.secrets.grantSecret({ name: "TOKEN", domainId });
    expect((await n.secrets.resolveSecret({ name: "TOKEN", agentId })).value).toBe(VALUE);
    const [idA] = keyIds(h.dir);
    await t.stop();

    // the new key alone: values under the old key are unreadable, said clearly, and left untouched
    t = await startTower(h.dir, port, { EP_SECRET_KEY: KEY_B });
    n = clientsOf(t.url, node.token);
    // the node-token signing key is sealed under the old key too (issue 14): node calls are
    // refused until the old key is given, and the tower says which setting fixes it
    const err = await n.secrets.resolveSecret({ name: "TOKEN", agentId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String(err)).not.toContain(VALUE);
    expect(t.out()).toContain("secrets under a key this tower does not have");
    await waitFor(() => t.out().includes("start with the old key in EP_SECRET_KEY_PREVIOUS"));
    expect(keyIds(h.dir)).toEqual([idA]);
    await t.stop();

    // new key + previous: re-encrypted at start
    t = await startTower(h.dir, port, { EP_SECRET_KEY: KEY_B, EP_SECRET_KEY_PREVIOUS: KEY_A });
    expect(t.out()).toContain("secrets re-encrypted under the current key");
    const [idB] = keyIds(h.dir);
    expect(idB).not.toBe(idA);
    await t.stop();

    // the old key is no longer needed
    t = await startTower(h.dir, port, { EP_SECRET_KEY: KEY_B });
    n = clientsOf(t.url, node.token);
    a = clientsOf(t.url, admin);
    expect((await n.secrets.resolveSecret({ name: "TOKEN", agentId })).value).toBe(VALUE);
    expect((await a.secrets.listSecrets({})).secrets[0].version).toBe(1);
    expect(t.out()).not.toContain(VALUE);
    await t.stop();
  }, 60_000);

  it("the key file: created 0600 at first start and used; refused " +
    "(with the fix in the message) once others can read it", async () => {
    const h = tempHome("ep-seckey-");
    cleanup(() => h.cleanup());
    const port = await freePort();
    let t = await startTower(h.dir, port, {});
    const keyFile = join(h.dir, "tower", "secret.key");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const { readFileSync } = await import("node:fs");
    const admin = readFileSync(join(h.dir, "tower", "admin.token"), "utf8").trim();
    await clientsOf(t.url, admin).secrets.setSecret({ name: "A", value: VALUE });
    await t.stop();
    chmodSync(keyFile, 0o644);
    t = await startTower(h.dir, port, {});
    const err = toEpError(
      await clientsOf(t.url, admin)
        .secrets.setSecret({ name: "B", value: VALUE })
        .catch((e: unknown) => e),
    );
    expect(err.code).toBe("config_invalid");
    expect(err.message).toContain(`chmod 600 ${keyFile}`);
    await t.stop();
  }, 60_000);
});
