// SecretService over a real store in both dialects (SQLite temp file; PostgreSQL in a fresh
// schema when reachable): roles, grants, node scoping, events without values, rotation.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../test-support/fake-clock.js";
import { EpError } from "../../../common/errors.js";
import { silentLogger } from "../../../common/log.js";
import { PostgresStore, withDefaultUser } from "../../store/postgres/postgres-store.js";
import { SqliteStore } from "../../store/sqlite/sqlite-store.js";
import type { Store } from "../../store/store.js";
import type { Caller } from "../caller.js";
import { DEFAULT_LIMITS, type Deps } from "../deps.js";
import { createEventHub } from "../event-hub.js";
import { createSecretService, type KeySource } from "./secrets.js";
import { createKeyring, parseSecretKey, type SecretKeyring } from "./crypto.js";

const PG_URL = process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test";
async function pgProblem(): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: withDefaultUser(PG_URL), connectionTimeoutMillis: 3000 });
  c.on("error", () => {});
  try {
    await c.connect();
    return undefined;
  } catch (err) {
    return (err as Error).message || "unreachable";
  } finally {
    await c.end().catch(() => {});
  }
}
const problem = await pgProblem();
const skipPg = Boolean(problem) && !process.env.CI;
if (skipPg) console.log(`secrets suite: skipping PostgreSQL (${PG_URL}: ${problem})`);

interface Fx {
  store: Store;
  dbBytes(): Buffer;
  cleanup(): Promise<void>;
}

async function sqliteFx(): Promise<Fx> {
  const dir = mkdtempSync(join(tmpdir(), "ep-secrets-"));
  const store = SqliteStore.open({ path: join(dir, "t.db") });
  await store.migrate();
  return {
    store,
    dbBytes: () => Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f)))),
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pgFx(): Promise<Fx> {
  const schema = `ep_sec_${randomBytes(5).toString("hex")}`;
  const store = await PostgresStore.connect(PG_URL, { schema });
  await store.migrate();
  return {
    store,
    dbBytes: () => Buffer.alloc(0),
    async cleanup() {
      await store.close();
      const c = new pg.Client({ connectionString: withDefaultUser(PG_URL) });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    },
  };
}

const ADMIN: Caller = { subject: "tok_admin", role: "admin", via: "token" };
const OPERATOR: Caller = { subject: "tok_op", role: "operator", via: "token" };
const NODE1: Caller = { subject: "nod_1", role: "node", via: "node", nodeId: "nod_1" };
const NODE2: Caller = { subject: "nod_2", role: "node", via: "node", nodeId: "nod_2" };
const VALUE = "pa55-Very-Secret-" + randomBytes(8).toString("hex");

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    expect((err as EpError).message).not.toContain(VALUE);
    return (err as EpError).code;
  }
  throw new Error("expected an error");
}

