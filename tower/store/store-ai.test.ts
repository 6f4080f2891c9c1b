// The store suite (AI sessions, actions, docs and artifacts, secrets, migrations), on both dialects: see
// test-support/store-suite.ts.
import { describe, expect } from "vitest";
import { expectEpError, iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test, fixture, domain, setup } = s;

  describe("AI sessions, actions, docs and artifacts", () => {
    test("sessions and turns round-trip; sessions list newest first per owner", async () => {
      const session = {
        id: "ses_1",
        owner: "tok_a",
        title: "t",
        status: "active",
        createdAt: iso(T0),
        updatedAt: iso(T0),
      };
      await s.store.insertAiSession(session);
      await s.store.insertAiSession({ ...session, id: "ses_2", createdAt: iso(T0 + 1) });
      await s.store.insertAiSession({ ...session, id: "ses_3", owner: "tok_b" });
      expect(await s.store.getAiSession("ses_1")).toEqual(session);
      expect(await s.store.getAiSession("ses_x")).toBeUndefined();
      expect((await s.store.listAiSessions("tok_a")).map((x) => x.id)).toEqual(["ses_2", "ses_1"]);
      expect(await s.store.updateAiSession("ses_1", { status: "closed", updatedAt: iso(T0 + 5) })).toEqual({
        ...session,
        status: "closed",
        updatedAt: iso(T0 + 5),
      });
      expect(await s.store.updateAiSession("ses_x", { status: "closed" })).toBeUndefined();
      await expect(s.store.insertAiSession(session)).rejects.toSatisfy(expectEpError("already_exists"));
      const turn = {
        id: "trn_1",
        sessionId: "ses_1",
        seq: 1,
        role: "user" as const,
        content: "hi",
        toolCalls: [{ name: "x" }],
        viewSpecs: [],
        error: "",
        createdAt: iso(T0),
      };
      await s.store.insertAiTurn({ ...turn, id: "trn_2", seq: 2, role: "assistant" });
      await s.store.insertAiTurn(turn);
      expect(await s.store.listAiTurns("ses_1")).toEqual([turn, { ...turn, id: "trn_2", seq: 2, role: "assistant" }]);
    });

    test("a pending action is decided once and its outcome recorded once", async () => {
      await s.store.insertAiSession({
        id: "ses_1",
        owner: "tok_a",
        title: "",
        status: "active",
        createdAt: iso(T0),
        updatedAt: iso(T0),
      });
      const action = {
        id: "act_1",
        sessionId: "ses_1",
        turnId: "trn_1",
        tool: "submit_mesh_task",
        arguments: { title: "x" },
        summary: "submit",
        status: "pending" as const,
        result: null,
        error: "",
        decidedBy: "",
        decidedAt: "",
        executedAt: "",
        createdAt: iso(T0),
      };
      await s.store.insertAiAction(action);
      await s.store.insertAiAction({ ...action, id: "act_2", createdAt: iso(T0 + 1) });
      expect(await s.store.getAiAction("act_1")).toEqual(action);
      expect((await s.store.listAiActions({ owner: "tok_a", status: "pending" })).map((a) => a.id)).toEqual([
        "act_1",
        "act_2",
      ]);
      expect(await s.store.listAiActions({ owner: "tok_b" })).toEqual([]);
      const decisions = await Promise.all(
        (["approved", "rejected", "approved"] as const).map((status, i) =>
          s.store.decideAiAction("act_1", { status, decidedBy: `u${i}`, decidedAt: iso(T0 + 2) }),
        ),
      );
      expect(decisions.filter(Boolean)).toHaveLength(1);
      const decided = decisions.find(Boolean)!;
      if (decided.status === "approved") {
        expect(
          await s.store.recordAiActionOutcome("act_1", { result: { ok: true }, error: "", executedAt: iso(T0 + 3) }),
        ).toMatchObject({ result: { ok: true } });
      }
      expect(
        await s.store.recordAiActionOutcome("act_1", { result: { ok: false }, error: "", executedAt: iso(T0 + 4) }),
      ).toBeUndefined();
      expect((await s.store.listAiActions({ sessionId: "ses_1", status: "pending" })).map((a) => a.id)).toEqual([
        "act_2",
      ]);
      // approved with no outcome, decided before a time: what the interrupted-action sweep takes
      // act_1 has its outcome (or was rejected)
      expect(await s.store.listAiActions({ unexecutedBefore: iso(T0 + 10) })).toEqual([]);
      await s.store.decideAiAction("act_2", { status: "approved", decidedBy: "u", decidedAt: iso(T0 + 5) });
      expect((await s.store.listAiActions({ unexecutedBefore: iso(T0 + 10) })).map((a) => a.id)).toEqual(["act_2"]);
      expect(await s.store.listAiActions({ unexecutedBefore: iso(T0 + 5) })).toEqual([]);
    });

    test("docs and artifacts are upserted with a version and listed by name", async () => {
      const { d, m, add } = await setup();
      const t = await add();
      const doc = {
        id: "doc_1",
        domainId: d,
        missionId: m,
        name: "plan.md",
        content: "v1",
        contentType: "text/markdown",
        version: 1,
        createdAt: iso(T0),
        updatedAt: iso(T0),
      };
      expect(await s.store.putDoc(doc)).toEqual(doc);
      expect(await s.store.putDoc({ ...doc, id: "doc_ignored", content: "v2", updatedAt: iso(T0 + 1) })).toEqual({
        ...doc,
        content: "v2",
        version: 2,
        updatedAt: iso(T0 + 1),
      });
      await s.store.putDoc({ ...doc, id: "doc_2", name: "a.md" });
      expect((await s.store.listDocs(m)).map((x) => x.name)).toEqual(["a.md", "plan.md"]);
      expect((await s.store.getDoc(m, "plan.md"))?.content).toBe("v2");
      expect(await s.store.getDoc(m, "none.md")).toBeUndefined();
      const art = { ...doc, id: "art_1", taskId: t.id, name: "out.txt", contentType: "text/plain" };
      expect(await s.store.putArtifact(art)).toEqual(art);
      expect((await s.store.putArtifact({ ...art, id: "art_x", content: "v2" })).version).toBe(2);
      expect((await s.store.listArtifacts(t.id)).map((x) => [x.id, x.version])).toEqual([["art_1", 2]]);
    });
  });

  describe("secrets", () => {
    const secret = {
      name: "GH_TOKEN",
      domainId: "",
      ciphertext: "c1",
      iv: "i1",
      tag: "t1",
      keyId: "k1",
      version: 1,
      createdAt: iso(T0),
      updatedAt: iso(T0),
    };

    test("secrets are upserted with a version, listed by name and deleted with their grants", async () => {
      expect(await s.store.putSecret(secret)).toEqual(secret);
      expect(
        await s.store.putSecret({ ...secret, ciphertext: "c2", updatedAt: iso(T0 + 1), createdAt: iso(T0 + 1) }),
      ).toEqual({
        ...secret,
        ciphertext: "c2",
        version: 2,
        updatedAt: iso(T0 + 1),
      });
      await s.store.putSecret({ ...secret, name: "AWS_KEY" });
      expect((await s.store.listSecrets()).map((x) => x.name)).toEqual(["AWS_KEY", "GH_TOKEN"]);
      await s.store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "agt_1", domainId: "", createdAt: iso(T0) });
      await s.store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "agt_1", domainId: "", createdAt: iso(T0) });
      await s.store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "", domainId: "dom_1", createdAt: iso(T0) });
      await s.store.insertSecretGrant({ secretName: "AWS_KEY", agentId: "agt_2", domainId: "", createdAt: iso(T0) });
      expect((await s.store.listSecretGrants("GH_TOKEN")).map((g) => [g.agentId, g.domainId])).toEqual([
        ["", "dom_1"],
        ["agt_1", ""],
      ]);
      expect((await s.store.listSecretGrants()).map((g) => g.secretName)).toEqual(["AWS_KEY", "GH_TOKEN", "GH_TOKEN"]);
      expect(await s.store.deleteSecretGrant("GH_TOKEN", { agentId: "", domainId: "dom_1" })).toBe(true);
      expect(await s.store.deleteSecretGrant("GH_TOKEN", { agentId: "", domainId: "dom_1" })).toBe(false);
      expect(await s.store.deleteSecret("GH_TOKEN")).toBe(true);
      expect(await s.store.deleteSecret("GH_TOKEN")).toBe(false);
      expect(await s.store.getSecret("GH_TOKEN")).toBeUndefined();
      expect((await s.store.listSecretGrants()).map((g) => g.secretName)).toEqual(["AWS_KEY"]);
    });

    test("re-encryption applies only to the expected key and version", async () => {
      await s.store.putSecret(secret);
      const cipher = { ciphertext: "c9", iv: "i9", tag: "t9", keyId: "k2" };
      expect(await s.store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 2 }, cipher)).toBe(false);
      expect(await s.store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 1 }, cipher)).toBe(true);
      expect(await s.store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 1 }, cipher)).toBe(false);
      expect(await s.store.getSecret("GH_TOKEN")).toEqual({ ...secret, ...cipher });
    });
  });

  describe("migrations", () => {
    test("migrate() is idempotent and keeps data", async () => {
      const d = await domain("keep");
      await s.store.migrate();
      await s.store.migrate();
      expect((await s.store.getDomain(d))?.name).toBe("keep");
      const again = await s.fx.openAnother();
      expect((await again.getDomainByName("keep"))?.id).toBe(d);
    });

    test("several instances migrating one fresh database at once all succeed", async () => {
      const fresh = await fixture();
      try {
        const more = await Promise.all([
          fresh.openAnother({ migrate: false }),
          fresh.openAnother({ migrate: false }),
          fresh.openAnother({ migrate: false }),
        ]);
        await Promise.all(more.map((s) => s.migrate()));
        await more[0].insertDomain({ id: "dom_1", name: "n", createdAt: iso(T0) });
        expect((await more[2].listDomains()).map((x) => x.id)).toEqual(["dom_1"]);
      } finally {
        await fresh.cleanup();
      }
    });
  });
});
