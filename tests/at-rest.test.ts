// Issue 14, point 6: the tower's files are private and its node-token signing key is encrypted.
// The database file and its -wal/-shm are 0600 even under a permissive umask in a shared folder;
// signing_keys.private_jwk is sealed under the secret-store key (no private "d" parameter in the
// database's bytes), a key stored in clear by an older tower is sealed at the next start, and a
// secret-key rotation (EP_SECRET_KEY_PREVIOUS) re-seals it while node tokens keep verifying.
import { chmodSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { keyIdOf, parseSecretKey } from "../tower/domain/secrets/crypto.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

const homes: { cleanup(): void }[] = [];
afterAll(() => homes.forEach((h) => h.cleanup()));

function dbBytes(path: string): string {
  return [path, `${path}-wal`]
    .map((f) => {
      try {
        return readFileSync(f).toString("latin1");
      } catch {
        return "";
      }
    })
    .join("");
}

async function withTower<T>(home: string, env: Record<string, string>, fn: (t: TestTower) => Promise<T>): Promise<T> {
  const t = await startTower({ home, env });
  try {
    return await fn(t);
  } finally {
    await t.close();
  }
}

describe("files and keys at rest", () => {
  it("creates the database 0600 with its -wal and -shm, even in a shared folder under umask 022", async () => {
    const h = tempHome("ep-at-rest-");
    homes.push(h);
    const shared = join(h.dir, "shared");
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    const db = join(shared, "ep.db");
    const old = process.umask(0o022);
    try {
      await withTower(h.dir, { EP_DATABASE_URL: `sqlite:${db}`, EP_SECRET_KEY: "k-one" }, async (t) => {
        await t.client(NodeService).registerNode({ hostname: "at-rest" });
        for (const f of [db, `${db}-wal`, `${db}-shm`])
          expect({ f, mode: (statSync(f).mode & 0o777).toString(8) }).toEqual({ f, mode: "600" });
      });
    } finally {
      process.umask(old);
    }
  });

  it("narrows an existing world-readable database at start", async () => {
    const h = tempHome("ep-at-rest-");
    homes.push(h);
    const db = join(h.dir, "tower", "ep.db");
    await withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async () => undefined);
    chmodSync(db, 0o644);
    await withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async () => {
      expect((statSync(db).mode & 0o777).toString(8)).toBe("600");
    });
  });

  it(
    "seals the signing key under the secret-store key; a clear " +
      "one is sealed at the next start; rotation re-seals it",
    async () => {
      const h = tempHome("ep-at-rest-");
      homes.push(h);
      const db = join(h.dir, "tower", "ep.db");
      const token = await withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async (t) => {
        const reg = await t.client(NodeService).registerNode({ hostname: "sealed" });
        const [row] = await t.tower.deps.store.listSigningKeys();
        expect(row.privateJwk.startsWith("sealed:v1:")).toBe(true);
        expect(row.privateJwk).not.toContain('"d"');
        return reg.token;
      });
      expect(dbBytes(db)).not.toMatch(/"d":"/);

      // rotation of the secret-store key: the old one in EP_SECRET_KEY_PREVIOUS
      await withTower(h.dir, { EP_SECRET_KEY: "k-two", EP_SECRET_KEY_PREVIOUS: "k-one" }, async (t) => {
        // the node token signed before still verifies (its key was unsealed with the previous key)
        const nodes = t.client(NodeService, token);
        await expect(nodes.getNode({ nodeId: "nod_missing" })).rejects.toThrow(/does not exist|not found/);
        const [row] = await t.tower.deps.store.listSigningKeys();
        const cipher = JSON.parse(row.privateJwk.slice("sealed:v1:".length));
        expect(cipher.keyId).toBe(keyIdOf(parseSecretKey("k-two", "test").key));
      });
      // and the old key alone no longer opens it
      await expect(
        withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async (t) =>
          t.client(NodeService, token).getNode({ nodeId: "x" }),
        ),
      ).rejects.toThrow();
      expect(dbBytes(db)).not.toMatch(/"d":"/);
    },
  );

  it("seals a signing key that an older tower stored in clear", async () => {
    const h = tempHome("ep-at-rest-");
    homes.push(h);
    const db = join(h.dir, "tower", "ep.db");
    const { generateKeyPair, exportJWK } = await import("jose");
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
    const clear = JSON.stringify(await exportJWK(privateKey));
    await withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async (t) => {
      await t.tower.deps.store.insertSigningKey({
        kid: "key_legacy",
        alg: "ES256",
        privateJwk: clear,
        publicJwk: JSON.stringify({ ...(await exportJWK(publicKey)), kid: "key_legacy", alg: "ES256", use: "sig" }),
        createdAt: new Date().toISOString(),
        retiredAt: "",
      });
    });
    await withTower(h.dir, { EP_SECRET_KEY: "k-one" }, async (t) => {
      await t.client(NodeService).registerNode({ hostname: "legacy" }); // loads the key set
      const legacy = (await t.tower.deps.store.listSigningKeys()).find((k) => k.kid === "key_legacy")!;
      expect(legacy.privateJwk.startsWith("sealed:v1:")).toBe(true);
    });
    // the private scalar is nowhere in the file or its WAL (no copy left in a free page either)
    expect(dbBytes(db)).not.toContain((JSON.parse(clear) as { d: string }).d);
  });
});
