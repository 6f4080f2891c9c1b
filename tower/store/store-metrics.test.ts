// The store suite's part for /metrics (metrics-store.ts), on both dialects: the scrape-time
// counts of live tasks by domain and state, agents, nodes, domains and pending approvals.
import { describe, expect } from "vitest";
import { iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test, domain, mission, setup, claimant } = s;

  describe("metric counts", () => {
    test("an empty store counts nothing", async () => {
      expect(await s.store.metricCounts()).toEqual({
        tasks: [],
        agents: [],
        nodes: [],
        domains: [],
        approvalsPending: 0,
      });
    });

    test(
      "counts queued claimable tasks and held tasks by domain " + "and state; finished and Kanban tasks are not read",
      async () => {
        const { d, add } = await setup();
        const other = await domain("other");
        const om = await mission(other);
        for (let i = 0; i < 3; i++) await add();
        await add({ status: "succeeded" });
        await add({ kind: "assigned", status: "todo" });
        await s.store.insertTask(s.task(other, om));
        await s.store.claimTask(claimant(d), T0 + 1000, 30_000);
        const running = await s.store.claimTask({ ...claimant(d), start: true, leaseId: "ls_2" }, T0 + 1000, 30_000);
        expect(running?.status).toBe("running");
        const c = await s.store.metricCounts();
        const byKey = Object.fromEntries(c.tasks.map((t) => [`${t.domainId} ${t.status}`, t.count]));
        expect(byKey).toEqual({ [`${d} queued`]: 1, [`${d} claimed`]: 1, [`${d} running`]: 1, [`${other} queued`]: 1 });
        expect(c.domains.map((x) => x.id).sort()).toEqual([d, other].sort());
        expect(c.domains.find((x) => x.id === other)?.name).toBe("other");
      },
    );

    test("counts agents by state, nodes by status and pending approvals", async () => {
      const d = await domain();
      const node = { hostname: "h", lastSeenAt: iso(T0), createdAt: iso(T0), domains: ["*"] };
      await s.store.insertNode({ ...node, id: "nod_1", status: "online" });
      await s.store.insertNode({ ...node, id: "nod_2", status: "offline" });
      await s.store.insertNode({ ...node, id: "nod_3", status: "offline" });
      const agent = {
        domainId: d,
        nodeId: "nod_1",
        name: "a",
        runtime: "shell",
        capabilities: [],
        lastSeenAt: iso(T0),
        createdAt: iso(T0),
        supervised: false,
      };
      await s.store.insertAgent({ ...agent, id: "agt_1", state: "idle" });
      await s.store.insertAgent({ ...agent, id: "agt_2", state: "busy" });
      await s.store.insertAgent({ ...agent, id: "agt_3", state: "idle" });
      const approval = {
        kind: "permission" as const,
        domainId: d,
        missionId: "",
        taskId: "",
        agentId: "agt_1",
        nodeId: "nod_1",
        tool: "Bash",
        title: "run",
        arguments: {},
        paths: [],
        options: [],
        optionId: "",
        decidedBy: "",
        decidedAt: "",
        reason: "",
        createdAt: iso(T0),
        expiresAt: iso(T0 + 60_000),
      };
      await s.store.insertApproval({ ...approval, id: "apr_1", status: "pending" });
      await s.store.insertApproval({ ...approval, id: "apr_2", status: "pending" });
      await s.store.insertApproval({ ...approval, id: "apr_3", status: "approved" });
      const c = await s.store.metricCounts();
      const sorted = <T extends { count: number }>(rows: T[], key: (r: T) => string) =>
        Object.fromEntries(rows.map((r) => [key(r), r.count]));
      expect(sorted(c.agents, (a) => a.state)).toEqual({ idle: 2, busy: 1 });
      expect(sorted(c.nodes, (n) => n.status)).toEqual({ online: 1, offline: 2 });
      expect(c.approvalsPending).toBe(2);
    });
  });
});