describe.each([
  { dialect: "sqlite", skip: false, fx: sqliteFx },
  { dialect: "postgres", skip: skipPg, fx: pgFx },
] as const)("SecretService ($dialect)", ({ skip, fx: makeFx }) => {
  const test = skip ? it.skip : it;
  let fx: Fx;
  let deps: Deps;
  let ring: SecretKeyring | undefined;
  const keys: KeySource = { keyring: () => ring, hint: "set EP_SECRET_KEY" };
  const k1 = parseSecretKey(randomBytes(32).toString("base64"), "EP_SECRET_KEY");
  const k2 = parseSecretKey(randomBytes(32).toString("base64"), "EP_SECRET_KEY");

  beforeEach(async () => {
    if (skip) return;
    fx = await makeFx();
    ring = createKeyring(k1);
    deps = {
      store: fx.store,
      clock: new FakeClock(Date.parse("2025-01-01T00:00:00Z")),
      hub: createEventHub(),
      log: silentLogger,
      limits: DEFAULT_LIMITS,
    };
    const at = "2025-01-01T00:00:00.000Z";
    await fx.store.insertDomain({ id: "dom_a", name: "a", createdAt: at });
    await fx.store.insertDomain({ id: "dom_b", name: "b", createdAt: at });
    await fx.store.insertNode({
      id: "nod_1",
      hostname: "h1",
      status: "online",
      lastSeenAt: at,
      createdAt: at,
      domains: ["*"],
    });
    await fx.store.insertNode({
      id: "nod_2",
      hostname: "h2",
      status: "online",
      lastSeenAt: at,
      createdAt: at,
      domains: ["*"],
    });
    const agent = (id: string, domainId: string, nodeId: string) =>
      fx.store.insertAgent({
        id,
        domainId,
        nodeId,
        name: id,
        runtime: "shell",
        capabilities: [],
        state: "idle",
        lastSeenAt: at,
        createdAt: at,
        supervised: false,
      });
    await agent("agt_a1", "dom_a", "nod_1");
    await agent("agt_a2", "dom_a", "nod_1");
    await agent("agt_b1", "dom_b", "nod_1");
    await agent("agt_a3", "dom_a", "nod_2");
  });
  afterEach(async () => {
    if (!skip) await fx.cleanup();
  });

  test("set, list (no values), grant to an agent, resolve; the value is only in the resolve answer", async () => {
    const svc = createSecretService(deps, keys);
    const set = await svc.setSecret(ADMIN, { name: "DB_PASSWORD", domainId: "", value: VALUE } as never);
    expect(set.secret?.version).toBe(1);
    const again = await svc.setSecret(ADMIN, { name: "DB_PASSWORD", domainId: "", value: VALUE + "2" } as never);
    expect(again.secret?.version).toBe(2);
    await svc.setSecret(ADMIN, { name: "DB_PASSWORD", domainId: "", value: VALUE } as never);
    const granted = await svc.grantSecret(ADMIN, { name: "DB_PASSWORD", agentId: "agt_a1", domainId: "" } as never);
    expect(granted.secret?.grantedAgents).toEqual(["agt_a1"]);
    const list = await svc.listSecrets(ADMIN, {} as never);
    expect(list.secrets.map((s) => [s.name, s.version, s.grantedAgents])).toEqual([["DB_PASSWORD", 3, ["agt_a1"]]]);
    expect(JSON.stringify(list, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(VALUE);
    expect((await svc.resolveSecret(NODE1, { name: "DB_PASSWORD", agentId: "agt_a1" } as never)).value).toBe(VALUE);

    const row = await fx.store.getSecret("DB_PASSWORD");
    expect(row!.keyId).toBe(k1.id);
    expect(JSON.stringify(row)).not.toContain(VALUE);
    const events = await fx.store.listEvents({ limit: 100 });
    expect(events.map((e) => e.name)).toEqual([
      "secret.created",
      "secret.updated",
      "secret.updated",
      "secret.granted",
      "secret.resolved",
    ]);
    expect(JSON.stringify(events)).not.toContain(VALUE);
    expect(fx.dbBytes().includes(Buffer.from(VALUE))).toBe(false);
  });

  test("resolve: only for an agent on the calling node, only when granted to it or its domain", async () => {
    const svc = createSecretService(deps, keys);
    await svc.setSecret(ADMIN, { name: "API", domainId: "", value: VALUE } as never);
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_a1" } as never))).toBe("forbidden");
    await svc.grantSecret(ADMIN, { name: "API", agentId: "", domainId: "dom_a" } as never);
    expect((await svc.resolveSecret(NODE1, { name: "API", agentId: "agt_a2" } as never)).value).toBe(VALUE);
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_b1" } as never))).toBe("forbidden");
    // agt_a3 is in dom_a but runs on nod_2: nod_1 may not ask for it, nod_2 may
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_a3" } as never))).toBe("forbidden");
    expect((await svc.resolveSecret(NODE2, { name: "API", agentId: "agt_a3" } as never)).value).toBe(VALUE);
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_nope" } as never))).toBe("forbidden");
    expect(await code(svc.resolveSecret(NODE1, { name: "NOPE", agentId: "agt_a1" } as never))).toBe("secret_not_found");
    // revoke: the next resolve fails
    await svc.revokeSecret(ADMIN, { name: "API", agentId: "", domainId: "dom_a" } as never);
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_a2" } as never))).toBe("forbidden");
    expect(await code(svc.revokeSecret(ADMIN, { name: "API", agentId: "", domainId: "dom_a" } as never))).toBe(
      "not_found",
    );
    // delete takes the grants with it
    await svc.grantSecret(ADMIN, { name: "API", agentId: "agt_a1", domainId: "" } as never);
    await svc.deleteSecret(ADMIN, { name: "API" } as never);
    expect(await fx.store.listSecretGrants()).toEqual([]);
    expect(await code(svc.resolveSecret(NODE1, { name: "API", agentId: "agt_a1" } as never))).toBe("secret_not_found");
    expect(await code(svc.deleteSecret(ADMIN, { name: "API" } as never))).toBe("secret_not_found");
  });

  test("roles and bad input: clear errors naming the field", async () => {
    const svc = createSecretService(deps, keys);
    expect(await code(svc.setSecret(OPERATOR, { name: "X", domainId: "", value: VALUE } as never))).toBe("forbidden");
    expect(await code(svc.listSecrets(OPERATOR, {} as never))).toBe("forbidden");
    expect(await code(svc.resolveSecret(ADMIN, { name: "X", agentId: "agt_a1" } as never))).toBe("forbidden");
    expect(await code(svc.setSecret(ADMIN, { name: "bad name!", domainId: "", value: VALUE } as never))).toBe(
      "invalid_argument",
    );
    expect(await code(svc.setSecret(ADMIN, { name: "X", domainId: "", value: "" } as never))).toBe("invalid_argument");
    expect(await code(svc.setSecret(ADMIN, { name: "X", domainId: "", value: "v".repeat(70_000) } as never))).toBe(
      "invalid_argument",
    );
    expect(await code(svc.setSecret(ADMIN, { name: "X", domainId: "dom_zz", value: VALUE } as never))).toBe(
      "domain_not_found",
    );
    await svc.setSecret(ADMIN, { name: "SCOPED", domainId: "dom_a", value: VALUE } as never);
    expect(await code(svc.setSecret(ADMIN, { name: "SCOPED", domainId: "dom_b", value: VALUE } as never))).toBe(
      "conflict",
    );
    expect(await code(svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "agt_b1", domainId: "" } as never))).toBe(
      "conflict",
    );
    expect(await code(svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "", domainId: "dom_b" } as never))).toBe(
      "conflict",
    );
    expect(await code(svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "agt_a1", domainId: "dom_a" } as never))).toBe(
      "invalid_argument",
    );
    expect(await code(svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "", domainId: "" } as never))).toBe(
      "invalid_argument",
    );
    expect(await code(svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "agt_zz", domainId: "" } as never))).toBe(
      "agent_not_found",
    );
    // granting twice is fine
    await svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "agt_a1", domainId: "" } as never);
    const g = await svc.grantSecret(ADMIN, { name: "SCOPED", agentId: "agt_a1", domainId: "" } as never);
    expect(g.secret?.grantedAgents).toEqual(["agt_a1"]);
    expect(g.secret?.domainId).toBe("dom_a");
  });

  test(
    "without a key: storing is refused with a clear " + "error; stored values are unreadable until a key comes",
    async () => {
      ring = undefined;
      const svc = createSecretService(deps, keys);
      const err = await svc
        .setSecret(ADMIN, { name: "X", domainId: "", value: VALUE } as never)
        .catch((e: EpError) => e);
      expect((err as EpError).code).toBe("config_invalid");
      expect((err as EpError).message).toContain("EP_SECRET_KEY");
      expect(await fx.store.listSecrets()).toEqual([]);
    },
  );

  test(
    "rotation: start with the new key and the old one as previous → " +
      "every value re-encrypted, still readable, old key no longer needed",
    async () => {
      const svc = createSecretService(deps, keys);
      for (const n of ["A", "B", "C"]) {
        await svc.setSecret(ADMIN, { name: n, domainId: "", value: `${VALUE}-${n}` } as never);
        await svc.grantSecret(ADMIN, { name: n, agentId: "agt_a1", domainId: "" } as never);
      }
      // new key only: the old values cannot be read, and a restart says so without touching them
      ring = createKeyring(k2);
      expect(await code(svc.resolveSecret(NODE1, { name: "A", agentId: "agt_a1" } as never))).toBe("config_invalid");
      expect(await svc.reencrypt()).toEqual({ reencrypted: 0, unreadable: ["A", "B", "C"] });
      // new key + previous: re-encrypted at start
      ring = createKeyring(k2, [k1]);
      expect(await svc.reencrypt()).toEqual({ reencrypted: 3, unreadable: [] });
      expect((await fx.store.listSecrets()).map((r) => [r.keyId, r.version])).toEqual([
        [k2.id, 1],
        [k2.id, 1],
        [k2.id, 1],
      ]);
      expect(await svc.reencrypt()).toEqual({ reencrypted: 0, unreadable: [] });
      ring = createKeyring(k2);
      expect((await svc.resolveSecret(NODE1, { name: "B", agentId: "agt_a1" } as never)).value).toBe(`${VALUE}-B`);
    },
  );

  test("a tampered ciphertext in the database is an integrity error, never a wrong value", async () => {
    const svc = createSecretService(deps, keys);
    await svc.setSecret(ADMIN, { name: "T", domainId: "", value: VALUE } as never);
    await svc.grantSecret(ADMIN, { name: "T", agentId: "agt_a1", domainId: "" } as never);
    const row = (await fx.store.getSecret("T"))!;
    const b = Buffer.from(row.ciphertext, "base64");
    b[3] ^= 0x20;
    expect(
      await fx.store.updateSecretCipher(
        "T",
        { keyId: row.keyId, version: row.version },
        { ...row, ciphertext: b.toString("base64") },
      ),
    ).toBe(true);
    expect(await code(svc.resolveSecret(NODE1, { name: "T", agentId: "agt_a1" } as never))).toBe("internal");
    // the conditional update only applies to the expected key and version
    expect(await fx.store.updateSecretCipher("T", { keyId: "k0", version: row.version }, row)).toBe(false);
  });
});
