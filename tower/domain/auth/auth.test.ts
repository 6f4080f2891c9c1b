// The verified-credential cache in auth: revocation on this replica counts at once, a change
// made behind its back (another replica) within AUTH_CACHE_MS, expiry on every request, and
// node tokens reuse their node's caller until an event changes it.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../test-support/fake-clock.js";
import { EpError } from "../../../common/errors.js";
import { silentLogger } from "../../../common/log.js";
import { SqliteStore } from "../../store/sqlite/sqlite-store.js";
import { AUTH_CACHE_MS, createAuth, type Auth } from "./auth.js";
import { INTERNAL_CALLER } from "../caller.js";
import { DEFAULT_LIMITS } from "../deps.js";
import { createEventHub } from "../event-hub.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");
let store: SqliteStore;
let clock: FakeClock;
let auth: Auth;
let hub: ReturnType<typeof createEventHub>;
let eventId = 0;
/** What the hub carries after a commit (here or on another replica): one matrix event. */
const announce = (name: string, payload: Record<string, unknown>) =>
  hub.publish([
    {
      id: ++eventId,
      type: "matrix",
      name,
      domainId: "",
      missionId: "",
      agentId: "",
      taskId: "",
      sessionId: "",
      status: "",
      payload,
      createdAt: new Date(T0).toISOString(),
    },
  ]);

const code = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (err: unknown) => (err instanceof EpError ? err.code : String(err)),
  );

beforeEach(async () => {
  store = SqliteStore.open({ path: ":memory:" });
  await store.migrate();
  clock = new FakeClock(T0);
  hub = createEventHub();
  auth = createAuth(
    { store, clock, hub, log: silentLogger, limits: DEFAULT_LIMITS },
    { issuer: "http://tower.test", keyRotationMs: 86_400_000 },
  );
});
afterEach(() => store.close());

describe("verified-credential cache", () => {
  it("a token revoked on this replica is refused on the very next request", async () => {
    const { token, secret } = await auth.createToken(INTERNAL_CALLER, { name: "ci", role: "operator" });
    expect((await auth.authenticate(secret)).tokenId).toBe(token.id);
    expect((await auth.authenticate(secret)).tokenId).toBe(token.id); // now served from the cache
    await auth.revokeToken(INTERNAL_CALLER, token.id);
    expect(await code(auth.authenticate(secret))).toBe("token_revoked");
  });

  it("a revoke written by another replica counts within AUTH_CACHE_MS", async () => {
    const { token, secret } = await auth.createToken(INTERNAL_CALLER, { name: "ci", role: "operator" });
    await auth.authenticate(secret);
    await store.updateToken(token.id, { revokedAt: new Date(T0).toISOString() }); // behind this replica's back
    expect(await code(auth.authenticate(secret))).toBe("ok");
    clock.advance(AUTH_CACHE_MS);
    expect(await code(auth.authenticate(secret))).toBe("token_revoked");
  });

  it("expiry is checked on every request, cached or not", async () => {
    const { secret } = await auth.createToken(INTERNAL_CALLER, { name: "short", role: "viewer", ttlSeconds: 1 });
    await auth.authenticate(secret);
    clock.advance(999);
    expect(await code(auth.authenticate(secret))).toBe("ok");
    clock.advance(1);
    expect(await code(auth.authenticate(secret))).toBe("token_expired");
  });

  it(
    "a node token reuses its signature check and its node's domains; " +
      "an enrolment or a domains change counts as its event arrives",
    async () => {
      const ts = new Date(T0).toISOString();
      await store.insertNode({
        id: "nod_1",
        hostname: "h",
        status: "offline",
        lastSeenAt: ts,
        createdAt: ts,
        domains: ["*"],
      });
      await store.insertDomain({ id: "dom_1", name: "d", createdAt: ts });
      await store.insertDomain({ id: "dom_2", name: "e", createdAt: ts });
      const jwt = await auth.signNodeToken("nod_1", "h");
      expect((await auth.authenticate(jwt)).nodeDomains).toEqual([]);
      const agent = {
        id: "agt_1",
        domainId: "dom_1",
        nodeId: "nod_1",
        name: "",
        runtime: "shell",
        capabilities: [],
        state: "idle",
        lastSeenAt: ts,
        createdAt: ts,
        supervised: false,
      };
      // written behind this replica's back with no event yet: seen within AUTH_CACHE_MS
      await store.insertAgent(agent);
      expect((await auth.authenticate(jwt)).nodeDomains).toEqual([]);
      clock.advance(AUTH_CACHE_MS);
      expect((await auth.authenticate(jwt)).nodeDomains).toEqual(["dom_1"]);
      // the enrolment's event (this replica's commit, or another's relayed) drops the entry at once
      await store.insertAgent({ ...agent, id: "agt_2", domainId: "dom_2" });
      announce("agent.enrolled", { agent_id: "agt_2", node_id: "nod_1" });
      expect((await auth.authenticate(jwt)).nodeDomains).toEqual(["dom_1", "dom_2"]);
      // so does `ep node domains set`
      await store.updateNode("nod_1", { domains: ["dom_2"] });
      expect((await auth.authenticate(jwt)).nodeServes).toEqual(["*"]);
      announce("node.domains_set", { node_id: "nod_1", from: ["*"], to: ["dom_2"] });
      expect((await auth.authenticate(jwt)).nodeServes).toEqual(["dom_2"]);
      // another node's event leaves this one's entry alone; a forged signature is never "cached"
      await store.updateNode("nod_1", { domains: ["*"] });
      announce("node.domains_set", { node_id: "nod_2", from: [], to: [] });
      expect((await auth.authenticate(jwt)).nodeServes).toEqual(["dom_2"]);
      expect(await code(auth.authenticate(jwt.slice(0, -4) + "AAAA"))).toBe("unauthenticated");
    },
  );
});
