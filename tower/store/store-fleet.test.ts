// The store suite (nodes and agents, node state reports, auth material), on both dialects: see
// test-support/store-suite.ts.
import { describe, expect } from "vitest";
import type { AgentRow } from "./store.js";
import { expectEpError, iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test, domain } = s;

  describe("nodes and agents", () => {
    test("nodes round-trip, list and update", async () => {
      const node = {
        id: "nod_1",
        hostname: "h1",
        status: "online",
        lastSeenAt: "",
        createdAt: iso(T0),
        domains: ["*"],
      };
      await s.store.insertNode(node);
      await s.store.insertNode({ ...node, id: "nod_0", createdAt: iso(T0 + 1) });
      expect(await s.store.getNode("nod_1")).toEqual(node);
      expect(await s.store.getNode("nod_x")).toBeUndefined();
      expect((await s.store.listNodes()).map((x) => x.id)).toEqual(["nod_1", "nod_0"]);
      expect(await s.store.updateNode("nod_1", { status: "offline", lastSeenAt: iso(T0 + 5) })).toEqual({
        ...node,
        status: "offline",
        lastSeenAt: iso(T0 + 5),
      });
      expect(await s.store.updateNode("nod_x", { status: "offline" })).toBeUndefined();
      // the domains a node serves: "*" or a list, both ways
      expect((await s.store.updateNode("nod_1", { domains: ["dom_a", "dom_b"] }))!.domains).toEqual(["dom_a", "dom_b"]);
      expect((await s.store.getNode("nod_1"))!.domains).toEqual(["dom_a", "dom_b"]);
      expect((await s.store.updateNode("nod_1", { domains: ["*"] }))!.domains).toEqual(["*"]);
      await expect(s.store.insertNode(node)).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("agents round-trip, filter by domain and node, and update", async () => {
      const d1 = await domain();
      const d2 = await domain();
      const agent: AgentRow = {
        id: "agt_1",
        domainId: d1,
        nodeId: "nod_1",
        name: "a",
        runtime: "shell",
        capabilities: ["gpu"],
        state: "idle",
        lastSeenAt: "",
        createdAt: iso(T0),
        supervised: true,
      };
      await s.store.insertAgent(agent);
      await s.store.insertAgent({ ...agent, id: "agt_2", nodeId: "nod_2", createdAt: iso(T0 + 1) });
      await s.store.insertAgent({ ...agent, id: "agt_3", domainId: d2, createdAt: iso(T0 + 2) });
      expect(await s.store.getAgent("agt_1")).toEqual(agent);
      expect(await s.store.getAgent("agt_x")).toBeUndefined();
      expect((await s.store.listAgents({})).map((a) => a.id)).toEqual(["agt_1", "agt_2", "agt_3"]);
      expect((await s.store.listAgents({ domainId: d1 })).map((a) => a.id)).toEqual(["agt_1", "agt_2"]);
      expect((await s.store.listAgents({ nodeId: "nod_1" })).map((a) => a.id)).toEqual(["agt_1", "agt_3"]);
      expect((await s.store.listAgents({ domainId: d1, nodeId: "nod_1" })).map((a) => a.id)).toEqual(["agt_1"]);
      expect(await s.store.nodeAgentDomains("nod_1")).toEqual([d1, d2].sort());
      expect(await s.store.nodeAgentDomains("nod_2")).toEqual([d1]);
      expect(await s.store.nodeAgentDomains("nod_x")).toEqual([]);
      const u = await s.store.updateAgent("agt_1", {
        state: "busy",
        capabilities: ["gpu", "arm"],
        runtime: "vendorB",
        name: "b",
        lastSeenAt: iso(T0 + 3),
      });
      expect(u).toEqual({
        ...agent,
        state: "busy",
        capabilities: ["gpu", "arm"],
        runtime: "vendorB",
        name: "b",
        lastSeenAt: iso(T0 + 3),
      });
      expect(await s.store.updateAgent("agt_x", { state: "busy" })).toBeUndefined();
      expect((await s.store.updateAgent("agt_1", { supervised: false }))!.supervised).toBe(false);
      expect((await s.store.getAgent("agt_2"))!.supervised).toBe(true);
      // a state move applies only from the state named
      expect(await s.store.moveAgentState("agt_2", "busy", "idle", iso(T0 + 4))).toBeUndefined();
      expect((await s.store.getAgent("agt_2"))!.state).toBe(agent.state);
      const moved = await s.store.moveAgentState("agt_1", "busy", "idle", iso(T0 + 5));
      expect(moved).toMatchObject({ id: "agt_1", state: "idle", lastSeenAt: iso(T0 + 5), domainId: d1 });
      expect(await s.store.moveAgentState("agt_x", "idle", "busy", iso(T0 + 6))).toBeUndefined();
      await expect(s.store.insertAgent({ ...agent, id: "agt_9", domainId: "dom_missing" })).rejects.toSatisfy(
        expectEpError("not_found"),
      );
    });
  });

  describe("node state reports", () => {
    test("the latest report per node replaces the previous one, lists by node id, and needs the node", async () => {
      await s.store.insertNode({
        id: "nod_b",
        hostname: "hb",
        status: "online",
        lastSeenAt: "",
        createdAt: iso(T0),
        domains: ["dom_a", "dom_b"],
      });
      await s.store.insertNode({
        id: "nod_a",
        hostname: "ha",
        status: "online",
        lastSeenAt: "",
        createdAt: iso(T0),
        domains: ["dom_a", "dom_b"],
      });
      expect(await s.store.listNodeStates()).toEqual([]);
      const first = {
        nodeId: "nod_b",
        cronJobs: [
          { name: "standup", schedule: "0 9 * * 1-5", next_fire_at: iso(T0 + 60_000), last_fire: { status: "ok" } },
        ],
        supervised: [],
        configErrors: [],
        reportedAt: iso(T0),
      };
      await s.store.putNodeState(first);
      const second = {
        ...first,
        cronJobs: [],
        supervised: [{ profile: "pm", restarts: 2, paused: true }],
        configErrors: [{ file: "cron.toml", line: 3, message: "bad" }],
        reportedAt: iso(T0 + 5),
      };
      await s.store.putNodeState(second);
      await s.store.putNodeState({ ...first, nodeId: "nod_a" });
      expect(await s.store.listNodeStates()).toEqual([{ ...first, nodeId: "nod_a" }, second]);
      expect(await s.store.listNodeStates("nod_b")).toEqual([second]);
      expect(await s.store.listNodeStates("nod_x")).toEqual([]);
      await expect(s.store.putNodeState({ ...first, nodeId: "nod_missing" })).rejects.toSatisfy(
        expectEpError("not_found"),
      );
      // inside a transaction too (the tower writes it in one)
      await s.store.transaction(async (tx) => tx.putNodeState({ ...second, reportedAt: iso(T0 + 9) }));
      expect((await s.store.listNodeStates("nod_b"))[0]?.reportedAt).toBe(iso(T0 + 9));
    });
  });

  describe("auth material", () => {
    test("tokens round-trip, are found by hash, and are revoked or touched", async () => {
      const tok = {
        id: "tok_1",
        name: "ci",
        role: "operator",
        domainId: "",
        hash: "h1",
        expiresAt: "",
        createdAt: iso(T0),
        revokedAt: "",
        lastUsedAt: "",
      };
      await s.store.insertToken(tok);
      await s.store.insertToken({ ...tok, id: "tok_0", hash: "h0", createdAt: iso(T0 + 1) });
      expect(await s.store.getToken("tok_1")).toEqual(tok);
      expect(await s.store.getTokenByHash("h0")).toMatchObject({ id: "tok_0" });
      expect(await s.store.getTokenByHash("nope")).toBeUndefined();
      expect((await s.store.listTokens()).map((t) => t.id)).toEqual(["tok_1", "tok_0"]);
      expect(await s.store.updateToken("tok_1", { lastUsedAt: iso(T0 + 5) })).toEqual({
        ...tok,
        lastUsedAt: iso(T0 + 5),
      });
      expect(await s.store.updateToken("tok_1", { revokedAt: iso(T0 + 6) })).toEqual({
        ...tok,
        lastUsedAt: iso(T0 + 5),
        revokedAt: iso(T0 + 6),
      });
      expect(await s.store.updateToken("tok_x", { revokedAt: iso(T0) })).toBeUndefined();
      await expect(s.store.insertToken({ ...tok, id: "tok_2" })).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("signing keys are listed oldest first and retired", async () => {
      const key = {
        kid: "k1",
        alg: "EdDSA",
        privateJwk: '{"d":"x"}',
        publicJwk: '{"x":"y"}',
        createdAt: iso(T0),
        retiredAt: "",
      };
      await s.store.insertSigningKey(key);
      await s.store.insertSigningKey({ ...key, kid: "k0", createdAt: iso(T0 + 1) });
      await s.store.retireSigningKey("k1", iso(T0 + 2));
      await s.store.retireSigningKey("k_missing", iso(T0 + 2));
      expect(await s.store.listSigningKeys()).toEqual([
        { ...key, retiredAt: iso(T0 + 2) },
        { ...key, kid: "k0", createdAt: iso(T0 + 1) },
      ]);
    });

    test("a ticket is consumed once, and never after it expires", async () => {
      const ticket = {
        hash: "t1",
        purpose: "console",
        subject: "tok_1",
        role: "admin",
        agentId: "",
        expiresMs: T0 + 60_000,
        scope: '{"via":"token","tokenId":"tok_1"}',
      };
      await s.store.insertTicket(ticket);
      await s.store.insertTicket({ ...ticket, hash: "t2" });
      // found without being consumed (console sessions), until it is consumed or expires
      expect(await s.store.findTicket("t1", T0)).toEqual(ticket);
      expect(await s.store.findTicket("t1", T0 + 60_000)).toBeUndefined();
      expect(await s.store.consumeTicket("t1", T0)).toEqual(ticket);
      expect(await s.store.findTicket("t1", T0)).toBeUndefined();
      expect(await s.store.consumeTicket("t1", T0)).toBeUndefined();
      expect(await s.store.consumeTicket("t2", T0 + 60_000)).toBeUndefined();
      expect(await s.store.consumeTicket("missing", T0)).toBeUndefined();
      await expect(s.store.insertTicket(ticket)).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("concurrent consumers of one ticket: exactly one gets it", async () => {
      await s.store.insertTicket({
        hash: "t1",
        purpose: "attach",
        subject: "s",
        role: "operator",
        agentId: "agt_1",
        expiresMs: T0 + 60_000,
        scope: "{}",
      });
      const other = await s.fx.openAnother({ max: 5 });
      const got = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? other : s.store).consumeTicket("t1", T0)),
      );
      expect(got.filter(Boolean)).toHaveLength(1);
    });
  });
});
